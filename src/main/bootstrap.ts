/**
 * The start of every entry point: configuration, database, migrations (and on an OpenEyes database its
 * check), file store. A bad configuration or a database that cannot be used stops the start with a clear
 * message and exit status 2.
 */
import { sql } from 'kysely';
import type { Config } from '../config.ts';
import { ConfigError, loadConfig } from '../config.ts';
import type { Database } from '../db/database.ts';
import { openDatabase } from '../db/database.ts';
import type { MigrationOutcome } from '../db/migrate.ts';
import { migrateToLatest } from '../db/migrate.ts';
import type { QueueWorkerLock } from '../db/sqlite-files.ts';
import { QueueWorkerLockedError, lockQueueWorker } from '../db/sqlite-files.ts';
import { checkServedOpenEyesDatabase } from '../db/openeyes/serving-check.ts';
import type { UploadLimit } from '../db/upload-limit.ts';
import { resolveUploadLimit } from '../db/upload-limit.ts';
import { StartupError, databaseErrorKind } from '../errors.ts';
import type { FileStore } from '../files/file-store.ts';
import { createLocalFileStore } from '../files/file-store.ts';
import type { Logger } from '../logger.ts';
import { registerRoutineNames } from '../modules/request-queue/index.ts';
import { defaultRoutineCatalog } from '../modules/filing/index.ts';

export interface Bootstrapped {
  /** The configuration, with the upload limit in force on this database (`db/upload-limit.ts`). */
  readonly config: Config;
  /** One line to log at start when the upload limit in force is below the configured one. */
  readonly uploadLimitWarning?: string;
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

export interface BootstrapOptions {
  /**
   * Open the database and nothing else: no migration, no check, no registration (the commands that
   * report on the database themselves, such as `openeyes check`, and must not change it).
   */
  readonly isReportOnly?: boolean;
}

/**
 * Opens and migrates the database. On an OpenEyes database (`DATABASE_SCHEMA=openeyes`) it then checks
 * every table and column the service uses and stops with the list of problems, and registers the
 * service's routine names in `routine_library` (as OpenEyes's processor registers its scripts). The
 * returned configuration carries the upload limit in force (lowered to the server's `max_allowed_packet`
 * unless `RAW_BODY_LIMIT_BYTES` was set). Throws a {@link StartupError} for every problem of the set-up,
 * a database that refuses the connection, the password or a privilege included (see {@link runOrExit}).
 */
export async function bootstrap(
  config: Config = loadConfigOrExit(),
  options: BootstrapOptions = {},
): Promise<Bootstrapped> {
  const database = await openDatabase(config.database, { poolSize: config.dbPoolSize });
  try {
    const files = createLocalFileStore(config.filesDir);
    if (options.isReportOnly === true) {
      // Connects once, so that a refused connection, password or database is the one-line start-up error.
      await sql`select 1`.execute(database.db);
      return { config, database, files, migrations: { applied: [] } };
    }
    let uploadLimit: UploadLimit;
    // An OpenEyes database is checked first, so that a refused start leaves it untouched.
    if (database.schema.name === 'openeyes') {
      const checked = await checkServedOpenEyesDatabase(database, config);
      if (checked.problems !== undefined) throw new StartupError(checked.problems);
      uploadLimit = checked.uploadLimit;
    } else {
      uploadLimit = await resolveUploadLimit(database, config);
      if (uploadLimit.problem !== undefined)
        throw new StartupError(`Cannot serve this database: ${uploadLimit.problem}`);
    }
    const migrations = await migrateToLatest(database);
    await registerRoutineNames(database, defaultRoutineCatalog.names);
    const { warning } = uploadLimit;
    return {
      config: uploadLimit.config,
      database,
      files,
      migrations,
      ...(warning === undefined ? {} : { uploadLimitWarning: warning }),
    };
  } catch (error) {
    await database.close().catch(() => {});
    throw asStartupError(error);
  }
}

/**
 * Runs a start, turning a {@link StartupError} into its message on stderr and exit status 2 (never a
 * stack trace); other errors are rethrown.
 */
export async function runOrExit<T>(start: () => Promise<T>): Promise<T> {
  try {
    return await start();
  } catch (error) {
    if (!(error instanceof StartupError)) throw error;
    process.stderr.write(`${error.message}\n`);
    process.exit(2);
  }
}

/**
 * A database that cannot be reached or used as configured (refused connection, unknown host, wrong
 * password, unknown database, missing privilege) becomes a {@link StartupError} of one line naming the
 * cause; other errors are returned as they are.
 */
export function asStartupError(error: unknown): unknown {
  if (error instanceof StartupError) return error;
  const kind = databaseErrorKind(error);
  if (kind !== 'unavailable' && kind !== 'setup') return error;
  return new StartupError(`Cannot use the database: ${innermostMessage(error)}`, { cause: error });
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
