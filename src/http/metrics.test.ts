import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { loadConfig } from '../config.ts';
import { itEnforcesBasicAuth } from '../../test/auth-cases.ts';
import { createUser } from '../../test/factories.ts';
import { createRequest } from '../../test/factories-attachment.ts';
import { addRoutineRow, createRequestType } from '../../test/factories-queue.ts';
import type { TestApp } from '../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../test/harness.ts';

const TOKEN = 'metrics-token-0123456789abcdef';

const METRIC_NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const LABEL = '[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\\\\n]|\\\\[\\\\"n])*"';
const SAMPLE = new RegExp(
  `^(${METRIC_NAME})(?:\\{(${LABEL}(?:,${LABEL})*)\\})? (-?(?:\\d+(?:\\.\\d+)?(?:e[+-]?\\d+)?|\\+Inf|-Inf|NaN))$`,
);
const HELP = new RegExp(`^# HELP (${METRIC_NAME}) .*$`);
const TYPE = new RegExp(`^# TYPE (${METRIC_NAME}) (counter|gauge|histogram|summary|untyped)$`);

interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/**
 * Parses exposition text 0.0.4 strictly: every line is HELP, TYPE or a sample of a family TYPE'd
 * before it (histogram samples by their `_bucket`/`_sum`/`_count` suffix); throws on anything else.
 */
function parseExposition(text: string): Sample[] {
  assert.ok(text.endsWith('\n'), 'the text ends with a newline');
  const types = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.slice(0, -1).split('\n')) {
    const type = TYPE.exec(line);
    if (type !== null) {
      assert.ok(!types.has(type[1]!), `family ${type[1]} typed twice`);
      types.set(type[1]!, type[2]!);
      continue;
    }
    if (HELP.test(line)) continue;
    const match = SAMPLE.exec(line);
    assert.ok(match !== null, `not a valid exposition line: ${JSON.stringify(line)}`);
    const name = match[1]!;
    const family = types.has(name) ? name : name.replace(/_(bucket|sum|count)$/, '');
    assert.ok(types.has(family), `sample ${name} without a TYPE`);
    if (family !== name) assert.equal(types.get(family), 'histogram');
    const labels: Record<string, string> = {};
    for (const pair of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[pair[1]!] = pair[2]!;
    samples.push({ name, labels, value: Number(match[3]) });
  }
  return samples;
}

function valueOf(samples: readonly Sample[], name: string, labels: Record<string, string>): number {
  const found = samples.filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  return found.reduce((sum, s) => sum + s.value, 0);
}

async function scrape(app: TestApp, headers: Record<string, string> = {}): Promise<Sample[]> {
  const response = await app.request('/metrics', { headers });
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
  return parseExposition(await response.text());
}

describe('METRICS_TOKEN', () => {
  it('is refused when shorter than 16 characters', () => {
    assert.throws(() => loadConfig({ METRICS_TOKEN: 'short' }), /METRICS_TOKEN must be at least 16/);
    assert.equal(loadConfig({}).metrics, 'off');
  });
});

forEachDialect((dialect) => {
  describe(`GET /metrics with METRICS=on [${dialect}]`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect, { env: { METRICS: 'on' } });
    });
    after(() => app.close());

    it('answers the text exposition format, every line valid, with process and queue families', async () => {
      const response = await app.request('/metrics');
      assert.equal(response.status, 200);
      assert.equal(response.headers.get('cache-control'), 'no-store');
      const text = await response.text();
      const samples = parseExposition(text);
      const names = new Set(samples.map((s) => s.name));
      for (const name of [
        'process_resident_memory_bytes',
        'nodejs_heap_used_bytes',
        'nodejs_heap_total_bytes',
        'nodejs_external_memory_bytes',
        'nodejs_eventloop_delay_seconds',
        'process_start_time_seconds',
        'request_queue_routines_executed_total',
        'metrics_database_query_ok',
      ])
        assert.ok(names.has(name), `${name} is exposed`);
      assert.equal(valueOf(samples, 'metrics_database_query_ok', {}), 1);
      const startTime = valueOf(samples, 'process_start_time_seconds', {});
      assert.ok(startTime > Date.now() / 1000 - 3600 && startTime <= Date.now() / 1000);
      // A server database has a pool; embedded SQLite has none.
      const hasPool = dialect !== 'sqlite';
      assert.equal(names.has('db_pool_connections'), hasPool);
      if (hasPool) assert.ok(valueOf(samples, 'db_pool_connections', { state: 'total' }) >= 1);
    });

    it('counts requests per route pattern and status, and latency in a consistent histogram', async () => {
      const before = await scrape(app);
      const user = await createUser(app.db);
      await app.request('/healthz');
      await app.request('/healthz');
      await app.request('/api/v1/patient/search?term=nobody');
      await app.request('/api/v1/patient/search?term=nobody', {
        headers: { authorization: user.authorization },
      });
      const afterScrape = await scrape(app);
      const delta = (labels: Record<string, string>) =>
        valueOf(afterScrape, 'http_requests_total', labels) - valueOf(before, 'http_requests_total', labels);
      assert.equal(delta({ method: 'GET', route: '/healthz', status: '200' }), 2);
      assert.equal(delta({ method: 'GET', route: '/api/v1/patient/search', status: '401' }), 1);
      assert.equal(delta({ method: 'GET', route: '/api/v1/patient/search', status: '200' }), 1);

      const labels = { method: 'GET', route: '/api/v1/patient/search' };
      const count = valueOf(afterScrape, 'http_request_duration_seconds_count', labels);
      assert.equal(count, valueOf(afterScrape, 'http_requests_total', labels));
      assert.equal(
        valueOf(afterScrape, 'http_request_duration_seconds_bucket', { ...labels, le: '+Inf' }),
        count,
      );
      const buckets = afterScrape
        .filter((s) => s.name === 'http_request_duration_seconds_bucket' && s.labels.route === labels.route)
        .filter((s) => s.labels.method === 'GET')
        .map((s) => s.value);
      assert.deepEqual(
        buckets,
        [...buckets].sort((a, b) => a - b),
        'buckets are cumulative',
      );
      assert.ok(valueOf(afterScrape, 'http_request_duration_seconds_sum', labels) > 0);
    });

    it('labels by route pattern only: no query string, no unmatched path, and not /metrics itself', async () => {
      const user = await createUser(app.db);
      await app.request('/api/v1/patient/search?term=Zebedee-Secret', {
        headers: { authorization: user.authorization },
      });
      await app.request('/no/such/Path-Secret?term=Other-Secret');
      await app.request('/api/v1/PATIENT/search?term=Case-Secret');
      const response = await app.request('/metrics');
      const text = await response.text();
      assert.doesNotMatch(text, /Secret/);
      assert.doesNotMatch(text, /route="[^"]*\?/);
      const samples = parseExposition(text);
      assert.ok(valueOf(samples, 'http_requests_total', { route: 'unmatched', status: '404' }) >= 1);
      assert.equal(valueOf(samples, 'http_requests_total', { route: '/metrics' }), 0);
      const routes = new Set(
        samples.filter((s) => s.name === 'http_requests_total').map((s) => s.labels.route),
      );
      for (const route of routes) assert.ok(route === 'unmatched' || route!.startsWith('/'), route);
    });

    it('folds unknown methods into OTHER', async () => {
      // Node's parser accepts a few methods Fastify does not route (such as PROPFIND).
      await app.request('/healthz', { method: 'PROPFIND' });
      const samples = await scrape(app);
      const methods = new Set(
        samples.filter((s) => s.name === 'http_requests_total').map((s) => s.labels.method),
      );
      for (const method of methods) assert.match(method!, /^(GET|HEAD|POST|PUT|DELETE|PATCH|OPTIONS|OTHER)$/);
      assert.ok(methods.has('OTHER'));
    });

    it('reports queue depth per queue and status, and routine outcomes from the queue counters', async () => {
      const type = await createRequestType(app.db);
      const requestId = await createRequest(app.db);
      for (const [sequence, status] of (['NEW', 'NEW', 'FAILED'] as const).entries())
        await addRoutineRow(app.db, {
          requestId,
          name: type.routineName,
          queue: type.queue,
          sequence,
          status,
        });
      await app.db
        .updateTable('request_queue')
        .set({ total_execute_count: 7, total_success_count: 5, total_fail_count: 2 })
        .where('request_queue', '=', type.queue)
        .execute();
      const samples = await scrape(app);
      assert.equal(valueOf(samples, 'request_queue_routines', { queue: type.queue, status: 'NEW' }), 2);
      assert.equal(valueOf(samples, 'request_queue_routines', { queue: type.queue, status: 'FAILED' }), 1);
      assert.equal(valueOf(samples, 'request_queue_routines_executed_total', { queue: type.queue }), 7);
      assert.equal(valueOf(samples, 'request_queue_routines_succeeded_total', { queue: type.queue }), 5);
      assert.equal(valueOf(samples, 'request_queue_routines_failed_total', { queue: type.queue }), 2);
    });
  });

  describe(`GET /metrics when the queue tables cannot be read [${dialect}]`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect, { env: { METRICS: 'on' } });
    });
    after(() => app.close());

    it('still answers 200 with the other families, the queue families empty and metrics_database_query_ok 0', async () => {
      await sql`alter table request_queue rename to request_queue_away`.execute(app.db);
      try {
        const samples = await scrape(app);
        assert.equal(valueOf(samples, 'metrics_database_query_ok', {}), 0);
        const names = new Set(samples.map((s) => s.name));
        assert.ok(!names.has('request_queue_routines_executed_total'));
        assert.ok(!names.has('request_queue_routines'));
        assert.ok(names.has('process_resident_memory_bytes'));
      } finally {
        await sql`alter table request_queue_away rename to request_queue`.execute(app.db);
      }
      const samples = await scrape(app);
      assert.equal(valueOf(samples, 'metrics_database_query_ok', {}), 1);
      assert.ok(samples.some((s) => s.name === 'request_queue_routines_executed_total'));
    });
  });

  describe(`GET /metrics switched off (default) [${dialect}]`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect);
    });
    after(() => app.close());

    it('answers 404 "Not Found"', async () => {
      const response = await app.request('/metrics');
      assert.equal(response.status, 404);
      assert.equal(await response.json(), 'Not Found');
    });
  });

  describe(`GET /metrics with METRICS=basic [${dialect}]`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect, { env: { METRICS: 'basic', METRICS_TOKEN: TOKEN } });
    });
    after(() => app.close());

    itEnforcesBasicAuth(() => app, { method: 'GET', path: '/metrics', operation: 'OprnApi' });

    it('answers 200 to a user holding OprnApi', async () => {
      const user = await createUser(app.db);
      await scrape(app, { authorization: user.authorization });
    });

    it('answers 200 to the bearer token too', async () => {
      await scrape(app, { authorization: `Bearer ${TOKEN}` });
    });
  });

  describe(`GET /metrics with METRICS=on and METRICS_TOKEN [${dialect}]`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect, { env: { METRICS: 'on', METRICS_TOKEN: TOKEN } });
    });
    after(() => app.close());

    it('answers 200 to the bearer token', async () => {
      await scrape(app, { authorization: `Bearer ${TOKEN}` });
    });

    for (const [what, authorization] of [
      ['no Authorization header', undefined],
      ['a wrong token', `Bearer ${TOKEN}x`],
      ['a prefix of the token', `Bearer ${TOKEN.slice(0, -1)}`],
      ['Basic credentials', 'Basic dXNlcjpwYXNz'],
    ] as const) {
      it(`answers 401 "401 Unauthorized" with a Bearer challenge for ${what}`, async () => {
        const response = await app.request('/metrics', {
          headers: authorization === undefined ? {} : { authorization },
        });
        assert.equal(response.status, 401);
        assert.equal(response.headers.get('www-authenticate'), 'Bearer realm="metrics"');
        assert.equal(await response.json(), '401 Unauthorized');
      });
    }
  });
});
