import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { TestApp } from '../test/harness.ts';
import { forEachDialect, startTestApp } from '../test/harness.ts';

forEachDialect((dialect) => {
  describe(`HTTP app basics [${dialect}]`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect, {
        extraRoutes: (scope) => {
          scope.get('/test/boom', async () => {
            throw new Error('secret internal detail');
          });
        },
      });
    });
    after(() => app.close());

    it('GET /healthz answers 200 while the process is up', async () => {
      const response = await app.request('/healthz');
      assert.equal(response.status, 200);
      assert.deepEqual(await response.json(), { status: 'ok' });
    });

    it('GET /readyz answers 200 when the database is reachable', async () => {
      const response = await app.request('/readyz');
      assert.equal(response.status, 200);
      assert.deepEqual(await response.json(), { status: 'ready' });
    });

    it('answers 404 "Not Found" as JSON for unknown routes and unknown API versions', async () => {
      for (const path of [
        '/nothing-here',
        '/api/v2/patient/search?term=x',
        '/api/v1/patient/unknownaction',
      ]) {
        const response = await app.request(path);
        assert.equal(response.status, 404, path);
        assert.match(response.headers.get('content-type') ?? '', /^application\/json/);
        assert.equal(await response.json(), 'Not Found');
      }
    });

    it('sets nosniff, no-store and a server-generated request id on every response, whatever the client sent', async () => {
      const response = await app.request('/healthz', { headers: { 'x-request-id': 'abc-123' } });
      assert.equal(response.headers.get('x-content-type-options'), 'nosniff');
      assert.equal(response.headers.get('cache-control'), 'no-store');
      assert.match(response.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
      const odd = await app.request('/healthz', { headers: { 'x-request-id': 'bad id\twith spaces' } });
      assert.match(odd.headers.get('x-request-id') ?? '', /^[0-9a-f-]{36}$/);
    });

    it('answers an unexpected error with a JSON 500 carrying a reference, never the internals', async () => {
      const response = await app.request('/test/boom', { headers: { 'x-request-id': 'ref-42' } });
      assert.equal(response.status, 500);
      const body = await response.text();
      const reference = response.headers.get('x-request-id');
      assert.equal(JSON.parse(body), `Internal server error (ref ${reference})`);
      assert.doesNotMatch(body, /secret internal detail/);
    });
  });
});
