/**
 * The dialect adapter: every difference between the SQL engines the service runs on, in one object per
 * engine, handed to the modules as `Database.dialect`. Shaped like Kysely's own `DialectAdapter`
 * (capability flags plus the few operations whose SQL differs), so that module code asks what the engine
 * can do, never which engine it is, and a new engine is one adapter plus its files in `dialects/`.
 *
 * What lives here: how names are folded for case-insensitive prefix ranges, the leading number of an
 * identifier, text as bytes, row locks, upserts, a named row lock with a wait limit (or none), prepared
 * statements (in transactions too), commits that do not wait for the disk, reading a slice of a large
 * binary value, notifications between processes, error classification, sequences after explicit ids,
 * pool statistics and the column types of migrations.
 */
import type { DatabaseErrorKind } from '../errors.ts';
import type {
  ColumnDataType,
  CompiledQuery,
  Expression,
  InsertQueryBuilder,
  Kysely,
  OnConflictDatabase,
  OnConflictTables,
  QueryResult,
  RawBuilder,
  SelectQueryBuilder,
  SqlBool,
  UpdateObject,
} from 'kysely';

/** The engines. Used for logs, metrics and test names; never to branch in module code. */
export type DialectName = 'sqlite' | 'postgres' | 'mysql';

// Declared with the error vocabulary (src/errors.ts), which is below the database layer.
export type { DatabaseErrorKind };

/** Connections of a pool, for metrics; undefined for an embedded database. */
export interface PoolStats {
  readonly total: number;
  readonly idle: number;
  readonly waiting: number;
}

/** A row's slice of a binary column, read together with a version column of the same row. */
export interface BlobSliceRequest {
  readonly table: string;
  /** The integer primary key column and value. */
  readonly idColumn: string;
  readonly id: number;
  readonly column: string;
  /** 0-based. */
  readonly offset: number;
  /** At least 1. */
  readonly lengthBytes: number;
  /** A `YYYY-MM-DD HH:MM:SS` column read in the same statement, to detect writes between slices. */
  readonly versionColumn: string;
}

export interface BlobSlice {
  readonly version: string;
  /** Null when the value is null; shorter than asked when the value is. */
  readonly bytes: Buffer | null;
}

/** A `LISTEN`ing connection; closing it stops the messages. */
export interface Subscription {
  close(): Promise<void>;
}

export interface SubscribeOptions {
  /** Called with each message's payload. */
  onMessage(payload: string): void;
  /** Called after the connection was lost and is listening again (messages may have been missed). */
  onReconnect(): void;
  /** Called when the connection is lost (it reconnects by itself, backing off to 30 s). */
  onLost?(error: unknown): void;
}

/** A column of a bulk insert, with its portable type (PostgreSQL binds each column as one typed array). */
export interface BulkColumn {
  readonly name: string;
  readonly type: 'int4' | 'int8' | 'text' | 'date' | 'timestamp';
}

/** A column as the database catalog declares it. */
export interface CatalogColumn {
  readonly name: string;
  /** The declared type without its length, lower-case (`varchar`, `integer`, `timestamp`, ...). */
  readonly type: string;
  /** Declared `varchar(n)` length. */
  readonly length: number | undefined;
  readonly isNotNull: boolean;
  readonly hasDefault: boolean;
  /** An id the database assigns (auto-increment, serial, SQLite's rowid alias). */
  readonly isSerial: boolean;
}

/** A column type as Kysely's `addColumn` takes it: a name it knows, or raw SQL (`longblob`). */
export type ColumnType = ColumnDataType | Expression<unknown>;

/** Column types of the migrations' portable mapping of the OpenEyes MySQL types. */
export interface ColumnTypes {
  /** Auto-increment integer primary key: `serial`, or `integer` with `autoIncrement()`. */
  readonly id: 'serial' | 'integer';
  readonly dateTime: ColumnType;
  readonly date: ColumnType;
  readonly blob: ColumnType;
  /** Text without a length limit worth naming (MySQL's `text` holds only 64 KiB). */
  readonly text: ColumnType;
}

/** A Kysely instance or transaction of any schema (the adapter's operations name their tables). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyKysely = Kysely<any>;

// Query builders of any table: the adapter's operations are generic over the tables they touch.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnySelect = SelectQueryBuilder<any, any, any>;

export interface DialectAdapter {
  readonly name: DialectName;

  // --- capabilities -------------------------------------------------------------------------------
  /**
   * Several connections write at once. False for SQLite (one writer): writes of concurrent requests are
   * batched into shared transactions and the queue worker runs one slot.
   */
  readonly hasConcurrentWriters: boolean;
  /** `SELECT ... FOR UPDATE SKIP LOCKED` exists, so several workers can claim from one queue. */
  readonly hasRowLocks: boolean;
  /** `INSERT` inside `WITH` (one statement writes several tables). */
  readonly hasWritableCte: boolean;
  /** Notifications between processes (`notify` / `subscribe`). */
  readonly hasNotifications: boolean;
  /** `UPDATE ... FROM (VALUES ...)` (one statement updates many rows with different values). */
  readonly hasUpdateFromValues: boolean;
  /**
   * Inserting a row holds a shared lock on the rows its foreign keys name until the transaction ends, and
   * that lock blocks an update of those parent rows (InnoDB; PostgreSQL's key-share lock does not block
   * updates of non-key columns). An update of a parent row that many inserts name (a queue's counters)
   * then waits for every open insert, and the inserts that come meanwhile wait behind it.
   */
  readonly hasBlockingParentLocks: boolean;
  /** Binary fields up to this size are read with their metadata; larger ones in slices. */
  readonly maxInlineBlobBytes: number;
  /** Size of one slice of a large binary field. */
  readonly blobSliceBytes: number;

  // --- expressions ----------------------------------------------------------------------------------
  /**
   * `lower(column)` in the form whose order the name indexes follow, so that a prefix becomes an index
   * range (`>= prefix and < upper bound`): byte order on PostgreSQL (`collate "C"`).
   */
  nameKey(column: string): RawBuilder<string>;
  /** Lower-cases text as the database's `lower()` does (SQLite folds ASCII letters only). */
  foldCase(text: string): string;
  /**
   * The bound values that {@link namePrefixMatch} compares a {@link nameKey} with to find the names
   * starting with `prefix` (case-insensitively, as the engine folds case); `high` is undefined when the
   * engine needs no upper bound or none exists.
   */
  namePrefixBounds(prefix: string): { readonly low: string; readonly high: string | undefined };
  /** True when `key` (a {@link nameKey}) starts with the prefix of the bounds `low` / `high`. */
  namePrefixMatch(key: Expression<string>, low: unknown, high: unknown): RawBuilder<SqlBool>;
  /** A text column folded for case-insensitive equality with a value folded by {@link foldCase}. */
  foldedKey(column: string): RawBuilder<string>;
  /**
   * The ORDER BY direction that sorts NULL below every value (first ascending, last descending), as
   * MySQL does by default.
   */
  orderNullsLowest(isDescending: boolean): RawBuilder<unknown>;
  /** The leading decimal digits of a text column as a number (0 when it has none). */
  leadingNumber(column: string): RawBuilder<number>;
  /** A text column as its UTF-8 bytes. */
  textAsBytes(column: string): RawBuilder<Buffer | null>;
  /**
   * The later of `now` (a `YYYY-MM-DD HH:MM:SS` value) and one second after the date-time `column`: a
   * modification date that moves forward on every write, even two writes within one second.
   */
  nextModifiedDate(column: string, now: string): RawBuilder<string>;

  // --- statements -----------------------------------------------------------------------------------
  /**
   * Locks the selected rows (of the tables `of`, where the engine can name them) and skips rows other
   * transactions hold. Without row locks the query is returned as it is: the engine's single writer
   * serialises the transactions.
   */
  lockRowsSkipLocked<QB extends AnySelect>(query: QB, of?: readonly string[]): QB;
  /** Locks the selected rows, waiting for other holders. */
  lockRows<QB extends AnySelect>(query: QB): QB;
  /** Makes `insert` leave existing rows (same values of `conflictColumns`) alone. */
  insertOrIgnore<DB, TB extends keyof DB, O>(
    insert: InsertQueryBuilder<DB, TB, O>,
    conflictColumns: readonly string[],
  ): InsertQueryBuilder<DB, TB, O>;
  /**
   * Makes `insert` update an existing row instead (same values of `conflictColumns`). `update` names
   * each column's new value; {@link insertedValue} refers to the value the insert carried.
   */
  upsert<DB, TB extends keyof DB, O>(
    insert: InsertQueryBuilder<DB, TB, O>,
    conflictColumns: readonly string[],
    update: UpdateObject<OnConflictDatabase<DB, TB>, OnConflictTables<TB>, OnConflictTables<TB>>,
  ): InsertQueryBuilder<DB, TB, O>;
  /** In an upsert's update: the value of `column` that the insert carried. */
  insertedValue<T>(column: string): RawBuilder<T>;
  /** In an upsert's update: the current value of `column` of the existing row. */
  existingValue<T>(table: string, column: string): RawBuilder<T>;
  /**
   * Inserts the row `key` into `table` (its only column `column`) when missing and locks it until the
   * transaction ends. Fails when another transaction holds it for longer than `waitMs`.
   */
  lockNamedRow(
    trx: AnyKysely,
    target: { table: string; column: string; key: string },
    waitMs: number,
  ): Promise<void>;
  /**
   * Like {@link lockNamedRow}, but never waits: resolves false at once when another transaction holds
   * the row, true when `trx` holds it now (or held it already). A transaction that holds named rows
   * takes further ones with this, so that it never waits while holding one (no deadlocks between
   * transactions that take several keys). With row locks: `SELECT ... FOR UPDATE SKIP LOCKED` of the row;
   * none returned and the row exists means held elsewhere; a missing row is inserted first (committed on
   * its own, as `commitWithoutFlush` does) and then locked. Without row locks (one writer) it inserts the
   * row when missing and answers true.
   */
  tryLockNamedRow(trx: AnyKysely, target: { table: string; column: string; key: string }): Promise<boolean>;
  /**
   * Session locks on the integer `keys` of one key space (the queue engine's, by request id): held by
   * the session of `conn` (a Kysely bound to one connection, `db.connection()`) inside and outside its
   * transactions, a rollback included, until {@link unlockSessionKeys} or the end of the session: the
   * server releases them when the connection closes, so a process that dies leaves none behind. Never
   * waits: answers the keys this session holds now; the others are held by another session. Without row
   * locks (one writer, no other session to exclude) every key.
   */
  tryLockSessionKeys(conn: AnyKysely, keys: readonly number[]): Promise<Set<number>>;
  /** Releases the session locks of `keys` that the session of `conn` took. */
  unlockSessionKeys(conn: AnyKysely, keys: readonly number[]): Promise<void>;
  /** Runs a compiled single statement outside any transaction, prepared once per connection. */
  runPrepared<R>(query: CompiledQuery<R>): Promise<R[]>;
  /**
   * Runs a compiled statement on `db` (the database or a transaction, inside it), prepared once per
   * connection where the engine has named statements: parsed and planned once, so its plan must not
   * depend on the values bound (a generic plan on PostgreSQL). Answers what `executeQuery` answers. An
   * adapter without named statements runs `db.executeQuery(query)`.
   */
  runPreparedOn<R>(db: AnyKysely, query: CompiledQuery<R>): Promise<QueryResult<R>>;
  /**
   * Runs one write statement in a transaction of its own that commits without waiting for the disk: the
   * change survives this process crashing, not the database server or the machine (power loss) crashing;
   * a later durable commit makes it durable. For bookkeeping whose loss in such a crash is harmless or
   * lost together with what depends on it. The caller may hold a transaction open on another connection
   * meanwhile (never on the one this uses): with concurrent writers it runs on a connection of its own,
   * (PostgreSQL: a small pool whose sessions set `synchronous_commit = off`; an engine whose flush
   * setting is server-wide, as MySQL's, may run it as a plain autocommit statement on its pool: durable,
   * only slower). Use it for rows that no transaction of the caller locks, so that it never waits on one.
   */
  commitWithoutFlush(query: CompiledQuery): Promise<void>;
  /** A slice of a large binary value; undefined when the row does not exist. */
  readBlobSlice(request: BlobSliceRequest): Promise<BlobSlice | undefined>;
  /**
   * After rows were inserted with explicit ids: moves the table's id generator past the largest id, so
   * that later inserts do not collide (never backwards).
   */
  resetIdGenerator(trx: AnyKysely, table: string, idColumn: string): Promise<void>;
  /**
   * Inserts many rows (each an array of values in `columns` order) inside `trx`, in as few statements as
   * the engine allows.
   */
  bulkInsert(
    trx: AnyKysely,
    table: string,
    columns: readonly BulkColumn[],
    rows: readonly (readonly unknown[])[],
  ): Promise<void>;
  /** The columns of `table` as the catalog declares them, in table order (empty when no such table). */
  readColumns(table: string): Promise<CatalogColumn[]>;
  /** Refreshes the planner's statistics of `tables` after a bulk load. */
  analyzeTables(tables: readonly string[]): Promise<void>;
  /**
   * The largest statement the server takes, where it is a server setting smaller than a value may be
   * (MySQL's `max_allowed_packet`): its bytes and the setting's name; undefined where values are bounded
   * only by the engine's own limits (about 1 GB).
   */
  statementLimit(): Promise<{ bytes: number; setting: string } | undefined>;
  /** Lets the current transaction commit without waiting for the disk (bulk synthetic data only). */
  relaxCommitDurability(trx: AnyKysely): Promise<void>;

  // --- between processes ----------------------------------------------------------------------------
  /** Sends `payload` to the processes subscribed to `channel`; a no-op without notifications. */
  notify(channel: string, payload: string): Promise<void>;
  /** Subscribes to `channel` on a connection of its own; undefined when the engine has no notifications. */
  subscribe(channel: string, options: SubscribeOptions): Promise<Subscription> | undefined;

  // --- errors and state -----------------------------------------------------------------------------
  /** What `error` (or its cause) means; undefined for anything else. */
  classifyError(error: unknown): DatabaseErrorKind | undefined;
  /** Connections of the pool; undefined for an embedded database. */
  poolStats(): PoolStats | undefined;
  /** Connections the pool may open (1 for an embedded database). */
  readonly maxConnections: number;
  /** Column types for migrations. */
  readonly columnTypes: ColumnTypes;
}

/** Node socket error codes of a database server that is down or unreachable (every server dialect). */
export const SOCKET_UNREACHABLE_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);

/** Walks `error`, its `cause` and the errors of an AggregateError, depth-first, at most 5 levels deep. */
export function someError(error: unknown, test: (error: object) => boolean, depth = 0): boolean {
  if (typeof error !== 'object' || error === null || depth > 4) return false;
  if (test(error)) return true;
  const { cause, errors } = error as { cause?: unknown; errors?: unknown };
  if (Array.isArray(errors) && errors.some((e) => someError(e, test, depth + 1))) return true;
  return cause !== undefined && someError(cause, test, depth + 1);
}

/** A bound expression that Kysely keeps as it is. */
export type SqlExpression<T> = Expression<T>;

/** Room for the rest of the statement that carries the largest value (the other columns, the SQL). */
const STATEMENT_OVERHEAD_BYTES = 64 * 1024;

/** The largest upload that fits in one statement of the server's `limit` (0 when none does). */
export function largestWriteWithin(limit: { bytes: number }): number {
  return Math.max(0, limit.bytes - STATEMENT_OVERHEAD_BYTES);
}

/**
 * Why the server cannot store the largest upload in one statement (the dialect's `statementLimit`), or
 * undefined when it can. The upload would otherwise fail at run time, a 500 for a valid request.
 */
export function statementLimitProblem(
  limit: { bytes: number; setting: string },
  largestWriteBytes: number,
): string | undefined {
  const needed = largestWriteBytes + STATEMENT_OVERHEAD_BYTES;
  if (limit.bytes >= needed) return undefined;
  return `server ${limit.setting} is ${limit.bytes} bytes, too small for the ${largestWriteBytes}-byte uploads the service accepts (RAW_BODY_LIMIT_BYTES): raise it to at least ${needed}, or lower the limit`;
}
