import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createUser } from '../../../test/factories.ts';
import type { TestUser } from '../../../test/factories.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import { until } from '../../../test/until.ts';
import { withAuditTable } from './audit.queries.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

forEachDialect((dialect) => {
  describe(`audit rows: request ids [${dialect}]`, () => {
    let app: TestApp;
    let user: TestUser;
    before(async () => {
      app = await startTestApp(dialect);
      user = await createUser(app.db);
    });
    after(() => app.close());

    const search = (headers: Record<string, string>) =>
      app.request('/api/v1/patient/search?term=smith', {
        headers: { authorization: user.authorization, ...headers },
      });
    // Searches are reads: their rows are committed by the read audit sink just after the answer.
    const rowsWith = async (column: 'request_id' | 'client_request_id', value: string) => {
      await until(() => app.app.auditSink!.stats().backlogRows === 0, { what: 'read audit rows committed' });
      return withAuditTable(app.db)
        .selectFrom('audit_event')
        .select(['request_id', 'client_request_id'])
        .where(column, '=', value)
        .execute();
    };

    it('records the server-generated request id, and the client X-Request-Id separately', async () => {
      const clientId = `client-${Date.now()}`;
      const first = await search({ 'x-request-id': clientId });
      const second = await search({ 'x-request-id': clientId });
      assert.equal(first.status, 200);
      const ids = [first, second].map((r) => r.headers.get('x-request-id') ?? '');
      for (const id of ids) assert.match(id, UUID, 'the answer carries the server id');
      assert.notEqual(ids[0], ids[1], 'a client cannot make two calls share an id');
      const rows = await rowsWith('client_request_id', clientId);
      assert.deepEqual(rows.map((row) => row.request_id).sort(), [...ids].sort());
      assert.ok(rows.every((row) => row.client_request_id === clientId));
    });

    it('keeps no client id when none or an odd one was sent', async () => {
      for (const headers of [{}, { 'x-request-id': 'bad id\twith spaces' }] as Record<string, string>[]) {
        const response = await search(headers);
        const rows = await rowsWith('request_id', response.headers.get('x-request-id') ?? '');
        assert.deepEqual(
          rows.map((row) => row.client_request_id),
          [null],
        );
      }
    });
  });
});
