import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createAttachment } from '../../../test/factories-attachment.ts';
import type { TestDatabase } from '../../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../../test/harness.ts';
import type { ExpectedBlob } from './blob-slices.ts';
import { ChangedWhileReadingError, readBlobSlices } from './blob-slices.ts';

forEachDialect((dialect) => {
  describe(`readBlobSlices (${dialect})`, () => {
    let testDb: TestDatabase;
    before(async () => {
      testDb = await createTestDatabase(dialect);
    });
    after(async () => {
      await testDb.drop();
    });

    const sliceBytes = () => testDb.database.dialect.blobSliceBytes;
    const dateOf = async (id: number) =>
      (
        await testDb.db
          .selectFrom('attachment_data')
          .select('last_modified_date')
          .where('id', '=', id)
          .executeTakeFirstOrThrow()
      ).last_modified_date;

    /** Every slice yielded and the generator's return value. */
    async function readAll(
      id: number,
      expected?: ExpectedBlob,
      column: 'blob_data' | 'thumbnail_small_blob' = 'blob_data',
    ) {
      const slices: Buffer[] = [];
      const reader = readBlobSlices(testDb.database.dialect, id, column, expected);
      for (;;) {
        const next = await reader.next();
        if (next.done === true) return { slices, isPresent: next.value };
        slices.push(next.value);
      }
    }

    it('reads to the end in whole slices, a value of exactly whole slices and an empty one too', async () => {
      for (const size of [1, sliceBytes() - 1, sliceBytes(), sliceBytes() + 3]) {
        const bytes = randomBytes(size);
        const id = await createAttachment(testDb.db, { blob_data: bytes });
        const read = await readAll(id);
        assert.equal(read.isPresent, true);
        assert.ok(Buffer.concat(read.slices).equals(bytes), `${size} bytes`);
        assert.ok(read.slices.slice(0, -1).every((slice) => slice.length === sliceBytes()));
        const known = await readAll(id, { modifiedDate: await dateOf(id), sizeBytes: size });
        assert.deepEqual(known.slices, read.slices);
      }
      const empty = await createAttachment(testDb.db, { blob_data: Buffer.alloc(0) });
      // No slices; whether it counts as present differs (SQLite's substr of an empty blob is NULL).
      assert.deepEqual((await readAll(empty)).slices, []);
    });

    it('answers false for a null field; with the size and date known, refuses a value that does not match', async () => {
      const id = await createAttachment(testDb.db, { blob_data: randomBytes(100) });
      assert.deepEqual(await readAll(id, undefined, 'thumbnail_small_blob'), {
        slices: [],
        isPresent: false,
      });
      const date = await dateOf(id);
      const refusals: [ExpectedBlob, 'blob_data' | 'thumbnail_small_blob', string][] = [
        [{ modifiedDate: date, sizeBytes: 101 }, 'blob_data', 'changed'],
        [{ modifiedDate: '2001-01-01 00:00:00', sizeBytes: 100 }, 'blob_data', 'changed'],
        [{ modifiedDate: date, sizeBytes: 10 }, 'thumbnail_small_blob', 'emptied'],
      ];
      for (const [expected, column, change] of refusals)
        await assert.rejects(readAll(id, expected, column), (error: unknown) => {
          assert.ok(error instanceof ChangedWhileReadingError);
          assert.equal(error.change, change);
          return true;
        });
      assert.deepEqual(await readAll(id, { modifiedDate: date, sizeBytes: 0 }), {
        slices: [],
        isPresent: true,
      });
    });

    it('fails when the row is written, emptied or deleted between two slices', async () => {
      const cases: [string, (id: number) => Promise<unknown>][] = [
        [
          'changed',
          (id) =>
            testDb.db
              .updateTable('attachment_data')
              .set({ last_modified_date: '2031-01-01 00:00:00' })
              .where('id', '=', id)
              .execute(),
        ],
        [
          'emptied',
          (id) =>
            testDb.db.updateTable('attachment_data').set({ blob_data: null }).where('id', '=', id).execute(),
        ],
        ['deleted', (id) => testDb.db.deleteFrom('attachment_data').where('id', '=', id).execute()],
      ];
      for (const [change, write] of cases) {
        for (const isKnown of [false, true]) {
          const bytes = randomBytes(sliceBytes() + 1);
          const id = await createAttachment(testDb.db, { blob_data: bytes });
          const expected = isKnown ? { modifiedDate: await dateOf(id), sizeBytes: bytes.length } : undefined;
          const reader = readBlobSlices(testDb.database.dialect, id, 'blob_data', expected);
          const first = await reader.next();
          assert.ok(first.done !== true && first.value.equals(bytes.subarray(0, sliceBytes())));
          await write(id);
          await assert.rejects(reader.next(), (error: unknown) => {
            assert.ok(error instanceof ChangedWhileReadingError, `${change}, size known: ${isKnown}`);
            assert.equal(error.change, change);
            return true;
          });
        }
      }
    });
  });
});
