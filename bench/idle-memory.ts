/**
 * `npm run bench -- idle-memory --dialect sqlite`: what an idle server holds. The real server
 * (`npm start` flags, `WORKER=in-process` as deployed, `DEMO_DATA=off`) on a fresh, empty, migrated
 * database, read at `/readyz` and after `BENCH_IDLE_SECONDS` (default 60) without a request. Each read
 * gives the RSS split from `/proc/<pid>/status` (anonymous memory, file-backed pages such as code of
 * shared libraries), `process.memoryUsage()` (V8 heap, external memory, ArrayBuffers) and V8's malloced
 * memory, through `memory-probe.child.js`, and names the native libraries mapped and the npm packages
 * loaded. `--duration`/`--connections` do not apply. Target: RSS <= 130 MB after the idle minute.
 */
import { readFile, rm } from 'node:fs/promises';
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { BenchReport, BenchRunOptions } from './lib.ts';
import * as lib from './lib.ts';

const TARGET_RSS_BYTES = 130 * 1024 * 1024;
const PROBE = path.join(lib.ROOT_DIR, 'bench', 'memory-probe.child.js');

interface ProbeSample {
  readonly memory: NodeJS.MemoryUsage;
  readonly mallocedBytes: number;
  readonly bytecodeAndMetadataBytes: number;
  readonly packages: Record<string, number>;
  readonly spaces: Record<string, { size: number; used: number }>;
}

interface Reading extends ProbeSample {
  readonly label: string;
  /** VmRSS, RssAnon, RssFile, RssShmem of /proc/<pid>/status, in bytes. */
  readonly status: Record<string, number>;
  /** Shared libraries and Node addons mapped by the process, from node_modules (base names). */
  readonly addons: readonly string[];
}

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const idleSeconds = Number(process.env.BENCH_IDLE_SECONDS ?? 60);
  const prepared = await lib.prepareDatabase(options.dialect);
  const probeDir = await mkdtemp(path.join(tmpdir(), 'cra-memory-probe-'));
  const probeFile = path.join(probeDir, 'samples.jsonl');
  const server = await lib.startServer({
    env: {
      ...prepared.env,
      WORKER: 'in-process',
      NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${PROBE}`.trim(),
      BENCH_MEMORY_PROBE_FILE: probeFile,
    },
  });
  const readings: Reading[] = [];
  try {
    readings.push(await read(server.pid, probeFile, 'ready'));
    await sleep(Math.min(10, idleSeconds) * 1000);
    readings.push(await read(server.pid, probeFile, `${Math.min(10, idleSeconds)} s idle`));
    if (idleSeconds > 10) {
      await sleep((idleSeconds - 10) * 1000);
      readings.push(await read(server.pid, probeFile, `${idleSeconds} s idle`));
    }
  } finally {
    await server.stop();
    await prepared.cleanup();
    await rm(probeDir, { recursive: true, force: true });
  }
  const last = readings.at(-1)!;
  const notes = [
    ...readings.map(
      (r) =>
        `${r.label}: RSS ${mb(r.status.VmRSS)} MB (anonymous ${mb(r.status.RssAnon)}, file-backed ${mb(r.status.RssFile)}, shared ${mb(r.status.RssShmem)}); ` +
        `V8 heap total ${mb(r.memory.heapTotal)} (used ${mb(r.memory.heapUsed)}, of it bytecode ${mb(r.bytecodeAndMetadataBytes)}), ` +
        `external ${mb(r.memory.external)} (ArrayBuffers ${mb(r.memory.arrayBuffers)}), V8 malloced ${mb(r.mallocedBytes)}`,
    ),
    `V8 heap spaces at the last read (size/used MB): ${Object.entries(last.spaces)
      .filter(([, space]) => space.size > 0)
      .map(([name, space]) => `${name} ${mb(space.size)}/${mb(space.used)}`)
      .join(', ')}`,
    `native libraries mapped: ${last.addons.join(', ') || 'none'}`,
    `npm packages loaded (CommonJS modules): ${Object.entries(last.packages)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([name, count]) => `${name} ${count}`)
      .join(', ')}`,
    `${last.status.VmRSS! <= TARGET_RSS_BYTES ? 'met' : 'MISSED'}: idle RSS ${mb(last.status.VmRSS)} MB <= ${mb(TARGET_RSS_BYTES)} MB`,
  ];
  return { rows: [], notes };
}

async function read(pid: number, probeFile: string, label: string): Promise<Reading> {
  const before = await lineCount(probeFile);
  process.kill(pid, 'SIGUSR2');
  const deadline = Date.now() + 10_000;
  while ((await lineCount(probeFile)) === before) {
    if (Date.now() > deadline) throw new Error('the memory probe did not answer (is it preloaded?)');
    await sleep(20);
  }
  const lines = (await readFile(probeFile, 'utf8')).trim().split('\n');
  const sample = JSON.parse(lines.at(-1)!) as ProbeSample;
  const statusText = await readFile(`/proc/${pid}/status`, 'utf8');
  const status: Record<string, number> = {};
  for (const field of ['VmRSS', 'RssAnon', 'RssFile', 'RssShmem']) {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(statusText);
    status[field] = match === null ? 0 : Number(match[1]) * 1024;
  }
  const maps = await readFile(`/proc/${pid}/maps`, 'utf8');
  const addons = [
    ...new Set(
      maps
        .split('\n')
        .map((line) => line.split(/\s+/)[5] ?? '')
        .filter((file) => file.includes('node_modules/'))
        .map((file) => path.basename(file)),
    ),
  ].sort();
  return { label, ...sample, status, addons };
}

async function lineCount(file: string): Promise<number> {
  try {
    return (await readFile(file, 'utf8')).split('\n').length - 1;
  } catch {
    return 0;
  }
}

function mb(bytes: number | undefined): string {
  return ((bytes ?? 0) / 1024 / 1024).toFixed(1);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
