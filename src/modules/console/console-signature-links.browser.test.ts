/**
 * A manual crop and the import made from it link to each other, in a real browser (Chromium driven by
 * playwright-core) against the real server on 127.0.0.1, once per dialect: a failed import whose code
 * resolved no event is cropped on its page; it then shows the import's event and patient and links to
 * it, and the import links back, on the detail pages and in the list. Every screen is checked with
 * axe-core and saved under `$SCREENSHOT_DIR` (default `<tmp>/cra-console-signatures/<dialect>-links-*.png`).
 */
import assert from 'node:assert/strict';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { openConsoleBrowser } from '../../../test/console-browser.ts';
import type { ConsoleBrowser } from '../../../test/console-browser.ts';
import type { TestUser } from '../../../test/factories.ts';
import { createFailedUpload, createOperator } from '../../../test/factories-console.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';

const SCREENSHOT_DIR = process.env.SCREENSHOT_DIR ?? path.join(tmpdir(), 'cra-console-signatures');

forEachDialect((dialect) => {
  describe(`console: a manual crop and its import, in a browser [${dialect}]`, () => {
    let app: TestApp;
    let browser: ConsoleBrowser;
    let operator: TestUser;

    before(async () => {
      app = await startTestApp(dialect, { env: { TIME_ZONE: 'Europe/London' } });
      operator = await createOperator(app.db);
      browser = await openConsoleBrowser(app, SCREENSHOT_DIR, `${dialect}-links`);
    });

    after(async () => {
      await browser?.close();
      await app?.close();
    });

    it('shows the crop with its import’s event and patient, and links the two both ways', async () => {
      const { event, logId } = await createFailedUpload(app);
      // A failed row whose code resolved no event but whose original was kept (an older row, or one
      // written by OpenEyes's own sign/add).
      await app.db
        .updateTable('signature_import_log')
        .set({ event_id: null })
        .where('id', '=', logId)
        .execute();
      const { last_name: lastName } = await app.db
        .selectFrom('contact')
        .select('last_name')
        .where('id', '=', event.patient.contactId)
        .executeTakeFirstOrThrow();

      const page = await browser.newPage();
      await browser.signIn(page, operator, `/console/signatures/${logId}`);
      await page.locator('.cropper-crop-box').waitFor();
      await page.getByLabel('Unique code of the form').fill(event.code);
      await page.getByRole('button', { name: 'Save cropped signature' }).click();
      await page.getByText('This import is now Manual.').waitFor();
      const importLink = page.getByRole('link', { name: /^import #\d+$/ });
      const importId = Number((await importLink.innerText()).replace('import #', ''));
      assert.ok(importId > logId);
      const facts = (await page.locator('dl.facts').innerText()).replace(/\s+/g, ' ');
      assert.match(facts, new RegExp(`Imported as import #${importId} \\(Success\\)`));
      assert.match(facts, new RegExp(`Event ${event.eventId} \\(OphCoCvi\\) \\(of import #${importId}\\)`));
      assert.match(facts, new RegExp(`Patient ${lastName}, `));
      await browser.capture(page, 'crop');

      await importLink.click();
      await page.getByRole('heading', { name: `Signature import #${importId}` }).waitFor();
      const importFacts = (await page.locator('dl.facts').innerText()).replace(/\s+/g, ' ');
      assert.match(importFacts, new RegExp(`Cropped from import #${logId}`));
      assert.match(importFacts, new RegExp(`Patient ${lastName}, `));
      await browser.capture(page, 'import');
      await page.getByRole('link', { name: `import #${logId}`, exact: true }).click();
      await page.getByRole('heading', { name: `Signature import #${logId}` }).waitFor();

      await page.goto(`${app.baseUrl}/console/signatures`);
      const rowOf = (id: number) =>
        page.locator('tr', { has: page.locator(`td:first-child a[href="/console/signatures/${id}"]`) });
      const cropRow = (await rowOf(logId).innerText()).replace(/\s+/g, ' ');
      assert.match(
        cropRow,
        new RegExp(`Manual Imported as #${importId} ${event.eventId} \\(OphCoCvi\\) ${lastName}, `),
      );
      const importRow = (await rowOf(importId).innerText()).replace(/\s+/g, ' ');
      assert.match(
        importRow,
        new RegExp(`Success Cropped from #${logId} ${event.eventId} \\(OphCoCvi\\) ${lastName}, `),
      );
      await browser.capture(page, 'list');
      assert.deepEqual(browser.pageErrors, []);
      assert.deepEqual(browser.outside, []);
      await page.close();
    });
  });
});
