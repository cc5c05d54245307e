import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ConfigError, loadConfig } from '../../config.ts';
import { createInstitution, createPatient, createUser, unique } from '../../../test/factories.ts';
import type { TestUser } from '../../../test/factories.ts';
import { addIdentifier, createIdentifierType } from '../../../test/factories-patient.ts';
import { executionsOf, routinesOf, submitToQueue } from '../../../test/factories-queue.ts';
import { ConsoleClient, createOperator } from '../../../test/factories-console.ts';
import type { DeviceObjectOptions, DevicePatient } from '../../../test/device-objects.ts';
import {
  ENCAPSULATED_PDF,
  OPHTHALMIC_PHOTOGRAPHY_8_BIT,
  SECONDARY_CAPTURE,
  VISUAL_FIELD_MEASUREMENTS,
  buildDeviceObject,
  humphreyPrivateLines,
  visualFieldGlobalLines,
} from '../../../test/device-objects.ts';
import { newUid } from '../../../test/dicom-instances.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import { closeDicomPools } from '../dicom/index.ts';
import type { QueueEngine } from '../request-queue/index.ts';
import { createQueueEngine } from '../request-queue/index.ts';
import { defaultRoutineCatalog } from '../filing/index.ts';
import { eventDateOf, lateralityOf, storedEventDate } from './device-header.ts';
import { chooseProfile, fallbackProfile } from './profiles.ts';
import type { DeviceTables } from './tables.ts';

const LEFT = '8966001';
const RIGHT = '18944008';

/** A site file that files an unknown scanner as topography and Optos photographs as colour photographs. */
const SITE_PROFILES = {
  profiles: [
    {
      name: 'acme-topographer',
      match: { manufacturer: 'Acme Vision', modality: 'OT' },
      subtype: 'Topography Images',
      attachmentType: 'Topography Images',
      extraction: 'image',
      reader: 'none',
      filer: 'generic',
    },
    {
      name: 'optos',
      match: { manufacturer: 'OPTOS' },
      subtype: 'Clinical Photograph Colour',
      attachmentType: 'Clinical Photograph Colour',
      extraction: 'image',
      reader: 'none',
      filer: 'generic',
    },
  ],
};

describe('device profiles', () => {
  const facts = {
    manufacturer: null,
    modality: null,
    model: null,
    sopClassUid: null,
    softwareVersion: null,
    seriesDescription: null,
    content: 'none' as const,
  };
  it('chooses the most specific profile, a prefix of the manufacturer, and falls back by content', () => {
    assert.equal(
      chooseProfile({ ...facts, manufacturer: 'Carl Zeiss Meditec AG', modality: 'OPV' }, []).name,
      'zeiss-humphrey',
    );
    assert.equal(chooseProfile({ ...facts, manufacturer: 'KOWA Company, Ltd.' }, []).name, 'kowa');
    const iolmaster = {
      ...facts,
      manufacturer: 'Carl Zeiss Meditec',
      modality: 'OT',
      model: 'IOLMaster 500',
    };
    assert.equal(chooseProfile(iolmaster, []).name, 'zeiss-iolmaster-500');
    const v75 = chooseProfile({ ...iolmaster, softwareVersion: '7.5.2.0076' }, []);
    assert.deepEqual([v75.name, v75.filer, v75.laterality], ['zeiss-iolmaster-500-v7.5', 'biometry', 'B']);
    assert.equal(
      chooseProfile({ ...facts, manufacturer: 'Nobody', content: 'pdf' }, []).subtype,
      'OCT Images',
    );
    assert.equal(chooseProfile({ ...facts, content: 'image' }, []).subtype, 'Fundus Images');
    const none = chooseProfile({ ...facts, manufacturer: 'Nobody' }, []);
    assert.deepEqual([none.subtype, none.attachmentType, none.filer], [null, 'NONE', 'generic']);
  });

  it('reads the eye from Image Laterality, then Laterality, then the profile, and both when they disagree', () => {
    const profile = fallbackProfile('image');
    assert.deepEqual(lateralityOf({ ImageLaterality: 'R', Laterality: 'L' }, profile).eye, 'B');
    assert.deepEqual(lateralityOf({ ImageLaterality: 'L', Laterality: 'L' }, profile).eye, 'L');
    assert.deepEqual(lateralityOf({ Laterality: 'OD' }, profile).eye, 'R');
    assert.deepEqual(lateralityOf({ ImageLaterality: 'U' }, profile).eye, null);
    assert.deepEqual(lateralityOf({}, { ...profile, laterality: 'B' }).eye, 'B');
  });

  it('dates a device file by acquisition, content, series, then study, as its local wall clock', () => {
    assert.equal(eventDateOf({ AcquisitionDateTime: '20240312101530.123456-0500' }), '2024-03-12 10:15:30');
    assert.equal(eventDateOf({ AcquisitionDateTime: '202403' }), undefined);
    assert.equal(
      eventDateOf({ AcquisitionDate: '20240312', AcquisitionTime: '0915', StudyDate: '20240101' }),
      '2024-03-12 09:15:00',
    );
    assert.equal(eventDateOf({ ContentDate: '20240230', SeriesDate: '20240301' }), '2024-03-01 00:00:00');
    assert.equal(eventDateOf({ StudyDate: '20240101', StudyTime: '235959.9' }), '2024-01-01 23:59:59');
    assert.equal(eventDateOf({ PatientBirthDate: '19600101' }), undefined);
  });

  it("stores the device's wall clock in the site's zone as UTC in the own schema", () => {
    assert.equal(storedEventDate('2024-03-12 10:15:30', 'UTC'), '2024-03-12 10:15:30');
    assert.equal(storedEventDate('2024-03-12 10:15:30', 'Europe/London'), '2024-03-12 10:15:30');
    assert.equal(storedEventDate('2024-07-01 10:00:00', 'Europe/London'), '2024-07-01 09:00:00');
    assert.equal(storedEventDate('2024-07-01 10:00:00', 'Asia/Kolkata'), '2024-07-01 04:30:00');
  });

  it('refuses a bad profiles file at start with every problem listed', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'cra-profiles-'));
    try {
      const file = path.join(dir, 'profiles.json');
      await writeFile(
        file,
        JSON.stringify({
          profiles: [
            { ...SITE_PROFILES.profiles[0], match: {} },
            { ...SITE_PROFILES.profiles[0], filer: 'hfa' },
            { ...SITE_PROFILES.profiles[1], name: 'optos', extraction: 'video' },
          ],
        }),
      );
      assert.throws(
        () => loadConfig({ DEVICE_PROFILES_FILE: file }),
        (error: unknown) =>
          error instanceof ConfigError && error.problems.some((p) => /\/profiles\/2\/extraction/.test(p)),
      );
      await writeFile(
        file,
        JSON.stringify({
          profiles: [
            { ...SITE_PROFILES.profiles[0], match: {} },
            { ...SITE_PROFILES.profiles[0], filer: 'hfa' },
          ],
        }),
      );
      assert.throws(
        () => loadConfig({ DEVICE_PROFILES_FILE: file }),
        (error: unknown) =>
          error instanceof ConfigError &&
          error.problems.some((p) => /profiles\/0 matches every file/.test(p)) &&
          error.problems.some((p) => /profiles\/1 repeats the name "acme-topographer"/.test(p)) &&
          error.problems.some((p) => /profiles\/1: the hfa filer and the hfa reader go together/.test(p)),
      );
      await writeFile(file, '{"profiles": [');
      assert.throws(
        () => loadConfig({ DEVICE_PROFILES_FILE: file }),
        (error: unknown) => error instanceof ConfigError && /is not JSON/.test(error.problems.join()),
      );
      assert.throws(
        () => loadConfig({ DEVICE_PROFILES_FILE: path.join(dir, 'missing.json') }),
        (error: unknown) =>
          error instanceof ConfigError && /cannot be read: ENOENT/.test(error.problems.join()),
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

forEachDialect((dialect) => {
  describe(`device filing through the queue (${dialect})`, () => {
    let app: TestApp;
    let user: TestUser;
    let engine: QueueEngine;
    let profilesDir: string;
    let institutionId: number;
    let typeId: number;

    before(async () => {
      profilesDir = await mkdtemp(path.join(tmpdir(), 'cra-profiles-'));
      const profilesFile = path.join(profilesDir, 'profiles.json');
      await writeFile(profilesFile, JSON.stringify(SITE_PROFILES));
      app = await startTestApp(dialect, {
        env: { TIME_ZONE: 'UTC', DEVICE_PROFILES_FILE: profilesFile, INSTITUTION_CODE: 'DEVHOSP' },
      });
      user = await createUser(app.db);
      engine = createQueueEngine({
        database: app.database,
        config: app.config,
        catalog: defaultRoutineCatalog,
      });
      institutionId = await createInstitution(app.db, { remote_id: 'DEVHOSP' });
      typeId = await createIdentifierType(app.db, { institution_id: institutionId });
      // The biometry filer's routine (its module registers it); here only its name is needed.
      const biometry = await app.db
        .selectFrom('routine_library')
        .select('routine_name')
        .where('routine_name', '=', 'FILE_BIOMETRY')
        .executeTakeFirst();
      if (biometry === undefined) {
        await app.db.insertInto('routine_library').values({ routine_name: 'FILE_BIOMETRY' }).execute();
      }
    });
    after(async () => {
      await closeDicomPools();
      await app.close();
      await rm(profilesDir, { recursive: true, force: true });
    });

    const devices = () => app.db.withTables<DeviceTables>();

    async function newPatient(): Promise<{ patientId: number; patient: DevicePatient }> {
      const id = unique('D').slice(0, 12);
      const created = await createPatient(app.db, { patient: { dob: '1960-05-04', gender: 'M' } });
      await addIdentifier(app.db, created.patientId, typeId, id);
      return { patientId: created.patientId, patient: { id, birthDate: '19600504', sex: 'M' } };
    }

    async function send(bytes: Buffer): Promise<number> {
      const form = new FormData();
      form.append('scan', new Blob([new Uint8Array(bytes)], { type: 'application/dicom' }), 'scan.dcm');
      const response = await submitToQueue(app, user.authorization, {
        query: 'request_type=dicom_request',
        body: form,
      });
      assert.equal(response.status, 200, await response.clone().text());
      return ((await response.json()) as { request_id: number }).request_id;
    }

    async function drain(): Promise<string[]> {
      const ran: string[] = [];
      for (let i = 0; i < 40; i++) {
        const outcome = await engine.step();
        if (outcome.kind !== 'ran') return ran;
        ran.push(`${outcome.routineName}:${outcome.status}`);
      }
      throw new Error(`the queue did not drain: ${ran.join(', ')}`);
    }

    async function fileObject(options: DeviceObjectOptions): Promise<number> {
      const requestId = await send(await buildDeviceObject(options));
      const ran = await drain();
      assert.ok(
        ran.every((r) => r.endsWith(':COMPLETE')),
        ran.join(', '),
      );
      return requestId;
    }

    async function eventsOf(patientId: number) {
      return app.db
        .selectFrom('event as e')
        .innerJoin('episode as ep', 'ep.id', 'e.episode_id')
        .select(['e.id', 'e.event_date', 'e.institution_id', 'e.deleted', 'e.last_modified_date'])
        .where('ep.patient_id', '=', patientId)
        .orderBy('e.id')
        .execute();
    }

    async function attachmentsOf(eventId: number) {
      return app.db
        .selectFrom('event_attachment_item as i')
        .innerJoin('event_attachment_group as g', 'g.id', 'i.event_attachment_group_id')
        .innerJoin('attachment_data as a', 'a.id', 'i.attachment_data_id')
        .select(['a.attachment_mnemonic', 'a.body_site_snomed_type', 'a.attachment_type', 'a.mime_type'])
        .where('g.event_id', '=', eventId)
        .orderBy('a.id')
        .execute();
    }

    async function subtypesOf(eventId: number): Promise<string[]> {
      const rows = await devices()
        .selectFrom('event_subtype_item')
        .select('event_subtype')
        .where('event_id', '=', eventId)
        .execute();
      return rows.map((r) => r.event_subtype);
    }

    async function deviceInformationOf(eventId: number) {
      return devices()
        .selectFrom('et_ophgeneric_device_information')
        .selectAll()
        .where('event_id', '=', eventId)
        .execute();
    }

    /** Everything a re-sent file must leave as it was: the patient's event rows and their elements. */
    async function snapshotOf(patientId: number): Promise<string> {
      const events = await eventsOf(patientId);
      const ids = events.map((e) => e.id);
      const parts: unknown[] = [events];
      for (const eventId of ids) {
        parts.push(
          await attachmentsOf(eventId),
          await subtypesOf(eventId),
          await deviceInformationOf(eventId),
        );
        const elements = await devices()
          .selectFrom('et_ophgeneric_hfa')
          .selectAll()
          .where('event_id', '=', eventId)
          .execute();
        parts.push(elements);
        for (const element of elements) {
          parts.push(
            await devices()
              .selectFrom('ophgeneric_hfa_entry')
              .selectAll()
              .where('element_id', '=', element.id)
              .orderBy('id')
              .execute(),
          );
        }
      }
      parts.push(
        await devices().selectFrom('device_event').selectAll().where('patient_id', '=', patientId).execute(),
      );
      return JSON.stringify(parts);
    }

    const imageProfiles = [
      [
        'Carl Zeiss Meditec',
        'OP',
        'CLARUS 500',
        OPHTHALMIC_PHOTOGRAPHY_8_BIT,
        'Fundus Images',
        'Fundus Images',
      ],
      [
        'Kowa Company, Ltd.',
        'OP',
        'VX-20',
        OPHTHALMIC_PHOTOGRAPHY_8_BIT,
        'Clinical Photograph Colour',
        'Clinical Photograph Colour',
      ],
      ['TOPCON', 'SC', 'Maestro2', SECONDARY_CAPTURE, 'Fundus Images', 'Fundus Images'],
      ['Orion Imaging', 'OP', 'Orion', OPHTHALMIC_PHOTOGRAPHY_8_BIT, 'Fundus Images', 'Fundus Images'],
      ['Quantel Medical', 'US', 'Aviso', SECONDARY_CAPTURE, 'B SCAN Images', 'B SCAN Images'],
      ['Unknown Optics', 'XC', 'Eye-1', SECONDARY_CAPTURE, 'Fundus Images', 'Fundus Images'],
      [
        'Carl Zeiss Meditec',
        'AG',
        'PLEX Elite 9000',
        SECONDARY_CAPTURE,
        'OCTAngiography Report',
        'OCTAngiography Report',
      ],
      [
        'TOPCON',
        'SC',
        'Triton',
        SECONDARY_CAPTURE,
        'Clinical Photograph Colour',
        'Clinical Photograph Colour',
        'COLOR FUNDUS',
      ],
      ['Triton', 'SC', 'DRI OCT Triton', SECONDARY_CAPTURE, 'Fundus Images', 'Fundus Images'],
    ] as const;
    const pdfProfiles = [
      ['Heidelberg Engineering', 'OPT', 'Spectralis', 'OCT Images', 'OCT Images'],
      ['Carl Zeiss Meditec', 'OPT', 'CIRRUS HD-OCT 5000', 'OCT', 'NONE'],
      ['OCULUS Optikgeraete GmbH', 'OT', 'Pentacam', 'Topography Images', 'Topography Images'],
      ['Nobody Medical', 'DOC', 'Reporter', 'OCT Images', 'OCT Images'],
      ['Heidelberg Engineering', 'OP', 'Spectralis', 'OCT Images', 'OCT Images'],
      ['Triton', 'OPT', 'DRI OCT Triton', 'OCT', 'NONE'],
    ] as const;

    for (const [
      manufacturer,
      modality,
      model,
      sopClassUid,
      subtype,
      attachmentType,
      series,
    ] of imageProfiles) {
      it(`files the left and right photographs of a ${manufacturer} ${modality} ${model} study on one ${subtype} event`, async () => {
        const { patientId, patient } = await newPatient();
        const study = newUid();
        const common = {
          sopClassUid,
          studyInstanceUid: study,
          patient,
          modality,
          manufacturer,
          model,
          content: 'image' as const,
          ...(series === undefined ? {} : { seriesDescription: series }),
        };
        await fileObject({ ...common, imageLaterality: 'L', acquisitionDateTime: '20240312101530.25+0100' });
        await fileObject({ ...common, imageLaterality: 'R', acquisitionDateTime: '20240312102000' });
        const events = await eventsOf(patientId);
        assert.equal(events.length, 1, 'one event per study');
        const [event] = events;
        assert.equal(event!.event_date, '2024-03-12 10:15:30', 'the first file acquisition, as local time');
        assert.equal(event!.institution_id, institutionId);
        assert.deepEqual(await subtypesOf(event!.id), [subtype]);
        const images = (await attachmentsOf(event!.id)).filter((a) =>
          a.attachment_mnemonic.startsWith('DICOM_IMAGE_'),
        );
        assert.deepEqual(
          images.map((a) => [a.body_site_snomed_type, a.attachment_type]),
          [
            [LEFT, attachmentType],
            [RIGHT, attachmentType],
          ],
        );
        const [information] = await deviceInformationOf(event!.id);
        assert.equal(information?.manufacturer, manufacturer);
        assert.equal(information?.manufacturer_model_name, model);
        assert.equal(information?.modality, modality);
        assert.equal(information?.study_instance_uid, study);
        assert.equal(information?.image_laterality, 'B', 'both eyes of the study are in');
        assert.equal(information?.operators_name, 'Operator^Olive');
        assert.equal(information?.station_name, 'STATION-7');
        assert.equal(information?.model_version, 'SN-4711');
        const [index] = await devices()
          .selectFrom('device_event')
          .selectAll()
          .where('patient_id', '=', patientId)
          .execute();
        assert.equal(index?.eye_id, 3);
      });
    }

    for (const [manufacturer, modality, model, subtype, attachmentType] of pdfProfiles) {
      it(`files the reports of a ${manufacturer} ${modality} study on one ${subtype} event`, async () => {
        const { patientId, patient } = await newPatient();
        const study = newUid();
        const common = {
          sopClassUid: ENCAPSULATED_PDF,
          studyInstanceUid: study,
          patient,
          modality,
          manufacturer,
          model,
          content: 'pdf' as const,
        };
        await fileObject({ ...common, laterality: 'R', contentDate: '20231201', contentTime: '083000' });
        await fileObject({ ...common, laterality: 'L', contentDate: '20231201', contentTime: '083500' });
        const events = await eventsOf(patientId);
        assert.equal(events.length, 1);
        assert.equal(events[0]!.event_date, '2023-12-01 08:30:00');
        assert.deepEqual(await subtypesOf(events[0]!.id), [subtype]);
        const reports = (await attachmentsOf(events[0]!.id)).filter(
          (a) => a.attachment_mnemonic === 'DICOM_PDF',
        );
        assert.deepEqual(
          reports.map((a) => [a.body_site_snomed_type, a.attachment_type, a.mime_type]),
          [
            [RIGHT, attachmentType, 'application/pdf'],
            [LEFT, attachmentType, 'application/pdf'],
          ],
        );
      });
    }

    it("files Humphrey fields of both eyes on one event with each eye's mean deviation and VFI, and a re-sent file changes nothing", async () => {
      const { patientId, patient } = await newPatient();
      const study = newUid();
      const common = {
        sopClassUid: ENCAPSULATED_PDF,
        studyInstanceUid: study,
        patient,
        modality: 'OPV',
        manufacturer: 'Carl Zeiss Meditec',
        model: 'HFA3 860',
        content: 'pdf' as const,
        // The Humphrey's study date is the print date: the acquisition date-time comes first.
        studyDate: '20240401',
        studyTime: '120000',
      };
      const right = await buildDeviceObject({
        ...common,
        imageLaterality: 'R',
        acquisitionDateTime: '20240320093000',
        extraLines: humphreyPrivateLines({ meanDeviation: '-3.21', vfi: '96' }),
      });
      const rightRequest = await send(right);
      assert.ok((await drain()).every((r) => r.endsWith(':COMPLETE')));
      await fileObject({
        ...common,
        imageLaterality: 'L',
        acquisitionDateTime: '20240320094500',
        extraLines: humphreyPrivateLines({ meanDeviation: '-12.4', vfi: '71' }),
      });
      const events = await eventsOf(patientId);
      assert.equal(events.length, 1);
      const eventId = events[0]!.id;
      assert.equal(events[0]!.event_date, '2024-03-20 09:30:00');
      assert.deepEqual(await subtypesOf(eventId), ['Visual Field Images']);
      const elements = await devices()
        .selectFrom('et_ophgeneric_hfa')
        .selectAll()
        .where('event_id', '=', eventId)
        .execute();
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
        { eye_id: 1, mean_deviation: '-12.4', visual_field_index: '71' },
        { eye_id: 2, mean_deviation: '-3.21', visual_field_index: '96' },
      ]);
      const reports = await attachmentsOf(eventId);
      assert.deepEqual(
        reports
          .filter((a) => a.attachment_mnemonic === 'DICOM_PDF')
          .map((a) => [a.body_site_snomed_type, a.attachment_type]),
        [
          [RIGHT, 'Visual Field Images'],
          [LEFT, 'Visual Field Images'],
        ],
      );

      // The console shows what was filed: the request's profile, eye, event and indices, and the
      // event's attachments under its subtype.
      const operator = await createOperator(app.db);
      const client = new ConsoleClient(app);
      await client.signIn(operator);
      const page = await (await client.get(`/console/requests/${rightRequest}`)).text();
      assert.match(page, /<h2>Device filing<\/h2>/);
      assert.match(page, /<dt>Profile<\/dt><dd>zeiss-humphrey<\/dd>/);
      assert.match(page, /<dt>Eye<\/dt><dd>Right<\/dd>/);
      assert.match(page, new RegExp(`href="/console/attachments\\?event=${eventId}"`));
      assert.match(page, /<td>Right<\/td><td class="num">-3\.21<\/td><td class="num">96<\/td>/);
      assert.match(page, /<td>Left<\/td><td class="num">-12\.4<\/td><td class="num">71<\/td>/);
      const listed = await (await client.get(`/console/attachments?event=${eventId}`)).text();
      assert.match(
        listed,
        new RegExp(`<th scope="rowgroup" colspan="6">Event ${eventId} · [^·]+ · Visual Field Images · `),
      );

      const before = await snapshotOf(patientId);
      const again = await send(right);
      assert.ok((await drain()).every((r) => r.endsWith(':COMPLETE')));
      assert.equal(await snapshotOf(patientId), before, 're-sending the same file changes nothing');
      const attach = (await routinesOf(app.db, again)).find((r) => r.routine_name === 'ATTACH_TO_EVENT');
      const log = (await executionsOf(app.db, attach!.id)).at(-1)?.log_text ?? '';
      assert.match(log, /nothing new to attach/);

      // Another right-eye field of the study with other indices: its PDF is filed, the entry stays.
      const other = await fileObject({
        ...common,
        imageLaterality: 'R',
        acquisitionDateTime: '20240320100000',
        extraLines: humphreyPrivateLines({ meanDeviation: '-5', vfi: '90' }),
      });
      const kept = await devices()
        .selectFrom('ophgeneric_hfa_entry')
        .select(['eye_id', 'mean_deviation', 'visual_field_index'])
        .where('element_id', '=', elements[0]!.id)
        .orderBy('eye_id')
        .execute();
      assert.deepEqual(kept, entries);
      assert.equal((await eventsOf(patientId)).length, 1);
      const otherAttach = (await routinesOf(app.db, other)).find((r) => r.routine_name === 'ATTACH_TO_EVENT');
      assert.match(
        (await executionsOf(app.db, otherAttach!.id)).at(-1)?.log_text ?? '',
        /visual field: eye R already has other indices: left as they are/,
      );
    });

    it("gives a study whose event was deleted a new event, and never joins another patient's study", async () => {
      const first = await newPatient();
      const second = await newPatient();
      const study = newUid();
      const photo = (patient: DevicePatient, eye: string) => ({
        sopClassUid: OPHTHALMIC_PHOTOGRAPHY_8_BIT,
        studyInstanceUid: study,
        patient,
        modality: 'OP',
        manufacturer: 'Kowa',
        imageLaterality: eye,
        studyDate: '20240105',
        content: 'image' as const,
      });
      await fileObject(photo(first.patient, 'L'));
      // The same study UID on another patient's file (a device that reuses UIDs): its own event.
      await fileObject(photo(second.patient, 'R'));
      const [firstEvent] = await eventsOf(first.patientId);
      const [secondEvent] = await eventsOf(second.patientId);
      assert.ok(firstEvent && secondEvent && firstEvent.id !== secondEvent.id);
      await app.db.updateTable('event').set({ deleted: 1 }).where('id', '=', firstEvent.id).execute();
      await fileObject(photo(first.patient, 'R'));
      const events = await eventsOf(first.patientId);
      assert.deepEqual(
        events.map((e) => e.deleted),
        [1, 0],
      );
      const images = (await attachmentsOf(events[1]!.id)).filter((a) =>
        a.attachment_mnemonic.startsWith('DICOM_IMAGE_'),
      );
      assert.deepEqual(
        images.map((a) => a.body_site_snomed_type),
        [RIGHT],
      );
    });

    it("prefers the open episode of DEVICE_FIRM_ID's firm, and opens new episodes for that firm", async () => {
      const firmEngine = createQueueEngine({
        database: app.database,
        config: { ...app.config, deviceFirmId: 5 },
        catalog: defaultRoutineCatalog,
      });
      const photo = (patient: DevicePatient) => ({
        sopClassUid: OPHTHALMIC_PHOTOGRAPHY_8_BIT,
        studyInstanceUid: newUid(),
        patient,
        modality: 'OP',
        manufacturer: 'Kowa',
        imageLaterality: 'R',
        studyDate: '20240305',
        content: 'image' as const,
      });
      const fileWith = async (queue: QueueEngine, patient: DevicePatient) => {
        await send(await buildDeviceObject(photo(patient)));
        for (let i = 0; i < 40; i++) {
          const outcome = await queue.step();
          if (outcome.kind !== 'ran') return;
          assert.equal(outcome.status, 'COMPLETE', outcome.routineName);
        }
      };
      const episodeOfLastEvent = async (patientId: number) => {
        const events = await eventsOf(patientId);
        const row = await app.db
          .selectFrom('event as e')
          .innerJoin('episode as ep', 'ep.id', 'e.episode_id')
          .select(['ep.id', 'ep.firm_id'])
          .where('e.id', '=', events.at(-1)!.id)
          .executeTakeFirstOrThrow();
        return { id: row.id, firmId: row.firm_id };
      };
      // Two open episodes: the configured firm's (older) and another firm's (newer).
      const { patientId, patient } = await newPatient();
      const episode = (firmId: number, startDate: string) =>
        app.db
          .insertInto('episode')
          .values({ patient_id: patientId, firm_id: firmId, start_date: startDate })
          .returning('id')
          .executeTakeFirstOrThrow();
      const ofFirm = await episode(5, '2024-01-01 09:00:00');
      const newer = await episode(9, '2024-02-01 09:00:00');
      await fileWith(firmEngine, patient);
      assert.deepEqual(await episodeOfLastEvent(patientId), { id: ofFirm.id, firmId: 5 });
      // Without the setting: the most recent open episode, whatever its firm.
      await fileWith(engine, patient);
      assert.deepEqual(await episodeOfLastEvent(patientId), { id: newer.id, firmId: 9 });
      // No open episode: a new one for the configured firm (none without the setting).
      const fresh = await newPatient();
      await fileWith(firmEngine, fresh.patient);
      const opened = await episodeOfLastEvent(fresh.patientId);
      assert.equal(opened.firmId, 5);
      const bare = await newPatient();
      await fileWith(engine, bare.patient);
      assert.equal((await episodeOfLastEvent(bare.patientId)).firmId, null);
    });

    it('files a Humphrey PDF whose private block has another creator without indices, and says why', async () => {
      const { patientId, patient } = await newPatient();
      const requestId = await fileObject({
        sopClassUid: ENCAPSULATED_PDF,
        studyInstanceUid: newUid(),
        patient,
        modality: 'OPV',
        manufacturer: 'Carl Zeiss Meditec',
        model: 'HFA3 860',
        imageLaterality: 'L',
        acquisitionDateTime: '20240320093000',
        content: 'pdf',
        extraLines: humphreyPrivateLines({ meanDeviation: '-3.21', vfi: '96' }, 'ACME_PRIVATE'),
      });
      const [event] = await eventsOf(patientId);
      assert.ok(event);
      assert.equal((await attachmentsOf(event.id)).length, 2, 'the PDF and the original are filed');
      assert.equal(
        (
          await devices()
            .selectFrom('et_ophgeneric_hfa')
            .select('id')
            .where('event_id', '=', event.id)
            .execute()
        ).length,
        0,
      );
      const attach = (await routinesOf(app.db, requestId)).find((r) => r.routine_name === 'ATTACH_TO_EVENT');
      assert.match(
        (await executionsOf(app.db, attach!.id)).at(-1)?.log_text ?? '',
        /visual field: not written: no mean deviation and VFI/,
      );
    });

    it('writes the global indices of a standard visual field measurements object', async () => {
      const { patientId, patient } = await newPatient();
      await fileObject({
        sopClassUid: VISUAL_FIELD_MEASUREMENTS,
        studyInstanceUid: newUid(),
        patient,
        modality: 'OPV',
        manufacturer: 'Perimetry Makers',
        model: 'PM-1',
        laterality: 'L',
        studyDate: '20240105',
        content: 'none',
        extraLines: visualFieldGlobalLines({ meanDeviation: -5.5, vfi: 88 }),
      });
      const [event] = await eventsOf(patientId);
      assert.ok(event);
      assert.equal(event.event_date, '2024-01-05 00:00:00');
      const [element] = await devices()
        .selectFrom('et_ophgeneric_hfa')
        .selectAll()
        .where('event_id', '=', event.id)
        .execute();
      assert.equal(element?.eye_id, 1);
      const entries = await devices()
        .selectFrom('ophgeneric_hfa_entry')
        .select(['eye_id', 'mean_deviation', 'visual_field_index'])
        .where('element_id', '=', element.id)
        .execute();
      assert.deepEqual(entries, [{ eye_id: 1, mean_deviation: '-5.5', visual_field_index: '88' }]);
    });

    it('files a device no profile names, and an eye it does not name, without retrying', async () => {
      const { patientId, patient } = await newPatient();
      const requestId = await fileObject({
        sopClassUid: SECONDARY_CAPTURE,
        studyInstanceUid: newUid(),
        patient,
        modality: 'OT',
        manufacturer: 'Nowhere Devices',
        laterality: 'U',
        studyDate: '20220202',
        studyTime: '1405',
        content: 'image',
      });
      const [event] = await eventsOf(patientId);
      assert.ok(event);
      assert.equal(event.event_date, '2022-02-02 14:05:00');
      assert.deepEqual(await subtypesOf(event.id), ['Fundus Images']);
      const images = (await attachmentsOf(event.id)).filter((a) =>
        a.attachment_mnemonic.startsWith('DICOM_IMAGE_'),
      );
      assert.deepEqual(
        images.map((a) => a.body_site_snomed_type),
        [null],
      );
      assert.ok((await routinesOf(app.db, requestId)).every((r) => r.try_count === 1));
      // DICOM_SEED chooses the profile from the header it reads, with no queue step of its own.
      const routines = await routinesOf(app.db, requestId);
      assert.ok(
        routines.every((r) => r.routine_name !== 'DEVICE_PROFILE'),
        routines.map((r) => r.routine_name).join(),
      );
      const seed = routines.find((r) => r.routine_name === 'DICOM_SEED');
      const log = (await executionsOf(app.db, seed!.id)).at(-1)?.log_text ?? '';
      assert.match(log, /profile generic-image/);
      assert.match(log, /eye: none \(no laterality in the file \(none, or U\)\); filed without a body site/);
    });

    it("files a device as the site's profile file says, and a site row replaces a built-in one", async () => {
      const { patientId, patient } = await newPatient();
      await fileObject({
        sopClassUid: SECONDARY_CAPTURE,
        studyInstanceUid: newUid(),
        patient,
        modality: 'OT',
        manufacturer: 'Acme Vision Ltd',
        imageLaterality: 'R',
        studyDate: '20220202',
        content: 'image',
      });
      await fileObject({
        sopClassUid: OPHTHALMIC_PHOTOGRAPHY_8_BIT,
        studyInstanceUid: newUid(),
        patient,
        modality: 'OP',
        manufacturer: 'OPTOS',
        model: 'California',
        imageLaterality: 'L',
        studyDate: '20220203',
        content: 'image',
      });
      const events = await eventsOf(patientId);
      assert.equal(events.length, 2, 'two studies, two events');
      assert.deepEqual(await subtypesOf(events[0]!.id), ['Topography Images']);
      assert.deepEqual(await subtypesOf(events[1]!.id), ['Clinical Photograph Colour']);
    });

    it('refuses a file with no date at all, at once and with the reason', async () => {
      const { patientId, patient } = await newPatient();
      const requestId = await send(
        await buildDeviceObject({
          sopClassUid: OPHTHALMIC_PHOTOGRAPHY_8_BIT,
          studyInstanceUid: newUid(),
          patient,
          modality: 'OP',
          manufacturer: 'Kowa',
          imageLaterality: 'L',
          content: 'image',
        }),
      );
      assert.deepEqual(await drain(), ['DICOM_SEED:FAILED']);
      const seed = (await routinesOf(app.db, requestId)).find((r) => r.routine_name === 'DICOM_SEED');
      assert.equal(seed?.try_count, 1);
      assert.match((await executionsOf(app.db, seed.id)).at(-1)?.log_text ?? '', /no usable date/);
      assert.equal((await eventsOf(patientId)).length, 0);
    });

    it('finishes a request queued with DEVICE_PROFILE pending, as an earlier DICOM_SEED left it', async () => {
      const { patientId, patient } = await newPatient();
      const requestId = await send(
        await buildDeviceObject({
          sopClassUid: OPHTHALMIC_PHOTOGRAPHY_8_BIT,
          studyInstanceUid: newUid(),
          patient,
          modality: 'OP',
          manufacturer: 'Kowa',
          model: 'nonmyd WX3D',
          imageLaterality: 'R',
          acquisitionDateTime: '20240312101530',
          content: 'image',
        }),
      );
      const step = await engine.step();
      assert.ok(step.kind === 'ran' && step.routineName === 'DICOM_SEED' && step.status === 'COMPLETE');
      // What a DICOM_SEED that chained DEVICE_PROFILE left: the header and the dicom_ keys stored, no
      // device_ key, and DEVICE_PROFILE pending where EXTRACT_IMAGE now is.
      const row = await app.db
        .selectFrom('attachment_data')
        .select(['id', 'text_data'])
        .where('request_id', '=', requestId)
        .where('attachment_mnemonic', '=', 'REQUEST_DATA')
        .executeTakeFirstOrThrow();
      const data = JSON.parse(String(row.text_data)) as Record<string, unknown>;
      assert.equal(data.device_profile, 'kowa');
      const seeded = Object.fromEntries(Object.entries(data).filter(([key]) => !key.startsWith('device_')));
      await app.db
        .updateTable('attachment_data')
        .set({ text_data: JSON.stringify(seeded) })
        .where('id', '=', row.id)
        .execute();
      await app.db
        .deleteFrom('request_details')
        .where('request_id', '=', requestId)
        .where(
          'name',
          'in',
          Object.keys(data).filter((key) => key.startsWith('device_')),
        )
        .execute();
      await app.db
        .updateTable('request_routine')
        .set({ routine_name: 'DEVICE_PROFILE' })
        .where('request_id', '=', requestId)
        .where('routine_name', '=', 'EXTRACT_IMAGE')
        .where('status', '=', 'NEW')
        .execute();
      const operator = await createOperator(app.db);
      const client = new ConsoleClient(app);
      await client.signIn(operator);
      const pending = await (await client.get(`/console/requests/${requestId}`)).text();
      assert.doesNotMatch(pending, /<h2>Device filing<\/h2>/, 'no profile recorded yet');

      assert.deepEqual(await drain(), [
        'DEVICE_PROFILE:COMPLETE',
        'EXTRACT_IMAGE:COMPLETE',
        'PATIENT_MATCH:COMPLETE',
        'ATTACH_TO_EVENT:COMPLETE',
        'CLEAN_UP:COMPLETE',
      ]);
      const routines = await routinesOf(app.db, requestId);
      assert.deepEqual(
        routines.map((r) => [r.routine_name, r.status]),
        [
          ['DICOM_SEED', 'COMPLETE'],
          ['DEVICE_PROFILE', 'COMPLETE'],
          ['EXTRACT_IMAGE', 'COMPLETE'],
          ['PATIENT_MATCH', 'COMPLETE'],
          ['ATTACH_TO_EVENT', 'COMPLETE'],
          ['CLEAN_UP', 'COMPLETE'],
        ],
      );
      const profile = routines.find((r) => r.routine_name === 'DEVICE_PROFILE')!;
      assert.match((await executionsOf(app.db, profile.id)).at(-1)?.log_text ?? '', /profile kowa /);
      const [event, ...others] = await eventsOf(patientId);
      assert.ok(event);
      assert.equal(others.length, 0);
      assert.equal(event.event_date, '2024-03-12 10:15:30');
      assert.deepEqual(await subtypesOf(event.id), ['Clinical Photograph Colour']);
      assert.deepEqual(
        (await attachmentsOf(event.id))
          .filter((a) => a.attachment_mnemonic.startsWith('DICOM_IMAGE_'))
          .map((a) => [a.body_site_snomed_type, a.attachment_type]),
        [[RIGHT, 'Clinical Photograph Colour']],
      );
      const page = await (await client.get(`/console/requests/${requestId}`)).text();
      assert.match(page, /<dt>Profile<\/dt><dd>kowa<\/dd>/);
      assert.match(page, /<dt>Eye<\/dt><dd>Right<\/dd>/);
    });

    it("refuses a study UID or visual field model longer than the index's key, never joining another study's event", async () => {
      const { patientId, patient } = await newPatient();
      // Two studies whose UIDs share their first 64 characters: cut to the key's width they were one.
      const stem = `1.2.826.0.1.3680043.9.${'7'.repeat(50)}.`;
      const logs: string[] = [];
      for (const options of [
        { studyInstanceUid: `${stem}${'1'.repeat(30)}`, model: 'HFA3 860' },
        { studyInstanceUid: `${stem}${'2'.repeat(30)}`, model: 'HFA3 860' },
        // A model longer than its key column (LO allows 64 characters): cut, two models were one.
        { studyInstanceUid: newUid(), model: `HFA3 ${'8'.repeat(70)}` },
      ]) {
        const requestId = await send(
          await buildDeviceObject({
            ...options,
            sopClassUid: ENCAPSULATED_PDF,
            patient,
            modality: 'OPV',
            manufacturer: 'Carl Zeiss Meditec',
            imageLaterality: 'R',
            acquisitionDateTime: '20240320093000',
            content: 'pdf',
          }),
        );
        const ran = await drain();
        assert.ok(ran.includes('ATTACH_TO_EVENT:FAILED'), ran.join(', '));
        const routines = await routinesOf(app.db, requestId);
        const routine = routines.find((r) => r.routine_name === 'ATTACH_TO_EVENT');
        assert.ok(routine !== undefined);
        assert.equal(routine.try_count, 1, 'refused at the first try, never retried');
        logs.push((await executionsOf(app.db, routine.id)).at(-1)?.log_text ?? '');
      }
      for (const log of logs.slice(0, 2)) {
        assert.match(
          log,
          /FAILED: refused: device_event\.study_instance_uid would be 103 characters, longer than the column's 64/,
        );
        assert.doesNotMatch(log, new RegExp(stem.replaceAll('.', '\\.')), 'the UID is not logged');
      }
      assert.match(
        logs[2] ?? '',
        /FAILED: refused: device_event\.model would be 75 characters, longer than the column's 64/,
      );
      assert.deepEqual(await eventsOf(patientId), [], 'no event for a refused file');
      assert.deepEqual(
        await devices().selectFrom('device_event').selectAll().where('patient_id', '=', patientId).execute(),
        [],
      );
    });

    it('hands a biometry device to FILE_BIOMETRY instead of filing an OphGeneric event', async () => {
      const { patient } = await newPatient();
      const requestId = await send(
        await buildDeviceObject({
          sopClassUid: ENCAPSULATED_PDF,
          studyInstanceUid: newUid(),
          patient,
          modality: 'OPT',
          manufacturer: 'Carl Zeiss Meditec',
          model: 'IOLMaster 700',
          acquisitionDateTime: '20240320093000',
          content: 'pdf',
        }),
      );
      await drain();
      const names = (await routinesOf(app.db, requestId)).map((r) => r.routine_name);
      // The biometry filer comes straight after the patient match.
      assert.equal(names[names.indexOf('PATIENT_MATCH') + 1], 'FILE_BIOMETRY', names.join());
    });
  });
});
