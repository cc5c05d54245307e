/**
 * The Query/Retrieve C-FIND SCP on the DICOM port, asked by dcmtk's `findscu -P` and `findscu -S` about
 * instances stored with `storescu`: each level of both models, wildcards, date ranges, UID lists, the
 * filed patient's identifier as Patient ID, the answer cap, a caller not in DICOM_QR_CALLERS,
 * and the audit rows; then each way `qr.queries.ts` narrows the index in SQL (exact and wildcard Patient
 * ID, UID lists, date ranges, folded names, text keys, pages of the level's key, the cap) with a query
 * whose answers the narrowing would lose if it were wrong.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import dcmjs from 'dcmjs';
import { sql } from 'kysely';
import { runDcmtk } from '../../../test/dcmtk.ts';
import { buildInstance, newUid } from '../../../test/dicom-instances.ts';
import { startDicomTestApp } from '../../../test/dicom-receiving.ts';
import {
  addDisplayOrder,
  addIdentifier,
  createIdentifierType,
  createStandardInstitutions,
} from '../../../test/factories-patient.ts';
import { createPatient } from '../../../test/factories.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect } from '../../../test/harness.ts';
import type { DicomServer } from './index.ts';

type Answer = Record<string, unknown>;

interface FindResult {
  readonly code: number | null;
  readonly output: string;
  readonly answers: readonly Answer[];
  /** The answers' files as findscu wrote them. */
  readonly files: readonly Buffer[];
}

/** `findscu -P` or `-S` as `callingAe` with `keys`; the answers it wrote, in the order received. */
async function find(
  port: number,
  model: '-P' | '-S',
  keys: readonly string[],
  options: { callingAe?: string; extra?: readonly string[] } = {},
): Promise<FindResult> {
  const dir = await mkdtemp(path.join(tmpdir(), 'cra-qr-findscu-'));
  try {
    const args = [
      model,
      '-v',
      '-aet',
      options.callingAe ?? 'QR',
      '-aec',
      'CRA_TEST',
      '-X',
      '-od',
      dir,
      ...(options.extra ?? []),
      ...keys.flatMap((k) => ['-k', k]),
      '127.0.0.1',
      String(port),
    ];
    const result = await runDcmtk('findscu', args, 60_000);
    const files = (await readdir(dir)).filter((f) => f.startsWith('rsp')).sort();
    const bytes = await Promise.all(files.map((f) => readFile(path.join(dir, f))));
    return { code: result.code, output: result.output, answers: bytes.map(readAnswer), files: bytes };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function readAnswer(bytes: Buffer): Answer {
  const data = dcmjs.data as unknown as {
    DicomMessage: { readFile(buffer: ArrayBuffer): { dict: Record<string, unknown> } };
    DicomMetaDictionary: { naturalizeDataset(dict: Record<string, unknown>): Answer };
  };
  const buffer = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  return data.DicomMetaDictionary.naturalizeDataset(data.DicomMessage.readFile(buffer).dict);
}

function nameOf(value: unknown): string {
  const first = Array.isArray(value) ? (value[0] as unknown) : value;
  if (first === undefined || first === null) return '';
  if (typeof first === 'string') return first;
  return String((first as { Alphabetic?: string }).Alphabetic ?? '');
}

const STUDY = { a1: newUid(), a2: newUid(), b1: newUid() };
const SERIES = { a1x: newUid(), a1y: newUid(), a2x: newUid(), b1x: newUid() };

/**
 * Five instances: Ann Smith's study a1 (series x: 2, y: 1) and a2 (1), Zoë Jones's study b1 (1, in
 * UTF-8).
 */
function instances(): { file: Buffer; sop: string }[] {
  const ann = {
    PatientID: 'DEV-ANN',
    PatientName: 'Smith^Ann',
    PatientBirthDate: '19500304',
    PatientSex: 'F',
  };
  const bob = {
    PatientID: 'DEV-BOB',
    PatientName: 'Jones^Zoë',
    PatientSex: 'M',
    SpecificCharacterSet: 'ISO_IR 192',
  };
  const made = [
    { patient: ann, study: STUDY.a1, series: SERIES.a1x, date: '20240101', modality: 'OP', number: '1' },
    { patient: ann, study: STUDY.a1, series: SERIES.a1x, date: '20240101', modality: 'OP', number: '2' },
    { patient: ann, study: STUDY.a1, series: SERIES.a1y, date: '20240101', modality: 'OPT', number: '1' },
    { patient: ann, study: STUDY.a2, series: SERIES.a2x, date: '20240301', modality: 'OP', number: '1' },
    { patient: bob, study: STUDY.b1, series: SERIES.b1x, date: '20240601', modality: 'OP', number: '1' },
  ];
  return made.map((m) => {
    const sop = newUid();
    const file = buildInstance({
      sopInstanceUid: sop,
      studyInstanceUid: m.study,
      tags: {
        ...m.patient,
        SeriesInstanceUID: m.series,
        StudyDate: m.date,
        Modality: m.modality,
        InstanceNumber: m.number,
        StudyDescription: 'Fundus photography',
        AccessionNumber: `ACC${m.date}`,
      },
    });
    return { file, sop };
  });
}

forEachDialect((dialect) => {
  describe(`Query/Retrieve C-FIND on the DICOM port (${dialect})`, () => {
    let app: TestApp;
    let server: DicomServer;
    let sops: string[] = [];
    let annPatientId = 0;

    before(async () => {
      ({ app, server } = await startDicomTestApp(dialect, 'QR@127.0.0.1,STORE@127.0.0.1,DEV@127.0.0.1', {
        DICOM_QR_CALLERS: 'QR@127.0.0.1',
        DICOM_QR_MAX_ANSWERS: '4',
        INSTITUTION_CODE: 'NEW',
      }));
      const dir = await mkdtemp(path.join(tmpdir(), 'cra-qr-store-'));
      try {
        const made = instances();
        sops = made.map((m) => m.sop);
        const files = await Promise.all(
          made.map(async (m, i) => {
            const file = path.join(dir, `i${i}.dcm`);
            await writeFile(file, m.file);
            return file;
          }),
        );
        const stored = await runDcmtk('storescu', [
          '-aet',
          'STORE',
          '-aec',
          'CRA_TEST',
          '127.0.0.1',
          String(server.port),
          ...files,
        ]);
        assert.equal(stored.code, 0, stored.output);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
      // Ann's study a1 was filed to her record, whose hospital number (NEW's LOCAL type) is 1000001.
      const { localTypeId } = await createStandardInstitutions(app.db, 'NEW');
      const ann = await createPatient(app.db, { firstName: 'Ann', lastName: 'Smith' });
      annPatientId = ann.patientId;
      await addIdentifier(app.db, ann.patientId, localTypeId, '1000001');
      await sql`insert into ${sql.table('device_event')} (patient_id, study_instance_uid, event_subtype, model, event_id, created_date, last_modified_date)
        values (${ann.patientId}, ${STUDY.a1}, ${'Fundus Images'}, ${'TEST'}, ${1}, ${'2024-01-01 00:00:00'}, ${'2024-01-01 00:00:00'})`.execute(
        app.db,
      );
    });

    after(async () => {
      await server?.stop();
      await app?.close();
    });

    it('answers Study Root STUDY level with a date range, the filed patient as Patient ID and the counts', async () => {
      const result = await find(server.port, '-S', [
        'QueryRetrieveLevel=STUDY',
        'StudyDate=20240101-20240301',
        'PatientID',
        'PatientName',
        'StudyInstanceUID',
        'ModalitiesInStudy',
        'NumberOfStudyRelatedSeries',
        'NumberOfStudyRelatedInstances',
        'AccessionNumber',
      ]);
      assert.equal(result.code, 0, result.output);
      const byStudy = new Map(result.answers.map((a) => [a.StudyInstanceUID, a]));
      assert.deepEqual([...byStudy.keys()].sort(), [STUDY.a1, STUDY.a2].sort());
      const a1 = byStudy.get(STUDY.a1)!;
      assert.equal(a1.PatientID, '1000001');
      assert.equal(a1.QueryRetrieveLevel, 'STUDY');
      assert.equal(nameOf(a1.PatientName), 'Smith^Ann');
      assert.deepEqual([a1.ModalitiesInStudy].flat(), ['OP', 'OPT']);
      assert.equal(Number(a1.NumberOfStudyRelatedSeries), 2);
      assert.equal(Number(a1.NumberOfStudyRelatedInstances), 3);
      assert.equal(a1.AccessionNumber, 'ACC20240101');
      assert.equal(byStudy.get(STUDY.a2)!.PatientID, 'DEV-ANN');
    });

    it('finds a filed study by the hospital number, not by what the device sent', async () => {
      const byNumber = await find(server.port, '-S', [
        'QueryRetrieveLevel=STUDY',
        'PatientID=1000001',
        'StudyInstanceUID',
      ]);
      assert.deepEqual(
        byNumber.answers.map((a) => a.StudyInstanceUID),
        [STUDY.a1],
      );
      const bySent = await find(server.port, '-S', [
        'QueryRetrieveLevel=STUDY',
        'PatientID=DEV-ANN',
        'StudyInstanceUID',
      ]);
      assert.deepEqual(
        bySent.answers.map((a) => a.StudyInstanceUID),
        [STUDY.a2],
      );
    });

    it('answers Patient Root PATIENT level once per Patient ID, with a wildcard on the name', async () => {
      const result = await find(server.port, '-P', [
        'QueryRetrieveLevel=PATIENT',
        'PatientName=SMI*',
        'PatientID',
        'PatientBirthDate',
      ]);
      assert.equal(result.code, 0, result.output);
      assert.deepEqual(result.answers.map((a) => a.PatientID).sort(), ['1000001', 'DEV-ANN']);
      assert.ok(result.answers.every((a) => a.PatientBirthDate === '19500304'));
      const none = await find(server.port, '-P', [
        'QueryRetrieveLevel=PATIENT',
        'PatientName=Sm?th^Bob',
        'PatientID',
      ]);
      assert.deepEqual(none.answers, []);
    });

    it('answers SERIES level in both models for a list of Study Instance UIDs', async () => {
      for (const model of ['-S', '-P'] as const) {
        const result = await find(server.port, model, [
          'QueryRetrieveLevel=SERIES',
          `StudyInstanceUID=${STUDY.a1}\\${STUDY.b1}`,
          'SeriesInstanceUID',
          'Modality',
          'NumberOfSeriesRelatedInstances',
        ]);
        assert.equal(result.code, 0, result.output);
        const counts = Object.fromEntries(
          result.answers.map((a) => [String(a.SeriesInstanceUID), Number(a.NumberOfSeriesRelatedInstances)]),
        );
        assert.deepEqual(counts, { [SERIES.a1x]: 2, [SERIES.a1y]: 1, [SERIES.b1x]: 1 });
      }
    });

    it('answers IMAGE level in both models for one series', async () => {
      for (const model of ['-S', '-P'] as const) {
        const result = await find(server.port, model, [
          'QueryRetrieveLevel=IMAGE',
          `SeriesInstanceUID=${SERIES.a1x}`,
          'SOPInstanceUID',
          'SOPClassUID',
          'InstanceNumber',
        ]);
        assert.equal(result.code, 0, result.output);
        assert.deepEqual(result.answers.map((a) => a.SOPInstanceUID).sort(), [sops[0], sops[1]].sort());
      }
    });

    it('answers in the Specific Character Set of the query, whatever the instance was sent in', async () => {
      const result = await find(server.port, '-S', [
        'SpecificCharacterSet=ISO_IR 100',
        'QueryRetrieveLevel=STUDY',
        `StudyInstanceUID=${STUDY.b1}`,
        'PatientName=JONES^ZOE',
      ]);
      assert.equal(result.code, 0, result.output);
      assert.equal(result.answers.length, 1, result.output);
      // dcmjs reports the text it decoded as UTF-8: the bytes are checked.
      const file = result.files[0]!;
      assert.ok(file.includes(Buffer.from('ISO_IR 100', 'latin1')));
      assert.ok(file.includes(Buffer.from('Jones^Zo\xeb', 'latin1')));
      assert.equal(nameOf(result.answers[0]!.PatientName), 'Jones^Zoë');
    });

    it('refuses the PATIENT level in the Study Root model (A900)', async () => {
      const result = await find(server.port, '-S', ['QueryRetrieveLevel=PATIENT', 'PatientID']);
      assert.deepEqual(result.answers, []);
      assert.match(result.output, /DataSetDoesNotMatchSOPClass/);
    });

    it('sends DICOM_QR_MAX_ANSWERS answers, then A700', async () => {
      const result = await find(server.port, '-S', ['QueryRetrieveLevel=IMAGE', 'SOPInstanceUID']);
      assert.equal(result.answers.length, 4);
      assert.match(result.output, /Refused: OutOfResources/);
    });

    it('aborts the association on an identifier of more than 256 elements, answering nothing', async () => {
      const keys = Array.from({ length: 300 }, (_, i) => `(0011,${(0x1000 + i).toString(16)})`);
      const result = await find(server.port, '-S', ['QueryRetrieveLevel=STUDY', ...keys]);
      assert.deepEqual(result.answers, []);
      assert.match(result.output, /Peer aborted Association|A-ABORT/i, result.output.slice(-1500));
    });

    it('rejects the query contexts of a caller not in DICOM_QR_CALLERS, and audits nothing for it', async () => {
      const result = await find(server.port, '-S', ['QueryRetrieveLevel=STUDY', 'StudyInstanceUID'], {
        callingAe: 'DEV',
      });
      assert.notEqual(result.code, 0);
      assert.deepEqual(result.answers, []);
      assert.match(result.output, /No Acceptable Presentation Contexts|rejected/i);
      const rows = await sql<{
        n: number;
      }>`select count(*) as n from ${sql.table('audit_event')} where action = 'dicom.find' and username = 'DEV'`.execute(
        app.db,
      );
      assert.equal(Number(rows.rows[0]!.n), 0);
    });

    it('audits each answer as a read: the AE title, the address, the filed patient', async () => {
      const { rows } = await sql<{
        username: string;
        client_address: string;
        target_type: string;
        target_ids: string;
      }>`
        select username, client_address, target_type, target_ids from ${sql.table('audit_event')}
        where action = 'dicom.find' and username = 'QR' and target_type = 'patient'`.execute(app.db);
      assert.ok(rows.length > 0);
      assert.ok(rows.every((r) => r.client_address === '127.0.0.1'));
      assert.ok(rows.some((r) => String(r.target_ids).includes(String(annPatientId))));
    });
  });
});

/** One instance of the key-path fixture: its patient's tags, then its study, series and instance keys. */
interface MadeInstance {
  readonly patient: Readonly<Record<string, string>>;
  readonly study: string;
  readonly series: string;
  readonly date: string;
  readonly accession: string;
  readonly modality: string;
  readonly seriesNumber: string;
  readonly number: string;
  readonly description: string;
}

/** Stores `files` with `storescu` as STORE. */
async function storeAll(port: number, files: readonly Buffer[]): Promise<void> {
  const dir = await mkdtemp(path.join(tmpdir(), 'cra-qr-store-'));
  try {
    const paths = await Promise.all(
      files.map(async (file, i) => {
        const filePath = path.join(dir, `i${i}.dcm`);
        await writeFile(filePath, file);
        return filePath;
      }),
    );
    const stored = await runDcmtk('storescu', [
      '-aet',
      'STORE',
      '-aec',
      'CRA_TEST',
      '127.0.0.1',
      String(port),
      ...paths,
    ]);
    assert.equal(stored.code, 0, stored.output);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * `file` with its Study Date (0008,0020) in the ACR-NEMA form `YYYY.MM.DD` (dcmjs writes DA as 8
 * characters only): the element's value and length rewritten in the Explicit VR Little Endian data set.
 */
function withDottedStudyDate(file: Buffer): Buffer {
  const header = Buffer.from([0x08, 0x00, 0x20, 0x00, 0x44, 0x41, 0x08, 0x00]);
  const at = file.indexOf(header);
  assert.ok(at > 0, 'a Study Date of 8 characters');
  const value = file.subarray(at + 8, at + 16).toString('latin1');
  const dotted = Buffer.from(`${value.slice(0, 4)}.${value.slice(4, 6)}.${value.slice(6)}`, 'latin1');
  return Buffer.concat([
    file.subarray(0, at + 6),
    Buffer.from([dotted.length, 0x00]),
    dotted,
    file.subarray(at + 16),
  ]);
}

function finalStatus(output: string): string {
  return /Received Final Find Response[^\n]*/.exec(output)?.[0] ?? output.slice(-1500);
}

forEachDialect((dialect) => {
  describe(`Query/Retrieve C-FIND: each way SQL narrows the index (${dialect})`, () => {
    let app: TestApp;
    let server: DicomServer;
    const study = { a1: newUid(), a2: newUid(), b1: newUid(), c1: newUid(), p1: newUid(), p2: newUid() };
    const series = {
      a1x: newUid(),
      a1y: newUid(),
      a2x: newUid(),
      b1x: newUid(),
      c1x: newUid(),
      p1x: newUid(),
    };
    /** Instances of the paging series (more than one page of 200), and DICOM_QR_MAX_ANSWERS. */
    const pageCount = 205;
    const a1xSops: string[] = [];

    /** The values of `keyword` in the answers of a Study Root query (Patient Root at PATIENT level). */
    const answered = async (keys: readonly string[], keyword = 'StudyInstanceUID'): Promise<string[]> => {
      const level = /^QueryRetrieveLevel=(\w+)/.exec(keys[0]!)?.[1];
      // findscu's later `-k` of a tag replaces an earlier one: the answered key is added only when absent.
      const asked = keys.some((k) => k.startsWith(`${keyword}=`)) ? keys : [...keys, keyword];
      const result = await find(server.port, level === 'PATIENT' ? '-P' : '-S', asked);
      assert.match(finalStatus(result.output), /Success/, result.output.slice(-1500));
      return result.answers.map((a) => [a[keyword]].flat().join('\\')).sort();
    };

    before(async () => {
      ({ app, server } = await startDicomTestApp(dialect, 'QR@127.0.0.1,STORE@127.0.0.1', {
        DICOM_QR_CALLERS: 'QR@127.0.0.1',
        DICOM_QR_MAX_ANSWERS: String(pageCount),
        INSTITUTION_CODE: 'NEW',
      }));
      const ann = {
        PatientID: 'DEV-ANN',
        PatientName: 'Smith^Ann',
        PatientBirthDate: '19500304',
        PatientSex: 'F',
      };
      const made: readonly MadeInstance[] = [
        {
          patient: ann,
          study: study.a1,
          series: series.a1x,
          date: '20240101',
          accession: 'ACC-A1',
          modality: 'OP',
          seriesNumber: '1',
          number: '1',
          description: 'Fundus photography',
        },
        {
          patient: ann,
          study: study.a1,
          series: series.a1x,
          date: '20240101',
          accession: 'ACC-A1',
          modality: 'OP',
          seriesNumber: '1',
          number: '2',
          description: 'Fundus photography',
        },
        {
          patient: ann,
          study: study.a1,
          series: series.a1y,
          date: '20240101',
          accession: 'ACC-A1',
          modality: 'OPT',
          seriesNumber: '2',
          number: '1',
          description: 'Fundus photography',
        },
        {
          patient: ann,
          study: study.a2,
          series: series.a2x,
          date: '20240301',
          accession: 'A_1%',
          modality: 'OPV',
          seriesNumber: '1',
          number: '1',
          description: 'Visual fields',
        },
        {
          patient: {
            PatientID: 'DEV-BOB',
            PatientName: 'Jones^Zoë',
            PatientSex: 'M',
            SpecificCharacterSet: 'ISO_IR 192',
          },
          study: study.b1,
          series: series.b1x,
          date: '20240601',
          accession: 'ACC-B1',
          modality: 'OP',
          seriesNumber: '1',
          number: '1',
          description: 'Fundus photography',
        },
        // Sent with an ACR-NEMA date (dots), as older devices send it: see `withDottedStudyDate`.
        {
          patient: { PatientID: 'DEV-OLD', PatientName: 'Old^Row' },
          study: study.c1,
          series: series.c1x,
          date: '20230615',
          accession: 'ACC-C1',
          modality: 'OP',
          seriesNumber: '1',
          number: '1',
          description: 'Fundus photography',
        },
        ...Array.from({ length: pageCount }, (_, i) => ({
          patient: { PatientID: 'DEV-PAGE', PatientName: 'Page^Many' },
          study: study.p1,
          series: series.p1x,
          date: '20220101',
          accession: 'ACC-P1',
          modality: 'OP',
          seriesNumber: '1',
          number: String(i + 1),
          description: 'Paging',
        })),
        {
          patient: { PatientID: 'DEV-PAGE2', PatientName: 'Page^More' },
          study: study.p2,
          series: newUid(),
          date: '20220102',
          accession: 'ACC-P2',
          modality: 'OP',
          seriesNumber: '1',
          number: '1',
          description: 'Paging',
        },
      ];
      await storeAll(
        server.port,
        made.map((m) => {
          const sop = newUid();
          if (m.series === series.a1x) a1xSops.push(sop);
          const build = m.study === study.c1 ? withDottedStudyDate : (file: Buffer) => file;
          return build(
            buildInstance({
              sopInstanceUid: sop,
              studyInstanceUid: m.study,
              pixelBytes: 12,
              tags: {
                ...m.patient,
                SeriesInstanceUID: m.series,
                StudyDate: m.date,
                AccessionNumber: m.accession,
                StudyID: m.accession.slice(-2),
                Modality: m.modality,
                SeriesNumber: m.seriesNumber,
                InstanceNumber: m.number,
                StudyDescription: m.description,
              },
            }),
          );
        }),
      );
      // Ann's study a1 is filed to her record. NEW has two LOCAL types: the one created first (lower id)
      // holds 7000007 but comes second in NEW's display order, so her answered number is 1000001; her NHS
      // number is of the global institution.
      const { institutionId, localTypeId, globalTypeId } = await createStandardInstitutions(app.db, 'NEW');
      const secondLocalTypeId = await createIdentifierType(app.db, {
        institution_id: institutionId,
        usage_type: 'LOCAL',
      });
      await addDisplayOrder(app.db, {
        institution_id: institutionId,
        patient_identifier_type_id: secondLocalTypeId,
        display_order: 1,
      });
      await addDisplayOrder(app.db, {
        institution_id: institutionId,
        patient_identifier_type_id: localTypeId,
        display_order: 2,
      });
      const patient = await createPatient(app.db, { firstName: 'Ann', lastName: 'Smith' });
      await addIdentifier(app.db, patient.patientId, localTypeId, '7000007');
      await addIdentifier(app.db, patient.patientId, secondLocalTypeId, '1000001');
      await addIdentifier(app.db, patient.patientId, globalTypeId, '4505577104');
      await sql`insert into ${sql.table('device_event')} (patient_id, study_instance_uid, event_subtype, model, event_id, created_date, last_modified_date)
        values (${patient.patientId}, ${study.a1}, ${'Fundus Images'}, ${'TEST'}, ${1}, ${'2024-01-01 00:00:00'}, ${'2024-01-01 00:00:00'})`.execute(
        app.db,
      );
      // Study c1 as indexed before its folded name was written (migration 0025 leaves it null).
      await sql`update ${sql.table('dicom_instance_index')} set patient_name_key = null where study_instance_uid = ${study.c1}`.execute(
        app.db,
      );
    });

    after(async () => {
      await server?.stop();
      await app?.close();
    });

    it('matches an exact Patient ID with the number answered for a filed study, else what the device sent', async () => {
      const ids = (keys: readonly string[]) => answered(['QueryRetrieveLevel=STUDY', ...keys]);
      assert.deepEqual(await ids(['PatientID=1000001']), [study.a1]);
      // Her other LOCAL number and her NHS number are not what C-FIND answers: they find nothing.
      assert.deepEqual(await ids(['PatientID=7000007']), []);
      assert.deepEqual(await ids(['PatientID=4505577104']), []);
      assert.deepEqual(await ids(['PatientID=DEV-ANN']), [study.a2]);
      assert.deepEqual(await ids(['PatientID=dev-ann']), [], 'a Patient ID is matched with its case');
      assert.deepEqual(
        await answered(['QueryRetrieveLevel=STUDY', `StudyInstanceUID=${study.a1}`], 'PatientID'),
        ['1000001'],
      );
    });

    it('intersects an exact Patient ID with a list of Study Instance UIDs', async () => {
      assert.deepEqual(
        await answered([
          'QueryRetrieveLevel=STUDY',
          'PatientID=DEV-ANN',
          `StudyInstanceUID=${study.a1}\\${study.a2}\\${study.b1}`,
        ]),
        [study.a2],
      );
      assert.deepEqual(
        await answered(['QueryRetrieveLevel=STUDY', 'PatientID=1000001', `StudyInstanceUID=${study.a2}`]),
        [],
      );
    });

    it('matches a Patient ID wildcard with the filed number and with what the device sent', async () => {
      assert.deepEqual(await answered(['QueryRetrieveLevel=STUDY', 'PatientID=10000*']), [study.a1]);
      assert.deepEqual(await answered(['QueryRetrieveLevel=STUDY', 'PatientID=1?00001']), [study.a1]);
      assert.deepEqual(await answered(['QueryRetrieveLevel=STUDY', 'PatientID=70000*']), []);
      assert.deepEqual(
        await answered(['QueryRetrieveLevel=STUDY', 'PatientID=DEV-*']),
        [study.a2, study.b1, study.c1, study.p1, study.p2].sort(),
      );
    });

    it('answers a list of Study Instance UIDs at STUDY level, an unknown UID matching nothing', async () => {
      assert.deepEqual(
        await answered([
          'QueryRetrieveLevel=STUDY',
          `StudyInstanceUID=${study.a1}\\${study.b1}\\${newUid()}`,
        ]),
        [study.a1, study.b1].sort(),
      );
    });

    it('matches a Study Date as a single value and as ranges, bounds included, ACR-NEMA dates too', async () => {
      const dates = (value: string) => answered(['QueryRetrieveLevel=STUDY', `StudyDate=${value}`]);
      assert.deepEqual(await dates('20240301'), [study.a2]);
      assert.deepEqual(await dates('20240301-'), [study.a2, study.b1].sort());
      assert.deepEqual(await dates('-20240101'), [study.a1, study.c1, study.p1, study.p2].sort());
      assert.deepEqual(await dates('20240102-20240531'), [study.a2]);
      assert.deepEqual(await dates('20230615'), [study.c1]);
      assert.deepEqual(await dates('2024.03.01'), [study.a2]);
    });

    it('matches a Patient Birth Date range at PATIENT level, each Patient ID answered once', async () => {
      assert.deepEqual(
        await answered(['QueryRetrieveLevel=PATIENT', 'PatientBirthDate=19500101-19501231'], 'PatientID'),
        ['1000001', 'DEV-ANN'],
      );
      assert.deepEqual(await answered(['QueryRetrieveLevel=PATIENT'], 'PatientID'), [
        '1000001',
        'DEV-ANN',
        'DEV-BOB',
        'DEV-OLD',
        'DEV-PAGE',
        'DEV-PAGE2',
      ]);
    });

    it("matches a Patient's Name exactly and by wildcard, without case or accents", async () => {
      const names = (value: string) => answered(['QueryRetrieveLevel=STUDY', `PatientName=${value}`]);
      assert.deepEqual(await names('smith^ann'), [study.a1, study.a2].sort());
      assert.deepEqual(await names('JONES^ZOE'), [study.b1]);
      assert.deepEqual(await names('jon*'), [study.b1]);
      assert.deepEqual(
        await answered(['QueryRetrieveLevel=STUDY', 'SpecificCharacterSet=ISO_IR 192', 'PatientName=*^Zoë']),
        [study.b1],
      );
      assert.deepEqual(await names('Smith'), []);
    });

    it('matches the name of a row indexed before its folded name was written', async () => {
      const names = (value: string) => answered(['QueryRetrieveLevel=STUDY', `PatientName=${value}`]);
      assert.deepEqual(await names('OLD^ROW'), [study.c1]);
      assert.deepEqual(await names('ol?^*'), [study.c1]);
    });

    it("matches an Accession Number exactly and by wildcard, LIKE's own characters as themselves", async () => {
      const accessions = (value: string) =>
        answered(['QueryRetrieveLevel=STUDY', `AccessionNumber=${value}`]);
      assert.deepEqual(await accessions('ACC-A1'), [study.a1]);
      assert.deepEqual(await accessions('ACC-?1'), [study.a1, study.b1, study.c1, study.p1].sort());
      assert.deepEqual(await accessions('A_1%'), [study.a2]);
      assert.deepEqual(await accessions('A_1*'), [study.a2]);
      assert.deepEqual(await accessions('ACC_A1'), []);
    });

    it('matches the Modality at SERIES level, with the study key above it', async () => {
      const modality = (keys: readonly string[]) =>
        answered(['QueryRetrieveLevel=SERIES', ...keys], 'SeriesInstanceUID');
      assert.deepEqual(await modality(['Modality=OPT']), [series.a1y]);
      assert.deepEqual(await modality(['Modality=OP', `StudyInstanceUID=${study.a1}`]), [series.a1x]);
      assert.deepEqual(await modality(['Modality=OP?']), [series.a1y, series.a2x].sort());
      assert.deepEqual(await modality(['Modality=OP', 'PatientName=Smith^Ann']), [series.a1x]);
    });

    it('matches the other text keys: Study ID, Study Description, Series Number, Instance Number, SOP Class UID', async () => {
      assert.deepEqual(await answered(['QueryRetrieveLevel=STUDY', 'StudyID=B1']), [study.b1]);
      assert.deepEqual(await answered(['QueryRetrieveLevel=STUDY', 'StudyDescription=Visual*']), [study.a2]);
      assert.deepEqual(
        await answered(
          ['QueryRetrieveLevel=SERIES', `StudyInstanceUID=${study.a1}`, 'SeriesNumber=2'],
          'SeriesInstanceUID',
        ),
        [series.a1y],
      );
      assert.deepEqual(
        await answered(
          ['QueryRetrieveLevel=IMAGE', `SeriesInstanceUID=${series.a1x}`, 'InstanceNumber=2'],
          'SOPInstanceUID',
        ),
        [a1xSops[1]!],
      );
      assert.deepEqual(
        await answered(
          [
            'QueryRetrieveLevel=IMAGE',
            `SeriesInstanceUID=${series.a1x}`,
            'SOPClassUID=1.2.840.10008.5.1.4.1.1.7',
          ],
          'SOPInstanceUID',
        ),
        [...a1xSops].sort(),
      );
      assert.deepEqual(
        await answered(
          [
            'QueryRetrieveLevel=IMAGE',
            `SeriesInstanceUID=${series.a1x}`,
            'SOPClassUID=1.2.840.10008.5.1.4.1.1.77.1.5.1',
          ],
          'SOPInstanceUID',
        ),
        [],
      );
    });

    it('answers a universal STUDY query with every study and its counts', async () => {
      const result = await find(server.port, '-S', [
        'QueryRetrieveLevel=STUDY',
        'StudyInstanceUID',
        'NumberOfStudyRelatedInstances',
      ]);
      assert.match(finalStatus(result.output), /Success/);
      const counts = Object.fromEntries(
        result.answers.map((a) => [String(a.StudyInstanceUID), Number(a.NumberOfStudyRelatedInstances)]),
      );
      assert.deepEqual(counts, {
        [study.a1]: 3,
        [study.a2]: 1,
        [study.b1]: 1,
        [study.c1]: 1,
        [study.p1]: pageCount,
        [study.p2]: 1,
      });
    });

    it('answers IMAGE level over more than one page: DICOM_QR_MAX_ANSWERS matches in full, one more ends with A700', async () => {
      const exact = await find(server.port, '-S', [
        'QueryRetrieveLevel=IMAGE',
        'PatientID=DEV-PAGE',
        'SOPInstanceUID',
        'InstanceNumber',
      ]);
      assert.match(finalStatus(exact.output), /Success/, exact.output.slice(-1500));
      assert.equal(exact.answers.length, pageCount);
      assert.equal(new Set(exact.answers.map((a) => a.SOPInstanceUID)).size, pageCount, 'each instance once');
      const over = await find(server.port, '-S', [
        'QueryRetrieveLevel=IMAGE',
        'PatientID=DEV-PAGE*',
        'SOPInstanceUID',
      ]);
      assert.match(finalStatus(over.output), /OutOfResources/, over.output.slice(-1500));
      assert.equal(over.answers.length, pageCount);
      const universal = await find(server.port, '-S', ['QueryRetrieveLevel=IMAGE', 'SOPInstanceUID']);
      assert.match(finalStatus(universal.output), /OutOfResources/);
      assert.equal(new Set(universal.answers.map((a) => a.SOPInstanceUID)).size, pageCount);
    });
  });
});

forEachDialect((dialect) => {
  describe(`Query/Retrieve C-FIND CANCEL (${dialect})`, () => {
    let app: TestApp;
    let server: DicomServer;
    const study = newUid();
    const count = 300;

    before(async () => {
      ({ app, server } = await startDicomTestApp(dialect, 'QR@127.0.0.1,STORE@127.0.0.1', {
        DICOM_QR_CALLERS: 'QR@127.0.0.1',
      }));
      const dir = await mkdtemp(path.join(tmpdir(), 'cra-qr-store-'));
      try {
        const files: string[] = [];
        for (let i = 0; i < count; i += 1) {
          const file = path.join(dir, `i${i}.dcm`);
          await writeFile(file, buildInstance({ studyInstanceUid: study, pixelBytes: 12 }));
          files.push(file);
        }
        const stored = await runDcmtk('storescu', [
          '-aet',
          'STORE',
          '-aec',
          'CRA_TEST',
          '127.0.0.1',
          String(server.port),
          ...files,
        ]);
        assert.equal(stored.code, 0, stored.output);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });

    after(async () => {
      await server?.stop();
      await app?.close();
    });

    it('stops the answers at a C-CANCEL-RQ and ends with FE00', async () => {
      const result = await find(
        server.port,
        '-S',
        ['QueryRetrieveLevel=IMAGE', `StudyInstanceUID=${study}`, 'SOPInstanceUID'],
        { extra: ['--cancel', '1'] },
      );
      assert.match(result.output, /Received Final Find Response \(Cancel/, result.output.slice(-2000));
      assert.ok(
        result.answers.length >= 1 && result.answers.length < count,
        `${result.answers.length} answers`,
      );
    });
  });
});
