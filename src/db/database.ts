/**
 * Opens the one database the service uses behind one Kysely instance, so that query code is written once,
 * and its dialect adapter (`dialect.ts`), which holds every difference between the engines. Every dialect
 * hands back the same JavaScript shapes: date-times as `YYYY-MM-DD HH:MM:SS` strings, dates as
 * `YYYY-MM-DD`, integers as numbers and binary columns as Buffers.
 */
import type { Kysely, LogConfig } from 'kysely';
import { sql } from 'kysely';
import type { DatabaseTarget } from '../config.ts';
import type { BackgroundWriter } from './background-writer.ts';
import { createBackgroundWriter, openConnectionWriter } from './background-writer.ts';
import type { ShapeCache } from './compiled-queries.ts';
import { createShapeCache } from './compiled-queries.ts';
import type { DialectAdapter, DialectName } from './dialect.ts';
import { openSqlite } from './dialects/sqlite.ts';
import { openSqliteBackgroundWriter } from './dialects/sqlite-background.ts';
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
  /**
   * Opens a writer of rows on a connection of its own, off the request path (background-writer.ts): a
   * SQLite connection in a worker thread, or one more server connection. The caller closes it.
   */
  openBackgroundWriter(): BackgroundWriter;
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
  /** Called with the SQL of every statement the main connections run (tests count them). */
  readonly onQuery?: (sql: string) => void;
}

/** Opens the database named by `target`. Does not migrate: call `migrateToLatest` next. */
export async function openDatabase(
  target: DatabaseTarget,
  options: OpenDatabaseOptions = {},
): Promise<Database> {
  const { onQuery } = options;
  const log: LogConfig | undefined =
    onQuery === undefined
      ? undefined
      : (event) => {
          if (event.level === 'query') onQuery(event.query.sql);
        };
  if (target.kind === 'sqlite') {
    const connection = openSqlite(target.file, log);
    const writeTransaction = createBatchedWriteTransaction(connection.db, connection.durability);
    return assemble(connection.db, connection.adapter, {
      writeTransaction,
      // An in-memory database exists only on its one connection: its writer shares it.
      openBackgroundWriter: () =>
        target.file === ':memory:'
          ? createBackgroundWriter({
              transaction: writeTransaction,
              bulkInsert: (trx, table, columns, rows) =>
                connection.adapter.bulkInsert(trx, table, columns, rows),
              close: async () => {},
            })
          : openSqliteBackgroundWriter(target.file, {
              // Its commits grow the WAL too: the checkpointer's thread must be running for them.
              takeTurn: (batch) => {
                connection.wakeCheckpointer();
                return writeTransaction.betweenBatches(batch);
              },
            }),
      walFlushes: () => connection.walFlushes(),
      checkpointRounds: () => connection.checkpointRounds(),
      close: () => connection.close(),
    });
  }
  // The server drivers (pg, mysql2) are loaded only by the engine in use: each costs several MB of memory.
  if (target.kind === 'mysql') {
    const [{ openMysql }, { createOpenEyesProfile }, { OwnTablePrefixPlugin }] = await Promise.all([
      import('./dialects/mysql.ts'),
      import('./openeyes/profile.ts'),
      import('./openeyes/own-tables.ts'),
    ]);
    const isOpenEyes = target.schema === 'openeyes';
    // Date-times: UTC in the own schema (the session too, for the triggers' utc_timestamp), the
    // server's local time on OpenEyes's, where the service never asks the server for the time.
    setStoredTimeZone(target.storedTimeZone);
    const open = (poolSize: number) =>
      openMysql(
        target.url,
        poolSize,
        { timeZone: isOpenEyes ? undefined : '+00:00' },
        isOpenEyes ? [new OwnTablePrefixPlugin()] : [],
        log,
      );
    const connection = open(options.poolSize ?? 10);
    return assemble(connection.db, connection.adapter, {
      schema: isOpenEyes ? createOpenEyesProfile(target.url) : OWN_SCHEMA,
      writeTransaction: createPlainWriteTransaction(connection.db),
      // A multi-row insert may take several statements: a batch keeps its transaction.
      openBackgroundWriter: () => openConnectionWriter(open(1)),
      close: () => connection.close(),
    });
  }
  const { openPostgres } = await import('./dialects/postgres.ts');
  const connection = openPostgres(target.url, options.poolSize ?? 10, log);
  return assemble(connection.db, connection.adapter, {
    writeTransaction: createPlainWriteTransaction(connection.db),
    openBackgroundWriter: () =>
      openConnectionWriter(openPostgres(target.url, 1), { isBulkInsertOneStatement: true }),
    close: () => connection.close(),
  });
}

function assemble(
  db: Kysely<DB>,
  dialect: DialectAdapter,
  parts: Pick<Database, 'writeTransaction' | 'openBackgroundWriter' | 'close'> &
    Partial<Pick<Database, 'schema' | 'walFlushes' | 'checkpointRounds'>>,
): Database {
  return {
    db,
    dialect,
    writeTransaction: parts.writeTransaction,
    schema: parts.schema ?? OWN_SCHEMA,
    shapes: createShapeCache(),
    openBackgroundWriter: parts.openBackgroundWriter,
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
