/**
 * Every built-in device profile filed with DATABASE_SCHEMA=openeyes, against the OpenEyes v6.8-shaped
 * database of this folder, through the real chain (queue add, then the worker's routines), on the
 * account `openeyes grants` prints. Per profile: the left and the right eye of one study, then the first
 * file again. OpenEyes's own tables must show one OphGeneric event per patient and study (and model where
 * the profile keys on it), dated by the device, with its subtype item, its Device Information, each
 * attachment's body site, the eye both once both eyes are in, the `_version` rows OpenEyes's versioning
 * keeps, and the service's own index `cra_device_event`; a biometry profile makes a Biometry event. Also
 * an unknown manufacturer (filed, never retried) and a site's own profile from DEVICE_PROFILES_FILE.
 *
 * The stored time zone is Asia/Kolkata (UTC+05:30), so that a device date moved to UTC cannot pass.
 */
import assert from 'node:assert/strict';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { Config } from '../../src/config.ts';
import type { Database } from '../../src/db/database.ts';
import { BUILT_IN_PROFILES } from '../../src/modules/device-filing/index.ts';
import type { QueueEngine } from '../../src/modules/request-queue/index.ts';
import { createQueueEngine } from '../../src/modules/request-queue/index.ts';
import { defaultRoutineCatalog } from '../../src/modules/filing/index.ts';
import { ensureEntryIds } from '../../src/modules/worklist/worklist.queries.ts';
import { axialMeasurements, iolCalculation, iolMaster500, iolMaster700Report } from '../biometry-objects.ts';
import type { DeviceObjectOptions } from '../device-objects.ts';
import {
  DEVICE_PROFILE_CASES,
  ENCAPSULATED_PDF,
  OPHTHALMIC_PHOTOGRAPHY_8_BIT,
  SITE_DEVICE_PROFILES,
  buildDeviceObject,
  changeIolMasterRightEyeByHand,
  editDeviceObject,
  modifyDeviceObject,
} from '../device-objects.ts';
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
const BODY_SITE = { L: '8966001', R: '18944008', B: '40638003' } as const;
/** OpenEyes's OphGeneric event type (`Device Information`) in the seed. */
const OPHGENERIC_EVENT_TYPE = 2;

/** A biometry case: the files of one study, and what OpenEyes must show once they are in. */
interface BiometryCase {
  readonly profile: string;
  /** The files of one study, in order. */
  readonly files: (study: { studyUid: string; acquisition: string }) => Promise<Buffer>[];
  /** The measurement element's eye and axial lengths (left, right); undefined for a report alone. */
  readonly measurement?: { readonly eyeId: number; readonly axialLength: readonly [number, number] };
  /** The mnemonic of the reports filed (image or PDF), and the body site of each, in file order. */
  readonly reports?: { readonly mnemonic: string; readonly bodySites: readonly (string | null)[] };
}

const BIOMETRY_PATIENT = { id: PATIENT.id, dob: PATIENT.birthDate, sex: PATIENT.sex } as const;
const BIOMETRY_CASES: readonly BiometryCase[] = [
  {
    // The v7.5 software: its report shows both eyes.
    profile: 'zeiss-iolmaster-500-v7.5',
    files: (study) => [
      iolMaster500(BIOMETRY_PATIENT, { ...study, sopUid: newUid() }, { eyes: ['L'] }),
      iolMaster500(BIOMETRY_PATIENT, { ...study, sopUid: newUid() }, { eyes: ['R'] }),
    ],
    measurement: { eyeId: 3, axialLength: [24.12, 23.45] },
    // The image has the eye of its file's measurements; the right eye's file carries the same image
    // bytes, which are filed once.
    reports: { mnemonic: 'DICOM_IMAGE_1', bodySites: [BODY_SITE.L] },
  },
  {
    profile: 'zeiss-iolmaster-500',
    files: (study) =>
      (['L', 'R'] as const).map(async (eye) =>
        modifyDeviceObject(
          await iolMaster500(BIOMETRY_PATIENT, { ...study, sopUid: newUid() }, { eyes: [eye] }),
          ['(0018,1020)=6.3.0.0031'],
        ),
      ),
    measurement: { eyeId: 3, axialLength: [24.12, 23.45] },
    reports: { mnemonic: 'DICOM_IMAGE_1', bodySites: [BODY_SITE.L] },
  },
  {
    // The report on its own: a Biometry event for the study, with the PDF.
    profile: 'zeiss-iolmaster-700',
    files: (study) => [iolMaster700Report(BIOMETRY_PATIENT, { ...study, sopUid: newUid() })],
    reports: { mnemonic: 'DICOM_PDF', bodySites: [null] },
  },
  {
    profile: 'ophthalmic-axial-measurements',
    files: (study) => [axialMeasurements(BIOMETRY_PATIENT, { ...study, sopUid: newUid() })],
    measurement: { eyeId: 3, axialLength: [24.3, 23.9] },
  },
  {
    profile: 'iol-calculation',
    files: (study) => [iolCalculation(BIOMETRY_PATIENT, { ...study, sopUid: newUid() })],
    measurement: { eyeId: 2, axialLength: [0, 23.1] },
  },
];

describe('device profiles filed on an OpenEyes v6.8-shaped database', { skip }, () => {
  let service: OpenEyesApp | undefined;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  let admin: Kysely<any>;
  let database: Database;
  let config: Config;
  let engine: QueueEngine;
  let baseUrl: string;

  before(async () => {
    service = await startOpenEyesApp(adminUrl!, {
      tempPrefix: 'cra-oe-profiles-',
      // The subtype and attachment type OpenEyes seeds (OphGeneric m191021 and later) that seed.sql lacks.
      prepare: async (oeAdmin) => {
        await sql`insert into event_subtype (event_subtype, dicom_modality_code, icon_name, display_name)
          values ('OCTAngiography Report', 'AG', 'i-ImFFA"', 'OCT Angiography Report')`.execute(oeAdmin);
        await sql`insert into attachment_type (attachment_type, title_full, title_short, title_abbreviated, dicom_modality_code)
          values ('OCTAngiography Report', 'OCTAngiography Report', 'OCTAngiography Report', 'OCTAngiography Report', 'AG')`.execute(
          oeAdmin,
        );
      },
      settings: async (dir) => {
        const profilesFile = path.join(dir, 'profiles.json');
        await writeFile(profilesFile, JSON.stringify(SITE_DEVICE_PROFILES));
        return {
          DATABASE_SCHEMA: 'openeyes',
          TIME_ZONE: 'Asia/Kolkata',
          FILES_DIR: path.join(dir, 'files'),
          DEVICE_PROFILES_FILE: profilesFile,
          RAW_BODY_LIMIT_BYTES: String(8 * 1024 * 1024),
          SIGN_RATE_LIMIT_PER_MINUTE: '0',
          AUTH_FAILURE_LIMIT_PER_MINUTE: '0',
          WORKER: 'off',
          DEMO_DATA: 'off',
          LOG_LEVEL: 'silent',
        };
      },
    });
    ({ admin, database, config, baseUrl } = service);
    engine = createQueueEngine({ database, config, catalog: defaultRoutineCatalog });
  });

  after(() => service?.close());

  /** Queues `bytes` as a `dicom_request` and drains the queue with `queue`; the routines that ran. */
  async function queueAndDrain(
    bytes: Buffer,
    queue: QueueEngine,
  ): Promise<{ requestId: number; ran: string[] }> {
    const form = new FormData();
    form.append('scan', new Blob([new Uint8Array(bytes)], { type: 'application/dicom' }), 'scan.dcm');
    const queued = await fetch(`${baseUrl}/api/v1/request/queue/add?request_type=dicom_request`, {
      method: 'POST',
      headers: { authorization: API },
      body: form,
    });
    assert.equal(queued.status, 200, await queued.clone().text());
    const { request_id: requestId } = (await queued.json()) as { request_id: number };
    const ran: string[] = [];
    for (let i = 0; i < 30; i++) {
      const outcome = await queue.step();
      if (outcome.kind !== 'ran') break;
      ran.push(`${outcome.routineName}:${outcome.status}`);
    }
    await queue.flushCounters();
    return { requestId, ran };
  }

  /** Queues `bytes` as a `dicom_request` and drains the queue; every routine must complete. */
  async function file(bytes: Buffer): Promise<number> {
    const { requestId, ran } = await queueAndDrain(bytes, engine);
    assert.ok(ran.length > 0 && ran.every((r) => r.endsWith(':COMPLETE')), ran.join(', '));
    // Filed at the first try: nothing waits in RETRY as the Java routine table makes unknown devices do.
    const routines = await admin
      .selectFrom('request_routine')
      .select(['routine_name', 'status', 'try_count'])
      .where('request_id', '=', requestId)
      .execute();
    assert.ok(
      routines.every((r) => r.status === 'COMPLETE' && Number(r.try_count) === 1),
      JSON.stringify(routines),
    );
    return requestId;
  }

  /** The profile the request's file was filed with (its REQUEST_DATA). */
  async function profileOf(requestId: number): Promise<unknown> {
    const row = await admin
      .selectFrom('attachment_data')
      .select('text_data')
      .where('request_id', '=', requestId)
      .where('attachment_mnemonic', '=', 'REQUEST_DATA')
      .executeTakeFirstOrThrow();
    return (JSON.parse(String(row.text_data)) as Record<string, unknown>).device_profile;
  }

  const rowsOf = async (table: string, column: string, value: number | string) =>
    (await admin.selectFrom(table).selectAll().where(column, '=', value).orderBy('id').execute()) as Record<
      string,
      unknown
    >[];

  /** The attachments of `eventId` taken from DICOM files (not the originals). */
  async function extractedOf(eventId: number) {
    return admin
      .selectFrom('event_attachment_item as i')
      .innerJoin('event_attachment_group as g', 'g.id', 'i.event_attachment_group_id')
      .innerJoin('attachment_data as a', 'a.id', 'i.attachment_data_id')
      .select([
        'a.attachment_mnemonic',
        'a.body_site_snomed_type',
        'a.attachment_type',
        'a.mime_type',
        'g.element_type_id',
        'i.system_only_managed',
      ])
      .where('g.event_id', '=', eventId)
      .where((eb) =>
        eb.or([
          eb('a.attachment_mnemonic', '=', 'DICOM_PDF'),
          eb('a.attachment_mnemonic', 'like', 'DICOM\\_IMAGE\\_%'),
        ]),
      )
      .orderBy('a.id')
      .execute();
  }

  /** Everything about `eventId` that a re-sent file must leave as it was. */
  async function snapshotOf(eventId: number): Promise<string> {
    const parts: unknown[] = [
      await rowsOf('event', 'id', eventId),
      await rowsOf('event_version', 'id', eventId),
      await rowsOf('event_subtype_item', 'event_id', eventId),
      await rowsOf('et_ophgeneric_device_information', 'event_id', eventId),
      await rowsOf('et_ophgeneric_device_information_version', 'event_id', eventId),
      await rowsOf('et_ophgeneric_attachment', 'event_id', eventId),
      await rowsOf('et_ophgeneric_comments', 'event_id', eventId),
      await rowsOf('et_ophgeneric_hfa', 'event_id', eventId),
      await rowsOf('et_ophgeneric_hfa_version', 'event_id', eventId),
      await rowsOf('event_attachment_group', 'event_id', eventId),
      await rowsOf('cra_device_event', 'event_id', eventId),
      await sql`select x.* from ophgeneric_hfa_entry x join et_ophgeneric_hfa h on h.id = x.element_id
        where h.event_id = ${eventId} order by x.id`.execute(admin),
      await sql`select i.* from event_attachment_item i join event_attachment_group g
        on g.id = i.event_attachment_group_id where g.event_id = ${eventId} order by i.id`.execute(admin),
    ];
    return JSON.stringify(parts);
  }

  it('has a case for every built-in profile', () => {
    const covered = new Set([...DEVICE_PROFILE_CASES, ...BIOMETRY_CASES].map((c) => c.profile));
    assert.deepEqual(
      BUILT_IN_PROFILES.map((p) => p.name).filter((name) => !covered.has(name)),
      [],
    );
  });

  for (const testCase of DEVICE_PROFILE_CASES) {
    it(`files the left and right eye of a study with profile ${testCase.profile} on one OpenEyes event`, async () => {
      const study = newUid();
      const build = (eye: 'L' | 'R', acquired: string) =>
        buildDeviceObject({
          ...testCase.device,
          studyInstanceUid: study,
          patient: PATIENT,
          imageLaterality: eye,
          acquisitionDateTime: acquired,
          ...(testCase.lines === undefined ? {} : { extraLines: testCase.lines[eye] }),
        });
      const left = await build('L', '20240312101530.25+0100');
      const leftRequest = await file(left);
      assert.equal(await profileOf(leftRequest), testCase.profile);
      const rightRequest = await file(await build('R', '20240312102000'));
      assert.equal(await profileOf(rightRequest), testCase.profile);

      // One event for the patient's study, found through the service's index.
      const index = await rowsOf('cra_device_event', 'study_instance_uid', study);
      assert.equal(index.length, 1, JSON.stringify(index));
      assert.equal(index[0]!.patient_id, PATIENT_ID);
      assert.equal(index[0]!.eye_id, 3, 'left and right make both');
      assert.equal(index[0]!.event_subtype, testCase.subtype ?? '');
      assert.equal(
        index[0]!.model,
        ['OPV', 'OPT'].includes(testCase.device.modality) ? testCase.device.model : '',
      );
      const eventId = Number(index[0]!.event_id);
      const [event] = await rowsOf('event', 'id', eventId);
      assert.deepEqual(
        {
          event_type_id: event!.event_type_id,
          event_date: event!.event_date,
          institution_id: event!.institution_id,
          info: event!.info,
          deleted: event!.deleted,
          is_automated: event!.is_automated,
        },
        {
          event_type_id: OPHGENERIC_EVENT_TYPE,
          // The first file's acquisition, the device's local time verbatim (fraction and offset ignored).
          event_date: '2024-03-12 10:15:30',
          institution_id: 1,
          info: null,
          deleted: 0,
          is_automated: 1,
        },
      );
      const [episode] = await rowsOf('episode', 'id', Number(event!.episode_id));
      assert.deepEqual([episode!.patient_id, episode!.deleted, episode!.end_date], [PATIENT_ID, 0, null]);
      const information = await rowsOf('et_ophgeneric_device_information', 'study_instance_uid', study);
      assert.equal(information.length, 1, 'one Device Information for the study');

      assert.deepEqual(
        (await rowsOf('event_subtype_item', 'event_id', eventId)).map((r) => r.event_subtype),
        testCase.subtype === null ? [] : [testCase.subtype],
      );
      const device = information[0]!;
      assert.equal(device.event_id, eventId);
      assert.deepEqual(
        {
          manufacturer: device.manufacturer,
          manufacturer_model_name: device.manufacturer_model_name,
          modality: device.modality,
          software_version: device.software_version,
          series_description: device.series_description,
          laterality: device.laterality,
          image_laterality: device.image_laterality,
          acquisition_date_time: device.acquisition_date_time,
          study_instance_uid: device.study_instance_uid,
          station_name: device.station_name,
          operators_name: device.operators_name,
          study_id: device.study_id,
          series_number: device.series_number,
          instance_number: device.instance_number,
          model_version: device.model_version,
          last_request_id: device.last_request_id,
        },
        {
          manufacturer: testCase.device.manufacturer,
          manufacturer_model_name: testCase.device.model,
          modality: testCase.device.modality,
          software_version: testCase.device.softwareVersions,
          series_description: testCase.device.seriesDescription ?? null,
          laterality: 'B',
          image_laterality: 'B',
          acquisition_date_time: '20240312101530.25+0100',
          study_instance_uid: study,
          station_name: 'STATION-7',
          operators_name: 'Operator^Olive',
          study_id: 'S1',
          series_number: '1',
          instance_number: '1',
          model_version: 'SN-4711',
          last_request_id: leftRequest,
        },
      );
      assert.match(String(device.sop_instance_uid), /^[0-9.]+$/);
      assert.match(String(device.series_instance_uid), /^[0-9.]+$/);
      assert.equal((await rowsOf('et_ophgeneric_attachment', 'event_id', eventId)).length, 1);
      assert.equal((await rowsOf('et_ophgeneric_comments', 'event_id', eventId)).length, 1);

      // Each file's attachment with its eye, under OphGeneric's attachment element.
      const attachments = await extractedOf(eventId);
      const mime = testCase.device.content === 'image' ? 'image/png' : 'application/pdf';
      const extracted = testCase.device.content === 'none' ? [] : [BODY_SITE.L, BODY_SITE.R];
      assert.deepEqual(
        attachments.map((a): unknown[] => [
          a.body_site_snomed_type,
          a.attachment_type,
          a.mime_type,
          a.element_type_id,
        ]),
        extracted.map((site) => [site, testCase.attachmentType, mime, 2]),
      );

      // The rows the second eye changed kept their previous state, as OpenEyes's versioning does; an
      // update never touches the created_* columns.
      const eventVersions = await rowsOf('event_version', 'id', eventId);
      assert.equal(eventVersions.length, 1);
      assert.deepEqual(
        [eventVersions[0]!.created_date, eventVersions[0]!.created_user_id, eventVersions[0]!.event_date],
        [event!.created_date, event!.created_user_id, event!.event_date],
      );
      assert.deepEqual(
        (await rowsOf('et_ophgeneric_device_information_version', 'id', Number(device.id))).map((v) => [
          v.laterality,
          v.image_laterality,
        ]),
        [[null, 'L']],
      );

      const elements = await rowsOf('et_ophgeneric_hfa', 'event_id', eventId);
      if (testCase.hfa === undefined) {
        assert.equal(elements.length, 0);
      } else {
        assert.deepEqual(
          elements.map((e) => e.eye_id),
          [3],
        );
        assert.deepEqual(
          (await rowsOf('et_ophgeneric_hfa_version', 'id', Number(elements[0]!.id))).map((v) => v.eye_id),
          [1],
        );
        const entries = await admin
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

      // The first file again changes nothing.
      const before = await snapshotOf(eventId);
      await file(left);
      assert.equal(await snapshotOf(eventId), before);
      assert.equal((await rowsOf('cra_device_event', 'study_instance_uid', study)).length, 1);
    });
  }

  it('keeps the studies of OPT and OPV devices apart by model, and those of other modalities by study alone', async () => {
    const send = async (modality: string, model: string, eye: 'L' | 'R', study: string) =>
      file(
        await buildDeviceObject({
          sopClassUid: ENCAPSULATED_PDF,
          studyInstanceUid: study,
          patient: PATIENT,
          modality,
          manufacturer: 'Heidelberg Engineering',
          model,
          imageLaterality: eye,
          acquisitionDateTime: '20240501080000',
          content: 'pdf',
        }),
      );
    const oct = newUid();
    await send('OPT', 'Spectralis', 'L', oct);
    await send('OPT', 'Anterion', 'R', oct);
    const octIndex = await rowsOf('cra_device_event', 'study_instance_uid', oct);
    assert.deepEqual(
      octIndex.map((r) => [r.model, r.eye_id]),
      [
        ['Spectralis', 1],
        ['Anterion', 2],
      ],
    );
    assert.notEqual(octIndex[0]!.event_id, octIndex[1]!.event_id);
    const photographs = newUid();
    await send('OP', 'Spectralis', 'L', photographs);
    await send('OP', 'Spectralis HRA', 'R', photographs);
    const photoIndex = await rowsOf('cra_device_event', 'study_instance_uid', photographs);
    assert.deepEqual(
      photoIndex.map((r) => [r.model, r.eye_id]),
      [['', 3]],
    );
  });

  it("gives a study whose event was deleted in OpenEyes a new event, and never joins another patient's study", async () => {
    const study = newUid();
    const photograph = (patient: DeviceObjectOptions['patient'], eye: 'L' | 'R') =>
      buildDeviceObject({
        sopClassUid: OPHTHALMIC_PHOTOGRAPHY_8_BIT,
        studyInstanceUid: study,
        patient,
        modality: 'OP',
        manufacturer: 'Kowa',
        imageLaterality: eye,
        studyDate: '20240105',
        content: 'image',
      });
    await file(await photograph(PATIENT, 'L'));
    // Patient 1 of the seed (0012345, born 1970-01-01, female) with the same study UID.
    await file(await photograph({ id: '0012345', birthDate: '19700101', sex: 'F' }, 'R'));
    const index = await rowsOf('cra_device_event', 'study_instance_uid', study);
    assert.deepEqual(
      index.map((r) => [r.patient_id, r.eye_id]),
      [
        [PATIENT_ID, 1],
        [1, 2],
      ],
    );
    assert.notEqual(index[0]!.event_id, index[1]!.event_id);
    const [otherEvent] = await rowsOf('event', 'id', Number(index[1]!.event_id));
    const [otherEpisode] = await rowsOf('episode', 'id', Number(otherEvent!.episode_id));
    assert.equal(otherEpisode!.patient_id, 1);

    // OpenEyes deletes the first patient's event: the study's next file starts a new one.
    const deletedId = Number(index[0]!.event_id);
    await admin.updateTable('event').set({ deleted: 1 }).where('id', '=', deletedId).execute();
    await file(await photograph(PATIENT, 'R'));
    const [renewed] = await admin
      .selectFrom('cra_device_event')
      .selectAll()
      .where('study_instance_uid', '=', study)
      .where('patient_id', '=', PATIENT_ID)
      .execute();
    assert.ok(renewed !== undefined && Number(renewed.event_id) !== deletedId);
    assert.equal(renewed.eye_id, 2);
    const [deleted] = await rowsOf('event', 'id', deletedId);
    assert.equal(deleted!.deleted, 1, 'the deleted event stays deleted');
    const images = await extractedOf(Number(renewed.event_id));
    assert.deepEqual(
      images.map((a): unknown => a.body_site_snomed_type),
      [BODY_SITE.R],
    );
    assert.equal(
      (await rowsOf('et_ophgeneric_device_information', 'event_id', Number(renewed.event_id))).length,
      1,
    );
  });

  it('files a device file with neither image nor PDF from an unknown manufacturer generically, at once', async () => {
    const study = newUid();
    const requestId = await file(
      await buildDeviceObject({
        sopClassUid: '1.2.840.10008.5.1.4.1.1.66',
        studyInstanceUid: study,
        patient: PATIENT,
        modality: 'OT',
        manufacturer: 'Nowhere Devices',
        laterality: 'R',
        studyDate: '20220202',
        studyTime: '1405',
        content: 'none',
      }),
    );
    assert.equal(await profileOf(requestId), 'generic');
    const [index] = await rowsOf('cra_device_event', 'study_instance_uid', study);
    assert.ok(index !== undefined);
    const [event] = await rowsOf('event', 'id', Number(index.event_id));
    assert.equal(event!.event_date, '2022-02-02 14:05:00');
    assert.equal((await rowsOf('et_ophgeneric_device_information', 'event_id', Number(event!.id))).length, 1);
    // Every filed event has a subtype OpenEyes can title it by: the fallback for what is not an image.
    assert.deepEqual(
      (await rowsOf('event_subtype_item', 'event_id', Number(event!.id))).map((r) => r.event_subtype),
      ['OCT Images'],
    );
    assert.equal(index.event_subtype, 'OCT Images');
  });

  for (const testCase of BIOMETRY_CASES) {
    it(`files the study of profile ${testCase.profile} as one Biometry event`, async () => {
      const study = { studyUid: newUid(), acquisition: '20240301103512' };
      const sent: Buffer[] = [];
      for (const built of testCase.files(study)) {
        const bytes = await built;
        sent.push(bytes);
        assert.equal(await profileOf(await file(bytes)), testCase.profile);
      }
      const imported = await rowsOf('ophinbiometry_imported_events', 'study_id', study.studyUid);
      assert.equal(imported.length, 1, 'one Biometry event for the study');
      assert.equal(imported[0]!.patient_id, PATIENT_ID);
      const eventId = Number(imported[0]!.event_id);
      const [event] = await rowsOf('event', 'id', eventId);
      const [type] = await rowsOf('event_type', 'id', Number(event!.event_type_id));
      assert.equal(type!.class_name, 'OphInBiometry');
      assert.equal(event!.episode_id, null, 'OpenEyes links an imported Biometry event');
      assert.equal(event!.institution_id, 1);
      assert.equal(event!.event_date, '2024-03-01 10:35:12');
      assert.equal(
        (await rowsOf('cra_device_event', 'study_instance_uid', study.studyUid)).length,
        0,
        'no OphGeneric event',
      );
      const measurements = await rowsOf('et_ophinbiometry_measurement', 'event_id', eventId);
      if (testCase.measurement === undefined) {
        assert.equal(measurements.length, 0);
      } else {
        assert.equal(measurements.length, 1);
        assert.equal(measurements[0]!.eye_id, testCase.measurement.eyeId);
        const [left, right] = testCase.measurement.axialLength;
        assert.ok(Math.abs(Number(measurements[0]!.axial_length_left) - left) < 0.005);
        assert.ok(Math.abs(Number(measurements[0]!.axial_length_right) - right) < 0.005);
      }
      const reports = (await extractedOf(eventId)).filter(
        (a) => a.attachment_mnemonic === testCase.reports?.mnemonic,
      );
      assert.deepEqual(
        reports.map((a): unknown[] => [a.body_site_snomed_type, a.attachment_type]),
        (testCase.reports?.bodySites ?? []).map((site) => [site, 'Biometry Report']),
      );
      // The first file again changes nothing.
      const snapshot = async () =>
        JSON.stringify([
          await rowsOf('event', 'id', eventId),
          await rowsOf('et_ophinbiometry_measurement', 'event_id', eventId),
          await rowsOf('et_ophinbiometry_measurement_version', 'event_id', eventId),
          await rowsOf('et_ophinbiometry_iol_ref_values', 'event_id', eventId),
          await rowsOf('ophinbiometry_imported_events', 'event_id', eventId),
          await sql`select i.id from event_attachment_item i join event_attachment_group g
            on g.id = i.event_attachment_group_id where g.event_id = ${eventId} order by i.id`.execute(admin),
        ]);
      const before = await snapshot();
      await file(sent[0]!);
      assert.equal(await snapshot(), before);
    });
  }
  it('keeps the IOL row of measurements later changed by hand inactive beside a new one, with the versions OpenEyes keeps', async () => {
    const study = { studyUid: newUid(), acquisition: '20240302090000' };
    const right = await iolMaster500(BIOMETRY_PATIENT, { ...study, sopUid: newUid() }, { eyes: ['R'] });
    await file(right);
    await file(await iolMaster500(BIOMETRY_PATIENT, { ...study, sopUid: newUid() }, { eyes: ['L'] }));
    const [imported] = await rowsOf('ophinbiometry_imported_events', 'study_id', study.studyUid);
    const eventId = Number(imported!.event_id);
    const [first] = await rowsOf('et_ophinbiometry_iol_ref_values', 'event_id', eventId);
    const changed = await editDeviceObject(right, changeIolMasterRightEyeByHand);
    await file(changed);
    const rows = await rowsOf('et_ophinbiometry_iol_ref_values', 'event_id', eventId);
    assert.deepEqual(
      rows.map((r): unknown[] => [
        r.lens_id,
        r.active,
        JSON.parse((r.iol_ref_values_right as string | null) ?? 'null'),
      ]),
      [
        [first!.lens_id, 0, { IOL: [21, 21.5], REF: [0.31, -0.02] }],
        [rows[1]!.lens_id, 1, null],
        [first!.lens_id, 1, { IOL: [22.5, 21.5], REF: [0.31, -0.02] }],
      ],
    );
    // OpenEyes's versioning: the deactivated row's previous state, and the measurement's.
    assert.deepEqual(
      (await rowsOf('et_ophinbiometry_iol_ref_values_version', 'id', Number(first!.id))).map((v) => v.active),
      [1],
    );
    const [measurement] = await rowsOf('et_ophinbiometry_measurement', 'event_id', eventId);
    assert.ok(Math.abs(Number(measurement!.k1_right) - 43.6) < 0.005, String(measurement!.k1_right));
    const versions = await rowsOf('et_ophinbiometry_measurement_version', 'id', Number(measurement!.id));
    assert.ok(Math.abs(Number(versions.at(-1)!.k1_right) - 43.1) < 0.005, String(versions.at(-1)!.k1_right));

    const before = JSON.stringify([
      await rowsOf('et_ophinbiometry_iol_ref_values', 'event_id', eventId),
      await rowsOf('et_ophinbiometry_iol_ref_values_version', 'event_id', eventId),
      await rowsOf('et_ophinbiometry_measurement_version', 'event_id', eventId),
    ]);
    await file(changed);
    assert.equal(
      JSON.stringify([
        await rowsOf('et_ophinbiometry_iol_ref_values', 'event_id', eventId),
        await rowsOf('et_ophinbiometry_iol_ref_values_version', 'event_id', eventId),
        await rowsOf('et_ophinbiometry_measurement_version', 'event_id', eventId),
      ]),
      before,
    );
  });

  it("files into the open episode of DEVICE_FIRM_ID's subspecialty, and refuses a firm the database lacks", async () => {
    // Firms 20 and 21 share a service subspecialty assignment; 22 is another subspecialty's.
    await sql`insert into firm (id, service_subspecialty_assignment_id, name) values (20, 7, 'Glaucoma A'), (21, 7, 'Glaucoma B'), (22, 8, 'Retina')`.execute(
      admin,
    );
    // Patient 1 (0012345): an older open episode of firm 21 and the newest open one, of firm 22.
    await sql`insert into episode (patient_id, firm_id, start_date, episode_status_id, created_user_id, last_modified_user_id)
      values (1, 21, '2023-06-01 10:00:00', 1, 1, 1), (1, 22, '2025-01-01 10:00:00', 1, 1, 1)`.execute(admin);
    const [ofSubspecialty] = await admin
      .selectFrom('episode')
      .select('id')
      .where('patient_id', '=', 1)
      .where('firm_id', '=', 21)
      .execute();
    const photograph = () =>
      buildDeviceObject({
        sopClassUid: OPHTHALMIC_PHOTOGRAPHY_8_BIT,
        studyInstanceUid: newUid(),
        patient: { id: '0012345', birthDate: '19700101', sex: 'F' },
        modality: 'OP',
        manufacturer: 'Kowa',
        imageLaterality: 'R',
        studyDate: '20240305',
        content: 'image',
      });
    const fileWithFirm = async (firmId: number) =>
      queueAndDrain(
        await photograph(),
        createQueueEngine({
          database,
          config: { ...config, deviceFirmId: firmId },
          catalog: defaultRoutineCatalog,
        }),
      );
    const filed = await fileWithFirm(20);
    assert.ok(
      filed.ran.every((r) => r.endsWith(':COMPLETE')),
      filed.ran.join(', '),
    );
    const [index] = await admin
      .selectFrom('cra_device_event as d')
      .innerJoin('event as e', 'e.id', 'd.event_id')
      .select(['e.episode_id', 'e.firm_id'])
      .where('d.patient_id', '=', 1)
      .orderBy('d.id', 'desc')
      .execute();
    assert.deepEqual([Number(index!.episode_id), Number(index!.firm_id)], [ofSubspecialty!.id, 21]);

    const refused = await fileWithFirm(999);
    assert.equal(refused.ran.at(-1), 'ATTACH_TO_EVENT:FAILED', refused.ran.join(', '));
    const [log] = await admin
      .selectFrom('request_routine_execution as x')
      .innerJoin('request_routine as r', 'r.id', 'x.request_routine_id')
      .select('x.log_text')
      .where('r.request_id', '=', refused.requestId)
      .where('r.routine_name', '=', 'ATTACH_TO_EVENT')
      .execute();
    assert.match(String(log!.log_text), /DEVICE_FIRM_ID 999 is not a firm of this database/);
  });

  it("files a study made for a worklist entry into the open episode of the entry's subspecialty, without the device's PatientID", async () => {
    // Subspecialty 5's service assignment 17 and its firm 30; patient 1's oldest open episode is firm 30's.
    await sql`insert into service_subspecialty_assignment (id, service_id, subspecialty_id) values (17, 1, 5)`.execute(
      admin,
    );
    await sql`insert into firm (id, service_subspecialty_assignment_id, name) values (30, 17, 'Oculoplastics')`.execute(
      admin,
    );
    await sql`insert into episode (patient_id, firm_id, start_date, episode_status_id, created_user_id, last_modified_user_id)
      values (1, 30, '2021-02-01 10:00:00', 1, 1, 1)`.execute(admin);
    const [ofSubspecialty] = await admin
      .selectFrom('episode')
      .select('id')
      .where('patient_id', '=', 1)
      .where('firm_id', '=', 30)
      .execute();
    // A worklist whose definition is shown in subspecialty 5's context, naming no firm.
    const definition = await admin
      .insertInto('worklist_definition')
      .values({
        name: 'Oculoplastics clinic',
        rrule: 'FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR',
        start_time: '08:00:00',
        end_time: '17:00:00',
        active_from: '2024-01-01 00:00:00',
        scheduled: 1,
        display_order: 9,
        patient_identifier_type_id: 1,
      })
      .executeTakeFirstOrThrow();
    const definitionId = Number(definition.insertId);
    await admin
      .insertInto('worklist_definition_display_context')
      .values({ worklist_definition_id: definitionId, subspecialty_id: 5 })
      .execute();
    const worklist = await admin
      .insertInto('worklist')
      .values({
        name: 'Oculoplastics clinic',
        start: '2024-03-05 08:00:00',
        end: '2024-03-05 17:00:00',
        scheduled: 1,
        worklist_definition_id: definitionId,
      })
      .executeTakeFirstOrThrow();
    const booking = await admin
      .insertInto('worklist_patient')
      .values({ worklist_id: Number(worklist.insertId), patient_id: 1, when: '2024-03-05 09:30:00' })
      .executeTakeFirstOrThrow();
    const bookingId = Number(booking.insertId);
    const ids = (await ensureEntryIds(database, [bookingId])).get(bookingId)!;
    const photograph = await buildDeviceObject({
      sopClassUid: OPHTHALMIC_PHOTOGRAPHY_8_BIT,
      studyInstanceUid: ids.studyInstanceUid,
      // The technician picked the patient from the worklist; the device sends no usable number.
      patient: { id: '', birthDate: '', sex: 'F' },
      modality: 'OP',
      manufacturer: 'Kowa',
      imageLaterality: 'R',
      studyDate: '20240305',
      content: 'image',
    });
    const filed = await queueAndDrain(photograph, engine);
    assert.ok(
      filed.ran.every((r) => r.endsWith(':COMPLETE')),
      filed.ran.join(', '),
    );
    const [index] = await admin
      .selectFrom('cra_device_event as d')
      .innerJoin('event as e', 'e.id', 'd.event_id')
      .select(['d.patient_id', 'e.episode_id', 'e.firm_id'])
      .where('d.study_instance_uid', '=', ids.studyInstanceUid)
      .execute();
    assert.deepEqual(
      [Number(index!.patient_id), Number(index!.episode_id), Number(index!.firm_id)],
      [1, ofSubspecialty!.id, 30],
    );
    assert.match(
      await routineLog(filed.requestId, 'PATIENT_MATCH'),
      /through worklist entry \d+ \(by StudyInstanceUID\)/,
    );
  });

  /** The last log of `routine` for `requestId`. */
  async function routineLog(requestId: number, routine: string): Promise<string> {
    const logs = await admin
      .selectFrom('request_routine_execution as x')
      .innerJoin('request_routine as r', 'r.id', 'x.request_routine_id')
      .select('x.log_text')
      .where('r.request_id', '=', requestId)
      .where('r.routine_name', '=', routine)
      .orderBy('x.id')
      .execute();
    return String(logs.at(-1)?.log_text ?? '');
  }

  it("files a UTF-8 header with 4-byte characters into OpenEyes's utf8mb3 Device Information without failing", async () => {
    // The file declares UTF-8 (ISO_IR 192), so its 4-byte characters are read as such; OpenEyes's utf8mb3
    // tables (the request's rows, Device Information) hold U+FFFD in their place. The dump is written as
    // Latin-1, so each UTF-8 byte is written as one character of it.
    const utf8 = (text: string) => Buffer.from(text, 'utf8').toString('latin1');
    const bytes = await editDeviceObject(
      await buildDeviceObject({
        sopClassUid: ENCAPSULATED_PDF,
        studyInstanceUid: newUid(),
        patient: { id: PATIENT.id, birthDate: PATIENT.birthDate, sex: PATIENT.sex },
        modality: 'OPV',
        manufacturer: 'Carl Zeiss Meditec',
        model: 'HFA3 860',
        seriesDescription: 'SERIESDESCRIPTIONMARK',
        imageLaterality: 'L',
        acquisitionDateTime: '20240306093000',
        content: 'pdf',
      }),
      (dump) =>
        dump
          .replace(/\(0008,0005\) CS \[ISO_IR 100\]/, '(0008,0005) CS [ISO_IR 192]')
          .replace(/\(0008,1010\) SH \[STATION-7\]/, `(0008,1010) SH [${utf8('Room \u{1F441} 7')}]`)
          .replace(/\[SERIESDESCRIPTIONMARK\]/, `[${utf8('Field \u{1F600}\u{1F600} 24-2')}]`),
    );
    const requestId = await file(bytes);
    const row = await admin
      .selectFrom('attachment_data')
      .select('text_data')
      .where('request_id', '=', requestId)
      .where('attachment_mnemonic', '=', 'REQUEST_DATA')
      .executeTakeFirstOrThrow();
    const eventId = (JSON.parse(String(row.text_data)) as { event_id: number }).event_id;
    const information = await admin
      .selectFrom('et_ophgeneric_device_information')
      .select(['station_name', 'series_description'])
      .where('event_id', '=', eventId)
      .executeTakeFirstOrThrow();
    assert.equal(information.station_name, 'Room \uFFFD 7');
    assert.equal(information.series_description, 'Field \uFFFD\uFFFD 24-2');
  });

  it("refuses a study UID longer than cra_device_event's key at the first try, never filing it on another study's event", async () => {
    const stem = `1.2.826.0.1.3680043.9.${'7'.repeat(50)}.`;
    const countOf = async (table: string) =>
      Number(
        (await sql<{ n: number }>`select count(*) as n from ${sql.table(table)}`.execute(admin)).rows[0]!.n,
      );
    const before = await Promise.all(['event', 'cra_device_event'].map(countOf));
    for (const last of ['1', '2']) {
      const { requestId, ran } = await queueAndDrain(
        await buildDeviceObject({
          sopClassUid: ENCAPSULATED_PDF,
          studyInstanceUid: `${stem}${last.repeat(30)}`,
          patient: { id: PATIENT.id, birthDate: PATIENT.birthDate, sex: PATIENT.sex },
          modality: 'OPV',
          manufacturer: 'Carl Zeiss Meditec',
          model: 'HFA3 860',
          imageLaterality: 'R',
          acquisitionDateTime: '20240307093000',
          content: 'pdf',
        }),
        engine,
      );
      assert.equal(ran.at(-1), 'ATTACH_TO_EVENT:FAILED', ran.join(', '));
      assert.match(
        await routineLog(requestId, 'ATTACH_TO_EVENT'),
        /FAILED: refused: device_event\.study_instance_uid would be 103 characters, longer than the column's 64/,
      );
    }
    assert.deepEqual(await Promise.all(['event', 'cra_device_event'].map(countOf)), before);
  });
});
