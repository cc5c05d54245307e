import assert from 'node:assert/strict';
import { stat } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import type { TestDatabase } from '../../test/harness.ts';
import { DIALECTS, createTestDatabase } from '../../test/harness.ts';
import { until } from '../../test/until.ts';
import { sessionOptions } from './dialects/postgres.ts';
import { castBoundLimits } from './dialects/sqlite.ts';

// SQLite runs with `synchronous = NORMAL` and makes every commit durable itself with an fdatasync of the
// WAL off the event loop (database.ts). These tests pin down when that flush happens: after every
// statement that leaves a committed change, before the statement's promise resolves, and never for reads.
describe('SQLite commits are flushed to disk before they resolve', () => {
  let testDb: TestDatabase;
  before(async () => {
    testDb = await createTestDatabase('sqlite');
  });
  after(() => testDb.drop());

  const flushes = () => testDb.database.walFlushes();

  it('runs in WAL mode with SQLite synchronous NORMAL, its commit sync made up by the WAL flush', async () => {
    const mode = await sql<{ journal_mode: string }>`pragma journal_mode`.execute(testDb.db);
    assert.equal(mode.rows[0]?.journal_mode, 'wal');
    const sync = await sql<{ synchronous: number }>`pragma synchronous`.execute(testDb.db);
    assert.equal(sync.rows[0]?.synchronous, 1);
  });

  it('flushes once per transaction, at its commit, and not for the statements inside it', async () => {
    const start = flushes();
    await testDb.db.transaction().execute(async (trx) => {
      await trx.insertInto('contact').values({ first_name: 'A', last_name: 'Flush' }).execute();
      await trx.insertInto('contact').values({ first_name: 'B', last_name: 'Flush' }).execute();
      assert.equal(flushes(), start, 'no flush before the commit');
    });
    assert.equal(flushes(), start + 1);
  });

  it('flushes an autocommit write, with or without RETURNING, before it resolves', async () => {
    const start = flushes();
    await testDb.db.insertInto('contact').values({ first_name: 'C', last_name: 'Flush' }).execute();
    assert.equal(flushes(), start + 1);
    await testDb.db
      .insertInto('contact')
      .values({ first_name: 'D', last_name: 'Flush' })
      .returning('id')
      .executeTakeFirstOrThrow();
    assert.equal(flushes(), start + 2);
    await sql`update contact set first_name = 'E' where last_name = 'Flush' and first_name = 'D'`.execute(
      testDb.db,
    );
    assert.equal(flushes(), start + 3);
  });

  it('flushes a batched write transaction before its writers hear of the commit', async () => {
    const start = flushes();
    const writes = Array.from({ length: 10 }, (_, i) =>
      testDb.database.writeTransaction(async (trx) => {
        await trx
          .insertInto('contact')
          .values({ first_name: `W${i}`, last_name: 'Flush' })
          .execute();
        return flushes();
      }),
    );
    const seenInside = await Promise.all(writes);
    const afterCommit = flushes();
    assert.ok(afterCommit > start, 'the batch commit was flushed');
    for (const seen of seenInside) assert.ok(seen < afterCommit, 'each write resolved after a later flush');
  });

  it('does not flush for reads or for a rolled-back transaction', async () => {
    const start = flushes();
    await testDb.db.selectFrom('contact').select('id').execute();
    await sql`select count(*) as n from contact`.execute(testDb.db);
    await sql`pragma user_version`.execute(testDb.db);
    await assert.rejects(
      testDb.db.transaction().execute(async (trx) => {
        await trx.insertInto('contact').values({ first_name: 'R', last_name: 'Flush' }).execute();
        throw new Error('abandon');
      }),
      /abandon/,
    );
    assert.equal(flushes(), start);
    const rows = await testDb.db.selectFrom('contact').select('id').where('first_name', '=', 'R').execute();
    assert.equal(rows.length, 0);
  });
});

describe('SQLite statements that bound a large value', () => {
  let testDb: TestDatabase;
  before(async () => {
    testDb = await createTestDatabase('sqlite');
    await sql`create table blob_probe (id integer primary key, bytes blob)`.execute(testDb.db);
  });
  after(() => testDb.drop());

  it('are let go of the value without running again: each insert writes one row, with its bytes', async () => {
    const big = Buffer.alloc(512 * 1024, 7);
    const insert = (bytes: Buffer) =>
      sql`insert into blob_probe (bytes) values (${bytes})`.execute(testDb.db);
    await insert(big);
    await insert(Buffer.from('small'));
    await insert(big);
    const rows = await sql<{ bytes: Buffer | null }>`select bytes from blob_probe order by id`.execute(
      testDb.db,
    );
    assert.deepEqual(
      rows.rows.map((r) => r.bytes?.length ?? null),
      [big.length, 5, big.length],
    );
    assert.ok(rows.rows[2]!.bytes!.equals(big));
  });
});

describe('PostgreSQL pool connections', { skip: !DIALECTS.includes('postgres') }, () => {
  let testDb: TestDatabase;
  before(async () => {
    testDb = await createTestDatabase('postgres');
  });
  after(() => testDb.drop());

  it('run prepared statements with their generic plan (patient search is not re-planned per call)', async () => {
    const modes = await Promise.all(
      Array.from({ length: 3 }, () =>
        sql<{ plan_cache_mode: string }>`show plan_cache_mode`.execute(testDb.db),
      ),
    );
    for (const mode of modes) assert.equal(mode.rows[0]?.plan_cache_mode, 'force_generic_plan');
  });

  it('end a session left idle in a transaction after 10 minutes (a dead worker releases its claims)', async () => {
    const timeout = await sql<{
      idle_in_transaction_session_timeout: string;
    }>`show idle_in_transaction_session_timeout`.execute(testDb.db);
    assert.equal(timeout.rows[0]?.idle_in_transaction_session_timeout, '10min');
  });

  it('keep the options a DATABASE_URL carries, before their own', () => {
    assert.equal(
      sessionOptions('postgres://u:p@db.example:5432/cra?options=-c%20statement_timeout%3D5000'),
      '-c statement_timeout=5000 -c plan_cache_mode=force_generic_plan -c idle_in_transaction_session_timeout=600000',
    );
    assert.equal(
      sessionOptions('postgres://u:p@db.example:5432/cra'),
      '-c plan_cache_mode=force_generic_plan -c idle_in_transaction_session_timeout=600000',
    );
  });
});

describe('SQLite checkpoints run on their own thread', () => {
  let testDb: TestDatabase;
  before(async () => {
    testDb = await createTestDatabase('sqlite');
  });
  after(() => testDb.drop());

  it('leaves the writer without automatic checkpoints, and still keeps the WAL small', async () => {
    const auto = await sql<{ wal_autocheckpoint: number }>`pragma wal_autocheckpoint`.execute(testDb.db);
    assert.equal(auto.rows[0]?.wal_autocheckpoint, 0, 'the writer never checkpoints inside a commit');
    const walFile = `${testDb.url.slice('sqlite:'.length)}-wal`;
    const filler = 'x'.repeat(100_000);
    const startRounds = testDb.database.checkpointRounds();
    const nextRounds = async (count: number) => {
      const target = testDb.database.checkpointRounds() + count;
      await until(() => testDb.database.checkpointRounds() >= target, { what: 'the next checkpoint rounds' });
    };
    // Six bursts of 50 large commits, each waiting for the checkpointer afterwards. Without checkpoints
    // the WAL file would hold all six (six times the first); with them it restarts from its beginning
    // once a burst is copied. The file never shrinks, so `first` is at least the larger part of a burst
    // (a restart may come in the middle of one), and the final size about one burst.
    const walSizes: number[] = [];
    for (let burst = 0; burst < 6; burst += 1) {
      for (let i = 0; i < 50; i += 1) {
        await testDb.db
          .insertInto('contact')
          .values({ first_name: filler, last_name: 'Checkpoint' })
          .execute();
        await testDb.db.deleteFrom('contact').where('last_name', '=', 'Checkpoint').execute();
      }
      walSizes.push((await stat(walFile)).size);
      await nextRounds(2);
    }
    const [first] = walSizes;
    const largest = Math.max(...walSizes);
    assert.ok(first !== undefined && first > 5_000_000, `one burst fills the WAL (${first} bytes)`);
    assert.ok(largest < first * 3, `the WAL kept about the size of one burst: ${walSizes.join(', ')} bytes`);
    assert.ok(testDb.database.checkpointRounds() > startRounds, 'the checkpointer ran');
  });
});

// The SQLite executor prepares `limit ?` / `offset ?` as `cast(? as integer)` (a bound LIMIT made SQLite
// recompile the statement on every run). The page must stay exactly what the bound values ask for.
describe('SQLite bound LIMIT and OFFSET', () => {
  it('rewrites only the bound limit and offset placeholders', () => {
    assert.equal(
      castBoundLimits('select "a" from "t" where "b" = ? order by "a" limit ? offset ?'),
      'select "a" from "t" where "b" = ? order by "a" limit cast(? as integer) offset cast(? as integer)',
    );
    assert.equal(castBoundLimits('select 1 limit 5 offset 2'), 'select 1 limit 5 offset 2');
    assert.equal(
      castBoundLimits('select "limit_x" from "t" where "x" = ?'),
      'select "limit_x" from "t" where "x" = ?',
    );
  });

  describe('pages of one cached statement', () => {
    let testDb: TestDatabase;
    before(async () => {
      testDb = await createTestDatabase('sqlite');
      await testDb.db
        .insertInto('contact')
        .values(Array.from({ length: 7 }, (_, i) => ({ first_name: `P${i}`, last_name: 'Limit' })))
        .execute();
    });
    after(() => testDb.drop());

    const page = async (limit: number, offset: number) =>
      (
        await testDb.db
          .selectFrom('contact')
          .select('first_name')
          .where('last_name', '=', 'Limit')
          .orderBy('first_name')
          .limit(limit)
          .offset(offset)
          .execute()
      ).map((row) => row.first_name);

    it('answers each bound limit and offset, run after run', async () => {
      assert.deepEqual(await page(3, 0), ['P0', 'P1', 'P2']);
      assert.deepEqual(await page(2, 4), ['P4', 'P5']);
      assert.deepEqual(await page(5, 5), ['P5', 'P6']);
      assert.deepEqual(await page(0, 0), []);
      assert.deepEqual(await page(3, 7), []);
      assert.deepEqual(await page(100, 1), ['P1', 'P2', 'P3', 'P4', 'P5', 'P6']);
    });
  });
});

// Both dialects hand back the same row shape: plain objects, BLOBs as Buffers, a repeated column name
// with its last value (SQLite rows are built from value arrays by the executor).
for (const dialect of DIALECTS) {
  describe(`row shape (${dialect})`, () => {
    let testDb: TestDatabase;
    before(async () => {
      testDb = await createTestDatabase(dialect);
    });
    after(() => testDb.drop());

    it('answers plain objects, Buffers for binary values and the last of two same-named columns', async () => {
      const bytes = Buffer.from([0, 1, 2, 250, 255]);
      const blob = dialect === 'postgres' ? sql`${bytes}::bytea` : sql`${bytes}`;
      const result = await sql<
        Record<string, unknown>
      >`select 7 as n, 'x' as t, ${blob} as b, 1 as d, 2 as d`.execute(testDb.db);
      const row = result.rows[0]!;
      assert.equal(Object.getPrototypeOf(row), Object.prototype);
      assert.deepEqual(Object.keys(row), ['n', 't', 'b', 'd']);
      assert.equal(Number(row.n), 7);
      assert.equal(row.t, 'x');
      assert.ok(Buffer.isBuffer(row.b));
      assert.deepEqual(row.b, bytes);
      assert.equal(Number(row.d), 2);
    });
  });
}
