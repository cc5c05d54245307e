/**
 * Queue worker: how fast the engine drains a queue, and how soon an idle worker starts new work.
 * - NOOP routines (the seeded `noop` request type): PostgreSQL with 1 and 4 `npm run worker` processes
 *   (`src/main/worker.ts`, 5 slots each = the queue's `maximum_active_threads`); SQLite with the one
 *   in-process worker (in this process). The routines are inserted in one transaction while the workers
 *   idle; the clock runs from that commit until every routine is COMPLETE. Spread = routines per worker
 *   process, read from the first line of each execution's `log_text`.
 * - Attach chain (`diagnostic_data`: PATIENT_MATCH -> ATTACH_TO_EVENT -> CLEAN_UP, JSON payload, 50
 *   patients) with the same workers.
 * - Idle start latency: one request queued (`enqueueRequest`, commit + NOTIFY / in-process event) while
 *   the workers idle, time until its routine is seen COMPLETE (polled every 1 ms, so an upper bound of the
 *   start latency); 20 samples.
 * Targets: >= 1,000 NOOP routines/s on PostgreSQL with 4 worker processes, work spread across them; a
 * new request starts within 200 ms when idle. `npm run bench -- queue-worker --duration 2`
 * (`BENCH_WORKER_CONCURRENCY=N` sets WORKER_CONCURRENCY, the slots per worker process; default 5).
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { loadConfig } from '../src/config.ts';
import type { Database } from '../src/db/database.ts';
import { openDatabase } from '../src/db/database.ts';
import { sql } from 'kysely';
import { createQueueWorker, enqueueRequest } from '../src/modules/request-queue/index.ts';
import { defaultRoutineCatalog } from '../src/modules/filing/index.ts';
import type { BenchReport, BenchRow, BenchRunOptions, Dialect } from './lib.ts';
import { ROOT_DIR, START_NODE_FLAGS, insertMatchablePatients, ownChild, prepareDatabase } from './lib.ts';

const QUEUE = 'default_queue';
const NOOP_TARGET = 1000;
const LATENCY_TARGET_MS = 200;

interface Workers {
  readonly count: number;
  stop(): Promise<void>;
}

/** `count` worker processes on PostgreSQL, or the in-process worker on SQLite; resolves once idle. */
async function startWorkers(
  dialect: Dialect,
  env: Record<string, string>,
  database: Database,
  count: number,
): Promise<Workers> {
  const workerEnv = {
    ...env,
    WORKER_QUEUES: QUEUE,
    LOG_LEVEL: 'warn',
    ...(process.env.BENCH_WORKER_CONCURRENCY
      ? { WORKER_CONCURRENCY: process.env.BENCH_WORKER_CONCURRENCY }
      : {}),
  };
  if (dialect === 'sqlite') {
    const config = loadConfig(workerEnv);
    const worker = createQueueWorker({
      database,
      config,
      catalog: defaultRoutineCatalog,
      workerLabel: 'in-process',
    });
    await worker.start();
    return { count: 1, stop: () => worker.stop() };
  }
  const children: ChildProcess[] = [];
  for (let i = 0; i < count; i += 1) {
    const child = ownChild(
      spawn(
        process.execPath,
        ['--disable-warning=ExperimentalWarning', ...START_NODE_FLAGS, 'src/main/worker.ts'],
        {
          cwd: ROOT_DIR,
          env: { ...process.env, ...workerEnv },
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      ),
    );
    children.push(child);
    // Ready when the process has logged (at warn level nothing) or after its start-up settles: wait for
    // the LISTEN connection to appear in pg_stat_activity.
  }
  const deadline = Date.now() + 30_000;
  for (;;) {
    const listening = await sql<{
      n: string;
    }>`select count(*) as n from pg_stat_activity where query ilike 'LISTEN request_queue%' and datname = current_database()`.execute(
      database.db,
    );
    if (Number(listening.rows[0]!.n) >= count) break;
    if (Date.now() > deadline) throw new Error('worker processes not ready in 30 s');
    if (children.some((c) => c.exitCode !== null)) throw new Error('a worker process exited during start-up');
    await sleep(50);
  }
  return {
    count,
    async stop() {
      await Promise.all(
        children.map(
          (child) =>
            new Promise<void>((resolve) => {
              if (child.exitCode !== null) return resolve();
              child.once('exit', () => resolve());
              child.kill('SIGTERM');
              setTimeout(() => child.kill('SIGKILL'), 15_000).unref();
            }),
        ),
      );
    },
  };
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Inserts `count` requests of `requestType`, each with its first routine, in one transaction. */
async function queueBatch(
  database: Database,
  requestType: string,
  routineName: string,
  count: number,
  payload?: (i: number) => string,
): Promise<number[]> {
  return database.db.transaction().execute(async (trx) => {
    const ids: number[] = [];
    for (let start = 0; start < count; start += 500) {
      const size = Math.min(500, count - start);
      const rows = await trx
        .insertInto('request')
        .values(Array.from({ length: size }, () => ({ request_type: requestType, system_message: 'bench' })))
        .returning('id')
        .execute();
      const batch = rows.map((r) => r.id);
      ids.push(...batch);
      await trx
        .insertInto('request_routine')
        .values(
          batch.map((id) => ({
            request_id: id,
            execute_request_queue: QUEUE,
            status: 'NEW' as const,
            routine_name: routineName,
            try_count: 0,
            next_try_date_time: null,
            execute_sequence: 10,
            hash_code: null,
          })),
        )
        .execute();
      if (payload !== undefined) {
        await trx
          .insertInto('attachment_data')
          .values(
            batch.map((id, i) => ({
              request_id: id,
              attachment_mnemonic: 'REQUEST_BLOB',
              attachment_type: 'NONE',
              mime_type: 'application/json',
              text_data: payload(start + i),
              blob_data: null,
              body_site_snomed_type: null,
              upload_file_name: null,
              hash_code: null,
            })),
          )
          .execute();
      }
    }
    return ids;
  });
}

/** Wakes the workers after a direct batch insert (intake would NOTIFY itself). */
async function notifyWorkers(database: Database, wakeInProcess?: () => void): Promise<void> {
  await database.dialect.notify('request_queue', QUEUE);
  wakeInProcess?.();
}

async function waitUntilDone(
  database: Database,
  requestIds: readonly number[],
  limitMs = 600_000,
): Promise<void> {
  const deadline = Date.now() + limitMs;
  const first = requestIds[0]!;
  const last = requestIds[requestIds.length - 1]!;
  for (;;) {
    const row = await database.db
      .selectFrom('request_routine')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('request_id', '>=', first)
      .where('request_id', '<=', last)
      .where('status', 'in', ['NEW', 'RETRY'])
      .executeTakeFirstOrThrow();
    if (Number(row.n) === 0) return;
    if (Date.now() > deadline) throw new Error('queue not drained in time');
    await sleep(20);
  }
}

/** Routines per worker, from the `worker <label>` first line of each execution's log. */
async function spreadOf(database: Database, requestIds: readonly number[]): Promise<string> {
  const rows = await database.db
    .selectFrom('request_routine_execution as e')
    .innerJoin('request_routine as r', 'r.id', 'e.request_routine_id')
    .select(['e.log_text'])
    .where('r.request_id', '>=', requestIds[0]!)
    .where('r.request_id', '<=', requestIds[requestIds.length - 1]!)
    .execute();
  const counts = new Map<string, number>();
  for (const r of rows) {
    const label = (r.log_text ?? '').split('\n')[0]!;
    counts.set(label, (counts.get(label) ?? 0) + 1);
  }
  return [...counts.values()].sort((a, b) => b - a).join('/');
}

function row(
  name: string,
  dialect: Dialect,
  workers: number,
  values: { perSec: number; total: number; seconds: number; p50Ms?: number; p99Ms?: number },
): BenchRow {
  return {
    name,
    dialect,
    connections: workers,
    requestsPerSec: values.perSec,
    bytesPerSec: 0,
    p50Ms: values.p50Ms ?? 0,
    p99Ms: values.p99Ms ?? 0,
    totalRequests: values.total,
    durationSeconds: values.seconds,
    errors: 0,
    timeouts: 0,
    non2xx: 0,
    statusCounts: { COMPLETE: values.total },
  };
}

function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length - 1) * p))]!;
}

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const { dialect, durationSeconds } = options;
  const prepared = await prepareDatabase(dialect);
  const config = loadConfig({ ...prepared.env, LOG_LEVEL: 'warn' });
  const database = await openDatabase(config.database, { poolSize: 4 });
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  try {
    // Patients for the attach chain: hospital numbers 0000001..0000050.
    await insertMatchablePatients(database, 50);

    const workerCounts = dialect === 'postgres' ? [1, 4] : [1];
    for (const count of workerCounts) {
      const workers = await startWorkers(dialect, prepared.env, database, count);
      const wakeInProcess = undefined;
      try {
        // NOOP throughput.
        const noopCount = Math.max(
          200,
          Math.round((dialect === 'postgres' ? 1500 : 400) * count * durationSeconds),
        );
        const noopIds = await queueBatch(database, 'noop', 'NOOP', noopCount);
        const started = Date.now();
        await notifyWorkers(database, wakeInProcess);
        await waitUntilDone(database, noopIds);
        const seconds = (Date.now() - started) / 1000;
        const label =
          dialect === 'sqlite' ? 'in-process worker' : `${count} worker process${count > 1 ? 'es' : ''}`;
        rows.push(
          row(`NOOP routines/s, ${label}`, dialect, workers.count, {
            perSec: noopCount / seconds,
            total: noopCount,
            seconds,
          }),
        );
        notes.push(
          `NOOP, ${label}: ${noopCount} routines in ${seconds.toFixed(2)} s; per worker ${await spreadOf(database, noopIds)}`,
        );
        if (dialect === 'postgres' && count === 4) {
          const rate = noopCount / seconds;
          notes.push(
            `target >= ${NOOP_TARGET} NOOP routines/s with 4 worker processes: ${rate >= NOOP_TARGET ? 'met' : 'MISSED'} (${rate.toFixed(0)}/s)`,
          );
        }

        // Attach chain throughput (3 routines per request).
        const attachCount = Math.max(30, Math.round(40 * count * durationSeconds));
        const attachIds = await queueBatch(database, 'diagnostic_data', 'PATIENT_MATCH', attachCount, (i) =>
          JSON.stringify({
            data: { hos_num: String((i % 50) + 1), dob: '1980-01-02', sex: 'F', reading: i },
          }),
        );
        const attachStarted = Date.now();
        await notifyWorkers(database, wakeInProcess);
        await waitUntilDone(database, attachIds);
        const attachSeconds = (Date.now() - attachStarted) / 1000;
        const failed = await database.db
          .selectFrom('request_routine')
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .where('request_id', '>=', attachIds[0]!)
          .where('status', '<>', 'COMPLETE')
          .executeTakeFirstOrThrow();
        rows.push(
          row(`attach chain routines/s (3 per request), ${label}`, dialect, workers.count, {
            perSec: (3 * attachCount) / attachSeconds,
            total: 3 * attachCount,
            seconds: attachSeconds,
          }),
        );
        notes.push(
          `attach chain, ${label}: ${attachCount} requests (${(attachCount / attachSeconds).toFixed(0)} requests/s), ${Number(failed.n)} routine(s) not COMPLETE`,
        );

        // Idle start latency.
        await sleep(300);
        const samples: number[] = [];
        for (let i = 0; i < 20; i += 1) {
          const queuedAt = performance.now();
          const { requestId } = await enqueueRequest(database, { requestType: 'noop' });
          for (;;) {
            const routine = await database.db
              .selectFrom('request_routine')
              .select('status')
              .where('request_id', '=', requestId)
              .executeTakeFirstOrThrow();
            if (routine.status === 'COMPLETE') break;
            if (performance.now() - queuedAt > 5000) throw new Error('idle latency sample timed out');
            await sleep(1);
          }
          samples.push(performance.now() - queuedAt);
          await sleep(20);
        }
        samples.sort((a, b) => a - b);
        rows.push(
          row(`idle start latency (queued -> COMPLETE), ${label}`, dialect, workers.count, {
            perSec: 0,
            total: samples.length,
            seconds: 0,
            p50Ms: percentile(samples, 0.5),
            p99Ms: percentile(samples, 0.99),
          }),
        );
        const worst = samples[samples.length - 1]!;
        notes.push(
          `idle start latency, ${label}: p50 ${percentile(samples, 0.5).toFixed(1)} ms, max ${worst.toFixed(1)} ms; target < ${LATENCY_TARGET_MS} ms: ${worst < LATENCY_TARGET_MS ? 'met' : 'MISSED'}`,
        );
      } finally {
        await workers.stop();
      }
    }
  } finally {
    await database.close();
    await prepared.cleanup();
  }
  return { rows, notes };
}
