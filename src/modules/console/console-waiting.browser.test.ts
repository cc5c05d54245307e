/**
 * The console tells a request that waits for a patient from one that is running, in a real browser
 * (Chromium driven by playwright-core) against the real server on 127.0.0.1, once per dialect: the list's
 * "Waiting for a patient" filter and status with its reason, try and next try in the site's zone, the
 * detail's status and an attempt without a stack trace, the health line's count; and "choose patient"
 * refused once the match completed. Every screen is checked with axe-core and saved as a screenshot under
 * `$SCREENSHOT_DIR` (default `<tmp>/cra-console-waiting/<dialect>-waiting-*.png`).
 */
import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { openConsoleBrowser } from '../../../test/console-browser.ts';
import type { ConsoleBrowser } from '../../../test/console-browser.ts';
import type { TestUser } from '../../../test/factories.ts';
import { createPatient } from '../../../test/factories.ts';
import { addIdentifier, createStandardInstitutions } from '../../../test/factories-patient.ts';
import { createOperator } from '../../../test/factories-console.ts';
import { addRoutineRow, createRequestType, jsonRow, routinesOf } from '../../../test/factories-queue.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import type { QueueEngine } from '../request-queue/index.ts';
import { createQueueEngine, enqueueRequest } from '../request-queue/index.ts';
import { readRequestMatchData, DEFAULT_ROUTINES, createRoutineCatalog } from '../filing/index.ts';
import { createSiteTime } from './site-time.ts';

const SCREENSHOT_DIR = process.env.SCREENSHOT_DIR ?? path.join(tmpdir(), 'cra-console-waiting');
const CODE = 'WAITB';

function hospitalNumber(): string {
  return String(Math.floor(1_000_000 + Math.random() * 8_999_999));
}

forEachDialect((dialect) => {
  describe(`console: requests waiting for a patient, in a browser [${dialect}]`, () => {
    let app: TestApp;
    let browser: ConsoleBrowser;
    let operator: TestUser;
    let engine: QueueEngine;
    let localTypeId: number;

    before(async () => {
      app = await startTestApp(dialect, {
        env: { TIME_ZONE: 'Europe/London', INSTITUTION_CODE: CODE, REFERENCE_CACHE_TTL_MS: '0' },
      });
      ({ localTypeId } = await createStandardInstitutions(app.db, CODE));
      operator = await createOperator(app.db);
      engine = createQueueEngine({
        database: app.database,
        config: app.config,
        catalog: createRoutineCatalog(DEFAULT_ROUTINES),
      });
      browser = await openConsoleBrowser(app, SCREENSHOT_DIR, `${dialect}-waiting`);
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

    /** A PATIENT_MATCH request for a patient nobody registered, tried once. */
    async function createWaiting() {
      const type = await createRequestType(app.db, { routineName: 'PATIENT_MATCH' });
      const { requestId } = await enqueueRequest(app.database, {
        requestType: type.requestType,
        attachments: [jsonRow('REQUEST_DATA', { hos_num: hospitalNumber(), dob: '1970-03-15' })],
      });
      assert.deepEqual(await drain(), ['PATIENT_MATCH:RETRY']);
      return { ...type, requestId };
    }

    it('lists, filters, shows and counts a request waiting for a patient, and its attempt has no stack trace', async () => {
      const waiting = await createWaiting();
      const pending = await enqueueRequest(app.database, { requestType: waiting.requestType });
      const [match] = await routinesOf(app.db, waiting.requestId);
      const nextAt = createSiteTime('Europe/London').format(match!.next_try_date_time);
      const details = `no patient matches the identifier and date of birth; try 2 of 20, next at ${nextAt}`;

      const page = await browser.newPage();
      await browser.signIn(page, operator, `/console/requests?type=${waiting.requestType}`);
      const row = page.locator('tr', {
        has: page.getByRole('link', { name: `#${waiting.requestId}`, exact: true }),
      });
      await row.getByText('Waiting for a patient', { exact: true }).waitFor();
      await row.getByText(details, { exact: true }).waitFor();
      assert.doesNotMatch(await row.innerText(), /RUNNING/);
      const pendingRow = page.locator('tr', {
        has: page.getByRole('link', { name: `#${pending.requestId}`, exact: true }),
      });
      assert.match(await pendingRow.innerText(), /RUNNING/);
      assert.doesNotMatch(await pendingRow.innerText(), /Waiting/);
      await browser.capture(page, 'list');

      await page.getByLabel('Overall status').selectOption('waiting');
      await page.getByRole('button', { name: 'Filter' }).click();
      await row.waitFor();
      assert.equal(await pendingRow.count(), 0);
      await browser.capture(page, 'list-filtered');

      await page.getByRole('link', { name: `#${waiting.requestId}`, exact: true }).click();
      const status = page.locator('dd', { hasText: 'Waiting for a patient' });
      await status.waitFor();
      assert.equal(
        (await status.innerText()).replace(/\s+/g, ' ').trim(),
        `Waiting for a patient ${details}`,
      );
      await page.getByText('Attempts (1)').click();
      const attempt = page.locator('article.attempt pre');
      await attempt.waitFor();
      const log = await attempt.innerText();
      assert.match(log, /Error: No patient matches the identifier and date of birth/);
      assert.doesNotMatch(log, /\.ts:\d+|^\s+at /m);
      await browser.capture(page, 'detail');

      await page.goto(`${app.baseUrl}/console/`);
      const line = page.locator('tr', {
        has: page.getByRole('rowheader', { name: waiting.queue, exact: true }),
      });
      assert.equal(await line.locator('a[href*="overall=waiting"]').innerText(), '1');
      await browser.capture(page, 'home');
      await page.close();
    });

    it('refuses "choose patient" once the match completed, in words, and changes nothing', async () => {
      const number = hospitalNumber();
      const matched = await createJane(number);
      const other = await createJane(hospitalNumber());
      const type = await createRequestType(app.db, { routineName: 'PATIENT_MATCH' });
      const { requestId } = await enqueueRequest(app.database, {
        requestType: type.requestType,
        attachments: [
          jsonRow('REQUEST_DATA', { hos_num: number, dob: '1970-03-15', matched_patient_id: matched }),
        ],
      });
      const [match] = await routinesOf(app.db, requestId);
      await app.db
        .updateTable('request_routine')
        .set({ status: 'COMPLETE', try_count: 1 })
        .where('id', '=', match!.id)
        .execute();
      await addRoutineRow(app.db, {
        requestId,
        name: 'ATTACH_TO_EVENT',
        queue: type.queue,
        sequence: 20,
        status: 'FAILED',
        tryCount: 1,
      });
      const routinesBefore = await routinesOf(app.db, requestId);
      const version = (await readRequestMatchData(app.db, requestId))!.version;
      const page = await browser.newPage();
      await browser.signIn(page, operator, `/console/requests/${requestId}`);
      assert.equal(await page.getByRole('heading', { name: 'Fix the data and run on' }).count(), 0);
      // A form from a page loaded before the match completed, sent now.
      await page.evaluate(`(() => {
        const form = document.createElement('form');
        form.method = 'post';
        form.action = '/console/requests/${requestId}/patient';
        const fields = { _csrf: document.querySelector('input[name="_csrf"]').value, version: ${JSON.stringify(version)}, patient_id: '${other}' };
        for (const [name, value] of Object.entries(fields)) {
          const input = document.createElement('input');
          input.type = 'hidden';
          input.name = name;
          input.value = value;
          form.append(input);
        }
        document.body.append(form);
        form.submit();
      })()`);
      await page
        .getByText(
          'The patient match of this request is complete: the request goes on with the patient it matched. Choosing or correcting the patient applies only while the match waits or failed. Nothing was changed.',
        )
        .waitFor();
      await browser.capture(page, 'choose-refused');
      assert.deepEqual(await routinesOf(app.db, requestId), routinesBefore);
      await page.close();
    });

    it('made no request outside 127.0.0.1 and logged no error in any page', () => {
      assert.deepEqual(browser.outside, []);
      assert.deepEqual(browser.pageErrors, []);
    });
  });
});
