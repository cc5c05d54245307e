/**
 * The routine catalog: every routine the worker can run, registered by the `routine_name` stored in
 * `request_routine`. A routine is plain TypeScript, not a script file: its definition
 * carries its timeout, its retry policy, an optional validation of its input and two phases:
 *
 * - `prepare` (optional) does slow, read-only work (parsing a DICOM header, making thumbnails, asking the
 *   PAS) outside any transaction, on every engine: it holds no lock and no write transaction; the
 *   routine runs only if its row is still as claimed when the write transaction reads it again;
 * - `run` does the routine's writes through `ctx.trx`; they commit together with the routine's status and
 *   try count, or roll back entirely.
 */
import type { Kysely, Transaction } from 'kysely';
import type { Config } from '../../../config.ts';
import type { DialectAdapter } from '../../../db/dialect.ts';
import type { DB, Row } from '../../../db/schema.ts';
import type { SchemaProfile } from '../../../db/schema-profile.ts';
import type { AuditStamp, RequestContent } from '../../attachment-data/index.ts';

/** Thrown by a routine when retrying cannot help (bad input): the routine goes to FAILED at once. */
export class PermanentRoutineError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PermanentRoutineError';
  }
}

/** What `prepare` may use: reads only. */
export interface PrepareContext {
  /**
   * The database (its pool, outside any transaction: `prepare` runs before the write transaction opens).
   * Read with it; never write.
   */
  readonly db: Kysely<DB>;
  readonly routine: Row<'request_routine'>;
  readonly requestType: string;
  readonly config: Config;
  /** The engine's differences (reading a large binary value in slices, for one). */
  readonly dialect: DialectAdapter;
  now(): Date;
  /** Appends a line to the execution's `log_text` (never patient data). */
  log(line: string): void;
  /** The JSON object in the request's `text_data` row `mnemonic`, or `{}`. */
  readText(mnemonic: string): Promise<Record<string, unknown>>;
}

/** What `run` may use: the routine's transaction and the Java processor's chaining and locking primitives. */
export interface RoutineContext extends PrepareContext {
  readonly trx: Transaction<DB>;
  /** The engine's differences, for the writers that need them (`attachment-data`'s updates). */
  readonly dialect: DialectAdapter;
  /** What the schema has or needs (the own schema, or an OpenEyes database). */
  readonly schema: SchemaProfile;
  /** The audit stamp of this routine's writes: the system user 1, now. */
  stamp(): AuditStamp;
  /**
   * The JSON objects of several of the request's rows, in one read (`{}` for a missing one). `readText`
   * and `readTexts` read each row once per attempt and then answer what it holds after this attempt's own
   * `putText` and `mergeRequestData`: change the request's JSON rows only through those two.
   */
  readTexts(mnemonics: readonly string[]): Promise<Record<string, Record<string, unknown>>>;
  /** {@link readTexts} and the request's payload rows, in one read. */
  readRequest(mnemonics: readonly string[]): Promise<RequestContent>;
  /**
   * Reference rows that every run reads and that a copy up to `REFERENCE_CACHE_TTL_MS` old cannot make
   * wrong (the seeded event types, not the identifier types a match must see in full): `load` (with this
   * routine's transaction) once, then the value shared by the worker's routines. `key` names what `load`
   * reads.
   */
  reference<T>(key: string, load: (db: Kysely<DB>) => Promise<T>): Promise<T>;
  /**
   * Rows every routine of a batch reads alike, read by the batch's first routine that asks (in the batch's
   * transaction) and shared by the others of the batch only: never older than the batch, unlike
   * {@link reference}. A failed read is not kept.
   */
  batchReference<T>(key: string, load: (db: Kysely<DB>) => Promise<T>): Promise<T>;
  /** Writes `value` as JSON into the request's row `mnemonic` (created when missing). */
  putText(mnemonic: string, value: Record<string, unknown>): Promise<void>;
  /** Shallow-merges `patch` into `REQUEST_DATA` and shreds its scalar keys into `request_details`. */
  mergeRequestData(patch: Record<string, unknown>): Promise<void>;
  /**
   * Appends routine `name` to this request (NEW, sequence = the request's highest + 10, this queue), or
   * resets it (NEW, try count 0, next try null) when the request already has a routine of that name.
   * Throws at once for a name not in `routine_library`; the routine is written when the batch records
   * this attempt (with the other routines' chains, in one read and one insert), and only if it succeeds.
   */
  addRoutine(name: string): Promise<void>;
  /** {@link addRoutine} of each of `names` in turn. */
  addRoutines(names: readonly string[]): Promise<void>;
  /** Adds (or resets) routine `name` with sequence 1, so that it runs before every pending sibling. */
  addPriorityRoutine(name: string): Promise<void>;
  /**
   * Sets every NEW/RETRY sibling whose name differs from `current` (default: this routine) to VOID, the
   * routines this attempt chained so far included.
   */
  voidAllNewRoutines(current?: string): Promise<void>;
  /**
   * Serialises work on `key` (a patient, a study) across workers until this routine's transaction (its
   * batch) ends. May put the routine back for a later batch instead, by throwing an error that must
   * propagate (when the batch already holds another key, it does not wait: see run-context.ts).
   */
  lock(key: string): Promise<void>;
  /**
   * Gives the event loop a turn, then throws the engine's timeout error once the routine has run past
   * its `timeoutMs` (by the engine's clock). A routine that works through many rows calls it between
   * bounded chunks: on an engine whose driver runs on the main thread (SQLite's `node:sqlite`) nothing
   * else, the routine's timer included, runs until the routine awaits something that is not a query.
   */
  yieldTurn(): Promise<void>;
}

export interface RoutineDefinition<P = unknown> {
  readonly name: string;
  /** The routine fails (and is retried) when it takes longer than this. */
  readonly timeoutMs: number;
  /** `backoff`: failures are retried per the back-off table; `never`: the first failure is final. */
  readonly retry: 'backoff' | 'never';
  /** Checks the input; throw a {@link PermanentRoutineError} for input that can never succeed. */
  validate?(ctx: PrepareContext): Promise<void>;
  prepare?(ctx: PrepareContext): Promise<P>;
  run(ctx: RoutineContext, prepared: P): Promise<void>;
}

export interface RoutineCatalog {
  get(name: string): RoutineDefinition | undefined;
  readonly names: readonly string[];
}

/** A typed helper so that `prepare`'s result type flows into `run`. */
export function defineRoutine<P>(definition: RoutineDefinition<P>): RoutineDefinition {
  return definition;
}

/** A catalog of `routines`, by name; a later routine of the same name replaces an earlier one. */
export function createRoutineCatalog(routines: readonly RoutineDefinition[]): RoutineCatalog {
  const byName = new Map(routines.map((r) => [r.name, r]));
  return { get: (name) => byName.get(name), names: [...byName.keys()] };
}
