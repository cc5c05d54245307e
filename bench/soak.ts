/**
 * Soak (issue 7, item 8): the real server, its in-process queue worker ON, driven for a long time at a
 * steady request rate with all four endpoints mixed, on a demo population:
 *
 * - 60% `GET /api/v1/patient/search` (hospital number, surname prefix, `Last, First dd/mm/yyyy` of random
 *   demo patients), 15% `GET /api/v1/attachmentdisplay/view` (a quarter of them conditional: 304),
 *   15% `POST /api/v1/request/queue/add` (JSON, request type `BENCH_SOAK_REQUEST_TYPE`, default `noop`),
 *   10% `POST /api/v1/sign/add` (a valid ~20 KB PNG signature on one of the prepared CVI events).
 * - Open loop at a fixed rate (`BENCH_SOAK_RATE` requests/s, default 200): requests are issued on
 *   schedule whatever the answers, over at most max(--connections) keep-alive sockets, and each latency
 *   runs from the scheduled send to the last byte (no coordinated omission).
 * - Queue lag: every `BENCH_SOAK_LAG_EVERY`-th queue add (default 4) is followed by polls of
 *   `GET /api/v1/request/queue/status` (after 5, 10, 20, 40, 80 ms, then every 100 ms) until it is
 *   COMPLETE; lag = first COMPLETE seen - the add's answer, so an upper bound by the poll spacing.
 * - Errors: any status other than the expected one (200; 304 for conditional views), a sign/add body
 *   other than "Correct signature saved!", a FAILED request, a transport error or a request the
 *   generator had to skip because too many were in flight. They must be zero.
 * - RSS of the server sampled every second: start (mean of the first 10% of the measured samples) and
 *   end (mean of the last 10%). The heap and caches reach their working size in the first minutes, so the
 *   leak flag compares the end with the RSS at a quarter of the run: growth above 16 MB and 10% is flagged.
 * - The V8 heap from the server's `/metrics` (`METRICS=on`), every 2 s: per quarter of the run, the
 *   lowest heap used (close to the live heap just after a full collection) and the mean heap total. A
 *   leak of JS objects raises the lowest heap used; RSS growing while it stays flat is V8 filling the
 *   heap pages it has committed (the young generation grows to 2 x 64 MB under this load) or the
 *   allocator keeping freed memory.
 *
 * Duration: `--duration` when given, else 600 s (the issue's 10 minutes); `npm run bench -- all` uses
 * the common duration. `npm run bench -- soak --dialect postgres` for the real run; validate with
 * `--duration 20`. The population (`BENCH_SOAK_PATIENTS`, default 100000) is built once and kept
 * (`cra_bench_soak_<N>` / `bench/data/soak_<N>.db`); every run adds the CVI events and attachments it
 * needs, and the rows it writes stay (they are what a soak leaves behind).
 */
import http from 'node:http';
import { sql } from 'kysely';
import type { Database } from '../src/db/database.ts';
import { demoHospitalNumber, demoPatientAt, generateDemoPopulation } from '../src/modules/dataset/index.ts';
import { makePng } from '../test/factories-signature.ts';
import type { BenchReport, BenchRow, BenchRunOptions, RunningProcess } from './lib.ts';
import {
  BENCH_AUTHORIZATION,
  ensureBenchAccount,
  prepareDatabase,
  readRssBytes,
  startServer,
} from './lib.ts';

const DEFAULT_SECONDS = 600;
const ESIGN_CLASS = 'OEModule\\OphCoCvi\\models\\Element_OphCoCvi_Esign';
const SIGN_EVENTS = 100;
const VIEW_ATTACHMENTS = 200;
const ATTACHMENT_MNEMONIC = 'SOAK_VIEW';
const SETTLED_DATE = '2020-03-04 05:06:07';
const SETTLED_HTTP_DATE = 'Wed, 04 Mar 2020 05:06:07 GMT';
const CODE_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ23456789';
const LAG_POLL_DELAYS_MS = [5, 5, 10, 20, 40, 20];
const LAG_POLL_INTERVAL_MS = 100;
const LAG_WAIT_AFTER_RUN_MS = 30_000;
const RSS_GROWTH_FLAG = { bytes: 16 * 1024 * 1024, ratio: 0.1 };

type EndpointKey = 'search' | 'view' | 'add' | 'sign' | 'status';
const MIX: readonly (readonly [EndpointKey, number])[] = [
  ['search', 60],
  ['view', 15],
  ['add', 15],
  ['sign', 10],
];
const ROW_NAMES: Record<EndpointKey, string> = {
  search: 'GET patient/search (60%)',
  view: 'GET attachmentdisplay/view (15%)',
  add: 'POST request/queue/add (15%)',
  sign: 'POST sign/add (10%)',
  status: 'GET request/queue/status (lag polls)',
};

function envNumber(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`${name} must be a positive number`);
  return value;
}

/** `--duration` when it was given on the command line (or `all` runs), else the soak's 10 minutes. */
function soakSeconds(options: BenchRunOptions): number {
  const argv = process.argv.slice(2);
  const isGiven = argv.some((a) => a === '--duration' || a.startsWith('--duration=')) || argv.includes('all');
  return isGiven ? options.durationSeconds : DEFAULT_SECONDS;
}

// -------------------------------------------------------------------------------------------------
// Data

interface SignTarget {
  readonly code: string;
  readonly elementId: number;
  readonly elementTypeId: number;
}

interface SoakData {
  signTargets: SignTarget[];
  attachmentIds: number[];
}

/** CVI events with an e-sign element and an active unique code, created up to SIGN_EVENTS. */
async function ensureSignTargets(database: Database): Promise<SignTarget[]> {
  const { db } = database;
  const now = SETTLED_DATE;
  let eventType = await db
    .selectFrom('event_type')
    .select('id')
    .where('class_name', '=', 'OphCoCvi')
    .executeTakeFirst();
  eventType ??= await db
    .insertInto('event_type')
    .values({ name: 'CVI', class_name: 'OphCoCvi', created_date: now, last_modified_date: now })
    .returning('id')
    .executeTakeFirstOrThrow();
  let elementType = await db
    .selectFrom('element_type')
    .select('id')
    .where('class_name', '=', ESIGN_CLASS)
    .where('event_type_id', '=', eventType.id)
    .executeTakeFirst();
  elementType ??= await db
    .insertInto('element_type')
    .values({
      name: 'E-Sign',
      class_name: ESIGN_CLASS,
      event_type_id: eventType.id,
      table_name: 'et_ophcocvi_esign',
      created_date: now,
      last_modified_date: now,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  const find = () =>
    db
      .selectFrom('unique_codes as uc')
      .innerJoin('unique_codes_mapping as m', 'm.unique_code_id', 'uc.id')
      .innerJoin('event as e', 'e.id', 'm.event_id')
      .innerJoin('et_ophcocvi_esign as es', 'es.event_id', 'e.id')
      .select(['uc.code', 'es.id as elementId'])
      .where('uc.active', '=', 1)
      .where('e.deleted', '=', 0)
      .where('e.event_type_id', '=', eventType.id)
      .orderBy('es.id')
      .limit(SIGN_EVENTS)
      .execute();
  let found = await find();
  if (found.length < SIGN_EVENTS) {
    const patients = await db.selectFrom('patient').select('id').orderBy('id').limit(SIGN_EVENTS).execute();
    await db.transaction().execute(async (trx) => {
      for (const patient of patients.slice(0, SIGN_EVENTS - found.length)) {
        const episode = await trx
          .insertInto('episode')
          .values({ patient_id: patient.id, start_date: now, created_date: now, last_modified_date: now })
          .returning('id')
          .executeTakeFirstOrThrow();
        const event = await trx
          .insertInto('event')
          .values({
            episode_id: episode.id,
            event_type_id: eventType.id,
            created_date: now,
            last_modified_date: now,
          })
          .returning('id')
          .executeTakeFirstOrThrow();
        await trx
          .insertInto('et_ophcocvi_esign')
          .values({ event_id: event.id, created_date: now, last_modified_date: now })
          .execute();
        const code = await freeCode(trx);
        const unique = await trx
          .insertInto('unique_codes')
          .values({ code, active: 1, created_date: now, last_modified_date: now })
          .returning('id')
          .executeTakeFirstOrThrow();
        await trx
          .insertInto('unique_codes_mapping')
          .values({
            unique_code_id: unique.id,
            event_id: event.id,
            created_date: now,
            last_modified_date: now,
          })
          .execute();
      }
    });
    found = await find();
  }
  return found.map((row) => ({ code: row.code, elementId: row.elementId, elementTypeId: elementType.id }));
}

async function freeCode(db: Database['db']): Promise<string> {
  for (;;) {
    const code = Array.from(
      { length: 6 },
      () => CODE_ALPHABET[Math.floor(Math.random() * CODE_ALPHABET.length)],
    ).join('');
    const taken = await db
      .selectFrom('unique_codes')
      .select('id')
      .where((eb) => eb(eb.fn('lower', ['code']), '=', code.toLowerCase()))
      .executeTakeFirst();
    if (taken === undefined) return code;
  }
}

/** Settled PNG attachments (a few KB to ~60 KB) to view, created up to VIEW_ATTACHMENTS. */
async function ensureAttachments(database: Database): Promise<number[]> {
  const { db } = database;
  const find = () =>
    db
      .selectFrom('attachment_data')
      .select('id')
      .where('attachment_mnemonic', 'like', `${ATTACHMENT_MNEMONIC}%`)
      .orderBy('id')
      .limit(VIEW_ATTACHMENTS)
      .execute();
  let found = await find();
  for (let i = found.length; i < VIEW_ATTACHMENTS; i += 1) {
    const request = await db
      .insertInto('request')
      .values({
        request_type: 'dicom_request',
        system_message: 'soak attachment',
        created_date: SETTLED_DATE,
        last_modified_date: SETTLED_DATE,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    const side = 20 + (i % 10) * 12;
    await db
      .insertInto('attachment_data')
      .values({
        request_id: request.id,
        attachment_mnemonic: `${ATTACHMENT_MNEMONIC}_${i}`,
        attachment_type: 'NONE',
        mime_type: 'image/png',
        blob_data: makePng(side, side, { isNoisy: true }),
        created_date: SETTLED_DATE,
        last_modified_date: SETTLED_DATE,
      })
      .execute();
  }
  if (found.length < VIEW_ATTACHMENTS) found = await find();
  return found.map((row) => row.id);
}

// -------------------------------------------------------------------------------------------------
// Requests

interface PlannedRequest {
  readonly key: EndpointKey;
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body?: Buffer;
  /** Statuses that are not errors. */
  readonly expected: readonly number[];
  /** Checks the answer body of a 200 (sign/add's text, queue add's id). */
  readonly onAnswer?: (status: number, body: Buffer) => string | undefined;
}

const JSON_HEADERS = { authorization: BENCH_AUTHORIZATION, 'content-type': 'application/json' };
const AUTH_HEADERS = { authorization: BENCH_AUTHORIZATION };

function pick<T>(items: readonly T[]): T {
  return items[Math.floor(Math.random() * items.length)]!;
}

function searchTerm(patients: number): string {
  let k = Math.floor(Math.random() * patients);
  while (demoPatientAt(k).isDeleted) k = (k + 1) % patients;
  const patient = demoPatientAt(k);
  const roll = Math.random();
  if (roll < 0.4) return demoHospitalNumber(k);
  if (roll < 0.8) return patient.lastName.slice(0, 3);
  const [year, month, day] = patient.dob.split('-');
  return `${patient.lastName}, ${patient.firstName} ${day}/${month}/${year}`;
}

// -------------------------------------------------------------------------------------------------
// Statistics

class Stats {
  latencies: number[] = [];
  bytes = 0;
  statusCounts: Record<string, number> = {};
  errors = 0;
  firstError: string | undefined;

  record(ms: number, status: number, bytes: number, error: string | undefined): void {
    this.latencies.push(ms);
    this.bytes += bytes;
    const key = status === 0 ? 'transport' : String(status);
    this.statusCounts[key] = (this.statusCounts[key] ?? 0) + 1;
    if (error !== undefined) {
      this.errors += 1;
      this.firstError ??= error;
    }
  }
}

function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = Float64Array.from(values).sort();
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

interface Sent {
  readonly status: number;
  readonly body: Buffer;
  readonly error?: string;
}

function send(agent: http.Agent, baseUrl: string, planned: PlannedRequest): Promise<Sent> {
  return new Promise((resolve) => {
    const request = http.request(
      `${baseUrl}${planned.path}`,
      {
        agent,
        method: planned.method,
        headers: {
          ...planned.headers,
          ...(planned.body === undefined ? {} : { 'content-length': String(planned.body.length) }),
        },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks) }));
        response.on('error', (error) => resolve({ status: 0, body: Buffer.alloc(0), error: error.message }));
      },
    );
    request.setTimeout(30_000, () => request.destroy(new Error('timeout after 30 s')));
    request.on('error', (error) => resolve({ status: 0, body: Buffer.alloc(0), error: error.message }));
    request.end(planned.body);
  });
}

// -------------------------------------------------------------------------------------------------

export async function run(options: BenchRunOptions): Promise<BenchReport> {
  const seconds = soakSeconds(options);
  const rate = envNumber('BENCH_SOAK_RATE', 200);
  const patients = envNumber('BENCH_SOAK_PATIENTS', 100_000);
  const lagEvery = Math.max(1, Math.round(envNumber('BENCH_SOAK_LAG_EVERY', 4)));
  const requestType = process.env.BENCH_SOAK_REQUEST_TYPE ?? 'noop';
  const sockets = Math.max(...options.connections);
  const maxInFlight = Math.max(sockets * 8, 256);
  const data: SoakData = { signTargets: [], attachmentIds: [] };

  const prepared = await prepareDatabase(options.dialect, {
    persistentName: `soak_${patients}`,
    fill: async (database) => {
      process.stderr.write(`Building ${patients} demo patients on ${options.dialect}...\n`);
      const result = await generateDemoPopulation(database, { patients, institutionCode: 'NEW' });
      process.stderr.write(`  done in ${(result.elapsedMs / 1000).toFixed(0)} s\n`);
      if (options.dialect === 'postgres') await sql`analyze`.execute(database.db);
    },
    setup: async (database) => {
      await ensureBenchAccount(database);
      data.signTargets = await ensureSignTargets(database);
      data.attachmentIds = await ensureAttachments(database);
    },
  });
  if (data.signTargets.length === 0)
    throw new Error('no CVI event to sign (the population has no patients?)');

  const server: RunningProcess = await startServer({
    env: {
      ...prepared.env,
      WORKER: 'in-process',
      INSTITUTION_CODE: 'NEW',
      // One client address sends every sign/add: the per-IP limit would refuse most of them.
      SIGN_RATE_LIMIT_PER_MINUTE: '0',
      // The heap figures (and the request metrics hooks, as in production).
      METRICS: 'on',
      METRICS_TOKEN: '',
    },
  });
  const agent = new http.Agent({ keepAlive: true, maxSockets: sockets });
  const signatureImage = Buffer.from(makePng(100, 68, { isNoisy: true })).toString('base64');
  let queueAdds = 0;

  const plan = (key: EndpointKey): PlannedRequest => {
    switch (key) {
      case 'search':
        return {
          key,
          method: 'GET',
          path: `/api/v1/patient/search?term=${encodeURIComponent(searchTerm(patients))}`,
          headers: AUTH_HEADERS,
          expected: [200],
        };
      case 'view': {
        const isConditional = Math.random() < 0.25;
        return {
          key,
          method: 'GET',
          path: `/api/v1/attachmentdisplay/view?id=${pick(data.attachmentIds)}`,
          headers: isConditional ? { ...AUTH_HEADERS, 'if-modified-since': SETTLED_HTTP_DATE } : AUTH_HEADERS,
          expected: isConditional ? [304] : [200],
        };
      }
      case 'add': {
        queueAdds += 1;
        const isLagSample = queueAdds % lagEvery === 0;
        return {
          key,
          method: 'POST',
          path: `/api/v1/request/queue/add?request_type=${encodeURIComponent(requestType)}`,
          headers: JSON_HEADERS,
          body: Buffer.from(
            JSON.stringify({
              system_message: 'soak',
              data: { n: queueAdds, at: Date.now(), note: 'x'.repeat(200) },
            }),
          ),
          expected: [200],
          onAnswer: (status, body) => {
            if (status !== 200) return undefined;
            const id = (JSON.parse(body.toString()) as { request_id?: unknown }).request_id;
            if (typeof id !== 'number') return `queue add answered ${body.toString().slice(0, 100)}`;
            if (isLagSample) followLag(id);
            return undefined;
          },
        };
      }
      case 'sign': {
        const target = pick(data.signTargets);
        return {
          key,
          method: 'POST',
          path: '/api/v1/sign/add',
          headers: { 'content-type': 'application/json' },
          body: Buffer.from(
            JSON.stringify({
              unique_identifier: target.code,
              extra_info: JSON.stringify({ e_id: target.elementId, e_t_id: target.elementTypeId }),
              image: signatureImage,
            }),
          ),
          expected: [200],
          onAnswer: (status, body) =>
            status === 200 && body.toString() !== '"Correct signature saved!"'
              ? `sign/add answered ${body.toString().slice(0, 100)}`
              : undefined,
        };
      }
      case 'status':
        throw new Error('status requests are lag polls');
    }
  };

  // Measurement state; `isMeasuring` is false during the warm-up.
  let isMeasuring = false;
  const stats = new Map<EndpointKey, Stats>(
    (['search', 'view', 'add', 'sign', 'status'] as const).map((k) => [k, new Stats()]),
  );
  let inFlight = 0;
  let skipped = 0;
  const lags: number[] = [];
  let lagFailed = 0;
  const lagPending = new Set<Promise<void>>();

  const issue = async (planned: PlannedRequest, scheduledAt: number): Promise<Sent> => {
    inFlight += 1;
    const measured = isMeasuring;
    const sent = await send(agent, server.url, planned);
    inFlight -= 1;
    const ms = performance.now() - scheduledAt;
    let error = sent.error;
    if (error === undefined && !planned.expected.includes(sent.status))
      error = `${planned.method} ${planned.path.slice(0, 80)} answered ${sent.status}: ${sent.body.toString().slice(0, 120)}`;
    if (error === undefined) error = planned.onAnswer?.(sent.status, sent.body);
    if (measured) stats.get(planned.key)!.record(ms, sent.status, sent.body.length, error);
    return sent;
  };

  function followLag(requestId: number): void {
    if (!isMeasuring) return;
    const answeredAt = performance.now();
    const follow = (async () => {
      for (let attempt = 0; ; attempt += 1) {
        await new Promise((r) => setTimeout(r, LAG_POLL_DELAYS_MS[attempt] ?? LAG_POLL_INTERVAL_MS));
        const sent = await issue(
          {
            key: 'status',
            method: 'GET',
            path: `/api/v1/request/queue/status?request_id=${requestId}`,
            headers: AUTH_HEADERS,
            expected: [200],
          },
          performance.now(),
        );
        if (sent.status !== 200) return;
        const { status } = JSON.parse(sent.body.toString()) as { status: string };
        if (status === 'COMPLETE') {
          lags.push(performance.now() - answeredAt);
          return;
        }
        if (status === 'FAILED') {
          lagFailed += 1;
          return;
        }
        if (performance.now() - answeredAt > LAG_WAIT_AFTER_RUN_MS + seconds * 1000) return;
      }
    })();
    lagPending.add(follow);
    void follow.finally(() => lagPending.delete(follow));
  }

  // Open-loop schedule: the n-th request is due at start + n / rate.
  const totalWeight = MIX.reduce((sum, [, w]) => sum + w, 0);
  const chooseKey = (): EndpointKey => {
    let roll = Math.random() * totalWeight;
    for (const [key, weight] of MIX) {
      roll -= weight;
      if (roll < 0) return key;
    }
    return 'search';
  };
  const outstanding = new Set<Promise<unknown>>();
  const runPhase = async (phaseSeconds: number): Promise<void> => {
    const startedAt = performance.now();
    let issued = 0;
    while (performance.now() - startedAt < phaseSeconds * 1000) {
      const due = Math.floor(((performance.now() - startedAt) / 1000) * rate);
      for (; issued < due; issued += 1) {
        const scheduledAt = startedAt + (issued / rate) * 1000;
        if (inFlight >= maxInFlight) {
          if (isMeasuring) skipped += 1;
          continue;
        }
        const promise = issue(plan(chooseKey()), scheduledAt);
        outstanding.add(promise);
        void promise.finally(() => outstanding.delete(promise));
      }
      await new Promise((r) => setTimeout(r, 2));
    }
  };

  const rssSamples: number[] = [];
  let rssTimer: NodeJS.Timeout | undefined;
  const heapSamples: { used: number; total: number }[] = [];
  let heapTimer: NodeJS.Timeout | undefined;
  let measuredSeconds = 0;
  try {
    process.stderr.write(
      `soak: ${rate} req/s for ${seconds} s on ${options.dialect} (${data.signTargets.length} CVI events, ${data.attachmentIds.length} attachments, ${patients} patients, queue type ${requestType})\n`,
    );
    await runPhase(options.warmupSeconds);
    await Promise.all(outstanding);
    isMeasuring = true;
    rssSamples.push(await server.rssBytes());
    rssTimer = setInterval(() => void server.rssBytes().then((rss) => rssSamples.push(rss)), 1000);
    heapTimer = setInterval(
      () => void readHeap(agent, server.url).then((h) => h && heapSamples.push(h)),
      2000,
    );
    const measureStart = performance.now();
    let lastReport = measureStart;
    const progress = setInterval(() => {
      const now = performance.now();
      if (now - lastReport < 60_000) return;
      lastReport = now;
      const errors = [...stats.values()].reduce((sum, s) => sum + s.errors, 0);
      process.stderr.write(
        `  ${((now - measureStart) / 1000).toFixed(0)} s: RSS ${((rssSamples.at(-1) ?? 0) / 1048576).toFixed(0)} MB, errors ${errors}, skipped ${skipped}, queue lag samples ${lags.length}\n`,
      );
    }, 5000);
    await runPhase(seconds);
    measuredSeconds = (performance.now() - measureStart) / 1000;
    clearInterval(progress);
    await Promise.all(outstanding);
    clearInterval(rssTimer);
    rssTimer = undefined;
    clearInterval(heapTimer);
    rssSamples.push(await readRssBytes(server.pid));
    const lagDeadline = Date.now() + LAG_WAIT_AFTER_RUN_MS;
    while (lagPending.size > 0 && Date.now() < lagDeadline)
      await Promise.race([...lagPending, new Promise((r) => setTimeout(r, 500))]);
  } finally {
    if (rssTimer !== undefined) clearInterval(rssTimer);
    clearInterval(heapTimer);
    agent.destroy();
    await server.stop();
    await prepared.cleanup();
  }
  const lagIncomplete = lagPending.size;

  // Rows: one per endpoint, and the whole mix.
  const rows: BenchRow[] = [];
  const all = new Stats();
  for (const [key, s] of stats) {
    if (s.latencies.length === 0) continue;
    rows.push(rowOf(ROW_NAMES[key], options.dialect, sockets, s, measuredSeconds));
    all.latencies = all.latencies.concat(s.latencies);
    all.bytes += s.bytes;
    all.errors += s.errors;
    all.firstError ??= s.firstError;
    for (const [code, count] of Object.entries(s.statusCounts))
      all.statusCounts[code] = (all.statusCounts[code] ?? 0) + count;
  }
  const tenth = Math.max(1, Math.floor(rssSamples.length / 10));
  const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / Math.max(1, values.length);
  const rssStart = mean(rssSamples.slice(0, tenth));
  const rssEnd = mean(rssSamples.slice(-tenth));
  // The heap and caches grow to their working size during the first minutes; a leak keeps growing after.
  const quarter = Math.floor(rssSamples.length / 4);
  const rssSettled = mean(rssSamples.slice(quarter, quarter + tenth));
  const rssPeak = Math.max(...rssSamples);
  rows.push({
    ...rowOf('all (mixed, fixed rate)', options.dialect, sockets, all, measuredSeconds),
    rssPeakBytes: rssPeak,
    rssAfterBytes: rssSamples.at(-1) ?? 0,
  });

  const errors = all.errors + skipped + lagFailed;
  const growth = rssEnd - rssStart;
  const lateGrowth = rssEnd - rssSettled;
  const isGrowthFlagged =
    lateGrowth > RSS_GROWTH_FLAG.bytes && lateGrowth > rssSettled * RSS_GROWTH_FLAG.ratio;
  const mb = (b: number) => (b / 1048576).toFixed(1);
  // Quarters of the run: long enough that each holds a full collection, after which heap used is the live heap.
  const heapQuarters = [0, 1, 2, 3]
    .map((q) =>
      heapSamples.slice(
        Math.floor((q * heapSamples.length) / 4),
        Math.floor(((q + 1) * heapSamples.length) / 4),
      ),
    )
    .filter((w) => w.length > 0);
  const heapUsedLow = heapQuarters.map((w) => mb(Math.min(...w.map((h) => h.used))));
  const heapTotalMean = heapQuarters.map((w) => mb(mean(w.map((h) => h.total))));
  const notes = [
    `${measuredSeconds.toFixed(0)} s at a fixed ${rate} req/s asked (${(all.latencies.length / measuredSeconds).toFixed(1)} req/s answered, lag polls included), ${sockets} keep-alive sockets, worker in-process, ${patients} patients`,
    `errors: ${errors} (unexpected answers ${all.errors}, skipped because ${maxInFlight} were in flight ${skipped}, FAILED requests ${lagFailed})${errors === 0 ? ' - target 0 met' : ` - TARGET 0 MISSED; first: ${all.firstError ?? '-'}`}`,
    `RSS start ${mb(rssStart)} MB, end ${mb(rssEnd)} MB (means of the first and last 10% of ${rssSamples.length} one-second samples; growth ${mb(growth)} MB, warm-up included), peak ${mb(rssPeak)} MB; from a quarter of the run (${mb(rssSettled)} MB, warmed up) to the end ${mb(lateGrowth)} MB${isGrowthFlagged ? ' - FLAGGED: still growing, above 16 MB and 10%' : ' (within noise)'}`,
    heapSamples.length === 0
      ? 'V8 heap: no /metrics sample'
      : `V8 heap used, lowest sample of each quarter of the run: ${heapUsedLow.join(' / ')} MB (~ the live heap after a full collection: flat means no JS leak, RSS growing beside it is V8 or the allocator keeping pages); heap total, mean of each quarter: ${heapTotalMean.join(' / ')} MB (${heapSamples.length} samples of /metrics, every 2 s)`,
    `queue lag (queue add answered -> status COMPLETE, request type ${requestType}, every ${lagEvery}th add): p50 ${percentile(lags, 50).toFixed(1)} ms, p99 ${percentile(lags, 99).toFixed(1)} ms, max ${percentile(lags, 100).toFixed(1)} ms over ${lags.length} samples${lagIncomplete > 0 ? `, ${lagIncomplete} not COMPLETE within ${LAG_WAIT_AFTER_RUN_MS / 1000} s after the run` : ''}; polls at 5, 10, 20, 40, 80 ms then every 100 ms, so an upper bound`,
  ];
  return { rows, notes };
}

/** Heap used and total from the server's `/metrics` (undefined when it cannot be read). */
function readHeap(agent: http.Agent, baseUrl: string): Promise<{ used: number; total: number } | undefined> {
  const planned: PlannedRequest = {
    key: 'status',
    method: 'GET',
    path: '/metrics',
    headers: {},
    expected: [200],
  };
  return send(agent, baseUrl, planned).then(({ status, body }) => {
    if (status !== 200) return undefined;
    const text = body.toString();
    const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? Number.NaN);
    const used = value('nodejs_heap_used_bytes');
    const total = value('nodejs_heap_total_bytes');
    return Number.isFinite(used) && Number.isFinite(total) ? { used, total } : undefined;
  });
}

function rowOf(
  name: string,
  dialect: BenchRow['dialect'],
  connections: number,
  s: Stats,
  seconds: number,
): BenchRow {
  return {
    name,
    dialect,
    connections,
    requestsPerSec: s.latencies.length / seconds,
    bytesPerSec: s.bytes / seconds,
    p50Ms: percentile(s.latencies, 50),
    p99Ms: percentile(s.latencies, 99),
    totalRequests: s.latencies.length,
    durationSeconds: seconds,
    errors: s.errors,
    timeouts: 0,
    non2xx: s.errors,
    statusCounts: s.statusCounts,
  };
}
