/**
 * The operations console in a real browser (Chromium driven by playwright-core) against the real server
 * on 127.0.0.1, once per dialect. Every screen is checked with axe-core (no serious or critical
 * violation) and saved as a screenshot under `test-output/console/`; the suite fails on any console
 * error of a page (CSP violations included) and on any request that leaves 127.0.0.1.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { BrowserContext, Page } from 'playwright-core';
import { chromium } from 'playwright-core';
import { sql } from 'kysely';
import type { TestUser } from '../../../test/factories.ts';
import { createUser } from '../../../test/factories.ts';
import {
  createFailedRequest,
  createFailedUpload,
  createFiledAttachment,
  createOperator,
} from '../../../test/factories-console.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import { createQueueWorker } from '../request-queue/index.ts';
import {
  DEFAULT_ROUTINES,
  PermanentRoutineError,
  createRoutineCatalog,
  defineRoutine,
} from '../filing/index.ts';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SCREENSHOT_DIR = path.resolve('test-output/console');
const AXE_SOURCE = await readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const TABLET = { width: 768, height: 1024 };
const DESKTOP = { width: 1280, height: 800 };

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: number;
}

/**
 * Polls `expression` in the page until it is true, for at most `timeoutMs`. (Playwright's
 * `waitForFunction` evaluates a string with the page's `eval`, which the console's CSP forbids.)
 */
async function waitUntil(page: Page, expression: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await page.evaluate(expression))) {
    if (Date.now() > deadline) throw new Error(`still false after ${timeoutMs} ms: ${expression}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

forEachDialect((dialect) => {
  describe(`operations console in a browser [${dialect}]`, () => {
    let app: TestApp;
    let context: BrowserContext;
    let profileDir: string;
    let operator: TestUser;
    const outside: string[] = [];
    const pageErrors: string[] = [];
    // A routine that fails until the operator has fixed its cause (a flag), then completes.
    let isDeviceFixed = false;
    const flakyRoutine = `FLAKY_${dialect.toUpperCase()}`;

    before(async () => {
      app = await startTestApp(dialect, { env: { TIME_ZONE: 'Europe/London' } });
      operator = await createOperator(app.db);
      await mkdir(SCREENSHOT_DIR, { recursive: true });
      profileDir = await mkdtemp(path.join(tmpdir(), 'cra-chromium-'));
      context = await chromium.launchPersistentContext(profileDir, {
        executablePath: CHROMIUM,
        headless: true,
        args: [
          '--no-sandbox',
          '--disable-gpu',
          '--disable-quic',
          '--no-first-run',
          '--disable-background-networking',
          '--disable-component-update',
          '--disable-sync',
        ],
        viewport: DESKTOP,
        acceptDownloads: true,
      });
      // Every request the pages make is checked: anything not to this server is recorded and refused.
      await context.route('**/*', async (route) => {
        const url = route.request().url();
        if (url.startsWith(`${app.baseUrl}/`)) return route.continue();
        outside.push(url);
        return route.abort();
      });
      const watch = (page: Page) => {
        page.on('console', (message) => {
          // A page answered with an error status (the 403, 404, 409 and 422 pages this suite asks for)
          // is logged as "Failed to load resource"; failed subresources are caught below instead.
          if (
            message.type() === 'error' &&
            !message.text().startsWith('Failed to load resource: the server responded')
          )
            pageErrors.push(`${page.url()}: ${message.text()}`);
        });
        page.on('response', (response) => {
          if (response.request().resourceType() !== 'document' && response.status() >= 400)
            pageErrors.push(`${page.url()}: ${response.url()} answered ${response.status()}`);
        });
        page.on('pageerror', (error) => pageErrors.push(`${page.url()}: ${error.message}`));
      };
      context.pages().forEach(watch);
      context.on('page', watch);
    });

    after(async () => {
      await context?.close();
      await rm(profileDir, { recursive: true, force: true });
      await app?.close();
    });

    /** A fresh tab with no console cookies. */
    async function newPage(): Promise<Page> {
      await context.clearCookies();
      return context.newPage();
    }

    /** No serious or critical axe-core violation on the page as it is now. */
    async function checkAccessibility(page: Page, screen: string): Promise<void> {
      await page.evaluate(AXE_SOURCE);
      const violations = await page.evaluate<AxeViolation[]>(`axe
        .run(document, { resultTypes: ['violations'] })
        .then((result) => result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.length })))`);
      const serious = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
      assert.deepEqual(serious, [], `${screen}: ${JSON.stringify(serious)}`);
    }

    /** Checks the screen (axe, no horizontal overflow at tablet width) and saves both screenshots. */
    async function capture(page: Page, screen: string): Promise<void> {
      // Every image of the screen has loaded and decoded (no broken image, none refused by the CSP).
      await waitUntil(page, 'Array.from(document.images).every((i) => i.complete && i.naturalWidth > 0)');
      await checkAccessibility(page, screen);
      await page.screenshot({ path: path.join(SCREENSHOT_DIR, `${dialect}-${screen}.png`), fullPage: true });
      await page.setViewportSize(TABLET);
      await page.evaluate(
        'new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)))',
      );
      const overflow = await page.evaluate<number>(
        'document.documentElement.scrollWidth - document.documentElement.clientWidth',
      );
      assert.ok(overflow <= 0, `${screen} scrolls sideways at tablet width (${overflow} px)`);
      await page.screenshot({
        path: path.join(SCREENSHOT_DIR, `${dialect}-${screen}-tablet.png`),
        fullPage: true,
      });
      await page.setViewportSize(DESKTOP);
    }

    /** Asks for `next`, is sent to the login form, signs `user` in, and lands on `next`. */
    async function signIn(page: Page, user: { username: string; password: string }, next = '/console/') {
      await page.goto(`${app.baseUrl}${next}`);
      assert.match(page.url(), /\/console\/login\?next=/);
      await page.getByLabel('Username').fill(user.username);
      await page.getByLabel('Password').fill(user.password);
      await page.getByLabel('Password').press('Enter');
      await page.waitForURL((url) => !url.pathname.endsWith('/login'));
    }

    it('signs in with the keyboard, shows the overview, and signs out', async () => {
      const page = await newPage();
      await page.goto(`${app.baseUrl}/console/`);
      await page.waitForURL(/\/console\/login/);
      assert.equal(await page.getByRole('heading', { level: 1 }).textContent(), 'Sign in');
      await capture(page, 'login');
      // Keyboard only: the username field has focus on arrival, Tab moves to the password, Enter submits.
      await page.keyboard.type(operator.username);
      await page.keyboard.press('Tab');
      await page.keyboard.type(operator.password);
      await page.keyboard.press('Enter');
      await page.waitForURL((url) => !url.pathname.endsWith('/login'));
      assert.equal(new URL(page.url()).pathname, '/console/');
      await page.getByRole('heading', { name: 'Queues and worker' }).waitFor();
      await capture(page, 'overview');
      // The skip link is the first stop of the keyboard.
      await page.keyboard.press('Tab');
      assert.equal(await page.evaluate('document.activeElement.textContent'), 'Skip to main content');
      await page.getByRole('button', { name: 'Sign out' }).click();
      await page.getByText('You have signed out.').waitFor();
      await page.goto(`${app.baseUrl}/console/requests`);
      assert.match(page.url(), /\/console\/login\?next=%2Fconsole%2Frequests/);
      await page.close();
    });

    it('ends an idle session: the next page asks to sign in again', async () => {
      const page = await newPage();
      await signIn(page, operator);
      await sql`update console_session set last_seen_at = ${'2000-01-01 00:00:00'}`.execute(app.db);
      await page.goto(`${app.baseUrl}/console/requests`);
      await page.getByText('Your session has ended. Sign in again.').waitFor();
      await page.close();
    });

    it('answers a 403 page to a user without the operation', async () => {
      const limited = await createUser(app.db, { roles: ['API access'] });
      const page = await newPage();
      await signIn(page, limited);
      assert.equal(await page.getByRole('link', { name: 'Requests' }).count(), 0);
      const response = await page.goto(`${app.baseUrl}/console/requests`);
      assert.equal(response?.status(), 403);
      await page.getByRole('heading', { name: 'Forbidden' }).waitFor();
      await capture(page, 'forbidden');
      await page.close();
    });

    it('retries a failed request until the worker completes it, refusing a forged form on the way', async () => {
      const failed = await createFailedRequest(app.db, { routineName: flakyRoutine });
      const catalog = createRoutineCatalog([
        ...DEFAULT_ROUTINES,
        defineRoutine({
          name: flakyRoutine,
          timeoutMs: 5000,
          retry: 'never',
          run: async () => {
            if (!isDeviceFixed) throw new PermanentRoutineError('device offline');
          },
        }),
      ]);
      const worker = createQueueWorker({ database: app.database, config: app.config, catalog });
      const page = await newPage();
      await signIn(page, operator, '/console/requests');
      await page.getByLabel('Overall status').selectOption('failed');
      await page.getByLabel('Routine name').selectOption(flakyRoutine);
      await page.getByRole('button', { name: 'Filter' }).click();
      await page.getByRole('link', { name: `#${failed.requestId}` }).waitFor();
      await capture(page, 'requests');
      await page.getByRole('link', { name: `#${failed.requestId}` }).click();
      await page.getByRole('heading', { name: `Request #${failed.requestId}` }).waitFor();
      await capture(page, 'request-failed');

      // A forged token is refused with 403 and changes nothing.
      await page.evaluate(`document.querySelector('form.retry input[name=_csrf]').value = 'forged-token'`);
      await page.getByRole('button', { name: 'Retry', exact: true }).click();
      await page.getByRole('heading', { name: 'Form refused' }).waitFor();
      await capture(page, 'form-refused');
      await page.goBack();
      await page.reload();

      // Retry: the worker runs it and it fails again (the device is still offline).
      await page.getByRole('button', { name: 'Retry', exact: true }).click();
      await page.getByText('The routine is queued again.').waitFor();
      assert.equal((await worker.engine.step(failed.queue)).kind, 'ran');
      await page.reload();
      await page.locator('h3', { hasText: flakyRoutine }).getByText('FAILED').waitFor();

      // Fixed: retry once more, with the keyboard; the worker completes it.
      isDeviceFixed = true;
      await page.getByLabel('Try count').focus();
      await page.keyboard.press('Enter');
      await page.getByText('The routine is queued again.').waitFor();
      const outcome = await worker.engine.step(failed.queue);
      assert.equal(outcome.kind === 'ran' ? outcome.status : outcome.kind, 'COMPLETE');
      await page.reload();
      await page.locator('dd', { hasText: /^COMPLETE$/ }).waitFor();
      await capture(page, 'request-complete');
      await page.close();
    });

    it('shows "changed meanwhile" for a form older than the routine, and voids a routine', async () => {
      const failed = await createFailedRequest(app.db);
      const page = await newPage();
      await signIn(page, operator, `/console/requests/${failed.requestId}`);
      await app.db
        .updateTable('request_routine')
        .set({ try_count: 21 })
        .where('id', '=', failed.routineId)
        .execute();
      await page.getByRole('button', { name: `Void ${failed.routineName}` }).click();
      await page.getByText(/Changed meanwhile/).waitFor();
      await capture(page, 'changed-meanwhile');
      assert.equal(
        (
          await app.db
            .selectFrom('request_routine')
            .select('status')
            .where('id', '=', failed.routineId)
            .executeTakeFirstOrThrow()
        ).status,
        'FAILED',
      );
      // The page now shows the current version: voiding works.
      await page.getByRole('button', { name: `Void ${failed.routineName}` }).click();
      await page.getByText('The routine is voided.').waitFor();
      assert.equal(
        (
          await app.db
            .selectFrom('request_routine')
            .select('status')
            .where('id', '=', failed.routineId)
            .executeTakeFirstOrThrow()
        ).status,
        'VOID',
      );
      await page.close();
    });

    it('crops a failed upload by hand and re-posts it: Manual (5), the signature on the event', async () => {
      const { event, logId } = await createFailedUpload(app);
      const page = await newPage();
      await signIn(page, operator, '/console/signatures?status=3');
      await page.locator(`a[href="/console/signatures/${logId}"] img`).waitFor();
      await capture(page, 'signatures');
      await page.getByRole('link', { name: `#${logId}` }).click();
      // Cropper.js has built its 16:9 box over the original.
      await page.locator('.cropper-crop-box').waitFor();
      const box = await page.locator('.cropper-crop-box').boundingBox();
      assert.ok(box !== null && Math.abs(box.width / box.height - 16 / 9) < 0.02, JSON.stringify(box));
      assert.equal(await page.getByLabel('Unique code of the form').inputValue(), event.code);
      await capture(page, 'signature-crop');

      // A wrong code: sign/add's 422 is shown and the import stays failed.
      await page.getByLabel('Unique code of the form').fill('ZZZZZZ');
      await page.getByRole('button', { name: 'Save cropped signature' }).click();
      await page.getByText(/sign\/add answered 422 ".*Event not found.*"/).waitFor();
      await capture(page, 'signature-422');

      await page.locator('.cropper-crop-box').waitFor();
      await page.getByLabel('Unique code of the form').fill(event.code);
      await page.getByRole('button', { name: 'Save cropped signature' }).click();
      await page.getByText(/Correct signature saved!/).waitFor();
      await page.getByText('This import is now Manual.').waitFor();
      await capture(page, 'signature-saved');
      const log = await app.db
        .selectFrom('signature_import_log')
        .selectAll()
        .where('id', '=', logId)
        .executeTakeFirstOrThrow();
      assert.equal(log.status_id, 5);
      const signature = await app.db
        .selectFrom('ophcocvi_signature as s')
        .innerJoin('protected_file as f', 'f.id', 's.signature_file_id')
        .select(['s.type', 'f.mimetype'])
        .where('s.element_id', '=', event.elementId)
        .executeTakeFirstOrThrow();
      assert.deepEqual(signature, { type: 3, mimetype: 'image/png' });
      await page.close();
    });

    it('marks a failed upload Manual Ignore (6)', async () => {
      const { logId } = await createFailedUpload(app);
      const page = await newPage();
      await signIn(page, operator, `/console/signatures/${logId}`);
      await page.getByRole('button', { name: 'Manual ignore' }).click();
      await page.getByText('This import is now Manual Ignore.').waitFor();
      const log = await app.db
        .selectFrom('signature_import_log')
        .select('status_id')
        .where('id', '=', logId)
        .executeTakeFirstOrThrow();
      assert.equal(log.status_id, 6);
      await page.close();
    });

    it('finds an attachment by patient identifier and opens it', async () => {
      const filed = await createFiledAttachment(app.db);
      const page = await newPage();
      await signIn(page, operator, '/console/attachments');
      await page.getByLabel('or patient identifier (hospital or NHS number)').fill(filed.identifier);
      await page.getByRole('button', { name: 'Find' }).click();
      const thumbnail = page.getByAltText(`Thumbnail of attachment ${filed.attachmentId}`);
      await thumbnail.waitFor();
      await capture(page, 'attachments');
      const [response] = await Promise.all([
        page.waitForResponse((r) => r.url().endsWith(`/console/attachments/${filed.attachmentId}/file`)),
        page.getByRole('link', { name: `Open attachment ${filed.attachmentId}` }).click(),
      ]);
      await page.getByRole('heading', { name: `Attachment ${filed.attachmentId}` }).waitFor();
      await capture(page, 'attachment');
      assert.equal(response.status(), 200);
      assert.equal(response.headers()['content-type'], 'image/png');
      assert.equal(response.headers()['x-content-type-options'], 'nosniff');
      await page.close();
    });

    it('searches the audit log and exports the selection as CSV', async () => {
      const auditor = await createUser(app.db, { roles: ['View Audit Log'] });
      const page = await newPage();
      await signIn(page, auditor, '/console/audit');
      await page.getByLabel('Username').fill(operator.username);
      await page.getByLabel('Endpoint or action').selectOption('console.signature.crop');
      await page.getByRole('button', { name: 'Search' }).click();
      await page.getByRole('cell', { name: 'console.signature.crop' }).first().waitFor();
      const outcomes = await page.locator('tbody tr td:nth-child(5)').allTextContents();
      assert.deepEqual(outcomes, ['303', '422'], await page.locator('tbody').innerText());
      await capture(page, 'audit');
      const [download] = await Promise.all([
        page.waitForEvent('download'),
        page.getByRole('link', { name: 'Export this selection as CSV' }).click(),
      ]);
      const csv = await readFile(await download.path(), 'utf8');
      const lines = csv.trimEnd().split('\r\n');
      assert.equal(lines.length, 3);
      assert.ok(
        lines.slice(1).every((line) => line.includes(`,${operator.username},console.signature.crop,`)),
      );
      await page.close();
    });

    it('made no request outside 127.0.0.1 and logged no error in any page', () => {
      assert.deepEqual(outside, []);
      assert.deepEqual(pageErrors, []);
    });
  });
});
