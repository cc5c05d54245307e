/**
 * MariaDB 10.6+ and MySQL 8.0+ through a `mysql2` pool and the prepared-statement driver of
 * mysql-driver.ts. What differs from the other engines:
 * - text comparisons follow the column's collation, which is case-insensitive (and accent-insensitive)
 *   on an OpenEyes database and on the service's own schema: names and identifiers are compared as
 *   they are, never through `lower()`, which would keep the server from using an index; a name prefix
 *   is a `LIKE 'prefix%'`, an index range under the collation;
 * - upserts are `ON DUPLICATE KEY UPDATE`, whose assignments apply left to right (an `existingValue`
 *   read after its column's assignment sees the new value);
 * - `FOR UPDATE SKIP LOCKED` without `OF` (MariaDB has no `OF`; the claim wants both tables locked);
 * - no notifications between processes: workers poll;
 * - `octet_length` and `substring` of a blob read the whole value inside the server, so large values are
 *   read in few, large slices.
 */
import type { Expression, KyselyPlugin, LogConfig, RawBuilder, SelectQueryBuilder } from 'kysely';
import { Kysely as KyselyClass, sql } from 'kysely';
import mysql from 'mysql2';
import { registerDatabaseErrorClassifier } from '../../errors.ts';
import type { AnyKysely, DatabaseErrorKind, DialectAdapter } from '../dialect.ts';
import { SOCKET_UNREACHABLE_CODES, someError } from '../dialect.ts';
import type { DB } from '../schema.ts';
import type { ServerInfo, SessionSettings } from './mysql-driver.ts';
import { MysqlExecuteDialect } from './mysql-driver.ts';
import { createMultiRowInsert } from './multi-row-insert.ts';

const MiB = 1024 * 1024;

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnySelect = SelectQueryBuilder<any, any, any>;

export interface MysqlConnection {
  readonly db: KyselyClass<DB>;
  readonly adapter: DialectAdapter;
  /** The server, once the first connection was made. */
  server(): ServerInfo | undefined;
  close(): Promise<void>;
}

/** Host, port, credentials and database of a `mysql://` or `mariadb://` URL. */
export function mysqlConnectionOptions(url: string): mysql.PoolOptions {
  const target = new URL(url);
  return {
    host: target.hostname,
    port: target.port === '' ? 3306 : Number(target.port),
    user: decodeURIComponent(target.username),
    password: decodeURIComponent(target.password),
    database: decodeURIComponent(target.pathname.replace(/^\//, '')) || undefined,
  };
}

export function openMysql(
  url: string,
  poolSize: number,
  session: SessionSettings,
  plugins: readonly KyselyPlugin[] = [],
  log?: LogConfig,
): MysqlConnection {
  const pool = mysql.createPool({
    ...mysqlConnectionOptions(url),
    // utf8mb4 on the connection whatever the server's default (often latin1): text is sent and read
    // as UTF-8, and a character a utf8mb3 column cannot hold is refused by strict mode, not mangled.
    charset: 'utf8mb4',
    // The same JavaScript shapes as the other engines: date-times as text, counts as numbers.
    dateStrings: true,
    supportBigNumbers: true,
    bigNumberStrings: false,
    decimalNumbers: true,
    // A connect that gets no answer fails after 5 s (answered 503) instead of the OS's timeout.
    connectTimeout: 5000,
    enableKeepAlive: true,
    connectionLimit: poolSize,
    maxIdle: poolSize,
    idleTimeout: 30_000,
    // Prepared statements per connection; the server allows 16,382 in all (max_prepared_stmt_count).
    maxPreparedStatements: 100,
  });
  // A connection that dies while idle must not crash the process (mysql2 listens only once).
  pool.on('connection', (connection) => connection.on('error', () => {}));
  const dialect = new MysqlExecuteDialect(pool, session);
  const db = new KyselyClass<DB>({ dialect, plugins: [...plugins], log });
  return {
    db,
    adapter: createMysqlAdapter(db, pool, poolSize),
    server: () => dialect.server(),
    close: () => db.destroy(),
  };
}

// Transport failures of mysql2 and of Node sockets: the server is down or unreachable.
const UNREACHABLE_CODES = new Set([
  ...SOCKET_UNREACHABLE_CODES,
  'PROTOCOL_CONNECTION_LOST',
  'PROTOCOL_SEQUENCE_TIMEOUT',
]);
/**
 * Server errors of a server that refuses work for now: too many connections (1040), shutting down
 * (1053), connection killed (MariaDB 1927), read-only (1290, a replica or a maintenance switch). Never
 * by SQLSTATE class 08: MySQL gives "packet too large" (1153) SQLSTATE 08S01, and that statement fails
 * again on every retry.
 */
const UNAVAILABLE_ERRNOS = new Set([1040, 1053, 1927, 1290]);
const ERRNO_KINDS = new Map<number, DatabaseErrorKind>([
  // Access denied (1045, 1044), unknown database (1049), a command denied on a table (1142).
  [1044, 'setup'],
  [1045, 'setup'],
  [1049, 'setup'],
  [1142, 'setup'],
  [1062, 'unique'],
  [1586, 'unique'],
  [1451, 'foreign_key'],
  [1452, 'foreign_key'],
  [1216, 'foreign_key'],
  [1217, 'foreign_key'],
  [1048, 'not_null'],
  [1364, 'not_null'],
]);
// mysql2 raises these as plain Errors without a code.
const UNREACHABLE_MESSAGE = /^(Can't add new command when connection is in closed state|Connection lost)/;

/** Classifies a mysql2 (or socket) error by its error number, code or message. */
export function classifyMysqlError(error: unknown): DatabaseErrorKind | undefined {
  let kind: DatabaseErrorKind | undefined;
  someError(error, (e) => {
    const { code, errno, sqlState, message } = e as {
      code?: unknown;
      errno?: unknown;
      sqlState?: unknown;
      message?: unknown;
    };
    // A server error carries its SQLSTATE; socket errors have a negative errno.
    const isServerError = typeof sqlState === 'string' && typeof errno === 'number';
    if (isServerError) {
      if (UNAVAILABLE_ERRNOS.has(errno)) kind = 'unavailable';
      else kind = ERRNO_KINDS.get(errno);
    } else if (typeof code === 'string' && UNREACHABLE_CODES.has(code)) {
      kind = 'unavailable';
    } else if (typeof message === 'string' && UNREACHABLE_MESSAGE.test(message)) {
      kind = 'unavailable';
    }
    return kind !== undefined;
  });
  return kind;
}

// isDatabaseUnavailable (src/errors.ts) asks the classifiers of the adapters loaded in the process.
registerDatabaseErrorClassifier(classifyMysqlError);

/** Escapes `%`, `_` and the escape character itself for a `LIKE` pattern (escape character `\`). */
export function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, '\\$&');
}

// Comparisons go through the collation; folding the text in JavaScript keeps duplicate criteria apart
// from each other's spelling only (the collation also ignores accents, JavaScript does not).
const foldCase = (text: string): string => text.toLowerCase();

interface MysqlPoolInternals {
  _allConnections?: { length: number };
  _freeConnections?: { length: number };
  _connectionQueue?: { length: number };
}

/** The name of the queue engine's session lock `key` in this database (at most 41 characters of 64). */
function sessionLockName(key: number) {
  return sql<string>`concat('cra_queue:', ${key}, ':', left(sha1(database()), 20))`;
}

function createMysqlAdapter(db: KyselyClass<DB>, pool: mysql.Pool, poolSize: number): DialectAdapter {
  // mysql2 keeps its counts in fields of the pool without a public accessor.
  const internals = pool as unknown as MysqlPoolInternals;
  return {
    name: 'mysql',
    hasConcurrentWriters: true,
    hasRowLocks: true,
    hasWritableCte: false,
    hasNotifications: false,
    hasUpdateFromValues: false,
    hasBlockingParentLocks: true,
    // The server reads a whole blob to answer `substring` or `octet_length` (about 1 ms per MiB), so
    // slices are large; and it returns NULL for a string longer than `max_allowed_packet` (16 MiB by
    // default on MariaDB), so they stay well below that.
    maxInlineBlobBytes: 4 * MiB,
    blobSliceBytes: 4 * MiB,
    nameKey: (column) => sql<string>`${sql.ref(column)}`,
    foldCase,
    namePrefixBounds: (prefix) => ({ low: `${escapeLike(foldCase(prefix))}%`, high: undefined }),
    namePrefixMatch: (key: Expression<string>, low: unknown) => sql`${key} like ${low}`,
    foldedKey: (column) => sql<string>`${sql.ref(column)}`,
    orderNullsLowest: (isDescending) => (isDescending ? sql`desc` : sql`asc`),
    leadingNumber: (column) =>
      sql<number>`coalesce(cast(nullif(regexp_substr(${sql.ref(column)}, '^[0-9]+'), '') as decimal(65, 0)), 0)`,
    textAsBytes: (column) => sql<Buffer | null>`cast(${sql.ref(column)} as binary)`,
    nextModifiedDate: (column, now) =>
      sql<string>`greatest(cast(${now} as datetime), ${sql.ref(column)} + interval 1 second)`,
    lockRowsSkipLocked: <QB extends AnySelect>(query: QB) => query.forUpdate().skipLocked() as QB,
    lockRows: <QB extends AnySelect>(query: QB) => query.forUpdate() as QB,
    insertOrIgnore: (insert, columns) => {
      // A no-op assignment rather than INSERT IGNORE, which would also hide foreign-key, NOT NULL and
      // truncation errors.
      const column = columns[0]!;
      // eslint-disable-next-line @typescript-eslint/no-explicit-any, @typescript-eslint/no-unsafe-argument
      return insert.onDuplicateKeyUpdate({ [column]: sql.ref(column) } as any);
    },
    // eslint-disable-next-line @typescript-eslint/no-explicit-any, @typescript-eslint/no-unsafe-argument
    upsert: (insert, _columns, update) => insert.onDuplicateKeyUpdate(update as any),
    insertedValue: <T>(column: string): RawBuilder<T> => sql<T>`values(${sql.ref(column)})`,
    existingValue: <T>(table: string, column: string): RawBuilder<T> =>
      sql<T>`${sql.table(table)}.${sql.ref(column)}`,
    lockNamedRow: async (trx, target, waitMs) => {
      // InnoDB counts a lock wait in whole seconds (`innodb_lock_wait_timeout`), set for this wait only.
      const seconds = Math.max(1, Math.ceil(waitMs / 1000));
      const { rows } = await sql<{ previous: number }>`
        select @@session.innodb_lock_wait_timeout as previous`.execute(trx);
      await sql`set session innodb_lock_wait_timeout = ${sql.lit(seconds)}`.execute(trx);
      try {
        const lock = () => lockKeyRow(trx, target, '');
        if ((await lock()).rows.length > 0) return;
        // A missing key row is committed on its own, so that no transaction waits on another's
        // uncommitted insert of it (READ COMMITTED: the locking read above left no gap lock).
        await insertKeyRow(db, target);
        if ((await lock()).rows.length === 0) throw new Error(`the lock row ${target.key} vanished`);
      } finally {
        await sql`set session innodb_lock_wait_timeout = ${sql.lit(Number(rows[0]!.previous))}`.execute(trx);
      }
    },
    tryLockNamedRow: async (trx, target) => {
      if ((await lockKeyRow(trx, target, 'skip locked')).rows.length > 0) return true;
      // Skipped: held by another transaction, or missing (read on the pool: the latest committed rows).
      const exists = await sql`select 1 from ${sql.table(target.table)}
        where ${sql.ref(target.column)} = ${target.key}`.execute(db);
      if (exists.rows.length > 0) return false;
      await insertKeyRow(db, target);
      return (await lockKeyRow(trx, target, 'skip locked')).rows.length > 0;
    },
    // Named locks (`GET_LOCK`) are the server's, not a database's: the name carries the database's.
    tryLockSessionKeys: async (conn, keys) => {
      if (keys.length === 0) return new Set();
      const { rows } = await sql<Record<string, number | null>>`select ${sql.join(
        keys.map((key, i) => sql`get_lock(${sessionLockName(key)}, 0) as ${sql.ref(`k${i}`)}`),
      )}`.execute(conn);
      return new Set(keys.filter((_, i) => Number(rows[0]?.[`k${i}`]) === 1));
    },
    unlockSessionKeys: async (conn, keys) => {
      if (keys.length === 0) return;
      await sql`select ${sql.join(
        keys.map((key, i) => sql`release_lock(${sessionLockName(key)}) as ${sql.ref(`k${i}`)}`),
      )}`.execute(conn);
    },
    // Every statement with parameters already runs prepared (mysql-driver.ts).
    runPrepared: async (query) => (await db.executeQuery(query)).rows,
    runPreparedOn: (on, query) => on.executeQuery(query),
    // The flush setting (`innodb_flush_log_at_trx_commit`) is the server's, not a session's: a plain
    // autocommit statement on the pool, durable and only slower.
    commitWithoutFlush: async (query) => {
      await db.executeQuery(query);
    },
    readBlobSlice: async (request) => {
      const result = await sql<{ version: string; bytes: Buffer | null }>`
        select ${sql.ref(request.versionColumn)} as version,
          substring(${sql.ref(request.column)}, ${request.offset + 1}, ${request.lengthBytes}) as bytes
        from ${sql.table(request.table)} where ${sql.ref(request.idColumn)} = ${request.id}`.execute(db);
      return result.rows[0];
    },
    // InnoDB moves a table's auto-increment counter past every id inserted explicitly.
    resetIdGenerator: async () => {},
    // A prepared statement holds at most 65,535 parameters.
    bulkInsert: createMultiRowInsert(db, 60_000),
    readColumns: async (table) => {
      const result = await sql<{
        column_name: string;
        data_type: string;
        character_maximum_length: number | string | null;
        is_nullable: string;
        column_default: string | null;
        extra: string;
      }>`
        select column_name as column_name, data_type as data_type,
          character_maximum_length as character_maximum_length, is_nullable as is_nullable,
          column_default as column_default, extra as extra
        from information_schema.columns
        where table_schema = database() and table_name = ${table}
        order by ordinal_position`.execute(db);
      return (
        result.rows
          // Generated and invisible helper columns (index keys) are not the table's data.
          .filter((r) => !/\b(invisible|virtual|stored|persistent)\b/i.test(r.extra))
          .map((r) => ({
            name: r.column_name,
            type: r.data_type.toLowerCase(),
            length: /char/i.test(r.data_type) ? Number(r.character_maximum_length) : undefined,
            isNotNull: r.is_nullable === 'NO',
            // MariaDB writes a missing default as the text NULL.
            hasDefault: r.column_default !== null && r.column_default !== 'NULL',
            isSerial: /auto_increment/i.test(r.extra),
          }))
      );
    },
    statementLimit: async () => {
      const { rows } = await sql<{ bytes: number | string }>`select @@max_allowed_packet as bytes`.execute(
        db,
      );
      return { bytes: Number(rows[0]!.bytes), setting: 'max_allowed_packet' };
    },
    analyzeTables: async (tables) => {
      await sql`analyze table ${sql.join(tables.map((t) => sql.table(t)))}`.execute(db);
    },
    // The flush at commit is a server-wide setting (innodb_flush_log_at_trx_commit).
    relaxCommitDurability: async () => {},
    notify: async () => {},
    subscribe: () => undefined,
    classifyError: classifyMysqlError,
    poolStats: () => {
      const total = internals._allConnections?.length ?? 0;
      return {
        total,
        idle: internals._freeConnections?.length ?? 0,
        waiting: internals._connectionQueue?.length ?? 0,
      };
    },
    maxConnections: poolSize,
    columnTypes: {
      id: 'integer',
      dateTime: 'datetime',
      date: 'date',
      blob: sql`longblob`,
      text: sql`longtext`,
    },
  };
}

type KeyTarget = { table: string; column: string; key: string };

/** Locks the key row of a named lock inside `trx` (`skip locked`: answers no row while another holds it). */
function lockKeyRow(trx: AnyKysely, target: KeyTarget, mode: '' | 'skip locked') {
  return sql`select ${sql.ref(target.column)} from ${sql.table(target.table)}
    where ${sql.ref(target.column)} = ${target.key} for update ${sql.raw(mode)}`.execute(trx);
}

/** Adds the key row of a named lock in a commit of its own (nothing when it exists). */
async function insertKeyRow(db: AnyKysely, target: KeyTarget): Promise<void> {
  await sql`insert ignore into ${sql.table(target.table)} (${sql.ref(target.column)})
    values (${target.key})`.execute(db);
}
