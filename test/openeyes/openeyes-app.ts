/**
 * The service in OpenEyes mode for a test file: a fresh OpenEyes-shaped database (`openeyes-database.ts`),
 * migrated with the admin account, a service account holding exactly what `openeyes grants` prints, and
 * the service bootstrapped on that account. `openOpenEyesService` stops there (for tests that start their
 * own DICOM or MLLP server); `startOpenEyesApp` also builds the HTTP app and listens on port 0.
 *
 * `close()` undoes only what was done, in reverse order, and goes on past a step that fails (rethrowing
 * the first error at the end), so an `after()` that calls it is safe after a `before()` that failed
 * part way, and the account and database are dropped even when closing the app fails.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import { buildApp } from '../../src/app.ts';
import type { Config } from '../../src/config.ts';
import { loadConfig } from '../../src/config.ts';
import type { Database } from '../../src/db/database.ts';
import { openDatabase } from '../../src/db/database.ts';
import type { MigrationOutcome } from '../../src/db/migrate.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import type { Bootstrapped } from '../../src/main/bootstrap.ts';
import { bootstrap } from '../../src/main/bootstrap.ts';
import { closeDicomPools } from '../../src/modules/dicom/index.ts';
import { createAuthenticator } from '../../src/modules/user/index.ts';
import { runCli } from '../run-cli.ts';
import type { OpenEyesTestDatabase } from './openeyes-database.ts';
import { connectForScripts, createOpenEyesDatabase, openKysely } from './openeyes-database.ts';

/** The password of the service account. */
const SERVICE_PASSWORD = 'service-password';

export interface OpenEyesServiceOptions {
  /** Prefix of the temporary directory (`workDir`), e.g. `cra-oe-biometry-`. */
  readonly tempPrefix: string;
  /**
   * The settings besides DATABASE_URL, given the temporary directory; FILES_DIR is that directory
   * unless they name another.
   */
  readonly settings: (workDir: string) => Record<string, string> | Promise<Record<string, string>>;
  /** Runs on the new database with the admin account, before the migration. */
  readonly prepare?: (admin: Kysely<any>) => Promise<void>; // eslint-disable-line @typescript-eslint/no-explicit-any
}

export interface OpenEyesService {
  readonly oe: OpenEyesTestDatabase;
  /** Kysely on the OpenEyes database with the admin account, for reading and arranging rows. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  readonly admin: Kysely<any>;
  /** The temporary directory, removed by close(). */
  readonly workDir: string;
  readonly filesDir: string;
  /** What the admin account's migration applied. */
  readonly migrations: MigrationOutcome;
  /** The service account, `cra_oe_<random>` at 127.0.0.1. */
  readonly account: string;
  /** The settings with the service account's DATABASE_URL (for `runCli`). */
  readonly env: Record<string, string>;
  /** The configuration loaded from `env`. */
  readonly config: Config;
  readonly booted: Bootstrapped;
  readonly database: Database;
  /** The statements `openeyes grants` printed for the service account. */
  readonly grants: string;
  close(): Promise<void>;
}

export interface OpenEyesApp extends OpenEyesService {
  readonly app: FastifyInstance;
  /** `http://127.0.0.1:<port>` of the listening app. */
  readonly baseUrl: string;
}

/** Runs `steps` in reverse order, each even when an earlier one threw; rethrows the first error. */
async function undo(steps: (() => Promise<unknown>)[]): Promise<void> {
  let failure: { error: unknown } | undefined;
  for (const step of steps.reverse()) {
    try {
      await step();
    } catch (error) {
      failure ??= { error };
    }
  }
  if (failure !== undefined) throw failure.error;
}

/** Runs `build` with a list of undo steps; on failure undoes what was done and rethrows. */
async function withUndo<T>(
  build: (steps: (() => Promise<unknown>)[]) => Promise<Omit<T, 'close'>>,
): Promise<T> {
  const steps: (() => Promise<unknown>)[] = [];
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await undo(steps);
  };
  try {
    return { ...(await build(steps)), close } as T;
  } catch (error) {
    await close().catch(() => undefined);
    throw error;
  }
}

async function setUpService(
  adminUrl: string,
  options: OpenEyesServiceOptions,
  steps: (() => Promise<unknown>)[],
): Promise<Omit<OpenEyesService, 'close'>> {
  const oe = await createOpenEyesDatabase(adminUrl);
  steps.push(() => oe.drop());
  const admin = openKysely(oe.url);
  steps.push(() => admin.destroy());
  if (options.prepare !== undefined) await options.prepare(admin);
  const workDir = await mkdtemp(path.join(tmpdir(), options.tempPrefix));
  steps.push(() => rm(workDir, { recursive: true, force: true }));
  const settings = { FILES_DIR: workDir, ...(await options.settings(workDir)) };
  const adminEnv = { ...settings, DATABASE_URL: oe.url };
  const migrating = await openDatabase(loadConfig(adminEnv).database, { poolSize: 1 });
  let migrations: MigrationOutcome;
  try {
    migrations = await migrateToLatest(migrating);
  } finally {
    await migrating.close();
  }
  const account = `cra_oe_${Math.random().toString(36).slice(2, 10)}`;
  const grants = await runCli(adminEnv, ['openeyes', 'grants', `'${account}'@'127.0.0.1'`]);
  assert.equal(grants.status, 0, grants.stderr);
  const connection = await connectForScripts(oe.url);
  try {
    await connection.query(`create user '${account}'@'127.0.0.1' identified by '${SERVICE_PASSWORD}'`);
    steps.push(async () => {
      const dropping = await connectForScripts(oe.url);
      await dropping.query(`drop user if exists '${account}'@'127.0.0.1'`).finally(() => dropping.end());
    });
    await connection.query(grants.stdout);
  } finally {
    await connection.end();
  }
  const serviceUrl = new URL(oe.url);
  serviceUrl.username = account;
  serviceUrl.password = SERVICE_PASSWORD;
  const env = { ...settings, DATABASE_URL: serviceUrl.toString() };
  const config = loadConfig(env);
  const booted = await bootstrap(config);
  steps.push(() => booted.database.close());
  return {
    oe,
    admin,
    workDir,
    filesDir: settings.FILES_DIR,
    migrations,
    account,
    env,
    config,
    booted,
    database: booted.database,
    grants: grants.stdout,
  };
}

/** The service bootstrapped in OpenEyes mode on its own database and account, without a server. */
export async function openOpenEyesService(
  adminUrl: string,
  options: OpenEyesServiceOptions,
): Promise<OpenEyesService> {
  return withUndo<OpenEyesService>((steps) => setUpService(adminUrl, options, steps));
}

/** `openOpenEyesService` and the HTTP app on it, listening on 127.0.0.1 port 0. */
export async function startOpenEyesApp(
  adminUrl: string,
  options: OpenEyesServiceOptions,
): Promise<OpenEyesApp> {
  return withUndo<OpenEyesApp>(async (steps) => {
    const service = await setUpService(adminUrl, options, steps);
    const { config, database, booted } = service;
    steps.push(() => closeDicomPools());
    const app = await buildApp({
      config,
      database,
      files: booted.files,
      authenticator: createAuthenticator(database.db, { cacheTtlMs: config.authCacheTtlMs, database }),
    });
    steps.push(() => app.close());
    await app.listen({ host: '127.0.0.1', port: 0 });
    const baseUrl = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    return { ...service, app, baseUrl };
  });
}
