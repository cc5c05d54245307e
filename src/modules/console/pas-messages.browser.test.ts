/**
 * A PAS message answered AE corrected and applied again in a real browser (Chromium driven by
 * playwright-core) against the real server and its MLLP listener on 127.0.0.1, once per dialect: the
 * list from the navigation, the message's page, the correction in its editor, the AA that replaces the
 * AE. Every screen is checked with axe-core and saved as `/tmp/pas-messages-<dialect>-*.png` (or under
 * `$SCREENSHOT_DIR`).
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { openConsoleBrowser } from '../../../test/console-browser.ts';
import type { ConsoleBrowser } from '../../../test/console-browser.ts';
import type { TestUser } from '../../../test/factories.ts';
import { createOperator } from '../../../test/factories-console.ts';
import type { PasFeed } from '../../../test/factories-hl7.ts';
import {
  adtMessage,
  createFeedIdentifierType,
  newControlId,
  pasFeedEnv,
  startPasFeed,
} from '../../../test/factories-hl7.ts';
import { newHospitalNumber } from '../../../test/factories-pasapi.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';

const SCREENSHOT_DIR = process.env.SCREENSHOT_DIR ?? tmpdir();

forEachDialect((dialect) => {
  describe(`console: PAS messages in a browser [${dialect}]`, () => {
    let app: TestApp;
    let feed: PasFeed;
    let dir: string;
    let typeId: number;
    let browser: ConsoleBrowser;
    let operator: TestUser;

    before(async () => {
      dir = await mkdtemp(path.join(tmpdir(), 'cra-pas-messages-'));
      app = await startTestApp(dialect, { env: { TIME_ZONE: 'Europe/London', ...(await pasFeedEnv(dir)) } });
      typeId = await createFeedIdentifierType(app.db);
      feed = await startPasFeed(app);
      operator = await createOperator(app.db);
      browser = await openConsoleBrowser(app, SCREENSHOT_DIR, `pas-messages-${dialect}`);
    });
    after(async () => {
      await browser?.close();
      await feed?.stop();
      await app?.close();
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    });

    it('goes from the list to a failed message, corrects its date of birth and applies it (AA)', async () => {
      const number = newHospitalNumber();
      await feed.send(
        adtMessage({ event: 'A28', controlId: newControlId(), hospitalNumber: newHospitalNumber() }),
      );
      const controlId = newControlId();
      const ack = await feed.send(
        adtMessage({
          event: 'A28',
          controlId,
          hospitalNumber: number,
          surname: 'Browserperson',
          dob: '19800231',
        }),
      );
      assert.equal(ack.code, 'AE');

      const page = await browser.newPage();
      await browser.signIn(page, operator, '/console/requests');
      await page
        .getByRole('navigation', { name: 'Console sections' })
        .getByRole('link', { name: 'PAS messages' })
        .click();
      await page.getByRole('heading', { name: 'PAS messages' }).waitFor();
      await page.getByLabel('Outcome').selectOption('AE');
      await page.getByRole('button', { name: 'Filter' }).click();
      await page.waitForURL(/outcome=AE/);
      const row = page.locator('tr', { hasText: controlId });
      assert.match(await row.innerText(), /PID-7\.1 is not a date of the calendar: '19800231'/);
      await browser.capture(page, 'list');

      await row.getByRole('link', { name: 'Correct and apply again' }).click();
      await page.getByRole('heading', { name: /^PAS message #\d+$/ }).waitFor();
      const editor = page.getByLabel('Message text');
      const text = await editor.inputValue();
      assert.match(text, /^MSH\|/);
      assert.equal(text.split('\n').length, 3, 'one segment per line');
      await editor.fill(text.replace('19800231', '19800213'));
      await browser.capture(page, 'detail');
      await page.getByRole('button', { name: 'Apply the corrected message' }).click();
      await page.getByText('The corrected message is applied (AA).').waitFor();
      const facts = (await page.locator('dl.facts').innerText()).replace(/\s+/g, ' ');
      assert.match(facts, /Outcome AA/);
      assert.match(facts, new RegExp(`Patient Browserperson, Alex \\(hosp\\. no\\. ${number}\\)`));
      await browser.capture(page, 'applied');

      const patient = await app.db
        .selectFrom('patient_identifier as pi')
        .innerJoin('patient as p', 'p.id', 'pi.patient_id')
        .select(['p.dob'])
        .where('pi.patient_identifier_type_id', '=', typeId)
        .where('pi.value', '=', number)
        .executeTakeFirst();
      assert.equal(patient?.dob, '1980-02-13');
      assert.deepEqual(browser.pageErrors, []);
      assert.deepEqual(browser.outside, []);
    });
  });
});
