/**
 * The console on an OpenEyes database: each screen opens with the role OpenEyes itself has for that
 * purpose (`Edit Payload Processor`, `View clinical`, and `Audit`, whose task `TaskViewAudit` guards
 * OpenEyes's own audit screen), and a user without any is shown, per screen, the role and the
 * `authassignment` row that grants it, which work when run as shown. No OpenEyes schema is changed.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import type { Bootstrapped } from '../../src/main/bootstrap.ts';
import { bootstrap } from '../../src/main/bootstrap.ts';
import { createAuthenticator } from '../../src/modules/user/index.ts';
import { ConsoleClient } from '../factories-console.ts';
import type { TestApp } from '../harness.ts';
import type { OpenEyesTestDatabase } from './openeyes-database.ts';
import { connectForScripts, createOpenEyesDatabase, testMysqlUrl } from './openeyes-database.ts';

const adminUrl = testMysqlUrl();
const skip = adminUrl === undefined ? 'TEST_MYSQL_URL is not set (no MariaDB/MySQL server)' : false;

/** The text of an HTML fragment as the browser shows it (the entities Eta writes). */
function textOf(html: string): string {
  return html
    .replace(/<[^>]+>/g, '')
    .replace(/&#39;/g, "'")
    .replace(/&quot;/g, '"')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
}

describe('the console on an OpenEyes database', { skip }, () => {
  let oe: OpenEyesTestDatabase;
  let booted: Bootstrapped;
  let app: FastifyInstance;
  let baseUrl: string;
  let filesDir: string;

  before(async () => {
    oe = await createOpenEyesDatabase(adminUrl!);
    // The roles an OpenEyes installation has beyond the test seed: core's `View clinical`
    // (m131104_112734_authitems) and `Audit` (m171004_134833_audit_rbac), as those migrations add them.
    const connection = await connectForScripts(oe.url);
    try {
      await connection.query(`
        INSERT INTO authitem (name, type) VALUES ('OprnViewClinical', 0), ('TaskViewClinical', 1),
          ('View clinical', 2), ('TaskViewAudit', 1), ('Audit', 2);
        INSERT INTO authitemchild (parent, child) VALUES ('TaskViewClinical', 'OprnViewClinical'),
          ('View clinical', 'TaskViewClinical'), ('Audit', 'TaskViewAudit');`);
    } finally {
      await connection.end();
    }
    filesDir = await mkdtemp(path.join(tmpdir(), 'cra-oe-console-'));
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
    await app?.close();
    await booted?.database.close();
    await oe?.drop();
    if (filesDir !== undefined) await rm(filesDir, { recursive: true, force: true });
  });

  it("names each screen's OpenEyes role and its authassignment row, which opens the screen when run", async () => {
    const target = { request: (p: string, init?: RequestInit) => fetch(`${baseUrl}${p}`, init) };
    const browser = new ConsoleClient(target as unknown as TestApp);
    const signedIn = await browser.signIn({ username: 'clinician', password: 'clinician-password' });
    assert.equal(signedIn.status, 303);
    const screens = {
      Requests: '/console/requests',
      'Signature imports': '/console/signatures',
      Audit: '/console/audit',
    };
    for (const url of Object.values(screens)) assert.equal((await browser.get(url)).status, 403, url);

    const home = await (await browser.get('/console/')).text();
    assert.match(home, /Your account has no console operation yet/);
    const text = textOf(home);
    const statements = [
      ...text.matchAll(/INSERT INTO authassignment \(itemname, userid\) VALUES \('([^']+)', (\d+)\);/g),
    ];
    assert.deepEqual(
      statements.map((m) => [m[1], m[2]]),
      [
        ['Edit Payload Processor', '3'],
        ['View clinical', '3'],
        ['Audit', '3'],
      ],
    );
    // Run the rows as the page shows them, on OpenEyes's own table.
    const connection = await connectForScripts(oe.url);
    try {
      for (const statement of statements) await connection.query(statement[0]);
    } finally {
      await connection.end();
    }
    for (const [name, url] of Object.entries(screens)) {
      const page = await browser.get(url);
      assert.equal(page.status, 200, `${name}: ${await page.clone().text()}`);
    }
    const after = await (await browser.get('/console/')).text();
    assert.doesNotMatch(after, /no console operation yet/);
    assert.match(after, /href="\/console\/audit"/);
  });
});
