/**
 * Query/Retrieve over DIMSE: the real server (`src/main/server.ts`, WORKER=off) answering C-MOVE and
 * study-root C-FIND from what it received, and Orthanc beside it in the same run holding the same
 * instances (uploaded through its REST API) as the reference.
 *
 * - `C-MOVE`: dcmtk's `movescu` moves one study of `BENCH_QR_MOVE_INSTANCES` instances (default 200) of
 *   `BENCH_QR_MOVE_BYTES` each (default 256 KiB, RGB Secondary Capture, random pixels) to a dcmtk
 *   `storescp` (`--ignore`: received, not written) started by the bench; `BENCH_QR_MOVE_RUNS` runs
 *   (default 3), the best of each target kept (rows: `req/s` = instances/s). Server RSS before the first
 *   run, the peak over the runs and after the last.
 * - `C-FIND`: `BENCH_QR_FIND_QUERIES` (default 300) study-root C-FINDs by Patient ID (one association
 *   each, dcmjs-dimse's Client, as a viewer asks), over `BENCH_QR_FIND_STUDIES` studies (default 2,000, one
 *   instance each) of half as many patients; p50/p99 of one whole query (connect, associate, answers,
 *   release).
 *
 * Targets (issue 36, scaled down): C-MOVE >= 0.8x Orthanc's instances/s with memory flat; C-FIND p99 <=
 * 20 ms and at least Orthanc's speed. `npm run bench -- qr-move --dialect all`.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import dcmjsDimse from 'dcmjs-dimse';
import { buildInstance, newUid } from '../test/dicom-instances.ts';
import { runDcmtk } from '../test/dcmtk.ts';
import { orthancMissing, startOrthanc } from '../test/orthanc.ts';
import { freePort } from '../test/ports.ts';
import type { BenchReport, BenchRow, BenchRunOptions, Dialect, LoadResult } from './lib.ts';
import { percentile, prepareDatabase, readRssBytes, startRssSampler, startServer } from './lib.ts';

const { Client, log: dimseLog, requests } = dcmjsDimse;

/** The library's logger writes to the console. */
dimseLog.setLevel('silent');

const MOVE_INSTANCES = Number(process.env.BENCH_QR_MOVE_INSTANCES ?? 200);
const MOVE_BYTES = Number(process.env.BENCH_QR_MOVE_BYTES ?? 256 * 1024);
const MOVE_RUNS = Number(process.env.BENCH_QR_MOVE_RUNS ?? 3);
const FIND_STUDIES = Number(process.env.BENCH_QR_FIND_STUDIES ?? 2000);
const FIND_QUERIES = Number(process.env.BENCH_QR_FIND_QUERIES ?? 300);
const SCU_AE = 'BENCHSCU';
const DEST_AE = 'DEST';
const TARGET_MOVE_RATIO = 0.8;
const TARGET_FIND_P99_MS = 20;

interface MoveResult {
  readonly seconds: number;
  readonly ok: boolean;
}

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const { dialect } = options;
  const rows: BenchRow[] = [];
  const notes: string[] = [
    `C-MOVE of one study of ${MOVE_INSTANCES} instances of ${(MOVE_BYTES / 1024).toFixed(0)} KiB to storescp, best of ${MOVE_RUNS}; ` +
      `C-FIND: ${FIND_QUERIES} study-root queries by Patient ID over ${FIND_STUDIES} studies of ${FIND_STUDIES / 2} patients ` +
      "(scaled down from the issue's 1M patients / 200k studies: Orthanc must hold the same studies, uploaded in the run)",
  ];
  const dir = await mkdtemp(path.join(tmpdir(), 'cra-bench-qr-'));
  const moveStudy = newUid();
  const moveDir = path.join(dir, 'move');
  const findDir = path.join(dir, 'find');
  await mkdir(moveDir);
  await mkdir(findDir);
  for (let i = 0; i < MOVE_INSTANCES; i += 1)
    await writeFile(
      path.join(moveDir, `${i}.dcm`),
      buildInstance({
        studyInstanceUid: moveStudy,
        pixelBytes: MOVE_BYTES - 1024,
        tags: { PatientID: 'MOVE-1' },
      }),
    );
  for (let i = 0; i < FIND_STUDIES; i += 1)
    await writeFile(
      path.join(findDir, `${i}.dcm`),
      buildInstance({
        pixelBytes: 12,
        tags: { PatientID: `P${i % (FIND_STUDIES / 2)}`, StudyDate: '20240101' },
      }),
    );
  const destPort = await freePort();
  const storescp = await startStorescp(destPort);
  const patientIds = Array.from({ length: FIND_QUERIES }, (_, i) => `P${(i * 7919) % (FIND_STUDIES / 2)}`);
  try {
    const prepared = await prepareDatabase(dialect);
    const dicomPort = await freePort();
    const server = await startServer({
      env: {
        ...prepared.env,
        DICOM_PORT: String(dicomPort),
        DICOM_AE_TITLE: 'CRA',
        DICOM_ALLOWED_CALLERS: `${SCU_AE}@127.0.0.1`,
        DICOM_QR_CALLERS: `${SCU_AE}@127.0.0.1`,
        DICOM_REMOTE_NODES: `${DEST_AE}@127.0.0.1:${destPort}`,
        DICOM_MOVE_DESTINATIONS: DEST_AE,
      },
    });
    let serviceMove: LoadResult | undefined;
    let serviceFind: LoadResult | undefined;
    try {
      await storeAll(dicomPort, 'CRA', [moveDir, findDir]);
      const rssBefore = await readRssBytes(server.pid);
      serviceMove = await measureMoves(server.pid, () => move(dicomPort, 'CRA', SCU_AE, moveStudy));
      rows.push(row('service C-MOVE to storescp', dialect, serviceMove));
      notes.push(
        `service C-MOVE: RSS before ${mb(rssBefore)} MB, peak ${mb(serviceMove.rssPeakBytes ?? 0)} MB, after ${mb(serviceMove.rssAfterBytes ?? 0)} MB`,
      );
      serviceFind = await measureFinds(server.pid, dicomPort, 'CRA', SCU_AE, patientIds);
      rows.push(row('service C-FIND study root by PatientID', dialect, serviceFind));
    } finally {
      await server.stop();
      await prepared.cleanup();
    }

    const missing = process.env.BENCH_QR_ORTHANC === 'off' ? 'BENCH_QR_ORTHANC=off' : orthancMissing();
    if (missing !== undefined) {
      notes.push(`Orthanc not measured: ${missing}`);
    } else {
      // Orthanc knows the destination as a modality; a C-MOVE or C-FIND is allowed from a known modality,
      // so the queries call with the destination's AE title.
      const orthanc = await startOrthanc({
        aeTitle: 'ORTHANC',
        modality: { aeTitle: DEST_AE, port: destPort },
      });
      try {
        await uploadAll((file) => orthanc.upload(file), [moveDir, findDir]);
        const orthancMove = await measureMoves(orthanc.pid, () =>
          move(orthanc.dicomPort, 'ORTHANC', DEST_AE, moveStudy),
        );
        rows.push(row('Orthanc C-MOVE to storescp', 'none', orthancMove));
        const orthancFind = await measureFinds(
          orthanc.pid,
          orthanc.dicomPort,
          'ORTHANC',
          DEST_AE,
          patientIds,
        );
        rows.push(row('Orthanc C-FIND study root by PatientID', 'none', orthancFind));
        if (serviceMove !== undefined) {
          const ratio = serviceMove.requestsPerSec / orthancMove.requestsPerSec;
          notes.push(
            `C-MOVE: service ${serviceMove.requestsPerSec.toFixed(0)} instances/s, Orthanc ${orthancMove.requestsPerSec.toFixed(0)} instances/s: ` +
              `ratio ${ratio.toFixed(2)} (target >= ${TARGET_MOVE_RATIO}): ${ratio >= TARGET_MOVE_RATIO ? 'met' : 'MISSED'}`,
          );
        }
        if (serviceFind !== undefined) {
          const ratio = orthancFind.p99Ms / serviceFind.p99Ms;
          const met = serviceFind.p99Ms <= TARGET_FIND_P99_MS && ratio >= 1;
          notes.push(
            `C-FIND: service p99 ${serviceFind.p99Ms.toFixed(1)} ms, Orthanc p99 ${orthancFind.p99Ms.toFixed(1)} ms: ratio ${ratio.toFixed(2)} ` +
              `(targets p99 <= ${TARGET_FIND_P99_MS} ms, ratio >= 1.0): ${met ? 'met' : 'MISSED'}`,
          );
        }
      } finally {
        await orthanc.stop();
      }
    }
  } finally {
    storescp.kill();
    await rm(dir, { recursive: true, force: true });
  }
  return { rows, notes };
}

function mb(bytes: number): string {
  return (bytes / 1024 / 1024).toFixed(0);
}

/** `storescp` as the destination on `port`: receives, writes nothing. */
async function startStorescp(port: number): Promise<ChildProcess> {
  const child = spawn('storescp', ['-aet', DEST_AE, '--ignore', String(port)], { stdio: 'ignore' });
  const deadline = Date.now() + 10_000;
  while ((await runDcmtk('echoscu', ['-aec', DEST_AE, '127.0.0.1', String(port)], 5_000)).code !== 0) {
    if (Date.now() > deadline) throw new Error('storescp did not start');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return child;
}

/** Stores every file of `dirs` with storescu, one association per directory. */
async function storeAll(port: number, calledAe: string, dirs: readonly string[]): Promise<void> {
  for (const dir of dirs) {
    const result = await runDcmtk(
      'storescu',
      ['-aet', SCU_AE, '-aec', calledAe, '+sd', '127.0.0.1', String(port), dir],
      600_000,
    );
    if (result.code !== 0) throw new Error(`storescu failed: ${result.output.slice(-500)}`);
  }
}

async function uploadAll(upload: (file: Buffer) => Promise<string>, dirs: readonly string[]): Promise<void> {
  for (const dir of dirs) {
    const files = (await readdir(dir)).map((f) => path.join(dir, f));
    for (let i = 0; i < files.length; i += 8)
      await Promise.all(files.slice(i, i + 8).map(async (f) => upload(await readFile(f))));
  }
}

/** One movescu of the study to the destination. */
async function move(port: number, calledAe: string, callingAe: string, study: string): Promise<MoveResult> {
  const started = performance.now();
  const result = await runDcmtk(
    'movescu',
    [
      '-S',
      '-aet',
      callingAe,
      '-aec',
      calledAe,
      '-aem',
      DEST_AE,
      '-k',
      'QueryRetrieveLevel=STUDY',
      '-k',
      `StudyInstanceUID=${study}`,
      '127.0.0.1',
      String(port),
    ],
    600_000,
  );
  const seconds = (performance.now() - started) / 1000;
  return { seconds, ok: result.code === 0 && !/Failed|Error|Refused/.test(result.output) };
}

/** `MOVE_RUNS` moves; the fastest kept (a shared machine's noise only slows), RSS over all of them. */
async function measureMoves(pid: number, once: () => Promise<MoveResult>): Promise<LoadResult> {
  const sampler = startRssSampler(pid, 50);
  const runs: MoveResult[] = [];
  for (let i = 0; i < MOVE_RUNS; i += 1) runs.push(await once());
  const rssPeakBytes = await sampler.stop();
  const best = Math.min(...runs.map((r) => r.seconds));
  const failures = runs.filter((r) => !r.ok).length;
  const latencies = runs.map((r) => r.seconds * 1000).sort((a, b) => a - b);
  return {
    requestsPerSec: MOVE_INSTANCES / best,
    bytesPerSec: (MOVE_INSTANCES * MOVE_BYTES) / best,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    totalRequests: runs.length,
    durationSeconds: runs.reduce((sum, r) => sum + r.seconds, 0),
    errors: failures,
    timeouts: 0,
    non2xx: failures,
    statusCounts: { ok: runs.length - failures, failed: failures },
    rssPeakBytes,
    rssAfterBytes: await readRssBytes(pid),
  };
}

/** One study-root C-FIND by Patient ID on its own association; resolves to the answers' count. */
function findOnce(port: number, calledAe: string, callingAe: string, patientId: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const client = new Client();
    const request = requests.CFindRequest.createStudyFindRequest({
      PatientID: patientId,
      StudyInstanceUID: '',
      StudyDate: '',
    });
    let answers = 0;
    request.on('response', (response: { getStatus(): number }) => {
      if (response.getStatus() === 0xff00) answers += 1;
    });
    client.addRequest(request);
    client.on('networkError', (error: Error) => reject(error));
    client.on('associationRejected', () => reject(new Error('association rejected')));
    client.on('closed', () => resolve(answers));
    client.send('127.0.0.1', port, callingAe, calledAe);
  });
}

async function measureFinds(
  pid: number,
  port: number,
  calledAe: string,
  callingAe: string,
  patientIds: readonly string[],
): Promise<LoadResult> {
  for (const id of patientIds.slice(0, 20)) await findOnce(port, calledAe, callingAe, id);
  const sampler = startRssSampler(pid, 100);
  const latencies: number[] = [];
  let errors = 0;
  let answers = 0;
  const started = performance.now();
  for (const id of patientIds) {
    const begun = performance.now();
    try {
      answers += await findOnce(port, calledAe, callingAe, id);
      latencies.push(performance.now() - begun);
    } catch {
      errors += 1;
    }
  }
  const seconds = (performance.now() - started) / 1000;
  const rssPeakBytes = await sampler.stop();
  latencies.sort((a, b) => a - b);
  return {
    requestsPerSec: latencies.length / seconds,
    bytesPerSec: 0,
    p50Ms: percentile(latencies, 50),
    p99Ms: percentile(latencies, 99),
    totalRequests: latencies.length,
    durationSeconds: seconds,
    errors,
    timeouts: 0,
    non2xx: errors,
    statusCounts: { answers },
    rssPeakBytes,
    rssAfterBytes: await readRssBytes(pid),
  };
}

function row(name: string, dialect: Dialect | 'none', result: LoadResult): BenchRow {
  return { name, dialect, connections: 1, ...result };
}
