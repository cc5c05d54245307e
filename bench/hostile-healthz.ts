/**
 * `/healthz` under each attack of issue 32, one at a time: the real server (`src/main/server.ts`, the
 * queue worker in process) on 127.0.0.1, a fresh database and a fresh server per attack, `/healthz` sent
 * every 50 ms (on a new connection, timed from its send to its last byte, 30 s at most) from the start of
 * the attack until the server has finished with it (its queued requests no longer RUNNING). Reported per
 * attack: p50, p99 and max of `/healthz`, the server's peak RSS (sampled every 100 ms) and what the attack
 * got (answers, routine outcomes, bytes left in `FILES_DIR`). The goal is `/healthz` under 1 s throughout.
 *
 * - `idle`: no attack, 3 s: the reference.
 * - `biometry`: an "IOLMaster 700" object whose 99CZM block names `BENCH_HOSTILE_LENSES` (default 2,000)
 *   lenses for one eye, queued for the patient it names (DICOM_SEED, PATIENT_MATCH, FILE_BIOMETRY).
 * - `stow`: four STOW-RS posts at once, each an instance with an 8 MB UT value (PatientName written as UT,
 *   explicit VR), and one small legitimate STOW-RS post once they are in flight.
 * - `sign-flood`: `BENCH_HOSTILE_SIGN_STREAMS` (default 4) anonymous clients posting sign/add back to back
 *   for `BENCH_HOSTILE_SIGN_SECONDS` (default 15) s, each with a unique code of no event and a ~7 MB PNG,
 *   at the default rate limit (the attacker's situation).
 * - `thumbnails`: three queue adds at once of a 10000 x 10000, 16-bit RGBA, interlaced PNG with EXIF
 *   orientation 6 (at the thumbnail's pixel limit), for the patient they name: MAKE_THUMBNAILS.
 * - `device-keys`: queue adds of a small PNG whose query string sets the keys that filing trusts
 *   (`device_profile=zeiss-humphrey`, `device_event_date` of `garbage`, `0001-01-01`, `9999-12-31`;
 *   `console_edits`).
 *
 * `npm run bench -- hostile-healthz --dialect sqlite` (also postgres, mysql; --duration/--connections do
 * not apply). `BENCH_HOSTILE_ATTACKS=biometry,stow` runs only those.
 */
import { crc32, createDeflate } from 'node:zlib';
import { readdir, stat } from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';
import type { Database } from '../src/db/database.ts';
import { iolMasterCalculations } from '../test/biometry-objects.ts';
import { buildInstance, multipartRelated, newUid, stowContentType } from '../test/dicom-instances.ts';
import { createInstitution, createPatient } from '../test/factories.ts';
import { addIdentifier, createIdentifierType } from '../test/factories-patient.ts';
import { b64, makePng } from '../test/factories-signature.ts';
import { EXPLICIT_VR_LITTLE_ENDIAN, instanceWith, longText } from '../test/hostile-dicom.ts';
import type { BenchReport, BenchRow, BenchRunOptions, Dialect, HttpAnswer, RunningProcess } from './lib.ts';
import {
  BENCH_AUTHORIZATION,
  ensureBenchAccount,
  percentile,
  prepareDatabase,
  sendRequest,
  startRssSampler,
  startServer,
} from './lib.ts';

const PROBE_INTERVAL_MS = 50;
const PROBE_TIMEOUT_MS = 30_000;
const TARGET_MS = 1000;
/** How long an attack's queued requests may run before the bench stops waiting for them. */
const DRAIN_TIMEOUT_MS = 300_000;
const LENSES = Number(process.env.BENCH_HOSTILE_LENSES ?? 2000);
const SIGN_STREAMS = Number(process.env.BENCH_HOSTILE_SIGN_STREAMS ?? 4);
const SIGN_SECONDS = Number(process.env.BENCH_HOSTILE_SIGN_SECONDS ?? 15);
const MiB = 1024 * 1024;

/** The patient every queued attack names (hospital number, date of birth, sex). */
const PATIENT = { hosNum: '7654321', dob: '1960-01-02', dicomDob: '19600102', sex: 'F' } as const;
const MATCH_QUERY = `hos_num=${PATIENT.hosNum}&dob=${PATIENT.dob}&sex=${PATIENT.sex}`;
const ADD = '/api/v1/request/queue/add';

/** What an attack did, besides the load it put on the server. */
interface AttackOutcome {
  /** Queued request ids whose end the phase waits for. */
  readonly requestIds?: readonly number[];
  /** Lines for the notes (answers, timings). */
  readonly lines: readonly string[];
}

interface Attack {
  readonly name: string;
  readonly label: string;
  /** Built before the server starts, so that building it loads nothing the probe measures. */
  prepare(): Promise<(server: RunningProcess) => Promise<AttackOutcome>>;
}

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const { dialect } = options;
  const chosen = process.env.BENCH_HOSTILE_ATTACKS?.split(',').map((name) => name.trim());
  const attacks = ATTACKS.filter((attack) => chosen === undefined || chosen.includes(attack.name));
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  for (const attack of attacks) {
    const send = await attack.prepare();
    const prepared = await prepareDatabase(dialect, { setup: setUpDatabase });
    const server = await startServer({ env: { ...prepared.env, WORKER: 'in-process' } });
    try {
      const rssStartBytes = await server.rssBytes();
      const rss = startRssSampler(server.pid, 100);
      const probe = startProbe(server.url);
      const started = performance.now();
      const outcome = await send(server);
      const ends = await waitForRequests(server.url, outcome.requestIds ?? []);
      const phaseSeconds = (performance.now() - started) / 1000;
      const health = await probe.stop();
      const rssPeakBytes = await rss.stop();
      const rssAfterBytes = await server.rssBytes();
      const filesBytes = await directoryBytes(prepared.filesDir);
      const row = rowOf(`GET /healthz during ${attack.label}`, dialect, health, rssPeakBytes, rssAfterBytes);
      rows.push(row);
      const maxMs = Math.max(0, ...health.map((a) => a.ms));
      notes.push(
        `${attack.name}: /healthz max ${maxMs.toFixed(0)} ms, p99 ${row.p99Ms.toFixed(0)} ms over ${health.length} probes in ${phaseSeconds.toFixed(1)} s (${maxMs < TARGET_MS ? 'under' : 'NOT under'} ${TARGET_MS} ms); RSS ${mb(rssStartBytes)} -> peak ${mb(rssPeakBytes)} MB; FILES_DIR ${mb(filesBytes)} MB`,
        ...outcome.lines.map((line) => `${attack.name}: ${line}`),
        ...(ends.length === 0 ? [] : [`${attack.name}: requests ${ends.join(', ')}`]),
      );
    } finally {
      await server.stop();
      await prepared.cleanup();
    }
  }
  return { rows, notes };
}

/** The bench account and the patient the queued attacks name. */
async function setUpDatabase(database: Database): Promise<void> {
  await ensureBenchAccount(database);
  const typeId = await createIdentifierType(database.db, {
    institution_id: await createInstitution(database.db),
  });
  const { patientId } = await createPatient(database.db, {
    patient: { dob: PATIENT.dob, gender: PATIENT.sex },
  });
  await addIdentifier(database.db, patientId, typeId, PATIENT.hosNum);
}

const ATTACKS: readonly Attack[] = [
  {
    name: 'idle',
    label: 'no attack (3 s)',
    prepare: async () => async () => {
      await sleep(3000);
      return { lines: [] };
    },
  },
  {
    name: 'biometry',
    label: `a biometry file of ${LENSES} lens names`,
    prepare: async () => {
      const bytes = await iolMasterCalculations(
        { id: PATIENT.hosNum, dob: PATIENT.dicomDob, sex: PATIENT.sex },
        { studyUid: newUid(), sopUid: newUid(), acquisition: '20240301103512' },
        { lensNames: Array.from({ length: LENSES }, (_, i) => `Lens ${i}`) },
      );
      return async (server) => {
        const form = new FormData();
        form.append('scan', new Blob([new Uint8Array(bytes)], { type: 'application/dicom' }), 'scan.dcm');
        const answer = await postForm(server, `${ADD}?request_type=dicom_request`, form);
        return {
          requestIds: requestIdsOf([answer]),
          lines: [`queue add of ${(bytes.length / 1e6).toFixed(2)} MB: ${describe([answer])}`],
        };
      };
    },
  },
  {
    name: 'stow',
    label: 'four STOW-RS posts with an 8 MB UT value',
    prepare: async () => {
      const hostile = multipartRelated([
        instanceWith({
          transferSyntaxUid: EXPLICIT_VR_LITTLE_ENDIAN,
          patientName: longText(8 * MiB),
          patientNameVr: 'UT',
        }),
      ]);
      return async (server) => {
        const headers = { authorization: BENCH_AUTHORIZATION, 'content-type': stowContentType() };
        const stow = (body: Buffer) =>
          sendRequest(`${server.url}/api/v1/dicomweb/studies`, { method: 'POST', headers, body });
        const posts = Array.from({ length: 4 }, () => stow(hostile));
        await sleep(200);
        const legit = await stow(multipartRelated([buildInstance()]));
        const answers = await Promise.all(posts);
        return {
          lines: [
            `hostile posts: ${describe(answers)}, slowest ${Math.max(...answers.map((a) => a.ms)).toFixed(0)} ms`,
            `legitimate STOW-RS meanwhile: ${legit.status} in ${legit.ms.toFixed(0)} ms`,
          ],
        };
      };
    },
  },
  {
    name: 'sign-flood',
    label: `a sign/add flood (${SIGN_STREAMS} clients, wrong code, ~7 MB PNG)`,
    prepare: async () => {
      // 1,560 x 1,560 RGB noise: about 7.3 MB of PNG, 9.7 MB of base64, under the 10 MiB body limit.
      const png = makePng(1560, 1560, { isNoisy: true });
      const body = Buffer.from(
        JSON.stringify({
          unique_identifier: 'NOEVENT',
          extra_info: JSON.stringify({ e_id: 1, e_t_id: 1 }),
          image: b64(png),
        }),
      );
      return async (server) => {
        const answers: HttpAnswer[] = [];
        const until = performance.now() + SIGN_SECONDS * 1000;
        const headers = { 'content-type': 'application/json' };
        await Promise.all(
          Array.from({ length: SIGN_STREAMS }, async () => {
            while (performance.now() < until) {
              answers.push(
                await sendRequest(`${server.url}/api/v1/sign/add`, { method: 'POST', headers, body }).catch(
                  () => ({ status: 0, body: Buffer.alloc(0), ms: 0 }),
                ),
              );
            }
          }),
        );
        return {
          lines: [
            `${answers.length} posts of ${(body.length / 1e6).toFixed(1)} MB (PNG ${(png.length / 1e6).toFixed(1)} MB) in ${SIGN_SECONDS} s: ${describe(answers)}`,
          ],
        };
      };
    },
  },
  {
    name: 'thumbnails',
    label: 'three 10000x10000 16-bit interlaced PNGs with EXIF orientation',
    prepare: async () => {
      const png = await interlacedPng16(10_000, 10_000);
      return async (server) => {
        const answers = await Promise.all(
          Array.from({ length: 3 }, () =>
            sendRequest(`${server.url}${ADD}?request_type=imaging&${MATCH_QUERY}`, {
              method: 'POST',
              headers: { authorization: BENCH_AUTHORIZATION, 'content-type': 'image/png' },
              body: png,
            }),
          ),
        );
        return {
          requestIds: requestIdsOf(answers),
          lines: [`three queue adds of ${(png.length / 1e6).toFixed(2)} MB: ${describe(answers)}`],
        };
      };
    },
  },
  {
    name: 'device-keys',
    label: 'queue adds with forged device_* keys',
    prepare: async () => {
      const png = makePng(64, 48);
      const forged = [
        'device_profile=zeiss-humphrey&device_event_date=garbage&device_subtype=Visual%20Field',
        'device_profile=zeiss-humphrey&device_event_date=0001-01-01&device_laterality=R',
        'device_profile=zeiss-humphrey&device_event_date=9999-12-31&device_filer=generic',
        'console_edits=%5B%7B%22field%22%3A%22x%22%7D%5D&console_edits=%5B%5D',
      ];
      return async (server) => {
        const answers: HttpAnswer[] = [];
        for (const keys of forged) {
          const form = new FormData();
          form.append('note', 'hostile');
          form.append('file', new Blob([new Uint8Array(png)], { type: 'image/png' }), 'image.png');
          answers.push(await postForm(server, `${ADD}?request_type=imaging&${MATCH_QUERY}&${keys}`, form));
        }
        return {
          requestIds: requestIdsOf(answers),
          lines: [`${forged.length} queue adds: ${describe(answers)}`],
        };
      };
    },
  },
];

/** Posts a FormData body (its multipart bytes and boundary) as the bench account. */
async function postForm(server: RunningProcess, pathAndQuery: string, form: FormData): Promise<HttpAnswer> {
  const encoded = new Response(form);
  const body = Buffer.from(await encoded.arrayBuffer());
  return sendRequest(`${server.url}${pathAndQuery}`, {
    method: 'POST',
    headers: {
      authorization: BENCH_AUTHORIZATION,
      'content-type': encoded.headers.get('content-type')!,
    },
    body,
  });
}

function requestIdsOf(answers: readonly HttpAnswer[]): number[] {
  return answers.flatMap((answer) => {
    if (answer.status !== 200) return [];
    const id = (JSON.parse(answer.body.toString()) as { request_id?: unknown }).request_id;
    return typeof id === 'number' ? [id] : [];
  });
}

/** `200 x3, 422 x1` and the body of the first refusal when it is short (a message, not a document). */
function describe(answers: readonly HttpAnswer[]): string {
  const counts = new Map<number, number>();
  for (const answer of answers) counts.set(answer.status, (counts.get(answer.status) ?? 0) + 1);
  const summary = [...counts].map(([status, count]) => `${status} x${count}`).join(', ');
  const refused = answers.find((a) => a.status !== 200 && a.status !== 0);
  return refused === undefined || refused.body.length > 200
    ? summary
    : `${summary} (${refused.body.toString()})`;
}

/**
 * Polls the status of `requestIds` (as their submitter) until none is RUNNING; returns, per request,
 * its status and its routines' outcomes (`12 COMPLETE [DICOM_SEED COMPLETE, PATIENT_MATCH COMPLETE after
 * 2 tries, ...]`).
 */
async function waitForRequests(baseUrl: string, requestIds: readonly number[]): Promise<string[]> {
  const deadline = performance.now() + DRAIN_TIMEOUT_MS;
  const ends: string[] = [];
  for (const id of requestIds) {
    while (true) {
      const answer = await sendRequest(`${baseUrl}/api/v1/request/queue/status?request_id=${id}`, {
        headers: { authorization: BENCH_AUTHORIZATION },
      });
      const status = JSON.parse(answer.body.toString()) as {
        status?: string;
        routines?: {
          routine_name: string;
          status: string;
          try_count: number;
          execution_log: string | null;
        }[];
      };
      if (status.status !== 'RUNNING' || performance.now() > deadline) {
        const routines = (status.routines ?? []).map((r) => {
          const reason = r.status === 'FAILED' ? ` (${lastLine(r.execution_log)})` : '';
          const tries = r.try_count > 1 ? ` after ${r.try_count} tries` : '';
          return `${r.routine_name} ${r.status}${tries}${reason}`;
        });
        ends.push(`${id} ${status.status ?? answer.status} [${routines.join(', ')}]`);
        break;
      }
      await sleep(250);
    }
  }
  return ends;
}

function lastLine(log: string | null): string {
  return (log ?? '').trim().split('\n').at(-1)?.slice(0, 140) ?? '';
}

/** `/healthz` every 50 ms on a new connection, until `stop()`; each answer timed from its send. */
function startProbe(baseUrl: string): { stop(): Promise<HttpAnswer[]> } {
  const answers: HttpAnswer[] = [];
  let isRunning = true;
  const loop = (async () => {
    while (isRunning) {
      answers.push(await probeOnce(`${baseUrl}/healthz`));
      await sleep(PROBE_INTERVAL_MS);
    }
  })();
  return {
    async stop() {
      isRunning = false;
      await loop;
      return answers;
    },
  };
}

/** One `/healthz`: status 0 and the time waited for a transport error or a timeout. */
function probeOnce(url: string): Promise<HttpAnswer> {
  const started = performance.now();
  return new Promise((resolve) => {
    const finish = (status: number) =>
      resolve({ status, body: Buffer.alloc(0), ms: performance.now() - started });
    const request = http.get(url, { agent: false, timeout: PROBE_TIMEOUT_MS }, (response) => {
      response.resume();
      response.on('end', () => finish(response.statusCode ?? 0));
      response.on('error', () => finish(0));
    });
    request.on('timeout', () => request.destroy());
    request.on('error', () => finish(0));
  });
}

/** Bytes of the regular files under `dir` (what a phase left in FILES_DIR). */
async function directoryBytes(dir: string): Promise<number> {
  let total = 0;
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    if (!entry.isFile()) continue;
    total += (await stat(path.join(entry.parentPath, entry.name)).catch(() => ({ size: 0 }))).size;
  }
  return total;
}

// Adam7: first column and row of each pass, and its column and row steps.
const ADAM7 = [
  [0, 0, 8, 8],
  [4, 0, 8, 8],
  [0, 4, 4, 8],
  [2, 0, 4, 4],
  [0, 2, 2, 4],
  [1, 0, 2, 2],
  [0, 1, 1, 2],
] as const;

function pngChunk(type: string, data: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

/**
 * A `width` x `height` PNG of 16-bit RGBA, Adam7-interlaced, with an eXIf chunk giving orientation 6: the
 * thumbnail attack. The pixels alternate two colours along each row, so the file is small (about 1 MB at
 * 10000 x 10000) while decoding it needs the whole image. Streamed row by row through deflate.
 */
async function interlacedPng16(width: number, height: number): Promise<Buffer> {
  const header = Buffer.alloc(13);
  header.writeUInt32BE(width, 0);
  header.writeUInt32BE(height, 4);
  header[8] = 16; // bit depth
  header[9] = 6; // RGBA
  header[12] = 1; // Adam7
  // A big-endian TIFF header with one IFD entry: Orientation (0x0112), SHORT, 6.
  const exif = Buffer.alloc(26);
  exif.write('MM', 0, 'latin1');
  exif.writeUInt16BE(42, 2);
  exif.writeUInt32BE(8, 4);
  exif.writeUInt16BE(1, 8);
  exif.writeUInt16BE(0x0112, 10);
  exif.writeUInt16BE(3, 12);
  exif.writeUInt32BE(1, 14);
  exif.writeUInt16BE(6, 18);
  const deflate = createDeflate({ level: 9 });
  const compressed: Buffer[] = [];
  deflate.on('data', (chunk: Buffer) => compressed.push(chunk));
  const ended = new Promise((resolve) => deflate.on('end', resolve));
  for (const [x0, y0, dx, dy] of ADAM7) {
    const passWidth = Math.ceil((width - x0) / dx);
    const passHeight = Math.ceil((height - y0) / dy);
    if (passWidth === 0 || passHeight === 0) continue;
    const row = Buffer.alloc(1 + passWidth * 8); // filter type 0, then the pixels
    for (let x = 0; x < passWidth; x++) {
      row.writeUInt16BE(x % 2 === 0 ? 0x4000 : 0x4400, 1 + x * 8);
      row.writeUInt16BE(0x8000, 3 + x * 8);
      row.writeUInt16BE(0x2000, 5 + x * 8);
      row.writeUInt16BE(0xffff, 7 + x * 8);
    }
    for (let y = 0; y < passHeight; y++) {
      if (!deflate.write(row)) await new Promise((resolve) => deflate.once('drain', resolve));
    }
  }
  deflate.end();
  await ended;
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', header),
    pngChunk('eXIf', exif),
    pngChunk('IDAT', Buffer.concat(compressed)),
    pngChunk('IEND', Buffer.alloc(0)),
  ]);
}

function rowOf(
  name: string,
  dialect: Dialect,
  answers: readonly HttpAnswer[],
  rssPeakBytes: number,
  rssAfterBytes: number,
): BenchRow {
  const sorted = Float64Array.from(answers.map((a) => a.ms)).sort();
  const statusCounts: Record<string, number> = {};
  for (const answer of answers) statusCounts[answer.status] = (statusCounts[answer.status] ?? 0) + 1;
  const totalMs = answers.reduce((sum, a) => sum + a.ms, 0);
  return {
    name,
    dialect,
    connections: 1,
    requestsPerSec: totalMs === 0 ? 0 : (answers.length * 1000) / totalMs,
    bytesPerSec: 0,
    p50Ms: percentile(sorted, 50),
    p99Ms: percentile(sorted, 99),
    totalRequests: answers.length,
    durationSeconds: totalMs / 1000,
    errors: answers.filter((a) => a.status === 0).length,
    timeouts: answers.filter((a) => a.status === 0 && a.ms >= PROBE_TIMEOUT_MS).length,
    non2xx: answers.filter((a) => a.status < 200 || a.status > 299).length,
    statusCounts,
    rssPeakBytes,
    rssAfterBytes,
  };
}

function mb(bytes: number): string {
  return (bytes / MiB).toFixed(0);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
