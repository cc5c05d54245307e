import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import type { TestApp, TestDatabase } from '../../test/harness.ts';
import { createTestDatabase, forEachDialect, startTestApp } from '../../test/harness.ts';
import { until } from '../../test/until.ts';
import { buildApp } from '../app.ts';
import { loadConfig } from '../config.ts';
import type { Database } from '../db/database.ts';
import { openDatabase } from '../db/database.ts';
import { createRateLimiter, hashKey } from './rate-limit.ts';
import type { SharedCounters } from './shared-counters.ts';
import { createSharedCounters, isRateLimitSharingOn, sharedCountersFor } from './shared-counters.ts';

const MINUTE = 60_000;
/** A window start well inside a window, so that a few seconds of test never cross a boundary. */
const T0 = 1_700_000_040_000 + 10_000;

function fakeClock(start = T0) {
  let at = start;
  return { now: () => at, advance: (ms: number) => (at += ms) };
}

describe('Rate limiter (in memory)', () => {
  it('answers 0 up to the limit, then the seconds left in the window', () => {
    const clock = fakeClock();
    const limiter = createRateLimiter(3, MINUTE, { now: clock.now });
    assert.deepEqual(
      [1, 2, 3].map(() => limiter.hit('a')),
      [0, 0, 0],
    );
    assert.equal(limiter.peek('a'), 60);
    assert.equal(limiter.hit('a'), 60);
    assert.equal(limiter.hit('b'), 0, 'another key has its own count');
    clock.advance(45_000);
    assert.equal(limiter.hit('a'), 15, 'a window starts at the first hit of its key');
  });

  it('starts a fresh count when the window is over', () => {
    const clock = fakeClock();
    const limiter = createRateLimiter(1, MINUTE, { now: clock.now });
    limiter.hit('a');
    assert.ok(limiter.hit('a') > 0);
    clock.advance(MINUTE);
    assert.equal(limiter.peek('a'), 0);
    assert.equal(limiter.hit('a'), 0);
  });

  it('never limits when the limit is 0', () => {
    const limiter = createRateLimiter(0);
    for (let i = 0; i < 100; i += 1) assert.equal(limiter.hit('a'), 0);
    assert.equal(limiter.peek('a'), 0);
  });

  it('forgets the oldest key beyond maxKeys', () => {
    const limiter = createRateLimiter(1, MINUTE, { maxKeys: 2 });
    limiter.hit('a');
    limiter.hit('b');
    limiter.hit('c');
    assert.equal(limiter.peek('a'), 0);
    assert.ok(limiter.peek('c') > 0);
  });
});

describe('RATE_LIMIT_SHARING', () => {
  const sqlite = { DATABASE_URL: 'sqlite:./x.db' };
  const postgres = { DATABASE_URL: 'postgres://u:p@localhost/db' };
  it('auto shares with several server processes or on PostgreSQL, not for one process on SQLite', () => {
    assert.equal(isRateLimitSharingOn(loadConfig(sqlite)), false);
    assert.equal(isRateLimitSharingOn(loadConfig({ ...sqlite, SERVER_PROCESSES: '2' })), true);
    assert.equal(isRateLimitSharingOn(loadConfig(postgres)), true);
  });
  it('on and off override auto', () => {
    assert.equal(isRateLimitSharingOn(loadConfig({ ...sqlite, RATE_LIMIT_SHARING: 'on' })), true);
    assert.equal(isRateLimitSharingOn(loadConfig({ ...postgres, RATE_LIMIT_SHARING: 'off' })), false);
  });
  it('refuses a value it does not know', () => {
    assert.throws(() => loadConfig({ ...sqlite, RATE_LIMIT_SHARING: 'maybe' }), /RATE_LIMIT_SHARING/);
  });
});

forEachDialect((dialect) => {
  describe(`Rate limiter with counters shared through the database [${dialect}]`, () => {
    let testDb: TestDatabase;
    const opened: Database[] = [];
    const hubs: SharedCounters[] = [];
    before(async () => {
      testDb = await createTestDatabase(dialect);
    });
    after(async () => {
      for (const hub of hubs) hub.close();
      for (const database of opened) await database.close().catch(() => {});
      await testDb.drop();
    });

    /** One server process: its own connection(s), hub and limiter, on the shared database. */
    async function startProcess(limit: number, clock: { now: () => number }, name = 'test_limiter') {
      const database = await openDatabase(loadConfig(testDb.env).database, { poolSize: 2 });
      opened.push(database);
      const hub = createSharedCounters(database, { now: clock.now, syncIntervalMs: 60_000 });
      hubs.push(hub);
      const limiter = createRateLimiter(limit, MINUTE, { shared: hub, name, now: clock.now });
      return { database, hub, limiter };
    }

    const counterRows = () =>
      sql<{
        limiter: string;
        key_hash: string;
        count: number;
        window_start: number;
      }>`select limiter, key_hash, count, window_start from rate_limit_counter order by limiter, key_hash`
        .execute(testDb.db)
        .then((r) =>
          r.rows.map((row) => ({ ...row, count: Number(row.count), window_start: Number(row.window_start) })),
        );

    it('two processes enforce one combined limit once they have synced', async () => {
      const clock = fakeClock();
      const a = await startProcess(5, clock, 'combined');
      const b = await startProcess(5, clock, 'combined');
      for (let i = 0; i < 3; i += 1) assert.equal(a.limiter.hit('10.0.0.1'), 0);
      for (let i = 0; i < 2; i += 1) assert.equal(b.limiter.hit('10.0.0.1'), 0);
      // Before any sync each process knows only its own hits.
      assert.equal(a.limiter.peek('10.0.0.1'), 0);
      await a.hub.sync();
      await b.hub.sync();
      await a.hub.sync();
      // 5 hits in all: both processes now see the limit reached, though each counted fewer.
      assert.ok(a.limiter.peek('10.0.0.1') > 0);
      assert.ok(b.limiter.peek('10.0.0.1') > 0);
      assert.equal(b.limiter.hit('10.0.0.1'), 50, 'shared windows are aligned: 50 s left in this one');
      assert.equal(a.limiter.peek('10.0.0.2'), 0, 'other keys are not affected');
      const rows = (await counterRows()).filter((row) => row.limiter === 'combined');
      assert.deepEqual(
        rows.map((row) => row.count),
        [5],
        'the refused hit of b is not flushed yet; each flushed hit counted once',
      );
      await b.hub.sync();
      assert.deepEqual(
        (await counterRows()).filter((row) => row.limiter === 'combined').map((r) => r.count),
        [6],
      );
    });

    it('stores keys hashed, never the raw address or username', async () => {
      const clock = fakeClock();
      const a = await startProcess(5, clock, 'hashed');
      a.limiter.hit('192.168.7.7');
      a.limiter.hit('alice.smith');
      await a.hub.sync();
      const rows = (await counterRows()).filter((row) => row.limiter === 'hashed');
      assert.deepEqual(
        rows.map((row) => row.key_hash).sort(),
        [hashKey('hashed', '192.168.7.7'), hashKey('hashed', 'alice.smith')].sort(),
      );
      const dump = JSON.stringify(rows);
      assert.ok(!dump.includes('192.168') && !dump.includes('alice'));
      assert.equal(rows[0]!.window_start % MINUTE, 0, 'windows are aligned to their length');
    });

    it('answers hits and peeks from memory while its database is closed, and a sync then resolves', async () => {
      const clock = fakeClock();
      const a = await startProcess(4, clock, 'closed');
      const b = await startProcess(4, clock, 'closed');
      b.limiter.hit('k');
      b.limiter.hit('k');
      b.limiter.hit('k');
      await b.hub.sync();
      a.limiter.hit('k');
      await a.hub.sync();
      await a.database.close();
      // Every answer below comes from memory: a query would fail on the closed database.
      assert.ok(a.limiter.peek('k') > 0, 'the combined total (4) learnt at the last sync is kept');
      assert.ok(a.limiter.hit('k') > 0);
      assert.equal(a.limiter.hit('other'), 0);
      await a.hub.sync();
      assert.ok(a.limiter.hit('k') > 0);
    });

    it('keeps counting locally while the database fails, and flushes the kept hits when it answers again', async () => {
      const clock = fakeClock();
      const a = await startProcess(3, clock, 'outage');
      const b = await startProcess(3, clock, 'outage');
      await sql`alter table rate_limit_counter rename to rate_limit_counter_away`.execute(testDb.db);
      try {
        a.limiter.hit('k');
        a.limiter.hit('k');
        await a.hub.sync(); // fails inside, never rejects
        assert.equal(a.limiter.hit('k'), 0, 'the local count (3) still allows the third hit');
        assert.ok(a.limiter.hit('k') > 0, 'and still refuses the fourth');
      } finally {
        await sql`alter table rate_limit_counter_away rename to rate_limit_counter`.execute(testDb.db);
      }
      await a.hub.sync();
      b.limiter.hit('k');
      await b.hub.sync();
      assert.deepEqual(
        (await counterRows()).filter((row) => row.limiter === 'outage').map((r) => r.count),
        [5],
      );
      assert.ok(b.limiter.peek('k') > 0, 'b learnt the hits a counted during the outage');
    });

    it('starts every process on a fresh count in the next window and deletes the windows that are over', async () => {
      const clock = fakeClock();
      const a = await startProcess(2, clock, 'expiry');
      const b = await startProcess(2, clock, 'expiry');
      a.limiter.hit('k');
      b.limiter.hit('k');
      await a.hub.sync();
      await b.hub.sync();
      await a.hub.sync();
      assert.ok(a.limiter.peek('k') > 0);
      const first = (await counterRows()).filter((row) => row.limiter === 'expiry');
      assert.equal(first.length, 1);

      clock.advance(MINUTE);
      assert.equal(a.limiter.peek('k'), 0);
      assert.equal(a.limiter.hit('k'), 0);
      assert.equal(b.limiter.hit('k'), 0);
      await a.hub.sync();
      await b.hub.sync();
      const second = (await counterRows()).filter((row) => row.limiter === 'expiry');
      assert.deepEqual(
        second.map((row) => [row.window_start - first[0]!.window_start, row.count]),
        [
          [0, 2],
          [MINUTE, 2],
        ],
        'the old window is kept a grace minute (clocks of other machines may be a little behind)',
      );

      clock.advance(2 * MINUTE);
      a.limiter.hit('k');
      await a.hub.sync();
      const third = (await counterRows()).filter((row) => row.limiter === 'expiry');
      assert.deepEqual(
        third.map((row) => [row.window_start - first[0]!.window_start, row.count]),
        [[3 * MINUTE, 1]],
      );
    });

    it('flushes by itself on its background timer after a hit', async () => {
      const database = await openDatabase(loadConfig(testDb.env).database, { poolSize: 1 });
      opened.push(database);
      const hub = createSharedCounters(database, { syncIntervalMs: 50 });
      hubs.push(hub);
      const limiter = createRateLimiter(2, MINUTE, { shared: hub, name: 'timer' });
      limiter.hit('k');
      let rows = await counterRows();
      await until(async () => {
        rows = await counterRows();
        return rows.some((row) => row.limiter === 'timer');
      });
      assert.deepEqual(
        rows.filter((row) => row.limiter === 'timer').map((row) => row.count),
        [1],
      );
    });

    it('shares one hub between the limiters of an app, and none when sharing is off', () => {
      const on = loadConfig({ ...testDb.env, RATE_LIMIT_SHARING: 'on' });
      const off = loadConfig({ ...testDb.env, RATE_LIMIT_SHARING: 'off' });
      const hub = sharedCountersFor({ config: on, database: testDb.database });
      assert.ok(hub !== undefined);
      hubs.push(hub);
      assert.equal(sharedCountersFor({ config: on, database: testDb.database }), hub);
      assert.equal(sharedCountersFor({ config: off, database: testDb.database }), undefined);
    });
  });
});

forEachDialect((dialect) => {
  describe(`sign/add rate limit across two server processes [${dialect}]`, () => {
    let first: TestApp;
    let second: { baseUrl: string; database: Database; close(): Promise<void> };
    before(async () => {
      const env = {
        SIGN_RATE_LIMIT_PER_MINUTE: '3',
        RATE_LIMIT_SHARING: 'on',
        RATE_LIMIT_SYNC_INTERVAL_MS: '60000',
      };
      first = await startTestApp(dialect, { env });
      // A second app on its own connection(s) to the same database: what another process would be.
      const database = await openDatabase(first.config.database, { poolSize: 2 });
      const app = await buildApp({ ...first.deps, database });
      await app.listen({ host: '127.0.0.1', port: 0 });
      const address = app.server.address();
      if (address === null || typeof address === 'string') throw new Error('no address');
      second = {
        baseUrl: `http://127.0.0.1:${address.port}`,
        database,
        async close() {
          await app.close();
          await database.close();
        },
      };
    });
    after(async () => {
      await second.close();
      await first.close();
    });

    it('answers 429 on one process once the hits of both reach the limit', async () => {
      // Shared windows are whole minutes: do not start a few seconds before one ends.
      const left = MINUTE - (Date.now() % MINUTE);
      if (left < 5_000) await new Promise((resolve) => setTimeout(resolve, left + 50));
      const post = (baseUrl: string) =>
        fetch(`${baseUrl}/api/v1/sign/add`, { method: 'POST', body: '{}' }).then(async (response) => {
          await response.body?.cancel();
          return response.status;
        });
      const firstHub = sharedCountersFor(first.deps)!;
      const secondHub = sharedCountersFor({ config: first.config, database: second.database })!;
      assert.notEqual(firstHub, secondHub);
      assert.notEqual(await post(first.baseUrl), 429);
      assert.notEqual(await post(first.baseUrl), 429);
      assert.notEqual(await post(second.baseUrl), 429);
      await firstHub.sync();
      await secondHub.sync();
      // Each process counted fewer than 3, but together they reached it.
      assert.equal(await post(second.baseUrl), 429);
      await firstHub.sync();
      assert.equal(await post(first.baseUrl), 429);
    });
  });
});
