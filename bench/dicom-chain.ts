/**
 * DICOM chain: images/s through the whole chain of the real server, and its memory while images drain.
 * Three batches, each queued through the real intake (`POST /api/v1/request/queue/add`, request type
 * `dicom_request`, the file as multipart part `scan`) of a server with its worker off, then drained by
 * the in-process worker of a fresh server (`WORKER=in-process`, the default deployment) on the same
 * database:
 * - N CT slices (512 x 512, 16-bit, uncompressed), N = max(20, 20 x --duration);
 * - N colour fundus photographs (2000 x 2000, 8-bit, JPEG Baseline);
 * - 200 of them mixed (CT and fundus alternately; `BENCH_DICOM_MIXED`), with the server's RSS sampled
 *   every 100 ms while they drain.
 * Every file names one of 50 registered patients, so that every request runs DICOM_SEED (which also
 * chooses the device profile) -> EXTRACT_IMAGE -> PATIENT_MATCH -> ATTACH_TO_EVENT -> CLEAN_UP to COMPLETE
 * (EXTRACT_IMAGE makes the thumbnails, so PATIENT_MATCH queues no MAKE_THUMBNAILS). The bench fails unless every request ends
 * COMPLETE with its image stored, thumbnailed and linked to an event, and unless a sample of each kind
 * holds what a viewer must show (the CT through the file's window, the fundus JPEG as sent).
 * Images/s: the batch over the time from its release to its last request COMPLETE, polled every 50 ms:
 * the batch's routines wait in PAUSE until the server is ready (its worker starts before `/readyz`
 * answers) and are then released to its idle slots, which look for work every 50 ms. The worker claims routines in id order, so
 * a backlog runs stage by stage (every DICOM_SEED, then every EXTRACT_IMAGE, ...): the notes give when
 * each stage was done, which shows where the time goes.
 * Targets: >= 50 images/s for each kind; peak RSS < 400 MB while the 200 mixed images drain.
 * Then the device corpus (`bench/dicom-device-corpus.ts`): ophthalmic device files drained as their
 * devices and as twins of an unknown device (the fallback profile), device, unknown, unknown, device after
 * a warm-up drain; target: device filing adds < 10% to the chain's time per object. Each drain also
 * gives the server's CPU time per object (`utime + stime` of the process and its waited-for children,
 * from `/proc/<pid>/stat`, between readiness and the last request COMPLETE), which other load on the
 * machine disturbs less than the time.
 * `BENCH_BASELINE_DIR=/path/to/checkout[,/path/to/another]`: instead of the unknown-device twins, the
 * device corpus is drained by this checkout and by each baseline checkout's server (its
 * `src/main/server.ts` with its `npm start` Node flags, intake and worker), each on a database of its own
 * that its server migrates (so a checkout with other migrations can be measured), in the order A B ... B A
 * after one warm-up drain each; device filing's cost is this checkout's ms (and CPU ms) per object against
 * a baseline's, e.g. a checkout from before device filing.
 * `BENCH_DICOM_DEVICE_INTAKE=c-store`: the device corpus is sent by dcmtk's `storescu` to the intake
 * server's DICOM port instead of queue add (the requests then carry the study record receipt read).
 * `BENCH_DICOM_BATCHES` (default `ct,fundus,mixed,device`) chooses the batches.
 * `npm run bench -- dicom-chain --connections 8`.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import sharp from 'sharp';
import { loadConfig } from '../src/config.ts';
import type { Database } from '../src/db/database.ts';
import type { RoutineStatus } from '../src/db/schema.ts';
import { openDatabase } from '../src/db/database.ts';
import { readRequestDeviceFiling } from '../src/modules/device-filing/index.ts';
import { runDcmtk } from '../test/dcmtk.ts';
import { freePort } from '../test/ports.ts';
import type { DeviceSource } from './dicom-device-corpus.ts';
import { FILES_PER_SET, buildDeviceSources } from './dicom-device-corpus.ts';
import type { ImagePatient } from './dicom-images.ts';
import {
  CT_SIZE,
  FUNDUS_SIZE,
  ctDisplayValue,
  ctFile,
  ctStoredValues,
  fundusFile,
  fundusJpeg,
  withJpegComment,
} from './dicom-images.ts';
import type { BenchReport, BenchRow, BenchRunOptions, Dialect, PreparedDatabase } from './lib.ts';
import {
  BENCH_AUTHORIZATION,
  ensureBenchAccount,
  insertMatchablePatients,
  percentile,
  prepareDatabase,
  sendRequest,
  startNodeFlagsOf,
  startRssSampler,
  startServer,
} from './lib.ts';

const ADD_PATH = '/api/v1/request/queue/add?request_type=dicom_request';
const BOUNDARY = 'benchDicomBoundary5Wq8ZkT3';
const PATIENTS = 50;
const RATE_TARGET = 50;
const RSS_TARGET_BYTES = 400 * 1024 * 1024;
const POLL_MS = 50;
/** The queue's `idle_yield_ms` while a batch drains. */
const IDLE_YIELD_MS = 50;
const MB = 1024 * 1024;
const CHAIN = ['DICOM_SEED', 'EXTRACT_IMAGE', 'PATIENT_MATCH', 'ATTACH_TO_EVENT', 'CLEAN_UP'];
/** Clock ticks per second of /proc/<pid>/stat times (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100;
/** The routines that file a request's attachments under an event (one per request). */
const FILING_ROUTINES = ['ATTACH_TO_EVENT', 'FILE_BIOMETRY'];
const FILING_STAGE = 'ATTACH_TO_EVENT|FILE_BIOMETRY';
/** The server's limit of requests in flight per client address, above any --connections. */
const SERVER_ENV = { MAX_REQUESTS_PER_CLIENT: '1000' };

/** Which checkout's server runs: this one, or a baseline's entry with its Node flags. */
interface ServerChoice {
  readonly entry?: string;
  readonly nodeFlags?: readonly string[];
}

/** The server of the checkout at `dir` (its entry and the Node flags of its `npm start`). */
function serverOf(dir: string): ServerChoice {
  const root = path.resolve(dir);
  return { entry: path.join(root, 'src/main/server.ts'), nodeFlags: startNodeFlagsOf(root) };
}

type Kind = 'ct' | 'fundus';

const KIND_LABEL: Record<Kind, string> = {
  ct: `CT ${CT_SIZE}x${CT_SIZE} 16-bit`,
  fundus: `fundus ${FUNDUS_SIZE}x${FUNDUS_SIZE} JPEG`,
};

/** One file queued, and what it must give. */
interface Source {
  readonly kind: Kind;
  readonly bytes: Buffer;
  /** CT: the seed of its pixels. */
  readonly seed?: number;
  /** Fundus: the frame's JPEG, which must be stored as it is. */
  readonly jpeg?: Buffer;
}

let baseFundus: Promise<Buffer> | undefined;

/** Builds the files of one batch: `kinds[i]` is the kind of file i; patients in turn. */
async function buildSources(kinds: readonly Kind[], firstSeed: number): Promise<Source[]> {
  baseFundus ??= fundusJpeg();
  const fundus = await baseFundus;
  return kinds.map((kind, i) => {
    const seed = firstSeed + i;
    const patient: ImagePatient = {
      patientId: String((seed % PATIENTS) + 1).padStart(7, '0'),
      birthDate: '19800102',
      sex: 'F',
    };
    if (kind === 'ct') return { kind, seed, bytes: ctFile(seed, patient) };
    const jpeg = withJpegComment(fundus, `bench image ${seed}`);
    return { kind, jpeg, bytes: fundusFile(jpeg, patient) };
  });
}

function multipartBody(file: Buffer): Buffer {
  return Buffer.concat([
    Buffer.from(
      `--${BOUNDARY}\r\nContent-Disposition: form-data; name="scan"; filename="scan.dcm"\r\n` +
        'Content-Type: application/dicom\r\n\r\n',
    ),
    file,
    Buffer.from(`\r\n--${BOUNDARY}--\r\n`),
  ]);
}

interface Intake {
  /** The request id of each source, in order. */
  readonly requestIds: number[];
  readonly row: BenchRow;
}

/** Queues every source through queue add, `connections` at a time; every answer must be 200. */
async function queueSources(
  url: string,
  pid: number,
  sources: readonly { readonly bytes: Buffer }[],
  connections: number,
  name: string,
  dialect: Dialect,
): Promise<Intake> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const requestIds: number[] = new Array<number>(sources.length);
  const latencies: number[] = [];
  let bytes = 0;
  let next = 0;
  const sampler = startRssSampler(pid, POLL_MS);
  const started = performance.now();
  try {
    await Promise.all(
      Array.from({ length: Math.min(connections, sources.length) }, async () => {
        while (next < sources.length) {
          const index = next++;
          const body = multipartBody(sources[index]!.bytes);
          bytes += body.length;
          const answer = await sendRequest(`${url}${ADD_PATH}`, {
            method: 'POST',
            agent,
            headers: {
              authorization: BENCH_AUTHORIZATION,
              'content-type': `multipart/form-data; boundary=${BOUNDARY}`,
              'content-length': body.length,
            },
            body,
          });
          const id = /^\{"request_id":(\d+)\}$/.exec(answer.body.toString())?.[1];
          if (answer.status !== 200 || id === undefined)
            throw new Error(`queue add answered ${answer.status}: ${answer.body.toString().slice(0, 300)}`);
          requestIds[index] = Number(id);
          latencies.push(answer.ms);
        }
      }),
    );
  } finally {
    agent.destroy();
  }
  const seconds = (performance.now() - started) / 1000;
  const rssPeakBytes = await sampler.stop();
  latencies.sort((a, b) => a - b);
  return {
    requestIds,
    row: {
      name,
      dialect,
      connections,
      requestsPerSec: sources.length / seconds,
      bytesPerSec: bytes / seconds,
      p50Ms: percentile(latencies, 50),
      p99Ms: percentile(latencies, 99),
      totalRequests: sources.length,
      durationSeconds: seconds,
      errors: 0,
      timeouts: 0,
      non2xx: 0,
      statusCounts: { '200': sources.length },
      rssPeakBytes,
    },
  };
}

/**
 * `BENCH_DICOM_DEVICE_INTAKE=c-store`: the device corpus is sent by dcmtk's `storescu` to the intake
 * server's DICOM port (one association, the files in order) instead of queue add, so that each request
 * is queued with the study record receipt read (the header parse DICOM_SEED then skips).
 */
const DEVICE_INTAKE = process.env.BENCH_DICOM_DEVICE_INTAKE === 'c-store' ? 'c-store' : 'queue add';
const STORE_AE = 'BENCHSCU';

/** Sends every source with one `storescu` association; the new requests' ids, in the files' order. */
async function storeSources(
  database: Database,
  port: number,
  pid: number,
  sources: readonly { readonly bytes: Buffer }[],
  name: string,
  dialect: Dialect,
): Promise<Intake> {
  const dir = await mkdtemp(path.join(tmpdir(), 'cra-bench-chain-store-'));
  try {
    const files = await Promise.all(
      sources.map(async (source, i) => {
        const file = path.join(dir, `${String(i).padStart(5, '0')}.dcm`);
        await writeFile(file, source.bytes);
        return file;
      }),
    );
    const last = await database.db
      .selectFrom('request')
      .select(({ fn }) => fn.max('id').as('id'))
      .executeTakeFirst();
    const sampler = startRssSampler(pid, POLL_MS);
    const started = performance.now();
    const result = await runDcmtk(
      'storescu',
      ['-aet', STORE_AE, '-aec', 'CRA', '-R', '127.0.0.1', String(port), ...files],
      30 * 60_000,
    );
    const seconds = (performance.now() - started) / 1000;
    const rssPeakBytes = await sampler.stop();
    if (result.code !== 0) throw new Error(`storescu failed: ${result.output.slice(-500)}`);
    const requestIds = (
      await database.db
        .selectFrom('request')
        .select('id')
        .where('id', '>', Number(last?.id ?? 0))
        .orderBy('id')
        .execute()
    ).map((r) => r.id);
    if (requestIds.length !== sources.length)
      throw new Error(`storescu queued ${requestIds.length} requests for ${sources.length} files`);
    const bytes = sources.reduce((sum, source) => sum + source.bytes.length, 0);
    return {
      requestIds,
      row: {
        name,
        dialect,
        connections: 1,
        requestsPerSec: sources.length / seconds,
        bytesPerSec: bytes / seconds,
        p50Ms: seconds * 1000,
        p99Ms: seconds * 1000,
        totalRequests: sources.length,
        durationSeconds: seconds,
        errors: 0,
        timeouts: 0,
        non2xx: 0,
        statusCounts: { stored: sources.length },
        rssPeakBytes,
      },
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

interface Drain {
  /** Images/s from the batch's release to the last request COMPLETE. */
  readonly perSec: number;
  /** Images/s from the server's readiness to the last request COMPLETE. */
  readonly fromReadyPerSec: number;
  /** Seconds from the batch's release to the last request COMPLETE. */
  readonly seconds: number;
  /** Seconds from the batch's release until every routine of each stage was COMPLETE. */
  readonly stageSeconds: ReadonlyMap<string, number>;
  readonly idleRssBytes: number;
  readonly rssPeakBytes: number;
  readonly rssAfterBytes: number;
  /** The server's CPU milliseconds from its readiness to the last request COMPLETE. */
  readonly cpuMs: number;
  /** CPU time of the whole server process (every thread) and of its main thread per image, in ms. */
  readonly cpuMsPerImage: number;
  readonly mainCpuMsPerImage: number;
}

/** utime + stime of process `pid` (every thread, ended ones too) and of its main thread, in ms. */
async function readCpuMs(pid: number): Promise<{ allMs: number; mainMs: number }> {
  const ticks = async (file: string) => {
    const text = await readFile(file, 'utf8');
    // Fields after the command name start at field 3; utime and stime are fields 14 and 15.
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / TICKS_PER_SECOND;
  };
  return { allMs: await ticks(`/proc/${pid}/stat`), mainMs: await ticks(`/proc/${pid}/task/${pid}/stat`) };
}

/** Counts the batch's routines in `statuses`. */
async function countRoutines(
  database: Database,
  requestIds: readonly number[],
  statuses: readonly RoutineStatus[],
): Promise<number> {
  const row = await inBatch(database, requestIds)
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('status', 'in', statuses)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

function inBatch(database: Database, requestIds: readonly number[]) {
  return database.db
    .selectFrom('request_routine')
    .where('request_id', '>=', Math.min(...requestIds))
    .where('request_id', '<=', Math.max(...requestIds));
}

/** The first routine of the batch that stopped short of COMPLETE, with its last log line. */
async function describeStuck(database: Database, requestIds: readonly number[]): Promise<string> {
  const routine = await inBatch(database, requestIds)
    .select(['id', 'request_id', 'routine_name', 'status', 'try_count'])
    .where('status', 'in', STOPPED)
    .orderBy('id')
    .executeTakeFirst();
  if (routine === undefined) return 'none';
  const execution = await database.db
    .selectFrom('request_routine_execution')
    .select('log_text')
    .where('request_routine_id', '=', routine.id)
    .orderBy('id', 'desc')
    .executeTakeFirst();
  return `request ${routine.request_id}: ${routine.routine_name} ${routine.status} after ${routine.try_count} try(s): ${execution?.log_text ?? '(no execution log)'}`;
}

/** Routine states that end a request short of COMPLETE, or park it for minutes (a retry's back-off). */
const STOPPED: readonly RoutineStatus[] = ['FAILED', 'RETRY', 'VOID', 'PAUSE'];

/**
 * Starts a server with its in-process worker on the database holding the queued batch and polls the
 * batch's routines every {@link POLL_MS} until every request's CLEAN_UP is COMPLETE; fails at once when a
 * routine fails or waits for a retry.
 */
async function drainBatch(
  prepared: PreparedDatabase,
  database: Database,
  requestIds: readonly number[],
  choice: ServerChoice = {},
): Promise<Drain> {
  const total = requestIds.length;
  // The worker starts before the server answers /readyz: the batch waits in PAUSE (never claimed) until
  // then, so that no work is done before the time and CPU measurements begin.
  const setBatchStatus = (from: RoutineStatus, to: RoutineStatus) =>
    database.db
      .updateTable('request_routine')
      .set({ status: to })
      .where('request_id', '>=', Math.min(...requestIds))
      .where('request_id', '<=', Math.max(...requestIds))
      .where('status', '=', from)
      .execute();
  await setBatchStatus('NEW', 'PAUSE');
  // Idle slots look for work every 50 ms rather than every second, so that they find the batch at once.
  await database.db.updateTable('request_queue').set({ idle_yield_ms: IDLE_YIELD_MS }).execute();
  const server = await startServer({
    ...choice,
    env: { ...prepared.env, ...SERVER_ENV, WORKER: 'in-process' },
  });
  const ready = performance.now();
  const cpuAtReady = await readCpuMs(server.pid);
  await setBatchStatus('PAUSE', 'NEW');
  const releasedAt = performance.now();
  try {
    const idleRssBytes = await server.rssBytes();
    const sampler = startRssSampler(server.pid, POLL_MS);
    const deadline = Date.now() + Math.max(300_000, total * 2000);
    // The time runs from the batch's release: a worker commits a batch of routines at once, so the
    // first COMPLETE comes only after its first batch.
    const firstAt = releasedAt;
    const stageDoneAt = new Map<string, number>();
    for (;;) {
      const counts = await inBatch(database, requestIds)
        .select(['routine_name', 'status', (eb) => eb.fn.countAll<number>().as('n')])
        .groupBy(['routine_name', 'status'])
        .execute();
      const now = performance.now();
      const complete = counts.filter((c) => c.status === 'COMPLETE');
      for (const c of complete)
        if (Number(c.n) === total && !stageDoneAt.has(c.routine_name)) stageDoneAt.set(c.routine_name, now);
      // The filing stage: ATTACH_TO_EVENT, or FILE_BIOMETRY in its place, for every request.
      const filed = complete
        .filter((c) => FILING_ROUTINES.includes(c.routine_name))
        .reduce((sum, c) => sum + Number(c.n), 0);
      if (filed === total && !stageDoneAt.has(FILING_STAGE)) stageDoneAt.set(FILING_STAGE, now);
      if (stageDoneAt.has('CLEAN_UP')) break;
      if (counts.some((c) => STOPPED.includes(c.status)))
        throw new Error(`the chain stopped: ${await describeStuck(database, requestIds)}`);
      if (Date.now() > deadline) {
        const done = complete.find((c) => c.routine_name === 'CLEAN_UP')?.n ?? 0;
        throw new Error(`${total - Number(done)} of ${total} requests not COMPLETE in time`);
      }
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
    const end = stageDoneAt.get('CLEAN_UP')!;
    const cpuAtEnd = await readCpuMs(server.pid);
    const rssPeakBytes = await sampler.stop();
    const seconds = (end - firstAt) / 1000;
    return {
      perSec: total / Math.max(seconds, POLL_MS / 1000),
      fromReadyPerSec: total / ((end - ready) / 1000),
      seconds,
      stageSeconds: new Map([...stageDoneAt].map(([name, at]) => [name, (at - firstAt) / 1000])),
      idleRssBytes,
      rssPeakBytes,
      rssAfterBytes: await server.rssBytes(),
      cpuMs: cpuAtEnd.allMs - cpuAtReady.allMs,
      cpuMsPerImage: (cpuAtEnd.allMs - cpuAtReady.allMs) / total,
      mainCpuMsPerImage: (cpuAtEnd.mainMs - cpuAtReady.mainMs) / total,
    };
  } finally {
    await server.stop();
  }
}

/**
 * Checks what the batch stored: every request COMPLETE through the chain, each image row of the right
 * type with its three thumbnails and linked to an event; for the first source of each kind, the image
 * itself. Throws on the first difference; returns the chain one request ran.
 */
async function verifyBatch(
  database: Database,
  sources: readonly Source[],
  requestIds: readonly number[],
): Promise<string> {
  const total = sources.length;
  const notComplete = await countRoutines(database, requestIds, ['NEW', ...STOPPED]);
  if (notComplete > 0) throw new Error(`${notComplete} routine(s) of the batch are not COMPLETE`);
  const chain = (
    await database.db
      .selectFrom('request_routine')
      .select('routine_name')
      .where('request_id', '=', requestIds[0]!)
      .orderBy('id')
      .execute()
  ).map((r) => r.routine_name);
  if (chain.join() !== CHAIN.join()) throw new Error(`unexpected chain: ${chain.join(' -> ')}`);

  const images = await database.db
    .selectFrom('attachment_data as a')
    .select([
      'a.request_id',
      'a.mime_type',
      sql<number>`case when a.thumbnail_small_blob is not null and a.thumbnail_medium_blob is not null and a.thumbnail_large_blob is not null then 1 else 0 end`.as(
        'has_thumbnails',
      ),
      sql<number>`(select count(*) from event_attachment_item e where e.attachment_data_id = a.id)`.as(
        'links',
      ),
    ])
    .where('a.request_id', '>=', Math.min(...requestIds))
    .where('a.request_id', '<=', Math.max(...requestIds))
    .where('a.attachment_mnemonic', '=', 'DICOM_IMAGE_1')
    .execute();
  const byRequest = new Map(images.map((image) => [image.request_id, image]));
  for (const [i, source] of sources.entries()) {
    const image = byRequest.get(requestIds[i]!);
    const expectedMime = source.kind === 'ct' ? 'image/png' : 'image/jpeg';
    if (image === undefined) throw new Error(`request ${requestIds[i]}: no DICOM_IMAGE_1 stored`);
    if (image.mime_type !== expectedMime || Number(image.has_thumbnails) !== 1 || Number(image.links) < 1)
      throw new Error(
        `request ${requestIds[i]}: image ${image.mime_type}, thumbnails ${image.has_thumbnails}, event links ${image.links}`,
      );
  }
  if (images.length !== total) throw new Error(`${images.length} images stored for ${total} requests`);

  for (const kind of ['ct', 'fundus'] as const) {
    const index = sources.findIndex((s) => s.kind === kind);
    if (index >= 0) await checkImage(database, sources[index]!, requestIds[index]!);
  }
  return chain.join(' -> ');
}

/** The stored image of one request against what its file holds. */
async function checkImage(database: Database, source: Source, requestId: number): Promise<void> {
  const row = await database.db
    .selectFrom('attachment_data')
    .select(['blob_data', 'thumbnail_small_blob', 'thumbnail_medium_blob', 'thumbnail_large_blob'])
    .where('request_id', '=', requestId)
    .where('attachment_mnemonic', '=', 'DICOM_IMAGE_1')
    .executeTakeFirstOrThrow();
  const stored = Buffer.from(row.blob_data!);
  const size = source.kind === 'ct' ? CT_SIZE : FUNDUS_SIZE;
  const meta = await sharp(stored).metadata();
  if (meta.width !== size || meta.height !== size)
    throw new Error(`request ${requestId}: image ${meta.width}x${meta.height}, expected ${size}x${size}`);
  if (source.kind === 'ct') {
    if (meta.format !== 'png' || meta.channels !== 1)
      throw new Error(`request ${requestId}: CT stored as ${meta.format}, ${meta.channels} channel(s)`);
    const grey = await sharp(stored).extractChannel(0).raw().toBuffer();
    const values = ctStoredValues(source.seed!);
    let worst = 0;
    for (let i = 0; i < values.length; i++)
      worst = Math.max(worst, Math.abs(grey[i]! - ctDisplayValue(values[i]!)));
    if (worst > 1)
      throw new Error(
        `request ${requestId}: CT pixels differ from the window 40/400 by up to ${worst.toFixed(1)}`,
      );
  } else if (!stored.equals(source.jpeg!)) {
    throw new Error(`request ${requestId}: the fundus JPEG is not stored as it was sent`);
  }
  const sides = [row.thumbnail_small_blob, row.thumbnail_medium_blob, row.thumbnail_large_blob];
  for (const [i, side] of [128, 320, 640].entries()) {
    // Thumbnails are never enlarged.
    const longest = Math.min(side, size);
    const thumbnail = await sharp(Buffer.from(sides[i]!)).metadata();
    if (thumbnail.format !== 'jpeg' || Math.max(thumbnail.width, thumbnail.height) !== longest)
      throw new Error(
        `request ${requestId}: thumbnail ${thumbnail.format} ${thumbnail.width}x${thumbnail.height}, expected longest side ${longest}`,
      );
  }
}

function drainRow(name: string, dialect: Dialect, slots: number, total: number, drain: Drain): BenchRow {
  return {
    name,
    dialect,
    connections: slots,
    requestsPerSec: drain.perSec,
    bytesPerSec: 0,
    p50Ms: 0,
    p99Ms: 0,
    totalRequests: total,
    durationSeconds: drain.seconds,
    errors: 0,
    timeouts: 0,
    non2xx: 0,
    statusCounts: { COMPLETE: total },
    rssPeakBytes: drain.rssPeakBytes,
    rssAfterBytes: drain.rssAfterBytes,
  };
}

function mb(bytes: number): string {
  return (bytes / MB).toFixed(0);
}

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const { dialect } = options;
  const perKind = Math.max(20, Math.round(20 * options.durationSeconds));
  const mixedCount = Number(process.env.BENCH_DICOM_MIXED ?? 200);
  if (!Number.isInteger(mixedCount) || mixedCount < 2)
    throw new Error('BENCH_DICOM_MIXED must be a whole number of images, at least 2');
  const connections = Math.max(...options.connections);
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  const batchNames = (process.env.BENCH_DICOM_BATCHES ?? 'ct,fundus,mixed,device')
    .split(',')
    .map((b) => b.trim());
  if (batchNames.length === 0 || batchNames.some((b) => !['ct', 'fundus', 'mixed', 'device'].includes(b)))
    throw new Error('BENCH_DICOM_BATCHES must list some of ct, fundus, mixed, device');
  const deviceSets = Number(
    process.env.BENCH_DICOM_DEVICE_SETS ?? Math.max(4, Math.round(options.durationSeconds)),
  );
  if (!Number.isInteger(deviceSets) || deviceSets < 1)
    throw new Error('BENCH_DICOM_DEVICE_SETS must be a whole number of study sets, at least 1');
  const prepared = await prepareDatabase(dialect, {
    setup: async (database) => {
      await ensureBenchAccount(database);
      // The device corpus's patients follow the images' (one per study set and drain: four drains of
      // `deviceSets` sets and a warm-up of two).
      await insertMatchablePatients(database, PATIENTS + 4 * deviceSets + 2);
    },
  });
  const config = loadConfig({ ...prepared.env, LOG_LEVEL: 'warn' });
  const database = await openDatabase(config.database, { poolSize: 2 });
  try {
    const queue = await database.db
      .selectFrom('request_type as t')
      .innerJoin('request_queue as q', 'q.request_queue', 't.default_request_queue')
      .select('q.maximum_active_threads')
      .where('t.request_type', '=', 'dicom_request')
      .executeTakeFirstOrThrow();
    const slots = config.workerConcurrency || queue.maximum_active_threads;
    const batches: { label: string; kinds: Kind[] }[] = [
      ...(batchNames.includes('ct')
        ? [{ label: KIND_LABEL.ct, kinds: Array<Kind>(perKind).fill('ct') }]
        : []),
      ...(batchNames.includes('fundus')
        ? [{ label: KIND_LABEL.fundus, kinds: Array<Kind>(perKind).fill('fundus') }]
        : []),
      ...(batchNames.includes('mixed')
        ? [
            {
              label: `mixed ${mixedCount}`,
              kinds: Array.from({ length: mixedCount }, (_, i): Kind => (i % 2 === 0 ? 'ct' : 'fundus')),
            },
          ]
        : []),
    ];
    let seed = 1;
    for (const batch of batches) {
      const sources = await buildSources(batch.kinds, seed);
      seed += sources.length;
      const intakeServer = await startServer({ env: { ...prepared.env, ...SERVER_ENV, WORKER: 'off' } });
      let intake: Intake;
      try {
        intake = await queueSources(
          intakeServer.url,
          intakeServer.pid,
          sources,
          connections,
          `queue add ${batch.label} (multipart, worker off)`,
          dialect,
        );
      } finally {
        await intakeServer.stop();
      }
      const drain = await drainBatch(prepared, database, intake.requestIds);
      const chain = await verifyBatch(database, sources, intake.requestIds);
      rows.push(
        intake.row,
        drainRow(`drain ${batch.label}: images/s`, dialect, slots, sources.length, drain),
      );
      const rates =
        `${drain.perSec.toFixed(1)} images/s (${drain.seconds.toFixed(1)} s from the batch's release to the last request COMPLETE; ` +
        `${drain.fromReadyPerSec.toFixed(1)}/s from the server's readiness; server CPU ${drain.cpuMsPerImage.toFixed(1)} ms per image, ` +
        `${drain.mainCpuMsPerImage.toFixed(1)} ms of it on the main thread); every routine of a stage COMPLETE after ` +
        CHAIN.map((name) => `${name} ${drain.stageSeconds.get(name)?.toFixed(1) ?? '-'} s`).join(', ');
      if (batch.kinds.every((k) => k === batch.kinds[0])) {
        notes.push(
          `${batch.label}: ${sources.length} images, ${rates}; target >= ${RATE_TARGET} images/s: ${drain.perSec >= RATE_TARGET ? 'met' : 'MISSED'}`,
        );
      } else {
        notes.push(
          `${batch.label}: peak RSS ${mb(drain.rssPeakBytes)} MB while draining (${mb(drain.idleRssBytes)} MB at readiness, ` +
            `${mb(drain.rssAfterBytes)} MB after); target < ${mb(RSS_TARGET_BYTES)} MB: ${drain.rssPeakBytes < RSS_TARGET_BYTES ? 'met' : 'MISSED'}; ${rates}`,
        );
      }
      if (batch === batches[0])
        notes.push(
          `every request: ${chain}, all COMPLETE; images stored with 3 thumbnails and linked to an event (checked for every request)`,
        );
      const example = (kind: Kind) => sources.find((s) => s.kind === kind);
      if (batch === batches[batches.length - 1]) {
        const ct = example('ct');
        const fundus = example('fundus');
        notes.push(
          `files: CT ${ct === undefined ? '-' : (ct.bytes.length / 1024).toFixed(0)} KB (explicit VR little endian, window 40/400), ` +
            `fundus ${fundus === undefined ? '-' : (fundus.bytes.length / 1024).toFixed(0)} KB (JPEG Baseline, sharp quality 90); ` +
            `checked: the CT PNG equals the file's window within 1 grey level, the fundus JPEG is stored as sent, thumbnails 128/320/640 px (512 for the CT)`,
          `worker: in-process, ${slots} slots (the queue's maximum_active_threads unless WORKER_CONCURRENCY), ` +
            `decoding threads ${config.dicom.workerThreads || 'one per core'}; intake ${connections} connections`,
        );
      }
    }
    if (batchNames.includes('device')) {
      const baselines = (process.env.BENCH_BASELINE_DIR ?? '')
        .split(',')
        .map((dir) => dir.trim())
        .filter((dir) => dir !== '');
      const input = { dialect, connections, slots, sets: deviceSets, firstPatient: PATIENTS + 1 };
      const device =
        baselines.length === 0
          ? await runDeviceComparison(prepared, database, input)
          : await runBaselineComparison(prepared, database, baselines, input);
      rows.push(...device.rows);
      notes.push(...(device.notes ?? []));
    }
  } finally {
    await database.close();
    await prepared.cleanup();
  }
  return { rows, notes };
}

/** One queue-and-drain of a device corpus batch. */
interface DeviceDrain {
  readonly files: number;
  readonly drain: Drain;
  readonly events: number;
}

/**
 * Queues `sources` through the intake of a worker-less server, drains them with a fresh in-process
 * worker and checks every request: COMPLETE, its extracted PDF or image linked to an event, and (with
 * `checkProfiles`) filed by the expected profile. `choice` names the checkout whose server runs.
 */
async function queueAndDrainDevices(
  prepared: PreparedDatabase,
  database: Database,
  sources: readonly DeviceSource[],
  connections: number,
  label: string,
  dialect: Dialect,
  choice: ServerChoice = {},
  checkProfiles = true,
): Promise<{ intake: Intake; result: DeviceDrain }> {
  const dicomPort = DEVICE_INTAKE === 'c-store' ? await freePort() : 0;
  const intakeServer = await startServer({
    ...choice,
    env: {
      ...prepared.env,
      ...SERVER_ENV,
      WORKER: 'off',
      ...(DEVICE_INTAKE === 'c-store'
        ? {
            DICOM_PORT: String(dicomPort),
            DICOM_AE_TITLE: 'CRA',
            DICOM_ALLOWED_CALLERS: `${STORE_AE}@127.0.0.1`,
          }
        : {}),
    },
  });
  let intake: Intake;
  try {
    intake =
      DEVICE_INTAKE === 'c-store'
        ? await storeSources(database, dicomPort, intakeServer.pid, sources, label, dialect)
        : await queueSources(intakeServer.url, intakeServer.pid, sources, connections, label, dialect);
  } finally {
    await intakeServer.stop();
  }
  const drain = await drainBatch(prepared, database, intake.requestIds, choice);
  const notComplete = await countRoutines(database, intake.requestIds, ['NEW', ...STOPPED]);
  if (notComplete > 0) throw new Error(`${label}: ${notComplete} routine(s) are not COMPLETE`);
  for (const [i, source] of sources.entries()) {
    if (!checkProfiles) break;
    const filing = await readRequestDeviceFiling(database.db, intake.requestIds[i]!);
    if (filing === undefined || !source.expectedProfile.test(filing.profile))
      throw new Error(
        `${label}: request ${intake.requestIds[i]} (${source.kind}) filed by profile ${filing?.profile ?? 'none'}, expected ${source.expectedProfile}`,
      );
  }
  const linked = await database.db
    .selectFrom('attachment_data as a')
    .innerJoin('event_attachment_item as i', 'i.attachment_data_id', 'a.id')
    .innerJoin('event_attachment_group as g', 'g.id', 'i.event_attachment_group_id')
    .select(['a.request_id', 'g.event_id'])
    .where('a.request_id', '>=', Math.min(...intake.requestIds))
    .where('a.request_id', '<=', Math.max(...intake.requestIds))
    .where('a.attachment_mnemonic', 'in', ['DICOM_PDF', 'DICOM_IMAGE_1'])
    .execute();
  const linkedRequests = new Set(linked.map((l) => l.request_id));
  const unlinked = intake.requestIds.filter((id) => !linkedRequests.has(id));
  if (unlinked.length > 0)
    throw new Error(
      `${label}: request(s) ${unlinked.slice(0, 5).join(', ')} have no extracted file under an event`,
    );
  return {
    intake,
    result: { files: sources.length, drain, events: new Set(linked.map((l) => l.event_id)).size },
  };
}

/** Milliseconds per object of the drains together: their seconds over their files. */
function msPerObject(drains: readonly DeviceDrain[], seconds: (d: Drain) => number): number {
  const files = drains.reduce((sum, d) => sum + d.files, 0);
  return (1000 * drains.reduce((sum, d) => sum + seconds(d.drain), 0)) / files;
}

/** The server's CPU milliseconds per object of the drains together. */
function cpuMsPerObject(drains: readonly DeviceDrain[]): number {
  const files = drains.reduce((sum, d) => sum + d.files, 0);
  return drains.reduce((sum, d) => sum + d.drain.cpuMs, 0) / files;
}

/** Seconds between two stages' completion (every routine of `to` COMPLETE after every one of `from`). */
function stageGap(drain: Drain, from: string, to: string): number {
  const a = drain.stageSeconds.get(from);
  const b = drain.stageSeconds.get(to);
  return a === undefined || b === undefined ? Number.NaN : Math.max(0, b - a);
}

/** When each stage of a device drain was done (`DEVICE_PROFILE` where the checkout runs it as a step). */
function stageNote(drain: Drain): string {
  return [
    'DICOM_SEED',
    ...(drain.stageSeconds.has('DEVICE_PROFILE') ? ['DEVICE_PROFILE'] : []),
    'EXTRACT_IMAGE',
    'PATIENT_MATCH',
    FILING_STAGE,
    'CLEAN_UP',
  ]
    .map((name) => `${name} ${drain.stageSeconds.get(name)?.toFixed(2) ?? '-'} s`)
    .join(', ');
}

const pct = (x: number) => `${(100 * x).toFixed(1)}%`;

/** The corpus's description in the notes. */
function corpusNote(sets: number): string {
  return (
    `device corpus: ${sets} study set(s) of ${FILES_PER_SET} files per drain (Humphrey PDF, Cirrus OCT PDF, Heidelberg OCT image, ` +
    `Topcon and Kowa photographs, each right and left of one study; IOLMaster 500 and 700 of one study)`
  );
}

/**
 * The device corpus, filed as its devices' profiles file it and as twins of an unknown device (the
 * fallback profile), in the order device, unknown, unknown, device (or unknown first), so that drift falls on both alike.
 * Overhead = (device ms per object - unknown ms per object) / unknown ms per object; target < 10%.
 */
async function runDeviceComparison(
  prepared: PreparedDatabase,
  database: Database,
  input: { dialect: Dialect; connections: number; slots: number; sets: number; firstPatient: number },
): Promise<BenchReport> {
  const { dialect, connections, slots, sets } = input;
  const rows: BenchRow[] = [];
  // `BENCH_DICOM_DEVICE_FIRST=unknown`: unknown, device, device, unknown (to tell a position effect of
  // the first drain from device filing).
  const order =
    process.env.BENCH_DICOM_DEVICE_FIRST === 'unknown'
      ? [true, false, false, true]
      : [false, true, true, false];
  // An unmeasured drain first (one set of each), so that the first measured drain does not pay for the
  // caches, JIT and connections the others find warm.
  const warmUp = [
    ...(await buildDeviceSources(1, input.firstPatient + order.length * sets, false)),
    ...(await buildDeviceSources(1, input.firstPatient + order.length * sets + 1, true)),
  ];
  await queueAndDrainDevices(prepared, database, warmUp, connections, 'device corpus warm-up', dialect);
  const drains: { unknown: boolean; result: DeviceDrain }[] = [];
  for (const [i, unknown] of order.entries()) {
    const sources = await buildDeviceSources(sets, input.firstPatient + i * sets, unknown);
    const label = unknown ? 'device corpus as unknown devices' : 'device corpus';
    const { intake, result } = await queueAndDrainDevices(
      prepared,
      database,
      sources,
      connections,
      `${DEVICE_INTAKE === 'c-store' ? 'C-STORE' : 'queue add'} ${label} (${DEVICE_INTAKE === 'c-store' ? 'storescu' : 'multipart'}, worker off)`,
      dialect,
    );
    drains.push({ unknown, result });
    rows.push(
      intake.row,
      drainRow(`drain ${label} (${i + 1}/4): objects/s`, dialect, slots, sources.length, result.drain),
    );
  }
  const device = drains.filter((d) => !d.unknown).map((d) => d.result);
  const generic = drains.filter((d) => d.unknown).map((d) => d.result);
  const deviceMs = msPerObject(device, (d) => d.seconds);
  const genericMs = msPerObject(generic, (d) => d.seconds);
  const overhead = (deviceMs - genericMs) / genericMs;
  const stage = (list: readonly DeviceDrain[], from: string, to: string) =>
    msPerObject(list, (d) => stageGap(d, from, to));
  // DICOM_SEED reads the header and chooses the profile: its stage runs from the first COMPLETE.
  const seedMs = msPerObject(device, (d) => d.stageSeconds.get('DICOM_SEED') ?? Number.NaN);
  const genericSeedMs = msPerObject(generic, (d) => d.stageSeconds.get('DICOM_SEED') ?? Number.NaN);
  const filingMs = stage(device, 'PATIENT_MATCH', FILING_STAGE);
  const genericFilingMs = stage(generic, 'PATIENT_MATCH', FILING_STAGE);
  const deviceCpu = cpuMsPerObject(device);
  const genericCpu = cpuMsPerObject(generic);
  const notes = [
    `${corpusNote(sets)}, ` +
      `drained as their devices (${device.reduce((s, d) => s + d.files, 0)} files, ${device.reduce((s, d) => s + d.events, 0)} events) ` +
      `and as unknown devices (Modality OT, unknown manufacturer and model: the fallback profile; ${generic.reduce((s, d) => s + d.files, 0)} files, ` +
      `${generic.reduce((s, d) => s + d.events, 0)} events), in the order ${order.map((u) => (u ? 'unknown' : 'device')).join(', ')} after an unmeasured warm-up drain ` +
      `(one set of each); every request COMPLETE, ` +
      'filed by the expected profile, its PDF or image under an event',
    `device filing: chain ${deviceMs.toFixed(1)} ms per object as their devices vs ${genericMs.toFixed(1)} ms as unknown devices ` +
      `(release to last request COMPLETE, over ${slots} worker slots): device filing adds ${pct(overhead)}; ` +
      `target < 10%: ${overhead < 0.1 ? 'met' : 'MISSED'}; server CPU ${deviceCpu.toFixed(1)} vs ${genericCpu.toFixed(1)} ms per object (${pct((deviceCpu - genericCpu) / genericCpu)})`,
    `device filing by stage (ms per object, device vs unknown): DICOM_SEED (header and profile) ${seedMs.toFixed(1)} vs ${genericSeedMs.toFixed(1)}, ` +
      `ATTACH_TO_EVENT or FILE_BIOMETRY ${filingMs.toFixed(1)} vs ${genericFilingMs.toFixed(1)} (the time from the previous stage's ` +
      `last COMPLETE to this stage's last COMPLETE, over the files; the stage's share of the chain: DICOM_SEED ${pct(seedMs / deviceMs)}, filing ${pct(filingMs / deviceMs)})`,
    ...drains.map(
      (d, i) =>
        `device drain ${i + 1}/4 (${d.unknown ? 'unknown devices' : 'devices'}): ${d.result.files} files in ${d.result.drain.seconds.toFixed(2)} s, ` +
        `server CPU ${(d.result.drain.cpuMs / 1000).toFixed(2)} s; stages done after ${stageNote(d.result.drain)}`,
    ),
  ];
  return { rows, notes };
}

/**
 * The device corpus drained by this checkout and by each of `baselineDirs` (its own server and database),
 * in the order A B ... B A after a warm-up drain each; device filing's cost = (this checkout's ms per
 * object - a baseline's) / the baseline's, and likewise for the server's CPU per object.
 */
async function runBaselineComparison(
  prepared: PreparedDatabase,
  database: Database,
  baselineDirs: readonly string[],
  input: { dialect: Dialect; connections: number; slots: number; sets: number; firstPatient: number },
): Promise<BenchReport> {
  const { dialect, connections, slots, sets } = input;
  interface Checkout {
    readonly label: string;
    readonly prepared: PreparedDatabase;
    readonly database: Database;
    readonly choice: ServerChoice;
    readonly isThis: boolean;
    readonly drains: DeviceDrain[];
  }
  const checkouts: Checkout[] = [
    { label: 'this checkout', prepared, database, choice: {}, isThis: true, drains: [] },
  ];
  const rows: BenchRow[] = [];
  try {
    for (const dir of baselineDirs) {
      const choice = serverOf(dir);
      // An empty database that the baseline's own server migrates, then the bench's account and patients.
      const own = await prepareDatabase(dialect, { migrate: false });
      checkouts.push({
        label: `baseline ${path.resolve(dir)}`,
        prepared: own,
        database: await openDatabase(loadConfig({ ...own.env, LOG_LEVEL: 'warn' }).database, { poolSize: 2 }),
        choice,
        isThis: false,
        drains: [],
      });
      const migrating = await startServer({ ...choice, env: { ...own.env, ...SERVER_ENV, WORKER: 'off' } });
      await migrating.stop();
      const added = checkouts.at(-1)!;
      await ensureBenchAccount(added.database);
      await insertMatchablePatients(added.database, input.firstPatient - 1 + 4 * sets + 2);
    }
    for (const c of checkouts) {
      const warmUp = await buildDeviceSources(1, input.firstPatient + 4 * sets, false);
      await queueAndDrainDevices(
        c.prepared,
        c.database,
        warmUp,
        connections,
        `device corpus warm-up (${c.label})`,
        dialect,
        c.choice,
        c.isThis,
      );
    }
    const order = [...checkouts, ...[...checkouts].reverse()];
    for (const [i, c] of order.entries()) {
      const sources = await buildDeviceSources(sets, input.firstPatient + c.drains.length * sets, false);
      const label = `device corpus, ${c.label}`;
      const { intake, result } = await queueAndDrainDevices(
        c.prepared,
        c.database,
        sources,
        connections,
        `${DEVICE_INTAKE === 'c-store' ? 'C-STORE' : 'queue add'} ${label} (${DEVICE_INTAKE === 'c-store' ? 'storescu' : 'multipart'}, worker off)`,
        dialect,
        c.choice,
        c.isThis,
      );
      c.drains.push(result);
      rows.push(
        intake.row,
        drainRow(
          `drain ${label} (${i + 1}/${order.length}): objects/s`,
          dialect,
          slots,
          sources.length,
          result.drain,
        ),
      );
    }
  } finally {
    for (const c of checkouts.slice(1)) {
      await c.database.close();
      await c.prepared.cleanup();
    }
  }
  const [self] = checkouts;
  const selfMs = msPerObject(self!.drains, (d) => d.seconds);
  const selfCpu = cpuMsPerObject(self!.drains);
  const notes = [
    `${corpusNote(sets)}, drained as their devices by each checkout's own server (intake and in-process worker, ${slots} slots) ` +
      `on a database of its own, in the order ${[...checkouts, ...[...checkouts].reverse()].map((c) => c.label).join(', ')} ` +
      `after an unmeasured warm-up drain each (one set); every request COMPLETE, its PDF or image under an event ` +
      `(this checkout's also filed by the expected profile)`,
    ...checkouts.map((c) => {
      const ms = msPerObject(c.drains, (d) => d.seconds);
      const cpu = cpuMsPerObject(c.drains);
      return (
        `${c.label}: chain ${ms.toFixed(1)} ms per object (drains ${c.drains.map((d) => ((1000 * d.drain.seconds) / d.files).toFixed(1)).join(', ')}), ` +
        `server CPU ${cpu.toFixed(1)} ms per object (drains ${c.drains.map((d) => (d.drain.cpuMs / d.files).toFixed(1)).join(', ')})` +
        (c.isThis
          ? ''
          : `; this checkout against it: time ${pct((selfMs - ms) / ms)}, CPU ${pct((selfCpu - cpu) / cpu)}; target < 10%: ${(selfMs - ms) / ms < 0.1 ? 'met' : 'MISSED'}`)
      );
    }),
    ...checkouts.flatMap((c) =>
      c.drains.map(
        (d, i) =>
          `${c.label}, drain ${i + 1}: ${d.files} files, ${d.events} events, in ${d.drain.seconds.toFixed(2)} s; stages done after ${stageNote(d.drain)}`,
      ),
    ),
  ];
  return { rows, notes };
}
