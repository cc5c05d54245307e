import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { basicHeader, createUser } from '../../test/factories.ts';
import type { TestApp } from '../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../test/harness.ts';
import { AppError } from '../errors.ts';
import { beginLoginAttempt } from './login-brake.ts';
import { createBackoffLimiter } from './rate-limit.ts';

describe('Back-off limiter', () => {
  const policy = { freeAttempts: 2, firstDelayMs: 1000, maxDelayMs: 8000, windowMs: 3_600_000 };
  const clock = () => {
    let at = 1_700_000_000_000;
    return { now: () => at, advance: (ms: number) => (at += ms) };
  };

  it('allows the free attempts, then doubles the wait after each counted one, up to the longest', () => {
    const time = clock();
    const limiter = createBackoffLimiter(policy, { now: time.now });
    const waits: number[] = [];
    for (let i = 0; i < 7; i += 1) {
      const wait = limiter.peek('k');
      waits.push(wait);
      time.advance(wait * 1000);
      limiter.hit('k');
    }
    assert.deepEqual(waits, [0, 0, 1, 2, 4, 8, 8]);
  });

  it('counts attempts under way: the free ones can run at once, one more waits for them', () => {
    const limiter = createBackoffLimiter(policy, { now: clock().now });
    assert.equal(limiter.peek('k', 1), 0);
    assert.equal(limiter.peek('k', 2), 1);
  });

  it('forgets a key cleared by a success, and never limits with no free attempts configured', () => {
    const time = clock();
    const limiter = createBackoffLimiter(policy, { now: time.now });
    for (let i = 0; i < 4; i += 1) limiter.hit('k');
    assert.ok(limiter.peek('k') > 0);
    limiter.clear('k');
    assert.equal(limiter.peek('k'), 0);
    const off = createBackoffLimiter({ ...policy, freeAttempts: 0 }, { now: time.now });
    for (let i = 0; i < 10; i += 1) off.hit('k');
    assert.equal(off.peek('k'), 0);
  });
});

forEachDialect((dialect) => {
  describe(`beginLoginAttempt: the brake shared with any login form [${dialect}]`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect, {
        env: { AUTH_FAILURE_FREE_ATTEMPTS: '2', AUTH_CONCURRENT_VERIFICATIONS_PER_CLIENT: '1' },
        extraRoutes: (scope, { basicAuth }) => {
          scope.get('/test/protected', { preHandler: basicAuth() }, async () => 'ok');
        },
      });
    });
    after(() => app.close());

    const basic = (username: string, password: string) =>
      app.request('/test/protected', { headers: { authorization: basicHeader(username, password) } });

    it('counts failures reported by another login path against Basic auth from the same address', async () => {
      const user = await createUser(app.db);
      for (let i = 0; i < 2; i += 1) (await beginLoginAttempt(app.deps, user.username, '127.0.0.1')).fail();
      const refused = await basic(user.username, user.password);
      assert.equal(refused.status, 429);
      assert.equal(refused.headers.get('retry-after'), '1');
      assert.equal(await refused.json(), 'Too Many Requests');
      // Another address is not braked: the key is (username, address).
      const elsewhere = await beginLoginAttempt(app.deps, user.username.toUpperCase(), '10.9.9.9');
      elsewhere.succeed();
    });

    it('refuses a second attempt in flight from one address with a 429 AppError, and counts an abandoned one nowhere', async () => {
      const user = await createUser(app.db);
      const first = await beginLoginAttempt(app.deps, user.username, '10.1.1.1');
      await assert.rejects(
        beginLoginAttempt(app.deps, `${user.username}x`, '10.1.1.1'),
        (error: unknown) => error instanceof AppError && error.code === 'too_many_requests',
      );
      first.abandon();
      for (let i = 0; i < 5; i += 1) (await beginLoginAttempt(app.deps, user.username, '10.1.1.1')).abandon();
      (await beginLoginAttempt(app.deps, user.username, '10.1.1.1')).succeed();
    });
  });
});
