/**
 * A device file's event date must be able to date an event: a real date, not before 1900 nor before the
 * patient's birth, not more than a day ahead. `DICOM_SEED` refuses one that is not, for good and with the
 * reason; `ATTACH_TO_EVENT` checks it again against the matched patient's date of birth.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { createInstitution, createPatient, createUser, unique } from '../../../test/factories.ts';
import type { TestUser } from '../../../test/factories.ts';
import { addIdentifier, createIdentifierType } from '../../../test/factories-patient.ts';
import { executionsOf, routinesOf, submitToQueue } from '../../../test/factories-queue.ts';
import type { DevicePatient } from '../../../test/device-objects.ts';
import { OPHTHALMIC_PHOTOGRAPHY_8_BIT, buildDeviceObject } from '../../../test/device-objects.ts';
import { iolMaster500 } from '../../../test/biometry-objects.ts';
import { newUid } from '../../../test/dicom-instances.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import { checkEventDate, findEventDate, normaliseEventDate } from '../device-filing/index.ts';
import { closeDicomPools } from '../dicom/index.ts';
import type { QueueEngine } from '../request-queue/index.ts';
import { createQueueEngine } from '../request-queue/index.ts';
import { defaultRoutineCatalog } from './index.ts';

const NOW = new Date('2026-06-15T12:00:00Z');

/** `YYYYMMDD` of `days` days from now. */
function dicomDateFromNow(days: number): string {
  return new Date(Date.now() + days * 86_400_000).toISOString().slice(0, 10).replace(/-/g, '');
}

describe('event date plausibility', () => {
  it('accepts a real date from 1900 to a day ahead, and names the problem otherwise', () => {
    assert.equal(checkEventDate('2026-06-15 09:30:00', { now: NOW }), undefined);
    assert.equal(checkEventDate('1900-01-01 00:00:00', { now: NOW }), undefined);
    assert.equal(checkEventDate('2026-06-16 11:59:59', { now: NOW }), undefined);
    assert.equal(checkEventDate('2026-06-16 12:00:01', { now: NOW }), 'is more than a day in the future');
    assert.equal(checkEventDate('9999-12-31 00:00:00', { now: NOW }), 'is more than a day in the future');
    assert.equal(checkEventDate('1899-12-31 23:59:59', { now: NOW }), 'is before 1900');
    assert.equal(checkEventDate('0001-01-01 00:00:00', { now: NOW }), 'is before 1900');
    for (const text of ['garbage', '2026-02-30 00:00:00', '2026-06-15', '2026-06-15 24:00:00', ''])
      assert.equal(checkEventDate(text, { now: NOW }), 'is not a date and time', text);
    assert.equal(
      checkEventDate('1969-12-31 10:00:00', { now: NOW, birthDate: '1970-01-01' }),
      "is before the patient's date of birth",
    );
    assert.equal(
      checkEventDate('1970-01-01 00:00:00', { now: NOW, birthDate: '1970-01-01 00:00:00' }),
      undefined,
    );
  });

  it('reads the date of a header with the attribute it came from, years before 100 included', () => {
    assert.deepEqual(findEventDate({ ContentDate: '20240230', StudyDate: '99991231' }), {
      wallClock: '9999-12-31 00:00:00',
      source: 'Study Date',
    });
    assert.deepEqual(findEventDate({ AcquisitionDateTime: '00010101' }), {
      wallClock: '0001-01-01 00:00:00',
      source: 'Acquisition DateTime',
    });
    assert.equal(findEventDate({ StudyTime: '101500' }), undefined);
  });

  it("reads a person's date and time as the console's inputs send it", () => {
    assert.equal(normaliseEventDate('2024-03-02T07:15'), '2024-03-02 07:15:00');
    assert.equal(normaliseEventDate('2024-03-02 07:15:30'), '2024-03-02 07:15:30');
    assert.equal(normaliseEventDate('2024-03-02'), '2024-03-02 00:00:00');
    for (const text of ['2024-02-30T10:00', '2024-03-02T25:00', '02/03/2024', 'garbage', ''])
      assert.equal(normaliseEventDate(text), undefined, text);
  });
});

forEachDialect((dialect) => {
  describe(`device event dates through the queue [${dialect}]`, () => {
    let app: TestApp;
    let user: TestUser;
    let engine: QueueEngine;
    let typeId: number;

    before(async () => {
      app = await startTestApp(dialect, { env: { TIME_ZONE: 'UTC', INSTITUTION_CODE: 'DATEHOSP' } });
      user = await createUser(app.db);
      engine = createQueueEngine({
        database: app.database,
        config: app.config,
        catalog: defaultRoutineCatalog,
      });
      const institutionId = await createInstitution(app.db, { remote_id: 'DATEHOSP' });
      typeId = await createIdentifierType(app.db, { institution_id: institutionId });
    });
    after(async () => {
      await closeDicomPools();
      await app.close();
    });

    async function newPatient(): Promise<{ patientId: number; patient: DevicePatient }> {
      const id = unique('E').slice(0, 12);
      const created = await createPatient(app.db, { patient: { dob: '1960-05-04', gender: 'M' } });
      await addIdentifier(app.db, created.patientId, typeId, id);
      return { patientId: created.patientId, patient: { id, birthDate: '19600504', sex: 'M' } };
    }

    async function send(patient: DevicePatient, studyDate: string): Promise<number> {
      const bytes = await buildDeviceObject({
        sopClassUid: OPHTHALMIC_PHOTOGRAPHY_8_BIT,
        studyInstanceUid: newUid(),
        patient,
        modality: 'OP',
        manufacturer: 'Kowa',
        imageLaterality: 'L',
        studyDate,
        studyTime: '101500',
        content: 'image',
      });
      return sendBytes(bytes);
    }

    async function sendBytes(bytes: Buffer): Promise<number> {
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
      for (let i = 0; i < 40; i++) {
        const outcome = await engine.step();
        if (outcome.kind !== 'ran') return ran;
        ran.push(`${outcome.routineName}:${outcome.status}`);
      }
      throw new Error(`the queue did not drain: ${ran.join(', ')}`);
    }

    async function lastLog(requestId: number, routineName: string): Promise<string> {
      const routine = (await routinesOf(app.db, requestId)).find((r) => r.routine_name === routineName);
      assert.ok(routine, `${routineName} ran`);
      return (await executionsOf(app.db, routine.id)).at(-1)?.log_text ?? '';
    }

    async function eventCount(patientId: number): Promise<number> {
      const rows = await app.db
        .selectFrom('event as e')
        .innerJoin('episode as ep', 'ep.id', 'e.episode_id')
        .select('e.id')
        .where('ep.patient_id', '=', patientId)
        .execute();
      return rows.length;
    }

    for (const [label, studyDate, reason] of [
      ['9999-12-31', '99991231', /Study Date \(9999-12-31 10:15:00\) is more than a day in the future/],
      [
        'three days ahead',
        dicomDateFromNow(3),
        /Study Date \(\d{4}-\d{2}-\d{2} 10:15:00\) is more than a day in the future/,
      ],
      ['1899-12-31', '18991231', /Study Date \(1899-12-31 10:15:00\) is before 1900/],
      ['0001-01-01', '00010101', /Study Date \(0001-01-01 10:15:00\) is before 1900/],
    ] as const) {
      it(`refuses a file dated ${label} at DICOM_SEED, for good, naming the date problem`, async () => {
        const { patientId, patient } = await newPatient();
        const requestId = await send(patient, studyDate);
        assert.deepEqual(await drain(), ['DICOM_SEED:FAILED']);
        const log = await lastLog(requestId, 'DICOM_SEED');
        assert.match(log, reason);
        assert.match(log, /Give the study's date and time in the console/);
        assert.equal(await eventCount(patientId), 0);
      });
    }

    it("refuses at ATTACH_TO_EVENT a file dated before the matched patient's birth", async () => {
      const { patientId, patient } = await newPatient();
      const requestId = await send(patient, '19591231');
      const ran = await drain();
      assert.ok(ran.includes('ATTACH_TO_EVENT:FAILED'), ran.join());
      assert.match(
        await lastLog(requestId, 'ATTACH_TO_EVENT'),
        /The device event date \(1959-12-31 10:15:00\) is before the patient's date of birth: refused/,
      );
      assert.equal(await eventCount(patientId), 0);
    });

    it("refuses at FILE_BIOMETRY a biometry file dated before the matched patient's birth", async () => {
      const { patientId, patient } = await newPatient();
      const requestId = await sendBytes(
        await iolMaster500(
          { id: patient.id, dob: patient.birthDate, sex: patient.sex },
          {
            studyUid: newUid(),
            sopUid: newUid(),
            acquisition: '19591231103000',
            studyDate: '19591231',
            studyTime: '103000',
          },
        ),
      );
      const ran = await drain();
      assert.ok(ran.includes('FILE_BIOMETRY:FAILED'), ran.join());
      assert.match(
        await lastLog(requestId, 'FILE_BIOMETRY'),
        /Biometry file refused: its date \(1959-12-31 10:30:00\) is before the patient's date of birth/,
      );
      // A Biometry event has no episode: it is found by its imported-event row.
      const imported = await sql<{ n: number | string }>`
        select count(*) as n from ophinbiometry_imported_events where patient_id = ${patientId}`.execute(
        app.db,
      );
      assert.equal(Number(imported.rows[0]?.n), 0);
    });

    it('files a file dated today, on its date', async () => {
      const { patientId, patient } = await newPatient();
      const today = dicomDateFromNow(0);
      const requestId = await send(patient, today);
      const ran = await drain();
      assert.ok(
        ran.every((r) => r.endsWith(':COMPLETE')),
        ran.join(),
      );
      assert.match(await lastLog(requestId, 'DICOM_SEED'), /event date: the file's Study Date/);
      const [event] = await app.db
        .selectFrom('event as e')
        .innerJoin('episode as ep', 'ep.id', 'e.episode_id')
        .select('e.event_date')
        .where('ep.patient_id', '=', patientId)
        .execute();
      assert.equal(String(event?.event_date).slice(0, 10).replace(/-/g, ''), today);
    });
  });
});
