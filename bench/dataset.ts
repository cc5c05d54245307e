/**
 * Dataset export and import of a large dataset through the CLI: the peak RSS of the CLI process.
 * `npm run bench -- dataset --dialect sqlite`. A fresh database is filled with attachment rows of mixed
 * sizes (`BENCH_DATASET_MB` MiB of binary in all, default 560, which makes an export file of about
 * 750 MB: base64 takes 4/3; the sizes cycle through 20 MiB, 4 MiB, 1 MiB and four of 256 KiB, each
 * value distinct). Then `npm run cli -- export <file>` (the `npm run cli` Node flags) and
 * `npm run cli -- import <file>` into a new empty database, each a process of its own whose peak
 * resident memory (`VmHWM`, read every 100 ms until it exits) is the figure; the import is checked to
 * write every attachment row.
 * `BENCH_BASELINE_DIR=/path/to/other/checkout`: the same export and import are also run with that
 * checkout's CLI, in A-B-B-A order, on the same databases and file.
 * Target: peak RSS < 300 MB for export and for import.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import type { Database } from '../src/db/database.ts';
import { insertOneAttachmentData } from '../src/modules/attachment-data/index.ts';
import { insertUploadRequest } from '../src/modules/request-queue/index.ts';
import type { BenchReport, BenchRow, BenchRunOptions, PreparedDatabase } from './lib.ts';
import { ROOT_DIR, ownChild, prepareDatabase } from './lib.ts';

const MiB = 1024 * 1024;
const DATASET_BYTES = Math.round(Number(process.env.BENCH_DATASET_MB ?? 560) * MiB);
const SIZES = [20 * MiB, 4 * MiB, MiB, MiB / 4, MiB / 4, MiB / 4, MiB / 4];
const RSS_TARGET_BYTES = 300 * MiB;

/** Fills `database` with attachment rows of {@link SIZES} until {@link DATASET_BYTES}; resolves to the row count. */
async function fillAttachments(database: Database): Promise<number> {
  const base = randomBytes(20 * MiB);
  let written = 0;
  let rows = 0;
  const now = '2026-11-27 12:00:00';
  while (written < DATASET_BYTES) {
    const size = Math.min(SIZES[rows % SIZES.length]!, DATASET_BYTES - written);
    const bytes = Buffer.from(base.subarray(0, size));
    bytes.write(`dataset bench row ${rows};`, 0, 'latin1');
    await database.writeTransaction(async (trx) => {
      const requestId = await insertUploadRequest(trx, 'attachment_upload', 1, now);
      await insertOneAttachmentData(
        trx,
        { requestId, mnemonic: 'FILE', mimeType: 'application/octet-stream', blobData: bytes },
        { userId: 1, now },
      );
    });
    written += size;
    rows += 1;
  }
  return rows;
}

/** Reads VmHWM (peak resident set) of `pid`, 0 once it has gone. */
async function readPeakRss(pid: number): Promise<number> {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const match = /^VmHWM:\s+(\d+)\s+kB/m.exec(status);
    return match === null ? 0 : Number(match[1]) * 1024;
  } catch {
    return 0;
  }
}

/** Runs the CLI of checkout `root` with `args`; resolves to its peak RSS, time and output. */
async function runCli(
  root: string,
  args: readonly string[],
  env: Record<string, string>,
): Promise<{ peakRssBytes: number; seconds: number; output: string }> {
  const manifest = JSON.parse(await readFile(path.join(root, 'package.json'), 'utf8')) as {
    scripts: Record<string, string>;
  };
  const flags = (manifest.scripts.cli ?? '').split(/\s+/).filter((word) => word.startsWith('--'));
  const started = performance.now();
  const child = ownChild(
    spawn(
      process.execPath,
      ['--disable-warning=ExperimentalWarning', ...flags, path.join(root, 'src/main/cli.ts'), ...args],
      { cwd: root, env: { ...process.env, LOG_LEVEL: 'warn', ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
    ),
  );
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number>((resolve) => child.once('exit', (code) => resolve(code ?? 1)));
  let peak = 0;
  let isRunning = true;
  void exited.then(() => (isRunning = false));
  while (isRunning) {
    peak = Math.max(peak, await readPeakRss(child.pid!));
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const code = await exited;
  if (code !== 0) throw new Error(`cli ${args.join(' ')} exited ${code}: ${output.slice(-2000)}`);
  return { peakRssBytes: peak, seconds: (performance.now() - started) / 1000, output };
}

function row(
  name: string,
  dialect: BenchRunOptions['dialect'],
  seconds: number,
  bytes: number,
  peak: number,
): BenchRow {
  return {
    name,
    dialect,
    connections: 1,
    requestsPerSec: 1 / seconds,
    bytesPerSec: bytes / seconds,
    p50Ms: seconds * 1000,
    p99Ms: seconds * 1000,
    totalRequests: 1,
    durationSeconds: seconds,
    errors: 0,
    timeouts: 0,
    non2xx: 0,
    statusCounts: { ok: 1 },
    rssPeakBytes: peak,
    rssAfterBytes: 0,
  };
}

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const { dialect } = options;
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  const baselineDir = process.env.BENCH_BASELINE_DIR;
  const checkouts =
    baselineDir === undefined || baselineDir === ''
      ? [{ label: '', root: ROOT_DIR }]
      : [
          { label: ' [baseline]', root: path.resolve(baselineDir) },
          { label: ' [this checkout]', root: ROOT_DIR },
        ];
  const order = checkouts.length === 1 ? checkouts : [...checkouts, ...[...checkouts].reverse()];
  const dir = await mkdtemp(path.join(tmpdir(), 'cra-bench-dataset-'));
  const file = path.join(dir, 'dataset.json');
  let attachmentRows = 0;
  const source = await prepareDatabase(dialect, {
    fill: async (database) => {
      process.stderr.write(
        `Filling ${(DATASET_BYTES / MiB).toFixed(0)} MiB of attachments on ${dialect}...\n`,
      );
      attachmentRows = await fillAttachments(database);
    },
  });
  const targets: PreparedDatabase[] = [];
  try {
    for (const checkout of order) {
      const exported = await runCli(checkout.root, ['export', file], source.env);
      const fileBytes = (await stat(file)).size;
      rows.push(
        row(`cli export${checkout.label}`, dialect, exported.seconds, fileBytes, exported.peakRssBytes),
      );
      notes.push(
        `export${checkout.label}: ${(fileBytes / 1e6).toFixed(0)} MB file in ${exported.seconds.toFixed(1)} s, ` +
          `peak RSS ${(exported.peakRssBytes / MiB).toFixed(0)} MB; target < 300 MB: ${exported.peakRssBytes < RSS_TARGET_BYTES ? 'met' : 'MISSED'}`,
      );
      const target = await prepareDatabase(dialect);
      targets.push(target);
      const imported = await runCli(checkout.root, ['import', file], target.env);
      const database = await openDatabase(loadConfig({ ...target.env, LOG_LEVEL: 'warn' }).database, {
        poolSize: 1,
      });
      let stored = 0;
      try {
        const count = await database.db
          .selectFrom('attachment_data')
          .select((eb) => eb.fn.countAll<number>().as('count'))
          .where('attachment_mnemonic', '=', 'FILE')
          .executeTakeFirstOrThrow();
        stored = Number(count.count);
      } finally {
        await database.close();
      }
      rows.push(
        row(`cli import${checkout.label}`, dialect, imported.seconds, fileBytes, imported.peakRssBytes),
      );
      notes.push(
        `import${checkout.label}: ${imported.seconds.toFixed(1)} s, peak RSS ${(imported.peakRssBytes / MiB).toFixed(0)} MB; ` +
          `target < 300 MB: ${imported.peakRssBytes < RSS_TARGET_BYTES ? 'met' : 'MISSED'}; attachment rows imported ` +
          `${stored}/${attachmentRows}${stored === attachmentRows ? '' : ' FAILED'}`,
      );
      await target.cleanup();
      targets.pop();
    }
  } finally {
    for (const target of targets) await target.cleanup();
    await source.cleanup();
    await rm(dir, { recursive: true, force: true });
  }
  return { rows, notes };
}
