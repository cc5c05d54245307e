/**
 * Attachment view: `GET /api/v1/attachmentdisplay/view` of the real server for 2 KB, 1 MB and 20 MB
 * blobs, and 304 answers (If-None-Match), each against a floor that sends the very same bytes from
 * memory. Then the server's RSS while 16 parallel 20 MB downloads run, and after them.
 * `npm run bench -- attachment --connections 1,16`.
 *
 * Targets (issue 5): 2 KB >= 40% of the floor's requests/s; 1 MB >= 60% of the floor's bytes/s;
 * 304 >= 50% of the floor's requests/s; RSS < 600 MB during 16 parallel 20 MB downloads and, after them,
 * back within 50 MB of its idle RSS (read just before them) within a minute (sampled every second).
 */
import http from 'node:http';
import type { Database } from '../src/db/database.ts';
import type { BenchReport, BenchRow, BenchRunOptions, LoadResult, RunningProcess } from './lib.ts';
import {
  BENCH_AUTHORIZATION,
  captureResponse,
  ensureBenchAccount,
  insertBenchBlob,
  measureInterleaved,
  mergeLoadResults,
  prepareDatabase,
  cpuPerRequest,
  readCpuMs,
  readRssBytes,
  startFloor,
  startRssSampler,
  startServer,
} from './lib.ts';

const PATH = '/api/v1/attachmentdisplay/view';
const SIZES = [
  { label: '2 KB', bytes: 2 * 1024 },
  { label: '1 MB', bytes: 1024 * 1024 },
  { label: '20 MB', bytes: 20 * 1024 * 1024 },
] as const;
const RSS_LIMIT_BYTES = 600 * 1024 * 1024;
const RSS_CONNECTIONS = 16;
/** After the downloads, RSS must come back within this much of idle, within this many seconds. */
const RETURN_MARGIN_BYTES = 50 * 1024 * 1024;
const RETURN_SECONDS = 60;
const MB = 1024 * 1024;

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const { dialect, durationSeconds, warmupSeconds } = options;
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  const running: RunningProcess[] = [];
  const ids = new Map<string, number>();

  const setup = async (database: Database) => {
    await ensureBenchAccount(database);
    for (const size of SIZES) {
      // Settled: outside the grace period, so the answers carry the spec's immutable header.
      ids.set(size.label, await insertBenchBlob(database, size.bytes, '2020-01-01 00:00:00'));
    }
  };
  const prepared = await prepareDatabase(dialect, { setup });
  try {
    const server = await startServer({ env: prepared.env });
    running.push(server);
    const headers = { authorization: BENCH_AUTHORIZATION };
    const idleRss = await readRssBytes(server.pid);

    const measureAgainstFloor = async (
      name: string,
      path: string,
      requestHeaders: Record<string, string>,
      expectedStatus: number,
      connectionCounts: readonly number[],
    ): Promise<BenchRow[]> => {
      const sample = await captureResponse(`${server.url}${path}`, { headers: requestHeaders });
      if (sample.status !== expectedStatus) throw new Error(`${name} answered ${sample.status}`);
      const floor = await startFloor(sample);
      const measured: BenchRow[] = [];
      try {
        for (const connections of connectionCounts) {
          measured.push(
            ...(await measureInterleaved(
              [
                { row: { name: `floor: ${name}`, dialect: 'none', isFloor: true }, target: floor, path },
                {
                  row: { name, dialect, floorName: `floor: ${name}` },
                  target: server,
                  path,
                  headers: requestHeaders,
                },
              ],
              { connections, durationSeconds, warmupSeconds },
            )),
          );
        }
      } finally {
        await floor.stop();
      }
      return measured;
    };

    const pairs = (measured: BenchRow[]) =>
      measured
        .filter((r) => r.isFloor !== true)
        .map(
          (r) =>
            [r, measured.find((f) => f.name === r.floorName && f.connections === r.connections)!] as const,
        );

    const smallPath = `${PATH}?id=${ids.get('2 KB')!}`;
    const small = await measureAgainstFloor('GET view 2 KB', smallPath, headers, 200, options.connections);
    rows.push(...small);
    for (const [row, floor] of pairs(small)) {
      const ratio = row.requestsPerSec / floor.requestsPerSec;
      notes.push(
        target(
          `2 KB at ${row.connections} conn: ${pct(ratio)} of the floor's requests/s`,
          ratio >= 0.4,
          '>= 40%',
        ),
      );
    }

    const etag = (await captureResponse(`${server.url}${smallPath}`, { headers })).headers.find(
      ([name]) => name.toLowerCase() === 'etag',
    )?.[1];
    if (etag === undefined) throw new Error('no ETag on the 2 KB answer');
    const notModified = await measureAgainstFloor(
      'GET view 304 (If-None-Match)',
      smallPath,
      { ...headers, 'if-none-match': etag },
      304,
      options.connections,
    );
    rows.push(...notModified);
    for (const [row, floor] of pairs(notModified)) {
      const ratio = row.requestsPerSec / floor.requestsPerSec;
      notes.push(
        target(
          `304 at ${row.connections} conn: ${pct(ratio)} of the floor's requests/s`,
          ratio >= 0.5,
          '>= 50%',
        ),
      );
    }

    for (const size of SIZES.filter((s) => s.label !== '2 KB')) {
      const path = `${PATH}?id=${ids.get(size.label)!}`;
      const name = `GET view ${size.label}`;
      const sample = await captureResponse(`${server.url}${path}`, { headers });
      if (sample.status !== 200 || sample.body.length !== size.bytes)
        throw new Error(`${name} answered ${sample.status}`);
      const floor = await startFloor(sample);
      try {
        for (const connections of options.connections) {
          // Floor, server, server, floor: each half the duration, merged (as measureInterleaved does).
          const order = [floor, server, server, floor];
          const results = new Map<RunningProcess, LoadResult[]>([
            [floor, []],
            [server, []],
          ]);
          let serverCpuMs = { mainMs: 0, allMs: 0 };
          for (const [index, target] of order.entries()) {
            if (index < 2 && warmupSeconds > 0)
              await downloadInParallel(`${target.url}${path}`, headers, connections, warmupSeconds * 1000);
            const cpuBefore = await readCpuMs(target.pid);
            results
              .get(target)!
              .push(
                await downloadInParallel(
                  `${target.url}${path}`,
                  headers,
                  connections,
                  (durationSeconds * 1000) / 2,
                  target.pid,
                ),
              );
            const cpuAfter = await readCpuMs(target.pid);
            if (target === server)
              serverCpuMs = {
                mainMs: serverCpuMs.mainMs + cpuAfter.mainMs - cpuBefore.mainMs,
                allMs: serverCpuMs.allMs + cpuAfter.allMs - cpuBefore.allMs,
              };
          }
          const floorRow: BenchRow = {
            name: `floor: ${name}`,
            dialect: 'none',
            isFloor: true,
            connections,
            ...mergeLoadResults(results.get(floor)!),
          };
          const row: BenchRow = {
            name,
            dialect,
            floorName: floorRow.name,
            connections,
            ...mergeLoadResults(results.get(server)!),
          };
          rows.push(floorRow, row);
          notes.push(
            `${name} at ${connections} conn: ` +
              cpuPerRequest({ mainMs: 0, allMs: 0 }, serverCpuMs, row.totalRequests),
          );
          if (size.label === '1 MB') {
            const ratio = row.bytesPerSec / floorRow.bytesPerSec;
            notes.push(
              target(
                `1 MB at ${connections} conn: ${pct(ratio)} of the floor's bytes/s`,
                ratio >= 0.6,
                '>= 60%',
              ),
            );
          }
        }
      } finally {
        await floor.stop();
      }
    }

    // Memory: 16 parallel 20 MB downloads from a plain node:http client (autocannon parses every body,
    // which would make the client, not the server, the bottleneck), then the RSS as the server idles,
    // every second for a minute, against its idle RSS just before (after the runs above).
    const bigPath = `${PATH}?id=${ids.get('20 MB')!}`;
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const idleBeforeDownloads = await readRssBytes(server.pid);
    const downloads = await downloadInParallel(
      `${server.url}${bigPath}`,
      headers,
      RSS_CONNECTIONS,
      Math.max(3, durationSeconds) * 1000,
      server.pid,
    );
    rows.push({ name: 'GET view 20 MB (RSS run)', dialect, connections: RSS_CONNECTIONS, ...downloads });
    const peakRss = downloads.rssPeakBytes ?? 0;
    const afterRss = new Map<number, number>();
    for (let seconds = 1; seconds <= RETURN_SECONDS; seconds++) {
      await new Promise((resolve) => setTimeout(resolve, 1000));
      afterRss.set(seconds, await readRssBytes(server.pid));
    }
    const returnedAfter = [...afterRss].find(
      ([, rss]) => rss <= idleBeforeDownloads + RETURN_MARGIN_BYTES,
    )?.[0];
    notes.push(
      target(
        `RSS with ${RSS_CONNECTIONS} parallel 20 MB downloads (${downloads.totalRequests} completed): peak ${mb(peakRss)} MB, idle before the runs ${mb(idleRss)} MB`,
        peakRss < RSS_LIMIT_BYTES,
        '< 600 MB',
      ),
      `RSS after the downloads: ${[1, 5, 10, 30, RETURN_SECONDS].map((s) => `${mb(afterRss.get(s)!)} MB after ${s} s`).join(', ')}`,
      target(
        `RSS back within ${mb(RETURN_MARGIN_BYTES)} MB of its idle ${mb(idleBeforeDownloads)} MB (just before the downloads): ` +
          (returnedAfter === undefined ? `not within ${RETURN_SECONDS} s` : `after ${returnedAfter} s`) +
          ` (${RETURN_SECONDS} s after: ${mb(afterRss.get(RETURN_SECONDS)! - idleRss)} MB over the idle RSS before the runs)`,
        returnedAfter !== undefined,
        `within ${RETURN_SECONDS} s`,
      ),
    );
    const unexpected = rows.filter(
      (r) => r.errors > 0 || Object.keys(r.statusCounts).some((s) => s !== '200' && s !== '304'),
    );
    for (const r of unexpected)
      notes.push(
        `${r.name} at ${r.connections} conn: statuses ${JSON.stringify(r.statusCounts)}, errors ${r.errors}`,
      );
  } finally {
    for (const child of running.reverse()) await child.stop();
    await prepared.cleanup();
  }
  return { rows, notes };
}

function target(text: string, isMet: boolean, goal: string): string {
  return `${text}; target ${goal}: ${isMet ? 'met' : 'MISSED'}`;
}

function pct(ratio: number): string {
  return `${(ratio * 100).toFixed(1)}%`;
}

function mb(bytes: number): string {
  return (bytes / MB).toFixed(0);
}

/**
 * `connections` keep-alive loops downloading `url` for `durationMs`, bodies discarded as they arrive.
 * Used for the large bodies: autocannon parses every body it receives, which makes the load generator,
 * not the server, the bottleneck from about 1 MB up. `bytesPerSec` counts body bytes.
 */
async function downloadInParallel(
  url: string,
  headers: Record<string, string>,
  connections: number,
  durationMs: number,
  samplePid?: number,
): Promise<LoadResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const statusCounts: Record<string, number> = {};
  const latencies: number[] = [];
  let bytes = 0;
  let errors = 0;
  const sampler = samplePid === undefined ? undefined : startRssSampler(samplePid, 100);
  const started = performance.now();
  const once = () =>
    new Promise<void>((resolve) => {
      const begin = performance.now();
      const request = http.get(url, { agent, headers }, (response) => {
        response.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
        });
        response.on('end', () => {
          const key = String(response.statusCode);
          statusCounts[key] = (statusCounts[key] ?? 0) + 1;
          latencies.push(performance.now() - begin);
          resolve();
        });
        response.on('error', () => {
          errors += 1;
          resolve();
        });
      });
      request.on('error', () => {
        errors += 1;
        resolve();
      });
    });
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (performance.now() - started < durationMs) await once();
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  agent.destroy();
  const rssPeakBytes = sampler === undefined ? undefined : await sampler.stop();
  latencies.sort((a, b) => a - b);
  const percentile = (p: number) =>
    latencies.length === 0
      ? 0
      : latencies[Math.min(latencies.length - 1, Math.ceil((p / 100) * latencies.length) - 1)]!;
  return {
    requestsPerSec: latencies.length / seconds,
    bytesPerSec: bytes / seconds,
    p50Ms: percentile(50),
    p99Ms: percentile(99),
    totalRequests: latencies.length,
    durationSeconds: seconds,
    errors,
    timeouts: 0,
    non2xx: Object.entries(statusCounts).reduce(
      (n, [code, count]) => (code.startsWith('2') ? n : n + count),
      0,
    ),
    statusCounts,
    ...(rssPeakBytes === undefined ? {} : { rssPeakBytes }),
    ...(samplePid === undefined ? {} : { rssAfterBytes: await readRssBytes(samplePid) }),
  };
}
