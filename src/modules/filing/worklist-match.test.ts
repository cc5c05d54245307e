/**
 * A DICOM study made for a worklist entry is filed through it (PATIENT_MATCH's `worklistEntryOf`): the
 * Study Instance UID or accession number the Modality Worklist handed out names the patient without the
 * device's PatientID or birth date, the event goes into the episode of the entry's firm, and keys or
 * demographics that contradict the entry fail the request, filed to neither patient.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createPatient, createUser } from '../../../test/factories.ts';
import type { TestUser } from '../../../test/factories.ts';
import { addIdentifier, createStandardInstitutions } from '../../../test/factories-patient.ts';
import {
  buildPart10File,
  dicomElement,
  executionsOf,
  routinesOf,
  submitToQueue,
} from '../../../test/factories-queue.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import { createBooking, createWorklist } from '../../../test/worklist-fixtures.ts';
import { readRequestText } from '../attachment-data/index.ts';
import { closeDicomPools } from '../dicom/index.ts';
import type { QueueEngine } from '../request-queue/index.ts';
import { createQueueEngine } from '../request-queue/index.ts';
import type { EntryIds } from '../worklist/worklist.queries.ts';
import { ensureEntryIds } from '../worklist/worklist.queries.ts';
import { defaultRoutineCatalog } from './index.ts';

const CATARACT_FIRM = 601;
let uidCounter = 0;
const newUid = () => `1.2.826.0.1.3680043.8.498.77.${process.pid}.${++uidCounter}`;

interface StudyTags {
  readonly studyInstanceUid: string;
  readonly patientId?: string;
  readonly birthDate?: string;
  readonly sex?: string;
  readonly accessionNumber?: string;
  /** Requested Procedure ID in the Request Attributes Sequence, as a device copies it from the entry. */
  readonly requestedProcedureId?: string;
}

/** A photograph's header without pixels (a device file filed generically), with the worklist keys given. */
function studyFile(tags: StudyTags): Buffer {
  const text = (s: string) => Buffer.from(s, 'latin1');
  const sopInstanceUid = newUid();
  const optional = (group: number, element: number, vr: string, value: string | undefined) =>
    value === undefined ? [] : [dicomElement(group, element, vr, text(value))];
  const requestAttributes =
    tags.requestedProcedureId === undefined
      ? []
      : [
          (() => {
            const inner = dicomElement(0x0040, 0x1001, 'SH', text(tags.requestedProcedureId));
            const itemHead = Buffer.alloc(8);
            itemHead.writeUInt16LE(0xfffe, 0);
            itemHead.writeUInt16LE(0xe000, 2);
            itemHead.writeUInt32LE(inner.length, 4);
            return dicomElement(0x0040, 0x0275, 'SQ', Buffer.concat([itemHead, inner]));
          })(),
        ];
  const dataset = Buffer.concat([
    dicomElement(0x0008, 0x0016, 'UI', text('1.2.840.10008.5.1.4.1.1.7')),
    dicomElement(0x0008, 0x0018, 'UI', text(sopInstanceUid)),
    dicomElement(0x0008, 0x0020, 'DA', text('20260715')),
    dicomElement(0x0008, 0x0030, 'TM', text('093500')),
    ...optional(0x0008, 0x0050, 'SH', tags.accessionNumber),
    dicomElement(0x0008, 0x0060, 'CS', text('OP')),
    dicomElement(0x0008, 0x0070, 'LO', text('Acme')),
    dicomElement(0x0010, 0x0010, 'PN', text('Test^Worklist')),
    dicomElement(0x0010, 0x0020, 'LO', text(tags.patientId ?? '')),
    ...optional(0x0010, 0x0030, 'DA', tags.birthDate),
    ...optional(0x0010, 0x0040, 'CS', tags.sex),
    dicomElement(0x0020, 0x000d, 'UI', text(tags.studyInstanceUid)),
    ...requestAttributes,
  ]);
  return buildPart10File(dataset, { sopInstanceUid });
}

forEachDialect((dialect) => {
  describe(`a study made for a worklist entry, filed through it (${dialect})`, () => {
    let app: TestApp;
    let user: TestUser;
    let engine: QueueEngine;
    let ann: { patientId: number; bookingId: number; ids: EntryIds };
    let bob: { patientId: number; bookingId: number; ids: EntryIds };

    before(async () => {
      app = await startTestApp(dialect);
      user = await createUser(app.db);
      engine = createQueueEngine({
        database: app.database,
        config: app.config,
        catalog: defaultRoutineCatalog,
      });
      const { localTypeId } = await createStandardInstitutions(app.db, 'WLM');
      const clinic = await createWorklist(app.db, {
        typeId: localTypeId,
        name: 'Cataract',
        day: '2026-07-15',
      });
      const glaucoma = await createWorklist(app.db, {
        typeId: localTypeId,
        name: 'Glaucoma',
        day: '2026-07-15',
      });
      await app.db
        .insertInto('worklist_definition_display_context')
        .values({ worklist_definition_id: clinic.definitionId, firm_id: CATARACT_FIRM })
        .execute();
      const a = await createPatient(app.db, { patient: { dob: '1950-02-01', gender: 'F' } });
      const b = await createPatient(app.db, { patient: { dob: '1961-03-04', gender: 'M' } });
      await addIdentifier(app.db, a.patientId, localTypeId, 'WLANN1');
      await addIdentifier(app.db, b.patientId, localTypeId, 'WLBOB2');
      const annBooking = await createBooking(app.db, {
        worklistId: clinic.worklistId,
        patientId: a.patientId,
        whenUtc: '2026-07-15T09:30:00Z',
      });
      const bobBooking = await createBooking(app.db, {
        worklistId: glaucoma.worklistId,
        patientId: b.patientId,
        whenUtc: '2026-07-15T10:30:00Z',
      });
      const ids = await ensureEntryIds(app.database, [annBooking, bobBooking]);
      ann = { patientId: a.patientId, bookingId: annBooking, ids: ids.get(annBooking)! };
      bob = { patientId: b.patientId, bookingId: bobBooking, ids: ids.get(bobBooking)! };
    });
    after(async () => {
      await closeDicomPools();
      await app.close();
    });

    async function submit(bytes: Buffer): Promise<number> {
      const form = new FormData();
      form.append('scan', new Blob([new Uint8Array(bytes)], { type: 'application/dicom' }), 'scan.dcm');
      const response = await submitToQueue(app, user.authorization, {
        query: 'request_type=dicom_request',
        body: form,
      });
      assert.equal(response.status, 200, await response.clone().text());
      return ((await response.json()) as { request_id: number }).request_id;
    }

    async function drain(): Promise<string[]> {
      const ran: string[] = [];
      for (let i = 0; i < 20; i++) {
        const outcome = await engine.step();
        if (outcome.kind !== 'ran') return ran;
        ran.push(`${outcome.routineName}:${outcome.status}`);
      }
      throw new Error(`the queue did not drain: ${ran.join(', ')}`);
    }

    const requestDataOf = (requestId: number) => readRequestText(app.db, requestId, 'REQUEST_DATA');

    async function matchLog(requestId: number): Promise<string> {
      const routine = (await routinesOf(app.db, requestId)).find((r) => r.routine_name === 'PATIENT_MATCH');
      assert.ok(routine, 'PATIENT_MATCH ran');
      return (await executionsOf(app.db, routine.id)).at(-1)?.log_text ?? '';
    }

    async function eventsOf(patientId: number): Promise<{ id: number; firm_id: number | null }[]> {
      return app.db
        .selectFrom('event')
        .innerJoin('episode', 'episode.id', 'event.episode_id')
        .select(['event.id', 'episode.firm_id'])
        .where('episode.patient_id', '=', patientId)
        .where('event.deleted', '=', 0)
        .execute();
    }

    it("files a study with the entry's Study Instance UID and no PatientID or birth date to its patient, in the entry's firm", async () => {
      const before = (await eventsOf(ann.patientId)).length;
      const requestId = await submit(studyFile({ studyInstanceUid: ann.ids.studyInstanceUid }));
      const ran = await drain();
      assert.ok(ran.includes('PATIENT_MATCH:COMPLETE'), ran.join(', '));
      assert.ok(ran.includes('ATTACH_TO_EVENT:COMPLETE'), ran.join(', '));
      const data = await requestDataOf(requestId);
      assert.equal(data.matched_patient_id, ann.patientId);
      assert.equal(data.device_worklist_booking_id, ann.bookingId);
      assert.equal(data.device_worklist_firm_id, CATARACT_FIRM);
      const events = await eventsOf(ann.patientId);
      assert.equal(events.length, before + 1);
      const filed = events.find((event) => event.id === data.event_id);
      assert.ok(filed, "the event is the patient's");
      assert.equal(Number(filed.firm_id), CATARACT_FIRM, "the episode is the entry's firm's");
      assert.match(await matchLog(requestId), /through worklist entry \d+ \(by StudyInstanceUID\)/);
    });

    it('files by the accession number or the Requested Procedure ID when the device made its own study UID', async () => {
      for (const tags of [
        { accessionNumber: bob.ids.accessionNumber, patientId: 'TYPED-WRONG' },
        { requestedProcedureId: bob.ids.accessionNumber },
      ]) {
        const requestId = await submit(studyFile({ studyInstanceUid: newUid(), ...tags }));
        const ran = await drain();
        assert.ok(ran.includes('ATTACH_TO_EVENT:COMPLETE'), ran.join(', '));
        const data = await requestDataOf(requestId);
        assert.equal(data.matched_patient_id, bob.patientId);
        assert.equal(data.device_worklist_booking_id, bob.bookingId);
        assert.equal(data.device_worklist_firm_id, null, 'no display context, no firm');
      }
    });

    it("fails a study whose demographics match exactly another patient than the entry's, filed to neither", async () => {
      const annBefore = (await eventsOf(ann.patientId)).length;
      const bobBefore = (await eventsOf(bob.patientId)).length;
      const requestId = await submit(
        studyFile({
          studyInstanceUid: ann.ids.studyInstanceUid,
          patientId: 'WLBOB2',
          birthDate: '19610304',
          sex: 'M',
        }),
      );
      const ran = await drain();
      assert.deepEqual(ran.slice(-1), ['PATIENT_MATCH:FAILED']);
      assert.match(await matchLog(requestId), /worklist entry \d+ .*not the one patient .*filed to neither/);
      assert.equal((await requestDataOf(requestId)).matched_patient_id, undefined);
      assert.equal((await eventsOf(ann.patientId)).length, annBefore);
      assert.equal((await eventsOf(bob.patientId)).length, bobBefore);
    });

    it("fails a study whose UID names one entry and accession number another, and matches the entry's own demographics", async () => {
      const bobBefore = (await eventsOf(bob.patientId)).length;
      const contradiction = await submit(
        studyFile({ studyInstanceUid: ann.ids.studyInstanceUid, accessionNumber: bob.ids.accessionNumber }),
      );
      assert.deepEqual((await drain()).slice(-1), ['PATIENT_MATCH:FAILED']);
      assert.match(await matchLog(contradiction), /name 2 different worklist entries/);
      assert.equal((await eventsOf(bob.patientId)).length, bobBefore);

      // The entry's own patient's demographics agree with it: filed.
      const agreeing = await submit(
        studyFile({ studyInstanceUid: bob.ids.studyInstanceUid, patientId: 'WLBOB2', birthDate: '19610304' }),
      );
      assert.ok((await drain()).includes('ATTACH_TO_EVENT:COMPLETE'));
      assert.equal((await requestDataOf(agreeing)).matched_patient_id, bob.patientId);
    });

    it('matches a study naming no entry by its demographics, as before', async () => {
      const requestId = await submit(
        studyFile({
          studyInstanceUid: newUid(),
          accessionNumber: '999999',
          patientId: 'WLANN1',
          birthDate: '19500201',
        }),
      );
      assert.ok((await drain()).includes('ATTACH_TO_EVENT:COMPLETE'));
      const data = await requestDataOf(requestId);
      assert.equal(data.matched_patient_id, ann.patientId);
      assert.equal(data.device_worklist_booking_id, undefined);
    });
  });
});
