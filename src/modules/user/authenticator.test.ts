import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createUser } from '../../../test/factories.ts';
import type { TestDatabase } from '../../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../../test/harness.ts';
import { createAuthenticator, parseBasicHeader } from './index.ts';

describe('parseBasicHeader', () => {
  const encode = (text: string) => `Basic ${Buffer.from(text).toString('base64')}`;
  it('splits at the first colon, keeping colons in the password', () => {
    assert.deepEqual(parseBasicHeader(encode('api:a:b:c')), { username: 'api', password: 'a:b:c' });
  });
  it('accepts the scheme in any case', () => {
    assert.deepEqual(parseBasicHeader(`bAsIc ${Buffer.from('u:p').toString('base64')}`), {
      username: 'u',
      password: 'p',
    });
  });
  it('refuses other schemes, bad base64, no colon, empty user and invalid UTF-8', () => {
    for (const header of [
      `Bearer ${Buffer.from('u:p').toString('base64')}`,
      'Basic ***',
      encode('nocolon'),
      encode(':password'),
      `Basic ${Buffer.from([0x75, 0x3a, 0xff, 0xfe]).toString('base64')}`,
      encode('\u0000:\u0000'),
      encode('ap\u0000i:pw'),
      undefined,
    ]) {
      assert.equal(parseBasicHeader(header), undefined, String(header));
    }
  });
});

forEachDialect((dialect) => {
  describe(`Authenticator [${dialect}]`, () => {
    let testDb: TestDatabase;
    before(async () => {
      testDb = await createTestDatabase(dialect);
    });
    after(() => testDb.drop());

    it('shares one verification between concurrent requests with the same uncached header', async () => {
      const user = await createUser(testDb.db);
      const authenticator = createAuthenticator(testDb.db, { cacheTtlMs: 60_000 });
      const results = await Promise.all(
        Array.from({ length: 16 }, () => authenticator.verify(user.authorization)),
      );
      const principals = new Set(results.map((r) => (r.ok ? r.principal : undefined)));
      assert.equal(principals.size, 1, 'every caller got the principal of the one shared verification');
      assert.ok(results.every((r) => r.ok));
    });

    it('never caches a failure: the right password works right after a wrong one', async () => {
      const user = await createUser(testDb.db);
      const authenticator = createAuthenticator(testDb.db, { cacheTtlMs: 60_000 });
      const wrong = await authenticator.verify(
        `Basic ${Buffer.from(`${user.username}:nope`).toString('base64')}`,
      );
      assert.deepEqual(wrong, { ok: false, reason: 'bad_password', username: user.username });
      assert.equal((await authenticator.verify(user.authorization)).ok, true);
    });

    it('forgets cached verifications after the TTL', async () => {
      const user = await createUser(testDb.db);
      const authenticator = createAuthenticator(testDb.db, { cacheTtlMs: 1 });
      assert.equal((await authenticator.verify(user.authorization)).ok, true);
      await testDb.db.deleteFrom('user_authentication').where('user_id', '=', user.userId).execute();
      await new Promise((resolve) => setTimeout(resolve, 5));
      const after = await authenticator.verify(user.authorization);
      assert.equal(after.ok, false);
    });
  });
});
