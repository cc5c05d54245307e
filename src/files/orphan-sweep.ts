/**
 * Orphan sweep of the protected file store. Writers store a file durably BEFORE the transaction that
 * inserts its `protected_file` row commits (so that no connection waits on the disk), and remove it if
 * the transaction fails; a process killed between the two leaves a file that no row names, and a kill in
 * the middle of a write leaves a `<uid>.<random>.tmp`. The sweep removes both once they are older than a
 * grace period (a younger file may belong to a transaction still running). It never touches a name it
 * does not recognise, and deletes nothing when the database cannot be asked.
 */
import { readdir, rm, stat } from 'node:fs/promises';
import { removeStaleSpoolFiles, spoolDirOf } from './spool.ts';
import path from 'node:path';
import type { Database } from '../db/database.ts';
import type { Logger } from '../logger.ts';
import type { FileStore } from './file-store.ts';

export interface SweepOptions {
  /** Only files last modified at least this long ago are removed. */
  readonly olderThanMs: number;
  /** uids looked up per query. */
  readonly batchSize?: number;
}

export interface SweepResult {
  /** Stored files and temporary files examined. */
  readonly scannedFiles: number;
  /** Stored files no `protected_file` row names, removed. */
  readonly removedOrphans: number;
  /** Leftover temporary files, removed. */
  readonly removedTemps: number;
  /** Upload bodies spooled by requests that never finished (`spool.ts`), removed. */
  readonly removedSpools: number;
}

const HEX_DIGIT = /^[0-9a-f]$/;
const STORED = /^[0-9a-f]{40}$/;
const TEMPORARY = /^[0-9a-f]{40}\.[0-9a-f]+\.tmp$/;

async function listDir(dir: string, isDirectory: boolean): Promise<string[]> {
  try {
    const entries = await readdir(dir, { withFileTypes: true });
    return entries.filter((e) => (isDirectory ? e.isDirectory() : e.isFile())).map((e) => e.name);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
}

/** Every file of the fan-out `<root>/a/b/c/`, with its name's first three characters matching its path. */
async function* storeFiles(root: string): AsyncGenerator<{ name: string; full: string }> {
  for (const a of await listDir(root, true)) {
    if (!HEX_DIGIT.test(a)) continue;
    for (const b of await listDir(path.join(root, a), true)) {
      if (!HEX_DIGIT.test(b)) continue;
      for (const c of await listDir(path.join(root, a, b), true)) {
        if (!HEX_DIGIT.test(c)) continue;
        const dir = path.join(root, a, b, c);
        for (const name of await listDir(dir, false)) {
          if (name.startsWith(a + b + c)) yield { name, full: path.join(dir, name) };
        }
      }
    }
  }
}

async function modifiedAtMs(file: string): Promise<number | undefined> {
  try {
    return (await stat(file)).mtimeMs;
  } catch {
    return undefined; // removed meanwhile
  }
}

/**
 * Removes leftover temporary files and stored files whose uid has no `protected_file` row, both only
 * when last modified at least `olderThanMs` ago. Looks the uids up in batches.
 */
export async function sweepOrphanFiles(
  database: Database,
  files: FileStore,
  options: SweepOptions,
): Promise<SweepResult> {
  const batchSize = options.batchSize ?? 500;
  const cutoffMs = Date.now() - options.olderThanMs;
  // Upload bodies spooled by requests that a crash ended (no request outlives the grace period).
  const removedSpools = await removeStaleSpoolFiles(spoolDirOf(files.root), options.olderThanMs);
  let scannedFiles = 0;
  let removedOrphans = 0;
  let removedTemps = 0;
  let batch: Array<{ uid: string; full: string }> = [];

  const flush = async () => {
    if (batch.length === 0) return;
    const uids = batch.map((f) => f.uid);
    const known = new Set(
      (await database.db.selectFrom('protected_file').select('uid').where('uid', 'in', uids).execute()).map(
        (row) => row.uid,
      ),
    );
    for (const file of batch) {
      if (known.has(file.uid)) continue;
      await rm(file.full, { force: true });
      removedOrphans += 1;
    }
    batch = [];
  };

  for await (const { name, full } of storeFiles(files.root)) {
    const isStored = STORED.test(name);
    if (!isStored && !TEMPORARY.test(name)) continue;
    scannedFiles += 1;
    const modifiedMs = await modifiedAtMs(full);
    if (modifiedMs === undefined || modifiedMs > cutoffMs) continue;
    if (!isStored) {
      await rm(full, { force: true });
      removedTemps += 1;
      continue;
    }
    batch.push({ uid: name, full });
    if (batch.length >= batchSize) await flush();
  }
  await flush();
  return { scannedFiles, removedOrphans, removedTemps, removedSpools };
}

export interface OrphanSweeper {
  /** Stops the timer and waits for a sweep in progress. */
  stop(): Promise<void>;
}

/**
 * Sweeps once soon after start, then every `intervalMs` (0 = never), never two at once. Failures are
 * logged and retried at the next interval.
 */
export function startOrphanSweep(deps: {
  readonly database: Database;
  readonly files: FileStore;
  readonly intervalMs: number;
  readonly graceMs: number;
  readonly logger?: Logger;
}): OrphanSweeper {
  if (deps.intervalMs <= 0) return { stop: async () => {} };
  let running: Promise<void> | undefined;
  let isStopped = false;
  const sweep = () => {
    if (running !== undefined || isStopped) return;
    const startedAt = Date.now();
    running = sweepOrphanFiles(deps.database, deps.files, { olderThanMs: deps.graceMs })
      .then((result) => {
        const level = result.removedOrphans + result.removedTemps + result.removedSpools > 0 ? 'info' : 'debug';
        deps.logger?.[level]({ ...result, durationMs: Date.now() - startedAt }, 'orphan file sweep');
      })
      .catch((error: unknown) => deps.logger?.warn({ err: error }, 'orphan file sweep failed'))
      .finally(() => {
        running = undefined;
      });
  };
  const first = setTimeout(sweep, 1000);
  first.unref();
  const timer = setInterval(sweep, deps.intervalMs);
  timer.unref();
  return {
    async stop() {
      isStopped = true;
      clearTimeout(first);
      clearInterval(timer);
      await running;
    },
  };
}
