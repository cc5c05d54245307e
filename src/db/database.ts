/**
 * Opens the one database the service uses, SQLite (embedded, `node:sqlite`) or PostgreSQL (`pg`), behind
 * one Kysely instance so that query code is written once. Both dialects hand back the same JavaScript
 * shapes: date-times as `YYYY-MM-DD HH:MM:SS` strings, dates as `YYYY-MM-DD`, integers as numbers and
 * binary columns as Buffers.
 */
import type { FileHandle } from 'node:fs/promises';
import { open } from 'node:fs/promises';
import type { StatementSync } from 'node:sqlite';
import { DatabaseSync } from 'node:sqlite';
import { Kysely, PostgresDialect, sql } from 'kysely';
import type { IGenericSqlite } from 'kysely-generic-sqlite';
import { GenericSqliteDialect, parseBigInt } from 'kysely-generic-sqlite';
import pg from 'pg';
import type { DatabaseTarget } from '../config.ts';
import type { DB } from './schema.ts';
import { startSqliteCheckpointer } from './sqlite-checkpointer.ts';
import { createPrivateSqliteFile } from './sqlite-files.ts';
import type { WriteTransaction } from './write-transaction.ts';
import { createBatchedWriteTransaction, createPlainWriteTransaction } from './write-transaction.ts';

export type Dialect = 'sqlite' | 'postgres';

export interface Database {
  readonly db: Kysely<DB>;
  readonly dialect: Dialect;
  /** PostgreSQL pool, for LISTEN/NOTIFY and pool metrics; undefined on SQLite. */
  readonly pool: pg.Pool | undefined;
  /**
   * Runs a short write transaction that is durable when it resolves; on SQLite concurrent writes share
   * one commit (see write-transaction.ts). The function must use only `trx` (never `db`), must not
   * start another write transaction, and must not wait on anything but the database.
   */
  readonly writeTransaction: WriteTransaction;
  /** True when the database answers a trivial query. */
  isReachable(): Promise<boolean>;
  /** SQLite: completed fdatasync calls of the WAL that made commits durable (0 on PostgreSQL). */
  walFlushes(): number;
  /** SQLite: checkpoint rounds run by the checkpointer thread (0 on PostgreSQL). */
  checkpointRounds(): number;
  close(): Promise<void>;
}

// pg: keep timestamps and dates as the text PostgreSQL sends, so that both dialects agree, and read
// bigint/numeric counts as numbers (every id and count in this schema fits in 2^53).
const PG_TIMESTAMP = 1114;
const PG_TIMESTAMPTZ = 1184;
const PG_DATE = 1082;
const PG_INT8 = 20;
pg.types.setTypeParser(PG_TIMESTAMP, (v) => v.slice(0, 19));
pg.types.setTypeParser(PG_TIMESTAMPTZ, (v) => v);
pg.types.setTypeParser(PG_DATE, (v) => v);
pg.types.setTypeParser(PG_INT8, (v) => Number(v));

export interface OpenDatabaseOptions {
  /** PostgreSQL pool size. */
  readonly poolSize?: number;
}

/** Opens the database named by `target`. Does not migrate: call `migrateToLatest` next. */
export async function openDatabase(
  target: DatabaseTarget,
  options: OpenDatabaseOptions = {},
): Promise<Database> {
  return target.kind === 'sqlite'
    ? openSqlite(target.file)
    : openPostgres(target.url, options.poolSize ?? 10);
}

function openSqlite(file: string): Database {
  if (file !== ':memory:') createPrivateSqliteFile(file);
  const native = new DatabaseSync(file);
  // WAL lets readers run beside the writer; the busy timeout covers a CLI and a server sharing the file.
  const journal = native.prepare('PRAGMA journal_mode = WAL').get() as { journal_mode?: string } | undefined;
  const wal = journal?.journal_mode === 'wal' ? createWalFlusher(`${file}-wal`) : undefined;
  // Durability is that of `synchronous = FULL` (a commit is on disk before anyone hears of it, so a 200
  // sent after it survives a power loss), but its fsync is not SQLite's: with FULL, SQLite fsyncs the WAL
  // inside COMMIT, which blocks the event loop (about 1 ms here) and every request with it. In WAL mode
  // NORMAL does every sync of FULL except that one (checkpoints and WAL resets still sync), and the
  // executor below makes it up: a statement that leaves a committed change waits for an fdatasync of the
  // WAL file on libuv's thread pool before it returns. Without WAL (a file system that refuses it), FULL.
  native.exec(`PRAGMA synchronous = ${wal === undefined ? 'FULL' : 'NORMAL'}`);
  native.exec('PRAGMA foreign_keys = ON');
  native.exec('PRAGMA busy_timeout = 5000');
  // 16 MiB of page cache: the OS caches the file too, and server memory stays bounded. One connection
  // for reads and writes: a second connection for reads was tried and dropped, because every commit of
  // the other connection makes SQLite drop a connection's whole page cache (a search then cost ~110 us
  // instead of ~60 us under write load), which outweighed never waiting behind a batch transaction.
  native.exec('PRAGMA cache_size = -16384');
  native.exec('PRAGMA temp_store = MEMORY');
  // Checkpoints (copying the WAL into the database file, with fsyncs) on a thread of their own.
  const checkpointer = wal === undefined ? undefined : startSqliteCheckpointer(native, file);
  const prepare = createStatementCache(native);
  // Set by the batched write transaction for its own commit, which it flushes itself after releasing
  // the connection (write-transaction.ts): reads and the next batch then run during the fdatasync.
  let flushDeferredOnce = false;
  const executor: IGenericSqlite<DatabaseSync> = {
    db: native,
    query: (isSelect, sqlText, parameters) => {
      // Kysely opens transactions with a deferred `begin`; a transaction that reads and then writes can
      // then fail at once with "database is locked" when another process wrote in between (SQLite does
      // not wait on an upgrade). Every transaction here writes, so take the write lock up front.
      const query = /^begin$/i.test(sqlText) ? 'begin immediate' : sqlText;
      const { statement, returnsRows, columnNames } = prepare(query);
      const args = (parameters ?? []).map(toSqliteValue);
      if (returnsRows) {
        const rows = (statement.all(...args) as unknown as unknown[][]).map((values) =>
          rowFromValues(columnNames, values),
        );
        // `insert ... returning` in autocommit mode is a committed write too.
        return wal !== undefined && !isSelect && leavesCommittedChange(query, native.isTransaction)
          ? wal.flush().then(() => ({ rows }))
          : { rows };
      }
      // Taken before the statement runs, so that a failing commit cannot leave it set for another.
      const isFlushDeferred = flushDeferredOnce;
      flushDeferredOnce = false;
      const result = statement.run(...args);
      const answer = {
        rows: [],
        insertId: parseBigInt(result.lastInsertRowid),
        numAffectedRows: parseBigInt(result.changes),
      };
      return wal !== undefined && !isFlushDeferred && leavesCommittedChange(query, native.isTransaction)
        ? wal.flush().then(() => answer)
        : answer;
    },
    close: () => {
      native.close();
      void wal?.close();
    },
  };
  const db = new Kysely<DB>({ dialect: new GenericSqliteDialect(() => executor) });
  return {
    db,
    dialect: 'sqlite',
    pool: undefined,
    writeTransaction: createBatchedWriteTransaction(
      db,
      wal === undefined
        ? undefined
        : {
            deferFlushOfNextStatement: (isDeferred) => {
              flushDeferredOnce = isDeferred;
            },
            flush: () => wal.flush(),
          },
    ),
    walFlushes: () => wal?.flushes() ?? 0,
    checkpointRounds: () => checkpointer?.rounds() ?? 0,
    isReachable: async () => {
      try {
        await sql`select 1`.execute(db);
        return true;
      } catch {
        return false;
      }
    },
    close: async () => {
      await checkpointer?.close();
      await db.destroy();
    },
  };
}

interface PreparedStatement {
  readonly statement: StatementSync;
  /** Whether it returns rows; asking SQLite (`columns()`) on every run cost ~8 us. */
  readonly returnsRows: boolean;
  /** Names of the result columns, in order (each row comes as an array of their values). */
  readonly columnNames: readonly string[];
}

/**
 * `LIMIT ?` and `OFFSET ?` (as Kysely compiles `.limit()` and `.offset()`) become `cast(? as integer)`.
 * SQLite's planner reads a bound LIMIT or OFFSET value when it compiles a statement, and then marks the
 * statement to be compiled again whenever that parameter is bound again, which node:sqlite does on every
 * run: a patient search then cost ~90 us instead of ~11 us, almost all of it recompiling (measured on
 * SQLite 3.53.4; the cost grows with the statement, not with the data). Behind a cast the planner sees
 * an expression, not a value: the plan is the one compiled once, and the result is the same for the
 * whole numbers that the query code binds there.
 */
export function castBoundLimits(query: string): string {
  return query.replace(/\b(limit|offset) \?/gi, '$1 cast(? as integer)');
}

/** Prepared statements by SQL text, with what the executor needs to know of them; at most 500. */
function createStatementCache(native: DatabaseSync): (query: string) => PreparedStatement {
  const statements = new Map<string, PreparedStatement>();
  return (query) => {
    let prepared = statements.get(query);
    if (prepared === undefined) {
      const statement = native.prepare(castBoundLimits(query));
      const columnNames = statement.columns().map((column) => column.name);
      // Rows as arrays, made into plain objects once by the executor: node:sqlite's own row objects
      // (null-prototype) had to be copied into plain ones, and 40 rows of a search page cost ~80 us
      // that way against ~34 us now.
      if (columnNames.length > 0) statement.setReturnArrays(true);
      prepared = { statement, returnsRows: columnNames.length > 0, columnNames };
      statements.set(query, prepared);
      if (statements.size > 500) statements.delete(statements.keys().next().value!);
    }
    return prepared;
  };
}

/** Statements that never change the database (Kysely flags its own selects separately). */
const READ_ONLY_STATEMENT = /^\s*(?:select|pragma|explain|begin|rollback|savepoint)\b/i;

/**
 * True when `query` has just left a change committed: it ran outside a transaction (autocommit) or ended
 * one (`commit`, or `release` of an outermost savepoint), and it is not a read.
 */
function leavesCommittedChange(query: string, isInTransaction: boolean): boolean {
  return !isInTransaction && !READ_ONLY_STATEMENT.test(query);
}

interface WalFlusher {
  /** Resolves once everything written to the WAL so far is on stable storage. */
  flush(): Promise<void>;
  /** How many fdatasync calls have completed (a metric, and what tests observe). */
  flushes(): number;
  close(): Promise<void>;
}

/**
 * fdatasync of the WAL file, off the event loop. The file is opened once, on the first flush (the WAL
 * exists from the first write on, and SQLite deletes it only when its last connection closes, which is
 * ours). Flushes that arrive while one runs share the next one: a flush covers every write before it.
 */
function createWalFlusher(walFile: string): WalFlusher {
  let handle: Promise<FileHandle> | undefined;
  let running: Promise<void> | undefined;
  let next: Promise<void> | undefined;
  let completed = 0;

  const syncOnce = async (): Promise<void> => {
    handle ??= open(walFile, 'r');
    try {
      await (await handle).datasync();
      completed += 1;
    } catch (error) {
      // A failed sync proves nothing durable; reopen next time (the error reaches the caller).
      const failed = handle;
      handle = undefined;
      void failed.then((h) => h.close()).catch(() => {});
      throw error;
    }
  };

  const flush = (): Promise<void> => {
    if (running === undefined) {
      running = syncOnce().finally(() => {
        running = undefined;
      });
      return running;
    }
    // One sync is under way and may have started before this caller's write: wait for the next one.
    next ??= running
      .catch(() => {})
      .then(() => {
        next = undefined;
        return flush();
      });
    return next;
  };

  return {
    flush,
    flushes: () => completed,
    close: async () => {
      await running?.catch(() => {});
      await next?.catch(() => {});
      const h = handle;
      handle = undefined;
      await h?.then((fh) => fh.close()).catch(() => {});
    },
  };
}

type SqliteValue = null | number | bigint | string | Uint8Array;

function toSqliteValue(value: unknown): SqliteValue {
  if (value === undefined || value === null) return null;
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'string') return value;
  if (value instanceof Uint8Array) return value;
  if (value instanceof Date) return formatDateTime(value);
  return JSON.stringify(value);
}

/**
 * A plain object from one row's values, as pg hands rows back: BLOBs as Buffers (node:sqlite gives
 * Uint8Arrays; the Buffer shares their memory). A repeated column name keeps its last value, as pg does.
 */
function rowFromValues(names: readonly string[], values: readonly unknown[]): Record<string, unknown> {
  const row: Record<string, unknown> = {};
  for (let i = 0; i < names.length; i++) {
    const value = values[i];
    row[names[i]!] =
      value instanceof Uint8Array && !Buffer.isBuffer(value)
        ? Buffer.from(value.buffer, value.byteOffset, value.byteLength)
        : value;
  }
  return row;
}

function openPostgres(url: string, poolSize: number): Database {
  // A connect that gets no answer fails after 5 s (answered 503) instead of the OS's minutes-long timeout.
  const pool = new pg.Pool({
    connectionString: url,
    options: sessionOptions(url),
    max: poolSize,
    idleTimeoutMillis: 30_000,
    connectionTimeoutMillis: 5_000,
    keepAlive: true,
  });
  // An idle client that loses its server must not crash the process; the next query reconnects.
  pool.on('error', () => {});
  // Nor a checked-out one: pg-pool listens for errors only while a client is idle, and a client whose
  // socket dies emits 'error' even when a query of its own is failing with it (an unhandled 'error' event
  // would end the process). The query rejects (503), and the pool drops the client when it is released.
  pool.on('connect', (client) => client.on('error', () => {}));
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  return {
    db,
    dialect: 'postgres',
    pool,
    writeTransaction: createPlainWriteTransaction(db),
    walFlushes: () => 0,
    checkpointRounds: () => 0,
    isReachable: async () => {
      try {
        await sql`select 1`.execute(db);
        return true;
      } catch {
        return false;
      }
    },
    close: () => db.destroy(),
  };
}

/**
 * Settings of every PostgreSQL session, sent at connection start (no extra round trip, in force before the
 * first query), after any `options` the URL carries:
 * - `plan_cache_mode = force_generic_plan`: the only named (prepared) statements are patient search's. In
 *   the default `auto` mode PostgreSQL re-plans them on every execution (their custom plans look cheaper
 *   than the generic one) and planning costs more than executing; their generic plans use the same index
 *   ranges and lookups (bench/explain/postgres-*.txt).
 * - `idle_in_transaction_session_timeout`: a process whose machine dies leaves its session idle in
 *   transaction, holding its locks (a worker's claims), until TCP notices, which takes hours. The server
 *   ends such sessions after 10 minutes, rolling back and releasing them; that exceeds every routine's
 *   timeout (the longest, MAKE_THUMBNAILS, is 2 minutes) and every request's transaction, so no live process is cut off.
 */
export function sessionOptions(url: string): string {
  let fromUrl = '';
  try {
    fromUrl = new URL(url).searchParams.get('options') ?? '';
  } catch {
    // Not a URL pg would read options from either.
  }
  return `${fromUrl} -c plan_cache_mode=force_generic_plan -c idle_in_transaction_session_timeout=600000`.trim();
}

/** Formats a Date as the `YYYY-MM-DD HH:MM:SS` UTC text stored in every date-time column. */
export function formatDateTime(date: Date): string {
  return date.toISOString().slice(0, 19).replace('T', ' ');
}

/** The current time as stored in date-time columns. */
export function nowDateTime(): string {
  return formatDateTime(new Date());
}
