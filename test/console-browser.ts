/**
 * Headless Chromium for the console's browser tests: one persistent context that may reach only the test
 * app (every other request is aborted and listed in `outside`), page errors and failed subresources
 * collected in `pageErrors`, and `capture`, which checks a screen with axe (no serious or critical
 * violation), screenshots it at desktop and tablet width and asserts it does not scroll sideways there.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { chromium } from 'playwright-core';
import type { TestApp } from './harness.ts';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const AXE_SOURCE = await readFile(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const TABLET = { width: 768, height: 1024 };
const DESKTOP = { width: 1280, height: 800 };

export interface ConsoleBrowser {
  readonly context: BrowserContext;
  /** URLs a page asked for outside the test app (aborted). */
  readonly outside: string[];
  /** Console errors, uncaught page errors and subresources answered >= 400. */
  readonly pageErrors: string[];
  /** A new page with no session cookie. */
  newPage(): Promise<Page>;
  /** Signs in on the login page that `next` redirects to, and waits to leave it. */
  signIn(page: Page, user: { username: string; password: string }, next: string): Promise<void>;
  /** axe, then screenshots `<prefix>-<screen>.png` and `-tablet.png`; no sideways scroll at tablet width. */
  capture(page: Page, screen: string): Promise<void>;
  close(): Promise<void>;
}

/** Polls `expression` in the page until it is true (the console's CSP forbids `waitForFunction`'s eval). */
export async function waitUntil(page: Page, expression: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await page.evaluate(expression))) {
    if (Date.now() > deadline) throw new Error(`still false after ${timeoutMs} ms: ${expression}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** Opens Chromium on `app`; screenshots go to `screenshotDir` named `<screenshotPrefix>-<screen>`. */
export async function openConsoleBrowser(
  app: TestApp,
  screenshotDir: string,
  screenshotPrefix: string,
): Promise<ConsoleBrowser> {
  await mkdir(screenshotDir, { recursive: true });
  const profileDir = await mkdtemp(path.join(tmpdir(), 'cra-chromium-'));
  const context = await chromium.launchPersistentContext(profileDir, {
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
  });
  const outside: string[] = [];
  const pageErrors: string[] = [];
  await context.route('**/*', async (route) => {
    const url = route.request().url();
    if (url.startsWith(`${app.baseUrl}/`)) return route.continue();
    outside.push(url);
    return route.abort();
  });
  const watch = (page: Page) => {
    page.on('console', (message) => {
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

  return {
    context,
    outside,
    pageErrors,
    async newPage() {
      await context.clearCookies();
      return context.newPage();
    },
    async signIn(page, user, next) {
      await page.goto(`${app.baseUrl}${next}`);
      await page.getByLabel('Username').fill(user.username);
      await page.getByLabel('Password').fill(user.password);
      await page.getByLabel('Password').press('Enter');
      await page.waitForURL((url) => !url.pathname.endsWith('/login'));
    },
    async capture(page, screen) {
      await waitUntil(page, 'Array.from(document.images).every((i) => i.complete && i.naturalWidth > 0)');
      await page.evaluate(AXE_SOURCE);
      const violations = await page.evaluate<{ id: string; impact: string | null }[]>(`axe
        .run(document, { resultTypes: ['violations'] })
        .then((result) => result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.length })))`);
      const serious = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
      assert.deepEqual(serious, [], `${screen}: ${JSON.stringify(serious)}`);
      await page.screenshot({
        path: path.join(screenshotDir, `${screenshotPrefix}-${screen}.png`),
        fullPage: true,
      });
      await page.setViewportSize(TABLET);
      await page.evaluate(
        'new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)))',
      );
      const overflow = await page.evaluate<number>(
        'document.documentElement.scrollWidth - document.documentElement.clientWidth',
      );
      assert.ok(overflow <= 0, `${screen} scrolls sideways at tablet width (${overflow} px)`);
      await page.screenshot({
        path: path.join(screenshotDir, `${screenshotPrefix}-${screen}-tablet.png`),
        fullPage: true,
      });
      await page.setViewportSize(DESKTOP);
    },
    async close() {
      await context.close();
      await rm(profileDir, { recursive: true, force: true });
    },
  };
}
