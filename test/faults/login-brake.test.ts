// test-needs: long
/**
 * Password guessing against the Basic-auth failure brake: bursts of concurrent guesses, bursts of unknown
 * usernames, and an attacker trying to lock a known user out. Clients are told apart by the address a
 * trusted proxy (127.0.0.1) forwards.
 *
 * The number of password checks (bcrypt runs, real or dummy) is read from the authenticator's counter:
 * it is what a guesser buys, and what starves bcrypt's thread pool.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { basicHeader, createUser, unique } from '../factories.ts';
import type { TestUser } from '../factories.ts';
import { ConsoleClient } from '../factories-console.ts';
import { b64, createSignableEvent, makePng } from '../factories-signature.ts';
import type { TestApp } from '../harness.ts';
import { forEachDialect, startTestApp } from '../harness.ts';

const SEARCH = '/api/v1/patient/search?term=smith';
/** Every answer the tests wait for comes within this bound, or the test fails. */
const BOUND_MS = 15_000;

const from = (address: string) => ({ 'x-forwarded-for': address });

forEachDialect((dialect) => {
  describe(`login bursts [${dialect}]`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect, {
        env: {
          TRUSTED_PROXIES: '127.0.0.1',
          MAX_REQUESTS_PER_CLIENT: '0',
          AUTH_FAILURE_LIMIT_PER_MINUTE: '100',
          AUTH_FAILURE_FREE_ATTEMPTS: '10',
          AUTH_FAILURE_LIMIT_PER_USERNAME: '1000',
          AUTH_CONCURRENT_VERIFICATIONS: '4',
          AUTH_CONCURRENT_VERIFICATIONS_PER_CLIENT: '2',
        },
      });
    });
    after(() => app.close());

    const checks = () => (app.deps.authenticator as unknown as { passwordChecks: number }).passwordChecks;
    const guess = (username: string, password: string, address: string) =>
      app.request(SEARCH, {
        headers: { ...from(address), authorization: basicHeader(username, password) },
        signal: AbortSignal.timeout(BOUND_MS),
      });

    it('counts 400 concurrent guesses for one user from one address as they start: 429 without hashing beyond the brake', async () => {
      const victim = await createUser(app.db);
      const before = checks();
      const startedAt = Date.now();
      const answers = await Promise.all(
        Array.from({ length: 400 }, (_, i) => guess(victim.username, `guess-${i}`, '198.51.100.10')),
      );
      const statuses = answers.map((r) => r.status);
      assert.ok(
        statuses.every((s) => s === 401 || s === 429),
        `statuses ${[...new Set(statuses)].join(',')}`,
      );
      const ran = checks() - before;
      // 10 free attempts, then one more each time the back-off (1 s, 2 s, 4 s, ...) has passed while the
      // burst was still arriving.
      const seconds = (Date.now() - startedAt) / 1000;
      const bound = 10 + Math.floor(Math.log2(seconds + 1)) + 1;
      assert.ok(ran >= 1 && ran <= bound, `${ran} password checks ran for 400 guesses in ${seconds} s`);
      assert.equal(statuses.filter((s) => s === 401).length, ran, 'every check that ran was a failure');
      for (const refused of answers.filter((r) => r.status === 429))
        assert.match(refused.headers.get('retry-after') ?? '', /^\d+$/);
    });

    it('bounds password checks in flight for a burst of unknown usernames, while uploads and cached callers are served', async () => {
      const known = await createUser(app.db);
      assert.equal((await guess(known.username, known.password, '198.51.100.20')).status, 200);
      const event = await createSignableEvent(app.db);
      const before = checks();
      // 600 unknown usernames: half from one address, half from 300 addresses.
      const burst = Promise.all(
        Array.from({ length: 600 }, (_, i) =>
          guess(unique('nobody'), 'pw', i % 2 === 0 ? '198.51.100.30' : `10.1.${i >> 8}.${i & 255}`),
        ),
      );
      const sign = await app.request('/api/v1/sign/add', {
        method: 'POST',
        signal: AbortSignal.timeout(BOUND_MS),
        body: JSON.stringify({
          unique_identifier: event.code,
          extra_info: JSON.stringify({ e_id: event.elementId, e_t_id: event.esignElementTypeId }),
          image: b64(makePng(64, 64, { isNoisy: true })),
        }),
      });
      assert.equal(sign.status, 200);
      assert.equal(await sign.json(), 'Correct signature saved!');
      const cached = await guess(known.username, known.password, '198.51.100.20');
      assert.equal(cached.status, 200, 'a verified credential is answered from the cache');
      const statuses = (await burst).map((r) => r.status);
      assert.ok(
        statuses.every((s) => s === 401 || s === 429),
        `statuses ${[...new Set(statuses)].join(',')}`,
      );
      const ran = checks() - before;
      assert.ok(ran < 600, `${ran} password checks ran for 600 unknown usernames`);
      const fromOne = statuses.filter((s, i) => i % 2 === 0 && s === 401).length;
      assert.ok(fromOne <= 100, `${fromOne} checks for one address, past AUTH_FAILURE_LIMIT_PER_MINUTE`);
    });
  });

  describe(`lock-outs [${dialect}]`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect, {
        env: {
          TRUSTED_PROXIES: '127.0.0.1',
          AUTH_FAILURE_LIMIT_PER_MINUTE: '50',
          AUTH_FAILURE_FREE_ATTEMPTS: '3',
          AUTH_FAILURE_LIMIT_PER_USERNAME: '8',
        },
      });
    });
    after(() => app.close());

    const attempt = (user: TestUser, password: string, address: string) =>
      app.request(SEARCH, {
        headers: { ...from(address), authorization: basicHeader(user.username, password) },
      });
    const wait = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

    it('keys the brake on (username, address): guesses from one address never lock the user out elsewhere, and back off exponentially', async () => {
      const victim = await createUser(app.db);
      const attacker = '203.0.113.66';
      const statuses: number[] = [];
      for (let i = 0; i < 4; i += 1) statuses.push((await attempt(victim, `wrong${i}`, attacker)).status);
      assert.deepEqual(statuses, [401, 401, 401, 429]);
      assert.equal(
        (await attempt(victim, victim.password, '203.0.113.10')).status,
        200,
        'the device elsewhere',
      );

      // Each failure past the free ones doubles the wait: 1 s, then 2 s, then 4 s. (The device's login
      // is cached; a cached credential passes without a password check, so forget it.)
      app.deps.authenticator.clear();
      const refused = await attempt(victim, victim.password, attacker);
      assert.equal(refused.status, 429, 'even the right password waits out the back-off from that address');
      assert.equal(refused.headers.get('retry-after'), '1');
      await wait(1100);
      assert.equal((await attempt(victim, 'wrong4', attacker)).status, 401);
      const second = await attempt(victim, 'wrong5', attacker);
      assert.equal(second.status, 429);
      assert.equal(second.headers.get('retry-after'), '2');
      await wait(2100);
      assert.equal((await attempt(victim, 'wrong6', attacker)).status, 401);
      const third = await attempt(victim, 'wrong7', attacker);
      assert.equal(third.headers.get('retry-after'), '4');
    });

    it('refuses a username past its much higher ceiling from new addresses, not from an address it logged in from', async () => {
      const victim = await createUser(app.db);
      const device = '192.0.2.50';
      assert.equal((await attempt(victim, victim.password, device)).status, 200);
      app.deps.authenticator.clear();
      // Eight addresses, one wrong password each: no pair reaches its back-off, the username reaches 8.
      for (let i = 0; i < 8; i += 1)
        assert.equal((await attempt(victim, `wrong${i}`, `192.0.2.${100 + i}`)).status, 401);
      const elsewhere = await attempt(victim, victim.password, '192.0.2.200');
      assert.equal(elsewhere.status, 429);
      assert.match(elsewhere.headers.get('retry-after') ?? '', /^\d+$/);
      assert.equal((await attempt(victim, victim.password, device)).status, 200, 'the known device');
    });
  });
  describe(`a cached credential under the brake [${dialect}]`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect, {
        env: {
          TRUSTED_PROXIES: '127.0.0.1',
          MAX_REQUESTS_PER_CLIENT: '0',
          AUTH_CACHE_TTL_MS: '60000',
          AUTH_FAILURE_LIMIT_PER_MINUTE: '1000',
          AUTH_FAILURE_FREE_ATTEMPTS: '5',
          AUTH_FAILURE_LIMIT_PER_USERNAME: '30',
        },
      });
    });
    after(() => app.close());

    const checks = () => app.deps.authenticator.passwordChecks;
    const attempt = (username: string, password: string, address: string) =>
      app.request(SEARCH, {
        headers: { ...from(address), authorization: basicHeader(username, password) },
        signal: AbortSignal.timeout(BOUND_MS),
      });
    /**
     * Guesses until one is checked and fails (401): the back-off past the free attempts then starts
     * again from now, at 2 s or more, so the next attempt is certainly within it.
     */
    const untilCountedFailure = async (guess: (i: number) => Promise<number>) => {
      const deadline = Date.now() + BOUND_MS;
      for (let i = 0; Date.now() < deadline; i += 1) {
        const status = await guess(i);
        if (status === 401) return;
        assert.equal(status, 429);
      }
      assert.fail('no guess was checked within the bound');
    };

    it('refuses the right password with 429 after 400 wrong guesses from a fresh address, though the credential is cached', async () => {
      const victim = await createUser(app.db);
      const device = '198.51.100.70';
      // The user's own device verifies the credential: it is now in the cache.
      assert.equal((await attempt(victim.username, victim.password, device)).status, 200);
      const attacker = '203.0.113.70';
      const statuses = (
        await Promise.all(
          Array.from({ length: 400 }, (_, i) => attempt(victim.username, `guess-${i}`, attacker)),
        )
      ).map((r) => r.status);
      assert.ok(statuses.includes(429), `statuses ${[...new Set(statuses)].join(',')}`);
      await untilCountedFailure(async (i) => (await attempt(victim.username, `more-${i}`, attacker)).status);
      const before = checks();
      const right = await attempt(victim.username, victim.password, attacker);
      assert.equal(right.status, 429, 'the cache must not confirm a guess that the brake refuses');
      assert.match(right.headers.get('retry-after') ?? '', /^\d+$/);
      assert.equal(checks(), before, 'refused before any password check');
      // The device, not throttled, is still answered from the cache, and its successes count nothing.
      for (let i = 0; i < 20; i += 1)
        assert.equal((await attempt(victim.username, victim.password, device)).status, 200);
      assert.equal(checks(), before, 'a cached credential costs no password check');
    });

    it('refuses a cached credential from a new address once the username is past its ceiling, not from the device', async () => {
      const victim = await createUser(app.db);
      const device = '198.51.100.71';
      assert.equal((await attempt(victim.username, victim.password, device)).status, 200);
      // 30 addresses, one wrong password each: the username reaches AUTH_FAILURE_LIMIT_PER_USERNAME.
      for (let i = 0; i < 30; i += 1)
        assert.equal((await attempt(victim.username, `wrong-${i}`, `198.18.0.${i + 1}`)).status, 401);
      const elsewhere = await attempt(victim.username, victim.password, '198.18.1.1');
      assert.equal(elsewhere.status, 429);
      assert.equal((await attempt(victim.username, victim.password, device)).status, 200, 'the known device');
    });

    it('refuses the console sign-in after wrong passwords with 429, though the credential is cached', async () => {
      const victim = await createUser(app.db, { roles: ['API access', 'TaskViewClinical'] });
      assert.equal((await attempt(victim.username, victim.password, '198.51.100.72')).status, 200);
      // The console client connects from 127.0.0.1 (no forwarded address).
      const client = new ConsoleClient(app);
      const statuses: number[] = [];
      for (let i = 0; i < 12; i += 1) statuses.push((await client.signIn(victim, `wrong-${i}`)).status);
      assert.deepEqual(statuses.slice(0, 5), [401, 401, 401, 401, 401]);
      assert.ok(statuses.includes(429), `statuses ${statuses.join(',')}`);
      await untilCountedFailure(async (i) => (await client.signIn(victim, `more-${i}`)).status);
      const right = await client.signIn(victim);
      assert.equal(right.status, 429, 'signed in through the cache');
      assert.match(right.headers.get('retry-after') ?? '', /^\d+$/);
      assert.equal(client.cookies.has('cra_console'), false);
    });
  });
});
