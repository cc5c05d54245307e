import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';

forEachDialect((dialect) => {
  describe(`audited routes, from the routes' config.audit [${dialect}]`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect, { env: { CONSOLE: 'on' } });
    });
    after(() => app.close());

    it('covers every method every /api route serves (the document is not a record), and no other', () => {
      const served = new Set<string>();
      for (const route of app.app.openapiRoutes ?? []) {
        if (!route.url.startsWith('/api/') || route.url === '/api/v1/openapi.json') continue;
        const operations = route.doc?.operations ?? {};
        const isServed = route.method in operations || (route.method === 'HEAD' && 'GET' in operations);
        if (isServed && route.method !== 'OPTIONS') served.add(`${route.method} ${route.url}`);
      }
      const audited = new Set(
        (app.app.auditedRoutes ?? [])
          .filter((route) => route.url.startsWith('/api/'))
          .map((route) => `${route.method} ${route.url}`),
      );
      assert.ok(served.size >= 12, `${served.size} served API methods`);
      assert.deepEqual([...audited].sort(), [...served].sort());
    });

    it('gives each audited route an action and a label, the same for every method of a URL of one kind', () => {
      const routes = app.app.auditedRoutes ?? [];
      // A URL may serve a read and a write (DICOMweb's `/studies`: QIDO-RS search and STOW-RS store),
      // each its own action; every method of one kind (GET and HEAD) shares one.
      const actionOf = new Map<string, string>();
      for (const route of routes) {
        assert.match(route.action, /^[a-z]+(\.[a-z-]+)+$/);
        assert.ok(route.label.length > 0);
        const key = `${route.kind} ${route.url}`;
        const known = actionOf.get(key);
        if (known !== undefined) assert.equal(route.action, known, route.url);
        actionOf.set(key, route.action);
      }
      const actions = new Set(routes.map((route) => route.action));
      for (const action of ['patient.search', 'dicomweb.store', 'console.login', 'console.audit.export'])
        assert.ok(actions.has(action), action);
    });
  });
});
