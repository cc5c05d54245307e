/**
 * The Query/Retrieve C-FIND SCP on the DICOM port, asked by dcmtk's `findscu -P` and `findscu -S` about
 * instances stored with `storescu`: each level of both models, wildcards, date ranges, UID lists, the
 * filed patient's identifier as Patient ID, the answer cap, a caller not in DICOM_QR_CALLERS,
 * and the audit rows.
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
import { addIdentifier, createStandardInstitutions } from '../../../test/factories-patient.ts';
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
