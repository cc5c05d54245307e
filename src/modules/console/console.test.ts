import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { formatDateTime } from '../../db/database.ts';
import { createUser } from '../../../test/factories.ts';
import { b64, makePng } from '../../../test/factories-signature.ts';
import {
  ConsoleClient,
  createFailedRequest,
  createFailedUpload,
  createFiledAttachment,
  createOperator,
  csrfOf,
  versionOf,
} from '../../../test/factories-console.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import { CONSOLE_CSP } from './index.ts';

/** The audit rows of `action`, newest first. */
async function auditRows(app: TestApp, action: string) {
  const result = await sql<{
    user_id: number | null;
    target_type: string | null;
    target_ids: string | null;
    outcome: number;
  }>`select user_id, target_type, target_ids, outcome from audit_event where action = ${action} order by id desc`.execute(
    app.db,
  );
  return result.rows;
}

async function setSessionTimes(app: TestApp, column: 'last_seen_at' | 'created_at', minutesAgo: number) {
  const at = formatDateTime(new Date(Date.now() - minutesAgo * 60_000));
  await sql`update console_session set ${sql.ref(column)} = ${at}`.execute(app.db);
}

forEachDialect((dialect) => {
  describe(`operations console over HTTP [${dialect}]`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect, { env: { TIME_ZONE: 'Europe/London' } });
    });
    after(() => app.close());

    describe('sign-in and sessions', () => {
      it('sends an anonymous visitor to the login form, keeping where they were going', async () => {
        const client = new ConsoleClient(app);
        const response = await client.get('/console/requests?status=FAILED');
        assert.equal(response.status, 303);
        assert.equal(
          response.headers.get('location'),
          `/console/login?next=${encodeURIComponent('/console/requests?status=FAILED')}`,
        );
      });

      it('signs in with a signed HttpOnly SameSite=Strict session cookie, writes an audit row, and signs out', async () => {
        const user = await createOperator(app.db);
        const client = new ConsoleClient(app);
        const login = await client.signIn(user);
        assert.equal(login.status, 303);
        assert.equal(login.headers.get('location'), '/console/');
        const cookie = login.headers.getSetCookie().find((c) => c.startsWith('cra_console='))!;
        assert.match(cookie, /; Path=\/console; HttpOnly; SameSite=Strict$/);
        assert.doesNotMatch(cookie, /Secure/);
        // Signed: value.signature.
        assert.match(cookie, /^cra_console=[\w-]+\.[\w+/=%]+;/);
        const home = await client.get('/console/');
        assert.equal(home.status, 200);
        assert.equal(home.headers.get('content-security-policy'), CONSOLE_CSP);
        assert.equal(home.headers.get('x-frame-options'), 'DENY');
        assert.equal(home.headers.get('cache-control'), 'no-store');
        const html = await home.text();
        assert.match(html, new RegExp(`Signed in as <strong>${user.username}</strong>`));
        assert.doesNotMatch(html, /<script>|style="/);
        const [row] = await auditRows(app, 'console.login');
        assert.equal(row?.user_id, user.userId);
        assert.equal(row?.outcome, 303);

        const logout = await client.post('/console/logout', { _csrf: csrfOf(html, '/console/logout') });
        assert.equal(logout.status, 303);
        assert.equal(logout.headers.get('location'), '/console/login?signed_out=1');
        assert.equal(client.cookies.has('cra_console'), false);
        assert.equal((await client.get('/console/')).status, 303);
      });

      it('refuses a session cookie with a forged signature', async () => {
        const user = await createOperator(app.db);
        const client = new ConsoleClient(app);
        await client.signIn(user);
        const value = client.cookies.get('cra_console')!;
        client.cookies.set('cra_console', `${value.split('.')[0]}.forged`);
        assert.equal((await client.get('/console/')).status, 303);
      });

      it('answers 401 with the form again for a wrong password, and 429 once the failure brake engages', async () => {
        const braked = await startTestApp(dialect, { env: { AUTH_FAILURE_LIMIT_PER_MINUTE: '2' } });
        try {
          const user = await createOperator(braked.db);
          const client = new ConsoleClient(braked);
          const first = await client.signIn(user, 'wrong');
          assert.equal(first.status, 401);
          const html = await first.text();
          assert.match(html, /Unknown username or wrong password\./);
          assert.doesNotMatch(html, /wrong"/);
          assert.equal((await client.signIn(user, 'wrong')).status, 401);
          const third = await client.signIn(user, 'wrong');
          assert.equal(third.status, 429);
          assert.match(third.headers.get('retry-after') ?? '', /^\d+$/);
          // Braked before any password check: the right password is refused too.
          assert.equal((await client.signIn(user)).status, 429);
          assert.equal(client.cookies.has('cra_console'), false);
        } finally {
          await braked.close();
        }
      });

      it('ends a session idle for longer than CONSOLE_IDLE_MINUTES, and one older than CONSOLE_SESSION_HOURS', async () => {
        const user = await createOperator(app.db);
        const client = new ConsoleClient(app);
        await client.signIn(user);
        assert.equal((await client.get('/console/')).status, 200);
        await setSessionTimes(app, 'last_seen_at', 31);
        const idle = await client.get('/console/');
        assert.equal(idle.status, 303);
        assert.match(idle.headers.get('location') ?? '', /expired=1/);
        const page = await (await client.get(idle.headers.get('location')!)).text();
        assert.match(page, /Your session has ended/);

        await client.signIn(user);
        await setSessionTimes(app, 'created_at', 12 * 60 + 1);
        assert.equal((await client.get('/console/')).status, 303);
      });

      it('ends the session of a user disabled meanwhile', async () => {
        const user = await createOperator(app.db);
        const client = new ConsoleClient(app);
        await client.signIn(user);
        await app.db.updateTable('user').set({ active: 0 }).where('id', '=', user.userId).execute();
        assert.equal((await client.get('/console/')).status, 303);
      });

      it('refuses a login form without its pre-login cookie (403)', async () => {
        const user = await createOperator(app.db);
        const client = new ConsoleClient(app);
        const html = await (await client.get('/console/login')).text();
        client.cookies.clear();
        const response = await client.post('/console/login', {
          _csrf: csrfOf(html),
          username: user.username,
          password: user.password,
        });
        assert.equal(response.status, 403);
        assert.equal(client.cookies.has('cra_console'), false);
      });
    });

    describe('authorisation and forms', () => {
      it('answers 403 pages to a user without the screen operation', async () => {
        const user = await createUser(app.db, { roles: ['API access'] });
        const client = new ConsoleClient(app);
        await client.signIn(user);
        const home = await (await client.get('/console/')).text();
        assert.match(home, /no console operation yet/);
        for (const path of [
          '/console/requests',
          '/console/signatures',
          '/console/attachments',
          '/console/audit',
          '/console/audit.csv',
        ]) {
          const response = await client.get(path);
          assert.equal(response.status, 403, path);
          assert.match(response.headers.get('content-type') ?? '', /^text\/html/);
          assert.match(await response.text(), /does not have the operation/);
        }
      });

      it('refuses a forged, missing or stale CSRF token with 403 and changes nothing', async () => {
        const user = await createOperator(app.db);
        const failed = await createFailedRequest(app.db);
        const client = new ConsoleClient(app);
        await client.signIn(user);
        const page = `/console/requests/${failed.requestId}`;
        const action = `/console/routines/${failed.routineId}/void`;
        const html = await (await client.get(page)).text();
        const version = versionOf(html, action);
        const token = csrfOf(html, action);
        assert.equal((await client.post(action, { version })).status, 403);
        assert.equal((await client.post(action, { version, _csrf: `${token}x` })).status, 403);
        assert.equal((await client.post(action, { version, _csrf: 'abc-def' })).status, 403);
        // A token of an earlier session of the same user is stale.
        await client.post('/console/logout', { _csrf: csrfOf(html, '/console/logout') });
        await client.signIn(user);
        const stale = await client.post(action, { version, _csrf: token });
        assert.equal(stale.status, 403);
        assert.match(await stale.text(), /stale or forged/);
        const routine = await app.db
          .selectFrom('request_routine')
          .select('status')
          .where('id', '=', failed.routineId)
          .executeTakeFirstOrThrow();
        assert.equal(routine.status, 'FAILED');
        // A form posted after the session ended is refused too.
        const other = new ConsoleClient(app);
        assert.equal((await other.post(action, { version, _csrf: token })).status, 403);
      });

      it('answers 404 pages for unknown ids', async () => {
        const user = await createOperator(app.db);
        const client = new ConsoleClient(app);
        await client.signIn(user);
        for (const path of [
          '/console/requests/999999',
          '/console/requests/abc',
          '/console/requests/1/parts/999999',
          '/console/signatures/999999',
          '/console/signatures/999999/original',
          '/console/attachments/999999',
          '/console/no-such-page',
        ]) {
          const response = await client.get(path);
          assert.equal(response.status, 404, path);
          assert.match(response.headers.get('content-type') ?? '', /^text\/html/, path);
        }
        const html = await (await client.get('/console/')).text();
        const token = csrfOf(html, '/console/logout');
        for (const path of [
          '/console/routines/999999/retry',
          '/console/routines/999999/void',
          '/console/signatures/999999/ignore',
        ]) {
          const response = await client.post(path, {
            _csrf: token,
            version: 'FAILED/1/',
            status: 'NEW',
            try_count: '0',
          });
          assert.equal(response.status, 404, path);
        }
      });

      it('answers 400 pages for filters that cannot be one', async () => {
        const user = await createOperator(app.db);
        const client = new ConsoleClient(app);
        await client.signIn(user);
        for (const path of [
          '/console/requests?overall=sometimes',
          '/console/requests?status=DONE',
          '/console/requests?from=yesterday',
          '/console/requests?before=-3',
          '/console/requests?status=NEW&status=FAILED',
          '/console/signatures?status=9',
          '/console/audit?outcome=9xx',
          '/console/audit?before=now',
          '/console/attachments?event=abc',
        ]) {
          assert.equal((await client.get(path)).status, 400, path);
        }
      });
    });

    describe('request admin', () => {
      it('lists requests by the reference filters with their overall status', async () => {
        const user = await createOperator(app.db);
        const failed = await createFailedRequest(app.db);
        const pending = await createFailedRequest(app.db, { status: 'NEW' });
        const done = await createFailedRequest(app.db, { status: 'COMPLETE', tries: 1 });
        const client = new ConsoleClient(app);
        await client.signIn(user);
        const list = async (query: string) => {
          const html = await (await client.get(`/console/requests?${query}`)).text();
          return [...html.matchAll(/href="\/console\/requests\/(\d+)">#/g)].map((m) => Number(m[1]));
        };
        const failedIds = await list('overall=failed');
        assert.ok(failedIds.includes(failed.requestId));
        assert.ok(!failedIds.includes(pending.requestId) && !failedIds.includes(done.requestId));
        const incomplete = await list('overall=incomplete');
        assert.ok(incomplete.includes(pending.requestId) && !incomplete.includes(failed.requestId));
        const complete = await list('overall=complete');
        assert.ok(complete.includes(done.requestId) && !complete.includes(failed.requestId));
        assert.deepEqual(await list(`routine=${failed.routineName}`), [failed.requestId]);
        assert.deepEqual(await list(`queue=${pending.queue}&status=NEW`), [pending.requestId]);
        assert.ok((await list('retried=1')).includes(failed.requestId));
        assert.ok(!(await list('retried=1')).includes(done.requestId));
        const html = await (await client.get(`/console/requests?routine=${failed.routineName}`)).text();
        assert.match(html, new RegExp(`FAILED \\(${failed.routineName}\\) \\(20\\)`));
      });

      it('pages with a keyset: the next page continues below the last request shown', async () => {
        const user = await createOperator(app.db);
        const queue = `q_${Date.now()}`;
        const ids: number[] = [];
        for (let i = 0; i < 53; i += 1)
          ids.push((await createFailedRequest(app.db, { queue, status: 'NEW' })).requestId);
        const client = new ConsoleClient(app);
        await client.signIn(user);
        const first = await (await client.get(`/console/requests?queue=${queue}`)).text();
        const firstIds = [...first.matchAll(/href="\/console\/requests\/(\d+)">#/g)].map((m) => Number(m[1]));
        assert.deepEqual(firstIds, ids.slice(-50).reverse());
        const next = /href="([^"]+)">Older requests/.exec(first)![1]!.replaceAll('&amp;', '&');
        const second = await (await client.get(next)).text();
        const secondIds = [...second.matchAll(/href="\/console\/requests\/(\d+)">#/g)].map((m) =>
          Number(m[1]),
        );
        assert.deepEqual(secondIds, ids.slice(0, 3).reverse());
        assert.doesNotMatch(second, /Older requests/);
      });

      it('retries a FAILED routine with the chosen status, try count and next try, and audits it', async () => {
        const user = await createOperator(app.db);
        const failed = await createFailedRequest(app.db);
        const client = new ConsoleClient(app);
        await client.signIn(user);
        const page = `/console/requests/${failed.requestId}`;
        const action = `/console/routines/${failed.routineId}/retry`;
        const html = await (await client.get(page)).text();
        const response = await client.post(action, {
          _csrf: csrfOf(html, action),
          version: versionOf(html, action),
          status: 'RETRY',
          try_count: '3',
          next_try: '2030-07-01T10:30',
        });
        assert.equal(response.status, 303);
        assert.equal(response.headers.get('location'), `${page}?result=retried`);
        const routine = await app.db
          .selectFrom('request_routine')
          .selectAll()
          .where('id', '=', failed.routineId)
          .executeTakeFirstOrThrow();
        assert.equal(routine.status, 'RETRY');
        assert.equal(routine.try_count, 3);
        // 10:30 in London in July is 09:30 UTC.
        assert.equal(routine.next_try_date_time, '2030-07-01 09:30:00');
        const [row] = await auditRows(app, 'console.request.retry');
        assert.deepEqual(
          [row?.user_id, row?.target_type, row?.target_ids, row?.outcome],
          [user.userId, 'request_routine', String(failed.routineId), 303],
        );
        assert.match(
          await (await client.get(`${page}?result=retried`)).text(),
          /The routine is queued again\./,
        );
      });

      it('refuses bad retry input with 422 and changes nothing', async () => {
        const user = await createOperator(app.db);
        const failed = await createFailedRequest(app.db);
        const client = new ConsoleClient(app);
        await client.signIn(user);
        const action = `/console/routines/${failed.routineId}/retry`;
        const html = await (await client.get(`/console/requests/${failed.requestId}`)).text();
        const bad: Record<string, string>[] = [
          { status: 'COMPLETE', try_count: '0' },
          { status: 'NEW', try_count: '-1' },
          { status: 'NEW', try_count: '5000' },
          { status: 'NEW', try_count: '0', next_try: '2030-02-30T10:00' },
        ];
        for (const fields of bad) {
          const response = await client.post(action, {
            _csrf: csrfOf(html, action),
            version: versionOf(html, action),
            ...fields,
          });
          assert.equal(response.status, 422, JSON.stringify(fields));
        }
        const routine = await app.db
          .selectFrom('request_routine')
          .selectAll()
          .where('id', '=', failed.routineId)
          .executeTakeFirstOrThrow();
        assert.deepEqual([routine.status, routine.try_count], ['FAILED', 20]);
      });

      it('answers "changed meanwhile" (409) to a form older than the routine, never a lost update', async () => {
        const user = await createOperator(app.db);
        const failed = await createFailedRequest(app.db);
        const client = new ConsoleClient(app);
        await client.signIn(user);
        const page = `/console/requests/${failed.requestId}`;
        const retry = `/console/routines/${failed.routineId}/retry`;
        const html = await (await client.get(page)).text();
        // Someone else retried it meanwhile, and the worker already ran it again.
        await app.db
          .updateTable('request_routine')
          .set({ status: 'COMPLETE', try_count: 21 })
          .where('id', '=', failed.routineId)
          .execute();
        const response = await client.post(retry, {
          _csrf: csrfOf(html, retry),
          version: versionOf(html, retry),
          status: 'NEW',
          try_count: '0',
        });
        assert.equal(response.status, 409);
        assert.match(
          await response.text(),
          /Changed meanwhile: the routine changed since you loaded the page \(now COMPLETE, 21 tries\)/,
        );
        const routine = await app.db
          .selectFrom('request_routine')
          .selectAll()
          .where('id', '=', failed.routineId)
          .executeTakeFirstOrThrow();
        assert.deepEqual([routine.status, routine.try_count], ['COMPLETE', 21]);
        // The same for a re-queue of the whole request.
        const requeue = `/console/requests/${failed.requestId}/requeue`;
        await app.db
          .updateTable('request_routine')
          .set({ try_count: 22 })
          .where('id', '=', failed.routineId)
          .execute();
        const stale = await client.post(requeue, {
          _csrf: csrfOf(html, requeue),
          version: versionOf(html, requeue),
        });
        assert.equal(stale.status, 409);
        assert.equal(
          (
            await app.db
              .selectFrom('request_routine')
              .select('status')
              .where('id', '=', failed.routineId)
              .executeTakeFirstOrThrow()
          ).status,
          'COMPLETE',
        );
      });

      it('runs a whole request again: every routine not pending goes back to NEW', async () => {
        const user = await createOperator(app.db);
        const done = await createFailedRequest(app.db, { status: 'COMPLETE', tries: 1 });
        const client = new ConsoleClient(app);
        await client.signIn(user);
        const page = `/console/requests/${done.requestId}`;
        const requeue = `/console/requests/${done.requestId}/requeue`;
        const html = await (await client.get(page)).text();
        const response = await client.post(requeue, {
          _csrf: csrfOf(html, requeue),
          version: versionOf(html, requeue),
        });
        assert.equal(response.status, 303);
        const routine = await app.db
          .selectFrom('request_routine')
          .selectAll()
          .where('id', '=', done.routineId)
          .executeTakeFirstOrThrow();
        assert.deepEqual([routine.status, routine.try_count, routine.next_try_date_time], ['NEW', 0, null]);
      });

      if (dialect === 'postgres') {
        it('answers "busy" (409) while a worker holds the request, and changes nothing', async () => {
          const user = await createOperator(app.db);
          const pending = await createFailedRequest(app.db, { status: 'NEW' });
          const client = new ConsoleClient(app);
          await client.signIn(user);
          const action = `/console/routines/${pending.routineId}/void`;
          const html = await (await client.get(`/console/requests/${pending.requestId}`)).text();
          // A worker's claim: the request and routine rows locked by an open transaction.
          const worker = await app.db.startTransaction().execute();
          try {
            await worker
              .selectFrom('request')
              .select('id')
              .where('id', '=', pending.requestId)
              .forUpdate()
              .execute();
            const response = await client.post(action, {
              _csrf: csrfOf(html, action),
              version: versionOf(html, action),
            });
            assert.equal(response.status, 409);
            assert.match(await response.text(), /A worker is running this request right now/);
          } finally {
            await worker.rollback().execute();
          }
          const routine = await app.db
            .selectFrom('request_routine')
            .select('status')
            .where('id', '=', pending.routineId)
            .executeTakeFirstOrThrow();
          assert.equal(routine.status, 'NEW');
        });
      }

      it('offers payload parts for download without credentials', async () => {
        const user = await createOperator(app.db);
        const failed = await createFailedRequest(app.db);
        const part = await app.db
          .insertInto('attachment_data')
          .values({
            request_id: failed.requestId,
            attachment_mnemonic: 'HEADER_DATA',
            attachment_type: 'NONE',
            mime_type: 'application/json',
            text_data: JSON.stringify({
              'user-agent': 'device/1',
              Authorization: 'Basic c2VjcmV0OnNlY3JldA==',
              cookie: 'a=b',
            }),
          })
          .returning('id')
          .executeTakeFirstOrThrow();
        const client = new ConsoleClient(app);
        await client.signIn(user);
        const html = await (await client.get(`/console/requests/${failed.requestId}`)).text();
        assert.match(html, /Download HEADER_DATA/);
        const response = await client.get(`/console/requests/${failed.requestId}/parts/${part.id}`);
        assert.equal(response.status, 200);
        assert.equal(response.headers.get('content-disposition'), 'attachment');
        assert.equal(response.headers.get('x-content-type-options'), 'nosniff');
        const body = await response.text();
        assert.deepEqual(JSON.parse(body), { 'user-agent': 'device/1' });
        // A part of another request is not reachable through this one.
        const other = await createFailedRequest(app.db);
        assert.equal((await client.get(`/console/requests/${other.requestId}/parts/${part.id}`)).status, 404);
      });
    });

    describe('signature import log', () => {
      it('re-posts a manual crop through sign/add, then marks the import Manual (5)', async () => {
        const user = await createOperator(app.db);
        const { event, logId } = await createFailedUpload(app);
        const client = new ConsoleClient(app);
        await client.signIn(user);
        const page = `/console/signatures/${logId}`;
        const html = await (await client.get(page)).text();
        assert.match(html, new RegExp(`value="${event.code}"`));
        const image = `data:image/png;base64,${b64(makePng(160, 90))}`;
        const response = await client.post(`${page}/crop`, {
          _csrf: csrfOf(html, `${page}/crop`),
          code: event.code,
          image,
        });
        assert.equal(response.status, 303);
        assert.match(
          response.headers.get('location') ?? '',
          new RegExp(`^${page}\\?result=saved&import=\\d+&marked=1$`),
        );
        const log = await app.db
          .selectFrom('signature_import_log')
          .selectAll()
          .where('id', '=', logId)
          .executeTakeFirstOrThrow();
        assert.equal(log.status_id, 5);
        const signatures = await app.db
          .selectFrom('ophcocvi_signature')
          .selectAll()
          .where('element_id', '=', event.elementId)
          .execute();
        assert.equal(signatures.length, 1);
        const saved = await app.db
          .selectFrom('signature_import_log')
          .selectAll()
          .where('event_id', '=', event.eventId)
          .where('status_id', '=', 4)
          .executeTakeFirstOrThrow();
        assert.equal(saved.filename, log.filename);
        // Done once: a second crop of the same import is "changed meanwhile".
        const again = await client.post(`${page}/crop`, {
          _csrf: csrfOf(html, `${page}/crop`),
          code: event.code,
          image,
        });
        assert.equal(again.status, 409);
        assert.equal(
          (
            await app.db
              .selectFrom('ophcocvi_signature')
              .select('id')
              .where('element_id', '=', event.elementId)
              .execute()
          ).length,
          1,
        );
      });

      it('links a manual crop and the import made from it both ways, the crop showing its event and patient', async () => {
        const user = await createOperator(app.db);
        const { event, logId } = await createFailedUpload(app);
        // A failed row whose code resolved no event, with its original kept (written before the service kept
        // originals for resolved events only, or by OpenEyes's own sign/add).
        await app.db
          .updateTable('signature_import_log')
          .set({ event_id: null })
          .where('id', '=', logId)
          .execute();
        const { last_name: lastName } = await app.db
          .selectFrom('contact')
          .select('last_name')
          .where('id', '=', event.patient.contactId)
          .executeTakeFirstOrThrow();
        const client = new ConsoleClient(app);
        await client.signIn(user);
        const page = `/console/signatures/${logId}`;
        const html = await (await client.get(page)).text();
        assert.match(html, /<dt>Event<\/dt><dd>—<\/dd>/);
        const response = await client.post(`${page}/crop`, {
          _csrf: csrfOf(html, `${page}/crop`),
          code: event.code,
          image: `data:image/png;base64,${b64(makePng(160, 90))}`,
        });
        assert.equal(response.status, 303);
        const importId = Number(/import=(\d+)/.exec(response.headers.get('location') ?? '')?.[1]);
        assert.ok(importId > logId);

        const crop = await (await client.get(page)).text();
        assert.match(
          crop,
          new RegExp(
            `<dt>Imported as</dt><dd><a href="/console/signatures/${importId}">import #${importId}</a> \\(Success\\)`,
          ),
        );
        assert.match(
          crop,
          new RegExp(
            `<dt>Event</dt><dd>${event.eventId} \\(OphCoCvi\\) <span class="hint">\\(of import #${importId}\\)`,
          ),
        );
        assert.match(crop, new RegExp(`<dt>Patient</dt><dd>${lastName}, `));
        const imported = await (await client.get(`/console/signatures/${importId}`)).text();
        assert.match(
          imported,
          new RegExp(`<dt>Cropped from</dt><dd><a href="/console/signatures/${logId}">import #${logId}</a>`),
        );
        assert.match(imported, new RegExp(`<dt>Event</dt><dd>${event.eventId} \\(OphCoCvi\\)</dd>`));

        const list = await (await client.get('/console/signatures')).text();
        const rowOf = (id: number) =>
          new RegExp(`<tr>\\s*<td><a href="/console/signatures/${id}">#${id}</a></td>[\\s\\S]*?</tr>`).exec(
            list,
          )?.[0] ?? '';
        const cropRow = rowOf(logId);
        assert.match(
          cropRow,
          new RegExp(`Imported as <a href="/console/signatures/${importId}">#${importId}</a>`),
        );
        assert.match(cropRow, new RegExp(`<td>${event.eventId} \\(OphCoCvi\\)</td>`));
        assert.match(cropRow, new RegExp(`<td>${lastName}, `));
        const importRow = rowOf(importId);
        assert.match(
          importRow,
          new RegExp(`Cropped from <a href="/console/signatures/${logId}">#${logId}</a>`),
        );
        assert.match(importRow, new RegExp(`<td>${lastName}, `));
      });

      it('accepts a crop larger than the sign/add body limit (a PNG crop may outweigh its original)', async () => {
        const user = await createOperator(app.db);
        const { event, logId } = await createFailedUpload(app);
        const client = new ConsoleClient(app);
        await client.signIn(user);
        const page = `/console/signatures/${logId}`;
        const html = await (await client.get(page)).text();
        const image = `data:image/png;base64,${b64(makePng(1000, 560, { isNoisy: true }))}`;
        assert.ok(image.length > app.config.limits.signatureBodyBytes, String(image.length));
        const response = await client.post(`${page}/crop`, {
          _csrf: csrfOf(html, `${page}/crop`),
          code: event.code,
          image,
        });
        assert.equal(response.status, 303);
        assert.match(response.headers.get('location') ?? '', /result=saved&import=\d+&marked=1$/);
      });

      it("shows sign/add's 422 messages for a crop that cannot be saved, and keeps the import failed", async () => {
        const user = await createOperator(app.db);
        const { logId } = await createFailedUpload(app);
        const client = new ConsoleClient(app);
        await client.signIn(user);
        const page = `/console/signatures/${logId}`;
        const html = await (await client.get(page)).text();
        const wrongCode = await client.post(`${page}/crop`, {
          _csrf: csrfOf(html, `${page}/crop`),
          code: 'ZZZZZZ',
          image: 'data:image/png;base64,AAAA',
        });
        assert.equal(wrongCode.status, 422);
        assert.match(
          await wrongCode.text(),
          /sign\/add answered 422 &quot;Missing element and element type ids Event not found Invalid image data/,
        );
        const log = await app.db
          .selectFrom('signature_import_log')
          .select('status_id')
          .where('id', '=', logId)
          .executeTakeFirstOrThrow();
        assert.equal(log.status_id, 3);
      });

      it('marks an import Manual Ignore (6) once, and serves its original capture', async () => {
        const user = await createOperator(app.db);
        const { logId } = await createFailedUpload(app);
        const client = new ConsoleClient(app);
        await client.signIn(user);
        const original = await client.get(`/console/signatures/${logId}/original`);
        assert.equal(original.status, 200);
        assert.equal(original.headers.get('content-type'), 'image/png');
        assert.equal(original.headers.get('x-content-type-options'), 'nosniff');
        const page = `/console/signatures/${logId}`;
        const html = await (await client.get(page)).text();
        const ignore = `${page}/ignore`;
        assert.equal((await client.post(ignore, { _csrf: csrfOf(html, ignore) })).status, 303);
        const log = await app.db
          .selectFrom('signature_import_log')
          .selectAll()
          .where('id', '=', logId)
          .executeTakeFirstOrThrow();
        assert.deepEqual([log.status_id, log.last_modified_user_id], [6, user.userId]);
        const again = await client.post(ignore, { _csrf: csrfOf(html, ignore) });
        assert.equal(again.status, 409);
        assert.match(await again.text(), /Changed meanwhile: this import is now Manual Ignore/);
        const failedOnly = await (await client.get('/console/signatures?status=3')).text();
        assert.doesNotMatch(failedOnly, new RegExp(`href="/console/signatures/${logId}"`));
        const ignored = await (await client.get('/console/signatures?status=6')).text();
        assert.match(ignored, new RegExp(`href="/console/signatures/${logId}"`));
      });
    });

    describe('attachments and audit', () => {
      it('finds attachments by event and by patient identifier, and opens them with the API headers', async () => {
        const user = await createOperator(app.db);
        const filed = await createFiledAttachment(app.db);
        const client = new ConsoleClient(app);
        await client.signIn(user);
        for (const query of [`event=${filed.eventId}`, `identifier=${filed.identifier}`]) {
          const html = await (await client.get(`/console/attachments?${query}`)).text();
          assert.match(html, new RegExp(`href="/console/attachments/${filed.attachmentId}"`), query);
          assert.match(html, new RegExp(`src="/console/attachments/${filed.attachmentId}/thumbnail"`), query);
        }
        const view = await client.get(`/console/attachments/${filed.attachmentId}`);
        assert.equal(view.status, 200);
        assert.match(
          await view.text(),
          new RegExp(`<img class="capture" src="/console/attachments/${filed.attachmentId}/file"`),
        );
        const opened = await client.get(`/console/attachments/${filed.attachmentId}/file`);
        assert.equal(opened.status, 200);
        assert.equal(opened.headers.get('content-type'), 'image/png');
        assert.equal(opened.headers.get('x-content-type-options'), 'nosniff');
        assert.equal(
          opened.headers.get('content-security-policy'),
          "default-src 'none'; frame-ancestors 'none'",
        );
        assert.match(opened.headers.get('etag') ?? '', /^"/);
        const thumbnail = await client.get(`/console/attachments/${filed.attachmentId}/thumbnail`);
        assert.equal(thumbnail.status, 200);
        // A payload row that is not filed under an event does not open here.
        const failed = await createFailedRequest(app.db);
        const part = await app.db
          .insertInto('attachment_data')
          .values({
            request_id: failed.requestId,
            attachment_mnemonic: 'REQUEST_BLOB',
            attachment_type: 'NONE',
            mime_type: 'image/png',
            blob_data: Buffer.from('x'),
          })
          .returning('id')
          .executeTakeFirstOrThrow();
        assert.equal((await client.get(`/console/attachments/${part.id}`)).status, 404);
        assert.equal((await client.get(`/console/attachments/${part.id}/file`)).status, 404);
        const [refused, opening] = await auditRows(app, 'console.attachment.open');
        assert.deepEqual([refused?.target_ids, refused?.outcome], [String(part.id), 404]);
        assert.deepEqual(
          [opening?.target_type, opening?.target_ids],
          ['attachment_data', String(filed.attachmentId)],
        );
      });

      it('searches the audit log by user, action and outcome, and exports the selection as CSV', async () => {
        const auditor = await createOperator(app.db);
        const other = await createOperator(app.db);
        const otherClient = new ConsoleClient(app);
        await otherClient.signIn(other);
        await otherClient.get('/console/requests/999999');
        const client = new ConsoleClient(app);
        await client.signIn(auditor);
        const html = await (
          await client.get(`/console/audit?user=${other.username}&action=console.request.view&outcome=4xx`)
        ).text();
        const rows = [...html.matchAll(/<td>console\.request\.view<\/td>/g)];
        assert.equal(rows.length, 1);
        assert.match(html, new RegExp(`<td>${other.username}</td>`));
        const csv = await client.get(`/console/audit.csv?user=${other.username}`);
        assert.equal(csv.status, 200);
        assert.match(csv.headers.get('content-type') ?? '', /^text\/csv/);
        assert.match(
          csv.headers.get('content-disposition') ?? '',
          /^attachment; filename="audit-\d{14}\.csv"$/,
        );
        const lines = (await csv.text()).trimEnd().split('\r\n');
        assert.equal(
          lines[0],
          'id,time,time_utc,user_id,username,action,target_type,target_ids,outcome,client_address,request_id',
        );
        const actions = lines.slice(1).map((line) => line.split(',')[5]);
        assert.deepEqual(actions, ['console.request.view', 'console.login']);
        assert.ok(lines.slice(1).every((line) => line.split(',')[4] === other.username));
        const none = await (await client.get('/console/audit?user=nobody-at-all')).text();
        assert.match(none, /No audit row matches/);
      });

      it("offers every audited route's action in its filter, by its label: the API's and the console's", async () => {
        const auditor = await createOperator(app.db);
        const client = new ConsoleClient(app);
        await client.signIn(auditor);
        const html = await (await client.get('/console/audit?action=dicomweb.store')).text();
        const offered = [...html.matchAll(/<option value="([\w.-]+)"(?: selected)?>([^<]+)<\/option>/g)];
        const expected = new Set((app.app.auditedRoutes ?? []).map((route) => route.action));
        assert.deepEqual(new Set(offered.map((option) => option[1])), expected);
        for (const action of ['dicomweb.store', 'console.request.list', 'console.request.patient-search'])
          assert.ok(expected.has(action), action);
        // Every action offered can be searched for (a hyphen included).
        const hyphenated = await client.get('/console/audit?action=console.request.patient-search');
        assert.equal(hyphenated.status, 200);
        assert.match(html, /<option value="dicomweb\.store" selected>DICOMweb store<\/option>/);
        assert.match(html, /<option value="patient\.search">Patient search<\/option>/);
      });
    });
  });
});
