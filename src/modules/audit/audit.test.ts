import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import {
  PNG_BYTES,
  createAttachment,
  createEventWithElementType,
} from '../../../test/factories-attachment.ts';
import { addIdentifier, createStandardInstitutions } from '../../../test/factories-patient.ts';
import { ADD_PATH, STATUS_PATH } from '../../../test/factories-queue.ts';
import type { TestUser } from '../../../test/factories.ts';
import { basicHeader, countRows, createPatient, createUser } from '../../../test/factories.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import { until } from '../../../test/until.ts';
import type { Dialect } from '../../db/database.ts';
import type { AuditEventRow } from './audit.queries.ts';
import { withAuditTable } from './audit.queries.ts';

const CODE = 'AUD';
/** Paths of the read routes, whose rows the read audit sink commits after the answer (AUDIT_READS=async). */
const READ_PATH = /\/(patient\/search|attachmentdisplay\/view|request\/queue\/status)$/i;

forEachDialect((dialect) => {
  for (const mode of ['async', 'durable'] as const) describeAuditTrail(dialect, mode);
});

function describeAuditTrail(dialect: Dialect, mode: 'async' | 'durable'): void {
  describe(`audit trail (${dialect}, AUDIT_READS=${mode})`, () => {
    let app: TestApp;
    let user: TestUser;
    let roleless: TestUser;
    let standard: Awaited<ReturnType<typeof createStandardInstitutions>>;

    before(async () => {
      app = await startTestApp(dialect, {
        env: { INSTITUTION_CODE: CODE, REFERENCE_CACHE_TTL_MS: '0', TIME_ZONE: 'UTC', AUDIT_READS: mode },
      });
      user = await createUser(app.db);
      roleless = await createUser(app.db, { roles: [] });
      standard = await createStandardInstitutions(app.db, CODE);
    });
    after(async () => {
      await app.close();
    });

    /**
     * The audit rows of one call, read as soon as its answer arrived (no waiting, no retry); for a read
     * with AUDIT_READS=async, once the read audit sink has committed every row handed to it (bounded).
     */
    const rowsOf = async (response: Response): Promise<AuditEventRow[]> => {
      const requestId = response.headers.get('x-request-id');
      assert.ok(requestId !== null);
      if (mode === 'async' && READ_PATH.test(new URL(response.url).pathname))
        await until(() => app.app.auditSink!.stats().backlogRows === 0, {
          what: 'the read audit sink committed its rows',
        });
      return withAuditTable(app.db)
        .selectFrom('audit_event')
        .selectAll()
        .where('request_id', '=', requestId)
        .execute();
    };
    const onlyRowOf = async (response: Response): Promise<AuditEventRow> => {
      const rows = await rowsOf(response);
      assert.equal(rows.length, 1, 'one audit row per call');
      return rows[0]!;
    };
    const assertRow = (row: AuditEventRow, expected: Partial<AuditEventRow>) => {
      const picked = Object.fromEntries(Object.keys(expected).map((k) => [k, row[k as keyof AuditEventRow]]));
      assert.deepEqual(picked, expected);
      assert.equal(row.client_address, '127.0.0.1');
      assert.match(row.event_time, /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
    };
    const assertNoneOf = (row: AuditEventRow, secrets: readonly string[]) => {
      const text = JSON.stringify(row).toLowerCase();
      for (const secret of secrets) assert.ok(!text.includes(secret.toLowerCase()), `row holds "${secret}"`);
    };

    describe('GET /api/v1/patient/search', () => {
      it('records the user, the outcome and the ids of the patients found, and no patient data', async () => {
        const lastName = `Audzq${Math.random().toString(36).slice(2, 8).replace(/\d/g, 'x')}`;
        const first = await createPatient(app.db, {
          firstName: 'Imogen',
          lastName,
          patient: { dob: '1971-04-23' },
        });
        const second = await createPatient(app.db, {
          firstName: 'Hamish',
          lastName,
          patient: { dob: '1966-12-30' },
        });
        await addIdentifier(app.db, first.patientId, standard.localTypeId, '0765432');
        await addIdentifier(app.db, second.patientId, standard.globalTypeId, '4857773456');
        const response = await app.request(`/api/v1/patient/search?term=${lastName}`, {
          headers: { authorization: user.authorization },
        });
        assert.equal(response.status, 200);
        const found = ((await response.json()) as { id: number }[]).map((p) => p.id);
        assert.deepEqual(new Set(found), new Set([first.patientId, second.patientId]));
        const row = await onlyRowOf(response);
        assertRow(row, {
          action: 'patient.search',
          user_id: user.userId,
          outcome: 200,
          target_type: 'patient',
          target_ids: found.join(','),
        });
        assertNoneOf(row, [
          lastName,
          'Imogen',
          'Hamish',
          '1971-04-23',
          '1966-12-30',
          '0765432',
          '4857773456',
        ]);

        const byNumber = await app.request('/api/v1/patient/search?term=0765432', {
          headers: { authorization: user.authorization },
        });
        assert.equal(byNumber.status, 200);
        const numberRow = await onlyRowOf(byNumber);
        assertRow(numberRow, { target_type: 'patient', target_ids: String(first.patientId) });
        assertNoneOf(numberRow, ['0765432', '765432']);
      });

      it('records a search that found nobody with an empty target list', async () => {
        const response = await app.request('/api/v1/patient/search?term=Nobodyzzq', {
          headers: { authorization: user.authorization },
        });
        assert.equal(response.status, 200);
        assertRow(await onlyRowOf(response), { action: 'patient.search', outcome: 200, target_ids: null });
      });

      it('records a refused search: 401 without a user, 403 with the authenticated user', async () => {
        const anonymous = await app.request('/api/v1/patient/search?term=Smith');
        assert.equal(anonymous.status, 401);
        const anonymousRow = await onlyRowOf(anonymous);
        assertRow(anonymousRow, { action: 'patient.search', user_id: null, outcome: 401, target_ids: null });
        assertNoneOf(anonymousRow, ['Smith']);

        const wrongPassword = await app.request('/api/v1/patient/search?term=Smith', {
          headers: { authorization: basicHeader(user.username, 'not-the-password') },
        });
        assert.equal(wrongPassword.status, 401);
        const wrongRow = await onlyRowOf(wrongPassword);
        assertRow(wrongRow, { user_id: null, outcome: 401 });
        assertNoneOf(wrongRow, [user.username, 'not-the-password']);

        const forbidden = await app.request('/api/v1/patient/search?term=Smith', {
          headers: { authorization: roleless.authorization },
        });
        assert.equal(forbidden.status, 403);
        assertRow(await onlyRowOf(forbidden), {
          action: 'patient.search',
          user_id: roleless.userId,
          outcome: 403,
        });
      });
    });

    describe('GET /api/v1/attachmentDisplay/view', () => {
      it('records the attachment viewed, and a refused view with the attachment asked for', async () => {
        const id = await createAttachment(app.db);
        const response = await app.request(`/api/v1/attachmentDisplay/view?id=${id}`, {
          headers: { authorization: user.authorization },
        });
        assert.equal(response.status, 200);
        await response.arrayBuffer();
        assertRow(await onlyRowOf(response), {
          action: 'attachment.view',
          user_id: user.userId,
          outcome: 200,
          target_type: 'attachment_data',
          target_ids: String(id),
        });

        const head = await app.request(`/api/v1/attachmentDisplay/view?id=${id}`, {
          method: 'HEAD',
          headers: { authorization: user.authorization },
        });
        assert.equal(head.status, 200);
        assertRow(await onlyRowOf(head), { action: 'attachment.view', outcome: 200, target_ids: String(id) });

        const refused = await app.request(`/api/v1/attachmentDisplay/view?id=${id}`);
        assert.equal(refused.status, 401);
        assertRow(await onlyRowOf(refused), {
          action: 'attachment.view',
          user_id: null,
          outcome: 401,
          target_ids: String(id),
        });

        const missing = await app.request('/api/v1/attachmentDisplay/view?id=999999999', {
          headers: { authorization: user.authorization },
        });
        assert.equal(missing.status, 404);
        assertRow(await onlyRowOf(missing), { user_id: user.userId, outcome: 404, target_ids: '999999999' });
      });
    });

    describe('POST /api/v1/attachmentDisplay/create', () => {
      it('records the attachment created', async () => {
        const { eventId, elementTypeId } = await createEventWithElementType(app.db);
        const response = await app.request(
          `/api/v1/attachmentDisplay/create?event_id=${eventId}&element_type_id=${elementTypeId}`,
          {
            method: 'POST',
            headers: { authorization: user.authorization, 'content-type': 'image/png' },
            body: PNG_BYTES,
          },
        );
        assert.equal(response.status, 200);
        const { id } = (await response.json()) as { id: number };
        assertRow(await onlyRowOf(response), {
          action: 'attachment.create',
          user_id: user.userId,
          outcome: 200,
          target_type: 'attachment_data',
          target_ids: String(id),
        });
      });

      it('records a refused upload without writing anything else', async () => {
        const before = await countRows(app.db, 'attachment_data');
        const response = await app.request('/api/v1/attachmentDisplay/create?event_id=1', {
          method: 'POST',
          headers: { authorization: roleless.authorization, 'content-type': 'image/png' },
          body: PNG_BYTES,
        });
        assert.equal(response.status, 403);
        assertRow(await onlyRowOf(response), {
          action: 'attachment.create',
          user_id: roleless.userId,
          outcome: 403,
          target_ids: null,
        });
        assert.equal(await countRows(app.db, 'attachment_data'), before);
      });
    });

    describe('request queue', () => {
      it('records queue add with the request created, and queue status with the request read', async () => {
        const response = await app.request(ADD_PATH, {
          method: 'POST',
          headers: { authorization: user.authorization, 'content-type': 'application/json' },
          body: JSON.stringify({ data: { a: 'b' } }),
        });
        assert.equal(response.status, 200);
        const { request_id: requestId } = (await response.json()) as { request_id: number };
        assertRow(await onlyRowOf(response), {
          action: 'queue.add',
          user_id: user.userId,
          outcome: 200,
          target_type: 'request',
          target_ids: String(requestId),
        });

        const status = await app.request(`${STATUS_PATH}?request_id=${requestId}`, {
          headers: { authorization: user.authorization },
        });
        assert.equal(status.status, 200);
        assertRow(await onlyRowOf(status), {
          action: 'queue.status',
          user_id: user.userId,
          outcome: 200,
          target_type: 'request',
          target_ids: String(requestId),
        });
      });

      it('records refused and invalid queue calls', async () => {
        const anonymous = await app.request(ADD_PATH, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{}',
        });
        assert.equal(anonymous.status, 401);
        assertRow(await onlyRowOf(anonymous), { action: 'queue.add', user_id: null, outcome: 401 });

        const invalid = await app.request(`${STATUS_PATH}?request_id=abc`, {
          headers: { authorization: user.authorization },
        });
        assert.equal(invalid.status, 422);
        assertRow(await onlyRowOf(invalid), {
          action: 'queue.status',
          user_id: user.userId,
          outcome: 422,
          target_ids: null,
        });
      });

      it('does not audit other methods (405): no access decision is made', async () => {
        const response = await app.request(STATUS_PATH, { method: 'DELETE' });
        assert.equal(response.status, 405);
        assert.deepEqual(await rowsOf(response), []);
      });
    });

    describe('POST /api/v1/sign/add', () => {
      it('records an anonymous import attempt with its import log row and no body content', async () => {
        const response = await app.request('/api/v1/sign/add', {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ unique_identifier: 'ZZSECRET1', e_id: 5, e_t_id: 7, image: 'AAAA' }),
        });
        assert.equal(response.status, 422);
        const row = await onlyRowOf(response);
        const log = await app.db
          .selectFrom('signature_import_log')
          .select('id')
          .orderBy('id', 'desc')
          .executeTakeFirstOrThrow();
        assertRow(row, {
          action: 'signature.add',
          user_id: null,
          outcome: 422,
          target_type: 'signature_import_log',
          target_ids: String(log.id),
        });
        assertNoneOf(row, ['ZZSECRET1']);

        // A body refused before validation writes no import log row; the call is still audited.
        const malformed = await app.request('/api/v1/sign/add', { method: 'POST', body: '{nope' });
        assert.equal(malformed.status, 400);
        assertRow(await onlyRowOf(malformed), { action: 'signature.add', outcome: 400 });
      });
    });

    it("has the row of each of many concurrent calls committed when its answer arrives (group commit; an async read's once the sink has committed)", async () => {
      const responses = await Promise.all(
        Array.from({ length: 40 }, async (_, i) => {
          const response =
            i % 2 === 0
              ? await app.request('/api/v1/patient/search?term=Nobodyzzq', {
                  headers: { authorization: user.authorization },
                })
              : await app.request(ADD_PATH, {
                  method: 'POST',
                  headers: { authorization: user.authorization, 'content-type': 'application/json' },
                  body: JSON.stringify({ data: { i } }),
                });
          // Read at once, before any other answer is awaited: the row must already be there.
          const rows = await rowsOf(response);
          return { status: response.status, rows };
        }),
      );
      for (const { status, rows } of responses) {
        assert.equal(status, 200);
        assert.equal(rows.length, 1);
      }
    });

    it('is append-only: the database refuses UPDATE and DELETE of audit rows', async () => {
      const response = await app.request('/api/v1/patient/search?term=Nobodyzzq', {
        headers: { authorization: user.authorization },
      });
      const row = await onlyRowOf(response);
      const audit = withAuditTable(app.db);
      await assert.rejects(
        audit.updateTable('audit_event').set({ outcome: 200, user_id: 1 }).where('id', '=', row.id).execute(),
        /append-only/,
      );
      await assert.rejects(audit.deleteFrom('audit_event').where('id', '=', row.id).execute(), /append-only/);
      await assert.rejects(audit.deleteFrom('audit_event').execute(), /append-only/);
      if (dialect === 'postgres')
        await assert.rejects(sql`truncate audit_event`.execute(app.db), /append-only/);
      assert.deepEqual(await onlyRowOf(response), row);
    });

    // With AUDIT_READS=async a read is answered before its row is written: audit-sink.test.ts.
    if (mode === 'durable')
      it('answers 503 in the route shape instead of an unaudited 200 when the row cannot be written', async () => {
        await sql`alter table audit_event rename to audit_event_away`.execute(app.db);
        try {
          const search = await app.request('/api/v1/patient/search?term=Nobodyzzq', {
            headers: { authorization: user.authorization },
          });
          assert.equal(search.status, 503);
          assert.equal(search.headers.get('retry-after'), '5');
          assert.deepEqual(await search.json(), 'Service Unavailable');

          const id = await createAttachment(app.db);
          const view = await app.request(`/api/v1/attachmentDisplay/view?id=${id}`, {
            headers: { authorization: user.authorization },
          });
          assert.equal(view.status, 503);
          assert.equal(view.headers.get('etag'), null);
          assert.match(view.headers.get('content-type') ?? '', /^application\/json/);
          assert.deepEqual(await view.json(), 'Service Unavailable');

          const status = await app.request(`${STATUS_PATH}?request_id=1`, {
            headers: { authorization: user.authorization },
          });
          assert.equal(status.status, 503);
          assert.deepEqual(await status.json(), { success: 0, message: { system: 'Service Unavailable' } });
        } finally {
          await sql`alter table audit_event_away rename to audit_event`.execute(app.db);
        }
        const healthy = await app.request('/api/v1/patient/search?term=Nobodyzzq', {
          headers: { authorization: user.authorization },
        });
        assert.equal(healthy.status, 200);
        await onlyRowOf(healthy);
      });

    it('audits no other route (health, unknown URLs)', async () => {
      const health = await app.request('/healthz');
      assert.equal(health.status, 200);
      assert.deepEqual(await rowsOf(health), []);
    });
  });
}
