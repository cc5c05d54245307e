/**
 * The console resolves a failed request on an OpenEyes database (`DATABASE_SCHEMA=openeyes`, MariaDB/MySQL):
 * a request whose PATIENT_MATCH failed for want of a date of birth is listed with its reason, the
 * patient is found through the patient search and chosen on the request page, and the request runs on to
 * the patient; the change is kept with its old and new values and audited by key name only. The user is
 * an OpenEyes user given OpenEyes's own `Edit Payload Processor` role.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import type { Bootstrapped } from '../../src/main/bootstrap.ts';
import { bootstrap } from '../../src/main/bootstrap.ts';
import { createQueueEngine, enqueueRequest } from '../../src/modules/request-queue/index.ts';
import { defaultRoutineCatalog } from '../../src/modules/filing/index.ts';
import { createAuthenticator } from '../../src/modules/user/index.ts';
import { ConsoleClient, csrfOf, versionOf } from '../factories-console.ts';
import { jsonRow } from '../factories-queue.ts';
import type { TestApp } from '../harness.ts';
import type { OpenEyesTestDatabase } from './openeyes-database.ts';
import { connectForScripts, createOpenEyesDatabase, testMysqlUrl } from './openeyes-database.ts';

const adminUrl = testMysqlUrl();
const skip = adminUrl === undefined ? 'TEST_MYSQL_URL is not set (no MariaDB/MySQL server)' : false;

describe('the console resolves a failed request on an OpenEyes database', { skip }, () => {
  let oe: OpenEyesTestDatabase;
  let booted: Bootstrapped;
  let app: FastifyInstance;
  let baseUrl: string;
  let filesDir: string;

  before(async () => {
    oe = await createOpenEyesDatabase(adminUrl!);
    filesDir = await mkdtemp(path.join(tmpdir(), 'cra-oe-resolve-'));
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
    // The seed's clinician (user 3) gets OpenEyes's request-admin role; the site configures a request
    // type that starts with PATIENT_MATCH (whose routine_library row the service registered at start).
    const connection = await connectForScripts(oe.url);
    try {
      await connection.query(`
        INSERT INTO authassignment (itemname, userid) VALUES ('Edit Payload Processor', 3);
        INSERT INTO request_type (request_type, title_full, title_short, default_routine_name, default_request_queue)
          VALUES ('form_data', 'Form data', 'Form data', 'PATIENT_MATCH', 'dicom_queue');`);
    } finally {
      await connection.end();
    }
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

  it('lists the reason, finds and chooses the patient, and runs the request on', async () => {
    const { database } = booted;
    const { requestId } = await enqueueRequest(database, {
      requestType: 'form_data',
      attachments: [jsonRow('REQUEST_DATA', { hos_num: '12345' })],
    });
    const engine = createQueueEngine({ database, config: booted.config, catalog: defaultRoutineCatalog });
    const first = await engine.step();
    assert.equal(first.kind === 'ran' ? first.status : first.kind, 'FAILED');

    const target = { request: (p: string, init?: RequestInit) => fetch(`${baseUrl}${p}`, init) };
    const browser = new ConsoleClient(target as unknown as TestApp);
    assert.equal(
      (await browser.signIn({ username: 'clinician', password: 'clinician-password' })).status,
      303,
    );
    const list = await (await browser.get('/console/requests?overall=failed')).text();
    assert.match(list, /PATIENT_MATCH: No date of birth in the request/);

    const page = `/console/requests/${requestId}`;
    const found = await (await browser.get(`${page}/patients?term=0012345`)).text();
    assert.match(found, /<td>1970-01-01<\/td>/);
    const action = `${page}/patient`;
    const chosen = await browser.post(action, {
      _csrf: csrfOf(found, action),
      version: versionOf(found, action),
      patient_id: '1',
    });
    assert.equal(chosen.status, 303);
    const next = await engine.step();
    assert.equal(next.kind === 'ran' ? next.status : next.kind, 'COMPLETE');
    const data = await database.db
      .selectFrom('attachment_data')
      .select('text_data')
      .where('request_id', '=', requestId)
      .where('attachment_mnemonic', '=', 'REQUEST_DATA')
      .executeTakeFirstOrThrow();
    const stored = JSON.parse(data.text_data!) as Record<string, unknown>;
    assert.equal(stored.matched_patient_id, 1);
    assert.deepEqual(stored.console_edits, [
      {
        at: (stored.console_edits as { at: string }[])[0]!.at,
        userId: 3,
        patientId: 1,
        changes: { hos_num: ['12345', '0012345'], dob: [null, '1970-01-01'], sex: [null, 'F'] },
      },
    ]);
    const audit = await sql<{
      detail: string;
    }>`select detail from cra_audit_event where action = 'console.request.choose-patient'`.execute(
      database.db,
    );
    assert.deepEqual(
      audit.rows.map((r) => r.detail),
      [
        `REQUEST_DATA keys changed: hos_num dob sex; routines run on: ${first.kind === 'ran' ? first.routineId : 0}; patient chosen: 1`,
      ],
    );
    const matched = await (await browser.get('/console/requests?type=form_data')).text();
    assert.match(matched, /Hosp\. no\. 0012345/);
  });
});
