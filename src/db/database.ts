/**
 * Opens the one database the service uses behind one Kysely instance, so that query code is written once,
 * and its dialect adapter (`dialect.ts`), which holds every difference between the engines. Every dialect
 * hands back the same JavaScript shapes: date-times as `YYYY-MM-DD HH:MM:SS` strings, dates as
 * `YYYY-MM-DD`, integers as numbers and binary columns as Buffers.
 */
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { DatabaseTarget } from '../config.ts';
import type { ShapeCache } from './compiled-queries.ts';
import { createShapeCache } from './compiled-queries.ts';
import type { DialectAdapter, DialectName } from './dialect.ts';
import { openMysql } from './dialects/mysql.ts';
import { openPostgres } from './dialects/postgres.ts';
import { openSqlite } from './dialects/sqlite.ts';
import { createOpenEyesProfile } from './openeyes/profile.ts';
import { OwnTablePrefixPlugin } from './openeyes/own-tables.ts';
import type { DB } from './schema.ts';
import type { SchemaProfile } from './schema-profile.ts';
import { OWN_SCHEMA } from './schema-profile.ts';
import { setStoredTimeZone } from './stored-time.ts';
import type { WriteTransaction } from './write-transaction.ts';
import { createBatchedWriteTransaction, createPlainWriteTransaction } from './write-transaction.ts';

/** An engine's name (test suites run once per dialect). */
export type Dialect = DialectName;

export interface Database {
  readonly db: Kysely<DB>;
  /** Every difference between the engines; modules ask it, never which engine this is. */
  readonly dialect: DialectAdapter;
  /**
   * Runs a short write transaction that is durable when it resolves; without concurrent writers
   * (SQLite) concurrent writes share one commit (see write-transaction.ts). The function must use only
   * `trx` (never `db`), must not start another write transaction, and must not wait on anything but the
   * database.
   */
  readonly writeTransaction: WriteTransaction;
  /**
   * What the schema has or needs (the own schema, or an existing OpenEyes database); modules ask it,
   * never which schema this is.
   */
  readonly schema: SchemaProfile;
  /** The compiled hot queries of this database, by shape (compiled-queries.ts). */
  readonly shapes: ShapeCache;
  /** True when the database answers a trivial query. */
  isReachable(): Promise<boolean>;
  /** SQLite: completed fdatasync calls of the WAL that made commits durable (0 elsewhere). */
  walFlushes(): number;
  /** SQLite: checkpoint rounds run by the checkpointer thread (0 elsewhere). */
  checkpointRounds(): number;
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  /** Connections of a server database's pool. */
  readonly poolSize?: number;
}

/** Opens the database named by `target`. Does not migrate: call `migrateToLatest` next. */
export async function openDatabase(
  target: DatabaseTarget,
  options: OpenDatabaseOptions = {},
): Promise<Database> {
  if (target.kind === 'sqlite') {
    const connection = openSqlite(target.file);
    return assemble(connection.db, connection.adapter, {
      writeTransaction: createBatchedWriteTransaction(connection.db, connection.durability),
      walFlushes: () => connection.walFlushes(),
      checkpointRounds: () => connection.checkpointRounds(),
      close: () => connection.close(),
    });
  }
  if (target.kind === 'mysql') {
    const isOpenEyes = target.schema === 'openeyes';
    // Date-times: UTC in the own schema (the session too, for the triggers' utc_timestamp), the
    // server's local time on OpenEyes's, where the service never asks the server for the time.
    setStoredTimeZone(target.storedTimeZone);
    const connection = openMysql(
      target.url,
      options.poolSize ?? 10,
      { timeZone: isOpenEyes ? undefined : '+00:00' },
      isOpenEyes ? [new OwnTablePrefixPlugin()] : [],
    );
    return assemble(connection.db, connection.adapter, {
      schema: isOpenEyes ? createOpenEyesProfile(target.url) : OWN_SCHEMA,
      writeTransaction: createPlainWriteTransaction(connection.db),
      close: () => connection.close(),
    });
  }
  const connection = openPostgres(target.url, options.poolSize ?? 10);
  return assemble(connection.db, connection.adapter, {
    writeTransaction: createPlainWriteTransaction(connection.db),
    close: () => connection.close(),
  });
}

function assemble(
  db: Kysely<DB>,
  dialect: DialectAdapter,
  parts: Pick<Database, 'writeTransaction' | 'close'> &
    Partial<Pick<Database, 'schema' | 'walFlushes' | 'checkpointRounds'>>,
): Database {
  return {
    db,
    dialect,
    writeTransaction: parts.writeTransaction,
    schema: parts.schema ?? OWN_SCHEMA,
    shapes: createShapeCache(),
    walFlushes: parts.walFlushes ?? (() => 0),
    checkpointRounds: parts.checkpointRounds ?? (() => 0),
    isReachable: async () => {
      try {
        await sql`select 1`.execute(db);
        return true;
      } catch {
        return false;
      }
    },
    close: parts.close,
  };
}

export { formatDateTime, nowDateTime, parseDateTime } from './stored-time.ts';
