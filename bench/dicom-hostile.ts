/**
 * A legitimate STOW-RS sender beside hostile ones: how long a small, valid instance takes to be stored
 * while other clients post instances whose header holds a value megabytes long (the DICOM value-length
 * limits, `src/modules/dicom/value-limits.ts`), and how long `/healthz` takes meanwhile.
 *
 * - `legit STOW (idle)`: `BENCH_HOSTILE_LEGIT` (default 10) small instances, one request at a time, on
 *   an otherwise idle server: the reference.
 * - `legit STOW (N hostile streams)`: the same, while `BENCH_HOSTILE_STREAMS` (default 4) clients each
 *   post, one after another, an instance with a `BENCH_HOSTILE_MB` (default 6) MB PatientName (implicit
 *   VR) until the legitimate sender is done.
 * - `hostile STOW`: those hostile posts (status 409: refused) and `GET /healthz` probed every 100 ms
 *   during them.
 *
 * `npm run bench -- dicom-hostile --dialect sqlite` (the --duration/--connections options do not apply).
 */
import type { BenchReport, BenchRow, BenchRunOptions, Dialect, HttpAnswer } from './lib.ts';
import {
  BENCH_AUTHORIZATION,
  ensureBenchAccount,
  percentile,
  prepareDatabase,
  sendRequest,
  startRssSampler,
  startServer,
} from './lib.ts';
import { buildInstance, multipartRelated, stowContentType } from '../test/dicom-instances.ts';
import { IMPLICIT_VR_LITTLE_ENDIAN, instanceWith, longText } from '../test/hostile-dicom.ts';

const LEGIT = Number(process.env.BENCH_HOSTILE_LEGIT ?? 10);
const STREAMS = Number(process.env.BENCH_HOSTILE_STREAMS ?? 4);
const HOSTILE_BYTES = Number(process.env.BENCH_HOSTILE_MB ?? 6) * 1024 * 1024;
const STUDIES = '/api/v1/dicomweb/studies';

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const { dialect } = options;
  const prepared = await prepareDatabase(dialect, { setup: (database) => ensureBenchAccount(database) });
  const server = await startServer({ env: { ...prepared.env, WORKER: 'off' } });
  const rss = startRssSampler(server.pid);
  const headers = { authorization: BENCH_AUTHORIZATION, 'content-type': stowContentType() };
  const stow = (body: Buffer) => sendRequest(`${server.url}${STUDIES}`, { method: 'POST', headers, body });
  const hostileBody = multipartRelated([
    instanceWith({ transferSyntaxUid: IMPLICIT_VR_LITTLE_ENDIAN, patientName: longText(HOSTILE_BYTES) }),
  ]);

  const legitRun = async (): Promise<HttpAnswer[]> => {
    const answers: HttpAnswer[] = [];
    for (let i = 0; i < LEGIT; i++) answers.push(await stow(multipartRelated([buildInstance()])));
    return answers;
  };
  try {
    // Warm-up: the decoding threads start and the routes compile before anything is measured.
    await stow(multipartRelated([buildInstance()]));
    const idle = await legitRun();

    let isDone = false;
    const hostile: HttpAnswer[] = [];
    const health: HttpAnswer[] = [];
    const streams = Array.from({ length: STREAMS }, async () => {
      while (!isDone) hostile.push(await stow(hostileBody));
    });
    const probe = (async () => {
      while (!isDone) {
        health.push(await sendRequest(`${server.url}/healthz`, {}));
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    // The legitimate sender starts once every hostile stream has a post in flight.
    await new Promise((resolve) => setTimeout(resolve, 200));
    const loaded = await legitRun();
    isDone = true;
    await Promise.all([...streams, probe]);
    const rssPeakBytes = await rss.stop();

    const rows: BenchRow[] = [
      rowOf('legit STOW (idle)', dialect, idle),
      rowOf(`legit STOW (${STREAMS} hostile streams)`, dialect, loaded, rssPeakBytes),
      rowOf(`hostile STOW (${HOSTILE_BYTES / 1024 / 1024} MB PatientName)`, dialect, hostile),
      rowOf('GET /healthz during the hostile posts', dialect, health),
    ];
    return {
      rows,
      notes: [
        `legit: ${LEGIT} small instances one at a time; hostile: ${STREAMS} streams posting back to back`,
        `slowest legit STOW under attack: ${Math.max(...loaded.map((a) => a.ms)).toFixed(1)} ms; slowest /healthz: ${Math.max(...health.map((a) => a.ms)).toFixed(1)} ms`,
      ],
    };
  } finally {
    await server.stop();
    await prepared.cleanup();
  }
}

function rowOf(
  name: string,
  dialect: Dialect,
  answers: readonly HttpAnswer[],
  rssPeakBytes?: number,
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
    errors: 0,
    timeouts: 0,
    non2xx: answers.filter((a) => a.status < 200 || a.status > 299).length,
    statusCounts,
    ...(rssPeakBytes === undefined ? {} : { rssPeakBytes }),
  };
}
