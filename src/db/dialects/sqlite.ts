/**
 * SQLite through `node:sqlite`: the embedded default. One connection serves reads and writes; commits are
 * made durable by an fdatasync of the WAL off the event loop; checkpoints run on a thread of their own.
 */
import type { FileHandle } from 'node:fs/promises';
import { open } from 'node:fs/promises';
import type { StatementSync } from 'node:sqlite';
import { DatabaseSync } from 'node:sqlite';
import type { CompiledQuery, Kysely, LogConfig } from 'kysely';
import { Kysely as KyselyClass, SelectQueryNode, sql } from 'kysely';
import type { IGenericSqlite } from 'kysely-generic-sqlite';
import { GenericSqliteDialect, parseBigInt } from 'kysely-generic-sqlite';
import { registerDatabaseErrorClassifier } from '../../errors.ts';
import type { AnyKysely, DialectAdapter, DatabaseErrorKind } from '../dialect.ts';
import { someError } from '../dialect.ts';
import type { DB } from '../schema.ts';
import { createMultiRowInsert } from './multi-row-insert.ts';
import { onConflict } from './on-conflict.ts';
import { prefixRangeMatch, prefixUpperBound } from './prefix-range.ts';
import { createPrivateSqliteFile } from '../sqlite-files.ts';
import { startSqliteCheckpointer } from './sqlite-checkpointer.ts';
import {
  beginImmediately,
  NO_FLUSH_MARK,
  leavesCommittedChange,
  releaseLargeBindings,
  toSqliteValue,
} from './sqlite-statements.ts';
import type { SqliteDurability } from '../write-transaction.ts';

const MiB = 1024 * 1024;

/** An opened SQLite database: the Kysely instance, its adapter, and the durability hooks of its writes. */
export interface SqliteConnection {
  readonly db: Kysely<DB>;
  readonly adapter: DialectAdapter;
  /** How batched write transactions make their commit durable; undefined without WAL (FULL sync). */
  readonly durability: SqliteDurability | undefined;
  walFlushes(): number;
  checkpointRounds(): number;
  /** Has the checkpointer's thread running (another connection is about to commit to this file). */
  wakeCheckpointer(): void;
  close(): Promise<void>;
}

export function openSqlite(file: string, log?: LogConfig): SqliteConnection {
  if (file !== ':memory:') createPrivateSqliteFile(file);
  const native = new DatabaseSync(file);
  // WAL lets readers run beside the writer; the busy timeout covers a CLI and a server sharing the file.
  const journal = native.prepare('PRAGMA journal_mode = WAL').get() as { journal_mode?: string } | undefined;
  const wal = journal?.journal_mode === 'wal' ? createWalFlusher(`${file}-wal`) : undefined;
  // Durability is that of `synchronous = FULL` (a commit is on disk before anyone hears of it, so a 200
  // sent after it survives a power loss), but its fsync is not SQLite's: with FULL, SQLite fsyncs the WAL
  // inside COMMIT, which blocks the event loop and every request with it. In WAL mode NORMAL does every
  // sync of FULL except that one (checkpoints and WAL resets still sync), and the executor below makes it
  // up: a statement that leaves a committed change waits for an fdatasync of the WAL file on libuv's
  // thread pool before it returns. Without WAL (a file system that refuses it), FULL.
  native.exec(`PRAGMA synchronous = ${wal === undefined ? 'FULL' : 'NORMAL'}`);
  native.exec('PRAGMA foreign_keys = ON');
  native.exec('PRAGMA busy_timeout = 5000');
  // 16 MiB of page cache: the OS caches the file too, and server memory stays bounded. One connection
  // for reads and writes: every commit of another connection makes SQLite drop a connection's whole page
  // cache, which costs a reader more than waiting behind the writer's short batch transactions.
  native.exec('PRAGMA cache_size = -16384');
  native.exec('PRAGMA temp_store = MEMORY');
  // Checkpoints (copying the WAL into the database file, with fsyncs) on a thread of their own.
  const checkpointer = wal === undefined ? undefined : startSqliteCheckpointer(native, file);
  /** After a committed write: make it durable, and have the checkpointer's thread running. */
  const flushWal = (log: WalFlusher) => {
    checkpointer?.wake();
    return log.flush();
  };
  const prepare = createStatementCache(native);
  // Set by the batched write transaction for its own commit, which it flushes itself after releasing
  // the connection (write-transaction.ts): reads and the next batch then run during the fdatasync.
  let flushDeferredOnce = false;
  const executor: IGenericSqlite<DatabaseSync> = {
    db: native,
    query: (isSelect, sqlText, parameters) => {
      const query = beginImmediately(sqlText);
      const { statement, returnsRows, columnNames } = prepare(query);
      const args = (parameters ?? []).map(toSqliteValue);
      if (returnsRows) {
        let values: unknown[][];
        try {
          values = statement.all(...args) as unknown as unknown[][];
        } finally {
          releaseLargeBindings(statement, args);
        }
        const rows = values.map((values) => rowFromValues(columnNames, values));
        // `insert ... returning` in autocommit mode is a committed write too.
        return wal !== undefined && !isSelect && leavesCommittedChange(query, native.isTransaction)
          ? flushWal(wal).then(() => ({ rows }))
          : { rows };
      }
      // Taken before the statement runs, so that a failing commit cannot leave it set for another.
      const isFlushDeferred = flushDeferredOnce;
      flushDeferredOnce = false;
      let result;
      try {
        result = statement.run(...args);
      } finally {
        releaseLargeBindings(statement, args);
      }
      const answer = {
        rows: [],
        insertId: parseBigInt(result.lastInsertRowid),
        numAffectedRows: parseBigInt(result.changes),
      };
      return wal !== undefined && !isFlushDeferred && leavesCommittedChange(query, native.isTransaction)
        ? flushWal(wal).then(() => answer)
        : answer;
    },
    close: () => {
      native.close();
      void wal?.close();
    },
  };
  const db = new KyselyClass<DB>({ dialect: new GenericSqliteDialect(() => executor), log });
  return {
    db,
    adapter: createSqliteAdapter(db, executor),
    durability:
      wal === undefined
        ? undefined
        : {
            deferFlushOfNextStatement: (isDeferred) => {
              flushDeferredOnce = isDeferred;
            },
            flush: () => flushWal(wal),
          },
    walFlushes: () => wal?.flushes() ?? 0,
    checkpointRounds: () => checkpointer?.rounds() ?? 0,
    wakeCheckpointer: () => checkpointer?.wake(),
    close: async () => {
      await checkpointer?.close();
      await db.destroy();
    },
  };
}

const SQLITE_BUSY = 5;
const SQLITE_CONSTRAINT = 19;
// Extended result codes of SQLITE_CONSTRAINT.
const SQLITE_CONSTRAINT_FOREIGNKEY = 787;
const SQLITE_CONSTRAINT_NOTNULL = 1299;
const SQLITE_CONSTRAINT_PRIMARYKEY = 1555;
const SQLITE_CONSTRAINT_UNIQUE = 2067;

/** Classifies a node:sqlite error by its extended result code. */
export function classifySqliteError(error: unknown): DatabaseErrorKind | undefined {
  let kind: DatabaseErrorKind | undefined;
  someError(error, (e) => {
    const { code, errcode } = e as { code?: unknown; errcode?: unknown };
    if (code !== 'ERR_SQLITE_ERROR' || typeof errcode !== 'number') return false;
    // The primary result code is the low byte of the extended one.
    if ((errcode & 0xff) === SQLITE_BUSY) kind = 'unavailable';
    else if (errcode === SQLITE_CONSTRAINT_FOREIGNKEY) kind = 'foreign_key';
    else if (errcode === SQLITE_CONSTRAINT_NOTNULL) kind = 'not_null';
    else if (errcode === SQLITE_CONSTRAINT_UNIQUE || errcode === SQLITE_CONSTRAINT_PRIMARYKEY)
      kind = 'unique';
    else if ((errcode & 0xff) === SQLITE_CONSTRAINT) kind = undefined;
    return kind !== undefined;
  });
  return kind;
}

// isDatabaseUnavailable (src/errors.ts) asks the classifiers of the adapters loaded in the process.
registerDatabaseErrorClassifier(classifySqliteError);

// SQLite's built-in lower() folds ASCII letters only (a documented limit: non-ASCII names are
// case-sensitive on SQLite).
const foldCase = (text: string): string => text.replace(/[A-Z]+/g, (s) => s.toLowerCase());

function createSqliteAdapter(db: Kysely<DB>, executor: IGenericSqlite<DatabaseSync>): DialectAdapter {
  return {
    name: 'sqlite',
    hasConcurrentWriters: false,
    hasRowLocks: false,
    hasWritableCte: false,
    hasNotifications: false,
    hasUpdateFromValues: false,
    hasBlockingParentLocks: false,
    // `substr` reads the whole value inside SQLite anyway (freed at once, one statement at a time), so
    // slices are large, to read a big value fewer times.
    maxInlineBlobBytes: 4 * MiB,
    blobSliceBytes: 4 * MiB,
    nameKey: (column) => sql<string>`lower(${sql.ref(column)})`,
    foldCase,
    namePrefixBounds: (prefix) => {
      const low = foldCase(prefix);
      return { low, high: prefixUpperBound(low) };
    },
    namePrefixMatch: prefixRangeMatch,
    foldedKey: (column) => sql<string>`lower(${sql.ref(column)})`,
    orderNullsLowest: (isDescending) => (isDescending ? sql`desc nulls last` : sql`asc nulls first`),
    leadingNumber: (column) => sql<number>`cast(${sql.ref(column)} as integer)`,
    textAsBytes: (column) => sql<Buffer | null>`cast(${sql.ref(column)} as blob)`,
    nextModifiedDate: (column, now) =>
      sql<string>`max(${now}, coalesce(datetime(${sql.ref(column)}, '+1 second'), ''))`,
    lockRowsSkipLocked: (query) => query,
    lockRows: (query) => query,
    ...onConflict,
    // One writer runs one transaction at a time, so holding the write transaction already serialises
    // work on the key; the row is written for compatibility.
    lockNamedRow: async (trx, target) => {
      await insertNamedRow(trx, target);
    },
    tryLockNamedRow: async (trx, target) => {
      await insertNamedRow(trx, target);
      return true;
    },
    // One writer: no other session to exclude.
    tryLockSessionKeys: async (_conn, keys) => new Set(keys),
    unlockSessionKeys: async () => {},
    // The executor keeps its prepared statements by SQL text. A compiled query goes to it directly:
    // through `db.executeQuery` it would take the same path plus Kysely's connection hand-off (this
    // instance has no plugins to transform results, and the driver hands every caller the one
    // connection without a lock, so nothing else differs).
    runPrepared: async <R>(query: CompiledQuery<R>) =>
      (await executor.query(SelectQueryNode.is(query.query), query.sql, query.parameters)).rows as R[],
    runPreparedOn: (on, query) => on.executeQuery(query),
    // Committed to the WAL without its fdatasync: the OS holds the write, so a crash of the process keeps
    // it; a later flush (the next durable commit's) makes it durable.
    commitWithoutFlush: async (query) => {
      await db.executeQuery({ ...query, sql: `${NO_FLUSH_MARK} ${query.sql}` });
    },
    readBlobSlice: async (request) => {
      const result = await sql<{ version: string; bytes: Buffer | null }>`
        select ${sql.ref(request.versionColumn)} as version,
          substr(${sql.ref(request.column)}, ${request.offset + 1}, ${request.lengthBytes}) as bytes
        from ${sql.table(request.table)} where ${sql.ref(request.idColumn)} = ${request.id}`.execute(db);
      return result.rows[0];
    },
    // INTEGER PRIMARY KEY takes max(rowid) + 1.
    resetIdGenerator: async () => {},
    // Under SQLite's bound-parameter limit (32,766).
    bulkInsert: createMultiRowInsert(db, 30_000),
    readColumns: async (table) => {
      const result = await sql<{
        name: string;
        type: string;
        notnull: number;
        dflt_value: unknown;
        pk: number;
      }>`
        select name, type, "notnull", dflt_value, pk from pragma_table_info(${table}) order by cid`.execute(
        db,
      );
      const pkCount = result.rows.filter((r) => r.pk > 0).length;
      return result.rows.map((r) => {
        const length = /\((\d+)\)/.exec(r.type)?.[1];
        return {
          name: r.name,
          type: r.type.replace(/\(.*$/, '').toLowerCase(),
          length: length === undefined ? undefined : Number(length),
          isNotNull: r.notnull === 1,
          hasDefault: r.dflt_value !== null,
          // An INTEGER PRIMARY KEY alone is the rowid: SQLite assigns it.
          isSerial: r.pk === 1 && pkCount === 1 && r.type.toLowerCase() === 'integer',
        };
      });
    },
    statementLimit: async () => undefined,
    analyzeTables: async () => {
      await sql`analyze`.execute(db);
    },
    relaxCommitDurability: async () => {},
    notify: async () => {},
    subscribe: () => undefined,
    classifyError: classifySqliteError,
    poolStats: () => undefined,
    maxConnections: 1,
    columnTypes: { id: 'integer', dateTime: 'text', date: 'text', blob: 'blob', text: 'text' },
  };
}

interface PreparedStatement {
  readonly statement: StatementSync;
  /** Whether it returns rows; asking SQLite (`columns()`) on every run is not free. */
  readonly returnsRows: boolean;
  /** Names of the result columns, in order (each row comes as an array of their values). */
  readonly columnNames: readonly string[];
}

/**
 * `LIMIT ?` and `OFFSET ?` (as Kysely compiles `.limit()` and `.offset()`) become `cast(? as integer)`.
 * SQLite's planner reads a bound LIMIT or OFFSET value when it compiles a statement, and then marks the
 * statement to be compiled again whenever that parameter is bound again, which node:sqlite does on every
 * run; the cost grows with the statement, not with the data. Behind a cast the planner sees an
 * expression, not a value: the plan is the one compiled once, and the result is the same for the whole
 * numbers that the query code binds there.
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
      // (null-prototype) would have to be copied into plain ones.
      if (columnNames.length > 0) statement.setReturnArrays(true);
      prepared = { statement, returnsRows: columnNames.length > 0, columnNames };
      statements.set(query, prepared);
      if (statements.size > 500) statements.delete(statements.keys().next().value!);
    }
    return prepared;
  };
}

async function insertNamedRow(trx: AnyKysely, target: { table: string; column: string; key: string }) {
  await sql`insert into ${sql.table(target.table)} (${sql.ref(target.column)}) values (${target.key})
    on conflict do nothing`.execute(trx);
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

/** For `CompiledQuery` users that need the SQL text SQLite really prepares (EXPLAIN output). */
export function preparedSqlOf(query: CompiledQuery): string {
  return castBoundLimits(query.sql);
}
