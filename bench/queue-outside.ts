/**
 * Queue add and drain as an outside client measures them (issue 38's method): the load generator in a
 * Node process of its own (`bench/load.child.ts`, autocannon), the server as `npm start` runs it (its
 * Node flags and environment, `LOG_LEVEL` at its default `info`, `WORKER=in-process`), a database made
 * by `npm run cli -- demo-data --patients N` (`BENCH_OUTSIDE_PATIENTS`, default 200,000) plus 50 known
 * patients (`insertMatchablePatients`), and a bare `node:http` floor answering the same bytes in the
 * same run. The requests are what a form-filling system sends: `request_type=form_data`, a JSON body
 * with `hos_num`, `dob` and `gender` of a known patient (in turn) and two form fields, each body unique,
 * so that every request is matched to its patient and filed (PATIENT_MATCH -> ATTACH_TO_EVENT ->
 * CLEAN_UP).
 *
 * One warm-up of `--warmup` seconds (then wait until it is filed), one measured run of `--duration`
 * seconds at 32 connections (or the first of `--connections` above 1): intake req/s, p50 and p99 as the
 * client sees them (every status), then the time from the end of intake until every request accepted in
 * the run is settled (no routine NEW or RETRY) and the drain rate, accepted / (intake seconds + settle
 * seconds). Targets: intake >= 500/s with p99 <= 100 ms; drain >= 500/s on SQLite, 400/s on PostgreSQL and
 * MariaDB; settled <= 5 s after intake. The database is kept between runs (`BENCH_REBUILD=1` rebuilds).
 * `npm run bench -- queue-outside --dialect all --duration 8`.
 */
import { spawn } from 'node:child_process';
import { sql } from 'kysely';
import { loadConfig } from '../src/config.ts';
import type { Database } from '../src/db/database.ts';
import { openDatabase } from '../src/db/database.ts';
import type { BenchReport, BenchRow, BenchRunOptions, ChildLoadSpec, Dialect, LoadResult } from './lib.ts';
import {
  BENCH_AUTHORIZATION,
  ROOT_DIR,
  START_NODE_FLAGS,
  captureResponse,
  ensureBenchAccount,
  insertMatchablePatients,
  ownChild,
  prepareDatabase,
  runLoadInChild,
  startFloor,
  startServer,
} from './lib.ts';

const KNOWN_PATIENTS = 50;
const SETTLE_LIMIT_MS = 180_000;
const PATH = '/api/v1/request/queue/add?request_type=form_data';
/**
 * 161 bytes for a six-digit `{i}`: the known patient's hospital number (`{p}`), date of birth and sex, two
 * form fields (one unique per request, so that no two bodies are alike).
 */
const BODY_TEMPLATE =
  '{"data":{"hos_num":"{p}","dob":"1980-01-02","gender":"F","va_right":"6/9 unaided",' +
  '"clinic_note":"Seen in the glaucoma clinic, reading {i}, no change"}}';

function envNumber(name: string, fallback: number): number {
  const value = Number(process.env[name]);
  return Number.isFinite(value) && value > 0 ? value : fallback;
}

/** Runs `npm run cli -- demo-data --patients N` against the database (the CLI of this checkout). */
async function runDemoDataCli(env: Record<string, string>, patients: number): Promise<void> {
  const flags = START_NODE_FLAGS.filter((f) => f.startsWith('--max-semi-space-size'));
  const child = ownChild(
    spawn(
      process.execPath,
      [
        '--disable-warning=ExperimentalWarning',
        ...flags,
        'src/main/cli.ts',
        'demo-data',
        '--patients',
        String(patients),
      ],
      {
        cwd: ROOT_DIR,
        env: { ...process.env, ...env, LOG_LEVEL: 'warn' },
        stdio: ['ignore', 'inherit', 'ignore'],
      },
    ),
  );
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`demo-data exited with ${code}`);
}

async function maxRequestId(database: Database): Promise<number> {
  const row = await database.db
    .selectFrom('request')
    .select((eb) => eb.fn.max<number>('id').as('id'))
    .executeTakeFirstOrThrow();
  return Number(row.id ?? 0);
}

async function unsettledCount(database: Database, first: number, last: number): Promise<number> {
  const result = await sql<{ n: number | string }>`select count(distinct request_id) as n
    from request_routine where request_id >= ${first} and request_id <= ${last}
    and status in ('NEW', 'RETRY')`.execute(database.db);
  return Number(result.rows[0]?.n ?? 0);
}

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

/** Milliseconds until no request of [first, last] is unsettled, polled every 100 ms; undefined past the limit. */
async function waitSettled(database: Database, first: number, last: number): Promise<number | undefined> {
  const started = Date.now();
  for (;;) {
    if ((await unsettledCount(database, first, last)) === 0) return Date.now() - started;
    if (Date.now() - started > SETTLE_LIMIT_MS) return undefined;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function loadRow(name: string, dialect: Dialect, connections: number, load: LoadResult): BenchRow {
  return { name, dialect, connections, ...load };
}

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const { dialect, durationSeconds, warmupSeconds } = options;
  const connections = options.connections.find((c) => c > 1) ?? 32;
  const patients = Math.round(envNumber('BENCH_OUTSIDE_PATIENTS', 200_000));
  const prepared = await prepareDatabase(dialect, {
    persistentName: `queue_outside_${patients}`,
    fill: async (database, context) => {
      await runDemoDataCli({ DATABASE_URL: context.url, FILES_DIR: context.filesDir }, patients);
      await insertMatchablePatients(database, KNOWN_PATIENTS);
    },
    setup: ensureBenchAccount,
  });
  const config = loadConfig({ ...prepared.env, LOG_LEVEL: 'warn' });
  const database = await openDatabase(config.database, { poolSize: 2 });
  // `BENCH_OUTSIDE_ENTRY`: another checkout's server entry (e.g. the commit before a change), same database.
  const entry = process.env.BENCH_OUTSIDE_ENTRY;
  const server = await startServer({
    env: { ...prepared.env, WORKER: 'in-process', LOG_LEVEL: process.env.BENCH_OUTSIDE_LOG_LEVEL ?? 'info' },
    stdout: 'ignore',
    ...(entry === undefined || entry === '' ? {} : { entry }),
  });
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  try {
    const headers = { authorization: BENCH_AUTHORIZATION, 'content-type': 'application/json' };
    const sample = BODY_TEMPLATE.replaceAll('{i}', '100000').replaceAll('{p}', '0000001');
    const floor = await startFloor(
      await captureResponse(`${server.url}${PATH}`, { method: 'POST', headers, body: sample }),
    );
    try {
      const spec = (url: string, seconds: number, bodyStart: number): ChildLoadSpec => ({
        url,
        method: 'POST',
        headers,
        connections,
        durationSeconds: seconds,
        bodyTemplate: BODY_TEMPLATE,
        bodyStart,
        bodyPatients: KNOWN_PATIENTS,
      });
      // The floor first, so that its figure is not taken while the worker still files the warm-up.
      const floorLoad = await runLoadInChild({
        ...spec(floor.url, durationSeconds, 100_000),
        samplePid: floor.pid,
      });
      rows.push(loadRow('floor: node:http, same answer bytes', dialect, connections, floorLoad));

      if (warmupSeconds > 0) {
        const first = (await maxRequestId(database)) + 1;
        await runLoadInChild(spec(`${server.url}${PATH}`, warmupSeconds, 200_000));
        await waitSettled(database, first, await maxRequestId(database));
      }

      const first = (await maxRequestId(database)) + 1;
      const load = await runLoadInChild({
        ...spec(`${server.url}${PATH}`, durationSeconds, 300_000),
        samplePid: server.pid,
      });
      const last = await maxRequestId(database);
      const accepted = last - first + 1;
      const atEnd = await unsettledCount(database, first, last);
      const settledMs = await waitSettled(database, first, last);
      const statuses = await statusCounts(database, first, last);
      rows.push(loadRow('queue add form_data, server with in-process worker', dialect, connections, load));
      const drainSeconds = load.durationSeconds + (settledMs ?? SETTLE_LIMIT_MS) / 1000;
      const drainRate = accepted / drainSeconds;
      rows.push({
        ...loadRow(
          'form_data requests settled per s (accepted / until all settled)',
          dialect,
          connections,
          load,
        ),
        requestsPerSec: drainRate,
        bytesPerSec: 0,
        p50Ms: 0,
        p99Ms: 0,
        totalRequests: accepted,
        durationSeconds: drainSeconds,
        statusCounts: statuses,
      });
      const drainTarget = dialect === 'sqlite' ? 500 : 400;
      const isMet = (ok: boolean) => (ok ? 'met' : 'MISSED');
      notes.push(
        `server ${entry ?? 'src/main/server.ts'}; database: demo-data --patients ${patients} + ${KNOWN_PATIENTS} known patients; body ${Buffer.byteLength(sample)} bytes; load generator in its own process; server LOG_LEVEL=${process.env.BENCH_OUTSIDE_LOG_LEVEL ?? 'info'}, QUEUE_INTAKE_PACE_MS=${process.env.QUEUE_INTAKE_PACE_MS ?? 'default'}`,
        `intake ${load.requestsPerSec.toFixed(0)}/s p50 ${load.p50Ms.toFixed(1)} ms p99 ${load.p99Ms.toFixed(1)} ms (target >= 500/s, p99 <= 100 ms: ${isMet(load.requestsPerSec >= 500 && load.p99Ms <= 100)}); vs floor ${(load.requestsPerSec / floorLoad.requestsPerSec).toFixed(2)}x`,
        `drain: ${accepted} accepted, ${atEnd} unsettled at intake end, ` +
          (settledMs === undefined
            ? `NOT settled ${SETTLE_LIMIT_MS / 1000} s after intake`
            : `all settled ${(settledMs / 1000).toFixed(1)} s after intake`) +
          `; ${drainRate.toFixed(0)}/s (target >= ${drainTarget}/s, settled <= 5 s: ${isMet(drainRate >= drainTarget && settledMs !== undefined && settledMs <= 5000)}); routines ${JSON.stringify(statuses)}`,
      );
    } finally {
      await floor.stop();
    }
  } finally {
    await server.stop();
    await database.close();
    await prepared.cleanup();
  }
  return { rows, notes };
}
