/**
 * One study's files carry one date whatever files them: with the site's zone (`TIME_ZONE`) far from UTC
 * (Pacific/Auckland, UTC+13 in March), an OCT report (a PDF), a photograph (both device events) and an
 * IOLMaster 500 object (a Biometry event) of one study, all taken at 2024-03-01 10:35:12 local time,
 * are sent through the queue add endpoint and the worker's routines on every dialect. The own schema
 * stores UTC, so every event of the study is dated 2024-02-29 21:35:12; a path that stored the device's
 * wall-clock time as it is would date its event 13 hours later. The OpenEyes schema's half of this test,
 * which stores local time, is `openeyes/device-time-zone-openeyes.test.ts`.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { iolMaster500 } from './biometry-objects.ts';
import type { DevicePatient } from './device-objects.ts';
import { ENCAPSULATED_PDF, OPHTHALMIC_PHOTOGRAPHY_8_BIT, buildDeviceObject } from './device-objects.ts';
import { newUid } from './dicom-instances.ts';
import type { TestUser } from './factories.ts';
import { createInstitution, createPatient, createUser, unique } from './factories.ts';
import { addIdentifier, createIdentifierType } from './factories-patient.ts';
import { submitToQueue } from './factories-queue.ts';
import type { TestApp } from './harness.ts';
import { forEachDialect, startTestApp } from './harness.ts';
import { closeDicomPools } from '../src/modules/dicom/index.ts';
import { defaultRoutineCatalog } from '../src/modules/filing/index.ts';
import type { QueueEngine } from '../src/modules/request-queue/index.ts';
import { createQueueEngine } from '../src/modules/request-queue/index.ts';

// The biometry module's tables are outside the service's shared row types.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/** 2024-03-01 10:35:12 in Auckland (NZDT, UTC+13), as the own schema stores it. */
const UTC_EVENT_DATE = '2024-02-29 21:35:12';

forEachDialect((dialect) => {
  describe(`one study's event dates with TIME_ZONE=Pacific/Auckland [${dialect}]`, () => {
    let app: TestApp;
    let user: TestUser;
    let engine: QueueEngine;
    let typeId: number;

    before(async () => {
      app = await startTestApp(dialect, {
        env: { TIME_ZONE: 'Pacific/Auckland', INSTITUTION_CODE: 'ZONEHOSP' },
      });
      user = await createUser(app.db);
      engine = createQueueEngine({
        database: app.database,
        config: app.config,
        catalog: defaultRoutineCatalog,
      });
      const institutionId = await createInstitution(app.db, { remote_id: 'ZONEHOSP' });
      typeId = await createIdentifierType(app.db, { institution_id: institutionId });
    });
    after(async () => {
      await closeDicomPools();
      await app.close();
    });

    async function sendBytes(bytes: Buffer): Promise<void> {
      const form = new FormData();
      form.append('scan', new Blob([new Uint8Array(bytes)], { type: 'application/dicom' }), 'scan.dcm');
      const response = await submitToQueue(app, user.authorization, {
        query: 'request_type=dicom_request',
        body: form,
      });
      assert.equal(response.status, 200, await response.clone().text());
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

    it("dates the study's device events and its Biometry event alike, in UTC", async () => {
      const id = unique('Z').slice(0, 12);
      const { patientId } = await createPatient(app.db, { patient: { dob: '1960-05-04', gender: 'F' } });
      await addIdentifier(app.db, patientId, typeId, id);
      const patient: DevicePatient = { id, birthDate: '19600504', sex: 'F' };
      const studyInstanceUid = newUid();
      const device = {
        studyInstanceUid,
        patient,
        imageLaterality: 'R',
        studyDate: '20240301',
        studyTime: '103512',
      } as const;

      await sendBytes(
        await buildDeviceObject({
          ...device,
          sopClassUid: ENCAPSULATED_PDF,
          modality: 'OPT',
          manufacturer: 'Carl Zeiss Meditec',
          model: 'CIRRUS 5000',
          content: 'pdf',
        }),
      );
      await sendBytes(
        await buildDeviceObject({
          ...device,
          sopClassUid: OPHTHALMIC_PHOTOGRAPHY_8_BIT,
          modality: 'OP',
          manufacturer: 'Kowa Company, Ltd.',
          model: 'nonmyd WX3D',
          content: 'image',
        }),
      );
      await sendBytes(
        await iolMaster500(
          { id, dob: patient.birthDate, sex: patient.sex },
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

      const deviceEvents = await app.db
        .selectFrom('event as e')
        .innerJoin('episode as ep', 'ep.id', 'e.episode_id')
        .select(['e.id', 'e.event_date'])
        .where('ep.patient_id', '=', patientId)
        .where('e.deleted', '=', 0)
        .orderBy('e.id')
        .execute();
      assert.equal(deviceEvents.length, 2, 'the report and the photograph each make a device event');
      const biometry = await (app.db as AnyDb)
        .selectFrom('ophinbiometry_imported_events as i')
        .innerJoin('event as e', 'e.id', 'i.event_id')
        .select(['e.id', 'e.event_date'])
        .where('i.patient_id', '=', patientId)
        .execute();
      assert.equal(biometry.length, 1, 'one Biometry event');

      for (const event of [...deviceEvents, ...biometry]) {
        assert.equal(String(event.event_date), UTC_EVENT_DATE, `event ${event.id}`);
      }
    });
  });
});
