/**
 * The Modality Worklist C-FIND SCP beside two independent worklist servers fed the same entries as `.wl`
 * files: dcmtk's `wlmscpfs` (a folder per called AE title) and Orthanc's worklists plugin
 * (`libModalityWorklists.so`). The same `findscu -W` queries go to all three and their answers are
 * compared key by key.
 *
 * Compared (all three must agree): the number of answers, PatientName, PatientID, PatientBirthDate,
 * PatientSex and, in the step, ScheduledProcedureStepStartDate, ScheduledProcedureStepStartTime and
 * Modality.
 *
 * Not compared, because they legitimately differ:
 * - StudyInstanceUID: the service generates it (2.25 UUID form) the first time it answers an entry; a
 *   `.wl` file carries whatever its writer put there.
 * - AccessionNumber, RequestedProcedureID, ScheduledProcedureStepID: ids the service hands out per
 *   entry (docs/DICOM.md); the peers return the file's text.
 * - SpecificCharacterSet: `wlmscpfs` names none by default (`-cs0`), Orthanc's plugin names ISO_IR 192,
 *   the service names one only when an answer needs it. The entries are ASCII for that reason: names in other
 *   character sets are tested against the service alone (worklist.test.ts).
 * - The order of the answers (none is defined); each side's answers are sorted before comparison.
 * - Matchings `wlmscpfs` does not implement: it matches PN case-sensitively (the service, as OpenEyes's
 *   search, and Orthanc do not) and PatientID only as a single value (no wildcards, which PS3.4 C.2.2.2.4
 *   allows for LO). Those queries are compared with Orthanc alone; each query says why.
 * - ScheduledStationAETitle and Modality come from the caller's station in the service and from the
 *   file in the peers; the station is configured as the files are written, so Modality is compared.
 *
 * The entries are synthetic patients written at test time, both into OpenEyes's worklist tables and as
 * the `.wl` files of what the service should answer for them.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { addIdentifier, createStandardInstitutions } from '../../../test/factories-patient.ts';
import { createPatient } from '../../../test/factories.ts';
import { startDicomTestApp } from '../../../test/dicom-receiving.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect } from '../../../test/harness.ts';
import type { Orthanc } from '../../../test/orthanc.ts';
import { startOrthanc } from '../../../test/orthanc.ts';
import { freePort } from '../../../test/ports.ts';
import type { WorklistAnswer } from '../../../test/worklist-fixtures.ts';
import {
  createBooking,
  createWorklist,
  dumpToDicom,
  findWorklist,
  itemOf,
  nameOf,
} from '../../../test/worklist-fixtures.ts';
import { createAppServices } from '../../app-services.ts';
import { createLogger } from '../../logger.ts';
import type { DicomServer } from '../dicom-receive/index.ts';
import { startDicomServer } from '../dicom-receive/index.ts';

/** The called AE title `wlmscpfs` serves (its folder of `.wl` files has this name). */
const WLMSCPFS_AE = 'WLPEER';
const CALLING_AE = 'DEV';
const MODALITY = 'OAM';

function isoDay(offsetDays: number): string {
  return new Date(Date.now() + offsetDays * 86_400_000).toISOString().slice(0, 10);
}
const TODAY = isoDay(0);
const TOMORROW = isoDay(1);
const LATER = isoDay(3);
const dicomDate = (day: string) => day.replaceAll('-', '');

/** One booking as the tables hold it and as a worklist entry reads. */
interface Entry {
  readonly lastName: string;
  readonly firstName: string;
  readonly hospitalNumber: string;
  readonly dob: string;
  readonly sex: 'F' | 'M';
  /** UTC, the service's TIME_ZONE here, so the step's local time is this one. */
  readonly day: string;
  readonly time: string;
}

const ENTRIES: readonly Entry[] = [
  {
    lastName: 'Peertest',
    firstName: 'Alpha',
    hospitalNumber: '9000001',
    dob: '1950-03-04',
    sex: 'F',
    day: TODAY,
    time: '09:30:00',
  },
  {
    lastName: 'Peertest',
    firstName: 'Bravo',
    hospitalNumber: '9000002',
    dob: '1961-12-31',
    sex: 'M',
    day: TODAY,
    time: '14:05:00',
  },
  {
    lastName: 'Otherpeer',
    firstName: 'Carol',
    hospitalNumber: '9000003',
    dob: '1975-06-15',
    sex: 'F',
    day: TOMORROW,
    time: '08:00:00',
  },
  {
    lastName: 'Otherpeer',
    firstName: 'Dave',
    hospitalNumber: '9000004',
    dob: '1980-01-20',
    sex: 'M',
    day: LATER,
    time: '16:45:00',
  },
  // A second booking of the first patient, tomorrow: one patient, two entries.
  {
    lastName: 'Peertest',
    firstName: 'Alpha',
    hospitalNumber: '9000001',
    dob: '1950-03-04',
    sex: 'F',
    day: TOMORROW,
    time: '11:15:00',
  },
];

/** The return keys every query asks for (the compared ones, and a few each side fills its own way). */
const RETURN_KEYS = [
  'PatientName',
  'PatientID',
  'PatientBirthDate',
  'PatientSex',
  'AccessionNumber',
  'StudyInstanceUID',
  'ScheduledProcedureStepSequence[0].ScheduledProcedureStepStartTime',
  'ScheduledProcedureStepSequence[0].ScheduledStationAETitle',
  'ScheduledProcedureStepSequence[0].Modality',
];

/** The queries: a key given a value replaces its empty return key. */
const QUERIES: readonly {
  readonly name: string;
  readonly keys: readonly string[];
  /** How many entries it is written to find. */
  readonly count: number;
  /** Why `wlmscpfs` is left out of this comparison (a matching it does not implement). */
  readonly notWlmscpfs?: string;
}[] = [
  {
    name: "today's date for the device's modality",
    keys: [
      `ScheduledProcedureStepSequence[0].ScheduledProcedureStepStartDate=${dicomDate(TODAY)}`,
      `ScheduledProcedureStepSequence[0].Modality=${MODALITY}`,
    ],
    count: 2,
  },
  { name: 'a patient name wildcard', keys: ['PatientName=Peert*'], count: 3 },
  { name: 'a patient name with ? and *', keys: ['PatientName=Other?eer^*'], count: 2 },
  {
    name: 'a patient name in another case',
    keys: ['PatientName=peert*'],
    count: 3,
    notWlmscpfs: 'wlmscpfs matches PN case-sensitively; the service and Orthanc do not',
  },
  { name: 'a PatientID', keys: ['PatientID=9000001'], count: 2 },
  {
    name: 'a PatientID wildcard',
    keys: ['PatientID=900000?'],
    count: 5,
    notWlmscpfs: 'wlmscpfs matches PatientID as a single value only (a wildcard finds nothing)',
  },
  {
    name: 'a date range',
    keys: [
      `ScheduledProcedureStepSequence[0].ScheduledProcedureStepStartDate=${dicomDate(TODAY)}-${dicomDate(TOMORROW)}`,
    ],
    count: 4,
  },
  {
    name: 'an open date range',
    keys: [`ScheduledProcedureStepSequence[0].ScheduledProcedureStepStartDate=${dicomDate(TOMORROW)}-`],
    count: 3,
  },
  {
    name: 'a step time range',
    keys: ['ScheduledProcedureStepSequence[0].ScheduledProcedureStepStartTime=0900-1200'],
    count: 2,
  },
  { name: 'a birth date range', keys: ['PatientBirthDate=19600101-19791231'], count: 2 },
  { name: 'a sex', keys: ['PatientSex=M'], count: 2 },
  { name: 'universal', keys: [], count: 5 },
];

function keysFor(query: readonly string[]): string[] {
  const named = new Set(query.map((k) => k.split('=')[0]));
  const dateKey = 'ScheduledProcedureStepSequence[0].ScheduledProcedureStepStartDate';
  return [
    ...RETURN_KEYS.filter((k) => !named.has(k.split('=')[0])),
    ...(named.has(dateKey) ? [] : [dateKey]),
    ...query,
  ];
}

/** An answer in the compared keys, as one line. */
function compared(answer: WorklistAnswer): string {
  const step = itemOf(answer.ScheduledProcedureStepSequence);
  const text = (value: unknown) =>
    typeof value === 'string' || typeof value === 'number' ? String(value) : '';
  return [
    nameOf(answer.PatientName),
    text(answer.PatientID),
    text(answer.PatientBirthDate),
    text(answer.PatientSex),
    text(step.ScheduledProcedureStepStartDate),
    // A TM may carry a fraction; the entries have none.
    text(step.ScheduledProcedureStepStartTime),
    text(step.Modality),
  ].join(' | ');
}

/** The dump of the `.wl` file of `entry` (what the service answers for it, in the peers' form). */
function wlDump(entry: Entry, index: number): string[] {
  const date = dicomDate(entry.day);
  const time = entry.time.replaceAll(':', '');
  return [
    '(0008,0050) SH [PEER' + String(index) + ']',
    `(0010,0010) PN [${entry.lastName}^${entry.firstName}]`,
    `(0010,0020) LO [${entry.hospitalNumber}]`,
    `(0010,0030) DA [${dicomDate(entry.dob)}]`,
    `(0010,0040) CS [${entry.sex}]`,
    `(0020,000d) UI [1.2.826.0.1.3680043.10.1111.${String(index + 1)}]`,
    `(0040,1001) SH [RP${String(index)}]`,
    '(0032,1060) LO [Peer clinic]',
    '(0040,0100) SQ',
    '(fffe,e000) na',
    `(0008,0060) CS [${MODALITY}]`,
    `(0040,0001) AE [${CALLING_AE}]`,
    `(0040,0002) DA [${date}]`,
    `(0040,0003) TM [${time}]`,
    `(0040,0009) SH [SP${String(index)}]`,
    '(0040,0007) LO [Peer clinic]',
    '(fffe,e00d) na',
    '(fffe,e0dd) na',
  ];
}

/** Resolves once something listens on 127.0.0.1:`port`. */
async function listening(port: number, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`wlmscpfs exited (${child.exitCode}): ${log()}`);
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`wlmscpfs did not listen within 30 s: ${log()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

forEachDialect((dialect) => {
  describe(`Modality Worklist C-FIND against wlmscpfs and Orthanc's worklists plugin (${dialect})`, () => {
    let app: TestApp;
    let server: DicomServer;
    let scp: DicomServer;
    let dir: string;
    let wlmscpfs: ChildProcess;
    let wlmscpfsPort: number;
    let orthanc: Orthanc;

    before(async () => {
      dir = await mkdtemp(path.join(tmpdir(), 'cra-mwl-peers-'));
      ({ app, server } = await startDicomTestApp(dialect, `${CALLING_AE}@127.0.0.1`, { TIME_ZONE: 'UTC' }));
      // The caller is a station of OAM seeing every worklist, so the service answers the step's Modality
      // and Scheduled Station AE Title from its configuration, as the peers do from their files.
      scp = await startDicomServer({
        database: app.database,
        config: {
          ...app.config,
          worklist: { ...app.config.worklist, stations: [{ aeTitle: CALLING_AE, modality: MODALITY }] },
        },
        logger: createLogger('silent'),
        ...createAppServices(app.deps),
      });

      const { localTypeId } = await createStandardInstitutions(app.db, 'NEW');
      const worklist = await createWorklist(app.db, { typeId: localTypeId, name: 'Peer clinic', day: TODAY });
      const patients = new Map<string, number>();
      for (const entry of ENTRIES) {
        let patientId = patients.get(entry.hospitalNumber);
        if (patientId === undefined) {
          ({ patientId } = await createPatient(app.db, {
            firstName: entry.firstName,
            lastName: entry.lastName,
            patient: { dob: entry.dob, gender: entry.sex },
          }));
          await addIdentifier(app.db, patientId, localTypeId, entry.hospitalNumber);
          patients.set(entry.hospitalNumber, patientId);
        }
        await createBooking(app.db, {
          worklistId: worklist.worklistId,
          patientId,
          whenUtc: `${entry.day}T${entry.time}Z`,
        });
      }

      const wlDir = path.join(dir, 'worklists', WLMSCPFS_AE);
      await mkdir(wlDir, { recursive: true });
      // wlmscpfs locks a folder through this file.
      await writeFile(path.join(wlDir, 'lockfile'), '');
      for (const [index, entry] of ENTRIES.entries())
        await dumpToDicom(wlDir, `entry${String(index)}.wl`, wlDump(entry, index));

      wlmscpfsPort = await freePort();
      // wlmscpfs has no option to bind one address; the port is a free one and the test connects to 127.0.0.1.
      wlmscpfs = spawn('wlmscpfs', ['-s', '-dfp', path.join(dir, 'worklists'), String(wlmscpfsPort)], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let log = '';
      const keep = (chunk: Buffer) => (log = (log + chunk.toString()).slice(-4000));
      wlmscpfs.stdout?.on('data', keep);
      wlmscpfs.stderr?.on('data', keep);
      await listening(wlmscpfsPort, wlmscpfs, () => log);
      // The Orthanc plugin reads every file of a flat folder: the same `.wl` files.
      orthanc = await startOrthanc({ worklistsDirectory: wlDir });
    });

    after(async () => {
      await orthanc?.stop();
      if (wlmscpfs !== undefined && wlmscpfs.exitCode === null) {
        const exited = new Promise<void>((resolve) => wlmscpfs.once('exit', () => resolve()));
        wlmscpfs.kill('SIGTERM');
        await exited;
      }
      await scp?.stop(1000);
      await server?.stop(1000);
      await app?.close();
      await rm(dir, { recursive: true, force: true });
    });

    for (const query of QUERIES)
      it(`answers ${query.name} as the peers do`, async () => {
        const keys = keysFor(query.keys);
        const ask = async (port: number, calledAe: string) => {
          const result = await findWorklist(port, { keys, callingAe: CALLING_AE, calledAe });
          assert.equal(result.code, 0, result.output);
          assert.match(result.output, /Received Final Find Response \(Success\)/, result.output);
          return result.answers.map(compared).sort();
        };
        const service = await ask(scp.port, 'CRA_TEST');
        const orthancAnswers = await ask(orthanc.dicomPort, orthanc.aeTitle);
        assert.equal(
          orthancAnswers.length,
          query.count,
          'Orthanc finds the entries the query is written for',
        );
        if (query.notWlmscpfs === undefined)
          assert.deepEqual(
            await ask(wlmscpfsPort, WLMSCPFS_AE),
            orthancAnswers,
            'the two peers agree (else the query is not one to compare on)',
          );
        assert.deepEqual(service, orthancAnswers, `the service's answers to ${query.name} are the peers'`);
      });
  });
});
