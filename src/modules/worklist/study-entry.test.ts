/**
 * The worklist entry a received study names (`findStudyEntry`): by the Study Instance UID, accession
 * number or Requested Procedure ID handed out for a booking, only ids this service handed out, keys that
 * name two entries a contradiction, and the appointment's firm and subspecialty from the definition's
 * display contexts.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createStandardInstitutions } from '../../../test/factories-patient.ts';
import { createPatient } from '../../../test/factories.ts';
import type { TestDatabase } from '../../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../../test/harness.ts';
import { createBooking, createWorklist } from '../../../test/worklist-fixtures.ts';
import type { EntryIds } from './worklist.queries.ts';
import { ensureEntryIds, findStudyEntry } from './worklist.queries.ts';

const CATARACT_FIRM = 501;

forEachDialect((dialect) => {
  describe(`the worklist entry a study names (${dialect})`, () => {
    let testDb: TestDatabase;
    let ann: { bookingId: number; patientId: number; ids: EntryIds };
    let bob: { bookingId: number; patientId: number; ids: EntryIds };
    let unasked: number;

    before(async () => {
      testDb = await createTestDatabase(dialect);
      const db = testDb.db;
      const { localTypeId } = await createStandardInstitutions(db, 'NEW');
      const clinic = await createWorklist(db, {
        typeId: localTypeId,
        name: 'Cataract clinic',
        day: '2026-07-15',
      });
      const other = await createWorklist(db, {
        typeId: localTypeId,
        name: 'Glaucoma clinic',
        day: '2026-07-15',
      });
      // The cataract clinic's definition is shown in one firm's context; the glaucoma clinic's in two.
      // Firm ids as the display context holds them (the own schema keeps no firm table).
      const cataractFirm = CATARACT_FIRM;
      await db
        .insertInto('worklist_definition_display_context')
        .values({ worklist_definition_id: clinic.definitionId, firm_id: cataractFirm })
        .execute();
      for (const id of [CATARACT_FIRM + 1, CATARACT_FIRM + 2]) {
        await db
          .insertInto('worklist_definition_display_context')
          .values({ worklist_definition_id: other.definitionId, firm_id: id })
          .execute();
      }
      const a = await createPatient(db, { lastName: 'Smith' });
      const b = await createPatient(db, { lastName: 'Jones' });
      const annBooking = await createBooking(db, {
        worklistId: clinic.worklistId,
        patientId: a.patientId,
        whenUtc: '2026-07-15T09:30:00Z',
      });
      const bobBooking = await createBooking(db, {
        worklistId: other.worklistId,
        patientId: b.patientId,
        whenUtc: '2026-07-15T10:30:00Z',
      });
      // A booking no device has been handed ids for.
      unasked = await createBooking(db, {
        worklistId: clinic.worklistId,
        patientId: b.patientId,
        whenUtc: '2026-07-15T11:30:00Z',
      });
      const ids = await ensureEntryIds(testDb.database, [annBooking, bobBooking]);
      ann = { bookingId: annBooking, patientId: a.patientId, ids: ids.get(annBooking)! };
      bob = { bookingId: bobBooking, patientId: b.patientId, ids: ids.get(bobBooking)! };
    });

    after(async () => {
      await testDb?.drop();
    });

    it('finds the entry by its Study Instance UID, with the one firm of its display context', async () => {
      const found = await findStudyEntry(testDb.db, { studyInstanceUid: ann.ids.studyInstanceUid });
      assert.equal(found.kind, 'entry');
      assert.ok(found.kind === 'entry');
      assert.equal(found.entry.bookingId, ann.bookingId);
      assert.equal(found.entry.patientId, ann.patientId);
      assert.equal(found.entry.patientDeleted, false);
      assert.equal(found.entry.firmId, CATARACT_FIRM);
      assert.deepEqual(found.entry.namedBy, ['StudyInstanceUID']);
    });

    it('finds it by accession number or Requested Procedure ID, and says which keys named it', async () => {
      const byAccession = await findStudyEntry(testDb.db, {
        accessionNumber: ` ${ann.ids.accessionNumber} `,
      });
      assert.ok(byAccession.kind === 'entry');
      assert.equal(byAccession.entry.bookingId, ann.bookingId);
      const byAll = await findStudyEntry(testDb.db, {
        studyInstanceUid: bob.ids.studyInstanceUid,
        accessionNumber: bob.ids.accessionNumber,
        requestedProcedureIds: [bob.ids.accessionNumber],
      });
      assert.ok(byAll.kind === 'entry');
      assert.equal(byAll.entry.patientId, bob.patientId);
      assert.deepEqual(byAll.entry.namedBy, ['StudyInstanceUID', 'AccessionNumber', 'RequestedProcedureID']);
      // Two firms show the glaucoma clinic: the appointment names no single firm.
      assert.equal(byAll.entry.firmId, null);
    });

    it('names nothing for ids it never handed out, empty keys, or another UID', async () => {
      assert.equal((await findStudyEntry(testDb.db, {})).kind, 'none');
      assert.equal(
        (await findStudyEntry(testDb.db, { accessionNumber: '  ', studyInstanceUid: '' })).kind,
        'none',
      );
      // The booking exists, but no query handed its accession number to a device.
      assert.equal((await findStudyEntry(testDb.db, { accessionNumber: String(unasked) })).kind, 'none');
      assert.equal((await findStudyEntry(testDb.db, { studyInstanceUid: '1.2.3.4' })).kind, 'none');
    });

    it("is a contradiction when the study's keys name two entries", async () => {
      const found = await findStudyEntry(testDb.db, {
        studyInstanceUid: ann.ids.studyInstanceUid,
        accessionNumber: bob.ids.accessionNumber,
      });
      assert.equal(found.kind, 'contradiction');
      assert.ok(found.kind === 'contradiction');
      assert.deepEqual(
        found.bookingIds,
        [ann.bookingId, bob.bookingId].sort((x, y) => x - y),
      );
    });
  });
});
