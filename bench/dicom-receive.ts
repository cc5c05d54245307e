/**
 * DICOM receiving: how fast the real server (`src/main/server.ts`, WORKER=off) takes DICOM instances from
 * real senders, each instance stored and queued as a `dicom_request` before it is acknowledged, and
 * Orthanc beside it in the same run as the reference DICOM archive on this machine.
 *
 * - `STOW-RS`: `POST /api/v1/dicomweb/studies` over `BENCH_DICOM_STREAMS` keep-alive connections, each
 *   request a `multipart/related` body of `BENCH_DICOM_PER_REQUEST` instances streamed from disk.
 * - `C-STORE`: dcmtk's `storescu` to the service's SCP (`DICOM_PORT`), one association per stream.
 * - `Orthanc REST`: `POST /instances` (one instance per request) over the same number of connections.
 * - `Orthanc C-STORE`: `storescu` to Orthanc, one association per stream.
 *
 * Every path sends the same `BENCH_DICOM_INSTANCES` files (default 1,000) of `BENCH_DICOM_BYTES` each
 * (default 0.5 MB: an RGB Secondary Capture image with random pixels, written once to a temporary
 * directory). Rows: `req/s` is instances/s, `MB/s` instance bytes/s (10^6), p50/p99 the time of one HTTP
 * request (STOW-RS, REST) or of one sender's whole association (C-STORE), RSS of the receiving process.
 * Targets for the service: >= 100 instances/s and >= 50 MB/s on each path, RSS < 300 MB.
 * `npm run bench -- dicom-receive --dialect sqlite` (the --duration/--connections options do not apply;
 * `BENCH_DICOM_ORTHANC=off` leaves Orthanc out).
 */
import { createReadStream } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { buildInstance } from '../test/dicom-instances.ts';
import { runDcmtk } from '../test/dcmtk.ts';
import { orthancMissing, startOrthanc } from '../test/orthanc.ts';
import { freePort } from '../test/ports.ts';
import type { BenchReport, BenchRow, BenchRunOptions, Dialect, LoadResult } from './lib.ts';
import {
  ROOT_DIR,
  BENCH_AUTHORIZATION,
  ensureBenchAccount,
  prepareDatabase,
  readRssBytes,
  startRssSampler,
  startServer,
} from './lib.ts';

const INSTANCES = Number(process.env.BENCH_DICOM_INSTANCES ?? 1000);
const INSTANCE_BYTES = Number(process.env.BENCH_DICOM_BYTES ?? 512 * 1024);
const STREAMS = Number(process.env.BENCH_DICOM_STREAMS ?? 4);
const PER_REQUEST = Number(process.env.BENCH_DICOM_PER_REQUEST ?? 10);
const TARGET_INSTANCES_PER_SECOND = 100;
const TARGET_MB_PER_SECOND = 50;
const TARGET_RSS_MB = 300;
const BOUNDARY = 'benchDicomBoundary9f3c';
const SCU_AE = 'BENCHSCU';

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const { dialect } = options;
  const rows: BenchRow[] = [];
  const notes: string[] = [
    `${INSTANCES} instances of ${(INSTANCE_BYTES / 1e6).toFixed(2)} MB over ${STREAMS} streams; ` +
      `STOW-RS ${PER_REQUEST} instances per request; req/s = instances/s`,
  ];
  const dir = await mkdtemp(path.join(tmpdir(), 'cra-bench-dicom-'));
  const streamDirs = await writeInstances(dir);
  const files = streamDirs.flat();
  const totalBytes = (await Promise.all(files.map((f) => stat(f)))).reduce((sum, s) => sum + s.size, 0);

  const prepared = await prepareDatabase(dialect, { setup: (database) => ensureBenchAccount(database) });
  const dicomPort = await freePort();
  // With BENCH_DICOM_PROBE=1 the server's memory is split (heap, external, Buffers) every 0.5 s during
  // each run, and the split at the highest RSS read is noted.
  const probeFile = path.join(dir, 'probe.jsonl');
  const isProbing = process.env.BENCH_DICOM_PROBE === '1';
  const server = await startServer({
    env: {
      ...prepared.env,
      ...(isProbing
        ? {
            NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${path.join(ROOT_DIR, 'bench', 'memory-probe.child.js')}`,
            BENCH_MEMORY_PROBE_FILE: probeFile,
          }
        : {}),
      WORKER: 'off',
      DICOM_PORT: String(dicomPort),
      DICOM_AE_TITLE: 'CRA',
      DICOM_ALLOWED_CALLERS: `${SCU_AE}@127.0.0.1`,
    },
  });
  try {
    const probing = isProbing ? setInterval(() => process.kill(server.pid, 'SIGUSR2'), 500) : undefined;
    const stow = await measureRun(server.pid, () => sendStow(server.url, streamDirs), totalBytes);
    rows.push(row('service STOW-RS', dialect, stow));
    const cstore = await measureRun(
      server.pid,
      () => sendCStore({ aeTitle: 'CRA', port: dicomPort }, streamDirs, dir),
      totalBytes,
    );
    rows.push(row('service C-STORE', dialect, cstore));
    clearInterval(probing);
    if (isProbing) notes.push(await peakSplit(probeFile));
    for (const [name, result] of [
      ['STOW-RS', stow],
      ['C-STORE', cstore],
    ] as const) {
      const instancesPerSecond = result.requestsPerSec;
      const megabytesPerSecond = result.bytesPerSec / 1e6;
      const rssMb = (result.rssPeakBytes ?? 0) / 1024 / 1024;
      const met =
        instancesPerSecond >= TARGET_INSTANCES_PER_SECOND &&
        megabytesPerSecond >= TARGET_MB_PER_SECOND &&
        rssMb < TARGET_RSS_MB;
      notes.push(
        `service ${name}: ${instancesPerSecond.toFixed(0)} instances/s, ${megabytesPerSecond.toFixed(1)} MB/s, ` +
          `server CPU ${((result.cpuSeconds / Math.max(1, result.totalRequests)) * 1000).toFixed(2)} ms per instance, ` +
          `RSS before ${(result.rssBeforeBytes / 1024 / 1024).toFixed(0)} MB, peak ${rssMb.toFixed(0)} MB; targets >= ${TARGET_INSTANCES_PER_SECOND}/s, >= ${TARGET_MB_PER_SECOND} MB/s, ` +
          `< ${TARGET_RSS_MB} MB: ${met ? 'met' : 'MISSED'}`,
      );
      if (result.non2xx > 0 || result.errors > 0)
        notes.push(
          `service ${name}: failures ${JSON.stringify(result.statusCounts)} errors ${result.errors}`,
        );
    }
  } finally {
    await server.stop();
    await prepared.cleanup();
  }

  const missing = process.env.BENCH_DICOM_ORTHANC === 'off' ? 'BENCH_DICOM_ORTHANC=off' : orthancMissing();
  if (missing !== undefined) {
    notes.push(`Orthanc not measured: ${missing}`);
  } else {
    const orthanc = await startOrthanc({ aeTitle: 'ORTHANC' });
    try {
      const rest = await measureRun(
        orthanc.pid,
        () => sendOrthancRest(orthanc.httpUrl, streamDirs),
        totalBytes,
      );
      rows.push(row('Orthanc REST POST /instances', 'none', rest));
      // Orthanc ignores instances it already holds (OverwriteInstances is off by default): C-STORE is
      // measured on a fresh Orthanc.
      await orthanc.stop();
      const fresh = await startOrthanc({ aeTitle: 'ORTHANC' });
      try {
        const cstore = await measureRun(
          fresh.pid,
          () => sendCStore({ aeTitle: 'ORTHANC', port: fresh.dicomPort }, streamDirs, dir),
          totalBytes,
        );
        rows.push(row('Orthanc C-STORE', 'none', cstore));
      } finally {
        await fresh.stop();
      }
    } finally {
      await orthanc.stop();
    }
  }
  await rm(dir, { recursive: true, force: true });
  return { rows, notes };
}

/** Writes the instances, spread over one directory per stream; returns the files of each stream. */
async function writeInstances(dir: string): Promise<string[][]> {
  const streams: string[][] = Array.from({ length: STREAMS }, () => []);
  for (let s = 0; s < STREAMS; s += 1) await mkdir(path.join(dir, `stream-${s}`));
  // The pixel data is most of the instance: about INSTANCE_BYTES in all.
  const pixelBytes = Math.max(3, INSTANCE_BYTES - 1024);
  for (let i = 0; i < INSTANCES; i += 1) {
    const stream = i % STREAMS;
    const file = path.join(dir, `stream-${stream}`, `${i}.dcm`);
    await writeFile(file, buildInstance({ pixelBytes }));
    streams[stream]!.push(file);
  }
  return streams;
}

interface Sent {
  /** Instances acknowledged as stored. */
  readonly stored: number;
  /** Per request (HTTP) or per association (C-STORE), in ms. */
  readonly latenciesMs: readonly number[];
  readonly statusCounts: Record<string, number>;
  readonly errors: number;
}

/** Runs `send` while sampling the receiver's RSS; instances/s and bytes/s over the wall time. */
async function measureRun(
  pid: number,
  send: () => Promise<Sent>,
  totalBytes: number,
): Promise<LoadResult & { cpuSeconds: number; rssBeforeBytes: number }> {
  const rssBeforeBytes = await readRssBytes(pid);
  const sampler = startRssSampler(pid, 50);
  const cpuBefore = await cpuSecondsOf(pid);
  const started = performance.now();
  const sent = await send();
  const seconds = (performance.now() - started) / 1000;
  const rssPeakBytes = await sampler.stop();
  const cpuSeconds = (await cpuSecondsOf(pid)) - cpuBefore;
  const sorted = [...sent.latenciesMs].sort((a, b) => a - b);
  const percentile = (p: number) =>
    sorted.length === 0 ? 0 : sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
  const non2xx = Object.entries(sent.statusCounts)
    .filter(([code]) => !code.startsWith('2') && code !== 'ok')
    .reduce((sum, [, count]) => sum + count, 0);
  return {
    requestsPerSec: sent.stored / seconds,
    bytesPerSec: (totalBytes * (sent.stored / INSTANCES)) / seconds,
    p50Ms: percentile(50),
    p99Ms: percentile(99),
    totalRequests: sent.stored,
    durationSeconds: seconds,
    errors: sent.errors,
    timeouts: 0,
    non2xx,
    statusCounts: sent.statusCounts,
    rssPeakBytes,
    rssAfterBytes: await readRssBytes(pid),
    cpuSeconds,
    rssBeforeBytes,
  };
}

/** The memory probe's reading at the highest RSS it saw. */
async function peakSplit(probeFile: string): Promise<string> {
  const samples = (await readFile(probeFile, 'utf8'))
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as { memory: NodeJS.MemoryUsage });
  const top = samples.reduce((a, b) => (b.memory.rss > a.memory.rss ? b : a));
  const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(0);
  const m = top.memory;
  return (
    `highest RSS the probe read (${samples.length} readings): ${mb(m.rss)} MB; main thread heap ${mb(m.heapUsed)}/` +
    `${mb(m.heapTotal)} MB, external ${mb(m.external)} MB, array buffers ${mb(m.arrayBuffers)} MB`
  );
}

/** User and system CPU time of a process, all its threads, in seconds (`/proc/<pid>/stat`, 100 ticks/s). */
async function cpuSecondsOf(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

function row(name: string, dialect: Dialect | 'none', result: LoadResult): BenchRow {
  return { name, dialect, connections: STREAMS, ...result };
}

/** One POST of `body`, answered fully; resolves to the status and the answer. */
function post(
  agent: http.Agent,
  url: string,
  headers: Record<string, string>,
  body: Readable,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method: 'POST', agent, headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }),
      );
      response.on('error', reject);
    });
    request.on('error', reject);
    body.pipe(request);
  });
}

/** A `multipart/related` body streamed from `files` (never the whole body in memory). */
function stowBody(files: readonly string[]): Readable {
  return Readable.from(
    (async function* () {
      for (const file of files) {
        yield Buffer.from(`--${BOUNDARY}\r\nContent-Type: application/dicom\r\n\r\n`);
        for await (const chunk of createReadStream(file)) yield chunk as Buffer;
        yield Buffer.from('\r\n');
      }
      yield Buffer.from(`--${BOUNDARY}--\r\n`);
    })(),
  );
}

/** One HTTP request of a batch of files: where, with which headers and body, and how many it stored. */
interface HttpBatch {
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly body: Readable;
  storedBy(answer: { status: number; body: string }): number;
}

/** Each stream posts its files, `batchSize` per request, one request at a time on its connection. */
async function sendOverHttp(
  streamDirs: readonly string[][],
  batchSize: number,
  requestOf: (batch: readonly string[]) => HttpBatch,
): Promise<Sent> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: STREAMS });
  const latenciesMs: number[] = [];
  const statusCounts: Record<string, number> = {};
  let stored = 0;
  let errors = 0;
  await Promise.all(
    streamDirs.map(async (files) => {
      for (let i = 0; i < files.length; i += batchSize) {
        const request = requestOf(files.slice(i, i + batchSize));
        const started = performance.now();
        try {
          const answer = await post(agent, request.url, request.headers, request.body);
          latenciesMs.push(performance.now() - started);
          statusCounts[answer.status] = (statusCounts[answer.status] ?? 0) + 1;
          stored += request.storedBy(answer);
        } catch {
          errors += 1;
        }
      }
    }),
  );
  agent.destroy();
  return { stored, latenciesMs, statusCounts, errors };
}

/** STOW-RS: `PER_REQUEST` instances per request; stored = the ReferencedSOPSequence's items. */
function sendStow(baseUrl: string, streamDirs: readonly string[][]): Promise<Sent> {
  return sendOverHttp(streamDirs, PER_REQUEST, (batch) => ({
    url: `${baseUrl}/api/v1/dicomweb/studies`,
    headers: {
      authorization: BENCH_AUTHORIZATION,
      'content-type': `multipart/related; type="application/dicom"; boundary=${BOUNDARY}`,
      accept: 'application/dicom+json',
    },
    body: stowBody(batch),
    storedBy: (answer) =>
      (JSON.parse(answer.body) as Record<string, { Value?: unknown[] }>)['00081199']?.Value?.length ?? 0,
  }));
}

/** Orthanc's REST upload: one instance per request. */
function sendOrthancRest(baseUrl: string, streamDirs: readonly string[][]): Promise<Sent> {
  return sendOverHttp(streamDirs, 1, (batch) => ({
    url: `${baseUrl}/instances`,
    headers: { 'content-type': 'application/dicom' },
    body: createReadStream(batch[0]!),
    storedBy: (answer) => (answer.status === 200 ? 1 : 0),
  }));
}

/** C-STORE: one `storescu` association per stream, each sending its stream's directory. */
async function sendCStore(
  called: { aeTitle: string; port: number },
  streamDirs: readonly string[][],
  dir: string,
): Promise<Sent> {
  const latenciesMs: number[] = [];
  const statusCounts: Record<string, number> = {};
  let stored = 0;
  let errors = 0;
  await Promise.all(
    streamDirs.map(async (files, s) => {
      const started = performance.now();
      const result = await runDcmtk(
        'storescu',
        ['-aet', SCU_AE, '-aec', called.aeTitle, '-xe', '+sd', '127.0.0.1', String(called.port)].concat(
          path.join(dir, `stream-${s}`),
        ),
        30 * 60_000,
      );
      latenciesMs.push(performance.now() - started);
      const failed = (result.output.match(/Store Failed|Store SCU Failed/g) ?? []).length;
      const key = result.code === 0 ? 'ok' : `exit ${result.code}`;
      statusCounts[key] = (statusCounts[key] ?? 0) + 1;
      if (result.code !== 0) errors += 1;
      stored += files.length - failed;
    }),
  );
  return { stored, latenciesMs, statusCounts, errors };
}
