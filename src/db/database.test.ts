import assert from 'node:assert/strict';
import { mkdtemp, open, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import type { TestDatabase } from '../../test/harness.ts';
import { DIALECTS, createTestDatabase, forEachDialect } from '../../test/harness.ts';
import { until } from '../../test/until.ts';
import { loadConfig } from '../config.ts';
import { openDatabase } from './database.ts';
import { sessionOptions } from './dialects/postgres.ts';
import { castBoundLimits } from './dialects/sqlite.ts';
import { startSqliteCheckpointer } from './dialects/sqlite-checkpointer.ts';

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

  it('commits a statement without its flush when asked (commitWithoutFlush), and the next durable commit flushes it', async () => {
    const start = flushes();
    await testDb.database.dialect.commitWithoutFlush(
      testDb.db.insertInto('contact').values({ first_name: 'N', last_name: 'NoFlush' }).compile(),
    );
    assert.equal(flushes(), start, 'no flush of its own');
    const seen = await testDb.db
      .selectFrom('contact')
      .select('id')
      .where('last_name', '=', 'NoFlush')
      .execute();
    assert.equal(seen.length, 1, 'committed: visible to the next statement');
    await testDb.db.insertInto('contact').values({ first_name: 'M', last_name: 'Flush' }).execute();
    assert.equal(flushes(), start + 1);
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

  it('send statements run with runPreparedOn as named ones, inside a transaction too', async () => {
    const { dialect } = testDb.database;
    const query = testDb.db
      .selectFrom('contact')
      .select('id')
      .where('last_name', '=', 'Prepared in a transaction');
    const names = await testDb.db.transaction().execute(async (trx) => {
      await dialect.runPreparedOn(trx, query.compile());
      const again = await dialect.runPreparedOn(trx, query.compile());
      assert.deepEqual(again.rows, []);
      const prepared = await sql<{
        name: string;
        statement: string;
      }>`select name, statement from pg_prepared_statements`.execute(trx);
      return prepared.rows.filter((r) => r.statement === query.compile().sql).map((r) => r.name);
    });
    assert.equal(names.length, 1, 'prepared once on the transaction connection');
    assert.match(names[0]!, /^cra_[0-9a-f]{24}$/);
  });

  it('commit without waiting for the WAL flush on connections whose sessions say so', async () => {
    await testDb.database.dialect.commitWithoutFlush(
      sql`insert into contact (first_name, last_name) values ('N', 'NoFlush'), (current_setting('synchronous_commit'), 'NoFlush')`.compile(
        testDb.db,
      ),
    );
    const rows = await testDb.db
      .selectFrom('contact')
      .select('first_name')
      .where('last_name', '=', 'NoFlush')
      .orderBy('id')
      .execute();
    assert.deepEqual(
      rows.map((r) => r.first_name),
      ['N', 'off'],
    );
    const own = await sql<{ synchronous_commit: string }>`show synchronous_commit`.execute(testDb.db);
    assert.equal(own.rows[0]?.synchronous_commit, 'on', 'the pool of every other statement keeps it on');
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
    // The thread starts with the first committed write (a database copied from the test run's template
    // has had none in this process).
    await testDb.db.insertInto('contact').values({ first_name: 'First', last_name: 'Commit' }).execute();
    const auto = await sql<{ wal_autocheckpoint: number }>`pragma wal_autocheckpoint`.execute(testDb.db);
    assert.equal(auto.rows[0]?.wal_autocheckpoint, 0, 'the writer never checkpoints inside a commit');
    const walFile = `${testDb.url.slice('sqlite:'.length)}-wal`;
    const filler = 'x'.repeat(100_000);
    const startRounds = testDb.database.checkpointRounds();
    const nextRounds = async (count: number) => {
      const target = testDb.database.checkpointRounds() + count;
      await until(() => testDb.database.checkpointRounds() >= target, { what: 'the next checkpoint rounds' });
    };
    /**
     * The WAL header: its page size, and its checkpoint sequence number, which SQLite increments each
     * time a writer restarts the WAL from its beginning (only once a checkpoint has copied all of it).
     */
    const walHeader = async () => {
      const handle = await open(walFile);
      try {
        const { buffer } = await handle.read(Buffer.alloc(32), 0, 32, 0);
        return { pageSize: buffer.readUInt32BE(8), restarts: buffer.readUInt32BE(12) };
      } finally {
        await handle.close();
      }
    };
    // Six bursts of 50 large commits, each waiting for two checkpoint rounds afterwards (the second
    // starts after the burst's last commit, with no reader open: it copies the whole WAL). The next
    // burst's first commit then restarts the WAL, so it never holds more than about one burst. Without
    // checkpoints it would hold all six. Nothing here depends on how fast the machine runs.
    const restartsBefore = (await walHeader()).restarts;
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
    const { pageSize, restarts: restartsAfter } = await walHeader();
    const restarts = restartsAfter - restartsBefore;
    assert.ok(restarts >= 5, `the WAL restarted after each burst (${restarts} restarts)`);
    // The rows of one burst alone take 50 times their overflow pages, each page a frame of 24 bytes and
    // the page (a burst writes several times that with its deletes and the table's other pages).
    // Without checkpoints the WAL would hold every frame of six bursts, many times this bound.
    const sixBurstsRowsBytes = 6 * 50 * Math.ceil(filler.length / pageSize) * (24 + pageSize);
    const largest = Math.max(...walSizes);
    assert.ok(
      largest < sixBurstsRowsBytes,
      `the WAL kept about the size of one burst (${walSizes.join(', ')} bytes; the rows of six bursts: ${sixBurstsRowsBytes})`,
    );
    assert.ok(testDb.database.checkpointRounds() > startRounds, 'the checkpointer ran');
  });
});

describe('SQLite checkpointer thread, started by commits and ended when idle', () => {
  it('runs while another connection commits, ends once idle with the WAL copied, and starts again', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'cra-checkpointer-'));
    const file = path.join(dir, 'db.sqlite');
    const writer = new DatabaseSync(file);
    writer.exec('PRAGMA journal_mode = WAL');
    writer.exec('CREATE TABLE t (v TEXT)');
    const autocheckpoint = () =>
      (writer.prepare('PRAGMA wal_autocheckpoint').get() as { wal_autocheckpoint: number })
        .wal_autocheckpoint;
    const checkpointer = startSqliteCheckpointer(writer, file, { intervalMs: 20, idleMs: 1000 });
    try {
      assert.equal(checkpointer.isRunning(), false, 'no thread before the first commit');
      assert.equal(autocheckpoint(), 1000, 'the writer checkpoints itself while no thread runs');
      const insert = writer.prepare('INSERT INTO t (v) VALUES (?)');
      const commit = () => {
        insert.run('x'.repeat(10_000));
        checkpointer.wake();
      };
      commit();
      assert.equal(checkpointer.isRunning(), true, 'the first commit starts the thread');
      assert.equal(autocheckpoint(), 0, 'the writer leaves checkpoints to the thread');
      // Commits every 50 ms for twice the idle time: the thread sees them and keeps running. The idle
      // time is twenty gaps between commits, so that a loaded machine's late timers do not end it.
      const busyUntil = Date.now() + 2000;
      while (Date.now() < busyUntil) {
        commit();
        await new Promise((resolve) => setTimeout(resolve, 50));
        assert.equal(checkpointer.isRunning(), true, 'the thread keeps running while commits arrive');
      }
      const roundsBefore = checkpointer.rounds();
      await until(() => !checkpointer.isRunning(), { what: 'the idle thread to end' });
      assert.ok(checkpointer.rounds() > roundsBefore, 'it checkpointed before ending');
      assert.equal(autocheckpoint(), 1000, 'the writer checkpoints itself again without the thread');
      const wal = writer.prepare('PRAGMA wal_checkpoint(PASSIVE)').get() as {
        log: number;
        checkpointed: number;
      };
      assert.equal(wal.checkpointed, wal.log, 'the WAL was fully copied when it ended');
      const roundsEnded = checkpointer.rounds();
      commit();
      assert.equal(checkpointer.isRunning(), true, 'the next commit starts a new thread');
      assert.equal(autocheckpoint(), 0);
      await until(() => checkpointer.rounds() > roundsEnded, { what: 'the new thread to checkpoint' });
    } finally {
      await checkpointer.close();
      writer.close();
      await rm(dir, { recursive: true, force: true });
    }
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

// The adapter operations the queue engine relies on, with the same contract on every dialect; what only
// an engine with concurrent writers can show (a row held by another transaction) is asserted where the
// adapter says it has them.
forEachDialect((dialect) => {
  describe(`dialect operations (${dialect})`, () => {
    let testDb: TestDatabase;
    before(async () => {
      testDb = await createTestDatabase(dialect);
    });
    after(() => testDb.drop());

    const target = (key: string) => ({ table: 'request_routine_lock', column: 'routine_lock', key });
    const keyRows = async (keys: readonly string[]) =>
      (
        await testDb.db
          .selectFrom('request_routine_lock')
          .select('routine_lock')
          .where('routine_lock', 'in', [...keys])
          .orderBy('routine_lock')
          .execute()
      ).map((r) => r.routine_lock);

    it('runPreparedOn answers rows and counts, inside a transaction (seeing its writes) and outside, run after run', async () => {
      const { dialect: adapter } = testDb.database;
      const select = testDb.db
        .selectFrom('contact')
        .select('first_name')
        .where('last_name', '=', 'PreparedOn')
        .orderBy('id')
        .compile();
      const rename = testDb.db
        .updateTable('contact')
        .set({ first_name: 'B' })
        .where('last_name', '=', 'PreparedOn')
        .compile();
      await testDb.db.transaction().execute(async (trx) => {
        await trx.insertInto('contact').values({ first_name: 'A', last_name: 'PreparedOn' }).execute();
        assert.deepEqual((await adapter.runPreparedOn(trx, select)).rows, [{ first_name: 'A' }]);
        assert.equal((await adapter.runPreparedOn(trx, rename)).numAffectedRows, 1n);
        assert.deepEqual((await adapter.runPreparedOn(trx, select)).rows, [{ first_name: 'B' }]);
      });
      assert.deepEqual((await adapter.runPreparedOn(testDb.db, select)).rows, [{ first_name: 'B' }]);
      const rolledBack = await testDb.db.startTransaction().execute();
      await rolledBack.insertInto('contact').values({ first_name: 'C', last_name: 'PreparedOn' }).execute();
      assert.equal((await adapter.runPreparedOn(rolledBack, select)).rows.length, 2);
      await rolledBack.rollback().execute();
      assert.deepEqual((await adapter.runPreparedOn(testDb.db, select)).rows, [{ first_name: 'B' }]);
    });

    it('commitWithoutFlush commits its statement on its own: kept when a transaction open meanwhile rolls back', async () => {
      const open = await testDb.db.connection().execute(async (connection) => {
        // A transaction of this process stays open on another connection (PostgreSQL) while the
        // statement commits; SQLite's one connection is free (no transaction is open on it).
        if (!testDb.database.dialect.hasConcurrentWriters) return undefined;
        await sql`begin`.execute(connection);
        await connection.insertInto('contact').values({ first_name: 'X', last_name: 'Relaxed' }).execute();
        await testDb.database.dialect.commitWithoutFlush(
          testDb.db.insertInto('contact').values({ first_name: 'Y', last_name: 'Relaxed' }).compile(),
        );
        await sql`rollback`.execute(connection);
        return 'rolled back';
      });
      if (open === undefined) {
        await testDb.database.dialect.commitWithoutFlush(
          testDb.db.insertInto('contact').values({ first_name: 'Y', last_name: 'Relaxed' }).compile(),
        );
      }
      const rows = await testDb.db
        .selectFrom('contact')
        .select('first_name')
        .where('last_name', '=', 'Relaxed')
        .execute();
      assert.deepEqual(rows, [{ first_name: 'Y' }]);
    });

    it('tryLockNamedRow creates a missing key row, commits it on its own and holds it; its own key again is true', async () => {
      const { dialect: adapter } = testDb.database;
      const trx = await testDb.db.startTransaction().execute();
      try {
        assert.equal(await adapter.tryLockNamedRow(trx, target('ops:new')), true);
        assert.equal(await adapter.tryLockNamedRow(trx, target('ops:new')), true);
      } finally {
        await trx.rollback().execute();
      }
      // On an engine with concurrent writers the key row is committed outside the transaction, so that no
      // other transaction waits on its uncommitted insert; a single writer writes it in the transaction.
      assert.deepEqual(
        await keyRows(['ops:new']),
        testDb.database.dialect.hasConcurrentWriters ? ['ops:new'] : [],
      );
    });

    it('tryLockNamedRow answers false at once for a key another transaction holds, and true once it ends', async (t) => {
      const { dialect: adapter } = testDb.database;
      if (!adapter.hasRowLocks) {
        t.skip('one writer: no other transaction can hold a key');
        return;
      }
      const holder = await testDb.db.startTransaction().execute();
      let isHolderOpen = true;
      try {
        await adapter.lockNamedRow(holder, target('ops:held'), 5000);
        const trx = await testDb.db.startTransaction().execute();
        try {
          assert.equal(await adapter.tryLockNamedRow(trx, target('ops:held')), false);
          await holder.commit().execute();
          isHolderOpen = false;
          assert.equal(await adapter.tryLockNamedRow(trx, target('ops:held')), true);
          const other = await testDb.db.startTransaction().execute();
          try {
            assert.equal(await adapter.tryLockNamedRow(other, target('ops:held')), false, 'now held by trx');
          } finally {
            await other.rollback().execute();
          }
        } finally {
          await trx.rollback().execute();
        }
      } finally {
        if (isHolderOpen) await holder.rollback().execute();
      }
    });

    it('tryLockSessionKeys holds keys for the session across a rollback, until released or the session ends', async (t) => {
      const { dialect: adapter } = testDb.database;
      if (!adapter.hasRowLocks) {
        t.skip('one writer: no other session to exclude');
        return;
      }
      await testDb.db.connection().execute(async (holder) => {
        assert.deepEqual(await adapter.tryLockSessionKeys(holder, [7, 8]), new Set([7, 8]));
        const trx = await holder.startTransaction().execute();
        await trx.rollback().execute();
        await testDb.db.connection().execute(async (other) => {
          assert.deepEqual(
            await adapter.tryLockSessionKeys(other, [7, 8, 9]),
            new Set([9]),
            'a rollback keeps them',
          );
          await adapter.unlockSessionKeys(other, [9]);
          await adapter.unlockSessionKeys(holder, [7]);
          assert.deepEqual(await adapter.tryLockSessionKeys(other, [7, 8]), new Set([7]));
          await adapter.unlockSessionKeys(other, [7]);
        });
        await adapter.unlockSessionKeys(holder, [8]);
      });
      // The session that held them has ended: a closed database releases every key.
      const closed = await openDatabase(loadConfig(testDb.env).database, { poolSize: 1 });
      const taken = await closed.db
        .connection()
        .execute((conn) => closed.dialect.tryLockSessionKeys(conn, [10]));
      assert.deepEqual(taken, new Set([10]));
      await closed.close();
      // The server ends the closed session a moment after the client.
      await until(() =>
        testDb.db.connection().execute(async (conn) => {
          const got = await adapter.tryLockSessionKeys(conn, [8, 10]);
          await adapter.unlockSessionKeys(conn, [...got]);
          return got.size === 2;
        }),
      );
    });
  });
});
