import assert from 'node:assert/strict';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { verifyPassword } from '../src/modules/user/index.ts';
import { countRows } from './factories.ts';
import type { TestDatabase } from './harness.ts';
import { createTestDatabase, forEachDialect } from './harness.ts';
import { runCli } from './run-cli.ts';

/** Runs `npm run cli -- ...args` as a child process (same Node binary, no npm in between). */

async function loginOf(t: TestDatabase, username: string) {
  return t.db
    .selectFrom('user_authentication as ua')
    .innerJoin('user as u', 'u.id', 'ua.user_id')
    .select(['ua.user_id', 'ua.password_hash', 'ua.active', 'u.active as user_active'])
    .where('ua.username', '=', username)
    .executeTakeFirst();
}

async function itemsOf(t: TestDatabase, userId: number): Promise<string[]> {
  const rows = await t.db
    .selectFrom('authassignment')
    .select('itemname')
    .where('userid', '=', String(userId))
    .execute();
  return rows.map((r) => r.itemname).sort();
}

forEachDialect((dialect) => {
  // The tests touch different rows, so they run side by side: each spawn pays Node's start-up.
  describe(`npm run cli (${dialect})`, { concurrency: true }, () => {
    let t: TestDatabase;
    before(async () => {
      t = await createTestDatabase(dialect);
    });
    after(async () => {
      await t.drop();
    });

    it('prints help with exit 0, and refuses unknown commands and missing arguments with exit 2', async () => {
      const [help, unknown, missing, badNumber] = await Promise.all([
        runCli(t.env, ['help']),
        runCli(t.env, ['frobnicate']),
        runCli(t.env, ['role', 'grant', 'someone']),
        runCli(t.env, ['demo-data', '--patients', 'many']),
      ]);
      assert.equal(help.status, 0);
      assert.match(help.stdout, /user create <username>/);
      assert.match(help.stdout, /demo-data --patients N/);
      assert.equal(unknown.status, 2);
      assert.match(unknown.stderr, /Unknown command: frobnicate/);
      assert.equal(badNumber.status, 2);
      assert.match(badNumber.stderr, /--patients must be a whole number/);
      assert.equal(missing.status, 2);
      assert.match(missing.stderr, /missing <item>\nUsage: npm run cli -- role grant <username> <item>/);
    });

    it('migrate reports an up-to-date database', async () => {
      const result = await runCli(t.env, ['migrate']);
      assert.equal(result.status, 0);
      assert.match(result.stdout, /Database is up to date/);
    });

    it('creates, disables, enables and re-passwords a user, never printing the password', async () => {
      const password = 'pipe:d secret';
      const created = await runCli(
        t.env,
        ['user', 'create', 'clara', '--role', 'API access', '--role', 'User'],
        `${password}\n`,
      );
      assert.equal(created.status, 0, created.stderr);
      assert.doesNotMatch(created.stdout + created.stderr, /pipe:d secret/);
      let login = await loginOf(t, 'clara');
      assert.ok(login !== undefined);
      assert.equal(await verifyPassword(password, login.password_hash), true);
      assert.deepEqual(await itemsOf(t, login.user_id), ['API access', 'User']);

      assert.equal((await runCli(t.env, ['user', 'disable', 'clara'])).status, 0);
      login = await loginOf(t, 'clara');
      assert.deepEqual([login?.active, login?.user_active], [0, 0]);
      assert.equal((await runCli(t.env, ['user', 'enable', 'clara'])).status, 0);
      login = await loginOf(t, 'clara');
      assert.deepEqual([login?.active, login?.user_active], [1, 1]);

      const changed = await runCli(t.env, ['user', 'password', 'clara'], 'n3w:pass\n');
      assert.equal(changed.status, 0, changed.stderr);
      login = await loginOf(t, 'clara');
      assert.equal(await verifyPassword('n3w:pass', login!.password_hash), true);

      const again = await runCli(t.env, ['user', 'create', 'clara', '--password', 'x']);
      assert.equal(again.status, 1);
      assert.match(again.stderr, /already exists/);
    });

    it('prints a generated password, which then verifies; grants and revokes RBAC items', async () => {
      const result = await runCli(t.env, ['user', 'create', 'gen', '--generate-password']);
      assert.equal(result.status, 0, result.stderr);
      const generated = /Generated password: (\S+)/.exec(result.stdout)?.[1];
      assert.ok(generated !== undefined);
      const login = (await loginOf(t, 'gen'))!;
      assert.equal(await verifyPassword(generated, login.password_hash), true);

      assert.equal((await runCli(t.env, ['role', 'grant', 'gen', 'OprnApi'])).status, 0);
      assert.deepEqual(await itemsOf(t, login.user_id), ['OprnApi']);
      const unknown = await runCli(t.env, ['role', 'grant', 'gen', 'NoSuchRole']);
      assert.equal(unknown.status, 1);
      assert.match(unknown.stderr, /Unknown role/);
      assert.equal((await runCli(t.env, ['role', 'revoke', 'gen', 'OprnApi'])).status, 0);
      assert.deepEqual(await itemsOf(t, login.user_id), []);
    });

    it('imports a dataset, refuses a bad one with a located error and exit 1, exports, and generates demo patients', async () => {
      const dir = path.dirname(t.filesDir);
      const good = path.join(dir, 'good.json');
      const bad = path.join(dir, 'bad.json');
      const exported = path.join(dir, 'out.json');
      await writeFile(
        good,
        JSON.stringify({
          format: 'clinical-records-dataset/1',
          tables: {
            patient: [{ id: 3000, contact_id: 3000, dob: '1970-01-01' }],
            contact: [{ id: 3000, first_name: 'Cli', last_name: 'Imported' }],
          },
        }),
      );
      await writeFile(
        bad,
        JSON.stringify({
          format: 'clinical-records-dataset/1',
          tables: {
            contact: [{ id: 3001, first_name: 'Never' }],
            protected_file: [{ id: 3001, uid: 'ef'.repeat(20), content: 'AAEC' }],
            patient: [{ id: 3001, contact_id: 4242 }],
          },
        }),
      );
      const refused = await runCli(t.env, ['import', bad]);
      assert.equal(refused.status, 1);
      assert.match(refused.stderr, /tables\.patient\[0\]\.contact_id: broken reference/);
      assert.equal(await countRows(t.db, 'protected_file'), 0);
      const never = await t.db.selectFrom('contact').select('id').where('id', '=', 3001).execute();
      assert.deepEqual(never, []);
      assert.deepEqual(await readdir(t.filesDir).catch(() => []), []);

      const imported = await runCli(t.env, ['import', good]);
      assert.equal(imported.status, 0, imported.stderr);
      assert.match(imported.stdout, /Imported 2 rows/);

      const result = await runCli(t.env, ['export', exported, '--tables', 'contact,patient']);
      assert.equal(result.status, 0, result.stderr);
      const document = JSON.parse(await readFile(exported, 'utf8')) as { tables: Record<string, unknown[]> };
      assert.deepEqual(Object.keys(document.tables), ['contact', 'patient']);
      assert.equal(document.tables.patient?.length, 1);
      const unknown = await runCli(t.env, ['export', exported, '--tables', 'nope']);
      assert.equal(unknown.status, 2);

      // Sequential here: both add patients.
      const before = await countRows(t.db, 'patient');
      const demo = await runCli(t.env, ['demo-data', '--patients', '50']);
      assert.equal(demo.status, 0, demo.stderr);
      assert.match(demo.stdout, /Added 50 demo patients .* in \d+\.\d s/);
      assert.equal(await countRows(t.db, 'patient'), before + 50);
    });
  });
});
