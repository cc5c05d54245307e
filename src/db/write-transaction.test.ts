import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { countRows } from '../../test/factories.ts';
import type { TestDatabase } from '../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../test/harness.ts';

forEachDialect((dialect) => {
  describe(`Database.writeTransaction [${dialect}]`, () => {
    let testDb: TestDatabase;
    before(async () => {
      testDb = await createTestDatabase(dialect);
    });
    after(() => testDb.drop());

    it('commits concurrent writes, and a failing write rolls back alone', async () => {
      const before = await countRows(testDb.db, 'contact');
      const writes = Array.from({ length: 20 }, (_, i) =>
        testDb.database.writeTransaction(async (trx) => {
          const row = await trx
            .insertInto('contact')
            .values({ first_name: `W${i}`, last_name: 'Batch' })
            .returning('id')
            .executeTakeFirstOrThrow();
          if (i % 5 === 0) throw new Error(`write ${i} refused`);
          return row.id;
        }),
      );
      const outcomes = await Promise.allSettled(writes);
      const failed = outcomes.filter((o) => o.status === 'rejected');
      assert.equal(failed.length, 4);
      for (const f of failed) assert.match(String(f.reason), /write \d+ refused/);
      assert.equal(await countRows(testDb.db, 'contact'), before + 16);
      const names = await testDb.db
        .selectFrom('contact')
        .select('first_name')
        .where('last_name', '=', 'Batch')
        .execute();
      assert.deepEqual(
        names.map((n) => n.first_name).sort(),
        Array.from({ length: 20 }, (_, i) => i)
          .filter((i) => i % 5 !== 0)
          .map((i) => `W${i}`)
          .sort(),
      );
    });

    it('resolves a write only once its rows are visible to other readers', async () => {
      const id = await testDb.database.writeTransaction(async (trx) => {
        const row = await trx
          .insertInto('contact')
          .values({ first_name: 'Seen', last_name: 'After' })
          .returning('id')
          .executeTakeFirstOrThrow();
        return row.id;
      });
      const row = await testDb.db
        .selectFrom('contact')
        .select('first_name')
        .where('id', '=', id)
        .executeTakeFirst();
      assert.equal(row?.first_name, 'Seen');
    });
  });
});
