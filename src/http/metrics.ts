/**
 * Prometheus metrics at `GET /metrics` (issue 7 item 5), text exposition format 0.0.4, without a client
 * library: the few series the operations team watches.
 *
 * - Request counts and latency per route PATTERN and method (never the raw URL: a query string may hold
 *   a search term, which is patient data). Unmatched URLs count as `route="unmatched"`. The label text
 *   of every route is built once, when the route is registered; a request costs one map lookup by
 *   method, one by status and a short bucket walk, in a callback-style `onResponse` hook of its route.
 * - At scrape time: queue depth per queue and routine status (one grouped query over the
 *   `request_routine_queue_status` index), routine outcomes from the `request_queue` counters, PostgreSQL
 *   pool use, heavy-request gate, process memory, event-loop delay and start time.
 *
 * `METRICS=off` (default) registers nothing, so the hot path pays nothing. `on` is open unless
 * `METRICS_TOKEN` is set, which then requires `Authorization: Bearer <token>`; `basic` requires Basic
 * credentials of a user holding `OprnApi` (the one guard), or the bearer token when one is set.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type {
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  RouteOptions,
  onResponseHookHandler,
} from 'fastify';
import { sql } from 'kysely';
import type { AppDeps } from '../deps.ts';
import { AppError, DEFAULT_MESSAGES } from '../errors.ts';
import { dicomReceiveFamilies } from '../modules/dicom-receive/index.ts';
import type { BasicAuthGuard } from './basic-auth.ts';
import { presentsCredentialsInsecurely } from './transport-security.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** `false` keeps the route out of the request metrics (`/metrics` itself). */
    metrics?: boolean;
  }
}

export const METRICS_URL = '/metrics';
export const EXPOSITION_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** Upper bounds of the latency histogram, in seconds. */
export const DURATION_BUCKETS_SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10] as const;

/** Sampling interval of the event-loop delay monitor, in ms. */
const LOOP_RESOLUTION_MS = 20;

/** Methods given their own label; anything else (a fuzzer's invention) counts as `OTHER`. */
const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS']);

/** Counts and latency of one method of one route pattern. */
interface MethodSeries {
  /** `method="GET",route="/x"`, built once. */
  readonly labels: string;
  readonly countByStatus: Map<number, number>;
  readonly bucketCounts: Float64Array;
  sumSeconds: number;
  count: number;
}

/** Every method seen on one route pattern. */
export interface RouteSeries {
  readonly route: string;
  readonly byMethod: Map<string, MethodSeries>;
}

/** The in-memory request metrics of one app. */
export interface RequestMetrics {
  seriesOf(route: string): RouteSeries;
  observe(series: RouteSeries, method: string, status: number, seconds: number): void;
  /** The request series in exposition text. */
  render(out: string[]): void;
}

/** Escapes a label value (exposition format: backslash, double quote, newline). */
export function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}

export function createRequestMetrics(): RequestMetrics {
  const routes = new Map<string, RouteSeries>();

  const methodSeries = (route: RouteSeries, method: string): MethodSeries => {
    const key = KNOWN_METHODS.has(method) ? method : 'OTHER';
    let series = route.byMethod.get(key);
    if (series === undefined) {
      series = {
        labels: `method="${key}",route="${escapeLabelValue(route.route)}"`,
        countByStatus: new Map(),
        bucketCounts: new Float64Array(DURATION_BUCKETS_SECONDS.length),
        sumSeconds: 0,
        count: 0,
      };
      route.byMethod.set(key, series);
      // Unknown methods are folded before lookup next time too.
      if (key !== method) route.byMethod.set(method, series);
    }
    return series;
  };

  return {
    seriesOf(route) {
      let series = routes.get(route);
      if (series === undefined) {
        series = { route, byMethod: new Map() };
        routes.set(route, series);
      }
      return series;
    },
    observe(route, method, status, seconds) {
      const series = route.byMethod.get(method) ?? methodSeries(route, method);
      series.countByStatus.set(status, (series.countByStatus.get(status) ?? 0) + 1);
      series.count += 1;
      series.sumSeconds += seconds;
      const buckets = series.bucketCounts;
      for (let i = 0; i < buckets.length; i += 1) {
        if (seconds <= DURATION_BUCKETS_SECONDS[i]!) {
          buckets[i]! += 1;
          break;
        }
      }
    },
    render(out) {
      const all: MethodSeries[] = [];
      for (const route of routes.values()) for (const s of new Set(route.byMethod.values())) all.push(s);
      out.push('# HELP http_requests_total HTTP requests answered, by method, route pattern and status.');
      out.push('# TYPE http_requests_total counter');
      for (const s of all)
        for (const [status, count] of s.countByStatus)
          out.push(`http_requests_total{${s.labels},status="${status}"} ${count}`);
      out.push('# HELP http_request_duration_seconds Time to answer an HTTP request, by method and route.');
      out.push('# TYPE http_request_duration_seconds histogram');
      for (const s of all) {
        if (s.count === 0) continue;
        let cumulative = 0;
        DURATION_BUCKETS_SECONDS.forEach((bound, i) => {
          cumulative += s.bucketCounts[i]!;
          out.push(`http_request_duration_seconds_bucket{${s.labels},le="${bound}"} ${cumulative}`);
        });
        out.push(`http_request_duration_seconds_bucket{${s.labels},le="+Inf"} ${s.count}`);
        out.push(`http_request_duration_seconds_sum{${s.labels}} ${s.sumSeconds}`);
        out.push(`http_request_duration_seconds_count{${s.labels}} ${s.count}`);
      }
    },
  };
}

/** One gauge or counter family: HELP, TYPE and its samples. */
function family(
  out: string[],
  name: string,
  type: 'gauge' | 'counter',
  help: string,
  samples: readonly (readonly [labels: string, value: number])[],
): void {
  out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
  for (const [labels, value] of samples) out.push(`${name}${labels === '' ? '' : `{${labels}}`} ${value}`);
}

interface QueueSnapshot {
  readonly routines: readonly { queue: string; status: string; count: number }[];
  readonly queues: readonly { queue: string; executed: number; succeeded: number; failed: number }[];
}

async function readQueueSnapshot(deps: AppDeps): Promise<QueueSnapshot> {
  const db = deps.database.db;
  const [routines, queues] = await Promise.all([
    db
      .selectFrom('request_routine')
      .select(['execute_request_queue as queue', 'status', sql<number>`count(*)`.as('count')])
      .groupBy(['execute_request_queue', 'status'])
      .execute(),
    db
      .selectFrom('request_queue')
      .select([
        'request_queue as queue',
        'total_execute_count as executed',
        'total_success_count as succeeded',
        'total_fail_count as failed',
      ])
      .execute(),
  ]);
  return {
    routines: routines.map((r) => ({ queue: r.queue, status: r.status, count: Number(r.count) })),
    queues: queues.map((q) => ({
      queue: q.queue,
      executed: Number(q.executed),
      succeeded: Number(q.succeeded),
      failed: Number(q.failed),
    })),
  };
}

/** Renders the whole exposition text. */
async function renderMetrics(
  app: FastifyInstance,
  deps: AppDeps,
  requests: RequestMetrics,
  loopDelay: ReturnType<typeof monitorEventLoopDelay>,
  startTimeSeconds: number,
): Promise<string> {
  const out: string[] = [];
  requests.render(out);

  let snapshot: QueueSnapshot | undefined;
  try {
    snapshot = await readQueueSnapshot(deps);
  } catch (error) {
    app.log.warn({ errorClass: (error as Error).constructor.name }, 'metrics: queue query failed');
  }
  family(out, 'metrics_database_query_ok', 'gauge', 'Whether the queue queries of this scrape succeeded.', [
    ['', snapshot === undefined ? 0 : 1],
  ]);
  if (snapshot !== undefined) {
    const q = (name: string) => `queue="${escapeLabelValue(name)}"`;
    family(
      out,
      'request_queue_routines',
      'gauge',
      'Routines in request_routine, by queue and status.',
      snapshot.routines.map((r) => [`${q(r.queue)},status="${escapeLabelValue(r.status)}"`, r.count]),
    );
    family(
      out,
      'request_queue_routines_executed_total',
      'counter',
      'Routine executions, from request_queue.total_execute_count.',
      snapshot.queues.map((r) => [q(r.queue), r.executed]),
    );
    family(
      out,
      'request_queue_routines_succeeded_total',
      'counter',
      'Successful routine executions, from request_queue.total_success_count.',
      snapshot.queues.map((r) => [q(r.queue), r.succeeded]),
    );
    family(
      out,
      'request_queue_routines_failed_total',
      'counter',
      'Failed routine executions, from request_queue.total_fail_count.',
      snapshot.queues.map((r) => [q(r.queue), r.failed]),
    );
  }

  const pool = deps.database.dialect.poolStats();
  if (pool !== undefined) {
    family(out, 'db_pool_connections', 'gauge', 'Database pool connections, by state.', [
      ['state="total"', pool.total],
      ['state="idle"', pool.idle],
      ['state="in_use"', pool.total - pool.idle],
    ]);
    family(out, 'db_pool_waiting_clients', 'gauge', 'Queries waiting for a pool connection.', [
      ['', pool.waiting],
    ]);
  }
  const gate = app.heavyGate;
  if (gate !== undefined) {
    family(out, 'heavy_requests_active', 'gauge', 'Heavy requests holding a slot.', [['', gate.active]]);
    family(out, 'heavy_requests_waiting', 'gauge', 'Heavy requests waiting for a slot.', [
      ['', gate.waiting],
    ]);
  }

  // DICOM receiving (STOW-RS, C-STORE): counters kept by the module, rendered as they are.
  for (const f of dicomReceiveFamilies())
    family(
      out,
      f.name,
      f.type,
      f.help,
      f.samples.map(([labels, value]) => [
        Object.entries(labels)
          .map(([name, text]) => `${name}="${escapeLabelValue(text)}"`)
          .join(','),
        value,
      ]),
    );

  const memory = process.memoryUsage();
  family(out, 'process_resident_memory_bytes', 'gauge', 'Resident set size.', [['', memory.rss]]);
  family(out, 'nodejs_heap_used_bytes', 'gauge', 'V8 heap used.', [['', memory.heapUsed]]);
  family(out, 'nodejs_heap_total_bytes', 'gauge', 'V8 heap allocated.', [['', memory.heapTotal]]);
  family(out, 'nodejs_external_memory_bytes', 'gauge', 'Memory of C++ objects bound to JS (Buffers).', [
    ['', memory.external],
  ]);
  // The delay histogram is in nanoseconds and counts the sampling interval itself, which is taken off.
  // It is reset at every scrape so each value covers one interval.
  const delay = (ns: number) => (loopDelay.count > 0 ? Math.max(0, ns - LOOP_RESOLUTION_MS * 1e6) / 1e9 : 0);
  family(
    out,
    'nodejs_eventloop_delay_seconds',
    'gauge',
    'Event-loop delay since the previous scrape (p50, p99, max).',
    [
      ['quantile="0.5"', delay(loopDelay.percentile(50))],
      ['quantile="0.99"', delay(loopDelay.percentile(99))],
      ['quantile="1"', delay(loopDelay.max)],
    ],
  );
  loopDelay.reset();
  family(out, 'process_start_time_seconds', 'gauge', 'Start time of the process, Unix seconds.', [
    ['', startTimeSeconds],
  ]);
  out.push('');
  return out.join('\n');
}

function digest(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}

/** True when `header` is `Bearer <token>` with the configured token (constant-time on the digests). */
export function hasBearerToken(header: string | undefined, tokenDigest: Buffer): boolean {
  if (header === undefined) return false;
  const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  if (match === null) return false;
  return timingSafeEqual(digest(match[1]!), tokenDigest);
}

function unauthorizedBearer(): AppError {
  return new AppError('unauthorized', DEFAULT_MESSAGES.unauthorized, {
    headers: { 'www-authenticate': 'Bearer realm="metrics"' },
  });
}

/**
 * Installs the request hooks and the `/metrics` route on the root `app` (before any other route is
 * registered, so that the `onRoute` hook sees them all). Does nothing when `METRICS=off`.
 */
export function installMetrics(app: FastifyInstance, deps: AppDeps, basicAuth: BasicAuthGuard): void {
  const { metrics: mode, metricsToken } = deps.config;
  if (mode === 'off') return;
  const requests = createRequestMetrics();
  const unmatched = requests.seriesOf('unmatched');
  const startTimeSeconds = Math.round(performance.timeOrigin / 1000);
  const loopDelay = monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS });
  loopDelay.enable();
  app.addHook('onClose', (_instance, done) => {
    loopDelay.disable();
    done();
  });

  // Each route gets its own onResponse hook holding its series: no lookup and no allocation per request
  // (`request.routeOptions` builds a new object on every read). Routes registered before this call are
  // not counted, hence installing it before any route. Unmatched URLs are counted by the root hook, whose
  // `is404` test is one property read.
  app.addHook('onRoute', (route: RouteOptions) => {
    if (route.config?.metrics === false) return;
    const series = requests.seriesOf(route.url);
    const observe: onResponseHookHandler = function observeRequest(request, reply, done) {
      requests.observe(series, request.method, reply.statusCode, reply.elapsedTime / 1000);
      done();
    };
    const existing = route.onResponse;
    route.onResponse =
      existing === undefined ? [observe] : [...(Array.isArray(existing) ? existing : [existing]), observe];
  });
  app.addHook('onResponse', (request: FastifyRequest, reply: FastifyReply, done: () => void) => {
    if (request.is404)
      requests.observe(unmatched, request.method, reply.statusCode, reply.elapsedTime / 1000);
    done();
  });

  const tokenDigest = metricsToken === undefined ? undefined : digest(metricsToken);
  const guard = mode === 'basic' ? basicAuth({ operation: 'OprnApi' }) : undefined;
  const authorize = async function metricsGuard(request: FastifyRequest, reply: FastifyReply) {
    if (presentsCredentialsInsecurely(deps.config, request)) throw unauthorizedBearer();
    if (tokenDigest !== undefined && hasBearerToken(request.headers.authorization, tokenDigest)) return;
    if (guard !== undefined) {
      return new Promise<void>((resolve, reject) =>
        guard.call(app, request, reply, (error?: Error) => (error === undefined ? resolve() : reject(error))),
      );
    }
    if (tokenDigest !== undefined) throw unauthorizedBearer();
  };

  app.route({
    method: 'GET',
    url: METRICS_URL,
    config: {
      metrics: false,
      openapiSecurity: [
        ...(mode === 'basic' ? (['basic'] as const) : []),
        ...(tokenDigest === undefined ? [] : (['bearer'] as const)),
      ],
    },
    onRequest: authorize,
    handler: async (_request, reply) => {
      const text = await renderMetrics(app, deps, requests, loopDelay, startTimeSeconds);
      return reply.code(200).header('content-type', EXPOSITION_CONTENT_TYPE).send(text);
    },
  });
}
