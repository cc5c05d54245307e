/**
 * The README's grants procedure as a database administrator follows it: `openeyes grants` written to a
 * file (`--output`, or `npm run -s` redirected), the account created, then the file loaded by the
 * `mariadb` client as it is.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../../src/config.ts';
import { openDatabase } from '../../src/db/database.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import { runCli } from '../run-cli.ts';
import type { OpenEyesTestDatabase } from './openeyes-database.ts';
import { connectForScripts, createOpenEyesDatabase, testMysqlUrl } from './openeyes-database.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const adminUrl = testMysqlUrl();
const hasClient = spawnSync('sh', ['-c', 'command -v mariadb']).status === 0;
const skip =
  adminUrl === undefined
    ? 'TEST_MYSQL_URL is not set (no MariaDB/MySQL server)'
    : hasClient
      ? false
      : 'the mariadb client is not installed';

describe('openeyes grants as a script the mariadb client loads', { skip }, () => {
  let oe: OpenEyesTestDatabase;
  let dir: string;
  let env: Record<string, string>;
  const account = `cra_g_${Math.random().toString(36).slice(2, 10)}`;
  const accountName = `'${account}'@'127.0.0.1'`;

  before(async () => {
    oe = await createOpenEyesDatabase(adminUrl!);
    dir = await mkdtemp(path.join(tmpdir(), 'cra-grants-'));
    env = { DATABASE_URL: oe.url, DATABASE_SCHEMA: 'openeyes', LOG_LEVEL: 'silent' };
    const database = await openDatabase(loadConfig(env).database, { poolSize: 1 });
    try {
      await migrateToLatest(database);
    } finally {
      await database.close();
    }
  });
  after(async () => {
    const connection = await connectForScripts(oe.url);
    await connection.query(`drop user if exists ${accountName}`).finally(() => connection.end());
    await oe?.drop();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('writes with --output, and with npm run -s, a file that loads once the account exists', async () => {
    const file = path.join(dir, 'cra-grants.sql');
    const written = await runCli(env, ['openeyes', 'grants', accountName, '--output', file]);
    assert.equal(written.status, 0, written.stderr);
    assert.equal(written.stdout, '');
    const script = await readFile(file, 'utf8');
    assert.match(script, /^GRANT [A-Z, ]+ ON `/);
    // Written by the durable writer: renamed into place, no temporary file left beside it.
    assert.deepEqual(
      (await readdir(dir)).filter((name) => name.startsWith('cra-grants.sql')),
      ['cra-grants.sql'],
    );

    // The README's other form: npm's own header lines are left out with -s.
    const npm = spawnSync('npm', ['run', '-s', 'cli', '--', 'openeyes', 'grants', accountName], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      encoding: 'utf8',
    });
    assert.equal(npm.status, 0, npm.stderr);
    assert.equal(npm.stdout, script);

    const target = new URL(oe.url);
    const client = (input: string) =>
      spawnSync(
        'mariadb',
        [
          '--no-defaults',
          '-h',
          target.hostname,
          '-P',
          target.port,
          '-u',
          decodeURIComponent(target.username),
          `-p${decodeURIComponent(target.password)}`,
          oe.name,
        ],
        { input, encoding: 'utf8' },
      );
    const created = client(`CREATE USER ${accountName} IDENTIFIED BY 'service-password';`);
    assert.equal(created.status, 0, created.stderr);
    const loaded = client(script);
    assert.equal(loaded.status, 0, loaded.stderr);
    const shown = client(`SHOW GRANTS FOR ${accountName};`);
    assert.match(shown.stdout, new RegExp(`GRANT SELECT ON \`${oe.name}\`\\.\`patient_identifier_type\``));
    // The PAS endpoint writes patients (never deletes them).
    assert.match(shown.stdout, new RegExp(`GRANT SELECT, INSERT, UPDATE ON \`${oe.name}\`\\.\`patient\``));
  });
});
