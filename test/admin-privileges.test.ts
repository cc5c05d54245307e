/**
 * The administrator's account as docs/OPERATIONS.md ("The administrator's account") gives it, the
 * statements taken from the docs (the README shows the same MariaDB ones): on MariaDB it migrates an
 * OpenEyes database, creates the service's account and loads the `openeyes grants` file, where an account
 * with `ALL ON <database>.*` alone fails both steps (ERROR 1227, ERROR 1142); on PostgreSQL an account
 * that is not a superuser creates the service's account and the database it owns, and the service
 * migrates it.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import type { OpenEyesTestDatabase } from './openeyes/openeyes-database.ts';
import { connectForScripts, createOpenEyesDatabase, testMysqlUrl } from './openeyes/openeyes-database.ts';
import { runCli } from './run-cli.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const SECTION = "## The administrator's account";
const suffix = () => Math.random().toString(36).slice(2, 10);

/** The ```sql blocks of the docs section `heading` (up to the next `## `). */
async function sqlBlocksOf(file: string, heading: string): Promise<string[]> {
  const text = await readFile(path.join(ROOT, file), 'utf8');
  const at = text.indexOf(`\n${heading}\n`);
  assert.ok(at >= 0, `no "${heading}" in ${file}`);
  const rest = text.slice(at + heading.length + 2);
  const end = rest.search(/^## /m);
  const section = end < 0 ? rest : rest.slice(0, end);
  return [...section.matchAll(/```sql\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

/** The statements of a SQL block. */
function statementsOf(block: string): string[] {
  return block
    .split(/;\s*\n/)
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** `url` with other credentials (and database). */
function withAccount(url: string, user: string, password: string, database?: string): string {
  const target = new URL(url);
  target.username = user;
  target.password = password;
  if (database !== undefined) target.pathname = `/${database}`;
  return target.toString();
}

const mysqlUrl = testMysqlUrl();
describe(
  "the administrator's account on MariaDB (an OpenEyes database)",
  {
    skip: mysqlUrl === undefined ? 'TEST_MYSQL_URL is not set' : false,
  },
  () => {
    let oe: OpenEyesTestDatabase;
    let dir: string;
    const id = suffix();
    const accounts = [`cra_adm_all_${id}`, `cra_adm_${id}`, `cra_svc_${id}`, `cra_svc2_${id}`].map(
      (name) => `'${name}'@'127.0.0.1'`,
    );
    const [allOnlyAdmin, admin, service, otherService] = accounts as [string, string, string, string];

    before(async () => {
      oe = await createOpenEyesDatabase(mysqlUrl!);
      dir = await mkdtemp(path.join(tmpdir(), 'cra-admin-priv-'));
    });
    after(async () => {
      if (oe !== undefined) {
        const root = await connectForScripts(oe.url);
        try {
          for (const account of accounts) await root.query(`drop user if exists ${account}`);
        } finally {
          await root.end();
        }
        await oe.drop();
      }
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    });

    it('creates the service account and loads its grants with the documented privileges only', async () => {
      const blocks = await sqlBlocksOf('docs/OPERATIONS.md', SECTION);
      const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
      assert.ok(readme.includes(`\`\`\`sql\n${blocks[0]}\`\`\``), 'the README shows the same statements');
      const forTest = (statement: string) =>
        statement.replaceAll("'cra_admin'@'10.0.0.%'", admin).replaceAll('openeyes.*', `\`${oe.name}\`.*`);

      const env = { DATABASE_SCHEMA: 'openeyes', LOG_LEVEL: 'silent' };
      const root = await connectForScripts(oe.url);
      try {
        // ALL on the database alone: both of the administrator's steps are refused.
        await root.query(`create user ${allOnlyAdmin} identified by 'admin-secret'`);
        await root.query(`grant all privileges on \`${oe.name}\`.* to ${allOnlyAdmin}`);
        await root.query(`create user ${otherService} identified by 'service-secret'`);
        for (const statement of statementsOf(blocks[0]!)) await root.query(forTest(statement));
      } finally {
        await root.end();
      }
      const allOnlyUrl = withAccount(oe.url, `cra_adm_all_${id}`, 'admin-secret');
      const adminUrl = withAccount(oe.url, `cra_adm_${id}`, 'admin-secret');

      const migrated = await runCli({ ...env, DATABASE_URL: adminUrl }, ['migrate']);
      assert.equal(migrated.status, 0, migrated.stderr);
      const file = path.join(dir, 'cra-grants.sql');
      const printed = await runCli({ ...env, DATABASE_URL: adminUrl }, [
        'openeyes',
        'grants',
        service,
        '--output',
        file,
      ]);
      assert.equal(printed.status, 0, printed.stderr);
      const grants = await readFile(file, 'utf8');

      const allOnly = await connectForScripts(allOnlyUrl);
      try {
        await assert.rejects(
          allOnly.query(`create user ${service} identified by 'x'`),
          (error: { errno?: number }) => error.errno === 1227,
        );
        await assert.rejects(
          allOnly.query(grants.replaceAll(service, otherService)),
          (error: { errno?: number }) => error.errno === 1142,
        );
      } finally {
        await allOnly.end();
      }

      const administrator = await connectForScripts(adminUrl);
      try {
        await administrator.query(`create user ${service} identified by 'service-secret'`);
        await administrator.query(grants);
      } finally {
        await administrator.end();
      }
      const serviceUrl = withAccount(oe.url, `cra_svc_${id}`, 'service-secret');
      const check = await runCli({ ...env, DATABASE_URL: serviceUrl }, ['openeyes', 'check']);
      assert.equal(check.status, 0, check.stderr);
    });
  },
);

const postgresUrl = process.env.TEST_DATABASE_URL?.trim() || undefined;
describe(
  "the administrator's account on PostgreSQL",
  {
    skip: postgresUrl === undefined ? 'TEST_DATABASE_URL is not set' : false,
  },
  () => {
    const id = suffix();
    const names = { admin: `cra_adm_${id}`, app: `cra_app_${id}`, database: `cra_rec_${id}` };
    const forTest = (statement: string) =>
      statement
        .replace(/\bcra_admin\b/g, names.admin)
        .replace(/\bapp\b/g, names.app)
        .replace(/\brecords\b/g, names.database);

    after(async () => {
      const superuser = new pg.Client({ connectionString: postgresUrl });
      await superuser.connect();
      try {
        await superuser.query(`drop database if exists ${names.database}`);
        await superuser.query(`drop role if exists ${names.app}`);
        await superuser.query(`drop role if exists ${names.admin}`);
      } finally {
        await superuser.end();
      }
    });

    it('creates the account and its database without a superuser, and the service migrates it', async () => {
      const [forSuperuser, forAdmin] = (await sqlBlocksOf('docs/OPERATIONS.md', SECTION)).slice(1);
      assert.ok(forSuperuser !== undefined && forAdmin !== undefined, 'two PostgreSQL blocks');
      const superuser = new pg.Client({ connectionString: postgresUrl });
      await superuser.connect();
      try {
        for (const statement of statementsOf(forSuperuser)) await superuser.query(forTest(statement));
      } finally {
        await superuser.end();
      }
      const administrator = new pg.Client({
        connectionString: withAccount(postgresUrl!, names.admin, 'admin-secret', 'postgres'),
      });
      await administrator.connect();
      try {
        for (const statement of statementsOf(forAdmin)) await administrator.query(forTest(statement));
      } finally {
        await administrator.end();
      }
      const migrated = await runCli(
        { DATABASE_URL: withAccount(postgresUrl!, names.app, 'secret', names.database), LOG_LEVEL: 'silent' },
        ['migrate'],
      );
      assert.equal(migrated.status, 0, migrated.stderr);
    });
  },
);
