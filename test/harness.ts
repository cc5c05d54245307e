/**
 * Test harness: the real app on 127.0.0.1 port 0, against a fresh database of the dialect under test
 * (a new SQLite file, or a new PostgreSQL or MariaDB/MySQL database created from TEST_DATABASE_URL or
 * TEST_MYSQL_URL and dropped after),
 * and a temporary files directory. Every suite runs once per dialect.
 */
import { copyFile, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import mysql from 'mysql2/promise';
import type { BuildAppOptions } from '../src/app.ts';
import { buildApp } from '../src/app.ts';
import type { Config } from '../src/config.ts';
import { loadConfig } from '../src/config.ts';
import type { Database, Dialect } from '../src/db/database.ts';
import { openDatabase } from '../src/db/database.ts';
import { mysqlConnectionOptions } from '../src/db/dialects/mysql.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import type { DB } from '../src/db/schema.ts';
import type { AppDeps } from '../src/deps.ts';
import type { FileStore } from '../src/files/file-store.ts';
import { createLocalFileStore } from '../src/files/file-store.ts';
import { createAuthenticator } from '../src/modules/user/index.ts';
import { POSTGRES_TEMPLATE_ENV, SQLITE_TEMPLATE_ENV, runPostgres } from './database-templates.ts';

/** SQLite always; PostgreSQL too when TEST_DATABASE_URL is set, MariaDB/MySQL when TEST_MYSQL_URL is. */
export const DIALECTS: readonly Dialect[] = [
  'sqlite',
  ...(process.env.TEST_DATABASE_URL ? (['postgres'] as const) : []),
  ...(process.env.TEST_MYSQL_URL ? (['mysql'] as const) : []),
];

/** Runs `suite` once per dialect (call it at the top level of a test file, around `describe`). */
export function forEachDialect(suite: (dialect: Dialect) => void): void {
  for (const dialect of DIALECTS) suite(dialect);
}

export interface TestDatabase {
  readonly dialect: Dialect;
  /** The `DATABASE_URL` of the fresh database. */
  readonly url: string;
  readonly database: Database;
  readonly db: Kysely<DB>;
  readonly filesDir: string;
  readonly files: FileStore;
  /** Environment that points a child process (server, CLI, worker) at this database and files dir. */
  readonly env: Record<string, string>;
  drop(): Promise<void>;
}

/**
 * A fresh, migrated database of `dialect` and an empty files directory. Under the test runner a SQLite or
 * PostgreSQL database starts as a copy of the run's migrated template (test/database-templates.ts), and
 * the migrations then find nothing left to apply.
 */
export async function createTestDatabase(
  dialect: Dialect,
  options: { onQuery?: (sql: string) => void } = {},
): Promise<TestDatabase> {
  const dir = await mkdtemp(path.join(tmpdir(), 'cra-test-'));
  const filesDir = path.join(dir, 'files');
  let url: string;
  let dropDatabase = async () => {};
  if (dialect === 'sqlite') {
    const file = path.join(dir, 'test.db');
    const template = process.env[SQLITE_TEMPLATE_ENV];
    if (template !== undefined && template !== '') await copyFile(template, file);
    url = `sqlite:${file}`;
  } else if (dialect === 'mysql') {
    const adminUrl = process.env.TEST_MYSQL_URL;
    if (adminUrl === undefined) throw new Error('TEST_MYSQL_URL is not set');
    const name = `cra_test_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
    const runAdmin = async (statement: string) => {
      const admin = await mysql.createConnection({ ...mysqlConnectionOptions(adminUrl), charset: 'utf8mb4' });
      try {
        await admin.query(statement);
      } finally {
        await admin.end();
      }
    };
    await runAdmin(`create database \`${name}\` character set utf8mb4 collate utf8mb4_unicode_ci`);
    const target = new URL(adminUrl);
    target.pathname = `/${name}`;
    url = target.toString();
    dropDatabase = () => runAdmin(`drop database if exists \`${name}\``);
  } else {
    const adminUrl = process.env.TEST_DATABASE_URL;
    if (adminUrl === undefined) throw new Error('TEST_DATABASE_URL is not set');
    const name = `cra_test_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
    const template = process.env[POSTGRES_TEMPLATE_ENV];
    await runPostgres(
      adminUrl,
      `create database ${name}${template !== undefined && template !== '' ? ` template ${template}` : ''}`,
    );
    const target = new URL(adminUrl);
    target.pathname = `/${name}`;
    url = target.toString();
    dropDatabase = () => runPostgres(adminUrl, `drop database if exists ${name} with (force)`);
  }
  const database = await openDatabase(loadConfig({ DATABASE_URL: url }).database, {
    poolSize: 5,
    onQuery: options.onQuery,
  });
  await migrateToLatest(database);
  return {
    dialect,
    url,
    database,
    db: database.db,
    filesDir,
    files: createLocalFileStore(filesDir),
    env: { DATABASE_URL: url, FILES_DIR: filesDir, DEMO_DATA: 'off', WORKER: 'off', LOG_LEVEL: 'silent' },
    async drop() {
      await database.close();
      await dropDatabase();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export interface TestApp extends TestDatabase {
  readonly baseUrl: string;
  readonly app: FastifyInstance;
  readonly config: Config;
  readonly deps: AppDeps;
  /** `fetch` relative to the app. */
  request(pathAndQuery: string, init?: RequestInit): Promise<Response>;
  close(): Promise<void>;
}

export interface StartTestAppOptions extends BuildAppOptions {
  /** Extra environment for `loadConfig` (limits, switches). */
  readonly env?: Record<string, string>;
  /** Called with the SQL of every statement the app's database connections run. */
  readonly onQuery?: (sql: string) => void;
}

/**
 * Starts the real app on 127.0.0.1:0 against a fresh database. Rate limits, the failed-login brake and the
 * per-client cap are off unless `env` turns them on, so that tests of other behaviour (all from one
 * address) are not throttled.
 */
export async function startTestApp(dialect: Dialect, options: StartTestAppOptions = {}): Promise<TestApp> {
  const testDb = await createTestDatabase(dialect, { onQuery: options.onQuery });
  const config = loadConfig({
    ...testDb.env,
    SIGN_RATE_LIMIT_PER_MINUTE: '0',
    AUTH_FAILURE_LIMIT_PER_MINUTE: '0',
    AUTH_FAILURE_FREE_ATTEMPTS: '0',
    AUTH_FAILURE_LIMIT_PER_USERNAME: '0',
    AUTH_CONCURRENT_VERIFICATIONS_PER_CLIENT: '0',
    MAX_REQUESTS_PER_CLIENT: '0',
    ...options.env,
  });
  const deps: AppDeps = {
    config,
    database: testDb.database,
    files: testDb.files,
    authenticator: createAuthenticator(testDb.db, {
      cacheTtlMs: config.authCacheTtlMs,
      database: testDb.database,
    }),
  };
  const app = await buildApp(deps, options);
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (address === null || typeof address === 'string') throw new Error('no address');
  // TLS_CERT/TLS_KEY in `env` start the app over HTTPS (fetch then needs the test's CA: use node:https).
  const baseUrl = `${config.tls === undefined ? 'http' : 'https'}://127.0.0.1:${address.port}`;
  return {
    ...testDb,
    baseUrl,
    app,
    config,
    deps,
    request: (pathAndQuery, init) => fetch(`${baseUrl}${pathAndQuery}`, init),
    async close() {
      await app.close();
      await testDb.drop();
    },
  };
}
