/**
 * Every built-in OphGeneric device profile (the table of test/device-objects.ts, shared with the
 * OpenEyes-mode test) filed in the own schema on each database: the left and the right eye of one study
 * through the queue, then the first file again. Biometry profiles are covered by test/device-biometry.test.ts.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createInstitution, createPatient, createUser, unique } from '../../../test/factories.ts';
import type { TestUser } from '../../../test/factories.ts';
import { addIdentifier, createIdentifierType } from '../../../test/factories-patient.ts';
import { routinesOf, submitToQueue } from '../../../test/factories-queue.ts';
import type { DevicePatient } from '../../../test/device-objects.ts';
import {
  DEVICE_PROFILE_CASES,
  SITE_DEVICE_PROFILES,
  buildDeviceObject,
} from '../../../test/device-objects.ts';
import { newUid } from '../../../test/dicom-instances.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import { closeDicomPools } from '../dicom/index.ts';
import type { QueueEngine } from '../request-queue/index.ts';
import { createQueueEngine } from '../request-queue/index.ts';
import { defaultRoutineCatalog } from '../filing/index.ts';
import type { DeviceTables } from './tables.ts';

const BODY_SITE = { L: '8966001', R: '18944008' } as const;

forEachDialect((dialect) => {
  describe(`every device profile filed in the own schema (${dialect})`, () => {
    let app: TestApp;
    let user: TestUser;
    let engine: QueueEngine;
    let profilesDir: string;
    let institutionId: number;
    let typeId: number;

    before(async () => {
      profilesDir = await mkdtemp(path.join(tmpdir(), 'cra-profiles-'));
      const profilesFile = path.join(profilesDir, 'profiles.json');
      await writeFile(profilesFile, JSON.stringify(SITE_DEVICE_PROFILES));
      app = await startTestApp(dialect, {
        env: { TIME_ZONE: 'UTC', DEVICE_PROFILES_FILE: profilesFile, INSTITUTION_CODE: 'PROFHOSP' },
      });
      user = await createUser(app.db);
      engine = createQueueEngine({
        database: app.database,
        config: app.config,
        catalog: defaultRoutineCatalog,
      });
      institutionId = await createInstitution(app.db, { remote_id: 'PROFHOSP' });
      typeId = await createIdentifierType(app.db, { institution_id: institutionId });
    });
    after(async () => {
      await closeDicomPools();
      await app.close();
      await rm(profilesDir, { recursive: true, force: true });
    });

    const devices = () => app.db.withTables<DeviceTables>();

    async function newPatient(): Promise<{ patientId: number; patient: DevicePatient }> {
      const id = unique('P').slice(0, 12);
      const created = await createPatient(app.db, { patient: { dob: '1960-05-04', gender: 'M' } });
      await addIdentifier(app.db, created.patientId, typeId, id);
      return { patientId: created.patientId, patient: { id, birthDate: '19600504', sex: 'M' } };
    }

    /** Queues `bytes` and drains the queue: every routine completes at its first try. */
    async function file(bytes: Buffer): Promise<number> {
      const form = new FormData();
      form.append('scan', new Blob([new Uint8Array(bytes)], { type: 'application/dicom' }), 'scan.dcm');
      const response = await submitToQueue(app, user.authorization, {
        query: 'request_type=dicom_request',
        body: form,
      });
      assert.equal(response.status, 200, await response.clone().text());
      const requestId = ((await response.json()) as { request_id: number }).request_id;
      const ran: string[] = [];
      for (let i = 0; i < 40; i++) {
        const outcome = await engine.step();
        if (outcome.kind !== 'ran') break;
        ran.push(`${outcome.routineName}:${outcome.status}`);
      }
      assert.ok(ran.length > 0 && ran.every((r) => r.endsWith(':COMPLETE')), ran.join(', '));
      const routines = await routinesOf(app.db, requestId);
      assert.ok(
        routines.every((r) => r.try_count === 1),
        JSON.stringify(routines.map((r) => [r.routine_name, r.try_count])),
      );
      return requestId;
    }

    async function attachmentsOf(eventId: number) {
      return app.db
        .selectFrom('event_attachment_item as i')
        .innerJoin('event_attachment_group as g', 'g.id', 'i.event_attachment_group_id')
        .innerJoin('attachment_data as a', 'a.id', 'i.attachment_data_id')
        .select([
          'a.id',
          'a.attachment_mnemonic',
          'a.body_site_snomed_type',
          'a.attachment_type',
          'a.mime_type',
        ])
        .where('g.event_id', '=', eventId)
        .orderBy('a.id')
        .execute();
    }

    /** Everything of the study's event that a re-sent file must leave as it was. */
    async function snapshotOf(eventId: number): Promise<string> {
      const hfa = await devices()
        .selectFrom('et_ophgeneric_hfa')
        .selectAll()
        .where('event_id', '=', eventId)
        .execute();
      return JSON.stringify([
        await app.db.selectFrom('event').selectAll().where('id', '=', eventId).execute(),
        await devices()
          .selectFrom('event_subtype_item')
          .selectAll()
          .where('event_id', '=', eventId)
          .execute(),
        await devices()
          .selectFrom('et_ophgeneric_device_information')
          .selectAll()
          .where('event_id', '=', eventId)
          .execute(),
        hfa,
        hfa.length === 0
          ? []
          : await devices()
              .selectFrom('ophgeneric_hfa_entry')
              .selectAll()
              .where(
                'element_id',
                'in',
                hfa.map((h) => h.id),
              )
              .orderBy('id')
              .execute(),
        await attachmentsOf(eventId),
        await devices().selectFrom('device_event').selectAll().where('event_id', '=', eventId).execute(),
      ]);
    }

    for (const testCase of DEVICE_PROFILE_CASES) {
      it(`files the left and right eye of a study with profile ${testCase.profile} on one event`, async () => {
        const { patientId, patient } = await newPatient();
        const study = newUid();
        const build = (eye: 'L' | 'R', acquired: string) =>
          buildDeviceObject({
            ...testCase.device,
            studyInstanceUid: study,
            patient,
            imageLaterality: eye,
            acquisitionDateTime: acquired,
            ...(testCase.lines === undefined ? {} : { extraLines: testCase.lines[eye] }),
          });
        const left = await build('L', '20240312101530.25+0100');
        await file(left);
        await file(await build('R', '20240312102000'));

        const index = await devices()
          .selectFrom('device_event')
          .selectAll()
          .where('patient_id', '=', patientId)
          .execute();
        assert.equal(index.length, 1, 'one event for the study');
        assert.deepEqual(
          [index[0]!.study_instance_uid, index[0]!.event_subtype, index[0]!.eye_id],
          [study, testCase.subtype, 3],
        );
        const eventId = index[0]!.event_id;
        const event = await app.db
          .selectFrom('event')
          .selectAll()
          .where('id', '=', eventId)
          .executeTakeFirstOrThrow();
        assert.equal(String(event.event_date).replace('T', ' ').slice(0, 19), '2024-03-12 10:15:30');
        assert.equal(event.institution_id, institutionId);
        const subtypes = await devices()
          .selectFrom('event_subtype_item')
          .select('event_subtype')
          .where('event_id', '=', eventId)
          .execute();
        assert.deepEqual(
          subtypes.map((s) => s.event_subtype),
          [testCase.subtype],
        );
        const information = await devices()
          .selectFrom('et_ophgeneric_device_information')
          .selectAll()
          .where('event_id', '=', eventId)
          .execute();
        assert.equal(information.length, 1);
        assert.deepEqual(
          [
            information[0]!.manufacturer,
            information[0]!.manufacturer_model_name,
            information[0]!.modality,
            information[0]!.software_version,
            information[0]!.study_instance_uid,
            information[0]!.laterality,
            information[0]!.image_laterality,
          ],
          [
            testCase.device.manufacturer,
            testCase.device.model,
            testCase.device.modality,
            testCase.device.softwareVersions,
            study,
            'B',
            'B',
          ],
        );
        const extracted = (await attachmentsOf(eventId)).filter(
          (a) => a.attachment_mnemonic === 'DICOM_PDF' || a.attachment_mnemonic.startsWith('DICOM_IMAGE_'),
        );
        const mime = testCase.device.content === 'image' ? 'image/png' : 'application/pdf';
        assert.deepEqual(
          extracted.map((a) => [a.body_site_snomed_type, a.attachment_type, a.mime_type]),
          (testCase.device.content === 'none' ? [] : [BODY_SITE.L, BODY_SITE.R]).map((site) => [
            site,
            testCase.attachmentType,
            mime,
          ]),
        );
        const elements = await devices()
          .selectFrom('et_ophgeneric_hfa')
          .selectAll()
          .where('event_id', '=', eventId)
          .execute();
        if (testCase.hfa === undefined) {
          assert.equal(elements.length, 0);
        } else {
          assert.deepEqual(
            elements.map((e) => e.eye_id),
            [3],
          );
          const entries = await devices()
            .selectFrom('ophgeneric_hfa_entry')
            .select(['eye_id', 'mean_deviation', 'visual_field_index'])
            .where('element_id', '=', elements[0]!.id)
            .orderBy('eye_id')
            .execute();
          assert.deepEqual(entries, [
            { eye_id: 1, mean_deviation: testCase.hfa.L[0], visual_field_index: testCase.hfa.L[1] },
            { eye_id: 2, mean_deviation: testCase.hfa.R[0], visual_field_index: testCase.hfa.R[1] },
          ]);
        }

        const before = await snapshotOf(eventId);
        await file(left);
        assert.equal(await snapshotOf(eventId), before, 're-sending a file changes nothing');
      });
    }

    it('gives a file with neither image nor PDF from an unknown device the fallback subtype', async () => {
      const { patientId, patient } = await newPatient();
      await file(
        await buildDeviceObject({
          sopClassUid: '1.2.840.10008.5.1.4.1.1.66',
          studyInstanceUid: newUid(),
          patient,
          modality: 'OT',
          manufacturer: 'Nowhere Devices',
          laterality: 'R',
          studyDate: '20220202',
          content: 'none',
        }),
      );
      const [index] = await devices()
        .selectFrom('device_event')
        .selectAll()
        .where('patient_id', '=', patientId)
        .execute();
      assert.ok(index !== undefined);
      const subtypes = await devices()
        .selectFrom('event_subtype_item')
        .select('event_subtype')
        .where('event_id', '=', index.event_id)
        .execute();
      assert.deepEqual(
        subtypes.map((s) => s.event_subtype),
        ['OCT Images'],
      );
    });
  });
});
