/**
 * DICOMweb QIDO-RS and WADO-RS of the real server (`src/main/server.ts`, WORKER=off), and Orthanc's
 * DICOMweb plugin serving the same instances from its own store in the same run.
 *
 * The same instances go to both: one study of `BENCH_DICOMWEB_STUDY_INSTANCES` instances (default 200)
 * of `BENCH_DICOMWEB_BYTES` each (default 0.5 MB, RGB Secondary Capture, random pixels) and
 * `BENCH_DICOMWEB_OTHER_STUDIES` other studies (default 2,000) of one small instance each, each of its
 * own patient; the service gets them by STOW-RS, Orthanc by its REST upload.
 * - `QIDO-RS studies?PatientID=`: a study search by one patient's PatientID (its own study), autocannon
 *   at `--connections` (default here 16); target p99 <= 20 ms at 16 connections.
 * - `QIDO-RS studies?StudyInstanceUID=`: the same by the study's UID (the index's key).
 * - `WADO-RS study`: `GET /studies/{uid}` of the large study, read to the end, one retrieve at a time
 *   for `--duration` seconds; MB/s of instance bytes (10^6); target >= 100 MB/s. p50/p99 per retrieve.
 * `npm run bench -- dicomweb --dialect all` (`BENCH_DICOMWEB_ORTHANC=off` leaves Orthanc out).
 */
import http from 'node:http';
import { buildInstance, newUid } from '../test/dicom-instances.ts';
import { orthancMissing, startOrthanc } from '../test/orthanc.ts';
import type { BenchReport, BenchRow, BenchRunOptions, LoadResult, RunningProcess } from './lib.ts';
import {
  BENCH_AUTHORIZATION,
  ensureBenchAccount,
  measure,
  prepareDatabase,
  readRssBytes,
  startRssSampler,
  startServer,
} from './lib.ts';

const STUDY_INSTANCES = Number(process.env.BENCH_DICOMWEB_STUDY_INSTANCES ?? 200);
const INSTANCE_BYTES = Number(process.env.BENCH_DICOMWEB_BYTES ?? 512 * 1024);
const OTHER_STUDIES = Number(process.env.BENCH_DICOMWEB_OTHER_STUDIES ?? 2000);
const QIDO_CONNECTIONS = 16;
const TARGET_P99_MS = 20;
const TARGET_MB_PER_SECOND = 100;
const BOUNDARY = 'benchDicomWebBoundary5e1d';
const PER_REQUEST = 50;

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const { dialect } = options;
  const connections = options.connections.join(',') === '1,32' ? [QIDO_CONNECTIONS] : options.connections;
  const rows: BenchRow[] = [];
  const studyUid = newUid();
  const large = Array.from({ length: STUDY_INSTANCES }, (_, i) =>
    buildInstance({
      studyInstanceUid: studyUid,
      pixelBytes: Math.max(3, INSTANCE_BYTES - 1024),
      tags: { PatientID: 'BENCH-LARGE', InstanceNumber: String(i + 1) },
    }),
  );
  const others = Array.from({ length: OTHER_STUDIES }, (_, i) =>
    buildInstance({ tags: { PatientID: `BENCH-${String(i).padStart(6, '0')}`, PatientName: `Bench^P${i}` } }),
  );
  const largeBytes = large.reduce((sum, f) => sum + f.length, 0);
  const notes: string[] = [
    `one study of ${STUDY_INSTANCES} instances of ${(INSTANCE_BYTES / 1e6).toFixed(2)} MB ` +
      `(${(largeBytes / 1e6).toFixed(0)} MB), ${OTHER_STUDIES} other one-instance studies`,
  ];
  const searchedPatient = `BENCH-${String(Math.floor(OTHER_STUDIES / 2)).padStart(6, '0')}`;

  const prepared = await prepareDatabase(dialect, { setup: (database) => ensureBenchAccount(database) });
  const server = await startServer({ env: { ...prepared.env, WORKER: 'off' } });
  try {
    const started = performance.now();
    for (let i = 0; i < others.length; i += PER_REQUEST)
      await stow(server.url, others.slice(i, i + PER_REQUEST));
    for (let i = 0; i < large.length; i += PER_REQUEST)
      await stow(server.url, large.slice(i, i + PER_REQUEST));
    notes.push(`service: stored by STOW-RS in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    const auth = { authorization: BENCH_AUTHORIZATION, accept: 'application/dicom+json' };
    for (const c of connections) {
      rows.push(
        await measure({ name: 'service QIDO-RS studies?PatientID=', dialect }, server, {
          path: `/api/v1/dicomweb/studies?PatientID=${searchedPatient}`,
          headers: auth,
          connections: c,
          durationSeconds: options.durationSeconds,
          warmupSeconds: options.warmupSeconds,
        }),
      );
      rows.push(
        await measure({ name: 'service QIDO-RS studies?StudyInstanceUID=', dialect }, server, {
          path: `/api/v1/dicomweb/studies?StudyInstanceUID=${studyUid}`,
          headers: auth,
          connections: c,
          durationSeconds: options.durationSeconds,
          warmupSeconds: options.warmupSeconds,
        }),
      );
    }
    const wado = await retrieveLoop(
      server.pid,
      `${server.url}/api/v1/dicomweb/studies/${studyUid}`,
      { authorization: BENCH_AUTHORIZATION, accept: 'multipart/related; type="application/dicom"' },
      options.durationSeconds,
      largeBytes,
    );
    rows.push({ name: 'service WADO-RS study', dialect, connections: 1, ...wado });
    notes.push(...verdicts('service', rows, wado, connections));
  } finally {
    await server.stop();
    await prepared.cleanup();
  }

  const missing =
    process.env.BENCH_DICOMWEB_ORTHANC === 'off' ? 'BENCH_DICOMWEB_ORTHANC=off' : orthancMissing();
  if (missing !== undefined) {
    notes.push(`Orthanc not measured: ${missing}`);
    return { rows, notes };
  }
  const orthanc = await startOrthanc({ aeTitle: 'ORTHANC' });
  try {
    const started = performance.now();
    await Promise.all(
      [0, 1, 2, 3].map(async (lane) => {
        const files = [...others, ...large];
        for (let i = lane; i < files.length; i += 4) await orthanc.upload(files[i]!);
      }),
    );
    notes.push(`Orthanc: stored by REST in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    const target: RunningProcess = {
      url: orthanc.httpUrl,
      pid: orthanc.pid,
      rssBytes: () => readRssBytes(orthanc.pid),
      stop: () => orthanc.stop(),
    };
    const orthancRows: BenchRow[] = [];
    for (const c of connections) {
      orthancRows.push(
        await measure({ name: 'Orthanc QIDO-RS studies?PatientID=', dialect: 'none' }, target, {
          path: `/dicom-web/studies?PatientID=${searchedPatient}`,
          headers: { accept: 'application/dicom+json' },
          connections: c,
          durationSeconds: options.durationSeconds,
          warmupSeconds: options.warmupSeconds,
        }),
      );
      orthancRows.push(
        await measure({ name: 'Orthanc QIDO-RS studies?StudyInstanceUID=', dialect: 'none' }, target, {
          path: `/dicom-web/studies?StudyInstanceUID=${studyUid}`,
          headers: { accept: 'application/dicom+json' },
          connections: c,
          durationSeconds: options.durationSeconds,
          warmupSeconds: options.warmupSeconds,
        }),
      );
    }
    const wado = await retrieveLoop(
      orthanc.pid,
      `${orthanc.httpUrl}/dicom-web/studies/${studyUid}`,
      { accept: 'multipart/related; type="application/dicom"' },
      options.durationSeconds,
      largeBytes,
    );
    orthancRows.push({ name: 'Orthanc WADO-RS study', dialect: 'none', connections: 1, ...wado });
    rows.push(...orthancRows);
    notes.push(
      `Orthanc WADO-RS study: ${(wado.bytesPerSec / 1e6).toFixed(0)} MB/s; QIDO-RS p99 ` +
        orthancRows
          .filter((r) => r.name.includes('QIDO'))
          .map((r) => `${r.name.replace('Orthanc QIDO-RS ', '')} ${r.p99Ms.toFixed(1)} ms @${r.connections}`)
          .join(', '),
    );
  } finally {
    await orthanc.stop();
  }
  return { rows, notes };
}

function verdicts(
  who: string,
  rows: readonly BenchRow[],
  wado: LoadResult,
  connections: readonly number[],
): string[] {
  const notes: string[] = [];
  for (const row of rows.filter((r) => r.name.startsWith(`${who} QIDO`))) {
    const isTarget = row.connections === QIDO_CONNECTIONS;
    notes.push(
      `${row.name} @${row.connections}: p99 ${row.p99Ms.toFixed(1)} ms, ${row.requestsPerSec.toFixed(0)} req/s` +
        (isTarget
          ? `; target <= ${TARGET_P99_MS} ms: ${row.p99Ms <= TARGET_P99_MS ? 'met' : 'MISSED'}`
          : '') +
        (row.non2xx > 0 || row.errors > 0 ? `; failures ${JSON.stringify(row.statusCounts)}` : ''),
    );
  }
  if (!connections.includes(QIDO_CONNECTIONS))
    notes.push(`(the QIDO target is at ${QIDO_CONNECTIONS} connections)`);
  const mbs = wado.bytesPerSec / 1e6;
  notes.push(
    `${who} WADO-RS study: ${mbs.toFixed(0)} MB/s over ${wado.totalRequests} retrieves, RSS peak ` +
      `${((wado.rssPeakBytes ?? 0) / 1024 / 1024).toFixed(0)} MB; target >= ${TARGET_MB_PER_SECOND} MB/s: ` +
      `${mbs >= TARGET_MB_PER_SECOND ? 'met' : 'MISSED'}` +
      (wado.non2xx > 0 || wado.errors > 0 ? `; failures ${JSON.stringify(wado.statusCounts)}` : ''),
  );
  return notes;
}

/** STOW-RS of `files` in one request; throws unless every instance was stored. */
async function stow(baseUrl: string, files: readonly Buffer[]): Promise<void> {
  const parts: Buffer[] = [];
  for (const file of files) {
    parts.push(
      Buffer.from(`--${BOUNDARY}\r\nContent-Type: application/dicom\r\n\r\n`),
      file,
      Buffer.from('\r\n'),
    );
  }
  parts.push(Buffer.from(`--${BOUNDARY}--\r\n`));
  const response = await fetch(`${baseUrl}/api/v1/dicomweb/studies`, {
    method: 'POST',
    headers: {
      authorization: BENCH_AUTHORIZATION,
      'content-type': `multipart/related; type="application/dicom"; boundary=${BOUNDARY}`,
    },
    body: Buffer.concat(parts),
  });
  if (response.status !== 200)
    throw new Error(`STOW-RS answered ${response.status}: ${await response.text()}`);
}

/**
 * Retrieves `url` one at a time for `seconds`, each answer read to its end; bytes/s counts the instance
 * bytes (`instanceBytes` per retrieve), not the multipart framing.
 */
async function retrieveLoop(
  pid: number,
  url: string,
  headers: Record<string, string>,
  seconds: number,
  instanceBytes: number,
): Promise<LoadResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const latencies: number[] = [];
  const statusCounts: Record<string, number> = {};
  let errors = 0;
  let complete = 0;
  const sampler = startRssSampler(pid, 50);
  const started = performance.now();
  while (performance.now() - started < seconds * 1000) {
    const begun = performance.now();
    try {
      const { status, bytes } = await new Promise<{ status: number; bytes: number }>((resolve, reject) => {
        http
          .get(url, { agent, headers }, (response) => {
            let bytes = 0;
            response.on('data', (chunk: Buffer) => (bytes += chunk.length));
            response.on('end', () => resolve({ status: response.statusCode ?? 0, bytes }));
            response.on('error', reject);
          })
          .on('error', reject);
      });
      statusCounts[status] = (statusCounts[status] ?? 0) + 1;
      if (status === 200 && bytes >= instanceBytes) complete += 1;
      else errors += 1;
      latencies.push(performance.now() - begun);
    } catch {
      errors += 1;
    }
  }
  const elapsed = (performance.now() - started) / 1000;
  const rssPeakBytes = await sampler.stop();
  agent.destroy();
  const sorted = [...latencies].sort((a, b) => a - b);
  const at = (p: number) =>
    sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!;
  const ok = statusCounts['200'] ?? 0;
  return {
    requestsPerSec: latencies.length / elapsed,
    bytesPerSec: (complete * instanceBytes) / elapsed,
    p50Ms: at(0.5),
    p99Ms: at(0.99),
    totalRequests: latencies.length,
    durationSeconds: elapsed,
    errors,
    timeouts: 0,
    non2xx: latencies.length - ok,
    statusCounts,
    rssPeakBytes,
    rssAfterBytes: await readRssBytes(pid),
  };
}
