/**
 * The console resolves a DICOM file refused at `DICOM_SEED` for its date, over HTTP and once per dialect:
 * the desk gives the study's date and time in "Fix the data and run on", the date is checked as a
 * device's is, kept in the edit history and audited by key name, and the request runs on and files its
 * event on that date.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { createPatient } from '../../../test/factories.ts';
import { addIdentifier, createStandardInstitutions } from '../../../test/factories-patient.ts';
import { ConsoleClient, createOperator, csrfOf, versionOf } from '../../../test/factories-console.ts';
import { blobRow, buildDicomFile, jsonRow } from '../../../test/factories-queue.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import { closeDicomPools } from '../dicom/index.ts';
import type { QueueEngine } from '../request-queue/index.ts';
import { createQueueEngine, enqueueRequest } from '../request-queue/index.ts';
import { defaultRoutineCatalog, editRequestEventDate, readRequestMatchData } from '../filing/index.ts';

const CODE = 'DATEDESK';

async function requestData(app: TestApp, requestId: number): Promise<Record<string, unknown>> {
  const row = await app.db
    .selectFrom('attachment_data')
    .select('text_data')
    .where('request_id', '=', requestId)
    .where('attachment_mnemonic', '=', 'REQUEST_DATA')
    .executeTakeFirstOrThrow();
  return JSON.parse(row.text_data ?? '{}') as Record<string, unknown>;
}

async function routineStates(app: TestApp, requestId: number): Promise<string[]> {
  return (
    await app.db
      .selectFrom('request_routine')
      .select(['routine_name', 'status', 'try_count'])
      .where('request_id', '=', requestId)
      .orderBy('id')
      .execute()
  ).map((r) => `${r.routine_name}:${r.status}:${r.try_count}`);
}

function hospitalNumber(): string {
  return String(Math.floor(1_000_000 + Math.random() * 8_999_999));
}

forEachDialect((dialect) => {
  describe(`console gives the date of a DICOM file refused for its date [${dialect}]`, () => {
    let app: TestApp;
    let engine: QueueEngine;
    let localTypeId: number;

    before(async () => {
      app = await startTestApp(dialect, {
        env: { TIME_ZONE: 'Europe/London', INSTITUTION_CODE: CODE, REFERENCE_CACHE_TTL_MS: '0' },
      });
      ({ localTypeId } = await createStandardInstitutions(app.db, CODE));
      engine = createQueueEngine({
        database: app.database,
        config: app.config,
        catalog: defaultRoutineCatalog,
      });
    });
    after(async () => {
      await closeDicomPools();
      await app.close();
    });

    async function drain(): Promise<string[]> {
      const ran: string[] = [];
      for (let i = 0; i < 40; i++) {
        const outcome = await engine.step();
        if (outcome.kind !== 'ran') return ran;
        ran.push(`${outcome.routineName}:${outcome.status}`);
      }
      throw new Error(`the queue did not drain: ${ran.join(', ')}`);
    }

    /** A patient, and a queued DICOM file of theirs dated `studyDate` ('' for none). */
    async function queueFile(studyDate: string) {
      const number = hospitalNumber();
      const patient = await createPatient(app.db, {
        firstName: 'Jane',
        lastName: `Doe${number}`,
        patient: { dob: '1970-03-15', gender: 'F' },
      });
      await addIdentifier(app.db, patient.patientId, localTypeId, number);
      const { requestId } = await enqueueRequest(app.database, {
        requestType: 'dicom_request',
        attachments: [
          jsonRow('REQUEST_DATA', {}),
          blobRow(
            'dicom',
            'application/dicom',
            buildDicomFile(
              {
                PatientID: number,
                PatientName: 'Doe^Jane',
                PatientBirthDate: '19700315',
                PatientSex: 'F',
                Modality: 'OP',
                Manufacturer: 'Acme Optics',
                StudyInstanceUID: `1.2.826.0.1.3680043.8.498.${number}`,
                StudyDate: studyDate,
              },
              `1.2.826.0.1.3680043.8.498.${number}.1`,
            ),
            'scan.dcm',
          ),
        ],
      });
      return { requestId, patientId: patient.patientId };
    }

    async function seedLog(requestId: number): Promise<string> {
      const result = await sql<{ log_text: string | null }>`
        select e.log_text from request_routine_execution e
        join request_routine r on r.id = e.request_routine_id
        where r.request_id = ${requestId} and r.routine_name = 'DICOM_SEED'
        order by e.id desc`.execute(app.db);
      return result.rows[0]?.log_text ?? '';
    }

    it('takes the date and time of the study, checked and audited, and files the event on it', async () => {
      const { requestId, patientId } = await queueFile('');
      assert.deepEqual(await drain(), ['DICOM_SEED:FAILED']);
      assert.match(await seedLog(requestId), /no usable date/);

      const user = await createOperator(app.db);
      const client = new ConsoleClient(app);
      await client.signIn(user);
      const page = `/console/requests/${requestId}`;
      const action = `${page}/event-date`;
      const html = await (await client.get(page)).text();
      assert.match(html, /Fix the data and run on/);
      assert.match(html, /Date and time of the study/);
      assert.doesNotMatch(html, /Details used to match the patient/);
      const version = versionOf(html, action);
      const before = await requestData(app, requestId);

      // No real date, or one that cannot be the study's: 422, nothing written.
      for (const [eventDate, reason] of [
        ['2024-02-30T10:00', /must be a real date and time/],
        ['9999-12-31T10:00', /is more than a day in the future/],
        ['1899-12-31T10:00', /is before 1900/],
      ] as const) {
        const bad = await client.post(action, {
          _csrf: csrfOf(html, action),
          version,
          event_date: eventDate,
        });
        assert.equal(bad.status, 422, eventDate);
        assert.match(await bad.text(), reason);
        assert.deepEqual(await requestData(app, requestId), before);
      }
      // A forged form and a stale one: nothing written.
      const forged = await client.post(action, { _csrf: 'forged', version, event_date: '2024-03-02T07:15' });
      assert.equal(forged.status, 403);
      const stale = await client.post(action, {
        _csrf: csrfOf(html, action),
        version: `${version}x`,
        event_date: '2024-03-02T07:15',
      });
      assert.equal(stale.status, 409);
      assert.deepEqual(await requestData(app, requestId), before);
      assert.deepEqual(await routineStates(app, requestId), ['DICOM_SEED:FAILED:1']);

      // Fields other than the date are not written, reserved names least of all.
      const saved = await client.post(action, {
        _csrf: csrfOf(html, action),
        version,
        event_date: '2024-03-02T07:15',
        device_event_date: '9999-12-31 00:00:00',
        console_edits: '[]',
        matched_patient_id: '1',
      });
      assert.equal(saved.status, 303);
      assert.equal(saved.headers.get('location'), `${page}?result=dated`);
      assert.match(await (await client.get(`${page}?result=dated`)).text(), /The date of the study is saved/);

      const data = await requestData(app, requestId);
      assert.equal(data.console_event_date, '2024-03-02 07:15:00');
      assert.deepEqual([data.device_event_date, data.matched_patient_id], [undefined, undefined]);
      const edits = data.console_edits as { userId: number; changes: Record<string, unknown> }[];
      assert.equal(edits.length, 1);
      assert.equal(edits[0]!.userId, user.userId);
      assert.deepEqual(edits[0]!.changes, { console_event_date: [null, '2024-03-02 07:15:00'] });
      const audit = await sql<{ user_id: number; target_ids: string; outcome: number; detail: string }>`
        select user_id, target_ids, outcome, detail from audit_event
        where action = 'console.request.event-date' order by id desc`.execute(app.db);
      const [row] = audit.rows;
      assert.deepEqual([row?.user_id, row?.target_ids, row?.outcome], [user.userId, String(requestId), 303]);
      assert.match(
        row?.detail ?? '',
        /^REQUEST_DATA keys changed: console_event_date; routines run on: \d+$/,
      );
      assert.equal(await routineStates(app, requestId).then((s) => s[0]), 'DICOM_SEED:NEW:0');

      // The request runs on from its DICOM check to its event, dated by the desk's date.
      const ran = await drain();
      assert.equal(ran[0], 'DICOM_SEED:COMPLETE');
      assert.ok(ran.includes('ATTACH_TO_EVENT:COMPLETE'), ran.join());
      assert.match(await seedLog(requestId), /event date: given in the console \(the file has none\)/);
      const events = await app.db
        .selectFrom('event as e')
        .innerJoin('episode as ep', 'ep.id', 'e.episode_id')
        .select('e.event_date')
        .where('ep.patient_id', '=', patientId)
        .execute();
      assert.equal(events.length, 1);
      // March in London is GMT: the stored time is the wall clock.
      assert.match(String(events[0]!.event_date), /^2024-03-02[ T]07:15:00/);
      const done = await (await client.get(page)).text();
      assert.doesNotMatch(done, /Date and time of the study/);
      assert.match(done, /Changes made in the console/);
      assert.match(done, /<td>console_event_date<\/td><td>—<\/td><td>2024-03-02 07:15:00<\/td>/);
    });

    it("refuses a date once the DICOM check is complete, and keeps a file's own plausible date", async () => {
      const { requestId } = await queueFile('20240105');
      const ran = await drain();
      assert.equal(ran[0], 'DICOM_SEED:COMPLETE');
      const user = await createOperator(app.db);
      const client = new ConsoleClient(app);
      await client.signIn(user);
      const page = `/console/requests/${requestId}`;
      const html = await (await client.get(page)).text();
      assert.doesNotMatch(html, /Date and time of the study/);
      const refused = await client.post(`${page}/event-date`, {
        _csrf: csrfOf(html, '/console/logout'),
        version: 'whatever',
        event_date: '2024-03-02T07:15',
      });
      assert.equal(refused.status, 409);
      // With the version the request is at: refused, since nothing waits for a date.
      const match = await readRequestMatchData(app.db, requestId);
      assert.equal(match?.canGiveEventDate, false);
      const outcome = await editRequestEventDate(app.database, {
        requestId,
        expectedVersion: match.version,
        userId: user.userId,
        eventDate: '2024-03-02T07:15',
      });
      assert.equal(outcome.kind, 'refused');
      assert.equal((await requestData(app, requestId)).console_event_date, undefined);
    });
  });
});
