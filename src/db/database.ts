/**
 * Opens the one database the service uses, SQLite (embedded, `node:sqlite`) or PostgreSQL (`pg`), behind
 * one Kysely instance so that query code is written once. Both dialects hand back the same JavaScript
 * shapes: date-times as `YYYY-MM-DD HH:MM:SS` strings, dates as `YYYY-MM-DD`, integers as numbers and
 * binary columns as Buffers.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { Kysely, PostgresDialect, sql } from 'kysely';
import type { IGenericSqlite } from 'kysely-generic-sqlite';
import { GenericSqliteDialect, parseBigInt } from 'kysely-generic-sqlite';
import pg from 'pg';
import type { DatabaseTarget } from '../config.ts';
import type { DB } from './schema.ts';
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
  if (file !== ':memory:') mkdirSync(path.dirname(file), { recursive: true });
  const native = new DatabaseSync(file);
  // WAL lets readers run beside the writer; the busy timeout covers a CLI and a server sharing the file.
  native.exec('PRAGMA journal_mode = WAL');
  // FULL: a commit is on disk when it returns, so a 200 sent after it survives a power loss. Concurrent
  // request writes share commits (writeTransaction), which keeps the fsync cost per request low.
  native.exec('PRAGMA synchronous = FULL');
  native.exec('PRAGMA foreign_keys = ON');
  native.exec('PRAGMA busy_timeout = 5000');
  // 16 MiB of page cache per connection: the OS caches the file too, and server memory stays bounded.
  native.exec('PRAGMA cache_size = -16384');
  native.exec('PRAGMA temp_store = MEMORY');
  const statements = new Map<string, ReturnType<DatabaseSync['prepare']>>();
  const prepare = (query: string) => {
    let statement = statements.get(query);
    if (statement === undefined) {
      statement = native.prepare(query);
      statements.set(query, statement);
      if (statements.size > 500) statements.delete(statements.keys().next().value!);
    }
    return statement;
  };
  const executor: IGenericSqlite<DatabaseSync> = {
    db: native,
    query: (_isSelect, sqlText, parameters) => {
      // Kysely opens transactions with a deferred `begin`; a transaction that reads and then writes can
      // then fail at once with "database is locked" when another process wrote in between (SQLite does
      // not wait on an upgrade). Every transaction here writes, so take the write lock up front.
      const query = /^begin$/i.test(sqlText) ? 'begin immediate' : sqlText;
      const statement = prepare(query);
      const args = (parameters ?? []).map(toSqliteValue);
      if (statement.columns().length > 0) {
        return { rows: statement.all(...args).map(fromSqliteRow) };
      }
      const result = statement.run(...args);
      return {
        rows: [],
        insertId: parseBigInt(result.lastInsertRowid),
        numAffectedRows: parseBigInt(result.changes),
      };
    },
    close: () => native.close(),
  };
  const db = new Kysely<DB>({ dialect: new GenericSqliteDialect(() => executor) });
  return {
    db,
    dialect: 'sqlite',
    pool: undefined,
    writeTransaction: createBatchedWriteTransaction(db),
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

type SqliteValue = null | number | bigint | string | Uint8Array;

function toSqliteValue(value: unknown): SqliteValue {
  if (value === undefined || value === null) return null;
  if (typeof value === 'boolean') return value ? 1 : 0;
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'string') return value;
  if (value instanceof Uint8Array) return value;
  if (value instanceof Date) return formatDateTime(value);
  return JSON.stringify(value);
}

function fromSqliteRow(row: Record<string, unknown>): Record<string, unknown> {
  // node:sqlite returns null-prototype objects and Uint8Arrays; hand back what pg hands back.
  const plain: Record<string, unknown> = {};
  for (const key in row) {
    const value = row[key];
    plain[key] =
      value instanceof Uint8Array && !Buffer.isBuffer(value)
        ? Buffer.from(value.buffer, value.byteOffset, value.byteLength)
        : value;
  }
  return plain;
}

function openPostgres(url: string, poolSize: number): Database {
  // A connect that gets no answer fails after 5 s (answered 503) instead of the OS's minutes-long timeout.
  const pool = new pg.Pool({
    connectionString: url,
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

/** Formats a Date as the `YYYY-MM-DD HH:MM:SS` UTC text stored in every date-time column. */
export function formatDateTime(date: Date): string {
  return date.toISOString().slice(0, 19).replace('T', ' ');
}

/** The current time as stored in date-time columns. */
export function nowDateTime(): string {
  return formatDateTime(new Date());
}
