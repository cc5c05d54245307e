/**
 * Migrated template databases for one test run. `scripts/run-tests.ts` makes them before the test files
 * start and names them in the environment; `createTestDatabase` (test/harness.ts) then makes each fresh
 * SQLite database as a copy of the template's file and each PostgreSQL one with `CREATE DATABASE ...
 * TEMPLATE`, instead of running every migration again (on a 2-core machine about 0.3 s per SQLite and
 * 1.1 s per PostgreSQL database, against a few ms and 0.3 s for the copy). The harness still runs
 * `migrateToLatest` on the copy, which applies whatever the template lacks. A test file run without the
 * runner (`node --test file`) migrates its databases as before. MariaDB has no template databases: its
 * test databases are migrated.
 */
import { existsSync, statSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import { migrateToLatest } from '../src/db/migrate.ts';

/** The migrated SQLite file to copy. */
export const SQLITE_TEMPLATE_ENV = 'CRA_TEST_SQLITE_TEMPLATE';
/** The migrated PostgreSQL database (on TEST_DATABASE_URL's server) to create databases from. */
export const POSTGRES_TEMPLATE_ENV = 'CRA_TEST_POSTGRES_TEMPLATE';

export interface Templates {
  /** The variables that name the templates, for the test processes' environment. */
  readonly env: Record<string, string>;
  drop(): Promise<void>;
}

async function migrate(url: string): Promise<void> {
  const database = await openDatabase(loadConfig({ DATABASE_URL: url }).database, { poolSize: 1 });
  try {
    await migrateToLatest(database);
  } finally {
    await database.close();
  }
}

/** Runs one statement on its own connection to `adminUrl` (CREATE/DROP DATABASE cannot share a transaction). */
export async function runPostgres(adminUrl: string, statement: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(statement);
  } finally {
    await client.end();
  }
}

/** Makes the SQLite template, and the PostgreSQL one when `postgresAdminUrl` is given. */
export async function createTemplates(postgresAdminUrl: string | undefined): Promise<Templates> {
  const dir = await mkdtemp(path.join(tmpdir(), 'cra-test-template-'));
  const env: Record<string, string> = {};
  let postgresName: string | undefined;
  const drop = async () => {
    await rm(dir, { recursive: true, force: true });
    if (postgresName !== undefined && postgresAdminUrl !== undefined)
      await runPostgres(postgresAdminUrl, `drop database if exists ${postgresName} with (force)`);
  };
  try {
    const file = path.join(dir, 'template.db');
    await migrate(`sqlite:${file}`);
    // Closing the last connection checkpoints the WAL into the file and removes it; a copy of the file
    // alone would miss whatever a WAL left behind still held.
    if (existsSync(`${file}-wal`) && statSync(`${file}-wal`).size > 0)
      throw new Error('the SQLite template kept a WAL after closing');
    env[SQLITE_TEMPLATE_ENV] = file;
    if (postgresAdminUrl !== undefined) {
      postgresName = `cra_test_template_${process.pid}`;
      await runPostgres(postgresAdminUrl, `drop database if exists ${postgresName} with (force)`);
      await runPostgres(postgresAdminUrl, `create database ${postgresName}`);
      const url = new URL(postgresAdminUrl);
      url.pathname = `/${postgresName}`;
      await migrate(url.toString());
      env[POSTGRES_TEMPLATE_ENV] = postgresName;
    }
    return { env, drop };
  } catch (error) {
    await drop().catch(() => undefined);
    throw error;
  }
}
