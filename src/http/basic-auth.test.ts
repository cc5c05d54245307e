import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { itEnforcesBasicAuth } from '../../test/auth-cases.ts';
import { basicHeader, createUser } from '../../test/factories.ts';
import type { TestApp } from '../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../test/harness.ts';
import { hashPassword } from '../modules/user/index.ts';

forEachDialect((dialect) => {
  describe(`Basic auth guard [${dialect}]`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect, {
        extraRoutes: (scope, { basicAuth }) => {
          scope.get(
            '/test/protected',
            { preHandler: basicAuth({ operation: 'OprnApi' }) },
            async (request) => ({
              userId: request.principal?.userId,
            }),
          );
          scope.get('/test/authenticated', { preHandler: basicAuth() }, async (request) => ({
            userId: request.principal?.userId,
          }));
        },
      });
    });
    after(() => app.close());

    describe('on a route that needs OprnApi', () => {
      itEnforcesBasicAuth(() => app, { method: 'GET', path: '/test/protected', operation: 'OprnApi' });
    });
    describe('on a route that needs any authenticated user', () => {
      itEnforcesBasicAuth(() => app, { method: 'GET', path: '/test/authenticated' });
    });

    it('grants OprnApi through the role chain API access -> TaskApi -> OprnApi', async () => {
      const user = await createUser(app.db, { roles: ['API access'] });
      const response = await app.request('/test/protected', {
        headers: { authorization: user.authorization },
      });
      assert.equal(response.status, 200);
      assert.deepEqual(await response.json(), { userId: user.userId });
    });

    it('grants OprnApi assigned directly, and refuses a user holding only OprnLogin', async () => {
      const direct = await createUser(app.db, { roles: ['OprnApi'] });
      assert.equal(
        (await app.request('/test/protected', { headers: { authorization: direct.authorization } })).status,
        200,
      );
      const loginOnly = await createUser(app.db, { roles: ['User'] });
      assert.equal(
        (await app.request('/test/protected', { headers: { authorization: loginOnly.authorization } }))
          .status,
        403,
      );
    });

    it('verifies an OpenEyes $2y$ hash as it is', async () => {
      const user = await createUser(app.db);
      const hash = (await hashPassword('legacy-secret')).replace(/^\$2[ab]\$/, '$2y$');
      assert.match(hash, /^\$2y\$/);
      await app.db
        .updateTable('user_authentication')
        .set({ password_hash: hash })
        .where('user_id', '=', user.userId)
        .execute();
      app.deps.authenticator.clear();
      const response = await app.request('/test/protected', {
        headers: { authorization: basicHeader(user.username, 'legacy-secret') },
      });
      assert.equal(response.status, 200);
    });

    it('answers from the credential cache without reading the database again', async () => {
      const user = await createUser(app.db);
      const first = await app.request('/test/protected', { headers: { authorization: user.authorization } });
      assert.equal(first.status, 200);
      // Removing the login proves the next answer comes from the cache, not from a new verification.
      await app.db.deleteFrom('user_authentication').where('user_id', '=', user.userId).execute();
      const cached = await app.request('/test/protected', { headers: { authorization: user.authorization } });
      assert.equal(cached.status, 200);
      app.deps.authenticator.clear();
      const uncached = await app.request('/test/protected', {
        headers: { authorization: user.authorization },
      });
      assert.equal(uncached.status, 401);
    });

    it('matches the username case-insensitively', async () => {
      const user = await createUser(app.db);
      const response = await app.request('/test/protected', {
        headers: { authorization: basicHeader(user.username.toUpperCase(), user.password) },
      });
      assert.equal(response.status, 200);
    });
  });

  describe(`Basic auth failure brake [${dialect}]`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect, {
        env: { AUTH_FAILURE_LIMIT_PER_MINUTE: '3' },
        extraRoutes: (scope, { basicAuth }) => {
          scope.get('/test/protected', { preHandler: basicAuth({ operation: 'OprnApi' }) }, async () => 'ok');
        },
      });
    });
    after(() => app.close());

    it('answers 429 with Retry-After once an address has failed too often, even with the right password', async () => {
      const user = await createUser(app.db);
      const wrong = basicHeader(user.username, 'wrong');
      const statuses: number[] = [];
      for (let i = 0; i < 4; i += 1) {
        statuses.push((await app.request('/test/protected', { headers: { authorization: wrong } })).status);
      }
      assert.deepEqual(statuses, [401, 401, 401, 429]);
      const right = await app.request('/test/protected', { headers: { authorization: user.authorization } });
      assert.equal(right.status, 429);
      assert.match(right.headers.get('retry-after') ?? '', /^\d+$/);
      assert.equal(await right.json(), 'Too Many Requests');
    });
  });
});
