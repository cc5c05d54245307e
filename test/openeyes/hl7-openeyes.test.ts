/**
 * The HL7 listener on an OpenEyes database (`DATABASE_SCHEMA=openeyes`, MariaDB/MySQL) with the tables
 * OpenEyes's migrations create (schema.sql) and the built-in field map (`PAS` numbers at `LOCAL-1-0`):
 * an A28 creates the patient, an A08 updates it with the previous row kept in `patient_version`, the
 * answers are kept in `cra_hl7_message`, and a control id sent again is answered without a new version.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Hl7Message } from '@medplum/core';
import { Hl7Client } from '@medplum/hl7';
import type { Kysely } from 'kysely';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/logger.ts';
import type { Bootstrapped } from '../../src/main/bootstrap.ts';
import { bootstrap } from '../../src/main/bootstrap.ts';
import { createAuditTrail } from '../../src/modules/audit/index.ts';
import type { Hl7Server } from '../../src/modules/hl7/index.ts';
import { startHl7Server } from '../../src/modules/hl7/index.ts';
import type { OpenEyesTestDatabase } from './openeyes-database.ts';
import { createOpenEyesDatabase, openKysely, testMysqlUrl } from './openeyes-database.ts';

const adminUrl = testMysqlUrl();
const skip = adminUrl === undefined ? 'TEST_MYSQL_URL is not set (no MariaDB/MySQL server)' : false;

const adt = (event: string, controlId: string, surname: string) =>
  [
    `MSH|^~\\&|PAS|RHS|CRA|EYE|20260301120000||ADT^${event}|${controlId}|P|2.4`,
    `PID|1||7650001^^^PAS^MR~4857773456^^^NHS^NH||${surname}^Sam||19700102|M|||2 Test Lane^^Testtown^^TE2 2ST^^H`,
  ].join('\r');

describe('HL7 listener on an OpenEyes database', { skip }, () => {
  let oe: OpenEyesTestDatabase;
  let booted: Bootstrapped;
  let server: Hl7Server;
  let client: Hl7Client;
  let filesDir: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  let db: Kysely<any>;

  before(async () => {
    oe = await createOpenEyesDatabase(adminUrl!);
    filesDir = await mkdtemp(path.join(tmpdir(), 'cra-oe-hl7-'));
    const config = loadConfig({
      DATABASE_URL: oe.url,
      DATABASE_SCHEMA: 'openeyes',
      TIME_ZONE: 'UTC',
      FILES_DIR: filesDir,
      WORKER: 'off',
      DEMO_DATA: 'off',
      LOG_LEVEL: 'silent',
      HL7_PORT: '0',
      HL7_HOST: '127.0.0.1',
      HL7_ALLOWED_SENDERS: 'PAS^RHS@127.0.0.1',
    });
    booted = await bootstrap(config);
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
    await db?.destroy();
    await booted?.database.close();
    await oe?.drop();
    if (filesDir !== undefined) await rm(filesDir, { recursive: true, force: true });
  });

  const ackOf = async (text: string) => {
    const ack = await client.sendAndWait(Hl7Message.parse(text), { timeoutMs: 20_000 });
    return ack.getSegment('MSA')?.getField(1)?.toString();
  };
  const versions = async () =>
    Number(
      (
        await db
          .selectFrom('patient_version')
          .select((eb) => eb.fn.countAll().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );

  it('creates and updates the patient, keeps versions and answers, and applies a control id once', async () => {
    assert.equal(await ackOf(adt('A28', 'OE-1', 'Example')), 'AA');
    assert.equal(await ackOf(adt('A08', 'OE-2', 'Renamed')), 'AA');
    const patient = await db
      .selectFrom('patient_identifier as pi')
      .innerJoin('patient as p', 'p.id', 'pi.patient_id')
      .innerJoin('contact as c', 'c.id', 'p.contact_id')
      .select(['p.id', 'c.last_name', 'p.dob'])
      .where('pi.patient_identifier_type_id', '=', 1)
      .where('pi.value', '=', '7650001')
      .executeTakeFirstOrThrow();
    assert.equal(patient.last_name, 'Renamed');
    assert.equal(patient.dob, '1970-01-02');
    const versionsBefore = await versions();
    assert.ok(versionsBefore >= 1, 'the update kept the previous patient row');
    assert.equal(await ackOf(adt('A08', 'OE-1', 'Example')), 'AA');
    assert.equal(await versions(), versionsBefore, 'the control id sent again wrote nothing');
    const answers = await db
      .selectFrom('cra_hl7_message')
      .select(['sender', 'control_id', 'message_type', 'ack_code'])
      .orderBy('id')
      .execute();
    assert.deepEqual(answers, [
      { sender: 'PAS^RHS', control_id: 'OE-1', message_type: 'ADT^A28', ack_code: 'AA' },
      { sender: 'PAS^RHS', control_id: 'OE-2', message_type: 'ADT^A08', ack_code: 'AA' },
    ]);
  });
});
