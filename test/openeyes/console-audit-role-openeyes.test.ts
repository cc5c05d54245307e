/**
 * The audit screen on an OpenEyes database that lacks OpenEyes's `Audit` role (the test seed, like a
 * database without `m171004_134833_audit_rbac`): the 403 page says that no role gives the screen's
 * operation and where the docs show how to create one; the SQL of that docs section, taken from
 * docs/OPERATIONS.md (and the same in the README), creates the role, the 403 page then names it, and
 * its `authassignment` row opens the screen. Chromium screenshots of both 403 pages under
 * `test-output/console/` (`openeyes-forbidden-audit-*.png`).
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import type { Bootstrapped } from '../../src/main/bootstrap.ts';
import { bootstrap } from '../../src/main/bootstrap.ts';
import { createAuthenticator } from '../../src/modules/user/index.ts';
import type { ConsoleBrowser } from '../console-browser.ts';
import { openConsoleBrowser } from '../console-browser.ts';
import { ConsoleClient } from '../factories-console.ts';
import type { TestApp } from '../harness.ts';
import type { OpenEyesTestDatabase } from './openeyes-database.ts';
import { connectForScripts, createOpenEyesDatabase, testMysqlUrl } from './openeyes-database.ts';

const adminUrl = testMysqlUrl();
const skip = adminUrl === undefined ? 'TEST_MYSQL_URL is not set (no MariaDB/MySQL server)' : false;
const ROOT = path.resolve(import.meta.dirname, '../..');
const SECTION = 'An OpenEyes database without the Audit role';
const SCREENSHOT_DIR = path.resolve('test-output/console');

/** The text of an HTML page as the browser shows it (the entities Eta writes). */
function textOf(html: string): string {
  return html
    .replace(/<[^>]+>/g, '')
    .replace(/&#39;/g, "'")
    .replace(/&quot;/g, '"')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
}

/** The first ```sql block after `marker` in `text`. */
function sqlBlockAfter(text: string, marker: string): string {
  const at = text.indexOf(marker);
  assert.ok(at >= 0, `no "${marker}" in the docs`);
  const block = /```sql\n([\s\S]*?)```/.exec(text.slice(at));
  assert.ok(block !== null, `no SQL block after "${marker}"`);
  return block[1]!;
}

describe('the audit screen on an OpenEyes database without the Audit role', { skip }, () => {
  let oe: OpenEyesTestDatabase;
  let booted: Bootstrapped;
  let app: FastifyInstance;
  let baseUrl: string;
  let filesDir: string;
  let chromium: ConsoleBrowser;

  before(async () => {
    oe = await createOpenEyesDatabase(adminUrl!);
    filesDir = await mkdtemp(path.join(tmpdir(), 'cra-oe-audit-role-'));
    const config = loadConfig({
      DATABASE_URL: oe.url,
      DATABASE_SCHEMA: 'openeyes',
      TIME_ZONE: 'UTC',
      FILES_DIR: filesDir,
      RAW_BODY_LIMIT_BYTES: String(8 * 1024 * 1024),
      AUTH_FAILURE_LIMIT_PER_MINUTE: '0',
      AUTH_CACHE_TTL_MS: '0',
      WORKER: 'off',
      DEMO_DATA: 'off',
      LOG_LEVEL: 'silent',
    });
    booted = await bootstrap(config);
    app = await buildApp({
      config: booted.config,
      database: booted.database,
      files: booted.files,
      authenticator: createAuthenticator(booted.database.db, { cacheTtlMs: 0, database: booted.database }),
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    baseUrl = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
  });
  after(async () => {
    await chromium?.close();
    await app?.close();
    await booted?.database.close();
    await oe?.drop();
    if (filesDir !== undefined) await rm(filesDir, { recursive: true, force: true });
  });

  it("creates the role with the docs' SQL; the 403 page points to it, then names the role", async () => {
    const operations = await readFile(path.join(ROOT, 'docs/OPERATIONS.md'), 'utf8');
    const readme = await readFile(path.join(ROOT, 'README.md'), 'utf8');
    const script = sqlBlockAfter(operations, `**${SECTION}.**`);
    assert.equal(sqlBlockAfter(readme, 'An OpenEyes database without the `Audit` role'), script);
    const statements = script
      .split(/;\s*\n/)
      .map((s) => s.trim())
      .filter((s) => s !== '');
    const assignment = statements.filter((s) => s.startsWith('INSERT INTO authassignment'));
    assert.equal(assignment.length, 1, script);

    const target = { request: (p: string, init?: RequestInit) => fetch(`${baseUrl}${p}`, init) };
    const browser = new ConsoleClient(target as unknown as TestApp);
    const clinician = { username: 'clinician', password: 'clinician-password' };
    assert.equal((await browser.signIn(clinician)).status, 303);
    chromium = await openConsoleBrowser({ baseUrl } as TestApp, SCREENSHOT_DIR, 'openeyes');
    const page = await chromium.newPage();
    await chromium.signIn(page, clinician, '/console/');
    // The 403 page in Chromium: axe, desktop and tablet screenshots, no sideways scroll.
    const capture = async (screen: string) => {
      const answer = await page.goto(`${baseUrl}/console/audit`);
      assert.equal(answer?.status(), 403);
      await chromium.capture(page, screen);
    };

    const connection = await connectForScripts(oe.url);
    try {
      // The row for OpenEyes's own role fails here: the database has no such item.
      await assert.rejects(
        connection.query("INSERT INTO authassignment (itemname, userid) VALUES ('Audit', 3)"),
        /foreign key constraint fails/,
      );
      const refused = await browser.get('/console/audit');
      assert.equal(refused.status, 403);
      const refusal = textOf(await refused.text());
      assert.match(refusal, /does not have the operation OprnViewAuditLog/);
      assert.match(refusal, /No role of this database gives OprnViewAuditLog/);
      assert.ok(refusal.includes(`docs/OPERATIONS.md, "Operations console", "${SECTION}"`), refusal);
      await capture('forbidden-audit-no-role');
      const home = textOf(await (await browser.get('/console/')).text());
      assert.match(
        home,
        /Audit log\s*none on this database\s*No role of this database gives OprnViewAuditLog/,
      );
      assert.doesNotMatch(home, /VALUES \('Audit', 3\)/);

      for (const statement of statements.filter((s) => !assignment.includes(s))) {
        await connection.query(statement);
      }
      const named = await browser.get('/console/audit');
      assert.equal(named.status, 403);
      const page = textOf(await named.text());
      assert.match(page, /The role that grants it: View Audit Log\./);
      assert.ok(
        page.includes("INSERT INTO authassignment (itemname, userid) VALUES ('View Audit Log', 3);"),
        page,
      );
      await capture('forbidden-audit-role');
      await connection.query(assignment[0]!.replace('<user id>', '3'));
    } finally {
      await connection.end();
    }
    const opened = await browser.get('/console/audit');
    assert.equal(opened.status, 200, await opened.clone().text());
    assert.deepEqual(chromium.outside, []);
    assert.deepEqual(chromium.pageErrors, []);
  });
});
