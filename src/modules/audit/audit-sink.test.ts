/**
 * The read audit sink (AUDIT_READS=async) against a real database: reads are answered before their audit
 * row is committed, and the row follows within the flush window; when the audit table cannot be written
 * (another session holds a lock on it: PostgreSQL `LOCK TABLE audit_event IN EXCLUSIVE MODE` or MySQL
 * `LOCK TABLES audit_event READ`, which let reads of the table through; SQLite another connection
 * holding the write lock; or the table renamed
 * away, so that inserts fail), reads answer 503 in their contract shapes and `/readyz` says not ready once
 * the lag or the backlog passes its bound, and every row of a read answered 200 is written once the table
 * is writable again. Rows are found by the client's `X-Request-Id` (`client_request_id`).
 */
import assert from 'node:assert/strict';
import { DatabaseSync } from 'node:sqlite';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { createAttachment, createRequest } from '../../../test/factories-attachment.ts';
import type { TestUser } from '../../../test/factories.ts';
import { createUser } from '../../../test/factories.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import { until } from '../../../test/until.ts';
import { mysqlConnectionOptions } from '../../db/dialects/mysql.ts';
import { withAuditTable } from './audit.queries.ts';

/** Another session that keeps every insert into `audit_event` from committing until `release`. */
interface TableLock {
  release(): Promise<void>;
}

async function lockAuditTable(app: TestApp): Promise<TableLock> {
  if (app.dialect === 'sqlite') {
    const other = new DatabaseSync(app.url.slice('sqlite:'.length));
    other.exec('BEGIN IMMEDIATE');
    return {
      release: async () => {
        other.exec('ROLLBACK');
        other.close();
      },
    };
  }
  if (app.dialect === 'mysql') {
    // A READ table lock lets other sessions read the table but not write it, as PostgreSQL's EXCLUSIVE.
    const other = await mysql.createConnection(mysqlConnectionOptions(app.url));
    await other.query('lock tables audit_event read');
    return {
      release: async () => {
        await other.query('unlock tables');
        await other.end();
      },
    };
  }
  const other = new pg.Client({ connectionString: app.url });
  await other.connect();
  await other.query('begin');
  await other.query('lock table audit_event in exclusive mode');
  return {
    release: async () => {
      await other.query('rollback');
      await other.end();
    },
  };
}

/** The audit table renamed away: every insert fails (and is retried) until `release` renames it back. */
async function renameAuditTable(app: TestApp): Promise<TableLock> {
  await sql`alter table audit_event rename to audit_event_away`.execute(app.db);
  return {
    release: async () => {
      await sql`alter table audit_event_away rename to audit_event`.execute(app.db);
    },
  };
}

forEachDialect((dialect) => {
  describe(`read audit sink [${dialect}]`, () => {
    let sequence = 0;

    /** Audited calls of `app` with their own request ids, and their rows. */
    const clientOf = (app: TestApp, user: TestUser) => {
      const call = (path: string, init: RequestInit = {}) => {
        const requestId = `sink-${dialect}-${(sequence += 1)}`;
        const headers = { authorization: user.authorization, 'x-request-id': requestId, ...init.headers };
        return app.request(path, { ...init, headers }).then((response) => ({ response, requestId }));
      };
      const rowsOf = (requestIds: readonly string[]) =>
        withAuditTable(app.db)
          .selectFrom('audit_event')
          .select(['client_request_id', 'action', 'outcome', 'user_id', 'target_ids'])
          .where('client_request_id', 'in', requestIds)
          .orderBy('id')
          .execute();
      return { call, rowsOf };
    };

    describe('AUDIT_READS=async with its lag bound', () => {
      let app: TestApp;
      let user: TestUser;
      before(async () => {
        // The lag bound leaves the first test's five reads, answered while the table is locked, time
        // to be answered on a loaded 2-core machine running test files side by side.
        app = await startTestApp(dialect, {
          env: { AUDIT_FLUSH_MS: '20', AUDIT_MAX_LAG_MS: '1500', METRICS: 'on' },
        });
        user = await createUser(app.db);
      });
      after(async () => {
        await app.close();
      });

      it('answers reads (search, view with HEAD and 304, queue status) before their rows are committed, and commits each within the flush window', async () => {
        const { call, rowsOf } = clientOf(app, user);
        const attachmentId = await createAttachment(app.db);
        // The status is shown to the request's submitter only (and request admins).
        const requestId = await createRequest(app.db, { submitterUserId: user.userId });
        const viewPath = `/api/v1/attachmentDisplay/view?id=${attachmentId}`;
        // A first view stores the attachment's digest (a write): done before the table is locked.
        const first = await call(viewPath);
        assert.equal(first.response.status, 200);
        const etag = first.response.headers.get('etag');
        assert.ok(etag !== null);
        await until(async () => (await rowsOf([first.requestId])).length === 1);

        const lock = await lockAuditTable(app);
        let answered;
        try {
          answered = [
            await call('/api/v1/patient/search?term=Nobodyzzq'),
            await call(viewPath),
            await call(viewPath, { method: 'HEAD' }),
            await call(viewPath, { headers: { 'if-none-match': etag } }),
            await call(`/api/v1/request/queue/status?request_id=${requestId}`),
          ];
          assert.deepEqual(
            answered.map(({ response }) => response.status),
            [200, 200, 200, 304, 200],
            'answered while their rows cannot be committed',
          );
          for (const { response } of answered) await response.arrayBuffer();
          assert.deepEqual(await rowsOf(answered.map((a) => a.requestId)), [], 'nothing committed yet');
        } finally {
          await lock.release();
        }
        const ids = answered.map((a) => a.requestId);
        await until(async () => (await rowsOf(ids)).length === ids.length);
        const rows = await rowsOf(ids);
        assert.deepEqual(
          rows.map((row) => [row.client_request_id, row.action, row.outcome, row.user_id]),
          [
            [ids[0], 'patient.search', 200, user.userId],
            [ids[1], 'attachment.view', 200, user.userId],
            [ids[2], 'attachment.view', 200, user.userId],
            [ids[3], 'attachment.view', 304, user.userId],
            [ids[4], 'queue.status', 200, user.userId],
          ],
        );
        assert.equal(rows[3]!.target_ids, String(attachmentId));
      });

      // `blocksEveryWrite`: SQLite's lock is the database's one write lock, so the readiness probe's own
      // write cannot commit either (it waits for the connection's busy timeout, then reports that).
      const outages = [
        { name: 'a lock holds inserts back', start: lockAuditTable, blocksEveryWrite: dialect === 'sqlite' },
        { name: 'inserts fail', start: renameAuditTable, blocksEveryWrite: false },
      ];
      for (const outage of outages)
        it(`answers reads 503 in their shapes and reports not ready while rows wait longer than AUDIT_MAX_LAG_MS (${outage.name}), then writes every row of a read answered 200`, async () => {
          const { call, rowsOf } = clientOf(app, user);
          const attachmentId = await createAttachment(app.db);
          const viewPath = `/api/v1/attachmentDisplay/view?id=${attachmentId}`;
          assert.equal((await call(viewPath)).response.status, 200);
          await until(async () => app.app.auditSink!.stats().backlogRows === 0, { what: 'an idle sink' });
          const before = app.app.auditSink!.stats();

          const lock = await outage.start(app);
          const answered: string[] = [];
          const refused: string[] = [];
          try {
            await until(async () => {
              const { response, requestId } = await call('/api/v1/patient/search?term=Nobodyzzq');
              if (response.status === 200) answered.push(requestId);
              else {
                assert.equal(response.status, 503);
                assert.equal(response.headers.get('retry-after'), '5');
                assert.equal(await response.json(), 'Service Unavailable');
                refused.push(requestId);
              }
              return response.status === 503;
            });
            assert.ok(answered.length > 0, 'reads are answered while the lag is under its bound');

            const view = await call(viewPath);
            assert.equal(view.response.status, 503);
            assert.equal(view.response.headers.get('etag'), null);
            assert.match(view.response.headers.get('content-type') ?? '', /^application\/json/);
            assert.equal(await view.response.json(), 'Service Unavailable');
            const status = await call('/api/v1/request/queue/status?request_id=1');
            assert.equal(status.response.status, 503);
            assert.deepEqual(await status.response.json(), {
              success: 0,
              message: { system: 'Service Unavailable' },
            });
            refused.push(view.requestId, status.requestId);

            const readiness = await app.request('/readyz');
            assert.equal(readiness.status, 503);
            assert.deepEqual(await readiness.json(), {
              status: outage.blocksEveryWrite ? 'database not writable' : 'audit trail behind',
            });
            const metrics = await (await app.request('/metrics')).text();
            assert.match(metrics, /^audit_sink_refusing 1$/m);
            assert.ok(app.app.auditSink!.stats().readsRefused >= before.readsRefused + 3);
          } finally {
            await lock.release();
          }

          await until(async () => (await app.request('/readyz')).status === 200);
          const after = await call('/api/v1/patient/search?term=Nobodyzzq');
          assert.equal(after.response.status, 200);
          answered.push(after.requestId);
          await until(async () => (await rowsOf(answered)).length === answered.length);
          const rows = await rowsOf([...answered, ...refused]);
          assert.deepEqual(
            rows.map((row) => row.client_request_id).sort(),
            [...answered].sort(),
            'once each',
          );
          // The rows show before the thread's fsync and answer: the counters follow once it is idle.
          await until(async () => app.app.auditSink!.stats().backlogRows === 0);
          const metrics = await (await app.request('/metrics')).text();
          assert.match(metrics, /^audit_sink_refusing 0$/m);
          const written = /^audit_sink_rows_written_total (\d+)$/m.exec(metrics);
          assert.ok(written !== null && Number(written[1]) >= before.rowsWritten + answered.length);
          if (outage.start === renameAuditTable) {
            const retried = /^audit_sink_rows_retried_total (\d+)$/m.exec(metrics);
            assert.ok(
              retried !== null && Number(retried[1]) > before.rowsRetried,
              'failed batches were retried',
            );
          }
        });
    });

    describe('AUDIT_READS=async with its backlog bound', () => {
      let app: TestApp;
      let user: TestUser;
      before(async () => {
        app = await startTestApp(dialect, {
          env: { AUDIT_FLUSH_MS: '20', AUDIT_MAX_LAG_MS: '600000', AUDIT_MAX_BACKLOG: '3' },
        });
        user = await createUser(app.db);
      });
      after(async () => {
        await app.close();
      });

      it('refuses reads once AUDIT_MAX_BACKLOG rows wait, drops none of them, and answers again once they are written', async () => {
        const { call, rowsOf } = clientOf(app, user);
        const search = () => call('/api/v1/patient/search?term=Nobodyzzq');
        const outage = await renameAuditTable(app);
        let answered;
        let refused;
        try {
          answered = [await search(), await search(), await search()];
          assert.deepEqual(
            answered.map(({ response }) => response.status),
            [200, 200, 200],
          );
          refused = await search();
          assert.equal(refused.response.status, 503);
          assert.equal(await refused.response.json(), 'Service Unavailable');
          const readiness = await app.request('/readyz');
          assert.equal(readiness.status, 503);
          assert.deepEqual(await readiness.json(), { status: 'audit trail behind' });
          assert.equal(app.app.auditSink!.refusal(), 'backlog');
        } finally {
          await outage.release();
        }
        await until(async () => (await app.request('/readyz')).status === 200);
        const next = await search();
        assert.equal(next.response.status, 200);
        const ids = [...answered, next].map((a) => a.requestId);
        await until(async () => (await rowsOf(ids)).length === 4);
        assert.deepEqual(await rowsOf([refused.requestId]), []);
      });
    });
  });
});
