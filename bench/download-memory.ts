/**
 * What 16 parallel 20 MB downloads leave in the server's memory, on a fresh server and nothing else:
 * `npm run bench -- download-memory --dialect sqlite`. One 20 MiB attachment; the server (the `npm start`
 * flags, with `bench/memory-probe.child.js` preloaded) idles 3 s, then 16 clients download it in a loop
 * for `--duration` seconds (at least 4), then it idles 60 s. At each point: RSS and its anonymous part
 * (`/proc/<pid>/smaps_rollup`), and `process.memoryUsage()` (V8 heap, external, ArrayBuffers) from the
 * probe, so that memory held by V8 and memory held by the C allocator are told apart.
 * `BENCH_SERVER_ENV` (a JSON object) adds variables to the server's environment, e.g.
 * `{"MALLOC_MMAP_THRESHOLD_":"131072"}`, to compare allocator settings in one run: each given object is
 * one server, in order, and `[{}, {...}]` measures both (default `[{}]`).
 * Target: 60 s after the downloads, RSS within 50 MB of its idle RSS before them.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { BenchReport, BenchRow, BenchRunOptions } from './lib.ts';
import * as lib from './lib.ts';

const MiB = 1024 * 1024;
const CONNECTIONS = 16;
const BLOB_BYTES = 20 * MiB;
const MARGIN_BYTES = 50 * MiB;
const PROBE = path.join(lib.ROOT_DIR, 'bench', 'memory-probe.child.js');

interface Reading {
  readonly rssMb: number;
  readonly anonymousMb: number;
  readonly heapTotalMb: number;
  readonly heapUsedMb: number;
  readonly externalMb: number;
  readonly arrayBuffersMb: number;
}

function describe(reading: Reading): string {
  return (
    `RSS ${reading.rssMb} MB (anonymous ${reading.anonymousMb}), V8 heap ${reading.heapTotalMb} (used ${reading.heapUsedMb}), ` +
    `external ${reading.externalMb} (ArrayBuffers ${reading.arrayBuffersMb})`
  );
}

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const { dialect } = options;
  const variants = JSON.parse(process.env.BENCH_SERVER_ENV ?? '[{}]') as unknown;
  const envs: Record<string, string>[] = Array.isArray(variants)
    ? (variants as Record<string, string>[])
    : [variants as Record<string, string>];
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  let id = 0;
  const prepared = await lib.prepareDatabase(dialect, {
    setup: async (database) => {
      await lib.ensureBenchAccount(database);
      id = await lib.insertBenchBlob(database, BLOB_BYTES);
    },
  });
  const probeDir = await mkdtemp(path.join(tmpdir(), 'cra-download-memory-'));
  try {
    for (const [n, extraEnv] of envs.entries()) {
      const probeFile = path.join(probeDir, `probe-${n}.jsonl`);
      const server = await lib.startServer({
        env: {
          ...prepared.env,
          NODE_OPTIONS: `--import=${PROBE}`,
          BENCH_MEMORY_PROBE_FILE: probeFile,
          ...extraEnv,
        },
      });
      let probes = 0;
      const read = async (): Promise<Reading> => {
        process.kill(server.pid, 'SIGUSR2');
        let line: string | undefined;
        for (let tries = 0; line === undefined && tries < 50; tries++) {
          await new Promise((resolve) => setTimeout(resolve, 100));
          line = (await readFile(probeFile, 'utf8').catch(() => '')).trim().split('\n')[probes];
        }
        probes += 1;
        const memory = (JSON.parse(line ?? '{}') as { memory?: Record<string, number> }).memory ?? {};
        const rollup = await readFile(`/proc/${server.pid}/smaps_rollup`, 'utf8');
        const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+)`, 'm').exec(rollup)?.[1] ?? 0);
        const mb = (bytes: number | undefined) => Math.round((bytes ?? 0) / MiB);
        return {
          rssMb: Math.round(kb('Rss') / 1024),
          anonymousMb: Math.round(kb('Anonymous') / 1024),
          heapTotalMb: mb(memory.heapTotal),
          heapUsedMb: mb(memory.heapUsed),
          externalMb: mb(memory.external),
          arrayBuffersMb: mb(memory.arrayBuffers),
        };
      };
      try {
        const label = `${JSON.stringify(extraEnv)}`;
        await new Promise((resolve) => setTimeout(resolve, 3000));
        const idle = await read();
        const url = `${server.url}/api/v1/attachmentdisplay/view?id=${id}`;
        const until = Date.now() + Math.max(4, options.durationSeconds) * 1000;
        let downloads = 0;
        let failures = 0;
        const sampler = lib.startRssSampler(server.pid, 100);
        const started = performance.now();
        await Promise.all(
          Array.from({ length: CONNECTIONS }, async () => {
            while (Date.now() < until) {
              await new Promise<void>((resolve) => {
                http
                  .get(url, { headers: { authorization: lib.BENCH_AUTHORIZATION } }, (response) => {
                    let bytes = 0;
                    response.on('data', (chunk: Buffer) => (bytes += chunk.length));
                    response.on('end', () => {
                      if (response.statusCode === 200 && bytes === BLOB_BYTES) downloads += 1;
                      else failures += 1;
                      resolve();
                    });
                    response.on('error', () => ((failures += 1), resolve()));
                  })
                  .on('error', () => ((failures += 1), resolve()));
              });
            }
          }),
        );
        const seconds = (performance.now() - started) / 1000;
        const peak = await sampler.stop();
        const after1 = await read();
        await new Promise((resolve) => setTimeout(resolve, 60_000));
        const after60 = await read();
        rows.push({
          name: `GET view 20 MB, server env ${label}`,
          dialect,
          connections: CONNECTIONS,
          requestsPerSec: downloads / seconds,
          bytesPerSec: (downloads * BLOB_BYTES) / seconds,
          p50Ms: 0,
          p99Ms: 0,
          totalRequests: downloads,
          durationSeconds: seconds,
          errors: failures,
          timeouts: 0,
          non2xx: 0,
          statusCounts: { '200': downloads },
          rssPeakBytes: peak,
          rssAfterBytes: after60.rssMb * MiB,
        });
        const isMet = after60.rssMb * MiB <= idle.rssMb * MiB + MARGIN_BYTES;
        notes.push(
          `server env ${label}: ${downloads} downloads (${failures} failed), peak RSS ${Math.round(peak / MiB)} MB`,
          `  idle: ${describe(idle)}`,
          `  1 s after: ${describe(after1)}`,
          `  60 s after: ${describe(after60)}; within 50 MB of idle: ${isMet ? 'met' : 'MISSED'} (+${after60.rssMb - idle.rssMb} MB)`,
        );
      } finally {
        await server.stop();
      }
    }
  } finally {
    await rm(probeDir, { recursive: true, force: true });
    await prepared.cleanup();
  }
  return { rows, notes };
}
