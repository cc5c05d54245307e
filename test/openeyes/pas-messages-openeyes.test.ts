/**
 * The console's PAS messages on an OpenEyes database (`DATABASE_SCHEMA=openeyes`, MariaDB/MySQL) with
 * the tables OpenEyes's migrations create and the built-in field map (`PAS` numbers at `LOCAL-1-0`): an
 * A28 answered AE keeps its text in `cra_hl7_message.message_text`, is listed with its reason, and,
 * corrected on its page by an OpenEyes user with OpenEyes's `Edit Payload Processor` role, is applied:
 * the patient is created and the AE row answers AA.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Hl7Message } from '@medplum/core';
import { Hl7Client } from '@medplum/hl7';
import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/logger.ts';
import type { Bootstrapped } from '../../src/main/bootstrap.ts';
import { bootstrap } from '../../src/main/bootstrap.ts';
import { createAuditTrail } from '../../src/modules/audit/index.ts';
import type { Hl7Server } from '../../src/modules/hl7/index.ts';
import { startHl7Server } from '../../src/modules/hl7/index.ts';
import { createAuthenticator } from '../../src/modules/user/index.ts';
import { ConsoleClient, csrfOf } from '../factories-console.ts';
import type { TestApp } from '../harness.ts';
import type { OpenEyesTestDatabase } from './openeyes-database.ts';
import { connectForScripts, createOpenEyesDatabase, openKysely, testMysqlUrl } from './openeyes-database.ts';

const adminUrl = testMysqlUrl();
const skip = adminUrl === undefined ? 'TEST_MYSQL_URL is not set (no MariaDB/MySQL server)' : false;

const a28 = (controlId: string, dob: string) =>
  [
    `MSH|^~\\&|PAS|RHS|CRA|EYE|20260301120000||ADT^A28|${controlId}|P|2.4`,
    `PID|1||7650042^^^PAS^MR||Consoleperson^Sam||${dob}|M|||2 Test Lane^^Testtown^^TE2 2ST^^H`,
  ].join('\r');

describe('PAS messages in the console on an OpenEyes database', { skip }, () => {
  let oe: OpenEyesTestDatabase;
  let booted: Bootstrapped;
  let app: FastifyInstance;
  let server: Hl7Server;
  let client: Hl7Client;
  let baseUrl: string;
  let filesDir: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  let db: Kysely<any>;

  before(async () => {
    oe = await createOpenEyesDatabase(adminUrl!);
    filesDir = await mkdtemp(path.join(tmpdir(), 'cra-oe-pas-messages-'));
    const config = loadConfig({
      DATABASE_URL: oe.url,
      DATABASE_SCHEMA: 'openeyes',
      TIME_ZONE: 'UTC',
      FILES_DIR: filesDir,
      AUTH_FAILURE_LIMIT_PER_MINUTE: '0',
      AUTH_CACHE_TTL_MS: '0',
      WORKER: 'off',
      DEMO_DATA: 'off',
      LOG_LEVEL: 'silent',
      HL7_PORT: '0',
      HL7_HOST: '127.0.0.1',
      HL7_ALLOWED_SENDERS: 'PAS^RHS@127.0.0.1',
    });
    booted = await bootstrap(config);
    const connection = await connectForScripts(oe.url);
    try {
      await connection.query(
        `INSERT INTO authassignment (itemname, userid) VALUES ('Edit Payload Processor', 3);`,
      );
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
    server = await startHl7Server({
      database: booted.database,
      config: booted.config,
      logger: createLogger('silent'),
      auditTrail: createAuditTrail(booted.database),
    });
    client = new Hl7Client({ host: '127.0.0.1', port: server.port });
    db = openKysely(oe.url);
  });
  after(async () => {
    await client?.close();
    await server?.stop();
    await app?.close();
    await db?.destroy();
    await booted?.database.close();
    await oe?.drop();
    if (filesDir !== undefined) await rm(filesDir, { recursive: true, force: true });
  });

  it('keeps an AE, lists it with its reason, and applies its correction (AA, patient created)', async () => {
    const controlId = `OE-${process.pid}-${Date.now()}`;
    const text = a28(controlId, '19700231');
    const ack = await client.sendAndWait(Hl7Message.parse(text), { timeoutMs: 20_000 });
    assert.equal(ack.getSegment('MSA')?.getField(1)?.toString(), 'AE');
    const row = async () =>
      await db
        .selectFrom('cra_hl7_message')
        .select(['id', 'ack_code', 'message_text', 'patient_id'])
        .where('control_id', '=', controlId)
        .executeTakeFirst();
    const failed = await row();
    assert.equal(failed?.ack_code, 'AE');
    assert.equal(failed.message_text, text);

    const target = { request: (p: string, init?: RequestInit) => fetch(`${baseUrl}${p}`, init) };
    const browser = new ConsoleClient(target as unknown as TestApp);
    assert.equal(
      (await browser.signIn({ username: 'clinician', password: 'clinician-password' })).status,
      303,
    );
    const list = await (await browser.get('/console/pas-messages?outcome=AE')).text();
    assert.match(list, /PID-7\.1 is not a date of the calendar: &#39;19700231&#39;/);
    assert.ok(list.includes(controlId));

    const page = await (await browser.get(`/console/pas-messages/${failed.id}`)).text();
    const action = `/console/pas-messages/${failed.id}/reapply`;
    const version = /name="version" value="([^"]*)"/.exec(
      page.slice(page.indexOf(`action="${action}"`)),
    )![1]!;
    const applied = await browser.post(action, {
      _csrf: csrfOf(page, action),
      version,
      message_text: text.replace('19700231', '19700213'),
    });
    assert.equal(applied.status, 303);
    const now = await row();
    assert.equal(now?.ack_code, 'AA');
    assert.equal(now.message_text, null);
    const patient = await db
      .selectFrom('patient')
      .select(sql<string>`date_format(dob, '%Y-%m-%d')`.as('dob'))
      .where('id', '=', now.patient_id)
      .executeTakeFirst();
    assert.equal(patient?.dob, '1970-02-13');
  });
});
