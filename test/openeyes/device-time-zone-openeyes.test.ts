/**
 * One study's files carry one date on an OpenEyes database too (`test/device-time-zone.test.ts` is the own
 * schema's half): with DATABASE_SCHEMA=openeyes and TIME_ZONE=Pacific/Auckland, against the OpenEyes
 * v6.8-shaped database of this folder and on the account `openeyes grants` prints, an OCT report (a PDF),
 * a photograph (both OphGeneric events) and an IOLMaster 500 object (a Biometry event) of one study, taken
 * at 2024-03-01 10:35:12 local time, go through the queue add endpoint and the worker's routines. OpenEyes
 * stores its server's local time, so every event of the study is dated 2024-03-01 10:35:12 as the device
 * gave it; a path that moved the time to UTC would date its event 13 hours earlier.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import { buildApp } from '../../src/app.ts';
import type { Config } from '../../src/config.ts';
import { loadConfig } from '../../src/config.ts';
import type { Database } from '../../src/db/database.ts';
import { openDatabase } from '../../src/db/database.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import { bootstrap } from '../../src/main/bootstrap.ts';
import { closeDicomPools } from '../../src/modules/dicom/index.ts';
import { defaultRoutineCatalog } from '../../src/modules/filing/index.ts';
import type { QueueEngine } from '../../src/modules/request-queue/index.ts';
import { createQueueEngine } from '../../src/modules/request-queue/index.ts';
import { createAuthenticator } from '../../src/modules/user/index.ts';
import { iolMaster500 } from '../biometry-objects.ts';
import { ENCAPSULATED_PDF, OPHTHALMIC_PHOTOGRAPHY_8_BIT, buildDeviceObject } from '../device-objects.ts';
import { newUid } from '../dicom-instances.ts';
import { basicHeader } from '../factories.ts';
import { runCli } from '../run-cli.ts';
import type { OpenEyesTestDatabase } from './openeyes-database.ts';
import { connectForScripts, createOpenEyesDatabase, openKysely, testMysqlUrl } from './openeyes-database.ts';

const adminUrl = testMysqlUrl();
const skip = adminUrl === undefined ? 'TEST_MYSQL_URL is not set (no MariaDB/MySQL server)' : false;
const API = basicHeader('api', 'api-password');
/** The seed's patient 2: hospital number 0067890, born 1985-06-15, female, no episode. */
const PATIENT = { id: '0067890', birthDate: '19850615', sex: 'F' } as const;
const PATIENT_ID = 2;
/** 2024-03-01 10:35:12 in Auckland, as OpenEyes stores it: that local time. */
const LOCAL_EVENT_DATE = '2024-03-01 10:35:12';

describe("one study's event dates with TIME_ZONE=Pacific/Auckland on an OpenEyes database", { skip }, () => {
  let oe: OpenEyesTestDatabase;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  let admin: Kysely<any>;
  let database: Database;
  let config: Config;
  let app: FastifyInstance;
  let engine: QueueEngine;
  let baseUrl: string;
  let filesDir: string;
  let account: string | undefined;

  before(async () => {
    oe = await createOpenEyesDatabase(adminUrl!);
    admin = openKysely(oe.url);
    filesDir = await mkdtemp(path.join(tmpdir(), 'cra-oe-zone-'));
    const settings = {
      DATABASE_SCHEMA: 'openeyes',
      TIME_ZONE: 'Pacific/Auckland',
      FILES_DIR: filesDir,
      RAW_BODY_LIMIT_BYTES: String(8 * 1024 * 1024),
      SIGN_RATE_LIMIT_PER_MINUTE: '0',
      AUTH_FAILURE_LIMIT_PER_MINUTE: '0',
      WORKER: 'off',
      DEMO_DATA: 'off',
      LOG_LEVEL: 'silent',
    };
    const adminEnv = { ...settings, DATABASE_URL: oe.url };
    const migrating = await openDatabase(loadConfig(adminEnv).database, { poolSize: 1 });
    try {
      await migrateToLatest(migrating);
    } finally {
      await migrating.close();
    }
    account = `cra_oe_${Math.random().toString(36).slice(2, 10)}`;
    const grants = await runCli(adminEnv, ['openeyes', 'grants', `'${account}'@'127.0.0.1'`]);
    assert.equal(grants.status, 0, grants.stderr);
    const connection = await connectForScripts(oe.url);
    try {
      await connection.query(`create user '${account}'@'127.0.0.1' identified by 'service-password'`);
      await connection.query(grants.stdout);
    } finally {
      await connection.end();
    }
    const serviceUrl = new URL(oe.url);
    serviceUrl.username = account;
    serviceUrl.password = 'service-password';
    config = loadConfig({ ...settings, DATABASE_URL: serviceUrl.toString() });
    const booted = await bootstrap(config);
    database = booted.database;
    app = await buildApp({
      config,
      database,
      files: booted.files,
      authenticator: createAuthenticator(database.db, { cacheTtlMs: config.authCacheTtlMs, database }),
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    baseUrl = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    engine = createQueueEngine({ database, config, catalog: defaultRoutineCatalog });
  });

  after(async () => {
    await closeDicomPools();
    await app?.close();
    await database?.close();
    await admin?.destroy();
    if (account !== undefined) {
      const connection = await connectForScripts(oe.url);
      await connection.query(`drop user if exists '${account}'@'127.0.0.1'`).finally(() => connection.end());
    }
    await oe?.drop();
    if (filesDir !== undefined) await rm(filesDir, { recursive: true, force: true });
  });

  async function send(bytes: Buffer): Promise<void> {
    const form = new FormData();
    form.append('scan', new Blob([new Uint8Array(bytes)], { type: 'application/dicom' }), 'scan.dcm');
    const queued = await fetch(`${baseUrl}/api/v1/request/queue/add?request_type=dicom_request`, {
      method: 'POST',
      headers: { authorization: API },
      body: form,
    });
    assert.equal(queued.status, 200, await queued.clone().text());
  }

  async function drain(): Promise<string[]> {
    const ran: string[] = [];
    for (let i = 0; i < 60; i++) {
      const outcome = await engine.step();
      if (outcome.kind !== 'ran') return ran;
      ran.push(`${outcome.routineName}:${outcome.status}`);
    }
    throw new Error(`the queue did not drain: ${ran.join(', ')}`);
  }

  it("dates the study's OphGeneric events and its Biometry event alike, in local time", async () => {
    const studyInstanceUid = newUid();
    const device = {
      studyInstanceUid,
      patient: PATIENT,
      imageLaterality: 'R',
      studyDate: '20240301',
      studyTime: '103512',
    } as const;
    await send(
      await buildDeviceObject({
        ...device,
        sopClassUid: ENCAPSULATED_PDF,
        modality: 'OPT',
        manufacturer: 'Carl Zeiss Meditec',
        model: 'CIRRUS 5000',
        content: 'pdf',
      }),
    );
    await send(
      await buildDeviceObject({
        ...device,
        sopClassUid: OPHTHALMIC_PHOTOGRAPHY_8_BIT,
        modality: 'OP',
        manufacturer: 'Kowa Company, Ltd.',
        model: 'nonmyd WX3D',
        content: 'image',
      }),
    );
    await send(
      await iolMaster500(
        { id: PATIENT.id, dob: PATIENT.birthDate, sex: PATIENT.sex },
        {
          studyUid: studyInstanceUid,
          sopUid: newUid(),
          acquisition: '20240301103512',
          studyDate: '20240301',
          studyTime: '103512',
        },
      ),
    );
    const ran = await drain();
    assert.ok(
      ran.every((r) => r.endsWith(':COMPLETE')),
      ran.join(),
    );
    assert.ok(ran.includes('FILE_BIOMETRY:COMPLETE'), ran.join());

    const deviceEvents = await admin
      .selectFrom('event as e')
      .innerJoin('episode as ep', 'ep.id', 'e.episode_id')
      .select(['e.id', 'e.event_date'])
      .where('ep.patient_id', '=', PATIENT_ID)
      .where('e.deleted', '=', 0)
      .orderBy('e.id')
      .execute();
    assert.equal(deviceEvents.length, 2, 'the report and the photograph each make an OphGeneric event');
    const biometry = await admin
      .selectFrom('ophinbiometry_imported_events as i')
      .innerJoin('event as e', 'e.id', 'i.event_id')
      .select(['e.id', 'e.event_date'])
      .where('i.patient_id', '=', PATIENT_ID)
      .where('i.study_id', '=', studyInstanceUid)
      .execute();
    assert.equal(biometry.length, 1, 'one Biometry event');

    for (const event of [...deviceEvents, ...biometry]) {
      assert.equal(String(event.event_date), LOCAL_EVENT_DATE, `event ${String(event.id)}`);
    }
  });
});
