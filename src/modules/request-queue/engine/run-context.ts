/**
 * The contexts a routine runs with: `PrepareContext` (reads only) and `RoutineContext` (its savepoint of
 * the batch's transaction, the request's JSON rows read once per attempt, chaining, and routine locks).
 *
 * Routine locks (`ctx.lock(key)`, a patient or a study) are held until the batch commits, so routines of
 * one patient in one batch share the key. The first key a batch takes may wait for another worker's
 * batch; a batch that holds a key never waits for another one: a key held elsewhere puts its routine
 * back untried (`deferred`, rolled back to its savepoint, its mark cleared) for a later batch, whose
 * first key then waits. No transaction waits while holding a key, so two batches never deadlock.
 */
import type { Kysely, Transaction } from 'kysely';
import { formatDateTime } from '../../../db/database.ts';
import type { DB } from '../../../db/schema.ts';
import type { RequestContent } from '../../attachment-data/index.ts';
import {
  readRequestContent,
  readRequestContents,
  readRequestText,
  writeRequestText,
} from '../../attachment-data/index.ts';
import type { AttemptEffects } from './attempts.ts';
import type { ClaimedRoutine } from './claim.queries.ts';
import { addRoutinesToRequests, checkRoutineNames, voidNewRoutines } from './claim.queries.ts';
import type { PrepareContext, RoutineContext, RoutineDefinition } from './routine-catalog.ts';
import { mirrorRequestDetailsMany } from './request-details.ts';
import type { EngineRuntime } from './runtime.ts';

/** The routine locks a batch holds (until it commits), and its reads of several requests at once. */
export interface BatchLocks {
  readonly keys: Set<string>;
  /** Each routine writes its chains and `request_details` rows itself (see `writingEachRoutineIds`). */
  isWritingEachRoutine?: boolean;
  /** Request content read ahead for the batch's routines (set once claimed); absent: each reads its own. */
  readAhead?: BatchReadAhead;
  /** What `ctx.batchReference` read for this batch, by key. */
  references?: Map<string, Promise<unknown>>;
}

/**
 * Reading several requests' content in one statement: a routine's first `readRequest` also reads, with
 * the same mnemonics, the requests of the batch's routines of the same name that have not started; each
 * of those takes its request's content at its own first `readRequest` (a batch has one routine per
 * request, and none writes another request's rows, so what was read ahead is what its own read would
 * find). A routine that asks for other mnemonics reads them itself.
 */
export interface BatchReadAhead {
  /** The routines the batch runs, in order. */
  readonly routines: readonly ClaimedRoutine[];
  /** Routines that have started (never read ahead). */
  readonly started: Set<number>;
  /** Content read ahead, by request id, with the mnemonics it has. */
  readonly contents: Map<number, { readonly mnemonics: readonly string[]; readonly content: RequestContent }>;
}

export function createReadAhead(routines: readonly ClaimedRoutine[]): BatchReadAhead {
  return { routines, started: new Set(), contents: new Map() };
}

/** The content of `routine`'s request, from the batch's read-ahead or read now together with others'. */
async function readContentAhead(
  rt: EngineRuntime,
  trx: Kysely<DB>,
  ahead: BatchReadAhead,
  routine: Pick<ClaimedRoutine, 'id' | 'request_id' | 'routine_name'>,
  mnemonics: readonly string[],
): Promise<RequestContent> {
  const own = ahead.contents.get(routine.request_id);
  ahead.contents.delete(routine.request_id);
  if (own !== undefined && mnemonics.every((m) => own.mnemonics.includes(m))) return own.content;
  const others = ahead.routines
    .filter(
      (r) =>
        r.routine_name === routine.routine_name &&
        r.request_id !== routine.request_id &&
        !ahead.started.has(r.id) &&
        !ahead.contents.has(r.request_id),
    )
    .map((r) => r.request_id);
  if (others.length === 0) return readRequestContent(trx, routine.request_id, mnemonics, rt.dialect);
  const read = await readRequestContents(trx, [routine.request_id, ...others], mnemonics, rt.dialect);
  for (const id of others) ahead.contents.set(id, { mnemonics: [...mnemonics], content: read.get(id)! });
  return read.get(routine.request_id)!;
}

/** What a run context records about its attempt. */
export interface AttemptScope {
  readonly startedAt: number;
  readonly effects: AttemptEffects;
  readonly locks: BatchLocks;
  /** The keys this attempt took: released with its savepoint when it fails. */
  readonly keys: string[];
  /** `ctx.yieldTurn`: a turn of the event loop, then the attempt's time limit checked. */
  readonly yieldTurn: () => Promise<void>;
}

/**
 * A batch that already holds a routine lock asked for a key another batch holds: the routine is put back
 * untried rather than wait (see the top of this file). Routines let it propagate.
 */
export class RoutineLockBusyError extends Error {
  constructor(key: string) {
    super(`Routine lock ${key} is held by another worker`);
    this.name = 'RoutineLockBusyError';
  }
}

/** The audit stamp of the worker's writes: the system user 1, at `now`. */
function stampOf(now: Date) {
  return { userId: 1, now: formatDateTime(now) };
}

export function createPrepareContext(
  rt: EngineRuntime,
  claimed: ClaimedRoutine,
  reader: Kysely<DB>,
  logLines: string[],
): PrepareContext {
  return {
    db: reader,
    routine: claimed,
    requestType: claimed.request_type,
    config: rt.config,
    dialect: rt.dialect,
    now: rt.now,
    log: (line) => logLines.push(line),
    readText: (mnemonic) => readRequestText(reader, claimed.request_id, mnemonic),
  };
}

export function createRunContext(
  rt: EngineRuntime,
  trx: Transaction<DB>,
  base: PrepareContext,
  definition: RoutineDefinition,
  attempt: AttemptScope,
): RoutineContext {
  const routine = base.routine;
  const { dialect, database } = rt;
  // Chained routines are written when the batch records its attempts, every successful attempt's in one
  // read and one insert (a failed attempt's are dropped with it); voidAllNewRoutines writes this
  // attempt's first, so that it sees them.
  const chain = async (names: readonly string[], sequence: 'append' | 'priority') => {
    if (names.length === 0) return;
    await checkRoutineNames(trx, names, rt.knownRoutineNames);
    attempt.effects.hasChained = true;
    attempt.effects.chains.push({
      requestId: routine.request_id,
      queue: routine.execute_request_queue,
      names: [...names],
      sequence,
    });
    if (attempt.locks.isWritingEachRoutine === true)
      await addRoutinesToRequests(trx, attempt.effects.chains.splice(0));
  };
  // The request's JSON rows this attempt read or wrote, so that each is read once: every change to
  // them goes through putText and mergeRequestData, which keep this up to date.
  const texts = new Map<string, Record<string, unknown>>();
  const cachedTexts = (mnemonics: readonly string[]) =>
    Object.fromEntries(mnemonics.map((m) => [m, structuredClone(texts.get(m)!)]));
  const readRequest = async (mnemonics: readonly string[]) => {
    const missing = mnemonics.filter((m) => !texts.has(m));
    const ahead = attempt.locks.readAhead;
    const content =
      ahead === undefined || texts.size > 0
        ? await readRequestContent(trx, routine.request_id, missing, dialect)
        : await readContentAhead(rt, trx, ahead, routine, missing);
    for (const mnemonic of missing) texts.set(mnemonic, content.texts[mnemonic] ?? {});
    return { texts: cachedTexts(mnemonics), payloads: content.payloads };
  };
  const readTexts = async (mnemonics: readonly string[]) =>
    mnemonics.every((m) => texts.has(m)) ? cachedTexts(mnemonics) : (await readRequest(mnemonics)).texts;
  // REQUEST_DATA is written when the batch records this attempt, with the others' (only this attempt
  // reads it until then, through `texts`); other rows, or every row when the batch writes each
  // routine's own, at once.
  // The copy kept is never changed in place (`texts` hands out copies), so the batch can write it as is.
  const putText = async (mnemonic: string, value: Record<string, unknown>) => {
    const kept = structuredClone(value);
    if (mnemonic === 'REQUEST_DATA' && attempt.locks.isWritingEachRoutine !== true) {
      attempt.effects.requestData = { value: kept, stamp: stampOf(base.now()) };
    } else {
      await writeRequestText(trx, dialect, routine.request_id, mnemonic, value, stampOf(base.now()));
    }
    texts.set(mnemonic, kept);
  };
  return {
    ...base,
    db: trx,
    trx,
    dialect,
    schema: database.schema,
    stamp: () => stampOf(base.now()),
    readText: async (mnemonic) => (await readTexts([mnemonic]))[mnemonic]!,
    readTexts,
    readRequest,
    reference: (key, load) => rt.references.get(key, () => load(trx)),
    batchReference: <T>(key: string, load: (db: Kysely<DB>) => Promise<T>): Promise<T> => {
      const shared = (attempt.locks.references ??= new Map<string, Promise<unknown>>());
      const found = shared.get(key);
      if (found !== undefined) return found as Promise<T>;
      const value = load(trx);
      shared.set(key, value);
      value.catch(() => shared.delete(key));
      return value;
    },
    putText,
    mergeRequestData: async (patch) => {
      const current = (await readTexts(['REQUEST_DATA'])).REQUEST_DATA!;
      await putText('REQUEST_DATA', { ...current, ...patch });
      // Shredded into request_details when the batch records this attempt, with the others' patches.
      const details = { requestId: routine.request_id, patch, stamp: stampOf(base.now()) };
      if (attempt.locks.isWritingEachRoutine === true)
        await mirrorRequestDetailsMany(trx, database, [details]);
      else attempt.effects.details.push(details);
    },
    addRoutine: (name) => chain([name], 'append'),
    addRoutines: (names) => chain(names, 'append'),
    addPriorityRoutine: (name) => chain([name], 'priority'),
    voidAllNewRoutines: async (current) => {
      await addRoutinesToRequests(trx, attempt.effects.chains.splice(0));
      await voidNewRoutines(trx, routine.request_id, current ?? routine.routine_name);
    },
    lock: (key) => lockRoutineKey(rt, trx, definition, attempt, key),
    yieldTurn: attempt.yieldTurn,
  };
}

/** `ctx.lock(key)`: the batch's first key waits; a later one held elsewhere defers the routine. */
async function lockRoutineKey(
  rt: EngineRuntime,
  trx: Transaction<DB>,
  definition: RoutineDefinition,
  attempt: AttemptScope,
  key: string,
): Promise<void> {
  const { locks } = attempt;
  if (locks.keys.has(key)) return;
  const target = { table: 'request_routine_lock', column: 'routine_lock', key };
  if (locks.keys.size === 0) {
    await rt.dialect.lockNamedRow(trx, target, definition.timeoutMs - (Date.now() - attempt.startedAt));
  } else if (!(await rt.dialect.tryLockNamedRow(trx, target))) {
    throw new RoutineLockBusyError(key);
  }
  locks.keys.add(key);
  attempt.keys.push(key);
}
