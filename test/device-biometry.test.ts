/**
 * Biometry filing through the DICOM chain (DICOM_SEED -> EXTRACT_IMAGE -> PATIENT_MATCH -> FILE_BIOMETRY
 * -> CLEAN_UP), on every dialect: IOLMaster 500 objects, an IOLMaster 700 report and a standard axial
 * measurements object built with dcmtk, filed as one Biometry event per patient and study in OpenEyes's
 * tables. DICOM_SEED's device profile names `FILE_BIOMETRY` as the filer of these devices; the test also sets
 * `device_filer` in REQUEST_DATA once that routine has run, so that an object no profile calls biometry
 * can be sent down the biometry filer too.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { closeDicomPools } from '../src/modules/dicom/index.ts';
import type { QueueEngine } from '../src/modules/request-queue/index.ts';
import { createQueueEngine } from '../src/modules/request-queue/index.ts';
import { defaultRoutineCatalog } from '../src/modules/filing/index.ts';
import type { PatientTags, StudyTags } from './biometry-objects.ts';
import { axialMeasurements, iolCalculation, iolMaster500, iolMaster700Report } from './biometry-objects.ts';
import { buildInstance, newUid } from './dicom-instances.ts';
import type { TestUser } from './factories.ts';
import { createInstitution, createPatient, createUser } from './factories.ts';
import { addIdentifier, createIdentifierType } from './factories-patient.ts';
import { executionsOf, routinesOf, submitToQueue } from './factories-queue.ts';
import type { TestApp } from './harness.ts';
import { forEachDialect, startTestApp } from './harness.ts';

// Tables outside the service's shared row types (the biometry module's own).
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

const near = (actual: unknown, expected: number, label: string) =>
  assert.ok(Math.abs(Number(actual) - expected) < 0.005, `${label}: ${String(actual)} is not ${expected}`);

forEachDialect((dialect) => {
  describe(`Biometry filing (${dialect})`, () => {
    let app: TestApp;
    let db: AnyDb;
    let user: TestUser;
    let engine: QueueEngine;
    let typeId: number;

    before(async () => {
      app = await startTestApp(dialect);
      db = app.db as AnyDb;
      user = await createUser(app.db);
      engine = createQueueEngine({
        database: app.database,
        config: app.config,
        catalog: defaultRoutineCatalog,
      });
      const institutionId = await createInstitution(app.db);
      typeId = await createIdentifierType(app.db, { institution_id: institutionId });
    });
    after(async () => {
      await closeDicomPools();
      await app.close();
    });

    async function newPatient(): Promise<{ patientId: number; tags: PatientTags }> {
      const id = `${Math.floor(Math.random() * 9_000_000) + 1_000_000}`;
      const patient = await createPatient(app.db, { patient: { dob: '1960-01-02', gender: 'F' } });
      await addIdentifier(app.db, patient.patientId, typeId, id);
      return { patientId: patient.patientId, tags: { id, dob: '19600102', sex: 'F' } };
    }

    function newStudy(): StudyTags {
      return {
        studyUid: newUid(),
        sopUid: newUid(),
        acquisition: '20240301103512.123456+0100',
        contentDate: '20240301',
        contentTime: '103000',
        studyDate: '20240229',
        studyTime: '090000',
      };
    }

    /**
     * Queues `bytes`, runs DICOM_SEED (which chooses the device profile), marks the request for the
     * biometry filer, and drains the queue.
     */
    async function file(bytes: Buffer): Promise<{ requestId: number; ran: string[] }> {
      const form = new FormData();
      form.append('scan', new Blob([new Uint8Array(bytes)], { type: 'application/dicom' }), 'scan.dcm');
      const response = await submitToQueue(app, user.authorization, {
        query: 'request_type=dicom_request',
        body: form,
      });
      assert.equal(response.status, 200, await response.clone().text());
      const { request_id: requestId } = (await response.json()) as { request_id: number };
      const ran: string[] = [];
      for (const expected of ['DICOM_SEED']) {
        const step = await engine.step();
        assert.ok(step.kind === 'ran' && step.routineName === expected, `${expected} ran`);
        ran.push(`${step.routineName}:${step.status}`);
        if (step.status !== 'COMPLETE') {
          const routine = (await routinesOf(app.db, requestId)).find((r) => r.routine_name === expected)!;
          ran.push((await executionsOf(app.db, routine.id)).at(-1)?.log_text ?? '');
          return { requestId, ran };
        }
      }
      const row = await db
        .selectFrom('attachment_data')
        .select(['id', 'text_data'])
        .where('request_id', '=', requestId)
        .where('attachment_mnemonic', '=', 'REQUEST_DATA')
        .executeTakeFirstOrThrow();
      const data = JSON.parse(String(row.text_data)) as Record<string, unknown>;
      await db
        .updateTable('attachment_data')
        .set({ text_data: JSON.stringify({ ...data, device_filer: 'biometry' }) })
        .where('id', '=', row.id)
        .execute();
      for (let i = 0; i < 20; i++) {
        const outcome = await engine.step();
        if (outcome.kind !== 'ran') return { requestId, ran };
        ran.push(`${outcome.routineName}:${outcome.status}`);
        if (outcome.status !== 'COMPLETE') {
          const routine = (await routinesOf(app.db, requestId)).find(
            (r) => r.routine_name === outcome.routineName,
          )!;
          ran.push((await executionsOf(app.db, routine.id)).at(-1)?.log_text ?? '');
          if (outcome.status === 'RETRY') return { requestId, ran };
        }
      }
      throw new Error(`the queue did not drain: ${ran.join(', ')}`);
    }

    async function eventsOf(patientId: number) {
      return db
        .selectFrom('ophinbiometry_imported_events as ie')
        .innerJoin('event as e', 'e.id', 'ie.event_id')
        .innerJoin('event_type as et', 'et.id', 'e.event_type_id')
        .selectAll('ie')
        .select([
          'e.event_date',
          'e.episode_id',
          'e.institution_id',
          'et.class_name',
          'e.last_modified_date as event_modified',
        ])
        .where('ie.patient_id', '=', patientId)
        .orderBy('ie.id')
        .execute();
    }

    const elementOf = (table: string, eventId: number) =>
      db.selectFrom(table).selectAll().where('event_id', '=', eventId).orderBy('id').execute();

    async function oneElement(table: string, eventId: number): Promise<Record<string, unknown>> {
      const rows = await elementOf(table, eventId);
      assert.equal(rows.length, 1, `one ${table} row`);
      return rows[0] as Record<string, unknown>;
    }

    async function reportsOf(eventId: number) {
      return db
        .selectFrom('event_attachment_item as i')
        .innerJoin('event_attachment_group as g', 'g.id', 'i.event_attachment_group_id')
        .innerJoin('element_type as et', 'et.id', 'g.element_type_id')
        .innerJoin('event_type as ev', 'ev.id', 'et.event_type_id')
        .innerJoin('attachment_data as ad', 'ad.id', 'i.attachment_data_id')
        .select([
          'ad.attachment_mnemonic',
          'ad.attachment_type',
          'ad.mime_type',
          'i.event_document_view_set',
          'i.system_only_managed',
          'et.class_name as element_class',
          'ev.class_name as event_class',
        ])
        .where('g.event_id', '=', eventId)
        .orderBy('i.id')
        .execute();
    }

    it("gives an IOLMaster 500 v7.5 report without measurements or laterality its profile's eye (both)", async () => {
      const { patientId, tags } = await newPatient();
      const { ran } = await file(await iolMaster500(tags, newStudy(), { eyes: [] }));
      assert.ok(ran.includes('FILE_BIOMETRY:COMPLETE'), ran.join(', '));
      const [event] = await eventsOf(patientId);
      assert.ok(event, 'a Biometry event');
      const sites = await db
        .selectFrom('event_attachment_item as i')
        .innerJoin('event_attachment_group as g', 'g.id', 'i.event_attachment_group_id')
        .innerJoin('attachment_data as ad', 'ad.id', 'i.attachment_data_id')
        .select('ad.body_site_snomed_type')
        .where('g.event_id', '=', event.event_id)
        .execute();
      assert.deepEqual(
        sites.map((s): unknown => s.body_site_snomed_type),
        ['40638003'],
      );
    });

    it('files an IOLMaster 500 object as a Biometry event with both eyes, the IOL table and its image', async () => {
      const { patientId, tags } = await newPatient();
      const study = newStudy();
      const { ran } = await file(await iolMaster500(tags, study));
      assert.ok(ran.includes('FILE_BIOMETRY:COMPLETE'), ran.join(', '));
      assert.ok(
        ran.every((r) => r.endsWith(':COMPLETE')),
        ran.join(', '),
      );
      assert.ok(!ran.some((r) => r.startsWith('ATTACH_TO_EVENT')), ran.join(', '));

      const events = await eventsOf(patientId);
      assert.equal(events.length, 1);
      const event = events[0]!;
      const institution = await db
        .selectFrom('institution')
        .select('id')
        .where('remote_id', '=', app.config.institutionCode)
        .orderBy('id')
        .executeTakeFirst();
      assert.equal(event.class_name, 'OphInBiometry');
      assert.equal(event.episode_id, null);
      assert.equal(String(event.event_date).replace('T', ' ').slice(0, 19), '2024-03-01 10:35:12');
      assert.equal(event.institution_id ?? null, institution?.id ?? null);
      assert.deepEqual(
        {
          study_id: event.study_id,
          device_id: event.device_id,
          device_name: event.device_name,
          device_model: event.device_model,
          device_manufacturer: event.device_manufacturer,
          device_software_version: event.device_software_version,
          device_serial_number: event.device_serial_number,
          acquisition_datetime: event.acquisition_datetime,
          series_id: event.series_id,
          sop_uid: event.sop_uid,
          surgeon_name: event.surgeon_name,
          is_linked: Number(event.is_linked),
          is_merged: Number(event.is_merged),
          content_datetime: String(event.content_datetime).replace('T', ' ').slice(0, 19),
        },
        {
          study_id: study.studyUid,
          device_id: 'IOLM-STATION',
          device_name: 'Test Eye Hospital',
          device_model: 'IOLMaster 500',
          device_manufacturer: 'Carl Zeiss Meditec',
          device_software_version: '7.5.2.0076',
          device_serial_number: 'SN-0001',
          acquisition_datetime: '20240301103512.123456',
          series_id: `${study.studyUid}.2`,
          sop_uid: study.sopUid,
          surgeon_name: 'Smith John',
          is_linked: 0,
          is_merged: 0,
          content_datetime: '2024-03-01 10:30:00',
        },
      );

      const measurement = await oneElement('et_ophinbiometry_measurement', event.event_id);
      assert.equal(Number(measurement.eye_id), 3);
      const expected: Record<string, number> = {
        axial_length_right: 23.45,
        snr_right: 150.3,
        snr_min_right: 98.7,
        // Changed by hand: d1/d2 and the flat axis as K1's, the steep axis as K2's.
        k1_right: 43.1,
        k2_right: 44.2,
        k1_axis_right: 12,
        k2_axis_right: 102,
        delta_k_right: -1.1,
        delta_k_axis_right: 12,
        acd_right: 3.21,
        refraction_sphere_right: -1.5,
        refraction_delta_right: -0.75,
        refraction_axis_right: 90,
        eye_status_right: 0,
        k_modified_right: 1,
        al_modified_right: 0,
        axial_length_left: 24.12,
        snr_left: 210,
        snr_min_left: 0,
        k1_left: 42.75,
        k2_left: 43.5,
        k1_axis_left: 170,
        k2_axis_left: 80,
        // The device's mean cylinder, negative.
        delta_k_left: -1.25,
        delta_k_axis_left: 170,
        acd_left: 3.05,
        refraction_sphere_left: 0.25,
        // 99 is no IOLMaster code: Unknown.
        eye_status_left: -1,
        k_modified_left: 0,
      };
      for (const [column, value] of Object.entries(expected)) near(measurement[column], value, column);

      const srkT = await db
        .selectFrom('ophinbiometry_calculation_formula')
        .select('id')
        .where('name', '=', 'SRK/T')
        .executeTakeFirstOrThrow();
      const calculation = await oneElement('et_ophinbiometry_calculation', event.event_id);
      assert.equal(Number(calculation.eye_id), 3);
      near(calculation.target_refraction_right, -0.5, 'target right');
      near(calculation.target_refraction_left, 0, 'target left');
      assert.equal(Number(calculation.formula_id_right), srkT.id);
      assert.equal(Number(calculation.formula_id_left), srkT.id);
      const selection = await oneElement('et_ophinbiometry_selection', event.event_id);
      assert.equal(Number(selection.eye_id), 3);
      assert.equal(Number(selection.formula_id_right), srkT.id);

      const values = await elementOf('et_ophinbiometry_iol_ref_values', event.event_id);
      assert.equal(values.length, 2);
      const lenses = await db
        .selectFrom('ophinbiometry_lenstype_lens')
        .select(['id', 'name', 'acon'])
        .execute();
      const lensId = (name: string): number | undefined => lenses.find((l) => l.name === name)?.id as number;
      const right = values.find((v) => v.lens_id === lensId('SN60WF'))!;
      assert.ok(right, 'a row for the seeded SN60WF');
      assert.equal(Number(right.eye_id), 2);
      assert.deepEqual(JSON.parse(String(right.iol_ref_values_right)), {
        IOL: [21, 21.5],
        REF: [0.31, -0.02],
      });
      near(right.emmetropia_right, 21.5, 'emmetropia right');
      near(right.constant, 118.7, 'constant');
      assert.equal(Number(right.formula_id), srkT.id);
      const created = lensId('Acme Lens 9');
      assert.ok(created !== undefined, 'the unknown lens is created');
      const left = values.find((v) => v.lens_id === created)!;
      assert.equal(Number(left.eye_id), 1);
      assert.deepEqual(JSON.parse(String(left.iol_ref_values_left)), { IOL: [20], REF: [0.12] });
      near(lenses.find((l) => l.id === created)!.acon, 119.1, 'new lens constant');
      const listed = await db
        .selectFrom('ophinbiometry_lenstype_lens_institution')
        .select('institution_id')
        .where('lenstype_lens_id', '=', created)
        .execute();
      assert.deepEqual(
        listed.map((l): number => Number(l.institution_id)),
        institution === undefined ? [] : [institution.id],
      );
      const surgeon = await db
        .selectFrom('ophinbiometry_surgeon')
        .select('id')
        .where('name', '=', 'Smith John')
        .executeTakeFirstOrThrow();
      assert.equal(Number(right.surgeon_id), surgeon.id);

      const reports = await reportsOf(event.event_id);
      assert.deepEqual(reports, [
        {
          attachment_mnemonic: 'DICOM_IMAGE_1',
          attachment_type: 'Biometry Report',
          mime_type: 'image/png',
          event_document_view_set: null,
          system_only_managed: 1,
          element_class: 'OEModule\\OphGeneric\\models\\Attachment',
          event_class: 'OphInBiometry',
        },
      ]);
    });

    it('changes nothing when the same file is sent again', async () => {
      const { patientId, tags } = await newPatient();
      const bytes = await iolMaster500(tags, newStudy());
      await file(bytes);
      const [event] = await eventsOf(patientId);
      const snapshot = async () =>
        JSON.stringify({
          events: await eventsOf(patientId),
          measurement: await elementOf('et_ophinbiometry_measurement', event!.event_id),
          calculation: await elementOf('et_ophinbiometry_calculation', event!.event_id),
          selection: await elementOf('et_ophinbiometry_selection', event!.event_id),
          values: await elementOf('et_ophinbiometry_iol_ref_values', event!.event_id),
          reports: await reportsOf(event!.event_id),
          lenses: await db.selectFrom('ophinbiometry_lenstype_lens').selectAll().orderBy('id').execute(),
        });
      const before = await snapshot();
      const { requestId, ran } = await file(bytes);
      assert.ok(ran.includes('FILE_BIOMETRY:COMPLETE'), ran.join(', '));
      assert.equal(await snapshot(), before);
      const routine = (await routinesOf(app.db, requestId)).find((r) => r.routine_name === 'FILE_BIOMETRY')!;
      const log = (await executionsOf(app.db, routine.id)).at(-1)?.log_text ?? '';
      assert.match(log, /0 biometry row\(s\) written/);
      assert.match(log, /already filed under the Biometry event/);
    });

    it('merges a second file of the study: only the eyes it carries, the eye widened to both', async () => {
      const { patientId, tags } = await newPatient();
      const study = newStudy();
      await file(await iolMaster500(tags, study, { eyes: ['L'] }));
      const [first] = await eventsOf(patientId);
      const leftOnly = await oneElement('et_ophinbiometry_measurement', first!.event_id);
      assert.equal(Number(leftOnly.eye_id), 1);
      near(leftOnly.axial_length_left, 24.12, 'left AL');
      near(leftOnly.axial_length_right, 0, 'absent right AL');
      assert.equal(Number(leftOnly.eye_status_right), -1);

      await file(
        await iolMaster500(tags, { ...study, sopUid: newUid(), contentTime: '110000' }, { eyes: ['R'] }),
      );
      const events = await eventsOf(patientId);
      assert.equal(events.length, 1, 'one event per study');
      assert.equal(Number(events[0]!.is_merged), 1);
      assert.equal(String(events[0]!.content_datetime).replace('T', ' ').slice(0, 19), '2024-03-01 11:00:00');
      const both = await oneElement('et_ophinbiometry_measurement', first!.event_id);
      assert.equal(Number(both.eye_id), 3);
      near(both.axial_length_left, 24.12, 'left AL kept');
      near(both.axial_length_right, 23.45, 'right AL added');
      const calculation = await oneElement('et_ophinbiometry_calculation', first!.event_id);
      assert.equal(Number(calculation.eye_id), 3);
    });

    for (const order of ['report first', 'measurements first'] as const) {
      it(`attaches an IOLMaster 700 report of the study to the Biometry event (${order})`, async () => {
        const { patientId, tags } = await newPatient();
        const study = newStudy();
        const report = await iolMaster700Report(tags, study);
        const measurements = await iolMaster500(tags, study);
        const files = order === 'report first' ? [report, measurements] : [measurements, report];
        const first = await file(files[0]!);
        assert.ok(
          first.ran.every((r) => r.endsWith(':COMPLETE')),
          first.ran.join(', '),
        );
        if (order === 'report first') {
          const events = await eventsOf(patientId);
          assert.equal(events.length, 1);
          assert.equal(events[0]!.device_model, 'IOLMaster 700');
          assert.equal((await elementOf('et_ophinbiometry_measurement', events[0]!.event_id)).length, 0);
        }
        const second = await file(files[1]!);
        assert.ok(
          second.ran.every((r) => r.endsWith(':COMPLETE')),
          second.ran.join(', '),
        );
        const events = await eventsOf(patientId);
        assert.equal(events.length, 1, 'one event per study');
        const eventId = events[0]!.event_id;
        assert.equal((await elementOf('et_ophinbiometry_measurement', eventId)).length, 1);
        const reports = await reportsOf(eventId);
        const pdf = reports.filter((r) => r.mime_type === 'application/pdf');
        assert.deepEqual(pdf, [
          {
            attachment_mnemonic: 'DICOM_PDF',
            attachment_type: 'Biometry Report',
            mime_type: 'application/pdf',
            event_document_view_set: null,
            system_only_managed: 1,
            element_class: 'OEModule\\OphGeneric\\models\\Attachment',
            event_class: 'OphInBiometry',
          },
        ]);
        // One attachment group per event.
        const groups = await db
          .selectFrom('event_attachment_group')
          .select('id')
          .where('event_id', '=', eventId)
          .execute();
        assert.equal(groups.length, 1);
      });
    }

    it('files an IOLMaster 500 PDF by its private data, not its layout, and attaches the PDF', async () => {
      const { patientId, tags } = await newPatient();
      const { ran } = await file(await iolMaster500(tags, newStudy(), { isPdf: true }));
      assert.ok(
        ran.every((r) => r.endsWith(':COMPLETE')),
        ran.join(', '),
      );
      const [event] = await eventsOf(patientId);
      assert.ok(event);
      const measurement = await oneElement('et_ophinbiometry_measurement', event.event_id);
      assert.equal(Number(measurement.eye_id), 3);
      near(measurement.axial_length_right, 23.45, 'right AL');
      near(measurement.axial_length_left, 24.12, 'left AL');
      const reports = await reportsOf(event.event_id);
      assert.deepEqual(
        reports.map((r): string[] => [String(r.attachment_mnemonic), String(r.attachment_type)]),
        [['DICOM_PDF', 'Biometry Report']],
      );
    });

    it('files a standard ophthalmic axial measurements object in the same tables', async () => {
      const { patientId, tags } = await newPatient();
      const { ran } = await file(await axialMeasurements(tags, newStudy()));
      assert.ok(ran.includes('FILE_BIOMETRY:COMPLETE'), ran.join(', '));
      const [event] = await eventsOf(patientId);
      assert.ok(event);
      assert.equal(event.device_model, 'Axial Meter 1');
      const measurement = await oneElement('et_ophinbiometry_measurement', event.event_id);
      assert.equal(Number(measurement.eye_id), 3);
      near(measurement.axial_length_right, 23.9, 'selected right AL');
      near(measurement.snr_right, 180, 'right SNR');
      near(measurement.axial_length_left, 24.3, 'left AL');
      assert.equal(Number(measurement.eye_status_right), -1);
    });

    it('files a standard IOL calculation object: keratometry, target, formula and the IOL table', async () => {
      const { patientId, tags } = await newPatient();
      const { ran } = await file(await iolCalculation(tags, newStudy()));
      assert.ok(ran.includes('FILE_BIOMETRY:COMPLETE'), ran.join(', '));
      const [event] = await eventsOf(patientId);
      assert.ok(event);
      const measurement = await oneElement('et_ophinbiometry_measurement', event.event_id);
      assert.equal(Number(measurement.eye_id), 2);
      const expected: Record<string, number> = {
        axial_length_right: 23.1,
        acd_right: 3.3,
        k1_right: 42.5,
        k1_axis_right: 175,
        k2_right: 43.75,
        k2_axis_right: 85,
        delta_k_right: -1.25,
        delta_k_axis_right: 175,
        axial_length_left: 0,
      };
      for (const [column, value] of Object.entries(expected)) near(measurement[column], value, column);
      const haigis = await db
        .selectFrom('ophinbiometry_calculation_formula')
        .select('id')
        .where('name', '=', 'Haigis')
        .executeTakeFirstOrThrow();
      const calculation = await oneElement('et_ophinbiometry_calculation', event.event_id);
      near(calculation.target_refraction_right, -0.25, 'target');
      assert.equal(Number(calculation.formula_id_right), haigis.id);
      const values = await oneElement('et_ophinbiometry_iol_ref_values', event.event_id);
      assert.equal(Number(values.formula_id), haigis.id);
      assert.deepEqual(JSON.parse(String(values.iol_ref_values_right)), {
        IOL: [21, 21.5],
        REF: [0.18, -0.15],
      });
      near(values.emmetropia_right, 21.25, 'emmetropia');
      near(values.constant, 119, 'constant');
      assert.equal(values.iol_ref_values_left, null);
    });

    it('files an object that is no biometry after all generically, with ATTACH_TO_EVENT', async () => {
      const { patientId, tags } = await newPatient();
      const bytes = buildInstance({
        tags: { PatientID: tags.id, PatientBirthDate: tags.dob, PatientSex: tags.sex, StudyDate: '20240301' },
      });
      const { requestId, ran } = await file(bytes);
      assert.ok(
        ran.includes('FILE_BIOMETRY:COMPLETE') && ran.includes('ATTACH_TO_EVENT:COMPLETE'),
        ran.join(', '),
      );
      assert.deepEqual(await eventsOf(patientId), []);
      const routine = (await routinesOf(app.db, requestId)).find((r) => r.routine_name === 'FILE_BIOMETRY')!;
      const log = (await executionsOf(app.db, routine.id)).at(-1)?.log_text ?? '';
      assert.match(log, /not filed as biometry \(not an IOLMaster or standard biometry object\)/);
    });

    it('fails a biometry file without any date at once, and files nothing', async () => {
      const { patientId, tags } = await newPatient();
      const study = { studyUid: newUid(), sopUid: newUid() };
      const { requestId, ran } = await file(await iolMaster500(tags, study));
      // DICOM_SEED, choosing the device profile, refuses a file without any date, before the biometry filer.
      assert.ok(ran.includes('DICOM_SEED:FAILED'), ran.join(', '));
      const routine = (await routinesOf(app.db, requestId)).find((r) => r.routine_name === 'DICOM_SEED')!;
      assert.equal(routine.try_count, 1);
      const log = (await executionsOf(app.db, routine.id)).at(-1)?.log_text ?? '';
      assert.match(log, /no usable date/);
      assert.deepEqual(await eventsOf(patientId), []);
    });
  });
});
