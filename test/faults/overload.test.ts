/**
 * Overload: past MAX_CONCURRENT_HEAVY_REQUESTS (here 2) a heavy request waits HEAVY_QUEUE_TIMEOUT_MS for a
 * slot and is then answered 503 in its route's contract shape with `Retry-After: 1`; light routes are never
 * held back; a slot frees when its request is done or its client hangs up.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, it } from 'node:test';
import { countRows, createUser } from '../factories.ts';
import type { TestUser } from '../factories.ts';
import { ADD_PATH } from '../factories-queue.ts';
import type { SignableEvent } from '../factories-signature.ts';
import { b64, createSignableEvent, makePng } from '../factories-signature.ts';
import type { TestApp } from '../harness.ts';
import { forEachDialect, startTestApp } from '../harness.ts';
import { until } from '../until.ts';

const SIGN_PATH = '/api/v1/sign/add';

function signBody(event: SignableEvent): string {
  return JSON.stringify({
    unique_identifier: event.code,
    extra_info: JSON.stringify({ e_id: event.elementId, e_t_id: event.esignElementTypeId }),
    image: b64(makePng()),
  });
}

/**
 * A heavy request whose body never finishes arriving: it holds a slot from the moment 64 KiB of its body
 * have arrived (until BODY_TIMEOUT_MS cuts it). `hangUp` closes its connection.
 */
function holdHeavyRequest(app: TestApp): { hangUp: () => void } {
  const request = http.request(`${app.baseUrl}${SIGN_PATH}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'content-length': '200000' },
  });
  request.on('error', () => {});
  request.write(Buffer.alloc(100_000, 0x20));
  return { hangUp: () => request.destroy() };
}

let slowStarted: () => void = () => {};
let finishSlow: () => void = () => {};
let slowGate: Promise<void> = Promise.resolve();

forEachDialect((dialect) => {
  describe(`overload guard [${dialect}]`, () => {
    let app: TestApp;
    let user: TestUser;
    before(async () => {
      app = await startTestApp(dialect, {
        env: { MAX_CONCURRENT_HEAVY_REQUESTS: '2', HEAVY_QUEUE_TIMEOUT_MS: '150', BODY_TIMEOUT_MS: '60000' },
        // A route that declares itself heavy and works until the test lets it finish.
        extraRoutes: (scope) => {
          scope.post('/test/slow', { config: { heavy: true } }, async () => {
            slowStarted();
            await slowGate;
            return 'done';
          });
        },
      });
      user = await createUser(app.db);
    });
    after(() => app.close());

    const gate = () => app.app.heavyGate!;

    it('answers 503 "Service Unavailable" with Retry-After: 1 on sign/add and queue add past the cap, writing nothing, while light routes still answer', async () => {
      const event = await createSignableEvent(app.db);
      const held = [holdHeavyRequest(app), holdHeavyRequest(app)];
      try {
        await until(() => gate().active === 2);
        const [logs, requests] = [
          await countRows(app.db, 'signature_import_log'),
          await countRows(app.db, 'request'),
        ];

        const sign = await app.request(SIGN_PATH, { method: 'POST', body: signBody(event) });
        assert.equal(sign.status, 503);
        assert.equal(sign.headers.get('retry-after'), '1');
        assert.equal(sign.headers.get('access-control-allow-origin'), '*');
        assert.equal(await sign.json(), 'Service Unavailable');

        const queue = await app.request(ADD_PATH, {
          method: 'POST',
          headers: { authorization: user.authorization, 'content-type': 'application/json' },
          body: JSON.stringify({ data: { a: 'b' } }),
        });
        assert.equal(queue.status, 503);
        assert.equal(queue.headers.get('retry-after'), '1');
        assert.deepEqual(await queue.json(), { success: 0, message: { system: 'Service Unavailable' } });

        const view = await app.request('/api/v1/attachmentdisplay/view?id=1', {
          headers: { authorization: user.authorization },
        });
        assert.equal(view.status, 503, 'a full attachment read is heavy');
        const thumbnail = await app.request(
          '/api/v1/attachmentdisplay/view?id=1&attachment=thumbnail_small_blob',
          { headers: { authorization: user.authorization } },
        );
        assert.equal(thumbnail.status, 404, 'a thumbnail read is light');
        assert.equal((await app.request('/readyz')).status, 200);
        const status = await app.request('/api/v1/request/queue/status?request_id=1', {
          headers: { authorization: user.authorization },
        });
        assert.notEqual(status.status, 503);

        assert.equal(await countRows(app.db, 'signature_import_log'), logs);
        assert.equal(await countRows(app.db, 'request'), requests);
      } finally {
        for (const request of held) request.hangUp();
      }
      await until(() => gate().active === 0);
    });

    it('serves a waiting heavy request as soon as a client hangs up and frees its slot', async () => {
      const event = await createSignableEvent(app.db);
      const held = [holdHeavyRequest(app), holdHeavyRequest(app)];
      try {
        await until(() => gate().active === 2);
        const pending = app.request(SIGN_PATH, { method: 'POST', body: signBody(event) });
        await until(() => gate().waiting === 1);
        held[0]!.hangUp();
        const response = await pending;
        assert.equal(response.status, 200);
        assert.equal(await response.json(), 'Correct signature saved!');
      } finally {
        for (const request of held) request.hangUp();
      }
      await until(() => gate().active === 0 && gate().waiting === 0);
    });

    it('answers a burst of 16 concurrent sign/add with only 200 saved or 503, never a 500, and every 200 is stored', async () => {
      const events = await Promise.all(Array.from({ length: 16 }, () => createSignableEvent(app.db)));
      const responses = await Promise.all(
        events.map((event) => app.request(SIGN_PATH, { method: 'POST', body: signBody(event) })),
      );
      const bodies = await Promise.all(responses.map((r) => r.json() as Promise<string>));
      const saved = responses.filter((r, i) => r.status === 200 && bodies[i] === 'Correct signature saved!');
      const refused = responses.filter((r) => r.status === 503);
      assert.equal(saved.length + refused.length, 16, `statuses ${responses.map((r) => r.status).join(',')}`);
      const stored = await app.db
        .selectFrom('signature_import_log')
        .select('event_id')
        .where('status_id', '=', 4)
        .where(
          'event_id',
          'in',
          events.map((e) => e.eventId),
        )
        .execute();
      assert.equal(stored.length, saved.length);
      await until(() => gate().active === 0);
    });

    it('holds the slot of a route declared heavy until its handler returns, even when the client hung up first', async () => {
      const started = new Promise<void>((resolve) => (slowStarted = resolve));
      slowGate = new Promise<void>((resolve) => (finishSlow = resolve));
      const client = http.request(`${app.baseUrl}/test/slow`, { method: 'POST' });
      client.on('error', () => {});
      const closed = new Promise((resolve) => client.once('close', resolve));
      client.end();
      await started;
      assert.equal(gate().active, 1);
      client.destroy();
      await closed;
      // The connection is gone but the handler still works: its slot stays taken.
      await new Promise((resolve) => setImmediate(resolve));
      assert.equal(gate().active, 1);
      finishSlow();
      await until(() => gate().active === 0);
    });
  });
});
