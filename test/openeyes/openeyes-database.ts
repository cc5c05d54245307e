/**
 * A fresh OpenEyes-shaped database on the test MariaDB/MySQL server: `schema.sql` (OpenEyes v6.8.0, see
 * its header) and, unless asked not to, `seed.sql`. The database is created with OpenEyes's defaults
 * (utf8 / utf8_unicode_ci) and named `cra_oe_<pid>_<random>`, so that parallel test files never share one.
 *
 * Run as a script to create one and print its URL (for manual runs and benchmarks):
 *   TEST_MYSQL_URL=mysql://cra:cra@127.0.0.1:3307/cra_ci npx node test/openeyes/openeyes-database.ts
 */
import { readFile } from 'node:fs/promises';
import { Kysely, MysqlDialect } from 'kysely';
import { createPool } from 'mysql2';
import mysql from 'mysql2/promise';

const SCHEMA_FILE = new URL('./schema.sql', import.meta.url);
const SEED_FILE = new URL('./seed.sql', import.meta.url);

export interface OpenEyesTestDatabase {
  /** The database (schema) name. */
  readonly name: string;
  /** `mysql://` URL of the new database, with the credentials of the admin URL. */
  readonly url: string;
  drop(): Promise<void>;
}

export interface CreateOpenEyesDatabaseOptions {
  /** Load `seed.sql` (default true). */
  readonly isSeeded?: boolean;
}

/** The admin URL of the test server, or undefined when MariaDB tests are not configured. */
export function testMysqlUrl(): string | undefined {
  const url = process.env.TEST_MYSQL_URL;
  return url === undefined || url.trim() === '' ? undefined : url.trim();
}

/** Server, credentials and database of a `mysql://` URL, for mysql2; utf8mb4 on the connection. */
function connectionOptions(url: string) {
  const target = new URL(url);
  return {
    host: target.hostname,
    port: target.port === '' ? 3306 : Number(target.port),
    user: decodeURIComponent(target.username),
    password: decodeURIComponent(target.password),
    database: target.pathname.replace(/^\//, '') || undefined,
    charset: 'utf8mb4',
  };
}

/** Opens one connection to `url` that may run several statements per call (scripts, DDL). */
export async function connectForScripts(url: string, database?: string): Promise<mysql.Connection> {
  const options = connectionOptions(url);
  return mysql.createConnection({
    ...options,
    database: database ?? options.database,
    multipleStatements: true,
  });
}

/**
 * A Kysely instance on `url` for tests that read the database directly (information_schema checks),
 * with the connection options of the service: utf8mb4, dates as text, big numbers as numbers.
 */
// Tables outside the service's own types are read here (information_schema, _version twins).
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export function openKysely(url: string): Kysely<any> {
  const pool = createPool({
    ...connectionOptions(url),
    dateStrings: true,
    supportBigNumbers: true,
    bigNumberStrings: false,
    connectionLimit: 2,
  });
  return new Kysely({ dialect: new MysqlDialect({ pool }) });
}

/** Creates and fills a new OpenEyes-shaped database on the server of `adminUrl`. */
export async function createOpenEyesDatabase(
  adminUrl: string,
  options: CreateOpenEyesDatabaseOptions = {},
): Promise<OpenEyesTestDatabase> {
  const name = `cra_oe_${process.pid}_${Math.random().toString(36).slice(2, 10)}`;
  const admin = await connectForScripts(adminUrl);
  try {
    await admin.query(`create database \`${name}\` character set utf8 collate utf8_unicode_ci`);
  } finally {
    await admin.end();
  }
  const drop = async () => {
    const connection = await connectForScripts(adminUrl);
    try {
      await connection.query(`drop database if exists \`${name}\``);
    } finally {
      await connection.end();
    }
  };
  try {
    const connection = await connectForScripts(adminUrl, name);
    try {
      await connection.query(await readFile(SCHEMA_FILE, 'utf8'));
      if (options.isSeeded ?? true) await connection.query(await readFile(SEED_FILE, 'utf8'));
    } finally {
      await connection.end();
    }
  } catch (error) {
    await drop();
    throw error;
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return { name, url: url.toString(), drop };
}

if (import.meta.main) {
  const adminUrl = testMysqlUrl();
  if (adminUrl === undefined) {
    process.stderr.write('Set TEST_MYSQL_URL, for example mysql://cra:cra@127.0.0.1:3307/cra_ci\n');
    process.exit(2);
  }
  const created = await createOpenEyesDatabase(adminUrl);
  process.stdout.write(`${created.url}\n`);
}
