/**
 * Modality Worklist C-FIND and Storage Commitment: the real server (`src/main/server.ts`, WORKER=off)
 * answering from OpenEyes's worklist tables, and Orthanc's worklists plugin beside it in the same run
 * serving the same entries from `.wl` files (issue 35).
 *
 * - Entries: `BENCH_WL_ENTRIES` (default 2,000) bookings of as many synthetic patients, today, spread
 *   over `BENCH_WL_LISTS` (default 20) worklists; the same entries written as `.wl` files for Orthanc.
 * - `one patient`: `BENCH_WL_DEVICES` (default 16) devices, each with its own calling AE title, asking at
 *   once, each `BENCH_WL_QUERIES` (default 20) queries in a row by PatientID and today's date (one
 *   association each, dcmjs-dimse's Client, as a device asks): p50/p99 of one whole query (connect,
 *   associate, answer, release) and queries/s over all.
 * - `whole day`: today's date alone (every entry answered), `BENCH_WL_DAY_RUNS` (default 3) in a row.
 * - `storage commitment`: `BENCH_STGCMT_INSTANCES` (default 500) instances stored by storescu, then one
 *   N-ACTION naming all of them: the time from the N-ACTION sent to the N-EVENT-REPORT received on the
 *   same association, `BENCH_STGCMT_RUNS` (default 3) runs.
 *
 * Targets: worklist answers at least as fast as Orthanc's (ratio >= 1.0 in the same run) with p99 <= 50
 * ms; the commitment report within 1 s. `npm run bench -- worklist --dialect all`.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import dcmjs from 'dcmjs';
import dcmjsDimse from 'dcmjs-dimse';
import type * as Dimse from 'dcmjs-dimse';
import { runDcmtk } from '../test/dcmtk.ts';
import { buildInstance, newUid } from '../test/dicom-instances.ts';
import { addIdentifier, createStandardInstitutions } from '../test/factories-patient.ts';
import { createPatient } from '../test/factories.ts';
import { orthancMissing, startOrthanc } from '../test/orthanc.ts';
import { freePort } from '../test/ports.ts';
import { createBooking, createWorklist } from '../test/worklist-fixtures.ts';
import type { BenchReport, BenchRow, BenchRunOptions, Dialect, LoadResult } from './lib.ts';
import { percentile, prepareDatabase, readCpuMs, readRssBytes, startRssSampler, startServer } from './lib.ts';

const { Client, Dataset, constants, log: dimseLog, requests, responses } = dcmjsDimse;

/** The library's logger writes to the console. */
dimseLog.setLevel('silent');

// dcmjs-dimse's Client connects with Nagle's algorithm on and writes a request's command and data set as
// two PDUs, so the data set waits for the peer's delayed acknowledgement (~40 ms on loopback) whichever
// server answers. A device's stack may or may not do the same; the bench measures the server, so its
// client disables Nagle (`BENCH_WL_CLIENT_NAGLE=on` keeps it, to see what such a device waits).
if (process.env.BENCH_WL_CLIENT_NAGLE !== 'on') {
  const connect: unknown = Reflect.get(Socket.prototype, 'connect');
  Reflect.set(Socket.prototype, 'connect', function (this: Socket, ...args: unknown[]) {
    this.setNoDelay(true);
    return Reflect.apply(connect as (...a: unknown[]) => Socket, this, args);
  });
}

const ENTRIES = Number(process.env.BENCH_WL_ENTRIES ?? 2000);
const LISTS = Number(process.env.BENCH_WL_LISTS ?? 20);
const DEVICES = Number(process.env.BENCH_WL_DEVICES ?? 16);
const QUERIES = Number(process.env.BENCH_WL_QUERIES ?? 20);
const DAY_RUNS = Number(process.env.BENCH_WL_DAY_RUNS ?? 3);
const COMMIT_INSTANCES = Number(process.env.BENCH_STGCMT_INSTANCES ?? 500);
const COMMIT_RUNS = Number(process.env.BENCH_STGCMT_RUNS ?? 3);
const TARGET_P99_MS = 50;
const TARGET_COMMIT_MS = 1000;
const MODALITY = 'OAM';
const STGCMT = '1.2.840.10008.1.20.1';
const STGCMT_INSTANCE = '1.2.840.10008.1.20.1.1';
const SECONDARY_CAPTURE = '1.2.840.10008.5.1.4.1.1.7';

const deviceAe = (i: number) => `DEV${String(i + 1).padStart(2, '0')}`;
const hospitalNumber = (i: number) => String(8_000_000 + i);

/** One booking: its patient and its time today (UTC, the server's TIME_ZONE here). */
interface Entry {
  readonly index: number;
  readonly lastName: string;
  readonly firstName: string;
  readonly dob: string;
  readonly sex: 'F' | 'M';
  readonly time: string;
}

function entries(): Entry[] {
  return Array.from({ length: ENTRIES }, (_, index) => {
    const minutes = 8 * 60 + (index % 540);
    return {
      index,
      lastName: `Benchwl${String(index).padStart(5, '0')}`,
      firstName: index % 2 === 0 ? 'Alpha' : 'Bravo',
      dob: `19${String(40 + (index % 60)).padStart(2, '0')}-0${String(1 + (index % 9))}-1${String(index % 10)}`,
      sex: index % 2 === 0 ? 'F' : 'M',
      time: `${String(Math.floor(minutes / 60)).padStart(2, '0')}:${String(minutes % 60).padStart(2, '0')}:00`,
    };
  });
}

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const { dialect } = options;
  const rows: BenchRow[] = [];
  const today = new Date().toISOString().slice(0, 10);
  const dicomToday = today.replaceAll('-', '');
  const all = entries();
  const notes: string[] = [
    `${ENTRIES} bookings today in ${LISTS} worklists; ${DEVICES} devices at once, ${QUERIES} queries each by PatientID and today's date; ` +
      `whole day best of ${DAY_RUNS}; storage commitment of ${COMMIT_INSTANCES} instances, best of ${COMMIT_RUNS}`,
  ];
  // Each device asks for other patients, spread over the day.
  const asked = Array.from({ length: DEVICES }, (_, d) =>
    Array.from({ length: QUERIES }, (_, q) => hospitalNumber((d * 7919 + q * 104_729) % ENTRIES)),
  );
  const dir = await mkdtemp(path.join(tmpdir(), 'cra-bench-wl-'));
  try {
    const prepared = await prepareDatabase(dialect, {
      fill: async (database) => {
        const { localTypeId } = await createStandardInstitutions(database.db, 'NEW');
        const lists: number[] = [];
        for (let i = 0; i < LISTS; i += 1)
          lists.push(
            (
              await createWorklist(database.db, {
                typeId: localTypeId,
                name: `Bench clinic ${i + 1}`,
                day: today,
              })
            ).worklistId,
          );
        for (const entry of all) {
          const { patientId } = await createPatient(database.db, {
            firstName: entry.firstName,
            lastName: entry.lastName,
            patient: { dob: entry.dob, gender: entry.sex },
          });
          await addIdentifier(database.db, patientId, localTypeId, hospitalNumber(entry.index));
          await createBooking(database.db, {
            worklistId: lists[entry.index % LISTS]!,
            patientId,
            whenUtc: `${today}T${entry.time}Z`,
          });
        }
      },
    });
    const dicomPort = await freePort();
    const callers = Array.from({ length: DEVICES }, (_, i) => `${deviceAe(i)}@127.0.0.1`).join(',');
    const server = await startServer({
      env: {
        ...prepared.env,
        TIME_ZONE: 'UTC',
        // BENCH_WL_CPU_PROFILE=<dir>: the server writes a V8 CPU profile there when it stops.
        ...(process.env.BENCH_WL_CPU_PROFILE === undefined
          ? {}
          : {
              NODE_OPTIONS:
                `${process.env.NODE_OPTIONS ?? ''} --cpu-prof --cpu-prof-dir=${process.env.BENCH_WL_CPU_PROFILE}`.trim(),
            }),
        DICOM_PORT: String(dicomPort),
        DICOM_AE_TITLE: 'CRA',
        DICOM_ALLOWED_CALLERS: callers,
        DICOM_WORKLIST_MAX_ANSWERS: String(Math.max(1000, ENTRIES)),
        DICOM_MAX_ASSOCIATIONS: String(Math.max(16, DEVICES)),
        DICOM_MAX_CONNECTIONS: String(Math.max(64, DEVICES * 2)),
        // Every device calls from 127.0.0.1 here; in a clinic each has its own address.
        DICOM_MAX_ASSOCIATIONS_PER_ADDRESS: String(Math.max(8, DEVICES)),
        DICOM_MAX_CONNECTIONS_PER_ADDRESS: String(Math.max(16, DEVICES * 2)),
      },
    });
    let serviceOne: LoadResult | undefined;
    let serviceDay: LoadResult | undefined;
    try {
      const serviceEcho = await measureDevices(server.pid, dicomPort, 'CRA', asked, echoExchange);
      rows.push(
        row(`floor: service associate + C-ECHO + release, ${DEVICES} devices`, dialect, DEVICES, serviceEcho),
      );
      notes.push(`service C-ECHO floor: ${serviceEcho.cpu}`);
      const one = await measureDevices(server.pid, dicomPort, 'CRA', asked, worklistQuery(dicomToday));
      serviceOne = one;
      rows.push(row(`service MWL one patient, ${DEVICES} devices`, dialect, DEVICES, one));
      notes.push(`service MWL one patient: ${one.cpu}`);
      serviceDay = await measureDay(server.pid, dicomPort, 'CRA', dicomToday);
      rows.push(row('service MWL whole day', dialect, 1, serviceDay));
      const commit = await measureCommitment(dicomPort, dir);
      rows.push(row(`service storage commitment of ${COMMIT_INSTANCES}`, dialect, 1, commit));
      notes.push(
        `storage commitment: report ${commit.p50Ms.toFixed(0)} ms after the N-ACTION (best ${Math.min(commit.p50Ms, commit.p99Ms).toFixed(0)}, worst ${commit.p99Ms.toFixed(0)}) ` +
          `(target <= ${TARGET_COMMIT_MS} ms): ${commit.p99Ms <= TARGET_COMMIT_MS && commit.errors === 0 ? 'met' : 'MISSED'}`,
      );
    } finally {
      await server.stop();
      await prepared.cleanup();
    }

    const missing = process.env.BENCH_WL_ORTHANC === 'off' ? 'BENCH_WL_ORTHANC=off' : orthancMissing();
    if (missing !== undefined) {
      notes.push(`Orthanc not measured: ${missing}`);
    } else {
      const wlDir = path.join(dir, 'worklists');
      await mkdir(wlDir);
      for (const entry of all)
        await writeFile(path.join(wlDir, `e${entry.index}.wl`), wlFile(entry, dicomToday));
      const orthanc = await startOrthanc({ worklistsDirectory: wlDir });
      try {
        const orthancEcho = await measureDevices(
          orthanc.pid,
          orthanc.dicomPort,
          orthanc.aeTitle,
          asked,
          echoExchange,
        );
        rows.push(
          row(
            `floor: Orthanc associate + C-ECHO + release, ${DEVICES} devices`,
            'none',
            DEVICES,
            orthancEcho,
          ),
        );
        notes.push(`Orthanc C-ECHO floor: ${orthancEcho.cpu}`);
        const orthancOne = await measureDevices(
          orthanc.pid,
          orthanc.dicomPort,
          orthanc.aeTitle,
          asked,
          worklistQuery(dicomToday),
        );
        rows.push(
          row(`Orthanc worklists plugin one patient, ${DEVICES} devices`, 'none', DEVICES, orthancOne),
        );
        notes.push(`Orthanc MWL one patient: ${orthancOne.cpu}`);
        const orthancDay = await measureDay(orthanc.pid, orthanc.dicomPort, orthanc.aeTitle, dicomToday);
        rows.push(row('Orthanc worklists plugin whole day', 'none', 1, orthancDay));
        if (serviceOne !== undefined && serviceDay !== undefined) {
          const ratio = serviceOne.requestsPerSec / orthancOne.requestsPerSec;
          const met = ratio >= 1 && serviceOne.p99Ms <= TARGET_P99_MS && serviceOne.errors === 0;
          notes.push(
            `one patient, ${DEVICES} devices: service ${serviceOne.requestsPerSec.toFixed(0)} queries/s p99 ${serviceOne.p99Ms.toFixed(1)} ms, ` +
              `Orthanc ${orthancOne.requestsPerSec.toFixed(0)} queries/s p99 ${orthancOne.p99Ms.toFixed(1)} ms: ratio ${ratio.toFixed(2)} ` +
              `(targets ratio >= 1.0, p99 <= ${TARGET_P99_MS} ms): ${met ? 'met' : 'MISSED'}`,
          );
          const dayRatio = orthancDay.p50Ms / serviceDay.p50Ms;
          notes.push(
            `whole day (${String(serviceDay.statusCounts.answers ?? 0)} answers over ${DAY_RUNS} runs): service best ${serviceDay.p50Ms.toFixed(0)} ms, ` +
              `Orthanc best ${orthancDay.p50Ms.toFixed(0)} ms: ratio ${dayRatio.toFixed(2)} (target >= 1.0): ${dayRatio >= 1 ? 'met' : 'MISSED'}`,
          );
        }
      } finally {
        await orthanc.stop();
      }
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  return { rows, notes };
}

/** The `.wl` file Orthanc's plugin serves for `entry`: what the service answers for it. */
function wlFile(entry: Entry, dicomToday: string): Buffer {
  const { DicomDict, DicomMetaDictionary } = dcmjs.data;
  const instance = newUid();
  const dict = new DicomDict(
    DicomMetaDictionary.denaturalizeDataset({
      FileMetaInformationVersion: new Uint8Array([0, 1]).buffer,
      MediaStorageSOPClassUID: SECONDARY_CAPTURE,
      MediaStorageSOPInstanceUID: instance,
      TransferSyntaxUID: '1.2.840.10008.1.2.1',
      ImplementationClassUID: '2.25.1',
    }),
  );
  dict.dict = DicomMetaDictionary.denaturalizeDataset({
    SpecificCharacterSet: 'ISO_IR 100',
    AccessionNumber: `A${entry.index}`,
    PatientName: `${entry.lastName}^${entry.firstName}`,
    PatientID: hospitalNumber(entry.index),
    PatientBirthDate: entry.dob.replaceAll('-', ''),
    PatientSex: entry.sex,
    StudyInstanceUID: newUid(),
    RequestedProcedureID: `RP${entry.index}`,
    RequestedProcedureDescription: `Bench clinic ${(entry.index % LISTS) + 1}`,
    ScheduledProcedureStepSequence: [
      {
        Modality: MODALITY,
        ScheduledStationAETitle: 'DEV01',
        ScheduledProcedureStepStartDate: dicomToday,
        ScheduledProcedureStepStartTime: entry.time.replaceAll(':', ''),
        ScheduledProcedureStepID: `SP${entry.index}`,
        ScheduledProcedureStepDescription: `Bench clinic ${(entry.index % LISTS) + 1}`,
      },
    ],
  });
  return Buffer.from(dict.write());
}

/** One worklist C-FIND on its own association; resolves to the number of answers (throws on failure). */
function findOnce(
  port: number,
  calledAe: string,
  callingAe: string,
  keys: Record<string, unknown>,
): Promise<number> {
  return new Promise((resolve, reject) => {
    const client = new Client();
    const request = requests.CFindRequest.createWorklistFindRequest({});
    // The keys a device sends (dcmjs-dimse's default set holds empty sequences, which Orthanc's plugin
    // reads as a match on an empty sequence, and a Query/Retrieve Level no worklist query has).
    request.setDataset(
      new Dataset(
        {
          PatientName: '',
          PatientBirthDate: '',
          PatientSex: '',
          AccessionNumber: '',
          StudyInstanceUID: '',
          RequestedProcedureID: '',
          ...keys,
        },
        constants.TransferSyntax.ExplicitVRLittleEndian,
      ),
    );
    let answers = 0;
    let final: number | undefined;
    request.on('response', (response: Dimse.responses.CFindResponse) => {
      const status = response.getStatus();
      if (status === 0xff00 || status === 0xff01) answers += 1;
      else final = status;
    });
    client.addRequest(request);
    client.on('networkError', (error: Error) => reject(error));
    client.on('associationRejected', () => reject(new Error('association rejected')));
    client.on('closed', () =>
      final === 0 ? resolve(answers) : reject(new Error(`final status ${String(final)}`)),
    );
    client.send('127.0.0.1', port, callingAe, calledAe);
  });
}

function stepKeys(dicomToday: string): Record<string, unknown> {
  return {
    ScheduledProcedureStepSequence: [
      {
        ScheduledProcedureStepStartDate: dicomToday,
        ScheduledProcedureStepStartTime: '',
        Modality: '',
        ScheduledStationAETitle: '',
        ScheduledProcedureStepID: '',
        ScheduledProcedureStepDescription: '',
      },
    ],
  };
}

/** One device's exchange on its own association: the answers it got. */
type DeviceExchange = (
  port: number,
  calledAe: string,
  callingAe: string,
  patientId: string,
) => Promise<number>;

/** A worklist query by PatientID and today's date: one answer expected. */
function worklistQuery(dicomToday: string): DeviceExchange {
  return (port, calledAe, callingAe, patientId) =>
    findOnce(port, calledAe, callingAe, { PatientID: patientId, ...stepKeys(dicomToday) });
}

/** The floor of a query: associate, C-ECHO, release (counted as one answer). */
const echoExchange: DeviceExchange = (port, calledAe, callingAe) => echoOnce(port, calledAe, callingAe);

/**
 * Every device runs its exchanges in a row, all devices at once; every exchange must find one answer.
 * `cpu` gives the server's and the load generator's CPU per exchange (kernel accounting: it holds on a
 * loaded machine where the latencies do not).
 */
async function measureDevices(
  pid: number,
  port: number,
  calledAe: string,
  asked: readonly (readonly string[])[],
  exchange: DeviceExchange,
): Promise<LoadResult & { cpu: string }> {
  // Warm-up: one exchange per device.
  await Promise.all(asked.map((ids, d) => exchange(port, calledAe, deviceAe(d), ids[0]!)));
  const sampler = startRssSampler(pid, 100);
  const latencies: number[] = [];
  let errors = 0;
  let wrong = 0;
  const serverCpuBefore = await readCpuMs(pid);
  const clientCpuBefore = process.cpuUsage();
  const started = performance.now();
  await Promise.all(
    asked.map(async (ids, d) => {
      for (const id of ids) {
        const begun = performance.now();
        try {
          const answers = await exchange(port, calledAe, deviceAe(d), id);
          latencies.push(performance.now() - begun);
          if (answers !== 1) wrong += 1;
        } catch {
          errors += 1;
        }
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  const clientCpu = process.cpuUsage(clientCpuBefore);
  const serverCpuAfter = await readCpuMs(pid);
  const rssPeakBytes = await sampler.stop();
  latencies.sort((a, b) => a - b);
  const count = Math.max(1, latencies.length);
  const perExchange = (ms: number) => `${((ms * 1000) / count).toFixed(0)} us`;
  const cpu =
    `server CPU per exchange: main thread ${perExchange(serverCpuAfter.mainMs - serverCpuBefore.mainMs)}, ` +
    `all threads ${perExchange(serverCpuAfter.allMs - serverCpuBefore.allMs)}; ` +
    `load generator ${perExchange((clientCpu.user + clientCpu.system) / 1000)}`;
  return {
    requestsPerSec: latencies.length / seconds,
    bytesPerSec: 0,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    totalRequests: latencies.length,
    durationSeconds: seconds,
    errors: errors + wrong,
    timeouts: 0,
    non2xx: errors + wrong,
    statusCounts: { ok: latencies.length - wrong, notOneAnswer: wrong, failed: errors },
    rssPeakBytes,
    rssAfterBytes: await readRssBytes(pid),
    cpu,
  };
}

/** Associate, one C-ECHO, release: 1 when the echo succeeded. */
function echoOnce(port: number, calledAe: string, callingAe: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const client = new Client();
    const request = new requests.CEchoRequest();
    let status: number | undefined;
    request.on('response', (response: Dimse.responses.CEchoResponse) => {
      status = response.getStatus();
    });
    client.addRequest(request);
    client.on('networkError', (error: Error) => reject(error));
    client.on('associationRejected', () => reject(new Error('association rejected')));
    client.on('closed', () =>
      status === 0 ? resolve(1) : reject(new Error(`echo status ${String(status)}`)),
    );
    client.send('127.0.0.1', port, callingAe, calledAe);
  });
}

/** The whole day's query `DAY_RUNS` times: p50 is the best run, p99 the worst. */
async function measureDay(
  pid: number,
  port: number,
  calledAe: string,
  dicomToday: string,
): Promise<LoadResult> {
  const sampler = startRssSampler(pid, 100);
  const times: number[] = [];
  let answers = 0;
  let errors = 0;
  for (let i = 0; i < DAY_RUNS; i += 1) {
    const begun = performance.now();
    try {
      answers = await findOnce(port, calledAe, deviceAe(0), stepKeys(dicomToday));
      times.push(performance.now() - begun);
      if (answers !== ENTRIES) errors += 1;
    } catch {
      errors += 1;
    }
  }
  const rssPeakBytes = await sampler.stop();
  times.sort((a, b) => a - b);
  const seconds = times.reduce((sum, t) => sum + t, 0) / 1000;
  return {
    requestsPerSec: seconds > 0 ? (times.length * ENTRIES) / seconds : 0,
    bytesPerSec: 0,
    p50Ms: times[0] ?? 0,
    p99Ms: times.at(-1) ?? 0,
    totalRequests: times.length,
    durationSeconds: seconds,
    errors,
    timeouts: 0,
    non2xx: errors,
    statusCounts: { answers },
    rssPeakBytes,
    rssAfterBytes: await readRssBytes(pid),
  };
}

/**
 * Stores `COMMIT_INSTANCES` instances with storescu, then asks for their commitment `COMMIT_RUNS` times
 * (a new Transaction UID each): p50 the best time to the report, p99 the worst.
 */
async function measureCommitment(port: number, dir: string): Promise<LoadResult> {
  const instancesDir = path.join(dir, 'commit');
  await mkdir(instancesDir);
  const references: { sopClassUid: string; sopInstanceUid: string }[] = [];
  for (let i = 0; i < COMMIT_INSTANCES; i += 1) {
    const sopInstanceUid = newUid();
    references.push({ sopClassUid: SECONDARY_CAPTURE, sopInstanceUid });
    await writeFile(
      path.join(instancesDir, `${i}.dcm`),
      buildInstance({ sopInstanceUid, pixelBytes: 12, tags: { PatientID: 'COMMIT-1' } }),
    );
  }
  const stored = await runDcmtk(
    'storescu',
    ['-aet', deviceAe(0), '-aec', 'CRA', '+sd', '127.0.0.1', String(port), instancesDir],
    600_000,
  );
  if (stored.code !== 0) throw new Error(`storescu failed: ${stored.output.slice(-500)}`);
  const times: number[] = [];
  let errors = 0;
  for (let i = 0; i < COMMIT_RUNS; i += 1) {
    const outcome = await commitOnce(port, references);
    if (outcome.eventType === 1 && outcome.committed === COMMIT_INSTANCES) times.push(outcome.ms);
    else errors += 1;
  }
  times.sort((a, b) => a - b);
  return {
    requestsPerSec: 0,
    bytesPerSec: 0,
    p50Ms: times[0] ?? Number.NaN,
    p99Ms: times.at(-1) ?? Number.NaN,
    totalRequests: COMMIT_RUNS,
    durationSeconds: times.reduce((sum, t) => sum + t, 0) / 1000,
    errors,
    timeouts: 0,
    non2xx: errors,
    statusCounts: { reported: times.length, failed: errors },
  };
}

/** One N-ACTION; the milliseconds until its N-EVENT-REPORT arrived on the association. */
function commitOnce(
  port: number,
  references: readonly { sopClassUid: string; sopInstanceUid: string }[],
): Promise<{ ms: number; eventType: number | undefined; committed: number }> {
  return new Promise((resolve, reject) => {
    const client = new Client();
    const request = new requests.NActionRequest(STGCMT, STGCMT_INSTANCE, 1);
    request.setDataset(
      new Dataset(
        {
          TransactionUID: newUid(),
          ReferencedSOPSequence: references.map((r) => ({
            ReferencedSOPClassUID: r.sopClassUid,
            ReferencedSOPInstanceUID: r.sopInstanceUid,
          })),
        },
        constants.TransferSyntax.ExplicitVRLittleEndian,
      ),
    );
    let sent = 0;
    let ms = Number.NaN;
    let eventType: number | undefined;
    let committed = 0;
    client.on('associationAccepted', () => (sent = performance.now()));
    client.on(
      'nEventReportRequest',
      (
        event: Dimse.requests.NEventReportRequest,
        callback: (response: Dimse.responses.NEventReportResponse) => void,
      ) => {
        ms = performance.now() - sent;
        eventType = event.getEventTypeId();
        const sequence: unknown = event.getDataset()?.getElements().ReferencedSOPSequence;
        committed = Array.isArray(sequence) ? sequence.length : 0;
        const response = responses.NEventReportResponse.fromRequest(event);
        response.setStatus(0);
        callback(response);
      },
    );
    client.addRequest(request);
    client.on('networkError', (error: Error) => reject(error));
    client.on('closed', () => resolve({ ms, eventType, committed }));
    // The association stays open 3 s after the N-ACTION's answer, for the report to come on it.
    client.send('127.0.0.1', port, deviceAe(0), 'CRA', { associationLingerTimeout: 3000 });
  });
}

function row(name: string, dialect: Dialect | 'none', connections: number, result: LoadResult): BenchRow {
  const { cpu: _cpu, ...load } = result as LoadResult & { cpu?: string };
  return { name, dialect, connections, ...load };
}
