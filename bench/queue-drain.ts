/**
 * Queue drain: how fast the worker settles `form_data` requests (PATIENT_MATCH -> ATTACH_TO_EVENT ->
 * CLEAN_UP, a small JSON body naming one of `BENCH_DRAIN_PATIENTS` patients, default 200), and whether it
 * keeps up with intake.
 * - Backlog: `BENCH_DRAIN_BACKLOG` requests (default 300 per `--duration` second) written as intake
 *   writes them (`enqueueRequest`: REQUEST_DATA, the JSON body as REQUEST_BLOB with its hash,
 *   HEADER_DATA, the first routine), then drained by the worker of this process (the server's in-process
 *   worker: same slots and pool size) and by `npm run worker` processes (`BENCH_DRAIN_PROCESSES`, default
 *   `1,2` on PostgreSQL and `1` on SQLite). The clock runs from the start of the in-process worker, and
 *   for processes (which take a moment to start) from the first routine run, to the last settled request.
 *   For the in-process drain the notes count what the worker sent to the database per request, at the
 *   driver: statements (every round trip, BEGIN/SAVEPOINT/COMMIT included) by kind, commits, and WAL
 *   flushes (SQLite: fdatasync calls of this process; PostgreSQL: `pg_stat_wal.wal_sync` of the whole
 *   server, so other sessions on it count too).
 * - Keep-up: the real server with its in-process worker (`WORKER=in-process`), queue add (small JSON,
 *   `form_data`, patients in turn, each body unique) at 32 connections for `--duration` seconds; then
 *   the requests of the run not yet settled (a routine still NEW or RETRY) when intake ends and
 *   `BENCH_DRAIN_SETTLE_SECONDS` (default 10) later, and how long until none is left (at most 120 s).
 * Targets: >= 500 requests/s drained on both dialects; the worker keeps up with the intake it accepted
 * (nothing unsettled a few seconds after intake ends). `npm run bench -- queue-drain --duration 10`.
 */
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { StatementSync } from 'node:sqlite';
import { sql } from 'kysely';
import mysql from 'mysql2';
import pg from 'pg';
import { loadConfig } from '../src/config.ts';
import type { Database } from '../src/db/database.ts';
import { openDatabase } from '../src/db/database.ts';
import { contentHash } from '../src/modules/attachment-data/index.ts';
import { createQueueWorker, enqueueRequest } from '../src/modules/request-queue/index.ts';
import { defaultRoutineCatalog } from '../src/modules/filing/index.ts';
import type { BenchReport, BenchRow, BenchRunOptions, Dialect } from './lib.ts';
import {
  BENCH_AUTHORIZATION,
  ROOT_DIR,
  START_NODE_FLAGS,
  ensureBenchAccount,
  insertMatchablePatients,
  ownChild,
  prepareDatabase,
  runLoad,
  startServer,
} from './lib.ts';

const QUEUE = 'default_queue';
const REQUEST_TYPE = 'form_data';
const DRAIN_TARGET = 500;
/** PATIENT_MATCH, ATTACH_TO_EVENT, CLEAN_UP. */
const ROUTINES_PER_REQUEST = 3;
const INTAKE_CONNECTIONS = 32;
const SETTLE_LIMIT_MS = 120_000;

function envNumber(name: string, fallback: number): number {
  const value = Number(process.env[name]);
  return Number.isFinite(value) && value > 0 ? value : fallback;
}

/** The JSON body of request `i`: its patient's identifier, date of birth and sex, and a unique reading. */
function bodyOf(i: number, patients: number): string {
  return JSON.stringify({
    data: { hos_num: String((i % patients) + 1), dob: '1980-01-02', sex: 'F', reading: i },
  });
}

/** Writes `count` requests as intake writes a small JSON `form_data` submission, 16 at a time. */
async function queueBacklog(database: Database, count: number, patients: number): Promise<number[]> {
  const query = JSON.stringify({ request_type: REQUEST_TYPE });
  const headers = JSON.stringify({ 'content-type': 'application/json', 'origin-ip-address': '127.0.0.1' });
  const ids: number[] = new Array(count);
  let next = 0;
  const writer = async () => {
    while (next < count) {
      const i = next++;
      const body = bodyOf(i, patients);
      const json = (mnemonic: string, text: string, hashCode: number | null) => ({
        mnemonic,
        mimeType: 'application/json',
        textData: text,
        blobData: null,
        uploadFileName: null,
        hashCode,
      });
      const queued = await enqueueRequest(database, {
        requestType: REQUEST_TYPE,
        attachments: [
          json('REQUEST_DATA', query, null),
          json('REQUEST_BLOB', body, contentHash(Buffer.from(body))),
          json('HEADER_DATA', headers, null),
        ],
      });
      ids[i] = queued.requestId;
    }
  };
  await Promise.all(Array.from({ length: 16 }, writer));
  return ids.sort((a, b) => a - b);
}

/** Marks the bench's own statements, which the statement counter leaves out. */
const BENCH_MARK = '/* bench */';

/** Requests with an id in [first, last] that still have a NEW or RETRY routine. */
async function unsettledCount(database: Database, first: number, last: number): Promise<number> {
  const result = await sql<{
    n: number | string;
  }>`${sql.raw(BENCH_MARK)} select count(distinct request_id) as n
    from request_routine where request_id >= ${first} and request_id <= ${last}
    and status in ('NEW', 'RETRY')`.execute(database.db);
  return Number(result.rows[0]?.n ?? 0);
}

/** Routines of requests in [first, last] by status. */
async function statusCounts(
  database: Database,
  first: number,
  last: number,
): Promise<Record<string, number>> {
  const rows = await database.db
    .selectFrom('request_routine')
    .select(['status', (eb) => eb.fn.countAll<number>().as('n')])
    .where('request_id', '>=', first)
    .where('request_id', '<=', last)
    .groupBy('status')
    .execute();
  return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
}

/**
 * Waits until no request of [first, last] is unsettled; the clock starts when the first one settles (a
 * worker process's start-up is not counted). Resolves to the seconds from there to the end.
 */
async function timeDrain(database: Database, first: number, last: number, total: number): Promise<number> {
  const deadline = Date.now() + 600_000;
  const routines = total * ROUTINES_PER_REQUEST;
  let startedAt: number | undefined;
  let doneAtStart = 0;
  for (;;) {
    const now = performance.now();
    if (startedAt === undefined) {
      // The clock starts with the first routine run, not the first settled request: a request settles
      // with its last routine, after the claims (in id order) have run the first routines of most others.
      const done = await doneRoutineCount(database, first, last);
      if (done > 0) {
        startedAt = now;
        doneAtStart = done;
      }
    }
    const left = startedAt === undefined ? total : await unsettledCount(database, first, last);
    if (left === 0) {
      const seconds = (now - startedAt!) / 1000;
      // Routines run before the first sample are spread over the time since then.
      return seconds * (routines / Math.max(1, routines - doneAtStart));
    }
    if (Date.now() > deadline) throw new Error(`queue not drained in 600 s (${left} unsettled)`);
    await sleep(25);
  }
}

/** Routines of requests in [first, last] that have run to an end (any status but NEW and RETRY). */
async function doneRoutineCount(database: Database, first: number, last: number): Promise<number> {
  const result = await sql<{
    n: number | string;
  }>`${sql.raw(BENCH_MARK)} select count(*) as n
    from request_routine where request_id >= ${first} and request_id <= ${last}
    and status not in ('NEW', 'RETRY')`.execute(database.db);
  return Number(result.rows[0]?.n ?? 0);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

// --- what the worker sends to the database ------------------------------------------------------------

interface StatementCounter {
  /** Starts counting from zero. */
  start(): void;
  /**
   * Statements by kind and commits since `start`, and (PostgreSQL, MySQL) the milliseconds the worker's
   * connections waited for each kind's answers (round trips and lock waits together); counting stops.
   */
  read(): { byKind: Map<string, number>; msByKind: Map<string, number>; statements: number; commits: number };
  /** Removes the counter. */
  remove(): void;
}

/** The kind of a statement: its first words, literals and placeholders folded, cut to 70 characters. */
function kindOf(text: string): string {
  return text
    .replace(/\s+/g, ' ')
    .replace(/\$\d+|\?/g, '?')
    .replace(/'[^']*'/g, "'…'")
    .replace(/\b\d+\b/g, 'N')
    .trim()
    .slice(0, 70);
}

const WRITE = /^\s*(insert|update|delete|with)\b/i;

/**
 * Counts every statement this process sends while started: pg's `Client.query` (Kysely, the pool and
 * named statements all go through it; installed before any connection opens, since each connection keeps
 * the method it was given), mysql2's `query`/`execute` or node:sqlite's statement calls. A commit is a COMMIT, or a write outside a
 * transaction (autocommit).
 */
function installStatementCounter(dialect: Dialect): StatementCounter {
  const byKind = new Map<string, number>();
  const msByKind = new Map<string, number>();
  let statements = 0;
  let commits = 0;
  let isCounting = false;
  const count = (text: string, isInTransaction: boolean): string | undefined => {
    if (!isCounting || text.startsWith(BENCH_MARK)) return undefined;
    statements += 1;
    const kind = kindOf(text);
    byKind.set(kind, (byKind.get(kind) ?? 0) + 1);
    if (/^\s*commit\b/i.test(text) || (!isInTransaction && WRITE.test(text))) commits += 1;
    return kind;
  };
  /** Adds the time until `answer` settles to `kind` (a promise-returning driver call). */
  const timed = (kind: string | undefined, answer: unknown): unknown => {
    if (kind === undefined || !(answer instanceof Promise)) return answer;
    const startedAt = performance.now();
    const add = () => msByKind.set(kind, (msByKind.get(kind) ?? 0) + performance.now() - startedAt);
    answer.then(add, add);
    return answer;
  };
  const restore: (() => void)[] = [];
  if (dialect === 'postgres') {
    const proto = pg.Client.prototype as unknown as {
      query: (...args: unknown[]) => unknown;
    };
    const original = proto.query;
    const inTransaction = new WeakSet<object>();
    proto.query = function (this: object, ...args: unknown[]) {
      const first = args[0];
      const text = typeof first === 'string' ? first : ((first as { text?: string } | undefined)?.text ?? '');
      if (/^\s*begin\b/i.test(text)) inTransaction.add(this);
      const kind = count(text, inTransaction.has(this));
      if (/^\s*(commit|rollback)\b/i.test(text)) inTransaction.delete(this);
      return timed(kind, original.apply(this, args));
    };
    restore.push(() => {
      proto.query = original;
    });
  } else if (dialect === 'mysql') {
    // mysql2's connections (pooled ones included) inherit `query` (text) and `execute` (prepared) from
    // one class; the dialect's driver sends every statement through one of them.
    const proto = mysql.Connection.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
    const inTransaction = new WeakSet<object>();
    for (const method of ['query', 'execute'] as const) {
      const original = proto[method]!;
      proto[method] = function (this: object, ...args: unknown[]) {
        const first = args[0];
        const text = typeof first === 'string' ? first : ((first as { sql?: string } | undefined)?.sql ?? '');
        if (/^\s*(begin|start transaction)\b/i.test(text)) inTransaction.add(this);
        count(text, inTransaction.has(this));
        if (/^\s*(commit|rollback)\b(?!\s+to)/i.test(text)) inTransaction.delete(this);
        return original.apply(this, args);
      };
      restore.push(() => {
        proto[method] = original;
      });
    }
  } else if (dialect === 'sqlite') {
    const proto = StatementSync.prototype as unknown as Record<string, (...args: unknown[]) => unknown>;
    for (const method of ['run', 'all', 'get'] as const) {
      const original = proto[method]!;
      proto[method] = function (this: StatementSync, ...args: unknown[]) {
        const text = this.sourceSQL;
        if (/^\s*begin\b/i.test(text)) isSqliteInTransaction = true;
        count(text, isSqliteInTransaction);
        if (/^\s*(commit|rollback)\b(?!\s+to)/i.test(text)) isSqliteInTransaction = false;
        return original.apply(this, args);
      };
      restore.push(() => {
        proto[method] = original;
      });
    }
  }
  return {
    start: () => {
      byKind.clear();
      msByKind.clear();
      statements = 0;
      commits = 0;
      isCounting = true;
    },
    read: () => {
      isCounting = false;
      return { byKind: new Map(byKind), msByKind: new Map(msByKind), statements, commits };
    },
    remove: () => {
      for (const undo of restore) undo();
    },
  };
}

// node:sqlite has no public link from a statement to its connection; the database has one connection,
// so its transaction state follows the statements' texts.
let isSqliteInTransaction = false;

async function walSyncs(database: Database): Promise<number> {
  if (database.dialect.name === 'sqlite') return database.walFlushes();
  if (database.dialect.name === 'mysql') {
    // InnoDB's redo log flushes, server-wide.
    const status = await sql<{ Value: string }>`show global status like 'Innodb_os_log_fsyncs'`.execute(
      database.db,
    );
    return Number(status.rows[0]?.Value ?? 0);
  }
  const result = await sql<{ n: string }>`select wal_sync as n from pg_stat_wal`.execute(database.db);
  return Number(result.rows[0]?.n ?? 0);
}

// --- worker processes ------------------------------------------------------------------------------------

/** Starts `count` `npm run worker` processes (5 slots each, the queue's `maximum_active_threads`). */
function spawnWorkers(env: Record<string, string>, count: number): { stop(): Promise<void> } {
  const children: ChildProcess[] = [];
  for (let i = 0; i < count; i += 1) {
    children.push(
      ownChild(
        spawn(
          process.execPath,
          ['--disable-warning=ExperimentalWarning', ...START_NODE_FLAGS, 'src/main/worker.ts'],
          {
            cwd: ROOT_DIR,
            env: { ...process.env, ...env, WORKER_QUEUES: QUEUE, LOG_LEVEL: 'warn' },
            stdio: ['ignore', 'inherit', 'inherit'],
          },
        ),
      ),
    );
  }
  return {
    stop: async () => {
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

function row(
  name: string,
  dialect: Dialect,
  connections: number,
  values: { perSec: number; total: number; seconds: number; statusCounts: Record<string, number> },
): BenchRow {
  return {
    name,
    dialect,
    connections,
    requestsPerSec: values.perSec,
    bytesPerSec: 0,
    p50Ms: 0,
    p99Ms: 0,
    totalRequests: values.total,
    durationSeconds: values.seconds,
    errors: 0,
    timeouts: 0,
    non2xx: 0,
    statusCounts: values.statusCounts,
  };
}

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const { dialect, durationSeconds } = options;
  const patients = Math.round(envNumber('BENCH_DRAIN_PATIENTS', 200));
  const backlog = Math.round(envNumber('BENCH_DRAIN_BACKLOG', 300 * durationSeconds));
  const settleSeconds = envNumber('BENCH_DRAIN_SETTLE_SECONDS', 10);
  const processCounts = (process.env.BENCH_DRAIN_PROCESSES ?? (dialect === 'postgres' ? '1,2' : '1'))
    .split(',')
    .map(Number)
    .filter((n) => Number.isInteger(n) && n > 0);
  const prepared = await prepareDatabase(dialect, {
    setup: async (database) => {
      await ensureBenchAccount(database);
      await insertMatchablePatients(database, patients);
    },
  });
  const config = loadConfig({ ...prepared.env, LOG_LEVEL: 'warn', WORKER_QUEUES: QUEUE });
  const counter = installStatementCounter(dialect);
  const database = await openDatabase(config.database, { poolSize: config.dbPoolSize });
  const rows: BenchRow[] = [];
  const notes: string[] = [
    `${backlog} form_data requests per backlog, ${patients} patients; 3 routines per request`,
  ];
  const verdict = (rate: number) => `target >= ${DRAIN_TARGET}: ${rate >= DRAIN_TARGET ? 'met' : 'MISSED'}`;
  try {
    // 1. The backlog drained by this process's worker, with what it sends to the database.
    {
      const ids = await queueBacklog(database, backlog, patients);
      const first = ids[0]!;
      const last = ids[ids.length - 1]!;
      const worker = createQueueWorker({
        database,
        config,
        catalog: defaultRoutineCatalog,
        workerLabel: 'in-process',
      });
      const walBefore = await walSyncs(database);
      counter.start();
      const cpuBefore = process.cpuUsage();
      const startedAt = performance.now();
      await worker.start();
      const deadline = Date.now() + 600_000;
      while ((await unsettledCount(database, first, last)) > 0) {
        if (Date.now() > deadline) throw new Error('backlog not drained in 600 s');
        await sleep(25);
      }
      const seconds = (performance.now() - startedAt) / 1000;
      const cpu = process.cpuUsage(cpuBefore);
      const counted = counter.read();
      await worker.stop();
      const walAfter = await walSyncs(database);
      const statuses = await statusCounts(database, first, last);
      const rate = backlog / seconds;
      rows.push(
        row('form_data requests/s drained, in-process worker', dialect, 1, {
          perSec: rate,
          total: backlog,
          seconds,
          statusCounts: statuses,
        }),
      );
      const per = (n: number) => (n / backlog).toFixed(2);
      notes.push(
        `in-process worker: ${backlog} requests in ${seconds.toFixed(2)} s, ${rate.toFixed(0)} requests/s (${verdict(rate)}); routines ${JSON.stringify(statuses)}`,
        `in-process worker, per request: ${per(counted.statements)} statements, ${per(counted.commits)} commits, ${per(walAfter - walBefore)} ${dialect === 'mysql' ? 'redo log flushes' : 'WAL flushes'}${dialect === 'sqlite' ? '' : ' (server-wide)'}`,
        `in-process worker, CPU of this process (all threads, the 25 ms progress polls included) per request: ${((cpu.user + cpu.system) / backlog).toFixed(0)} us (user ${(cpu.user / backlog).toFixed(0)}, system ${(cpu.system / backlog).toFixed(0)})`,
        `in-process worker, statements per request by kind: ${[...counted.byKind.entries()]
          .sort((a, b) => b[1] - a[1])
          .slice(0, 30)
          .map(([kind, n]) => `${per(n)} × ${kind}`)
          .join(' | ')}`,
      );
      if (counted.msByKind.size > 0) {
        const waited = [...counted.msByKind.values()].reduce((a, b) => a + b, 0);
        notes.push(
          `in-process worker, ms its connections waited per request (all slots together; lock waits included): ${(waited / backlog).toFixed(2)}, by kind: ${[
            ...counted.msByKind.entries(),
          ]
            .sort((a, b) => b[1] - a[1])
            .slice(0, 12)
            .map(([kind, ms]) => `${(ms / backlog).toFixed(3)} ${kind}`)
            .join(' | ')}`,
        );
      }
    }

    // 2. The same backlog drained by worker processes.
    for (const count of processCounts) {
      const ids = await queueBacklog(database, backlog, patients);
      const first = ids[0]!;
      const last = ids[ids.length - 1]!;
      const workers = spawnWorkers(prepared.env, count);
      try {
        const seconds = await timeDrain(database, first, last, backlog);
        const statuses = await statusCounts(database, first, last);
        const rate = backlog / seconds;
        const label = `${count} worker process${count > 1 ? 'es' : ''}`;
        rows.push(
          row(`form_data requests/s drained, ${label}`, dialect, count, {
            perSec: rate,
            total: backlog,
            seconds,
            statusCounts: statuses,
          }),
        );
        notes.push(
          `${label}: ${rate.toFixed(0)} requests/s (${verdict(rate)}), from the first routine run; routines ${JSON.stringify(statuses)}`,
        );
      } finally {
        await workers.stop();
      }
    }

    // 3. Keep-up: intake at 32 connections into the server with its in-process worker.
    {
      const server = await startServer({ env: { ...prepared.env, WORKER: 'in-process' } });
      try {
        const before = await database.db
          .selectFrom('request')
          .select((eb) => eb.fn.max<number>('id').as('id'))
          .executeTakeFirstOrThrow();
        const first = Number(before.id ?? 0) + 1;
        let sent = 0;
        const load = await runLoad({
          url: `${server.url}/api/v1/request/queue/add?request_type=${REQUEST_TYPE}`,
          method: 'POST',
          headers: { authorization: BENCH_AUTHORIZATION, 'content-type': 'application/json' },
          connections: INTAKE_CONNECTIONS,
          durationSeconds,
          requests: [
            {
              setupRequest: (request: Record<string, unknown>) => ({
                ...request,
                body: bodyOf(1_000_000 + sent++, patients),
              }),
            },
          ],
        });
        const endedAt = Date.now();
        const after = await database.db
          .selectFrom('request')
          .select((eb) => eb.fn.max<number>('id').as('id'))
          .executeTakeFirstOrThrow();
        const last = Number(after.id ?? 0);
        // Every request written in the run, those answered after autocannon stopped counting included.
        const accepted = last - first + 1;
        const atEnd = await unsettledCount(database, first, last);
        let afterSettle: number | undefined;
        let settledInMs: number | undefined;
        for (;;) {
          const left = await unsettledCount(database, first, last);
          const elapsed = Date.now() - endedAt;
          if (afterSettle === undefined && elapsed >= settleSeconds * 1000) afterSettle = left;
          if (left === 0) {
            settledInMs = elapsed;
            afterSettle ??= 0;
            break;
          }
          if (elapsed > SETTLE_LIMIT_MS) break;
          await sleep(100);
        }
        const statuses = await statusCounts(database, first, last);
        const intakeRate = accepted / load.durationSeconds;
        const drainedRate = (accepted - atEnd) / load.durationSeconds;
        rows.push(
          row(
            `queue add (small JSON, form_data), server with in-process worker`,
            dialect,
            INTAKE_CONNECTIONS,
            {
              perSec: load.requestsPerSec,
              total: load.totalRequests,
              seconds: load.durationSeconds,
              statusCounts: load.statusCounts,
            },
          ),
          row(`form_data requests/s settled during intake`, dialect, INTAKE_CONNECTIONS, {
            perSec: drainedRate,
            total: accepted - atEnd,
            seconds: load.durationSeconds,
            statusCounts: statuses,
          }),
        );
        const keptUp = settledInMs !== undefined && settledInMs <= settleSeconds * 1000;
        notes.push(
          `keep-up: intake ${intakeRate.toFixed(0)} accepted/s at ${INTAKE_CONNECTIONS} connections for ${load.durationSeconds.toFixed(1)} s (${accepted} requests), settled during intake ${drainedRate.toFixed(0)}/s; unsettled at intake end ${atEnd}, ${settleSeconds} s later ${afterSettle ?? 'n/a'}, ` +
            (settledInMs === undefined
              ? `still unsettled after ${SETTLE_LIMIT_MS / 1000} s`
              : `all settled ${(settledInMs / 1000).toFixed(1)} s after intake ended`) +
            `; routines ${JSON.stringify(statuses)}; keeps up: ${keptUp ? 'yes' : 'NO'}`,
        );
      } finally {
        await server.stop();
      }
    }
  } finally {
    await database.close();
    counter.remove();
    await prepared.cleanup();
  }
  return { rows, notes };
}
