/**
 * PostgreSQL 15+ through a `pg` pool: generic plans for the prepared hot statements (in transactions too),
 * commits that do not wait for the WAL flush on connections of their own, large binary values read
 * through a binary COPY, sockets read into reused Buffers (postgres-socket.ts), LISTEN/NOTIFY between
 * processes.
 */
import { createHash } from 'node:crypto';
import type { Kysely, LogConfig, SelectQueryBuilder } from 'kysely';
import { Kysely as KyselyClass, PostgresDialect, sql } from 'kysely';
import type { QueryResultRow } from 'pg';
import pg from 'pg';
import { registerDatabaseErrorClassifier } from '../../errors.ts';
import type { DatabaseErrorKind, DialectAdapter, Subscription, SubscribeOptions } from '../dialect.ts';
import { SOCKET_UNREACHABLE_CODES, someError } from '../dialect.ts';
import type { DB } from '../schema.ts';
import { copyOutRows } from './postgres-copy.ts';
import { createPostgresSocket } from './postgres-socket.ts';
import { onConflict } from './on-conflict.ts';
import { prefixRangeMatch, prefixUpperBound } from './prefix-range.ts';

const MiB = 1024 * 1024;

/** The first key of the queue engine's session locks (`tryLockSessionKeys`): 'CRAQ'. */
const QUEUE_LOCK_SPACE = 0x43524151;

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnySelect = SelectQueryBuilder<any, any, any>;

// pg: keep timestamps and dates as the text PostgreSQL sends, so that every dialect agrees, and read
// bigint/numeric counts as numbers (every id and count in this schema fits in 2^53).
const PG_TIMESTAMP = 1114;
const PG_TIMESTAMPTZ = 1184;
const PG_DATE = 1082;
const PG_INT8 = 20;
pg.types.setTypeParser(PG_TIMESTAMP, (v) => v.slice(0, 19));
pg.types.setTypeParser(PG_TIMESTAMPTZ, (v) => v);
pg.types.setTypeParser(PG_DATE, (v) => v);
pg.types.setTypeParser(PG_INT8, (v) => Number(v));

export interface PostgresConnection {
  readonly db: Kysely<DB>;
  readonly adapter: DialectAdapter;
  close(): Promise<void>;
}

export function openPostgres(url: string, poolSize: number, log?: LogConfig): PostgresConnection {
  const statements = createStatementNames();
  const pool = createPool(url, poolSize, '', statements);
  const db = new KyselyClass<DB>({ dialect: new PostgresDialect({ pool }), log });
  // Statements that commit without waiting for the WAL flush (`commitWithoutFlush`), on connections of
  // their own whose sessions say so; opened on first use.
  let relaxedPool: pg.Pool | undefined;
  const relaxed = () => (relaxedPool ??= createPool(url, 2, '-c synchronous_commit=off', statements));
  return {
    db,
    adapter: createPostgresAdapter(db, pool, url, statements, relaxed),
    close: async () => {
      await db.destroy();
      await relaxedPool?.end();
    },
  };
}

/** Names of the statements sent as named (prepared) ones, by SQL text: the hash of the text. */
interface StatementNames {
  /** The name of `text`, registering it: the connections send it as a named statement from now on. */
  register(text: string): string;
  /** The name of a registered `text`. */
  nameOf(text: string): string | undefined;
}

function createStatementNames(maxNames = 1000): StatementNames {
  const names = new Map<string, string>();
  return {
    register: (text) => {
      let name = names.get(text);
      if (name === undefined) {
        name = `cra_${createHash('sha1').update(text).digest('hex').slice(0, 24)}`;
        // A text dropped here is sent unnamed again (one more parse per call), never wrongly.
        if (names.size >= maxNames) names.delete(names.keys().next().value!);
        names.set(text, name);
      }
      return name;
    },
    nameOf: (text) => names.get(text),
  };
}

function createPool(url: string, max: number, extraOptions: string, statements: StatementNames): pg.Pool {
  // A connect that gets no answer fails after 5 s (answered 503) instead of the OS's minutes-long timeout.
  const pool = new pg.Pool({
    connectionString: url,
    options: `${sessionOptions(url)} ${extraOptions}`.trim(),
    max,
    idleTimeoutMillis: 30_000,
    connectionTimeoutMillis: 5_000,
    keepAlive: true,
    // Reads into reused Buffers, so that large results leave no garbage per socket read.
    stream: createPostgresSocket,
  });
  // An idle client that loses its server must not crash the process; the next query reconnects.
  pool.on('error', () => {});
  pool.on('connect', (client) => {
    // Nor a checked-out one: pg-pool listens for errors only while a client is idle, and a client whose
    // socket dies emits 'error' even when a query of its own is failing with it (an unhandled 'error'
    // event would end the process). The query rejects (503), and the pool drops the client when released.
    client.on('error', () => {});
    sendRegisteredAsNamed(client, statements);
  });
  return pool;
}

/**
 * Kysely runs every statement as `client.query(text, values)`, an unnamed statement that PostgreSQL
 * parses and plans on every call. This connection sends the texts registered in `statements` as named
 * ones instead (`runPreparedOn`): pg prepares each once per connection and then only binds and executes,
 * inside a transaction as well as outside.
 */
function sendRegisteredAsNamed(client: pg.PoolClient, statements: StatementNames): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    const [text, values] = args;
    const name = args.length === 2 && typeof text === 'string' ? statements.nameOf(text) : undefined;
    return name === undefined ? query(...args) : query({ name, text, values });
  };
}

/**
 * Settings of every PostgreSQL session, sent at connection start (no extra round trip, in force before the
 * first query), after any `options` the URL carries:
 * - `plan_cache_mode = force_generic_plan`: the only named (prepared) statements are the hot ones
 *   (`runPrepared`, `runPreparedOn`). In the default `auto` mode PostgreSQL re-plans them on every execution (their custom
 *   plans look cheaper than the generic one) and planning costs more than executing; their generic plans
 *   use the same index ranges and lookups (bench/explain/postgres-*.txt).
 * - `idle_in_transaction_session_timeout`: a process whose machine dies leaves its session idle in
 *   transaction, holding its locks (a worker's claims), until TCP notices, which takes hours. The server
 *   ends such sessions after 10 minutes, rolling back and releasing them; that exceeds every routine's
 *   timeout and every request's transaction, so no live process is cut off.
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

// SQLSTATEs of a server going away or refusing sessions: admin/crash shutdown, starting up, too many
// connections. (Class 08, connection exception, is matched by prefix.)
const UNAVAILABLE_SQLSTATES = new Set(['57P01', '57P02', '57P03', '53300']);
// Wrong password or role (28P01, 28000), unknown database (3D000), a missing privilege (42501).
const SETUP_SQLSTATES = new Set(['28P01', '28000', '3D000', '42501']);
// pg and pg-pool raise these as plain Errors without a code.
const UNREACHABLE_MESSAGE =
  /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Client was closed and is not queryable)/;

/** Classifies a pg (or socket) error by its SQLSTATE, code or message. */
export function classifyPostgresError(error: unknown): DatabaseErrorKind | undefined {
  let kind: DatabaseErrorKind | undefined;
  someError(error, (e) => {
    const { code, message } = e as { code?: unknown; message?: unknown };
    if (typeof code === 'string') {
      if (
        SOCKET_UNREACHABLE_CODES.has(code) ||
        UNAVAILABLE_SQLSTATES.has(code) ||
        /^08[0-9A-Z]{3}$/.test(code)
      )
        kind = 'unavailable';
      else if (SETUP_SQLSTATES.has(code)) kind = 'setup';
      else if (code === '23503') kind = 'foreign_key';
      else if (code === '23505') kind = 'unique';
      else if (code === '23502') kind = 'not_null';
    }
    if (kind === undefined && typeof message === 'string' && UNREACHABLE_MESSAGE.test(message))
      kind = 'unavailable';
    return kind !== undefined;
  });
  return kind;
}

// isDatabaseUnavailable (src/errors.ts) asks the classifiers of the adapters loaded in the process.
registerDatabaseErrorClassifier(classifyPostgresError);

// PostgreSQL lower() folds every letter of the database encoding, as JavaScript does.
const foldCase = (text: string): string => text.toLowerCase();

function createPostgresAdapter(
  db: Kysely<DB>,
  pool: pg.Pool,
  url: string,
  statements: StatementNames,
  relaxedPool: () => pg.Pool,
): DialectAdapter {
  const commitWithoutFlush = async (query: { sql: string; parameters: readonly unknown[] }) => {
    await relaxedPool().query(query.sql, [...query.parameters]);
  };
  return {
    name: 'postgres',
    hasConcurrentWriters: true,
    hasRowLocks: true,
    hasWritableCte: true,
    hasNotifications: true,
    hasUpdateFromValues: true,
    hasBlockingParentLocks: false,
    // A plain query brings bytes as hex text, which costs more than a second round trip (the slice's
    // COPY) from a few tens of kilobytes up.
    maxInlineBlobBytes: 32 * 1024,
    blobSliceBytes: MiB,
    // Byte order, so that a prefix range on lower(name) can use the "C" index of migration 0003.
    nameKey: (column) => sql<string>`lower(${sql.ref(column)}) collate "C"`,
    foldCase,
    namePrefixBounds: (prefix) => {
      const low = foldCase(prefix);
      return { low, high: prefixUpperBound(low) };
    },
    namePrefixMatch: prefixRangeMatch,
    foldedKey: (column) => sql<string>`lower(${sql.ref(column)})`,
    orderNullsLowest: (isDescending) => (isDescending ? sql`desc nulls last` : sql`asc nulls first`),
    leadingNumber: (column) =>
      sql<number>`coalesce(substring(${sql.ref(column)} from '^[0-9]+')::numeric, 0)`,
    textAsBytes: (column) => sql<Buffer | null>`convert_to(${sql.ref(column)}, 'UTF8')`,
    nextModifiedDate: (column, now) =>
      sql<string>`greatest(cast(${now} as timestamp), ${sql.ref(column)} + interval '1 second')`,
    lockRowsSkipLocked: <QB extends AnySelect>(query: QB, of?: readonly string[]) =>
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      query.forUpdate(of as any).skipLocked() as QB,
    lockRows: <QB extends AnySelect>(query: QB) => query.forUpdate() as QB,
    ...onConflict,
    // The row exists but for a key's first use: one statement sets the wait limit and locks it (the
    // filter runs on the row found, before the lock is waited for). A missing row is inserted first, in
    // a commit of its own, so that no transaction ever holds a new key's uncommitted insert, on which
    // another transaction's insert of the same key would wait without a limit.
    lockNamedRow: async (trx, target, waitMs) => {
      const timeout = `${Math.max(1, Math.floor(waitMs))}ms`;
      const lock = () =>
        sql`select l.${sql.ref(target.column)} from ${sql.table(target.table)} as l
          where l.${sql.ref(target.column)} = ${target.key}
          and set_config('lock_timeout', ${timeout}, true) is not null
          for update of l`.execute(trx);
      if ((await lock()).rows.length > 0) return;
      await commitWithoutFlush(insertNamedRow(db, target));
      if ((await lock()).rows.length === 0) throw new Error(`the lock row ${target.key} vanished`);
    },
    tryLockNamedRow: async (trx, target) => {
      const lock = () =>
        sql`select l.${sql.ref(target.column)} from ${sql.table(target.table)} as l
          where l.${sql.ref(target.column)} = ${target.key} for update of l skip locked`.execute(trx);
      if ((await lock()).rows.length > 0) return true;
      // Skipped: held by another transaction, or missing.
      const exists = await sql`select 1 from ${sql.table(target.table)}
        where ${sql.ref(target.column)} = ${target.key}`.execute(trx);
      if (exists.rows.length > 0) return false;
      await commitWithoutFlush(insertNamedRow(db, target));
      return (await lock()).rows.length > 0;
    },
    // Advisory locks of the two-key form, the first key naming the key space: they never meet the
    // one-key (bigint) locks, such as the migrator's. Advisory locks are per database.
    tryLockSessionKeys: async (conn, keys) => {
      if (keys.length === 0) return new Set();
      const { rows } = await sql<{ key: number; held: boolean }>`
        select k as key, pg_try_advisory_lock(${sql.lit(QUEUE_LOCK_SPACE)}, k) as held
        from unnest(${[...keys]}::int4[]) as k`.execute(conn);
      return new Set(rows.filter((r) => r.held).map((r) => Number(r.key)));
    },
    unlockSessionKeys: async (conn, keys) => {
      if (keys.length === 0) return;
      await sql`select pg_advisory_unlock(${sql.lit(QUEUE_LOCK_SPACE)}, k)
        from unnest(${[...keys]}::int4[]) as k`.execute(conn);
    },
    // A named statement is parsed and planned once per connection instead of on every call; the name is
    // the hash of the SQL, and the row parsers are the same pg ones Kysely uses.
    runPrepared: async <R>(query: { sql: string; parameters: readonly unknown[] }) => {
      const result = await pool.query<R & QueryResultRow>({
        name: statements.register(query.sql),
        text: query.sql,
        values: [...query.parameters],
      });
      return result.rows;
    },
    runPreparedOn: (on, query) => {
      statements.register(query.sql);
      return on.executeQuery(query);
    },
    commitWithoutFlush,
    readBlobSlice: (request) => readBlobSliceByCopy(db, pool, request),
    resetIdGenerator: async (trx, table, idColumn) => {
      const sequence = sql`pg_get_serial_sequence(${`"${table}"`}, ${idColumn})`;
      // greatest(..., nextval): never moves a sequence backwards.
      await sql`select setval(${sequence}, greatest(
          coalesce((select max(${sql.ref(idColumn)}) from ${sql.table(table)}), 0) + 1,
          nextval(${sequence})), false)`.execute(trx);
    },
    // One array parameter per column and `INSERT ... SELECT * FROM unnest(...)`: a chunk of any size is
    // one short statement with a handful of parameters (a multi-row VALUES list would need one parameter
    // per value, is capped at 65,535 of them and costs more to parse).
    bulkInsert: async (trx, table, columns, rows) => {
      if (rows.length === 0) return;
      const arrays = columns.map(({ type }, i) => sql`${rows.map((r) => r[i])}::${sql.raw(type)}[]`);
      await sql`insert into ${sql.table(table)} (${sql.join(columns.map((c) => sql.ref(c.name)))})
        select * from unnest(${sql.join(arrays)})`.execute(trx);
    },
    readColumns: async (table) => {
      const result = await sql<{
        column_name: string;
        data_type: string;
        character_maximum_length: number | null;
        is_nullable: string;
        column_default: string | null;
      }>`
        select column_name, data_type, character_maximum_length, is_nullable, column_default
        from information_schema.columns
        where table_schema = current_schema() and table_name = ${table}
        order by ordinal_position`.execute(db);
      return result.rows.map((r) => ({
        name: r.column_name,
        type: r.data_type.toLowerCase(),
        length: r.character_maximum_length ?? undefined,
        isNotNull: r.is_nullable === 'NO',
        hasDefault: r.column_default !== null,
        isSerial: r.column_default?.startsWith('nextval(') ?? false,
      }));
    },
    statementLimit: async () => undefined,
    analyzeTables: async () => {
      await sql`analyze`.execute(db);
    },
    relaxCommitDurability: async (trx) => {
      await sql`set local synchronous_commit = off`.execute(trx);
    },
    notify: async (channel, payload) => {
      await sql`select pg_notify(${channel}, ${payload})`.execute(db);
    },
    subscribe: (channel, options) => subscribe(url, channel, options),
    classifyError: classifyPostgresError,
    poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount }),
    maxConnections: pool.options.max,
    columnTypes: { id: 'serial', dateTime: 'timestamp', date: 'date', blob: 'bytea', text: 'text' },
  };
}

/** `insert ... on conflict do nothing` of the row `key` (its table's only column). */
function insertNamedRow(db: Kysely<DB>, target: { table: string; column: string; key: string }) {
  return sql`insert into ${sql.table(target.table)} (${sql.ref(target.column)}) values (${target.key})
    on conflict do nothing`.compile(db);
}

/**
 * LISTEN on a connection of its own (not the pool's: a pooled connection would be handed to queries).
 * A lost connection is re-established after 1 s, backing off to 30 s while the database stays away;
 * `onReconnect` then tells the caller that messages may have been missed.
 */
async function subscribe(url: string, channel: string, options: SubscribeOptions): Promise<Subscription> {
  if (!/^\w+$/.test(channel)) throw new Error(`bad channel name: ${channel}`);
  let isOpen = true;
  let client: pg.Client | undefined;

  const connect = async (): Promise<void> => {
    const next = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
    next.on('notification', (message) => options.onMessage(message.payload ?? ''));
    next.on('error', (error) => {
      options.onLost?.(error);
      client = undefined;
      next.end().catch(() => {});
      retry(1000);
    });
    try {
      await next.connect();
      await next.query(`LISTEN ${channel}`);
    } catch (error) {
      next.end().catch(() => {});
      throw error;
    }
    if (!isOpen) {
      await next.end().catch(() => {});
      return;
    }
    client = next;
  };

  const retry = (delayMs: number): void => {
    if (!isOpen) return;
    setTimeout(() => {
      if (!isOpen) return;
      connect().then(
        () => options.onReconnect(),
        () => retry(Math.min(delayMs * 2, 30_000)),
      );
    }, delayMs).unref();
  };

  await connect();
  return {
    close: async () => {
      isOpen = false;
      await client?.end().catch(() => {});
      client = undefined;
    },
  };
}

/** Bytes per row of a slice read: one CopyData message each, see readBlobSliceByCopy. */
const COPY_PIECE_BYTES = 64 * 1024;

/**
 * A slice through a binary COPY (postgres-copy.ts), which brings the bytes as stored instead of as hex
 * text, one row per 64 KiB piece. One row per piece, not one for the whole slice: each row is one
 * protocol message, which the connection's socket gathers whole before `pg` parses it
 * (postgres-socket.ts); a 64 KiB message fits the Buffer it keeps for that, a 1 MiB one would take a
 * Buffer of its own on every read, for the garbage collector. `substr` of an uncompressed out-of-line
 * value reads only the slices it needs. No `order by`: each row says where its piece goes.
 */
async function readBlobSliceByCopy(
  db: Kysely<DB>,
  pool: pg.Pool,
  request: Parameters<DialectAdapter['readBlobSlice']>[0],
): Promise<{ version: string; bytes: Buffer | null } | undefined> {
  const { offset, lengthBytes } = request;
  for (const value of [request.id, offset, lengthBytes - 1])
    if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`bad slice bounds: ${value}`);
  // COPY takes no parameters: the values are inlined as literals (integers only, checked above; a
  // `bytea` holds at most 1 GiB, so every position is an int4).
  const end = offset + lengthBytes;
  if (end > 2 ** 31 - 1) throw new RangeError(`bad slice bounds: ${end}`);
  // `piece` is each piece's 1-based start (a scalar set-returning function's column is named after its
  // alias), an int4: 4 bytes big-endian in the binary format.
  const select = sql`select
      cast(${sql.ref(request.versionColumn)} as text) as version,
      piece.piece as start,
      substr(${sql.ref(request.column)}, piece.piece,
        least(${sql.lit(COPY_PIECE_BYTES)}, ${sql.lit(end + 1)} - piece.piece)) as bytes
    from ${sql.table(request.table)}
    inner join generate_series(${sql.lit(offset + 1)}, ${sql.lit(end)}, ${sql.lit(COPY_PIECE_BYTES)})
      as piece on true
    where ${sql.ref(request.idColumn)} = ${sql.lit(request.id)}`;
  // Each piece is copied straight to its place in one Buffer: one allocation and one socket write per
  // slice, not one per piece. A piece is never longer than its place; if the value is shorter than
  // asked, places stay unfilled and the slice comes back short, which the reader refuses.
  const slice = Buffer.allocUnsafe(lengthBytes);
  let receivedBytes = 0;
  const rows = await copyOutRows(
    pool,
    sql`copy (${select}) to stdout (format binary)`.compile(db),
    (bytes, column, row) => {
      if (column !== 2) return Buffer.allocUnsafe(bytes);
      const start = row[1];
      if (start?.length !== 4) throw new Error('a slice read brought a piece without its place');
      const position = start.readInt32BE(0) - 1 - offset;
      if (
        position < 0 ||
        position >= slice.length ||
        bytes > Math.min(COPY_PIECE_BYTES, slice.length - position)
      )
        throw new Error('a slice read brought a piece outside its place');
      receivedBytes += bytes;
      return slice.subarray(position, position + bytes);
    },
  );
  const version = rows[0]?.[0];
  if (version === undefined || version === null) return undefined;
  const isNull = rows.some((row) => row[2] === null);
  return {
    // As text: the `YYYY-MM-DD HH:MM:SS` (cut to seconds) that the pg type parser gives.
    version: version.toString('latin1', 0, 19),
    bytes: isNull ? null : receivedBytes === lengthBytes ? slice : slice.subarray(0, receivedBytes),
  };
}
