/**
 * Prometheus metrics at `GET /metrics` (prom-client, text exposition format 0.0.4): the few series the
 * operations team watches, on a registry of this app's own.
 *
 * - Request counts and latency per route PATTERN and method (never the raw URL: a query string may hold
 *   a search term, which is patient data). Unmatched URLs count as `route="unmatched"`. The label sets
 *   of every route are built once, when the route is registered or first answers a method or status; a
 *   request costs a lookup by method and one by status, in a callback-style `onResponse` hook of its
 *   route.
 * - At scrape time, by collectors: the families of the modules handed in (the queue's, read from the
 *   database), PostgreSQL pool use, heavy-request gate, process memory, event-loop delay and start time.
 *
 * `METRICS=off` (default) registers nothing and does not load prom-client, so neither the start nor the
 * hot path pays for it. `on` is open unless `METRICS_TOKEN` is set, which then requires
 * `Authorization: Bearer <token>`; `basic` requires Basic credentials of a user holding `OprnApi` (the
 * one guard), or the bearer token when one is set.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type {
  FastifyBaseLogger,
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
  RouteOptions,
  onResponseHookHandler,
} from 'fastify';
import type * as PromClient from 'prom-client';
import type { Registry } from 'prom-client';
import type { AppDeps } from '../deps.ts';
import { AppError, DEFAULT_MESSAGES } from '../errors.ts';
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

/** Registers the collectors of one module's families (such as the queue's) on the app's registry. */
export type RegisterGauges = (
  registry: Registry,
  deps: AppDeps,
  log: FastifyBaseLogger,
) => void | Promise<void>;

/** prom-client, loaded only when metrics are on (its import costs more than the rest of the app start). */
type Client = typeof PromClient;

type RequestLabel = 'method' | 'route' | 'status';

/** The label sets of one method of one route pattern. */
interface MethodSeries {
  readonly labels: { readonly method: string; readonly route: string };
  readonly byStatus: Map<
    number,
    { readonly method: string; readonly route: string; readonly status: number }
  >;
}

/** Every method seen on one route pattern. */
interface RouteSeries {
  readonly route: string;
  readonly byMethod: Map<string, MethodSeries>;
}

/** The request counter and latency histogram of one app. */
function createRequestMetrics({ Counter, Histogram }: Client, registry: Registry) {
  const requests = new Counter<RequestLabel>({
    name: 'http_requests_total',
    help: 'HTTP requests answered, by method, route pattern and status.',
    labelNames: ['method', 'route', 'status'],
    registers: [registry],
  });
  const durations = new Histogram<Exclude<RequestLabel, 'status'>>({
    name: 'http_request_duration_seconds',
    help: 'Time to answer an HTTP request, by method and route.',
    labelNames: ['method', 'route'],
    buckets: [...DURATION_BUCKETS_SECONDS],
    registers: [registry],
  });

  const methodSeries = (route: RouteSeries, method: string): MethodSeries => {
    const key = KNOWN_METHODS.has(method) ? method : 'OTHER';
    let series = route.byMethod.get(key);
    if (series === undefined) {
      series = { labels: { method: key, route: route.route }, byStatus: new Map() };
      route.byMethod.set(key, series);
    }
    // Unknown methods are folded before lookup next time too.
    if (key !== method) route.byMethod.set(method, series);
    return series;
  };

  return {
    seriesOf(route: string): RouteSeries {
      return { route, byMethod: new Map() };
    },
    observe(route: RouteSeries, method: string, status: number, seconds: number): void {
      const series = route.byMethod.get(method) ?? methodSeries(route, method);
      let labels = series.byStatus.get(status);
      if (labels === undefined) {
        labels = { ...series.labels, status };
        series.byStatus.set(status, labels);
      }
      requests.inc(labels);
      durations.observe(series.labels, seconds);
    },
  };
}

/** Pool, heavy-request gate, process memory, event-loop delay and start time. */
function registerProcessGauges(
  { Gauge }: Client,
  app: FastifyInstance,
  deps: AppDeps,
  registry: Registry,
  loopDelay: ReturnType<typeof monitorEventLoopDelay>,
): void {
  /** A gauge without labels whose value is read at scrape time. */
  const scraped = (name: string, help: string, read: () => number) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        this.set(read());
      },
    });

  // Read at every scrape; a database without a pool (embedded) has none of these families.
  const poolStats = () => deps.database.dialect.poolStats();
  if (poolStats() !== undefined) {
    new Gauge({
      name: 'db_pool_connections',
      help: 'Database pool connections, by state.',
      labelNames: ['state'] as const,
      registers: [registry],
      collect() {
        const pool = poolStats();
        if (pool === undefined) return;
        this.set({ state: 'total' }, pool.total);
        this.set({ state: 'idle' }, pool.idle);
        this.set({ state: 'in_use' }, pool.total - pool.idle);
      },
    });
    scraped(
      'db_pool_waiting_clients',
      'Queries waiting for a pool connection.',
      () => poolStats()?.waiting ?? 0,
    );
  }
  const gate = app.heavyGate;
  if (gate !== undefined) {
    scraped('heavy_requests_active', 'Heavy requests holding a slot.', () => gate.active);
    scraped('heavy_requests_waiting', 'Heavy requests waiting for a slot.', () => gate.waiting);
  }

  scraped('process_resident_memory_bytes', 'Resident set size.', () => process.memoryUsage.rss());
  scraped('nodejs_heap_used_bytes', 'V8 heap used.', () => process.memoryUsage().heapUsed);
  scraped('nodejs_heap_total_bytes', 'V8 heap allocated.', () => process.memoryUsage().heapTotal);
  scraped(
    'nodejs_external_memory_bytes',
    'Memory of C++ objects bound to JS (Buffers).',
    () => process.memoryUsage().external,
  );
  new Gauge({
    name: 'nodejs_eventloop_delay_seconds',
    help: 'Event-loop delay since the previous scrape (p50, p99, max).',
    labelNames: ['quantile'] as const,
    registers: [registry],
    collect() {
      // The delay histogram is in nanoseconds and counts the sampling interval itself, which is taken
      // off. It is reset at every scrape so each value covers one interval.
      const delay = (ns: number) =>
        loopDelay.count > 0 ? Math.max(0, ns - LOOP_RESOLUTION_MS * 1e6) / 1e9 : 0;
      this.set({ quantile: '0.5' }, delay(loopDelay.percentile(50)));
      this.set({ quantile: '0.99' }, delay(loopDelay.percentile(99)));
      this.set({ quantile: '1' }, delay(loopDelay.max));
      loopDelay.reset();
    },
  });
  new Gauge({
    name: 'process_start_time_seconds',
    help: 'Start time of the process, Unix seconds.',
    registers: [registry],
  }).set(Math.round(performance.timeOrigin / 1000));
}

/**
 * The exposition text of `registry`, one family after another: prom-client puts an empty line between
 * families, which is taken out (help texts and label values never hold a raw newline: both are escaped).
 */
async function renderMetrics(registry: Registry): Promise<string> {
  return (await registry.metrics()).replaceAll('\n\n', '\n');
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
 * registered, so that the `onRoute` hook sees them all), with the families of `moduleGauges`. Does
 * nothing, and loads nothing, when `METRICS=off`.
 */
export async function installMetrics(
  app: FastifyInstance,
  deps: AppDeps,
  basicAuth: BasicAuthGuard,
  moduleGauges: readonly RegisterGauges[] = [],
): Promise<void> {
  const { metrics: mode, metricsToken } = deps.config;
  if (mode === 'off') return;
  const client = await import('prom-client');
  const registry = new client.Registry();
  const requests = createRequestMetrics(client, registry);
  const unmatched = requests.seriesOf('unmatched');
  for (const register of moduleGauges) await register(registry, deps, app.log);
  const loopDelay = monitorEventLoopDelay({ resolution: LOOP_RESOLUTION_MS });
  loopDelay.enable();
  app.addHook('onClose', (_instance, done) => {
    loopDelay.disable();
    done();
  });
  registerProcessGauges(client, app, deps, registry, loopDelay);

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
      doc: {
        tag: 'operations',
        operations: {
          GET: {
            summary: 'Prometheus metrics',
            description:
              'Text exposition format 0.0.4. Served only when METRICS=on (open, or the METRICS_TOKEN bearer ' +
              'token when set) or METRICS=basic (Basic + OprnApi, or the bearer token).',
            isDatabaseBacked: false,
            responses: {
              200: {
                description: 'The metrics.',
                contentType: 'text/plain; version=0.0.4',
                schema: { type: 'string' },
              },
            },
          },
        },
      },
      openapiSecurity: [
        ...(mode === 'basic' ? (['basic'] as const) : []),
        ...(tokenDigest === undefined ? [] : (['bearer'] as const)),
      ],
    },
    onRequest: authorize,
    handler: async (_request, reply) => {
      const text = await renderMetrics(registry);
      return reply.code(200).header('content-type', EXPOSITION_CONTENT_TYPE).send(text);
    },
  });
}
