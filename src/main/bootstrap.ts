/**
 * The start of every entry point: configuration, database, migrations, file store. Exits with a clear
 * message on a bad configuration or an unreachable database.
 */
import type { Config } from '../config.ts';
import { ConfigError, loadConfig } from '../config.ts';
import type { Database } from '../db/database.ts';
import { openDatabase } from '../db/database.ts';
import type { MigrationOutcome } from '../db/migrate.ts';
import { migrateToLatest } from '../db/migrate.ts';
import type { QueueWorkerLock } from '../db/sqlite-files.ts';
import { QueueWorkerLockedError, lockQueueWorker } from '../db/sqlite-files.ts';
import { databaseErrorKind } from '../errors.ts';
import type { FileStore } from '../files/file-store.ts';
import { createLocalFileStore } from '../files/file-store.ts';
import type { Logger } from '../logger.ts';

export interface Bootstrapped {
  readonly config: Config;
  readonly database: Database;
  readonly files: FileStore;
  readonly migrations: MigrationOutcome;
}

export function loadConfigOrExit(): Config {
  try {
    return loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      process.exit(2);
    }
    throw error;
  }
}

export async function bootstrap(config: Config = loadConfigOrExit()): Promise<Bootstrapped> {
  const database = await openDatabase(config.database, { poolSize: config.dbPoolSize });
  try {
    const migrations = await migrateToLatest(database);
    return { config, database, files: createLocalFileStore(config.filesDir), migrations };
  } catch (error) {
    await database.close().catch(() => {});
    exitOnDatabaseSetupError(error);
    throw error;
  }
}

/**
 * A database that cannot be reached or used as configured (refused connection, unknown host, wrong
 * password, unknown database, missing privilege) ends the start with one line naming the cause and exit
 * status 2, never a stack trace. Other errors are left to the caller.
 */
export function exitOnDatabaseSetupError(error: unknown): void {
  const kind = databaseErrorKind(error);
  if (kind !== 'unavailable' && kind !== 'setup') return;
  process.stderr.write(`Cannot use the database: ${innermostMessage(error)}\n`);
  process.exit(2);
}

/** The message of the deepest cause (the driver's own words), on one line. */
function innermostMessage(error: unknown): string {
  let current = error;
  for (let depth = 0; depth < 5; depth++) {
    const { cause, errors } = (current ?? {}) as { cause?: unknown; errors?: unknown };
    const next: unknown = cause ?? (Array.isArray(errors) ? (errors as unknown[])[0] : undefined);
    if (next === undefined) break;
    current = next;
  }
  const { message, code } = (current ?? {}) as { message?: unknown; code?: unknown };
  const text = typeof message === 'string' && message !== '' ? message : String(code ?? current);
  return text.split('\n')[0]!;
}

/** True when this start created the schema, i.e. the database was new. */
export function isNewDatabase(migrations: MigrationOutcome): boolean {
  return migrations.applied.includes('0001-initial-schema');
}

/**
 * Takes the lock of the one queue worker a SQLite database supports (`sqlite-files.ts`), or logs why
 * not and exits with status 1. A no-op on PostgreSQL.
 */
export function lockQueueWorkerOrExit(config: Config, logger: Logger): QueueWorkerLock {
  try {
    return lockQueueWorker(config.database);
  } catch (error) {
    if (error instanceof QueueWorkerLockedError) {
      logger.fatal(error.message);
      process.exit(1);
    }
    throw error;
  }
}
