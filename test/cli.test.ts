import assert from 'node:assert/strict';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { readAuditEvents } from '../src/modules/audit/index.ts';
import { verifyPassword } from '../src/modules/user/index.ts';
import { countRows } from './factories.ts';
import type { TestDatabase } from './harness.ts';
import { createTestDatabase, forEachDialect } from './harness.ts';
import { runCli, spawnCli } from './run-cli.ts';

/** Long enough for the default policy (12), absent from the common-password list. */
const GOOD_PASSWORD = 'pipe:d secret 42';

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

/** The audit rows of CLI commands (user_id null, request id `cli-...`), oldest first. */
async function cliAuditRows(t: TestDatabase) {
  const rows = [];
  for await (const r of readAuditEvents(t.db, { since: new Date('2000-01-01') })) {
    if (r.request_id.startsWith('cli-')) rows.push(r);
  }
  return rows;
}

describe('npm run cli as a process', () => {
  let t: TestDatabase;
  before(async () => {
    t = await createTestDatabase('sqlite');
  });
  after(async () => {
    await t.drop();
  });

  it('prints help with exit 0 and refuses an unknown command with exit 2', async () => {
    const [help, unknown] = await Promise.all([spawnCli(t.env, ['help']), spawnCli(t.env, ['frobnicate'])]);
    assert.equal(help.status, 0);
    assert.match(help.stdout, /user create <username>/);
    assert.match(help.stdout, /demo-data --patients N/);
    assert.equal(unknown.status, 2);
    assert.match(unknown.stderr, /Unknown command: frobnicate/);
  });

  it('opens the database of DATABASE_URL and reports it up to date', async () => {
    const result = await spawnCli(t.env, ['migrate']);
    assert.equal(result.status, 0, result.stderr);
    assert.match(result.stdout, /Database is up to date/);
  });
});

forEachDialect((dialect) => {
  describe(`npm run cli (${dialect})`, () => {
    let t: TestDatabase;
    before(async () => {
      t = await createTestDatabase(dialect);
    });
    after(async () => {
      await t.drop();
    });

    it('refuses missing arguments, bad numbers and a bad configuration with exit 2', async () => {
      const missing = await runCli(t.env, ['role', 'grant', 'someone']);
      assert.equal(missing.status, 2);
      assert.match(missing.stderr, /missing <item>\nUsage: npm run cli -- role grant <username> <item>/);
      const badNumber = await runCli(t.env, ['demo-data', '--patients', 'many']);
      assert.equal(badNumber.status, 2);
      assert.match(badNumber.stderr, /--patients must be a whole number/);
      const badPolicy = await runCli({ ...t.env, PASSWORD_MAX_LENGTH: '32' }, ['user', 'list']);
      assert.equal(badPolicy.status, 2);
      assert.match(badPolicy.stderr, /PASSWORD_MAX_LENGTH must be a whole number from 64/);
    });

    it('creates, disables, enables and re-passwords a user, never printing the password', async () => {
      const created = await runCli(
        t.env,
        ['user', 'create', 'clara', '--role', 'API access', '--role', 'User'],
        `${GOOD_PASSWORD}\n`,
      );
      assert.equal(created.status, 0, created.stderr);
      assert.doesNotMatch(created.stdout + created.stderr, /pipe:d secret/);
      let login = await loginOf(t, 'clara');
      assert.ok(login !== undefined);
      assert.equal(await verifyPassword(GOOD_PASSWORD, login.password_hash), true);
      assert.deepEqual(await itemsOf(t, login.user_id), ['API access', 'User']);

      assert.equal((await runCli(t.env, ['user', 'disable', 'clara'])).status, 0);
      login = await loginOf(t, 'clara');
      assert.deepEqual([login?.active, login?.user_active], [0, 0]);
      assert.equal((await runCli(t.env, ['user', 'enable', 'clara'])).status, 0);
      login = await loginOf(t, 'clara');
      assert.deepEqual([login?.active, login?.user_active], [1, 1]);

      const changed = await runCli(t.env, ['user', 'password', 'clara'], 'n3w:pass-phrase\n');
      assert.equal(changed.status, 0, changed.stderr);
      login = await loginOf(t, 'clara');
      assert.equal(await verifyPassword('n3w:pass-phrase', login!.password_hash), true);

      const again = await runCli(t.env, ['user', 'create', 'clara', '--password', GOOD_PASSWORD]);
      assert.equal(again.status, 1);
      assert.match(again.stderr, /already exists/);
    });

    it('refuses passwords the policy does not accept, saying why, and writes nothing', async () => {
      const cases: [string, RegExp][] = [
        ['x', /at least 12 characters/],
        ['short:pw', /at least 12 characters/],
        ['qwertyuiop12', /commonly used passwords/],
        ['1QAZ2WSX3EDC', /commonly used passwords/],
        ['my-dora-password', /must not contain the username/],
        ['z'.repeat(20), /one character repeated/],
        ['a1'.repeat(65), /at most 128 characters/],
      ];
      const usersBefore = await countRows(t.db, 'user');
      for (const [password, reason] of cases) {
        const result = await runCli(t.env, ['user', 'create', 'dora', '--password', password]);
        assert.equal(result.status, 1, password);
        assert.match(result.stderr, /^Password refused: /m);
        assert.match(result.stderr, reason, password);
        assert.equal(result.stderr.includes(password), false, 'the password is never echoed');
      }
      assert.equal(await countRows(t.db, 'user'), usersBefore);
      assert.equal(await loginOf(t, 'dora'), undefined);

      // 64 characters is always allowed, and the limits are configurable.
      const long = await runCli(t.env, ['user', 'create', 'dora', '--password', 'Ab3$'.repeat(16)]);
      assert.equal(long.status, 0, long.stderr);
      const strict = { ...t.env, PASSWORD_MIN_LENGTH: '20' };
      const tooShort = await runCli(strict, ['user', 'password', 'dora'], 'seventeen chars!!\n');
      assert.equal(tooShort.status, 1);
      assert.match(tooShort.stderr, /at least 20 characters/);
      const hash = (await loginOf(t, 'dora'))!.password_hash;
      assert.equal(await verifyPassword('Ab3$'.repeat(16), hash), true, 'the old password still works');
      const lax = { ...t.env, PASSWORD_REFUSE_COMMON: 'off' };
      const common = await runCli(lax, ['user', 'password', 'dora', '--password', 'qwertyuiop12']);
      assert.equal(common.status, 0, common.stderr);
      const generated = await runCli(strict, ['user', 'password', 'dora', '--generate-password']);
      assert.equal(generated.status, 0, generated.stderr);
      assert.match(generated.stdout, /Generated password: \S{24}\n/);
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

    it('lists who has access: user list and role list, active or not, through which role', async () => {
      const create = (name: string, ...roles: string[]) =>
        runCli(t.env, ['user', 'create', name, ...roles.flatMap((r) => ['--role', r])], `${GOOD_PASSWORD}\n`);
      assert.equal((await create('lister-a', 'API access')).status, 0);
      assert.equal((await create('lister-b', 'OprnApi')).status, 0);
      assert.equal((await runCli(t.env, ['user', 'disable', 'lister-b'])).status, 0);
      const idA = (await loginOf(t, 'lister-a'))!.user_id;
      // An imported OpenEyes login date is shown when the audit trail has nothing newer.
      await t.db
        .updateTable('user_authentication')
        .set({ last_successful_login_date: '2025-03-04 05:06:07' })
        .where('user_id', '=', idA)
        .execute();

      const users = await runCli(t.env, ['user', 'list']);
      assert.equal(users.status, 0, users.stderr);
      const lines = users.stdout.trim().split('\n');
      assert.equal(lines[0], 'username\tuser_id\tactive\titems\tlast_activity\tpassword_changed');
      const lineOf = (name: string) => lines.find((l) => l.startsWith(`${name}\t`))?.split('\t');
      assert.deepEqual(lineOf('lister-a')?.slice(0, 5), [
        'lister-a',
        String(idA),
        'yes',
        'API access',
        '2025-03-04 05:06:07',
      ]);
      assert.deepEqual(lineOf('lister-b')?.slice(2, 5), ['no', 'OprnApi', '-']);
      assert.doesNotMatch(users.stdout, /\$2[aby]\$/, 'no password hash is printed');

      const roles = await runCli(t.env, ['role', 'list', 'OprnApi']);
      assert.equal(roles.status, 0, roles.stderr);
      const roleLines = roles.stdout.trim().split('\n');
      assert.equal(roleLines[0], 'item\tkind\tusername\tuser_id\tactive\tthrough');
      assert.ok(roleLines.includes(`OprnApi\toperation\tlister-a\t${idA}\tyes\tAPI access`), roles.stdout);
      assert.ok(
        roleLines.some((l) => /^OprnApi\toperation\tlister-b\t\d+\tno\tdirect$/.test(l)),
        roles.stdout,
      );
      const all = await runCli(t.env, ['role', 'list']);
      assert.match(all.stdout, /^TaskApi\ttask\tlister-a\t\d+\tyes\tAPI access$/m);
      const unknown = await runCli(t.env, ['role', 'list', 'NoSuchRole']);
      assert.equal(unknown.status, 2);
    });

    it('writes an audit row for each administrative command, refusals included, naming the operator', async () => {
      const before = (await cliAuditRows(t)).length;
      const env = { ...t.env, SUDO_USER: 'alice-admin' };
      assert.equal((await runCli(env, ['user', 'create', 'audited', '--password', GOOD_PASSWORD])).status, 0);
      const id = (await loginOf(t, 'audited'))!.user_id;
      assert.equal((await runCli(env, ['role', 'grant', 'audited', 'OprnApi'])).status, 0);
      assert.equal((await runCli(env, ['role', 'revoke', 'audited', 'OprnApi'])).status, 0);
      assert.equal((await runCli(env, ['user', 'disable', 'audited'])).status, 0);
      assert.equal((await runCli(env, ['user', 'enable', 'audited'])).status, 0);
      assert.equal((await runCli(env, ['user', 'password', 'audited'], 'short\n')).status, 1);
      assert.equal((await runCli(env, ['user', 'password', 'nobody-here'], `${GOOD_PASSWORD}\n`)).status, 1);
      assert.equal((await runCli(env, ['user', 'list'])).status, 0);

      const rows = (await cliAuditRows(t)).slice(before);
      assert.deepEqual(
        rows.map((r) => [r.action, r.outcome, r.target_type, r.target_ids, r.detail]),
        [
          ['user.create', 200, 'user', [id], null],
          ['role.grant', 200, 'user', [id], 'OprnApi'],
          ['role.revoke', 200, 'user', [id], 'OprnApi'],
          ['user.disable', 200, 'user', [id], null],
          ['user.enable', 200, 'user', [id], null],
          ['user.password', 400, 'user', [id], null],
          ['user.password', 404, 'user', [], null],
        ],
      );
      for (const r of rows) {
        assert.equal(r.username, 'alice-admin');
        assert.equal(r.user_id, null);
        assert.match(r.request_id, /^cli-[0-9a-f-]{36}$/);
      }
      assert.equal(new Set(rows.map((r) => r.request_id)).size, rows.length, 'one id per command line');
      assert.doesNotMatch(JSON.stringify(rows), /short|pipe:d/, 'no password in the trail');
    });

    it('imports from stdin with progress and a summary, warning of weak passwords without refusing them', async () => {
      const document = {
        format: 'clinical-records-dataset/1',
        tables: {
          user: [{ id: 4000, first_name: 'Migrated', last_name: 'Account' }],
          user_authentication: [{ id: 4000, user_id: 4000, username: 'weakling', password: 'tiny5' }],
        },
      };
      const result = await runCli(t.env, ['import', '-'], JSON.stringify(document), {
        progressIntervalMs: 5,
      });
      assert.equal(result.status, 0, result.stderr);
      assert.match(result.stderr, /^Reading 100% \| [\d.]+ \/ [\d.]+ MB \| /m);
      assert.match(result.stderr, /^Checking 100% \| /m);
      assert.match(result.stderr, /^Importing 100% \| 2 \/ 2 rows \| /m);
      assert.match(
        result.stderr,
        /^Warning: tables\.user_authentication\[0\]\.password: the password of weakling does not meet the password policy \(it must be at least 12 characters long\); imported as given$/m,
      );
      assert.doesNotMatch(result.stdout + result.stderr, /tiny5/);
      assert.match(
        result.stdout,
        /^Imported 2 rows, updated 0, 0 already present; 0 files written in \d+ s$/m,
      );
      assert.equal(await verifyPassword('tiny5', (await loginOf(t, 'weakling'))!.password_hash), true);
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
      assert.match(result.stdout, /^Exported 2 rows from 2 tables to .* in \d+ s$/m);
      assert.match(result.stderr, /^Exporting 100% \| 2 \/ 2 rows \| [\d,]+ rows\/s \| elapsed \d+ s$/m);
      const document = JSON.parse(await readFile(exported, 'utf8')) as { tables: Record<string, unknown[]> };
      assert.deepEqual(Object.keys(document.tables), ['contact', 'patient']);
      assert.equal(document.tables.patient?.length, 1);
      const unknown = await runCli(t.env, ['export', exported, '--tables', 'nope']);
      assert.equal(unknown.status, 2);

      const before = await countRows(t.db, 'patient');
      const demo = await runCli(t.env, ['demo-data', '--patients', '50']);
      assert.equal(demo.status, 0, demo.stderr);
      assert.match(demo.stdout, /Added 50 demo patients .* in \d+\.\d s/);
      assert.match(demo.stderr, /^Adding demo patients 100% \| 50 \/ 50 patients \| /m);
      assert.equal(await countRows(t.db, 'patient'), before + 50);
    });
  });
});
