/**
 * Thumbnail memory: the real server's peak RSS while its in-process worker makes the thumbnails of three
 * images queued at once. `npm run bench -- thumbnail-memory --dialect sqlite` (the --duration and
 * --connections options do not apply).
 * Three images, each sent by its own client at the same moment (`POST /api/v1/request/queue/add
 * ?request_type=imaging&hos_num=...&dob=...`, raw body `image/png`), each naming one of three registered
 * patients, so that every request runs PATIENT_MATCH -> MAKE_THUMBNAILS -> ATTACH_TO_EVENT -> CLEAN_UP
 * (the queue's five slots run the three at once). Two workloads, each on a fresh server and database:
 * - hostile: 9999 x 9999 16-bit RGBA interlaced PNG with EXIF orientation 6 (about 1.2 MB each; libvips
 *   decodes Adam7 whole: 763 MiB);
 * - large: 5600 x 5600 of the same kind (239 MiB decoded, under the default `THUMBNAIL_MAX_DECODE_MB`).
 * The server runs with the `npm start` flags and environment, `WORKER=in-process`; its RSS is read before
 * (after 3 s idle), sampled every 100 ms until every routine of the three requests is settled (none NEW
 * or RETRY; at most 180 s), and read 10 s later. The notes give MAKE_THUMBNAILS's outcome per image
 * (thumbnails made or the logged reason) and the time from the first upload to the last settled routine.
 * `BENCH_BASELINE_DIR=/path/to/other/checkout`: each workload also runs on that checkout's server (its
 * `src/main/server.ts` with its `npm start` Node flags), before this checkout's, on a database of its own.
 * Target: peak RSS within 400 MB of idle for three hostile images.
 */
import http from 'node:http';
import path from 'node:path';
import sharp from 'sharp';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import type { BenchReport, BenchRow, BenchRunOptions, HttpAnswer } from './lib.ts';
import {
  BENCH_AUTHORIZATION,
  ensureBenchAccount,
  insertMatchablePatients,
  prepareDatabase,
  readRssBytes,
  sendRequest,
  startNodeFlagsOf,
  startRssSampler,
  startServer,
} from './lib.ts';

const MiB = 1024 * 1024;
const IMAGES = 3;
const SETTLE_MS = 10_000;
const DRAIN_LIMIT_MS = 180_000;
const TARGET_GROWTH_BYTES = 400 * MiB;

interface Workload {
  readonly name: string;
  readonly sizePx: number;
}

const WORKLOADS: readonly Workload[] = [
  { name: 'hostile 9999 x 9999 16-bit RGBA interlaced PNG, EXIF orientation 6', sizePx: 9999 },
  { name: 'large 5600 x 5600 16-bit RGBA interlaced PNG, EXIF orientation 6', sizePx: 5600 },
];

/** A 16-bit RGBA interlaced PNG with EXIF orientation 6, `sizePx` square; `shade` makes each one distinct. */
function interlacedPng(sizePx: number, shade: number): Promise<Buffer> {
  return sharp({
    create: {
      width: sizePx,
      height: sizePx,
      channels: 4,
      background: { r: 10 + shade, g: 200, b: 30, alpha: 0.5 },
    },
  })
    .toColourspace('rgb16')
    .withMetadata({ orientation: 6 })
    .png({ progressive: true, compressionLevel: 9 })
    .toBuffer();
}

const mb = (bytes: number) => Math.round(bytes / MiB);

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const { dialect } = options;
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  const baselineDir = process.env.BENCH_BASELINE_DIR;
  const variants =
    baselineDir === undefined || baselineDir === ''
      ? [{ label: '', dir: undefined }]
      : [
          { label: ' [baseline]', dir: path.resolve(baselineDir) },
          { label: ' [this checkout]', dir: undefined },
        ];
  for (const workload of WORKLOADS) {
    const images = await Promise.all(
      Array.from({ length: IMAGES }, (_, i) => interlacedPng(workload.sizePx, i)),
    );
    for (const variant of variants) {
      const name = `${workload.name}${variant.label}`;
      let patients: Awaited<ReturnType<typeof insertMatchablePatients>> = [];
      const prepared = await prepareDatabase(dialect, {
        setup: async (database) => {
          await ensureBenchAccount(database);
          patients = await insertMatchablePatients(database, IMAGES);
        },
      });
      const serverEnv = { ...prepared.env, WORKER: 'in-process', MAX_REQUESTS_PER_CLIENT: '1000' };
      const database = await openDatabase(loadConfig({ ...serverEnv, LOG_LEVEL: 'warn' }).database, {
        poolSize: 2,
      });
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
        await new Promise((resolve) => setTimeout(resolve, 3000));
        const idleRss = await readRssBytes(server.pid);
        const agent = new http.Agent({ keepAlive: true, maxSockets: IMAGES });
        const sampler = startRssSampler(server.pid, 100);
        const started = performance.now();
        const answers: HttpAnswer[] = await Promise.all(
          images.map((image, i) => {
            const patient = patients[i]!;
            return sendRequest(
              `${server.url}/api/v1/request/queue/add?request_type=imaging&hos_num=${patient.hosNum}&dob=${patient.dob}`,
              {
                method: 'POST',
                headers: {
                  authorization: BENCH_AUTHORIZATION,
                  'content-type': 'image/png',
                  'content-length': image.length,
                },
                body: image,
                agent,
              },
            );
          }),
        );
        agent.destroy();
        const requestIds = answers
          .filter((a) => a.status === 200)
          .map((a) => (JSON.parse(a.body.toString()) as { request_id: number }).request_id);
        let unsettled = requestIds.length;
        while (unsettled > 0 && performance.now() - started < DRAIN_LIMIT_MS) {
          await new Promise((resolve) => setTimeout(resolve, 100));
          const row = await database.db
            .selectFrom('request_routine')
            .select((eb) => eb.fn.countAll<number>().as('n'))
            .where('request_id', 'in', requestIds)
            .where('status', 'in', ['NEW', 'RETRY'])
            .executeTakeFirstOrThrow();
          unsettled = Number(row.n);
        }
        const seconds = (performance.now() - started) / 1000;
        const rssPeak = await sampler.stop();
        const rssAfter = await readRssBytes(server.pid);
        await new Promise((resolve) => setTimeout(resolve, SETTLE_MS));
        const rssSettled = await readRssBytes(server.pid);

        const routines =
          requestIds.length === 0
            ? []
            : await database.db
                .selectFrom('request_routine as r')
                .innerJoin('request_routine_execution as x', 'x.request_routine_id', 'r.id')
                .select(['r.request_id', 'r.routine_name', 'r.status', 'x.log_text'])
                .where('r.request_id', 'in', requestIds)
                .orderBy('x.id')
                .execute();
        const thumbnailLogs = routines
          .filter((r) => r.routine_name === 'MAKE_THUMBNAILS')
          .map((r) => `${r.status}: ${(r.log_text ?? '').trim().replace(/\s+/g, ' ')}`);
        const statuses = [...new Set(routines.map((r) => `${r.routine_name} ${r.status}`))].sort();
        const statusCounts: Record<string, number> = {};
        for (const answer of answers)
          statusCounts[String(answer.status)] = (statusCounts[String(answer.status)] ?? 0) + 1;
        const latencies = answers.map((a) => a.ms).sort((a, b) => a - b);
        rows.push({
          name,
          dialect,
          connections: IMAGES,
          requestsPerSec: requestIds.length / seconds,
          bytesPerSec: images.reduce((sum, image) => sum + image.length, 0) / seconds,
          p50Ms: latencies[Math.floor(latencies.length / 2)] ?? 0,
          p99Ms: latencies.at(-1) ?? 0,
          totalRequests: answers.length,
          durationSeconds: seconds,
          errors: unsettled,
          timeouts: 0,
          non2xx: answers.length - requestIds.length,
          statusCounts,
          rssPeakBytes: rssPeak,
          rssAfterBytes: rssSettled,
        });
        const growth = rssPeak - idleRss;
        notes.push(
          `${name}: ${IMAGES} images of ${(images[0]!.length / 1e6).toFixed(2)} MB queued at once, all routines settled in ${seconds.toFixed(1)} s` +
            `${unsettled > 0 ? ` (${unsettled} still unsettled: FAILED)` : ''}; RSS ${mb(idleRss)} MB idle, peak ${mb(rssPeak)} MB (+${mb(growth)}), ` +
            `${mb(rssAfter)} MB when settled, ${mb(rssSettled)} MB ${SETTLE_MS / 1000} s later` +
            (workload.sizePx === 9999
              ? `; target peak within ${mb(TARGET_GROWTH_BYTES)} MB of idle: ${growth <= TARGET_GROWTH_BYTES ? 'met' : 'MISSED'}`
              : ''),
          `  routines: ${statuses.join(', ')}`,
          ...thumbnailLogs.map((line) => `  MAKE_THUMBNAILS ${line}`),
        );
        process.stderr.write(`${notes.at(-2 - thumbnailLogs.length)}\n`);
      } finally {
        await server.stop();
        await database.close();
        await prepared.cleanup();
      }
    }
  }
  return { rows, notes };
}
