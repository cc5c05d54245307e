/**
 * Large uploads: the server's memory while 16 clients each send one 95 MiB file at once, in four ways:
 * attachment create with a raw body and with a multipart form (one file part), and queue add
 * (`request_type=dicom_request`) with a raw body and with a multipart form (part `scan`). The server runs
 * with the `npm start` flags, its worker off (nothing but the uploads), `RAW_BODY_LIMIT_BYTES` above the
 * file size and the default `UPLOAD_MEMORY_BYTES` (bodies are spooled to temporary files as they arrive
 * and loaded for the checks and the write under that budget).
 * Each way: every upload must answer 200; the server's RSS is sampled every 100 ms (peak), read when the
 * last answer is in (after) and 10 s later; then every stored file is downloaded through attachment view
 * and its SHA-256 compared with the SHA-256 of what was sent, and the spool directory must be empty.
 * The files are distinct (each 1 MiB chunk is stamped with the way, the upload and the chunk number), and
 * start like a DICOM file (128-byte preamble, `DICM`), sent as `application/dicom`.
 * Each way runs on a server of its own, started for it, so that no way's peak carries what an earlier way
 * left behind.
 * Target: RSS < 600 MB with 16 concurrent 95 MB uploads. `npm run bench -- uploads`
 * (`BENCH_UPLOAD_MB`, default 95; `BENCH_UPLOAD_CONCURRENCY`, default 16; `BENCH_UPLOAD_WAYS`, the ways
 * whose name contains one of its comma-separated words, e.g. `queue` or `create (raw)`; all by default).
 * `BENCH_BASELINE_DIR=/path/to/other/checkout`: each way also runs on that checkout's server (its
 * `src/main/server.ts` with the Node flags of its `npm start`) on the same database, alternately before
 * and after this checkout's, so that a change is measured against its baseline in the same run.
 * The memory target for downloads (16 parallel 20 MB downloads, then back near idle) is measured by
 * `bench/attachment.ts`.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import { Readable } from 'node:stream';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import type { Database } from '../src/db/database.ts';
import { spoolDirOf } from '../src/files/spool.ts';
import type { BenchReport, BenchRow, BenchRunOptions, HttpAnswer } from './lib.ts';
import {
  BENCH_AUTHORIZATION,
  START_NODE_FLAGS,
  ensureBenchAccount,
  percentile,
  prepareDatabase,
  readRssBytes,
  sendRequest,
  startNodeFlagsOf,
  startRssSampler,
  startServer,
} from './lib.ts';

const MiB = 1024 * 1024;
const UPLOAD_BYTES = Math.round(Number(process.env.BENCH_UPLOAD_MB ?? 95) * MiB);
const CONCURRENCY = Number(process.env.BENCH_UPLOAD_CONCURRENCY ?? 16);
const RSS_TARGET_BYTES = 600 * MiB;
const CHUNK_BYTES = MiB;
const SETTLE_MS = 10_000;
const VERIFY_CONNECTIONS = 4;
const BOUNDARY = 'benchUploadBoundary3hZq7Lx0';
const CREATE_PATH = '/api/v1/attachmentdisplay/create';
const ADD_PATH = '/api/v1/request/queue/add?request_type=dicom_request';
const VIEW_PATH = '/api/v1/attachmentdisplay/view';

interface Way {
  readonly name: string;
  readonly path: string;
  /** The multipart field of the file; raw body when undefined. */
  readonly field?: string;
  /** Whether the answer is queue add's `{"request_id":N}` (else attachment create's `{"id":N}`). */
  readonly isQueue: boolean;
}

const ALL_WAYS: readonly Way[] = [
  { name: 'POST attachmentdisplay/create (raw)', path: CREATE_PATH, isQueue: false },
  { name: 'POST attachmentdisplay/create (multipart)', path: CREATE_PATH, field: 'file', isQueue: false },
  { name: 'POST queue/add (raw)', path: ADD_PATH, isQueue: true },
  { name: 'POST queue/add (multipart)', path: ADD_PATH, field: 'scan', isQueue: true },
];

const WAY_WORDS = (process.env.BENCH_UPLOAD_WAYS ?? '')
  .split(',')
  .map((word) => word.trim())
  .filter((word) => word !== '');
const WAYS = ALL_WAYS.filter((way) => WAY_WORDS.length === 0 || WAY_WORDS.some((w) => way.name.includes(w)));

/**
 * The chunks of upload `index` of way `wayIndex`: `base` with a stamp at the start of each chunk; the
 * first chunk begins with a DICOM preamble and `DICM`.
 */
function* payloadChunks(base: Buffer, wayIndex: number, index: number): Generator<Buffer> {
  for (let offset = 0, chunk = 0; offset < UPLOAD_BYTES; offset += CHUNK_BYTES, chunk++) {
    const bytes = Buffer.from(base.subarray(0, Math.min(CHUNK_BYTES, UPLOAD_BYTES - offset)));
    const stampAt = chunk === 0 ? 132 : 0;
    bytes.write(`way ${wayIndex} upload ${index} chunk ${chunk};`, stampAt, 'latin1');
    if (chunk === 0) {
      bytes.fill(0, 0, 128);
      bytes.write('DICM', 128, 'latin1');
    }
    yield bytes;
  }
}

function sha256Of(chunks: Iterable<Buffer>): string {
  const hash = createHash('sha256');
  for (const chunk of chunks) hash.update(chunk);
  return hash.digest('hex');
}

/** Sends upload `index` of `way`, streamed (the client never holds the whole file). */
function upload(url: string, base: Buffer, way: Way, wayIndex: number, index: number, agent: http.Agent) {
  const chunks = payloadChunks(base, wayIndex, index);
  if (way.field === undefined) {
    return sendRequest(`${url}${way.path}`, {
      method: 'POST',
      agent,
      headers: {
        authorization: BENCH_AUTHORIZATION,
        'content-type': 'application/dicom',
        'content-length': UPLOAD_BYTES,
      },
      body: Readable.from(chunks),
    });
  }
  const head = Buffer.from(
    `--${BOUNDARY}\r\nContent-Disposition: form-data; name="${way.field}"; filename="upload-${index}.dcm"\r\n` +
      'Content-Type: application/dicom\r\n\r\n',
  );
  const tail = Buffer.from(`\r\n--${BOUNDARY}--\r\n`);
  return sendRequest(`${url}${way.path}`, {
    method: 'POST',
    agent,
    headers: {
      authorization: BENCH_AUTHORIZATION,
      'content-type': `multipart/form-data; boundary=${BOUNDARY}`,
      'content-length': head.length + UPLOAD_BYTES + tail.length,
    },
    body: Readable.from(
      (function* () {
        yield head;
        yield* chunks;
        yield tail;
      })(),
    ),
  });
}

/** The attachment_data id an answer names (queue add: the request's payload row). */
async function storedIdOf(database: Database, way: Way, answer: HttpAnswer): Promise<number | undefined> {
  const text = answer.body.toString();
  if (!way.isQueue) {
    const id = /^\{"id":(\d+)\}$/.exec(text)?.[1];
    return id === undefined ? undefined : Number(id);
  }
  const requestId = /^\{"request_id":(\d+)\}$/.exec(text)?.[1];
  if (requestId === undefined) return undefined;
  const row = await database.db
    .selectFrom('attachment_data')
    .select('id')
    .where('request_id', '=', Number(requestId))
    .where('attachment_mnemonic', '=', way.field ?? 'REQUEST_BLOB')
    .executeTakeFirst();
  return row?.id;
}

/** Downloads attachment `id` through attachment view and hashes the body as it arrives. */
function downloadSha256(url: string, id: number): Promise<{ status: number; bytes: number; sha256: string }> {
  return new Promise((resolve, reject) => {
    const request = http.get(
      `${url}${VIEW_PATH}?id=${id}`,
      { headers: { authorization: BENCH_AUTHORIZATION } },
      (response) => {
        const hash = createHash('sha256');
        let bytes = 0;
        response.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          hash.update(chunk);
        });
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, bytes, sha256: hash.digest('hex') }),
        );
        response.on('error', reject);
      },
    );
    request.on('error', reject);
  });
}

/** Runs `work` for 0..count-1, `connections` at a time. */
async function inParallel(count: number, connections: number, work: (index: number) => Promise<void>) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(count, connections) }, async () => {
      while (next < count) await work(next++);
    }),
  );
}

function mb(bytes: number): string {
  return (bytes / MiB).toFixed(0);
}

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const { dialect } = options;
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  const prepared = await prepareDatabase(dialect, { setup: (database) => ensureBenchAccount(database) });
  const serverEnv = {
    ...prepared.env,
    WORKER: 'off',
    RAW_BODY_LIMIT_BYTES: String(Math.max(100 * MiB, UPLOAD_BYTES + MiB)),
    MAX_REQUESTS_PER_CLIENT: '1000',
  };
  const config = loadConfig({ ...serverEnv, LOG_LEVEL: 'warn' });
  const database = await openDatabase(config.database, { poolSize: 2 });
  const baselineDir = process.env.BENCH_BASELINE_DIR;
  const variants =
    baselineDir === undefined || baselineDir === ''
      ? [{ label: '', dir: undefined }]
      : [
          { label: ' [baseline]', dir: path.resolve(baselineDir) },
          { label: ' [this checkout]', dir: undefined },
        ];
  const base = randomBytes(CHUNK_BYTES);
  try {
    notes.push(
      `${CONCURRENCY} concurrent uploads of ${mb(UPLOAD_BYTES)} MiB each way; UPLOAD_MEMORY_BYTES ${mb(config.limits.uploadMemoryBytes)} MiB, ` +
        `RAW_BODY_LIMIT_BYTES ${mb(config.limits.rawBodyBytes)} MiB; server Node flags: ${START_NODE_FLAGS.join(' ') || 'none'}`,
    );
    for (const [wayNumber, way] of WAYS.entries()) {
      const wayIndex = ALL_WAYS.indexOf(way);
      // Baseline first on even ways, last on odd ones: drift falls on both alike.
      for (const variant of wayNumber % 2 === 0 ? variants : [...variants].reverse()) {
        const name = `${way.name}${variant.label}`;
        const server = await startServer({
          env: serverEnv,
          ...(variant.dir === undefined
            ? {}
            : {
                entry: path.join(variant.dir, 'src/main/server.ts'),
                nodeFlags: startNodeFlagsOf(variant.dir),
              }),
        });
        try {
          const idleRss = await readRssBytes(server.pid);
          const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY });
          const answers: (HttpAnswer | Error)[] = new Array(CONCURRENCY);
          const sampler = startRssSampler(server.pid, 100);
          const started = performance.now();
          await Promise.all(
            Array.from({ length: CONCURRENCY }, async (_, index) => {
              try {
                answers[index] = await upload(server.url, base, way, wayIndex, index, agent);
              } catch (error) {
                answers[index] = error instanceof Error ? error : new Error(String(error));
              }
            }),
          );
          const seconds = (performance.now() - started) / 1000;
          const rssPeak = await sampler.stop();
          const rssAfter = await readRssBytes(server.pid);
          agent.destroy();

          await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
          const rssSettled = await readRssBytes(server.pid);
          // Then every stored file, downloaded through attachment view and hashed.
          let stored = 0;
          const problems: string[] = [];
          await inParallel(CONCURRENCY, VERIFY_CONNECTIONS, async (index) => {
            const answer = answers[index]!;
            if (answer instanceof Error) return void problems.push(`upload ${index}: ${answer.message}`);
            if (answer.status !== 200)
              return void problems.push(
                `upload ${index}: ${answer.status} ${answer.body.toString().slice(0, 200)}`,
              );
            const id = await storedIdOf(database, way, answer).catch((error: Error) => {
              problems.push(`upload ${index}: stored row not read: ${error.message}`);
              return null;
            });
            if (id === null) return;
            if (id === undefined)
              return void problems.push(`upload ${index}: no stored row for ${answer.body.toString()}`);
            const download = await downloadSha256(server.url, id).catch((error: Error) => error);
            if (download instanceof Error)
              return void problems.push(
                `upload ${index} (attachment ${id}): view failed: ${download.message}`,
              );
            const expected = sha256Of(payloadChunks(base, wayIndex, index));
            if (download.status !== 200 || download.bytes !== UPLOAD_BYTES || download.sha256 !== expected)
              return void problems.push(
                `upload ${index} (attachment ${id}): view ${download.status}, ${download.bytes} bytes, sha256 ${download.sha256 === expected ? 'equal' : 'DIFFERENT'}`,
              );
            stored += 1;
          });
          const spoolLeft = (await readdir(spoolDirOf(prepared.filesDir)).catch(() => [])).filter((f) =>
            f.endsWith('.upload'),
          ).length;

          const statusCounts: Record<string, number> = {};
          const latencies: number[] = [];
          let errors = 0;
          for (const answer of answers) {
            if (answer instanceof Error) {
              errors += 1;
              continue;
            }
            statusCounts[String(answer.status)] = (statusCounts[String(answer.status)] ?? 0) + 1;
            latencies.push(answer.ms);
          }
          latencies.sort((a, b) => a - b);
          rows.push({
            name,
            dialect,
            connections: CONCURRENCY,
            requestsPerSec: latencies.length / seconds,
            bytesPerSec: (CONCURRENCY * UPLOAD_BYTES) / seconds,
            p50Ms: percentile(latencies, 50),
            p99Ms: percentile(latencies, 99),
            totalRequests: latencies.length,
            durationSeconds: seconds,
            errors: errors + (CONCURRENCY - errors - stored),
            timeouts: 0,
            non2xx: latencies.length - (statusCounts['200'] ?? 0),
            statusCounts,
            rssPeakBytes: rssPeak,
            rssAfterBytes: rssAfter,
          });
          notes.push(
            `${name}: ${CONCURRENCY} x ${mb(UPLOAD_BYTES)} MiB in ${seconds.toFixed(1)} s (${((CONCURRENCY * UPLOAD_BYTES) / MiB / seconds).toFixed(0)} MiB/s, ` +
              `slowest answer ${((latencies.at(-1) ?? 0) / 1000).toFixed(1)} s); RSS ${mb(idleRss)} MB before, peak ${mb(rssPeak)} MB, ` +
              `${mb(rssAfter)} MB at the last answer, ${mb(rssSettled)} MB ${SETTLE_MS / 1000} s later; target < ${mb(RSS_TARGET_BYTES)} MB: ` +
              `${rssPeak < RSS_TARGET_BYTES ? 'met' : 'MISSED'}; answered 200 and stored byte for byte (SHA-256 through attachment view): ` +
              `${stored}/${CONCURRENCY}${stored === CONCURRENCY ? '' : ' FAILED'}; spool files left: ${spoolLeft}`,
            ...problems.map((p) => `${name}: ${p}`),
          );
          // Each way takes minutes: its figures are shown as soon as they are known.
          process.stderr.write(`${notes.at(-1 - problems.length)}\n`);
        } finally {
          await server.stop();
        }
      }
    }
    notes.push(
      'downloads (16 parallel 20 MB attachment views, then back to idle): see bench/attachment.ts, its RSS run',
    );
  } finally {
    await database.close();
    await prepared.cleanup();
  }
  return { rows, notes };
}
