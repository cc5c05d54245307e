/**
 * The console's overview for a user without any screen, in Chromium: the roles and the commands that
 * grant them are shown, and a screen's 403 page names its own, readable (axe-core: no serious violation),
 * without sideways scrolling at tablet width; screenshots under `test-output/console/`
 * (`<dialect>-no-operation*.png`, `<dialect>-forbidden-audit.png`).
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext } from 'playwright-core';
import { chromium } from 'playwright-core';
import { createUser } from './factories.ts';
import type { TestApp } from './harness.ts';
import { forEachDialect, startTestApp } from './harness.ts';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SCREENSHOT_DIR = path.resolve('test-output/console');
const AXE_SOURCE = await readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

forEachDialect((dialect) => {
  describe(`the console's overview without any screen, in a browser [${dialect}]`, () => {
    let app: TestApp;
    let context: BrowserContext;
    let profileDir: string;

    before(async () => {
      app = await startTestApp(dialect);
      await mkdir(SCREENSHOT_DIR, { recursive: true });
      profileDir = await mkdtemp(path.join(tmpdir(), 'cra-chromium-'));
      context = await chromium.launchPersistentContext(profileDir, {
        executablePath: CHROMIUM,
        headless: true,
        args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking'],
        viewport: { width: 1280, height: 800 },
      });
    });
    after(async () => {
      await context?.close();
      if (profileDir !== undefined) await rm(profileDir, { recursive: true, force: true });
      await app?.close();
    });

    it('shows the role of each screen and the command that grants it', async () => {
      const user = await createUser(app.db, { username: 'api.only', roles: ['API access'] });
      const page = await context.newPage();
      await page.goto(`${app.baseUrl}/console/`);
      await page.getByLabel('Username').fill(user.username);
      await page.getByLabel('Password').fill(user.password);
      await page.getByLabel('Password').press('Enter');
      await page.waitForURL((url) => !url.pathname.endsWith('/login'));
      const table = page.getByRole('table', { name: "Roles of the console's screens" });
      assert.deepEqual(await table.locator('code').allTextContents(), [
        "npm run cli -- role grant api.only 'Edit Payload Processor'",
        'npm run cli -- role grant api.only TaskViewClinical',
        "npm run cli -- role grant api.only 'View Audit Log'",
      ]);
      await page.evaluate(AXE_SOURCE);
      const serious = await page.evaluate<{ id: string }[]>(`axe
        .run(document, { resultTypes: ['violations'] })
        .then((r) => r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => ({ id: v.id })))`);
      assert.deepEqual(serious, []);
      await page.screenshot({
        path: path.join(SCREENSHOT_DIR, `${dialect}-no-operation.png`),
        fullPage: true,
      });
      await page.setViewportSize({ width: 768, height: 1024 });
      const overflow = await page.evaluate<number>(
        'document.documentElement.scrollWidth - document.documentElement.clientWidth',
      );
      assert.ok(overflow <= 0, `the page scrolls sideways at tablet width (${overflow} px)`);
      await page.screenshot({
        path: path.join(SCREENSHOT_DIR, `${dialect}-no-operation-tablet.png`),
        fullPage: true,
      });

      // A screen's 403 page names its role and the command, readable at tablet width too.
      await page.setViewportSize({ width: 1280, height: 800 });
      const refused = await page.goto(`${app.baseUrl}/console/audit`);
      assert.equal(refused?.status(), 403);
      assert.match(await page.locator('main').innerText(), /The role that grants it: View Audit Log\./);
      assert.deepEqual(await page.locator('main code').allTextContents(), [
        "npm run cli -- role grant api.only 'View Audit Log'",
      ]);
      await page.evaluate(AXE_SOURCE);
      const seriousOnRefusal = await page.evaluate<{ id: string }[]>(`axe
        .run(document, { resultTypes: ['violations'] })
        .then((r) => r.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => ({ id: v.id })))`);
      assert.deepEqual(seriousOnRefusal, []);
      await page.screenshot({
        path: path.join(SCREENSHOT_DIR, `${dialect}-forbidden-audit.png`),
        fullPage: true,
      });
      await page.setViewportSize({ width: 768, height: 1024 });
      const refusalOverflow = await page.evaluate<number>(
        'document.documentElement.scrollWidth - document.documentElement.clientWidth',
      );
      assert.ok(
        refusalOverflow <= 0,
        `the 403 page scrolls sideways at tablet width (${refusalOverflow} px)`,
      );
    });
  });
});
