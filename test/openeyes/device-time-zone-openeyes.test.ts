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
import { after, before, describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { defaultRoutineCatalog } from '../../src/modules/filing/index.ts';
import type { QueueEngine } from '../../src/modules/request-queue/index.ts';
import { createQueueEngine } from '../../src/modules/request-queue/index.ts';
import { iolMaster500 } from '../biometry-objects.ts';
import { ENCAPSULATED_PDF, OPHTHALMIC_PHOTOGRAPHY_8_BIT, buildDeviceObject } from '../device-objects.ts';
import { newUid } from '../dicom-instances.ts';
import { basicHeader } from '../factories.ts';
import type { OpenEyesApp } from './openeyes-app.ts';
import { startOpenEyesApp } from './openeyes-app.ts';
import { testMysqlUrl } from './openeyes-database.ts';

const adminUrl = testMysqlUrl();
const skip = adminUrl === undefined ? 'TEST_MYSQL_URL is not set (no MariaDB/MySQL server)' : false;
const API = basicHeader('api', 'api-password');
/** The seed's patient 2: hospital number 0067890, born 1985-06-15, female, no episode. */
const PATIENT = { id: '0067890', birthDate: '19850615', sex: 'F' } as const;
const PATIENT_ID = 2;
/** 2024-03-01 10:35:12 in Auckland, as OpenEyes stores it: that local time. */
const LOCAL_EVENT_DATE = '2024-03-01 10:35:12';

describe("one study's event dates with TIME_ZONE=Pacific/Auckland on an OpenEyes database", { skip }, () => {
  let service: OpenEyesApp | undefined;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  let admin: Kysely<any>;
  let engine: QueueEngine;
  let baseUrl: string;

  before(async () => {
    service = await startOpenEyesApp(adminUrl!, {
      tempPrefix: 'cra-oe-zone-',
      settings: () => ({
        DATABASE_SCHEMA: 'openeyes',
        TIME_ZONE: 'Pacific/Auckland',
        RAW_BODY_LIMIT_BYTES: String(8 * 1024 * 1024),
        SIGN_RATE_LIMIT_PER_MINUTE: '0',
        AUTH_FAILURE_LIMIT_PER_MINUTE: '0',
        WORKER: 'off',
        DEMO_DATA: 'off',
        LOG_LEVEL: 'silent',
      }),
    });
    ({ admin, baseUrl } = service);
    engine = createQueueEngine({
      database: service.database,
      config: service.config,
      catalog: defaultRoutineCatalog,
    });
  });

  after(() => service?.close());

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
