import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createUser, unique } from '../../../test/factories.ts';
import type { TestDatabase } from '../../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../../test/harness.ts';
import { runCli } from '../../../test/run-cli.ts';
import { AppError } from '../../errors.ts';
import { createAccount, createAuthenticator, setPassword } from './index.ts';

const basic = (username: string, password: string) =>
  `Basic ${Buffer.from(`${username}:${password}`).toString('base64')}`;

forEachDialect((dialect) => {
  describe(`passwords over bcrypt's 72 bytes [${dialect}]`, () => {
    let testDb: TestDatabase;
    before(async () => {
      testDb = await createTestDatabase(dialect);
    });
    after(() => testDb.drop());

    const isTooLong = (error: unknown) =>
      error instanceof AppError && error.code === 'bad_request' && /at most 72 bytes/.test(error.message);

    it('refuses a new account whose password is over 72 bytes, writing nothing', async () => {
      const username = unique('long');
      await assert.rejects(createAccount(testDb.db, { username, password: 'x'.repeat(73) }), isTooLong);
      // Bytes, not characters: 25 three-byte characters are 75 bytes.
      await assert.rejects(createAccount(testDb.db, { username, password: '€'.repeat(25) }), isTooLong);
      const rows = await testDb.db
        .selectFrom('user_authentication')
        .select('id')
        .where('username', '=', username)
        .execute();
      assert.deepEqual(rows, []);
    });

    it('accepts a password of exactly 72 bytes', async () => {
      const password = 'p'.repeat(72);
      const user = await createUser(testDb.db, { password });
      const authenticator = createAuthenticator(testDb.db, { cacheTtlMs: 0 });
      assert.equal((await authenticator.verify(basic(user.username, password))).ok, true);
    });

    it('refuses a password change to over 72 bytes, keeping the old password', async () => {
      const user = await createUser(testDb.db);
      await assert.rejects(setPassword(testDb.db, user.username, 'y'.repeat(100)), isTooLong);
      const authenticator = createAuthenticator(testDb.db, { cacheTtlMs: 0 });
      assert.equal((await authenticator.verify(user.authorization)).ok, true);
    });

    it('says so on the command line: user create exits non-zero with the rule', async () => {
      const result = await runCli(testDb.env, [
        'user',
        'create',
        unique('cli'),
        '--password',
        'z'.repeat(80),
      ]);
      assert.notEqual(result.status, 0);
      assert.match(result.stderr, /at most 72 bytes in UTF-8 \(this one has 80\)/);
    });
  });
});
