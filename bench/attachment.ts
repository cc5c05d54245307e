/**
 * Attachment view: `GET /api/v1/attachmentdisplay/view` of the real server for 2 KB, 1 MB and 20 MB
 * blobs, and 304 answers (If-None-Match), each against a floor that sends the very same bytes from
 * memory. Then the server's RSS while 16 parallel 20 MB downloads run, and after them.
 * `npm run bench -- attachment --connections 1,16`.
 *
 * Targets (issue 5): 2 KB >= 40% of the floor's requests/s; 1 MB >= 60% of the floor's bytes/s;
 * 304 >= 50% of the floor's requests/s; RSS < 600 MB during 16 parallel 20 MB downloads and back near
 * idle afterwards.
 */
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { Database } from '../src/db/database.ts';
import type { BenchReport, BenchRow, BenchRunOptions, RunningProcess } from './lib.ts';
import {
  BENCH_AUTHORIZATION,
  captureResponse,
  ensureBenchAccount,
  measureInterleaved,
  prepareDatabase,
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
      const request = await database.db
        .insertInto('request')
        .values({ request_type: 'dicom_request', system_message: 'bench' })
        .returning('id')
        .executeTakeFirstOrThrow();
      const row = await database.db
        .insertInto('attachment_data')
        .values({
          request_id: request.id,
          attachment_mnemonic: 'BENCH_BLOB',
          attachment_type: 'NONE',
          mime_type: 'application/octet-stream',
          blob_data: randomBytes(size.bytes),
          // Settled: outside the grace period, so the answers carry the spec's immutable header.
          last_modified_date: '2020-01-01 00:00:00',
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      ids.set(size.label, row.id);
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

    for (const size of SIZES) {
      const path = `${PATH}?id=${ids.get(size.label)!}`;
      const measured = await measureAgainstFloor(
        `GET view ${size.label}`,
        path,
        headers,
        200,
        options.connections,
      );
      rows.push(...measured);
      for (const [row, floor] of pairs(measured)) {
        if (size.label === '2 KB') {
          const ratio = row.requestsPerSec / floor.requestsPerSec;
          notes.push(
            target(
              `${size.label} at ${row.connections} conn: ${pct(ratio)} of the floor's requests/s`,
              ratio >= 0.4,
              '>= 40%',
            ),
          );
        } else if (size.label === '1 MB') {
          const ratio = row.bytesPerSec / floor.bytesPerSec;
          notes.push(
            target(
              `${size.label} at ${row.connections} conn: ${pct(ratio)} of the floor's bytes/s`,
              ratio >= 0.6,
              '>= 60%',
            ),
          );
        }
      }
    }

    const smallPath = `${PATH}?id=${ids.get('2 KB')!}`;
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

    // Memory: 16 parallel 20 MB downloads from a plain node:http client (autocannon parses every body,
    // which would make the client, not the server, the bottleneck), then the RSS as the server idles.
    const bigPath = `${PATH}?id=${ids.get('20 MB')!}`;
    const sampler = startRssSampler(server.pid, 100);
    const downloads = await downloadInParallel(
      `${server.url}${bigPath}`,
      headers,
      RSS_CONNECTIONS,
      Math.max(3, durationSeconds) * 1000,
    );
    const peakRss = await sampler.stop();
    const afterRss: string[] = [];
    let waitedSeconds = 0;
    for (const seconds of [1, 5, 10]) {
      await new Promise((resolve) => setTimeout(resolve, (seconds - waitedSeconds) * 1000));
      waitedSeconds = seconds;
      afterRss.push(`${mb(await readRssBytes(server.pid))} MB after ${seconds} s`);
    }
    notes.push(
      target(
        `RSS with ${RSS_CONNECTIONS} parallel 20 MB downloads (${downloads.completed} completed, ${(downloads.bytes / 1e6 / downloads.seconds).toFixed(0)} MB/s, statuses ${JSON.stringify(downloads.statusCounts)}): peak ${mb(peakRss)} MB, idle before the runs ${mb(idleRss)} MB`,
        peakRss < RSS_LIMIT_BYTES,
        '< 600 MB',
      ),
      `RSS after the downloads: ${afterRss.join(', ')}`,
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

/** `connections` keep-alive loops downloading `url` (bodies discarded as they arrive) for `durationMs`. */
async function downloadInParallel(
  url: string,
  headers: Record<string, string>,
  connections: number,
  durationMs: number,
): Promise<{ completed: number; bytes: number; seconds: number; statusCounts: Record<string, number> }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const statusCounts: Record<string, number> = {};
  let completed = 0;
  let bytes = 0;
  const started = Date.now();
  const once = () =>
    new Promise<void>((resolve, reject) => {
      const request = http.get(url, { agent, headers }, (response) => {
        response.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
        });
        response.on('end', () => {
          const key = String(response.statusCode);
          statusCounts[key] = (statusCounts[key] ?? 0) + 1;
          completed += 1;
          resolve();
        });
        response.on('error', reject);
      });
      request.on('error', reject);
    });
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (Date.now() - started < durationMs) await once();
    }),
  );
  agent.destroy();
  return { completed, bytes, seconds: (Date.now() - started) / 1000, statusCounts };
}
