/**
 * `Database.openBackgroundWriter` on each dialect: a batch is committed on the writer's own connection
 * (on SQLite a worker thread's) and seen by the database's connection once it resolves; a batch is all or
 * nothing; the writer takes batches again after a failed one; on SQLite it waits for the write lock that
 * another connection holds, up to its busy timeout, and fails with SQLITE_BUSY past it, and takes its turn
 * among the server connection's own writes.
 */
import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { after, before, describe, it } from 'node:test';
import type { TestDatabase } from '../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../test/harness.ts';
import type { BackgroundWriter } from './background-writer.ts';
import type { BulkColumn } from './dialect.ts';

const COLUMNS: readonly BulkColumn[] = [
  { name: 'first_name', type: 'text' },
  { name: 'last_name', type: 'text' },
];

forEachDialect((dialect) => {
  describe(`background writer [${dialect}]`, () => {
    let testDb: TestDatabase;
    let writer: BackgroundWriter;
    before(async () => {
      testDb = await createTestDatabase(dialect);
      writer = testDb.database.openBackgroundWriter();
    });
    after(async () => {
      await writer.close();
      await testDb.drop();
    });

    const countOf = async (lastName: string) =>
      (await testDb.db.selectFrom('contact').select('id').where('last_name', '=', lastName).execute()).length;

    it('commits a batch on its own connection, seen by the database once it resolves', async () => {
      const rows = Array.from({ length: 1200 }, (_, i) => [`F${i}`, 'Background']);
      await writer.insertRows('contact', COLUMNS, rows);
      assert.equal(await countOf('Background'), 1200);
    });

    it('writes every row of batches of every size, each row once, with its own values', async () => {
      // SQLite's thread splits a batch into statements of a few fixed sizes (powers of 4).
      const sizes = [...Array.from({ length: 70 }, (_, i) => i + 1), 255, 256, 257, 1023, 4097];
      for (const size of sizes) {
        const rows = Array.from({ length: size }, (_, i) => [`R${i}`, `Sized${size}`]);
        await writer.insertRows('contact', COLUMNS, rows);
      }
      for (const size of [1, 5, 17, 69, 257, 4097]) {
        const names = (
          await testDb.db
            .selectFrom('contact')
            .select('first_name')
            .where('last_name', '=', `Sized${size}`)
            .execute()
        ).map((r) => r.first_name);
        assert.equal(names.length, size, `a batch of ${size} rows`);
        assert.deepEqual(new Set(names), new Set(Array.from({ length: size }, (_, i) => `R${i}`)));
      }
    });

    it('writes all of a batch or none of it, and takes batches again after a failed one', async () => {
      await assert.rejects(
        writer.insertRows('contact', COLUMNS, [
          ['A', 'AllOrNone'],
          ['B', 'AllOrNone'],
          ['C', null],
        ]),
      );
      assert.equal(await countOf('AllOrNone'), 0);
      await writer.insertRows('contact', COLUMNS, [['D', 'AllOrNone']]);
      assert.equal(await countOf('AllOrNone'), 1);
    });

    if (dialect === 'sqlite')
      it('waits for the write lock of another connection, fails with SQLITE_BUSY past its busy timeout, then writes once it is free', async () => {
        const other = new DatabaseSync(testDb.url.slice('sqlite:'.length));
        other.exec('BEGIN IMMEDIATE');
        try {
          await assert.rejects(
            writer.insertRows('contact', COLUMNS, [['E', 'Locked']]),
            /database is locked/,
          );
        } finally {
          other.exec('ROLLBACK');
          other.close();
        }
        await writer.insertRows('contact', COLUMNS, [['F', 'Locked']]);
        assert.equal(await countOf('Locked'), 1);
      });

    if (dialect === 'sqlite')
      it("takes its turn among the server connection's writes, however long they keep the lock busy", async () => {
        // Server writes that each hold the write lock until the test lets them go: a batch of them would
        // hold it for longer than the writer's busy timeout (1 s). A batch takes no more writes once it
        // has run its budget (100 ms), and the writer's turn comes right after the batch under way,
        // before the server's writes still waiting. Only lower bounds on time are used (a hold lasts
        // at least 150 ms), so a loaded machine cannot change the order.
        const gates: (() => void)[] = [];
        const started: Promise<void>[] = [];
        const serverWrites = (wave: string) =>
          Array.from({ length: 10 }, (_, i) => {
            let markStarted!: () => void;
            started.push(new Promise<void>((resolve) => (markStarted = resolve)));
            const released = new Promise<void>((resolve) => gates.push(resolve));
            return testDb.database.writeTransaction(async (trx) => {
              await trx
                .insertInto('contact')
                .values({ first_name: `S${i}`, last_name: wave })
                .execute();
              markStarted();
              await released;
            });
          });
        const releaseAll = () => gates.forEach((release) => release());
        await writer.insertRows('contact', COLUMNS, [['W', 'WarmUp']]); // its thread started
        let releaseBlocker!: () => void;
        const blockerReleased = new Promise<void>((resolve) => (releaseBlocker = resolve));
        // A write under way, so that the first wave queues up behind it as one would-be batch.
        const blocker = testDb.database.writeTransaction(() => blockerReleased);
        const first = serverWrites('FirstWave');
        releaseBlocker();
        await started[0]; // the first wave's batch has begun: its first write holds the lock
        const inserted = writer.insertRows('contact', COLUMNS, [['G', 'InTurn']]);
        await new Promise((resolve) => setImmediate(resolve)); // the writer has asked for its turn
        const second = serverWrites('SecondWave');
        // The first write holds the lock past the batch's budget, then the batch commits it alone.
        await new Promise((resolve) => setTimeout(resolve, 150));
        gates[0]!();
        // The rest are let go once the writer has had its turn (or after 10 s, so that a writer kept
        // waiting fails the counts below instead of hanging): in its turn no server write is under way.
        await Promise.race([inserted, new Promise((resolve) => setTimeout(resolve, 10_000).unref())]);
        releaseAll();
        await inserted;
        // Committed rows, read on a connection of its own (the server connection's open transaction of
        // the next batch would show its own rows).
        const reader = new DatabaseSync(testDb.url.slice('sqlite:'.length));
        const committed = (lastName: string) =>
          (
            reader.prepare('select count(*) as n from contact where last_name = ?').get(lastName) as {
              n: number;
            }
          ).n;
        try {
          assert.equal(committed('InTurn'), 1);
          // Its turn came after the batch under way (one write, past its budget) and before the server's
          // writes still waiting, those queued before the turn (the first wave's rest) and after it.
          assert.equal(committed('FirstWave'), 1);
          assert.equal(committed('SecondWave'), 0);
        } finally {
          reader.close();
        }
        await Promise.all([blocker, ...first, ...second]);
        assert.equal(await countOf('FirstWave'), 10);
        assert.equal(await countOf('SecondWave'), 10);
      });
  });
});
