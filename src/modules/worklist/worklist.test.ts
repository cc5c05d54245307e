/**
 * The Modality Worklist C-FIND SCP on the DICOM port, asked by dcmtk's `findscu -W`: the answers' values
 * for the bookings of OpenEyes's worklist tables (patient, identifiers, the ids handed out once, the step
 * in TIME_ZONE), the matching rules, character sets, stations, the cap, C-CANCEL, and hostile identifiers.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createStandardInstitutions, addIdentifier } from '../../../test/factories-patient.ts';
import { countRows, createPatient } from '../../../test/factories.ts';
import { startDicomTestApp } from '../../../test/dicom-receiving.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect } from '../../../test/harness.ts';
import {
  createBooking,
  createWorklist,
  dumpToDicom,
  findWorklist,
  itemOf,
  nameOf,
} from '../../../test/worklist-fixtures.ts';
import { createAppServices } from '../../app-services.ts';
import { loadConfig } from '../../config.ts';
import { createLogger } from '../../logger.ts';
import type { DicomServer } from '../dicom-receive/index.ts';
import { startDicomServer } from '../dicom-receive/index.ts';

const DAY = '2026-07-15';
/** The step keys a broad query of the day asks for. */
const STEP_KEYS = [
  'ScheduledProcedureStepSequence[0].ScheduledProcedureStepStartDate=20260715',
  'ScheduledProcedureStepSequence[0].ScheduledProcedureStepStartTime',
  'ScheduledProcedureStepSequence[0].Modality',
  'ScheduledProcedureStepSequence[0].ScheduledStationAETitle',
  'ScheduledProcedureStepSequence[0].ScheduledProcedureStepID',
  'ScheduledProcedureStepSequence[0].ScheduledProcedureStepDescription',
];
const PATIENT_KEYS = [
  'PatientName',
  'PatientID',
  'IssuerOfPatientID',
  'PatientBirthDate',
  'PatientSex',
  'AccessionNumber',
  'RequestedProcedureID',
  'StudyInstanceUID',
  'ReferringPhysicianName',
  'RequestedProcedureDescription',
  'OtherPatientIDsSequence',
];

interface Fixture {
  app: TestApp;
  server: DicomServer;
  bookings: { ann: number; jose: number; late: number; other: number };
}

/**
 * The day's worklist "Cataract clinic" (hospital numbers) with Ann Smith at 10:30 and José Müller at
 * 14:05 local time (Europe/London, BST), a booking of Ann the next day, one in "Glaucoma clinic", and
 * bookings that are no entry: a patient without a hospital number, a deleted patient, a manual worklist.
 */
async function setUp(app: TestApp): Promise<Fixture['bookings']> {
  const db = app.db;
  const { localTypeId, globalTypeId } = await createStandardInstitutions(db, 'NEW');
  const cataract = await createWorklist(db, {
    typeId: localTypeId,
    name: 'Cataract clinic',
    day: DAY,
    attributes: ['Clinic', 'Doctor'],
  });
  const glaucoma = await createWorklist(db, { typeId: localTypeId, name: 'Glaucoma clinic', day: DAY });
  const ann = await createPatient(db, {
    firstName: 'Ann Marie',
    lastName: 'Smith',
    title: 'Mrs',
    patient: { dob: '1950-03-04', gender: 'F' },
  });
  await addIdentifier(db, ann.patientId, localTypeId, '1000001');
  await addIdentifier(db, ann.patientId, globalTypeId, '4505577104');
  const jose = await createPatient(db, {
    firstName: 'José',
    lastName: 'Müller',
    patient: { dob: '1961-12-31', gender: 'M' },
  });
  await addIdentifier(db, jose.patientId, localTypeId, '1000002');
  const nobody = await createPatient(db, { lastName: 'Nonumber' });
  const deleted = await createPatient(db, { lastName: 'Deleted', patient: { deleted: 1 } });
  await addIdentifier(db, deleted.patientId, localTypeId, '1000009');

  const doctor = cataract.attributeIds.get('Doctor')!;
  const bookings = {
    ann: await createBooking(db, {
      worklistId: cataract.worklistId,
      patientId: ann.patientId,
      whenUtc: `${DAY}T09:30:00Z`,
      attributes: new Map([[doctor, 'Mr A Surgeon']]),
    }),
    jose: await createBooking(db, {
      worklistId: cataract.worklistId,
      patientId: jose.patientId,
      whenUtc: `${DAY}T13:05:00Z`,
    }),
    late: await createBooking(db, {
      worklistId: cataract.worklistId,
      patientId: ann.patientId,
      whenUtc: '2026-07-16T08:00:00Z',
    }),
    other: await createBooking(db, {
      worklistId: glaucoma.worklistId,
      patientId: jose.patientId,
      whenUtc: `${DAY}T15:00:00Z`,
    }),
  };
  await createBooking(db, {
    worklistId: cataract.worklistId,
    patientId: nobody.patientId,
    whenUtc: `${DAY}T11:00:00Z`,
  });
  await createBooking(db, {
    worklistId: cataract.worklistId,
    patientId: deleted.patientId,
    whenUtc: `${DAY}T11:00:00Z`,
  });
  const manual = await db
    .insertInto('worklist')
    .values({ name: 'Manual list', start: `${DAY} 08:00:00`, end: `${DAY} 17:00:00` })
    .returning('id')
    .executeTakeFirstOrThrow();
  await createBooking(db, { worklistId: manual.id, patientId: ann.patientId, whenUtc: `${DAY}T12:00:00Z` });
  return bookings;
}

/** The answers' values of one attribute, sorted. */
function valuesOf(answers: readonly Record<string, unknown>[], keyword: string): string[] {
  return answers
    .map((a) => {
      const value = a[keyword];
      return typeof value === 'string' || typeof value === 'number' ? String(value) : '';
    })
    .sort();
}

forEachDialect((dialect) => {
  describe(`Modality Worklist C-FIND (${dialect})`, () => {
    let fixture: Fixture;
    let dir: string;

    before(async () => {
      dir = await mkdtemp(path.join(tmpdir(), 'cra-mwl-test-'));
      const { app, server } = await startDicomTestApp(dialect, 'DEV@127.0.0.1,OCT1@127.0.0.1', {
        TIME_ZONE: 'Europe/London',
      });
      fixture = { app, server, bookings: await setUp(app) };
    });

    /** A second SCP on the same database with other worklist settings (stations, cap). */
    async function startScp(worklist: Partial<TestApp['config']['worklist']>): Promise<DicomServer> {
      return startDicomServer({
        database: fixture.app.database,
        config: { ...fixture.app.config, worklist: { ...fixture.app.config.worklist, ...worklist } },
        logger: createLogger('silent'),
        ...createAppServices(fixture.app.deps),
      });
    }

    after(async () => {
      await fixture.server.stop(1000);
      await fixture.app.close();
      await rm(dir, { recursive: true, force: true });
    });

    it("answers the day's entries with the patient, the ids handed out and the step in TIME_ZONE", async () => {
      const { answers, code, output } = await findWorklist(fixture.server.port, {
        keys: [...PATIENT_KEYS, ...STEP_KEYS, 'ScheduledProcedureStepSequence[0].Modality=OAM'],
      });
      assert.equal(code, 0, output);
      assert.match(output, /Received Final Find Response \(Success\)/);
      // Ann and José in the Cataract clinic, José in the Glaucoma clinic; not tomorrow's booking, the
      // patient without a hospital number, the deleted patient or the manual worklist.
      assert.equal(answers.length, 3, output);
      const accessions = valuesOf(answers, 'AccessionNumber');
      const { ann, jose, other } = fixture.bookings;
      assert.deepEqual(accessions, [String(ann), String(jose), String(other)].sort());

      const annAnswer = answers.find((a) => a.AccessionNumber === String(ann))!;
      assert.equal(nameOf(annAnswer.PatientName), 'Smith^Ann^Marie^Mrs');
      assert.equal(annAnswer.PatientID, '1000001');
      assert.equal(annAnswer.IssuerOfPatientID, 'NEW');
      assert.equal(annAnswer.PatientBirthDate, '19500304');
      assert.equal(annAnswer.PatientSex, 'F');
      assert.equal(annAnswer.RequestedProcedureID, String(ann));
      assert.match(String(annAnswer.StudyInstanceUID), /^2\.25\.[1-9]\d{0,38}$/);
      assert.equal(nameOf(annAnswer.ReferringPhysicianName), 'Mr A Surgeon');
      assert.equal(annAnswer.RequestedProcedureDescription, 'Cataract clinic');
      const other1 = itemOf(annAnswer.OtherPatientIDsSequence);
      assert.equal(other1.PatientID, '4505577104');
      assert.equal(other1.IssuerOfPatientID, 'NHS');
      const annStep = itemOf(annAnswer.ScheduledProcedureStepSequence);
      assert.equal(annStep.ScheduledProcedureStepStartDate, '20260715');
      // 09:30 UTC is 10:30 in London in July (BST).
      assert.equal(annStep.ScheduledProcedureStepStartTime, '103000');
      assert.equal(annStep.Modality, 'OAM');
      assert.equal(annStep.ScheduledStationAETitle, 'DEV');
      assert.equal(annStep.ScheduledProcedureStepID, String(ann));
      assert.equal(annStep.ScheduledProcedureStepDescription, 'Cataract clinic');

      const joseAnswer = answers.find((a) => a.AccessionNumber === String(jose))!;
      assert.equal(nameOf(joseAnswer.PatientName), 'Müller^José');
      assert.equal(joseAnswer.PatientSex, 'M');
      assert.equal(nameOf(joseAnswer.ReferringPhysicianName), '');
      assert.deepEqual(joseAnswer.OtherPatientIDsSequence ?? [], []);
      assert.equal(
        itemOf(joseAnswer.ScheduledProcedureStepSequence).ScheduledProcedureStepStartTime,
        '140500',
      );
      assert.notEqual(joseAnswer.StudyInstanceUID, annAnswer.StudyInstanceUID);
    });

    it('hands out the same Study Instance UID and accession number for an entry on every query', async () => {
      const keys = ['AccessionNumber', 'StudyInstanceUID', ...STEP_KEYS];
      const first = await findWorklist(fixture.server.port, { keys });
      const again = await findWorklist(fixture.server.port, { keys, callingAe: 'OCT1' });
      const pairs = (r: typeof first) =>
        r.answers.map((a) => `${String(a.AccessionNumber)} ${String(a.StudyInstanceUID)}`).sort();
      assert.equal(first.answers.length, 3, first.output);
      assert.deepEqual(pairs(again), pairs(first));
      // One row per entry answered: the three of today, none for the bookings that are no entry.
      assert.equal(await countRows(fixture.app.db, 'mwl_entry' as never), 3);
      const byUid = await findWorklist(fixture.server.port, {
        keys: ['AccessionNumber', `StudyInstanceUID=${String(first.answers[0]!.StudyInstanceUID)}`],
      });
      assert.deepEqual(valuesOf(byUid.answers, 'AccessionNumber'), [
        String(first.answers[0]!.AccessionNumber),
      ]);
    });

    it('matches names without regard to case or accents, with wildcards, and ids exactly', async () => {
      const accessionsFor = async (...keys: string[]) =>
        valuesOf(
          (await findWorklist(fixture.server.port, { keys: ['AccessionNumber', ...keys] })).answers,
          'AccessionNumber',
        );
      const { ann, jose, late, other } = fixture.bookings;
      assert.deepEqual(await accessionsFor('PatientName=smith*'), [String(ann), String(late)].sort());
      assert.deepEqual(await accessionsFor('PatientName=MULLER^JOSE'), [String(jose), String(other)].sort());
      assert.deepEqual(await accessionsFor('PatientName=M?LLER*'), [String(jose), String(other)].sort());
      assert.deepEqual(await accessionsFor('PatientName=Smith'), []);
      assert.deepEqual(await accessionsFor('PatientID=1000002'), [String(jose), String(other)].sort());
      assert.deepEqual(await accessionsFor('PatientID=10000?1'), [String(ann), String(late)].sort());
      assert.deepEqual(await accessionsFor('PatientID=100000'), []);
      assert.deepEqual(await accessionsFor(`AccessionNumber=${ann}`), [String(ann)]);
      assert.deepEqual(
        await accessionsFor('PatientBirthDate=19600101-19611231'),
        [String(jose), String(other)].sort(),
      );
      assert.deepEqual(await accessionsFor('PatientSex=F'), [String(ann), String(late)].sort());
    });

    it('matches the step date and time as single values and ranges, apart', async () => {
      const accessionsFor = async (date: string, time: string) =>
        valuesOf(
          (
            await findWorklist(fixture.server.port, {
              keys: [
                'AccessionNumber',
                `ScheduledProcedureStepSequence[0].ScheduledProcedureStepStartDate=${date}`,
                `ScheduledProcedureStepSequence[0].ScheduledProcedureStepStartTime=${time}`,
              ],
            })
          ).answers,
          'AccessionNumber',
        );
      const { ann, jose, late, other } = fixture.bookings;
      const all = [ann, jose, late, other].map(String).sort();
      assert.deepEqual(await accessionsFor('', ''), all);
      assert.deepEqual(await accessionsFor('20260716', ''), [String(late)]);
      assert.deepEqual(await accessionsFor('20260716-', ''), [String(late)]);
      assert.deepEqual(await accessionsFor('-20260715', ''), [ann, jose, other].map(String).sort());
      assert.deepEqual(
        await accessionsFor('20260715-20260716', '0900-1100'),
        [String(ann), String(late)].sort(),
      );
      assert.deepEqual(await accessionsFor('20260715', '14-'), [String(jose), String(other)].sort());
      assert.deepEqual(await accessionsFor('20260715', '103000'), [String(ann)]);
      assert.deepEqual(await accessionsFor('20260714', ''), []);
    });

    it('decodes the query in its character set and answers in it (ISO_IR 192 and ISO_IR 100)', async () => {
      const utf8 = await findWorklist(fixture.server.port, {
        keys: ['SpecificCharacterSet=ISO_IR 192', 'PatientName=Müller*', 'AccessionNumber'],
      });
      assert.deepEqual(
        valuesOf(utf8.answers, 'AccessionNumber'),
        [fixture.bookings.jose, fixture.bookings.other].map(String).sort(),
      );
      for (const file of utf8.files) {
        assert.ok(file.includes(Buffer.from('ISO_IR 192')), 'answer names ISO_IR 192');
        assert.ok(file.includes(Buffer.from('Müller^José', 'utf8')), 'name in UTF-8');
      }
      const latin1Query = await dumpToDicom(
        dir,
        'latin1.dcm',
        ['(0008,0005) CS [ISO_IR 100]', '(0010,0010) PN [MÜLLER*]', '(0008,0050) SH []'],
        'latin1',
      );
      const latin1 = await findWorklist(fixture.server.port, { queryFile: latin1Query });
      assert.equal(latin1.answers.length, 2, latin1.output);
      for (const file of latin1.files) {
        assert.ok(file.includes(Buffer.from('ISO_IR 100')), 'answer names ISO_IR 100');
        assert.ok(file.includes(Buffer.from('Müller^José', 'latin1')), 'name in Latin-1');
        assert.ok(!file.includes(Buffer.from('ü', 'utf8')), 'no UTF-8 bytes');
      }
      // No character set in the query: the default (ISO_IR 100) is named in the answer, which needs one.
      const plain = await findWorklist(fixture.server.port, {
        keys: ['PatientName=MULLER*', 'AccessionNumber'],
      });
      assert.ok(plain.files.every((f) => f.includes(Buffer.from('ISO_IR 100'))));
      // An answer all in ASCII names no character set.
      const ascii = await findWorklist(fixture.server.port, { keys: ['PatientName=SMITH*', 'PatientID'] });
      assert.ok(ascii.files.every((f) => !f.includes(Buffer.from('ISO_IR'))));
      const unsupported = await findWorklist(fixture.server.port, {
        keys: ['SpecificCharacterSet=ISO 2022 IR 87', 'PatientName'],
      });
      assert.equal(unsupported.answers.length, 0);
      assert.match(unsupported.output, /Final Find Response \(Failed: UnableToProcess\)/);
    });

    it('refuses an identifier too large, of too many elements or nested too deep, and answers the next', async () => {
      const before = await countRows(fixture.app.db, 'mwl_entry' as never);
      const big = await dumpToDicom(dir, 'big.dcm', [
        `(0010,4000) LT [${'x'.repeat(17_000)}]`,
        '(0010,0020) LO []',
      ]);
      const items = Array.from({ length: 300 }, () => [
        '(fffe,e000) na',
        '(0010,0020) LO []',
        '(fffe,e00d) na',
      ]).flat();
      const many = await dumpToDicom(dir, 'many.dcm', [
        '(0010,1002) SQ',
        ...items,
        '(fffe,e0dd) na',
        '(0010,0020) LO []',
      ]);
      const deep = await dumpToDicom(dir, 'deep.dcm', [
        '(0040,0100) SQ',
        '(fffe,e000) na',
        '(0040,0008) SQ',
        '(fffe,e000) na',
        '(0040,0440) SQ',
        '(fffe,e000) na',
        '(0040,a168) SQ',
        '(fffe,e000) na',
        '(0008,0100) SH []',
        '(fffe,e00d) na',
        '(fffe,e0dd) na',
        '(fffe,e00d) na',
        '(fffe,e0dd) na',
        '(fffe,e00d) na',
        '(fffe,e0dd) na',
        '(fffe,e00d) na',
        '(fffe,e0dd) na',
      ]);
      for (const queryFile of [big, many, deep]) {
        const refused = await findWorklist(fixture.server.port, { queryFile });
        assert.equal(refused.answers.length, 0, refused.output);
        assert.match(refused.output, /abort/i, refused.output);
      }
      assert.equal(await countRows(fixture.app.db, 'mwl_entry' as never), before);
      const next = await findWorklist(fixture.server.port, {
        keys: ['PatientID=1000001', 'AccessionNumber'],
      });
      assert.equal(next.answers.length, 2, next.output);
    });

    it("shows a station only its definitions' bookings, with its modality, AE title and name", async () => {
      const glaucoma = await fixture.app.db
        .selectFrom('worklist_definition')
        .select('id')
        .where('name', '=', 'Glaucoma clinic')
        .executeTakeFirstOrThrow();
      const scp = await startScp({
        stations: [
          {
            aeTitle: 'OCT1',
            modality: 'OPT',
            stationName: 'OCT room 1',
            worklistDefinitionIds: [glaucoma.id],
          },
        ],
      });
      try {
        const keys = [
          'AccessionNumber',
          'ScheduledProcedureStepSequence[0].Modality',
          'ScheduledProcedureStepSequence[0].ScheduledStationAETitle',
          'ScheduledProcedureStepSequence[0].ScheduledStationName',
        ];
        const station = await findWorklist(scp.port, { keys, callingAe: 'OCT1' });
        assert.deepEqual(valuesOf(station.answers, 'AccessionNumber'), [String(fixture.bookings.other)]);
        const step = itemOf(station.answers[0]!.ScheduledProcedureStepSequence);
        assert.deepEqual(
          [step.Modality, step.ScheduledStationAETitle, step.ScheduledStationName],
          ['OPT', 'OCT1', 'OCT room 1'],
        );
        // The station's modality is matched: a query for another modality finds nothing.
        const otherModality = await findWorklist(scp.port, {
          keys: ['AccessionNumber', 'ScheduledProcedureStepSequence[0].Modality=OAM'],
          callingAe: 'OCT1',
        });
        assert.equal(otherModality.answers.length, 0);
        // A caller without a station sees every worklist; the modality and AE title it sends exclude nothing.
        const stationless = await findWorklist(scp.port, {
          keys: [
            'AccessionNumber',
            'ScheduledProcedureStepSequence[0].Modality=XX',
            'ScheduledProcedureStepSequence[0].ScheduledStationAETitle=NOTME',
          ],
        });
        assert.equal(stationless.answers.length, 4, stationless.output);
      } finally {
        await scp.stop(1000);
      }
    });

    it('sends at most DICOM_WORKLIST_MAX_ANSWERS answers, then A700', async () => {
      const scp = await startScp({ maxAnswers: 2 });
      try {
        const capped = await findWorklist(scp.port, { keys: ['AccessionNumber'] });
        assert.equal(capped.answers.length, 2, capped.output);
        assert.match(capped.output, /Received Final Find Response \(Refused: OutOfResources\)/);
        const narrow = await findWorklist(scp.port, { keys: ['AccessionNumber', 'PatientID=1000002'] });
        assert.equal(narrow.answers.length, 2);
        assert.match(narrow.output, /Received Final Find Response \(Success\)/);
      } finally {
        await scp.stop(1000);
      }
    });

    it('stops the answers at a C-CANCEL-RQ and ends with status FE00', async () => {
      const { localTypeId } = await fixture.app.db
        .selectFrom('worklist_definition')
        .select('patient_identifier_type_id as localTypeId')
        .where('name', '=', 'Cataract clinic')
        .executeTakeFirstOrThrow();
      const busy = await createWorklist(fixture.app.db, {
        typeId: localTypeId,
        name: 'Busy clinic',
        day: '2026-08-03',
      });
      const patient = await createPatient(fixture.app.db, { lastName: 'Busy' });
      await addIdentifier(fixture.app.db, patient.patientId, localTypeId, '2000001');
      for (let i = 0; i < 600; i += 1)
        await createBooking(fixture.app.db, {
          worklistId: busy.worklistId,
          patientId: patient.patientId,
          whenUtc: '2026-08-03T09:00:00Z',
        });
      const cancelled = await findWorklist(fixture.server.port, {
        keys: [
          'AccessionNumber',
          'ScheduledProcedureStepSequence[0].ScheduledProcedureStepStartDate=20260803',
        ],
        extra: ['--cancel', '1'],
      });
      assert.match(cancelled.output, /Received Final Find Response \(Cancel/, cancelled.output.slice(-2000));
      assert.ok(
        cancelled.answers.length >= 1 && cancelled.answers.length < 600,
        `${cancelled.answers.length} answers`,
      );
    });

    it("narrows by Patient ID in the database with LIKE's own characters taken literally", async () => {
      const { localTypeId } = await fixture.app.db
        .selectFrom('worklist_definition')
        .select('patient_identifier_type_id as localTypeId')
        .where('name', '=', 'Cataract clinic')
        .executeTakeFirstOrThrow();
      const list = await createWorklist(fixture.app.db, {
        typeId: localTypeId,
        name: 'Odd ids clinic',
        day: '2026-09-01',
      });
      const ids = ['AB_!%9', 'ABx!%9', 'AB_!x9', 'AB%!%9'];
      const bookings = new Map<string, number>();
      for (const id of ids) {
        const patient = await createPatient(fixture.app.db, { lastName: 'Oddid' });
        await addIdentifier(fixture.app.db, patient.patientId, localTypeId, id);
        bookings.set(
          id,
          await createBooking(fixture.app.db, {
            worklistId: list.worklistId,
            patientId: patient.patientId,
            whenUtc: '2026-09-01T10:00:00Z',
          }),
        );
      }
      const idsFor = async (patientId: string) =>
        valuesOf(
          (
            await findWorklist(fixture.server.port, {
              keys: ['AccessionNumber', `PatientID=${patientId}`],
            })
          ).answers,
          'AccessionNumber',
        );
      const accession = (...of: string[]) => of.map((id) => String(bookings.get(id))).sort();
      // `_`, `%` and `!` (the escape) are the identifier's characters; only `*` and `?` are wildcards.
      assert.deepEqual(await idsFor('AB_!%9'), accession('AB_!%9'));
      assert.deepEqual(await idsFor('AB_!%*'), accession('AB_!%9'));
      assert.deepEqual(await idsFor('AB?!%9'), accession('AB_!%9', 'ABx!%9', 'AB%!%9'));
      assert.deepEqual(await idsFor('AB_!?9'), accession('AB_!%9', 'AB_!x9'));
      assert.deepEqual(await idsFor('AB_*'), accession('AB_!%9', 'AB_!x9'));
      assert.deepEqual(await idsFor('ab_!%9'), [], 'a Patient ID matches in its own case');
    });

    it("gives the step's local time either side of TIME_ZONE's clock changes", async () => {
      const { localTypeId } = await fixture.app.db
        .selectFrom('worklist_definition')
        .select('patient_identifier_type_id as localTypeId')
        .where('name', '=', 'Cataract clinic')
        .executeTakeFirstOrThrow();
      const patient = await createPatient(fixture.app.db, { lastName: 'Clockchange' });
      await addIdentifier(fixture.app.db, patient.patientId, localTypeId, '3000001');
      // London: BST ends 2026-10-25 at 01:00 UTC, begins 2026-03-29 at 01:00 UTC.
      const cases = [
        ['2026-10-25T00:59:00Z', '20261025', '015900'],
        ['2026-10-25T01:00:00Z', '20261025', '010000'],
        ['2026-10-25T01:14:59Z', '20261025', '011459'],
        ['2026-03-29T00:59:59Z', '20260329', '005959'],
        ['2026-03-29T01:00:00Z', '20260329', '020000'],
        ['2026-03-28T23:30:00Z', '20260328', '233000'],
      ] as const;
      for (const [whenUtc, day] of cases) {
        const list = await createWorklist(fixture.app.db, {
          typeId: localTypeId,
          name: `Clock ${whenUtc}`,
          day: `${day.slice(0, 4)}-${day.slice(4, 6)}-${day.slice(6, 8)}`,
        });
        await createBooking(fixture.app.db, {
          worklistId: list.worklistId,
          patientId: patient.patientId,
          whenUtc,
        });
      }
      const { answers, output } = await findWorklist(fixture.server.port, {
        keys: [
          'PatientID=3000001',
          'ScheduledProcedureStepSequence[0].ScheduledProcedureStepStartDate',
          'ScheduledProcedureStepSequence[0].ScheduledProcedureStepStartTime',
        ],
      });
      const steps = answers
        .map((a) => {
          const step = itemOf(a.ScheduledProcedureStepSequence);
          return `${String(step.ScheduledProcedureStepStartDate)} ${String(step.ScheduledProcedureStepStartTime)}`;
        })
        .sort();
      assert.deepEqual(steps, cases.map(([, day, time]) => `${day} ${time}`).sort(), output.slice(-1500));
    });
  });
});

describe('DICOM_WORKLIST_STATIONS_FILE', () => {
  it('refuses the start with every problem of the file listed', async () => {
    const dir = await mkdtemp(path.join(tmpdir(), 'cra-mwl-stations-'));
    try {
      const file = path.join(dir, 'stations.json');
      await writeFile(
        file,
        JSON.stringify({
          stations: [
            { aeTitle: 'IOLM', modality: 'OAM' },
            { aeTitle: 'IOLM', modality: 'OAM' },
            { aeTitle: 'OCT', modality: 'opt', characterSet: 'ISO_IR 13' },
          ],
        }),
      );
      const env = { DATABASE_URL: 'sqlite::memory:', DICOM_WORKLIST_STATIONS_FILE: file };
      assert.throws(
        () => loadConfig(env),
        (error: Error & { problems?: string[] }) => {
          const problems = error.problems ?? [];
          assert.ok(
            problems.some((p) => p.includes('/stations/2/modality')),
            problems.join('\n'),
          );
          assert.ok(
            problems.some((p) => p.includes('/stations/2/characterSet')),
            problems.join('\n'),
          );
          return true;
        },
      );
      await writeFile(
        file,
        JSON.stringify({
          stations: [
            { aeTitle: 'IOLM', modality: 'OAM' },
            { aeTitle: 'IOLM ', modality: 'OPT' },
          ],
        }),
      );
      assert.throws(() => loadConfig(env), /"IOLM" is listed twice/);
      await writeFile(
        file,
        JSON.stringify({ stations: [{ aeTitle: 'IOLM', modality: 'OAM', worklistDefinitionIds: [3] }] }),
      );
      assert.deepEqual(loadConfig(env).worklist.stations, [
        { aeTitle: 'IOLM', modality: 'OAM', worklistDefinitionIds: [3] },
      ]);
      assert.throws(
        () => loadConfig({ ...env, DICOM_WORKLIST_STATIONS_FILE: path.join(dir, 'missing.json') }),
        /ENOENT/,
      );
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
