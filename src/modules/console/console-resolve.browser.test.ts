/**
 * The console resolves failures, in a real browser (Chromium driven by playwright-core) against the real
 * server on 127.0.0.1, once per dialect: fixing a failed request's data or choosing its patient, the
 * request list's reason, source, patient and thumbnail columns, the retry message shown once, signature
 * imports with their patient and a missing original, an unfiled upload found by id. Every screen is checked
 * with axe-core (no serious or critical violation), has no broken image, and is saved as a screenshot
 * under `test-output/console/<dialect>-resolve-*.png`; the suite fails on any console error of a page and
 * on any request that leaves 127.0.0.1.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { openConsoleBrowser } from '../../../test/console-browser.ts';
import type { ConsoleBrowser } from '../../../test/console-browser.ts';
import type { TestUser } from '../../../test/factories.ts';
import { createPatient, createUser } from '../../../test/factories.ts';
import { addIdentifier, createStandardInstitutions } from '../../../test/factories-patient.ts';
import { createFailedRequest, createFailedUpload, createOperator } from '../../../test/factories-console.ts';
import { blobRow, buildDicomFile, createRequestType, jsonRow } from '../../../test/factories-queue.ts';
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

const SCREENSHOT_DIR = path.resolve('test-output/console');
const CODE = 'RESOLVEB';

function hospitalNumber(): string {
  return String(Math.floor(1_000_000 + Math.random() * 8_999_999));
}

forEachDialect((dialect) => {
  describe(`console resolves failures in a browser [${dialect}]`, () => {
    let app: TestApp;
    let browser: ConsoleBrowser;
    let operator: TestUser;
    let engine: QueueEngine;
    let localTypeId: number;
    const failing = `OFFLINE_${dialect.toUpperCase()}`;

    before(async () => {
      app = await startTestApp(dialect, {
        env: { TIME_ZONE: 'Europe/London', INSTITUTION_CODE: CODE, REFERENCE_CACHE_TTL_MS: '0' },
      });
      ({ localTypeId } = await createStandardInstitutions(app.db, CODE));
      operator = await createOperator(app.db);
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
      browser = await openConsoleBrowser(app, SCREENSHOT_DIR, `${dialect}-resolve`);
    });

    after(async () => {
      await browser?.close();
      await app?.close();
    });

    async function drain(): Promise<string[]> {
      const ran: string[] = [];
      for (;;) {
        const outcome = await engine.step();
        if (outcome.kind !== 'ran') return ran;
        ran.push(`${outcome.routineName}:${outcome.status}`);
      }
    }

    async function createJane(number: string): Promise<number> {
      const patient = await createPatient(app.db, {
        firstName: 'Jane',
        lastName: `Doe${number}`,
        patient: { dob: '1970-03-15', gender: 'F' },
      });
      await addIdentifier(app.db, patient.patientId, localTypeId, number);
      return patient.patientId;
    }

    it('fixes a missing date of birth from the list: reason, source, thumbnail, then the request runs on', async () => {
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
      // A C-STORE request with an extracted image (its thumbnail) that failed elsewhere.
      const stored = await createFailedRequest(app.db);
      await app.db
        .insertInto('attachment_data')
        .values([
          {
            request_id: stored.requestId,
            attachment_mnemonic: 'REQUEST_DATA',
            attachment_type: 'NONE',
            mime_type: 'application/json',
            text_data: JSON.stringify({ source: 'C-STORE', calling_ae_title: 'FUNDUS_CAM' }),
          },
          {
            request_id: stored.requestId,
            attachment_mnemonic: 'DICOM_IMAGE_1',
            attachment_type: 'NONE',
            mime_type: 'image/png',
            blob_data: makePng(320, 240, { isNoisy: true }),
            thumbnail_small_blob: makePng(120, 90, { isNoisy: true }),
          },
        ])
        .execute();

      const page = await browser.newPage();
      await browser.signIn(page, operator, '/console/requests');
      await page.getByLabel('Overall status').selectOption('failed');
      await page.getByRole('button', { name: 'Filter' }).click();
      const dicomRow = page.locator('tr', { has: page.getByRole('link', { name: `#${requestId}` }) });
      await dicomRow.getByText('PATIENT_MATCH: No date of birth in the request').waitFor();
      assert.match(await dicomRow.innerText(), /queue add/);
      const storedRow = page.locator('tr', {
        has: page.getByRole('link', { name: `#${stored.requestId}`, exact: true }),
      });
      await storedRow.getByText('from FUNDUS_CAM').waitFor();
      await storedRow.getByText(`${stored.routineName}: device offline`).waitFor();
      await storedRow.getByAltText(`Image of request ${stored.requestId}`).waitFor();
      await browser.capture(page, 'requests');

      await page.getByRole('link', { name: `#${requestId}`, exact: true }).click();
      await page.getByRole('heading', { name: 'Fix the data and run on' }).waitFor();
      assert.equal(await page.getByLabel('Patient identifier (hospital or NHS number)').inputValue(), number);
      assert.equal(await page.getByLabel('Date of birth').inputValue(), '');
      await browser.capture(page, 'request-fix');
      await page.getByLabel('Date of birth').fill('1970-03-15');
      await page.getByLabel('Sex').selectOption('F');
      await page.getByRole('button', { name: 'Save and run on' }).click();
      await page.getByText('The details are saved and the request runs on').waitFor();
      await page
        .getByRole('table', { name: 'Details changed by hand, oldest first' })
        .getByRole('cell', { name: '1970-03-15', exact: true })
        .waitFor();
      await browser.capture(page, 'request-fixed');

      const ran = await drain();
      assert.equal(ran[0], 'PATIENT_MATCH:COMPLETE');
      assert.ok(ran.includes('ATTACH_TO_EVENT:COMPLETE'), ran.join());
      await page.reload();
      assert.equal(await page.getByText('The details are saved').count(), 0);
      await page.locator('dd', { hasText: /^COMPLETE$/ }).waitFor();
      assert.equal(await page.getByRole('heading', { name: 'Fix the data and run on' }).count(), 0);

      await page.goto(`${app.baseUrl}/console/requests?type=dicom_request`);
      const done = page.locator('tr', { has: page.getByRole('link', { name: `#${requestId}` }) });
      await done.getByText(`Doe${number}, Jane`).waitFor();
      await done.getByText(`Hosp. no. ${number}`).waitFor();
      assert.ok(patientId > 0);
      await browser.capture(page, 'requests-matched');
      await page.close();
    });

    it('chooses the patient through the patient search', async () => {
      const number = hospitalNumber();
      const patientId = await createJane(number);
      const type = await createRequestType(app.db, { routineName: 'PATIENT_MATCH' });
      const { requestId } = await enqueueRequest(app.database, {
        requestType: type.requestType,
        attachments: [jsonRow('REQUEST_DATA', { hos_num: '0000001', dob: '1970-03-15' })],
      });
      assert.deepEqual(await drain(), ['PATIENT_MATCH:RETRY']);
      const page = await browser.newPage();
      await browser.signIn(page, operator, `/console/requests/${requestId}`);
      await page.getByLabel('Find the patient by hospital number or name').fill(number);
      await page.getByRole('button', { name: 'Find patient' }).click();
      await page.getByRole('cell', { name: `Doe${number}, Jane` }).waitFor();
      await browser.capture(page, 'patient-search');
      await page.getByRole('button', { name: `Use Jane Doe${number}` }).click();
      await page.getByText('The patient is chosen and the request runs on').waitFor();
      await browser.capture(page, 'patient-chosen');
      assert.equal((await drain())[0], 'PATIENT_MATCH:COMPLETE');
      const data = await app.db
        .selectFrom('attachment_data')
        .select('text_data')
        .where('request_id', '=', requestId)
        .where('attachment_mnemonic', '=', 'REQUEST_DATA')
        .executeTakeFirstOrThrow();
      assert.equal(
        (JSON.parse(data.text_data!) as { matched_patient_id: number }).matched_patient_id,
        patientId,
      );
      await page.close();
    });

    it('shows the retry message once: a reload shows the routine failed again, attempts numbered', async () => {
      const failed = await createFailedRequest(app.db, { routineName: failing });
      const page = await browser.newPage();
      await browser.signIn(page, operator, `/console/requests/${failed.requestId}`);
      await page.getByRole('button', { name: 'Retry', exact: true }).click();
      await page.getByText('The routine is queued again.').waitFor();
      assert.deepEqual(await drain(), [`${failing}:FAILED`]);
      await page.reload();
      await page.locator('h3', { hasText: failing }).getByText('FAILED').waitFor();
      assert.equal(await page.getByText('The routine is queued again.').count(), 0);
      const headings = await page.locator('article.attempt h4').allInnerTexts();
      assert.deepEqual(
        headings.map((h) => h.split(':')[0]),
        ['Attempt 1', 'Attempt 2'],
      );
      await browser.capture(page, 'retry-reloaded');
      await page.close();
    });

    it("names a signature's patient, and offers only Manual ignore when its original is missing", async () => {
      const { event, logId } = await createFailedUpload(app);
      const number = hospitalNumber();
      await addIdentifier(app.db, event.patient.patientId, localTypeId, number);
      const log = await app.db
        .selectFrom('signature_import_log')
        .select('filename')
        .where('id', '=', logId)
        .executeTakeFirstOrThrow();
      await app.deps.files.remove(log.filename.split('/').at(-1)!);
      const page = await browser.newPage();
      await browser.signIn(page, operator, '/console/signatures?status=3');
      const row = page.locator('tr', { has: page.getByRole('link', { name: `#${logId}` }) });
      await row.getByText(`Hosp. no. ${number}`).waitFor();
      assert.equal(await row.locator('img').count(), 0);
      await browser.capture(page, 'signatures');
      await page.getByRole('link', { name: `#${logId}` }).click();
      await page.getByText('The original capture of this import is missing from the file store').waitFor();
      await page.getByText(`hospital number ${number}`).waitFor();
      assert.equal(await page.getByRole('button', { name: 'Save cropped signature' }).count(), 0);
      assert.equal(await page.locator('img').count(), 0);
      await browser.capture(page, 'signature-missing');
      await page.getByRole('button', { name: 'Manual ignore' }).click();
      await page.getByText('This import is now Manual Ignore.').waitFor();
      await page.close();
    });

    it('finds an upload filed under no event by its id and opens it', async () => {
      const uploader = await createUser(app.db);
      const created = await app.request('/api/v1/attachmentdisplay/create', {
        method: 'POST',
        headers: { authorization: uploader.authorization, 'content-type': 'image/png' },
        body: makePng(320, 240, { isNoisy: true }),
      });
      assert.equal(created.status, 200);
      const { id } = (await created.json()) as { id: number };
      const page = await browser.newPage();
      await browser.signIn(page, operator, '/console/attachments');
      await page.getByLabel('Attachment id').fill(String(id));
      await page.getByRole('button', { name: 'Find' }).click();
      await page.getByRole('link', { name: `Open attachment ${id}` }).click();
      await page.getByRole('heading', { name: `Attachment ${id}` }).waitFor();
      await page.getByText('Not filed under an event (an upload)').waitFor();
      await browser.capture(page, 'attachment-unfiled');
      await page.close();
    });

    it('made no request outside 127.0.0.1 and logged no error in any page', () => {
      assert.deepEqual(browser.outside, []);
      assert.deepEqual(browser.pageErrors, []);
    });
  });
});
