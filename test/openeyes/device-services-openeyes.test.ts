/**
 * What devices ask of the DICOM port on an OpenEyes database (`DATABASE_SCHEMA=openeyes`, MariaDB/MySQL),
 * on the account `openeyes grants` prints:
 * - the Modality Worklist, asked by dcmtk's `findscu -W`: OpenEyes's own worklist tables (schema.sql, as
 *   v6.8's migrations leave them) are read in place, the start-up check covers them, the answer carries
 *   the seed's patient with the definition's identifier type as Patient ID and `when` as local time, and
 *   the ids handed out are kept in `cra_mwl_entry`;
 * - Storage Commitment, asked by dcmjs-dimse's Client after a dcmtk `storescu`: the instance stored in
 *   OpenEyes's `request` / `attachment_data` with its `cra_dicom_received_instance` receipt is committed;
 * - Query/Retrieve C-FIND, asked by `findscu -S` after a `storescu`: the instance's
 *   `cra_dicom_instance_index` row answers, with the hospital number of the patient its study is filed
 *   to (`cra_device_event`) as Patient ID, and the answer is audited in `cra_audit_event`.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { createAppServices } from '../../src/app-services.ts';
import { createLogger } from '../../src/logger.ts';
import type { DicomServer } from '../../src/modules/dicom-receive/index.ts';
import { startDicomServer } from '../../src/modules/dicom-receive/index.ts';
import { parseStudyRecord } from '../../src/modules/dicom/index.ts';
import { createAuthenticator } from '../../src/modules/user/index.ts';
import { runDcmtk } from '../dcmtk.ts';
import { buildInstance, newUid, sopInstanceUidOf } from '../dicom-instances.ts';
import { commitWithClient, pairsOf } from '../storage-commitment-client.ts';
import { until } from '../until.ts';
import { findWorklist, itemOf, nameOf } from '../worklist-fixtures.ts';
import type { OpenEyesService } from './openeyes-app.ts';
import { openOpenEyesService } from './openeyes-app.ts';
import { testMysqlUrl } from './openeyes-database.ts';

const adminUrl = testMysqlUrl();
const skip = adminUrl === undefined ? 'TEST_MYSQL_URL is not set (no MariaDB/MySQL server)' : false;
const DAY = '2026-07-15';
const KEYS = [
  'PatientName',
  'PatientID',
  'IssuerOfPatientID',
  'PatientBirthDate',
  'PatientSex',
  'AccessionNumber',
  'RequestedProcedureID',
  'StudyInstanceUID',
  'ReferringPhysicianName',
  'OtherPatientIDsSequence',
  `ScheduledProcedureStepSequence[0].ScheduledProcedureStepStartDate=${DAY.replace(/-/g, '')}`,
  'ScheduledProcedureStepSequence[0].ScheduledProcedureStepStartTime',
  'ScheduledProcedureStepSequence[0].Modality',
  'ScheduledProcedureStepSequence[0].ScheduledStationAETitle',
  'ScheduledProcedureStepSequence[0].ScheduledProcedureStepID',
  'ScheduledProcedureStepSequence[0].ScheduledProcedureStepDescription',
];

describe('Worklist, commitment and query on an OpenEyes v6.8-shaped database', { skip }, () => {
  let service: OpenEyesService | undefined;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  let admin: Kysely<any>;
  let server: DicomServer;
  let filesDir: string;
  const bookings = { jane: 0, zoe: 0 };

  before(async () => {
    // The start-up check covers the worklist tables: it refuses to start when one is missing.
    service = await openOpenEyesService(adminUrl!, {
      tempPrefix: 'cra-oe-mwl-',
      settings: () => ({
        DATABASE_SCHEMA: 'openeyes',
        TIME_ZONE: 'Europe/London',
        DICOM_PORT: '0',
        HOST: '127.0.0.1',
        DICOM_AE_TITLE: 'CRA_TEST',
        DICOM_ALLOWED_CALLERS: 'DEV@127.0.0.1',
        DICOM_QR_CALLERS: 'DEV@127.0.0.1',
        WORKER: 'off',
        DEMO_DATA: 'off',
        LOG_LEVEL: 'silent',
      }),
    });
    assert.match(service.grants, /worklist_patient/);
    ({ admin, filesDir } = service);
    const { config, database } = service;
    server = await startDicomServer({
      database,
      config,
      logger: createLogger('silent'),
      ...createAppServices({
        config,
        database,
        files: service.booted.files,
        authenticator: createAuthenticator(database.db, { cacheTtlMs: 0, database }),
      }),
    });

    // "Cataract clinic" of the LOCAL type (hospital numbers): the seed's patient 1 (Jane Smith) at 10:30
    // and patient 2 (Zoë O'Brien) at 14:05 local time, the deleted patient 4 (no entry); a manual
    // worklist with patient 5 (no entry).
    const definition = await admin
      .insertInto('worklist_definition')
      .values({
        name: 'Cataract clinic',
        rrule: 'FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR',
        start_time: '08:00:00',
        end_time: '17:00:00',
        active_from: '2026-01-01 00:00:00',
        scheduled: 1,
        display_order: 1,
        patient_identifier_type_id: 1,
      })
      .executeTakeFirstOrThrow();
    const definitionId = Number(definition.insertId);
    const worklistOf = async (name: string, defId: number | null) =>
      Number(
        (
          await admin
            .insertInto('worklist')
            .values({
              name,
              start: `${DAY} 08:00:00`,
              end: `${DAY} 17:00:00`,
              scheduled: defId === null ? 0 : 1,
              worklist_definition_id: defId,
            })
            .executeTakeFirstOrThrow()
        ).insertId,
      );
    const cataract = await worklistOf('Cataract clinic', definitionId);
    const manual = await worklistOf('Manual list', null);
    const doctor = Number(
      (
        await admin
          .insertInto('worklist_attribute')
          .values({ worklist_id: cataract, name: 'Doctor', display_order: 1 })
          .executeTakeFirstOrThrow()
      ).insertId,
    );
    const book = async (worklistId: number, patientId: number, when: string) =>
      Number(
        (
          await admin
            .insertInto('worklist_patient')
            .values({ worklist_id: worklistId, patient_id: patientId, when })
            .executeTakeFirstOrThrow()
        ).insertId,
      );
    bookings.jane = await book(cataract, 1, `${DAY} 10:30:00`);
    bookings.zoe = await book(cataract, 2, `${DAY} 14:05:00`);
    await book(cataract, 4, `${DAY} 11:00:00`);
    await book(manual, 5, `${DAY} 12:00:00`);
    await admin
      .insertInto('worklist_patient_attribute')
      .values({
        worklist_attribute_id: doctor,
        worklist_patient_id: bookings.jane,
        attribute_value: 'Mr A Surgeon',
      })
      .execute();
  });

  after(async () => {
    try {
      await server?.stop(1000);
    } finally {
      await service?.close();
    }
  });

  it("answers the day's bookings from OpenEyes's tables and keeps the ids in cra_mwl_entry", async () => {
    const { answers, code, output } = await findWorklist(server.port, { keys: KEYS });
    assert.equal(code, 0, output);
    assert.match(output, /Received Final Find Response \(Success\)/);
    assert.deepEqual(
      answers.map((a) => String(a.AccessionNumber)).sort(),
      [String(bookings.jane), String(bookings.zoe)].sort(),
    );
    const jane = answers.find((a) => a.AccessionNumber === String(bookings.jane))!;
    assert.equal(nameOf(jane.PatientName), 'Smith^Jane^^Mrs');
    assert.equal(jane.PatientID, '0012345');
    assert.equal(jane.IssuerOfPatientID, 'NEW');
    assert.equal(jane.PatientBirthDate, '19700101');
    assert.equal(jane.PatientSex, 'F');
    assert.equal(jane.RequestedProcedureID, String(bookings.jane));
    assert.match(String(jane.StudyInstanceUID), /^2\.25\.[1-9]\d{0,38}$/);
    assert.equal(nameOf(jane.ReferringPhysicianName), 'Mr A Surgeon');
    const other = itemOf(jane.OtherPatientIDsSequence);
    assert.equal(other.PatientID, '4505577104');
    assert.equal(other.IssuerOfPatientID, 'NHS');
    const step = itemOf(jane.ScheduledProcedureStepSequence);
    // `when` is OpenEyes's local time, answered as it stands in TIME_ZONE.
    assert.equal(step.ScheduledProcedureStepStartDate, '20260715');
    assert.equal(step.ScheduledProcedureStepStartTime, '103000');
    assert.equal(step.ScheduledStationAETitle, 'DEV');
    assert.equal(step.ScheduledProcedureStepDescription, 'Cataract clinic');
    const zoe = answers.find((a) => a.AccessionNumber === String(bookings.zoe))!;
    assert.equal(nameOf(zoe.PatientName), "O'Brien^Zoë^^Ms");

    const entries = await admin
      .selectFrom('cra_mwl_entry')
      .select(['worklist_patient_id', 'study_instance_uid', 'accession_number'])
      .orderBy('worklist_patient_id')
      .execute();
    assert.deepEqual(
      entries.map((e) => Number(e.worklist_patient_id)),
      [bookings.jane, bookings.zoe].sort((a, b) => a - b),
    );
    assert.equal(
      entries.find((e) => Number(e.worklist_patient_id) === bookings.jane)!.study_instance_uid,
      jane.StudyInstanceUID,
    );

    // The same entry answers the same ids again; a name query matches through OpenEyes's collation.
    const again = await findWorklist(server.port, {
      keys: ['AccessionNumber', 'StudyInstanceUID', 'PatientName=SMITH*', ...KEYS.slice(10)],
    });
    assert.equal(again.code, 0, again.output);
    assert.deepEqual(
      again.answers.map((a) => [a.AccessionNumber, a.StudyInstanceUID]),
      [[jane.AccessionNumber, jane.StudyInstanceUID]],
    );
    const count = await sql<{ n: number }>`select count(*) as n from cra_mwl_entry`.execute(admin);
    assert.equal(Number(count.rows[0]!.n), 2);
  });

  it("commits an instance stored by storescu in OpenEyes's request tables, and fails an unknown one", async () => {
    const file = buildInstance();
    const filePath = path.join(filesDir, 'commit.dcm');
    await writeFile(filePath, file);
    const stored = await runDcmtk('storescu', [
      '-aet',
      'DEV',
      '-aec',
      'CRA_TEST',
      '127.0.0.1',
      String(server.port),
      filePath,
    ]);
    assert.equal(stored.code, 0, stored.output);
    const uid = sopInstanceUidOf(file);
    await until(
      async () =>
        (await admin
          .selectFrom('cra_dicom_received_instance')
          .select('sop_instance_uid')
          .where('sop_instance_uid', '=', uid)
          .executeTakeFirst()) !== undefined,
      { what: 'the receipt in cra_dicom_received_instance' },
    );
    const secondaryCapture = '1.2.840.10008.5.1.4.1.1.7';
    const unknown = newUid();
    const outcome = await commitWithClient(server.port, 'DEV', newUid(), [
      { sopClassUid: secondaryCapture, sopInstanceUid: uid },
      { sopClassUid: secondaryCapture, sopInstanceUid: unknown },
    ]);
    assert.equal(outcome.actionStatus, 0);
    assert.ok(outcome.report !== undefined, 'the report came on the same association');
    assert.equal(outcome.report.eventType, 2);
    assert.deepEqual(pairsOf(outcome.report.elements.ReferencedSOPSequence), [`${secondaryCapture} ${uid}`]);
    assert.deepEqual(pairsOf(outcome.report.elements.FailedSOPSequence), [
      `${secondaryCapture} ${unknown} ${0x0112}`,
    ]);
  });

  it("answers a Study Root C-FIND from cra_dicom_instance_index with the filed patient's hospital number", async () => {
    const study = newUid();
    const file = buildInstance({
      studyInstanceUid: study,
      tags: { PatientID: 'DEVICE-7', StudyDate: '20250102' },
    });
    const filePath = path.join(filesDir, 'query.dcm');
    await writeFile(filePath, file);
    const stored = await runDcmtk('storescu', [
      '-aet',
      'DEV',
      '-aec',
      'CRA_TEST',
      '127.0.0.1',
      String(server.port),
      filePath,
    ]);
    assert.equal(stored.code, 0, stored.output);
    // Filing put the study into an event of the seed's patient 1 (Jane Smith, hospital number 0012345).
    await sql`insert into cra_device_event (patient_id, study_instance_uid, event_subtype, model, event_id, created_date, last_modified_date)
      values (1, ${study}, 'Fundus Images', 'TEST', 1, '2025-01-02 00:00:00', '2025-01-02 00:00:00')`.execute(
      admin,
    );
    const dir = await mkdtemp(path.join(tmpdir(), 'cra-oe-qr-'));
    try {
      const result = await runDcmtk('findscu', [
        '-S',
        '-v',
        '-aet',
        'DEV',
        '-aec',
        'CRA_TEST',
        '-X',
        '-od',
        dir,
        '-k',
        'QueryRetrieveLevel=STUDY',
        '-k',
        'PatientID=0012345',
        '-k',
        'StudyDate=20250101-20250131',
        '-k',
        'StudyInstanceUID',
        '127.0.0.1',
        String(server.port),
      ]);
      assert.equal(result.code, 0, result.output);
      assert.match(result.output, /Received Final Find Response \(Success\)/);
      assert.equal(
        (result.output.match(/Received Find Response \d+ \(Pending\)/g) ?? []).length,
        1,
        result.output,
      );
      const answer = await readFile(path.join(dir, 'rsp0001.dcm'));
      assert.ok(answer.includes(Buffer.from(study, 'latin1')), 'the answer names the study');
      assert.ok(answer.includes(Buffer.from('0012345', 'latin1')), 'the answer carries the hospital number');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    const audit = await sql<{ target_ids: string }>`select target_ids from cra_audit_event
      where action = 'dicom.find' and target_type = 'patient' and username = 'DEV'`.execute(admin);
    assert.ok(
      audit.rows.some((r) => /\b1\b/.test(String(r.target_ids))),
      JSON.stringify(audit.rows),
    );
  });

  it('stores an instance whose UTF-8 patient name has a 4-byte character, indexed with U+FFFD in its place', async () => {
    const file = buildInstance({
      tags: { SpecificCharacterSet: 'ISO_IR 192', PatientID: 'DEVICE-8', PatientName: 'Smile\u{1F600}^Zoë' },
    });
    const filePath = path.join(filesDir, 'emoji.dcm');
    await writeFile(filePath, file);
    const stored = await runDcmtk('storescu', [
      '-aet',
      'DEV',
      '-aec',
      'CRA_TEST',
      '127.0.0.1',
      String(server.port),
      filePath,
    ]);
    assert.equal(stored.code, 0, stored.output);
    const row = await sql<{ patient_name: string }>`select patient_name from cra_dicom_instance_index
      where sop_instance_uid = ${sopInstanceUidOf(file)}`.execute(admin);
    assert.deepEqual(
      row.rows.map((r) => r.patient_name),
      ['Smile\uFFFD^Zoë'],
    );
    // The request is queued with its study record, stored the same way, in OpenEyes's attachment_data.
    const record = await sql<{ text_data: string }>`select a.text_data from attachment_data a
      join cra_dicom_received_instance r on r.last_request_id = a.request_id
      where r.sop_instance_uid = ${sopInstanceUidOf(file)} and a.attachment_mnemonic = 'DICOM_STUDY'`.execute(
      admin,
    );
    assert.equal(record.rows.length, 1);
    const study = parseStudyRecord(JSON.parse(record.rows[0]!.text_data));
    assert.ok(study !== undefined, 'a valid record of this version');
    assert.equal(study.header.PatientName, 'Smile\uFFFD^Zoë');
    assert.deepEqual(study.replacedKeywords, ['PatientName']);
  });
});
