/**
 * The console resolves failures over HTTP, once per dialect: the data behind a failed request is edited
 * (or its patient chosen through the patient search) and the request runs on; the request list shows
 * each request's reason, source, patient and thumbnail; a result message shows once and attempts are
 * numbered by attempt; signature imports name their patient and say when the original is missing;
 * attachments are found by id, uploads filed under no event included.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { createPatient, createUser } from '../../../test/factories.ts';
import { addIdentifier, createStandardInstitutions } from '../../../test/factories-patient.ts';
import {
  ConsoleClient,
  createFailedRequest,
  createFailedUpload,
  createOperator,
  csrfOf,
  versionOf,
} from '../../../test/factories-console.ts';
import { buildDicomFile, blobRow, createRequestType, jsonRow } from '../../../test/factories-queue.ts';
import { makePng } from '../../../test/factories-signature.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import type { QueueEngine } from '../request-queue/index.ts';
import { createQueueEngine, enqueueRequest } from '../request-queue/index.ts';
import {
  DEFAULT_ROUTINES,
  PermanentRoutineError,
  createRoutineCatalog,
  defineRoutine,
} from '../filing/index.ts';

const CODE = 'RESOLVE';

async function auditRows(app: TestApp, action: string) {
  const result = await sql<{
    user_id: number | null;
    target_type: string | null;
    target_ids: string | null;
    outcome: number;
    detail: string | null;
  }>`select user_id, target_type, target_ids, outcome, detail from audit_event where action = ${action} order by id desc`.execute(
    app.db,
  );
  return result.rows;
}

async function requestData(app: TestApp, requestId: number): Promise<Record<string, unknown>> {
  const row = await app.db
    .selectFrom('attachment_data')
    .select('text_data')
    .where('request_id', '=', requestId)
    .where('attachment_mnemonic', '=', 'REQUEST_DATA')
    .executeTakeFirstOrThrow();
  return JSON.parse(row.text_data ?? '{}') as Record<string, unknown>;
}

async function routineStates(app: TestApp, requestId: number) {
  return (
    await app.db
      .selectFrom('request_routine')
      .select(['routine_name', 'status', 'try_count'])
      .where('request_id', '=', requestId)
      .orderBy('id')
      .execute()
  ).map((r) => `${r.routine_name}:${r.status}:${r.try_count}`);
}

/** A seven-digit hospital number no other test uses. */
function hospitalNumber(): string {
  return String(Math.floor(1_000_000 + Math.random() * 8_999_999));
}

forEachDialect((dialect) => {
  describe(`console resolves failures over HTTP [${dialect}]`, () => {
    let app: TestApp;
    let engine: QueueEngine;
    let localTypeId: number;
    const failing = `ALWAYS_FAILS_${dialect.toUpperCase()}`;

    before(async () => {
      app = await startTestApp(dialect, {
        env: { TIME_ZONE: 'Europe/London', INSTITUTION_CODE: CODE, REFERENCE_CACHE_TTL_MS: '0' },
      });
      ({ localTypeId } = await createStandardInstitutions(app.db, CODE));
      engine = createQueueEngine({
        database: app.database,
        config: app.config,
        catalog: createRoutineCatalog([
          ...DEFAULT_ROUTINES,
          defineRoutine({
            name: failing,
            timeoutMs: 5000,
            retry: 'never',
            run: async () => {
              throw new PermanentRoutineError('device offline');
            },
          }),
        ]),
      });
    });
    after(() => app.close());

    /** Runs routines until none is due; returns `NAME:STATUS` of each run. */
    async function drain(): Promise<string[]> {
      const ran: string[] = [];
      for (;;) {
        const outcome = await engine.step();
        if (outcome.kind !== 'ran') return ran;
        ran.push(`${outcome.routineName}:${outcome.status}`);
      }
    }

    async function createJane(number: string) {
      const patient = await createPatient(app.db, {
        firstName: 'Jane',
        lastName: `Doe${number}`,
        patient: { dob: '1970-03-15', gender: 'F' },
      });
      await addIdentifier(app.db, patient.patientId, localTypeId, number);
      return patient.patientId;
    }

    it('fixes a DICOM request that failed for want of a date of birth: edited, audited, run on to its event', async () => {
      const number = hospitalNumber();
      const patientId = await createJane(number);
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
                PatientBirthDate: '',
                PatientSex: 'F',
                Modality: 'OP',
                Manufacturer: 'Acme Optics',
                StudyInstanceUID: `1.2.826.0.1.3680043.8.498.${number}`,
                StudyDate: '20240102',
              },
              `1.2.826.0.1.3680043.8.498.${number}.1`,
            ),
            'scan.dcm',
          ),
        ],
      });
      assert.deepEqual(await drain(), [
        'DICOM_SEED:COMPLETE',
        'EXTRACT_IMAGE:COMPLETE',
        'PATIENT_MATCH:FAILED',
      ]);
      const user = await createOperator(app.db);
      const client = new ConsoleClient(app);
      await client.signIn(user);

      const list = await (await client.get('/console/requests?routine=PATIENT_MATCH&overall=failed')).text();
      assert.match(list, /PATIENT_MATCH: No date of birth in the request/);

      const page = `/console/requests/${requestId}`;
      const action = `${page}/edit`;
      const html = await (await client.get(page)).text();
      assert.match(html, /Fix the data and run on/);
      assert.match(html, new RegExp(`name="identifier"[^>]*value="${number}"`));
      const version = versionOf(html, action);
      const before = await requestData(app, requestId);

      // Bad input: 422, nothing written.
      const bad = await client.post(action, {
        _csrf: csrfOf(html, action),
        version,
        identifier: number,
        dob: '1970-02-30',
        sex: 'F',
      });
      assert.equal(bad.status, 422);
      assert.match(await bad.text(), /The date of birth must be a date/);
      assert.deepEqual(await requestData(app, requestId), before);
      assert.deepEqual((await routineStates(app, requestId)).at(-1), 'PATIENT_MATCH:FAILED:1');

      // A forged form: 403, nothing written.
      const forged = await client.post(action, {
        _csrf: 'forged-token',
        version,
        identifier: number,
        dob: '1970-03-15',
        sex: 'F',
      });
      assert.equal(forged.status, 403);
      assert.deepEqual(await requestData(app, requestId), before);

      // A form older than the request: 409, nothing written.
      const stale = await client.post(action, {
        _csrf: csrfOf(html, action),
        version: `${version}x`,
        identifier: number,
        dob: '1970-03-15',
        sex: 'F',
      });
      assert.equal(stale.status, 409);
      assert.match(await stale.text(), /Changed meanwhile/);
      assert.deepEqual(await requestData(app, requestId), before);

      const saved = await client.post(action, {
        _csrf: csrfOf(html, action),
        version,
        identifier: number,
        dob: '1970-03-15',
        sex: 'F',
      });
      assert.equal(saved.status, 303);
      assert.equal(saved.headers.get('location'), `${page}?result=edited`);
      // The message once; a reload shows the request as it is.
      assert.match(await (await client.get(`${page}?result=edited`)).text(), /The details are saved/);
      assert.doesNotMatch(await (await client.get(`${page}?result=edited`)).text(), /The details are saved/);

      const data = await requestData(app, requestId);
      const edits = data.console_edits as {
        userId: number;
        changes: Record<string, [string | null, string]>;
      }[];
      assert.equal(edits.length, 1);
      assert.equal(edits[0]!.userId, user.userId);
      const dobChange = Object.entries(edits[0]!.changes).find(([, [, value]]) => value === '1970-03-15');
      assert.ok(dobChange !== undefined, JSON.stringify(edits));
      // The file's empty tag is left alone: the plain key supplies the date from now on.
      assert.deepEqual(dobChange, ['dob', [null, '1970-03-15']]);
      assert.equal(data[dobChange[0]], '1970-03-15');
      const [audit] = await auditRows(app, 'console.request.edit');
      assert.deepEqual(
        [audit?.user_id, audit?.target_type, audit?.target_ids, audit?.outcome],
        [user.userId, 'request', String(requestId), 303],
      );
      assert.match(
        audit?.detail ?? '',
        new RegExp(`REQUEST_DATA keys changed: ${dobChange[0]}; routines run on: \\d+`),
      );
      assert.doesNotMatch(audit?.detail ?? '', /1970|Jane|\d{7}/);
      const history = await (await client.get(page)).text();
      assert.match(history, /Changes made in the console/);
      assert.match(history, /<td>1970-03-15<\/td>/);

      // The request runs on from PATIENT_MATCH, to its event.
      assert.deepEqual((await routineStates(app, requestId)).at(-1), 'PATIENT_MATCH:NEW:0');
      const ran = await drain();
      assert.deepEqual(ran.slice(0, 1), ['PATIENT_MATCH:COMPLETE']);
      assert.ok(ran.includes('ATTACH_TO_EVENT:COMPLETE'), ran.join());
      assert.equal((await requestData(app, requestId)).matched_patient_id, patientId);
      const done = await (await client.get(`/console/requests?type=dicom_request`)).text();
      assert.match(done, new RegExp(`Doe${number}, Jane<br><span class="hint">Hosp. no. ${number}</span>`));
      // Nothing left to run on: the form is gone.
      const complete = await (await client.get(page)).text();
      assert.doesNotMatch(complete, /Fix the data and run on/);
      // The whole request run again reads the DICOM tags again, and still matches with the fixed date.
      const requeue = `${page}/requeue`;
      assert.equal(
        (
          await client.post(requeue, {
            _csrf: csrfOf(complete, requeue),
            version: versionOf(complete, requeue),
          })
        ).status,
        303,
      );
      assert.ok((await drain()).includes('PATIENT_MATCH:COMPLETE'));
    });

    it('chooses the patient through the patient search, and refuses a user without OprnEditRequestData', async () => {
      const number = hospitalNumber();
      const patientId = await createJane(number);
      const type = await createRequestType(app.db, { routineName: 'PATIENT_MATCH' });
      const { requestId } = await enqueueRequest(app.database, {
        requestType: type.requestType,
        attachments: [jsonRow('REQUEST_DATA', { hos_num: '0000001', dob: '1970-03-15' })],
      });
      assert.deepEqual(await drain(), ['PATIENT_MATCH:RETRY']);
      const page = `/console/requests/${requestId}`;

      const clinician = await createUser(app.db, { roles: ['TaskViewClinical'] });
      const refused = new ConsoleClient(app);
      await refused.signIn(clinician);
      const home = await (await refused.get('/console/')).text();
      const forbidden = await refused.post(`${page}/patient`, {
        _csrf: csrfOf(home, '/console/logout'),
        version: 'x',
        patient_id: String(patientId),
      });
      assert.equal(forbidden.status, 403);
      assert.equal((await requestData(app, requestId)).hos_num, '0000001');

      const user = await createOperator(app.db);
      const client = new ConsoleClient(app);
      await client.signIn(user);
      const found = await client.get(`${page}/patients?term=${number}`);
      assert.equal(found.status, 200);
      const html = await found.text();
      assert.match(html, new RegExp(`Use Jane Doe${number}`));
      const [search] = await auditRows(app, 'console.request.patient-search');
      assert.deepEqual([search?.target_type, search?.target_ids], ['patient', String(patientId)]);
      const action = `${page}/patient`;
      const chosen = await client.post(action, {
        _csrf: csrfOf(html, action),
        version: versionOf(html, action),
        patient_id: String(patientId),
      });
      assert.equal(chosen.status, 303);
      assert.equal(chosen.headers.get('location'), `${page}?result=chosen`);
      const data = await requestData(app, requestId);
      assert.equal(data.hos_num, number);
      const [audit] = await auditRows(app, 'console.request.choose-patient');
      assert.match(audit?.detail ?? '', new RegExp(`patient chosen: ${patientId}$`));
      assert.deepEqual(await routineStates(app, requestId), ['PATIENT_MATCH:NEW:0']);
      const ran = await drain();
      assert.equal(ran[0], 'PATIENT_MATCH:COMPLETE');
      assert.equal((await requestData(app, requestId)).matched_patient_id, patientId);
    });

    it("lists each request's reason, source (C-STORE with its calling AE title), and a thumbnail it serves audited", async () => {
      const failed = await createFailedRequest(app.db);
      await app.db
        .insertInto('attachment_data')
        .values([
          {
            request_id: failed.requestId,
            attachment_mnemonic: 'REQUEST_DATA',
            attachment_type: 'NONE',
            mime_type: 'application/json',
            text_data: JSON.stringify({ source: 'C-STORE', calling_ae_title: 'FUNDUS_CAM' }),
          },
          {
            request_id: failed.requestId,
            attachment_mnemonic: 'DICOM_IMAGE_1',
            attachment_type: 'NONE',
            mime_type: 'image/png',
            blob_data: makePng(64, 48, { isNoisy: true }),
            thumbnail_small_blob: makePng(12, 9),
          },
        ])
        .execute();
      const stow = await createFailedRequest(app.db);
      await app.db
        .insertInto('attachment_data')
        .values({
          request_id: stow.requestId,
          attachment_mnemonic: 'REQUEST_DATA',
          attachment_type: 'NONE',
          mime_type: 'application/json',
          text_data: JSON.stringify({ source: 'STOW-RS' }),
        })
        .execute();
      const user = await createOperator(app.db);
      const client = new ConsoleClient(app);
      await client.signIn(user);
      const row = async (routine: string) => {
        const html = await (await client.get(`/console/requests?routine=${routine}`)).text();
        return html.slice(html.indexOf('<tbody>'), html.indexOf('</tbody>'));
      };
      const cStore = await row(failed.routineName);
      assert.match(cStore, new RegExp(`${failed.routineName}: device offline \\(e`));
      assert.match(cStore, /C-STORE <span class="hint">from FUNDUS_CAM<\/span>/);
      const thumbnail = /src="(\/console\/requests\/\d+\/parts\/(\d+)\/thumbnail)"/.exec(cStore);
      assert.ok(thumbnail !== null, cStore);
      assert.match(await row(stow.routineName), /<td>STOW-RS<\/td>/);

      const image = await client.get(thumbnail[1]!);
      assert.equal(image.status, 200);
      assert.equal(image.headers.get('content-type'), 'image/png');
      const [audit] = await auditRows(app, 'console.request.thumbnail');
      assert.deepEqual([audit?.target_type, audit?.target_ids], ['attachment_data', thumbnail[2]]);
      // The part through another request, or a part without a thumbnail: 404.
      assert.equal(
        (await client.get(`/console/requests/${stow.requestId}/parts/${thumbnail[2]}/thumbnail`)).status,
        404,
      );
    });

    it('shows a retry result once, then the current state; numbers attempts by attempt', async () => {
      const failed = await createFailedRequest(app.db, { routineName: failing });
      const user = await createOperator(app.db);
      const client = new ConsoleClient(app);
      await client.signIn(user);
      const page = `/console/requests/${failed.requestId}`;
      const action = `/console/routines/${failed.routineId}/retry`;
      for (let round = 0; round < 2; round += 1) {
        const response = await client.submit(page, action, {
          version: versionOf(await (await client.get(page)).text(), action),
          status: 'NEW',
          try_count: '0',
        });
        assert.equal(response.status, 303);
        assert.match(
          await (await client.get(`${page}?result=retried`)).text(),
          /The routine is queued again\./,
        );
        assert.deepEqual(await drain(), [`${failing}:FAILED`]);
        const reloaded = await (await client.get(`${page}?result=retried`)).text();
        assert.doesNotMatch(reloaded, /The routine is queued again\./);
        assert.match(reloaded, new RegExp(`${failing} <span class="status status-failed">FAILED</span>`));
      }
      const html = await (await client.get(page)).text();
      const headings = [...html.matchAll(/<h4>(Attempt \d+): FAILED/g)].map((m) => m[1]);
      assert.deepEqual(headings, ['Attempt 1', 'Attempt 2', 'Attempt 3']);
      assert.doesNotMatch(html, /<h4>Try /);
      // Not a patient-match failure: no form to fix its data, and a forged edit is refused unwritten.
      assert.doesNotMatch(html, /Fix the data and run on/);
      const edit = await client.post(`${page}/edit`, {
        _csrf: csrfOf(html, action),
        version: 'any',
        identifier: '1234567',
        dob: '1970-03-15',
        sex: 'F',
      });
      assert.equal(edit.status, 409);
      const parts = await app.db
        .selectFrom('attachment_data')
        .select('id')
        .where('request_id', '=', failed.requestId)
        .execute();
      assert.deepEqual(parts, []);
    });

    it("names the signature's patient, and offers only Manual ignore when the original file is missing", async () => {
      const { event, logId } = await createFailedUpload(app);
      const number = hospitalNumber();
      await addIdentifier(app.db, event.patient.patientId, localTypeId, number);
      const contact = await app.db
        .selectFrom('contact')
        .select(['first_name', 'last_name'])
        .where('id', '=', event.patient.contactId)
        .executeTakeFirstOrThrow();
      const name = `${contact.last_name}, ${contact.first_name}`;
      const user = await createOperator(app.db);
      const client = new ConsoleClient(app);
      await client.signIn(user);
      const list = await (await client.get('/console/signatures?status=3')).text();
      const row = list.slice(list.indexOf(`href="/console/signatures/${logId}"`));
      assert.match(
        row.slice(0, 2000),
        new RegExp(`${name}<br><span class="hint">Hosp. no. ${number}</span>`),
      );
      const detail = await (await client.get(`/console/signatures/${logId}`)).text();
      assert.match(detail, new RegExp(`${name} · hospital number ${number}`));
      assert.match(detail, /id="crop-form"/);

      const log = await app.db
        .selectFrom('signature_import_log')
        .select('filename')
        .where('id', '=', logId)
        .executeTakeFirstOrThrow();
      await app.deps.files.remove(log.filename.split('/').at(-1)!);
      const missing = await (await client.get(`/console/signatures/${logId}`)).text();
      assert.match(missing, /The original capture of this import is missing from the file store/);
      assert.doesNotMatch(missing, /id="crop-form"|<img[^>]*\/original"/);
      assert.match(missing, new RegExp(`action="/console/signatures/${logId}/ignore"`));
      const missingList = await (await client.get('/console/signatures?status=3')).text();
      assert.doesNotMatch(missingList, new RegExp(`src="/console/signatures/${logId}/original"`));
      const ignore = `/console/signatures/${logId}/ignore`;
      assert.equal((await client.post(ignore, { _csrf: csrfOf(missing, ignore) })).status, 303);
    });

    it('finds an upload filed under no event by its id, and opens it', async () => {
      const uploader = await createUser(app.db);
      const created = await app.request('/api/v1/attachmentdisplay/create', {
        method: 'POST',
        headers: { authorization: uploader.authorization, 'content-type': 'image/png' },
        body: makePng(40, 30, { isNoisy: true }),
      });
      const text = await created.text();
      assert.equal(created.status, 200, text);
      const { id } = JSON.parse(text) as { id: number };
      const user = await createOperator(app.db);
      const client = new ConsoleClient(app);
      await client.signIn(user);
      const view = await client.get(`/console/attachments/${id}`);
      assert.equal(view.status, 200);
      const html = await view.text();
      assert.match(html, /Not filed under an event/);
      assert.match(html, new RegExp(`<img class="capture" src="/console/attachments/${id}/file"`));
      const file = await client.get(`/console/attachments/${id}/file`);
      assert.equal(file.status, 200);
      assert.equal(file.headers.get('content-type'), 'image/png');
      const found = await (await client.get(`/console/attachments?id=${id}`)).text();
      assert.match(found, new RegExp(`href="/console/attachments/${id}"`));
      assert.match(found, /not filed under an event/);
      // As on the API, an unfiled upload is a request's part: a clinical viewer without request admin is refused.
      const clinician = await createUser(app.db, { roles: ['TaskViewClinical'] });
      const viewer = new ConsoleClient(app);
      await viewer.signIn(clinician);
      for (const path of [
        `/console/attachments/${id}`,
        `/console/attachments/${id}/file`,
        `/console/attachments?id=${id}`,
      ])
        assert.equal((await viewer.get(path)).status, 403, path);
      const [refused] = await auditRows(app, 'console.attachment.open');
      assert.deepEqual([refused?.user_id, refused?.outcome], [clinician.userId, 403]);
      assert.equal((await client.get('/console/attachments?id=abc')).status, 400);
      assert.match(await (await client.get('/console/attachments?id=999999')).text(), /No attachment found/);
    });
  });
});
