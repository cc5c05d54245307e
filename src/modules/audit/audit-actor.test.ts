import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createUser } from '../../../test/factories.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import { until } from '../../../test/until.ts';
import type { AuditEventRow } from './audit.queries.ts';
import { withAuditTable } from './audit.queries.ts';

forEachDialect((dialect) => {
  describe(`audit trail: who acted, and throttled calls (${dialect})`, () => {
    let app: TestApp;

    before(async () => {
      app = await startTestApp(dialect, { env: { SIGN_RATE_LIMIT_PER_MINUTE: '2' } });
    });
    after(async () => {
      await app.close();
    });

    const rowsOfAction = (action: string): Promise<AuditEventRow[]> =>
      withAuditTable(app.db)
        .selectFrom('audit_event')
        .selectAll()
        .where('action', '=', action)
        .orderBy('id')
        .execute();

    it('records the username beside the user id of an authenticated call, and none for an anonymous one', async () => {
      const user = await createUser(app.db);
      const ok = await app.request('/api/v1/patient/search?term=Nobody', {
        headers: { authorization: user.authorization },
      });
      assert.equal(ok.status, 200);
      await ok.arrayBuffer();
      const anonymous = await app.request('/api/v1/patient/search?term=Nobody');
      assert.equal(anonymous.status, 401);
      await anonymous.arrayBuffer();
      // Searches are reads: the read audit sink commits their rows just after the answers.
      await until(() => app.app.auditSink!.stats().backlogRows === 0, { what: 'read audit rows committed' });
      const rows = await rowsOfAction('patient.search');
      assert.deepEqual(
        rows.map((r) => [r.outcome, r.user_id, r.username]),
        [
          [200, user.userId, user.username],
          [401, null, null],
        ],
      );
    });

    it('records the first throttled sign/add of a client in a minute, and not the ones after it', async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 6; i += 1) {
        const response = await app.request('/api/v1/sign/add', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{}',
        });
        statuses.push(response.status);
        await response.arrayBuffer();
      }
      const refused = statuses.filter((s) => s === 429).length;
      assert.ok(refused >= 3, statuses.join(','));
      const rows = await rowsOfAction('signature.add');
      const throttled = rows.filter((r) => r.outcome === 429);
      // Every allowed call and the first refusal; a second audited 429 only if the calls crossed into a
      // new minute of the clock.
      assert.equal(rows.length - throttled.length, statuses.length - refused);
      assert.ok(throttled.length === 1 || throttled.length === 2, JSON.stringify(rows));
      for (const row of throttled) {
        assert.equal(row.detail, 'throttled: first refusal of this client this minute');
        assert.equal(row.client_address, '127.0.0.1');
        assert.equal(row.user_id, null);
      }
    });
  });
});
