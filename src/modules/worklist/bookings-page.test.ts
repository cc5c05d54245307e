/**
 * The pages of bookings a worklist query walks (`readBookingsPage`): a page covers a run of booking ids
 * and says where the next starts, even when every booking it covered is filtered out afterwards (a
 * patient deleted, another identifier): the walk goes on to the bookings after them and ends only when
 * no booking is left.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { addIdentifier, createStandardInstitutions } from '../../../test/factories-patient.ts';
import { createPatient } from '../../../test/factories.ts';
import type { TestDatabase } from '../../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../../test/harness.ts';
import { createBooking, createWorklist } from '../../../test/worklist-fixtures.ts';
import type { BookingFilter } from './worklist.queries.ts';
import { readBookingsPage } from './worklist.queries.ts';

const LIMIT = 10;

forEachDialect((dialect) => {
  describe(`pages of bookings (${dialect})`, () => {
    let testDb: TestDatabase;
    const live: number[] = [];

    before(async () => {
      testDb = await createTestDatabase(dialect);
      const db = testDb.db;
      const { localTypeId } = await createStandardInstitutions(db, 'NEW');
      const { worklistId } = await createWorklist(db, {
        typeId: localTypeId,
        name: 'Clinic',
        day: '2026-07-15',
      });
      // Three pages' worth of bookings of deleted patients, then three of patients in the record.
      for (let i = 0; i < 3 * LIMIT + 3; i += 1) {
        const isLive = i >= 3 * LIMIT;
        const { patientId } = await createPatient(db, { lastName: `Page${i}` });
        await addIdentifier(db, patientId, localTypeId, `H${1000 + i}`);
        const bookingId = await createBooking(db, {
          worklistId,
          patientId,
          whenUtc: '2026-07-15T09:30:00Z',
        });
        if (isLive) live.push(bookingId);
        else await db.updateTable('patient').set({ deleted: 1 }).where('id', '=', patientId).execute();
      }
    });
    after(() => testDb.drop());

    /** Every booking a walk of pages finds, and how many pages it read. */
    async function walk(filter: Omit<BookingFilter, 'afterId' | 'limit'>) {
      const found: number[] = [];
      let afterId = 0;
      let pages = 0;
      for (;;) {
        const page = await readBookingsPage(testDb.db, { ...filter, afterId, limit: LIMIT });
        pages += 1;
        assert.ok(page.rows.every((row) => row.id > afterId && row.id <= page.lastId));
        found.push(...page.rows.map((row) => row.id));
        if (page.isLast) break;
        assert.ok(page.lastId > afterId, 'a page that is not the last moves on');
        afterId = page.lastId;
      }
      return { found, pages };
    }

    it('walks past pages whose bookings are all filtered out, to the bookings after them', async () => {
      const { found, pages } = await walk({
        fromStored: '2026-07-15 00:00:00',
        toStored: '2026-07-15 23:59:59',
      });
      assert.deepEqual(found, live);
      assert.equal(pages, 4);
    });

    it('finds one patient by identifier behind the filtered pages, and none outside the window', async () => {
      assert.deepEqual((await walk({ patientId: { exact: `H${1000 + 3 * LIMIT + 1}` } })).found, [live[1]]);
      assert.deepEqual((await walk({ patientId: { like: 'H103%' } })).found, live);
      assert.deepEqual(
        (await walk({ fromStored: '2026-07-16 00:00:00', toStored: '2026-07-16 23:59:59' })).found,
        [],
      );
    });
  });
});
