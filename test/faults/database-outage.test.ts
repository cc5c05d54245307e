// test-needs: processes
/**
 * The database becomes unavailable, then returns. During the outage no request answers 500: those that
 * need the database answer 503 `Service Unavailable` in their route's contract shape with `Retry-After`;
 * afterwards the server and the queue worker recover by themselves, and every request answered 200 before
 * or after the outage is in the database.
 *
 * PostgreSQL and MariaDB/MySQL: the app reaches the server through a TCP proxy in this test; the outage
 * closes the proxy's listener and destroys every connection (the server going away: resets, then refused
 * connections). `/readyz` answers 503 during it.
 *
 * SQLite: an embedded file cannot become unreachable while the process holds it open; the realistic outage
 * is another process (a CLI import, a backup or maintenance session) holding the write lock longer than
 * `busy_timeout`. Reads keep working (WAL), but `/readyz` answers 503 `database not writable` (its probe
 * write cannot commit, as no write can); reads are answered and their audit rows wait in the read audit
 * sink until the lock is released; every write answers 503 instead of 500 once `busy_timeout` (lowered to
 * 100 ms on the app's connection here) expires with SQLITE_BUSY, and nothing is half written (sign/add
 * removes the files it wrote).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { DatabaseSync } from 'node:sqlite';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import type { Config } from '../../src/config.ts';
import type { Database } from '../../src/db/database.ts';
import { openDatabase } from '../../src/db/database.ts';
import { createQueueWorker, enqueueRequest } from '../../src/modules/request-queue/index.ts';
import { createRoutineCatalog, defineRoutine } from '../../src/modules/filing/index.ts';
import { createAuthenticator } from '../../src/modules/user/index.ts';
import { createUser } from '../factories.ts';
import type { TestUser } from '../factories.ts';
import type { TestRequestType } from '../factories-queue.ts';
import { ADD_PATH, createRequestType, createRoutineName } from '../factories-queue.ts';
import type { SignableEvent } from '../factories-signature.ts';
import { b64, createSignableEvent, makePng } from '../factories-signature.ts';
import type { TestDatabase } from '../harness.ts';
import { createTestDatabase, forEachDialect } from '../harness.ts';
import { until } from '../until.ts';
import { checkConsistency } from './consistency.ts';

const WORKER = new URL('../../src/main/worker.ts', import.meta.url).pathname;

interface Outage {
  cut(): Promise<void>;
  restore(): Promise<void>;
  close(): Promise<void>;
}

/** A TCP proxy on 127.0.0.1 to `target`; `cut` stops listening and destroys every connection. */
async function startProxy(target: { host: string; port: number }): Promise<Outage & { port: number }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
    }
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
  await listen(0);
  const port = (server.address() as net.AddressInfo).port;
  const cut = async () => {
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of sockets) socket.destroy();
    await closed;
  };
  return {
    port,
    cut,
    restore: () => listen(port),
    close: async () => {
      if (server.listening) await cut();
    },
  };
}

/** Another connection holding SQLite's write lock (`BEGIN IMMEDIATE` and a write) until `restore`. */
function sqliteWriteLock(file: string): Outage {
  const other = new DatabaseSync(file);
  return {
    cut: async () => {
      other.exec('BEGIN IMMEDIATE');
      other.exec("UPDATE request_queue SET idle_yield_ms = idle_yield_ms WHERE request_queue = ''");
    },
    restore: async () => {
      other.exec('ROLLBACK');
    },
    close: async () => {
      if (other.isTransaction) other.exec('ROLLBACK');
      other.close();
    },
  };
}

forEachDialect((dialect) => {
  describe(`database outage [${dialect}]`, () => {
    // A server database can go away; embedded SQLite is made unavailable by another writer.
    const isServer = dialect !== 'sqlite';
    let testDb: TestDatabase;
    let appDatabase: Database;
    let outage: Outage;
    let config: Config;
    let baseUrl: string;
    let close: () => Promise<void>;
    let user: TestUser;
    let type: TestRequestType;
    let appUrl: string;
    let isCut = false;

    before(async () => {
      testDb = await createTestDatabase(dialect);
      if (isServer) {
        const real = new URL(testDb.url);
        const defaultPort = dialect === 'mysql' ? 3306 : 5432;
        const proxy = await startProxy({ host: real.hostname, port: Number(real.port || defaultPort) });
        const proxied = new URL(testDb.url);
        proxied.hostname = '127.0.0.1';
        proxied.port = String(proxy.port);
        outage = proxy;
        appUrl = proxied.toString();
        config = loadConfig({ ...testDb.env, DATABASE_URL: appUrl });
        appDatabase = await openDatabase(config.database, { poolSize: 5 });
      } else {
        config = loadConfig(testDb.env);
        appUrl = testDb.url;
        appDatabase = testDb.database;
        await sql`PRAGMA busy_timeout = 100`.execute(appDatabase.db);
        outage = sqliteWriteLock(testDb.url.slice('sqlite:'.length));
      }
      config = { ...config, signRateLimitPerMinute: 0, authFailureLimitPerMinute: 0 };
      const routineName = await createRoutineName(testDb.db);
      type = await createRequestType(testDb.db, { routineName });
      await testDb.db
        .updateTable('request_queue')
        .set({ idle_yield_ms: 200 })
        .where('request_queue', '=', type.queue)
        .execute();
      user = await createUser(testDb.db);
      const app = await buildApp({
        config,
        database: appDatabase,
        files: testDb.files,
        authenticator: createAuthenticator(appDatabase.db, { cacheTtlMs: config.authCacheTtlMs }),
      });
      await app.listen({ host: '127.0.0.1', port: 0 });
      baseUrl = `http://127.0.0.1:${(app.server.address() as net.AddressInfo).port}`;
      const worker = createQueueWorker({
        database: appDatabase,
        config: { ...config, workerQueues: [type.queue] },
        catalog: createRoutineCatalog([
          defineRoutine({
            name: routineName,
            timeoutMs: 10_000,
            retry: 'backoff',
            run: async (ctx) => {
              await ctx.trx
                .insertInto('request_details')
                .values({ request_id: ctx.routine.request_id, name: 'ran', value: 'yes' })
                .execute();
            },
          }),
        ]),
      });
      await worker.start();
      close = async () => {
        // A test that failed during the outage left it: end it first, so that the app's read audit sink
        // can write its last rows when the app closes.
        if (isCut) await outage.restore();
        await app.close();
        await worker.stop();
        await outage.close();
        if (appDatabase !== testDb.database) await appDatabase.close();
      };
    });
    after(async () => {
      await close();
      await testDb.drop();
    });

    const request = (path: string, init?: RequestInit) => fetch(`${baseUrl}${path}`, init);
    const sign = (event: SignableEvent) =>
      request('/api/v1/sign/add', {
        method: 'POST',
        body: JSON.stringify({
          unique_identifier: event.code,
          extra_info: JSON.stringify({ e_id: event.elementId, e_t_id: event.esignElementTypeId }),
          image: b64(makePng()),
        }),
      });
    const queueAdd = (n: number) =>
      request(`${ADD_PATH}?request_type=${type.requestType}`, {
        method: 'POST',
        headers: { authorization: user.authorization, 'content-type': 'application/json' },
        body: JSON.stringify({ data: { n } }),
      });

    /** Sends one sign/add and one queue add per event; returns what was answered 200. */
    async function submitAll(events: SignableEvent[]) {
      const saved: number[] = [];
      const queued: number[] = [];
      const statuses: number[] = [];
      await Promise.all(
        events.map(async (event, i) => {
          const signed = await sign(event);
          statuses.push(signed.status);
          if (signed.status === 200 && (await signed.json()) === 'Correct signature saved!')
            saved.push(event.eventId);
          const added = await queueAdd(i);
          statuses.push(added.status);
          const body = (await added.json()) as { request_id?: number };
          if (added.status === 200 && typeof body.request_id === 'number') queued.push(body.request_id);
        }),
      );
      return { saved, queued, statuses };
    }

    const routinesComplete = (ids: number[]) => async () => {
      const rows = await testDb.db
        .selectFrom('request_routine')
        .select('status')
        .where('request_id', 'in', ids)
        .execute();
      return rows.length === ids.length && rows.every((r) => r.status === 'COMPLETE');
    };

    it('answers 503 in each contract shape during the outage, never 500, and recovers by itself with nothing answered 200 lost', async () => {
      const events = [];
      for (let i = 0; i < 12; i += 1) events.push(await createSignableEvent(testDb.db));
      const newcomer = await createUser(testDb.db);

      const beforeOutage = await submitAll(events.slice(0, 4));
      assert.deepEqual(beforeOutage.statuses, new Array<number>(8).fill(200));
      await until(routinesComplete(beforeOutage.queued));

      const readsDuringOutage: string[] = [];
      await outage.cut();
      isCut = true;
      // Not ready on any: a server database does not answer; SQLite answers reads but cannot write.
      const readiness = await request('/readyz');
      assert.equal(readiness.status, 503);
      assert.deepEqual(await readiness.json(), {
        status: isServer ? 'database unreachable' : 'database not writable',
      });
      assert.equal((await request('/healthz')).status, 200);

      const during = await submitAll(events.slice(4, 8));
      assert.deepEqual(during.statuses, new Array<number>(8).fill(503), 'every write answers 503');

      const signed = await sign(events[4]!);
      assert.equal(signed.status, 503);
      assert.equal(signed.headers.get('retry-after'), '5');
      assert.equal(signed.headers.get('access-control-allow-origin'), '*');
      assert.equal(await signed.json(), 'Service Unavailable');
      const added = await queueAdd(99);
      assert.equal(added.status, 503);
      assert.equal(added.headers.get('retry-after'), '5');
      assert.deepEqual(await added.json(), { success: 0, message: { system: 'Service Unavailable' } });
      // Credentials not yet cached need the database too: 503, not a 401 that would blame the caller.
      const uncached = await request(`${ADD_PATH}?request_type=${type.requestType}`, {
        method: 'POST',
        headers: { authorization: newcomer.authorization, 'content-type': 'application/json' },
        body: '{"data":{}}',
      });
      if (isServer) {
        assert.equal(uncached.status, 503);
        assert.deepEqual(await uncached.json(), { success: 0, message: { system: 'Service Unavailable' } });
        const search = await request('/api/v1/patient/search?term=Smith', {
          headers: { authorization: user.authorization },
        });
        assert.equal(search.status, 503);
        assert.equal(await search.json(), 'Service Unavailable');
        const view = await request('/api/v1/attachmentdisplay/view?id=1', {
          headers: { authorization: user.authorization },
        });
        assert.equal(view.status, 503);
        const status = await request('/api/v1/request/queue/status?request_id=1', {
          headers: { authorization: user.authorization },
        });
        assert.equal(status.status, 503);
        assert.deepEqual(await status.json(), { success: 0, message: { system: 'Service Unavailable' } });
      } else {
        assert.equal(uncached.status, 503, 'the intake write is refused');
        // The database reads fine. A read's audit row cannot be written while another connection holds
        // the write lock: the read audit sink keeps it (AUDIT_READS=async) and writes it once the lock is
        // released; the read is answered (reads fail closed only past AUDIT_MAX_LAG_MS, audit-sink.test.ts).
        const status = await request(`/api/v1/request/queue/status?request_id=${beforeOutage.queued[0]}`, {
          headers: { authorization: user.authorization, 'x-request-id': 'read-during-outage' },
        });
        assert.equal(status.status, 200);
        readsDuringOutage.push('read-during-outage');
      }

      await outage.restore();
      isCut = false;
      await until(async () => (await request('/readyz')).status === 200);
      await until(async () => {
        if (readsDuringOutage.length === 0) return true;
        const audited = await sql<{ n: number }>`select count(*) as n from audit_event
          where client_request_id in (${sql.join(readsDuringOutage)})`.execute(testDb.db);
        return Number(audited.rows[0]!.n) === readsDuringOutage.length;
      });
      const afterOutage = await submitAll(events.slice(8, 12));
      assert.deepEqual(afterOutage.statuses, new Array<number>(8).fill(200));
      // The worker resumes by itself: the requests queued after the outage run to completion.
      await until(routinesComplete(afterOutage.queued));

      for (const answered of [beforeOutage, afterOutage]) {
        const logs = await testDb.db
          .selectFrom('signature_import_log')
          .select('event_id')
          .where('status_id', '=', 4)
          .where('event_id', 'in', answered.saved)
          .execute();
        assert.equal(logs.length, answered.saved.length, 'every saved signature is stored');
        const details = await testDb.db
          .selectFrom('request_details')
          .select('request_id')
          .where('request_id', 'in', answered.queued)
          .where('name', '=', 'ran')
          .execute();
        assert.equal(details.length, answered.queued.length, 'every queued request ran exactly once');
      }
      assert.equal(
        await testDb.db
          .selectFrom('signature_import_log')
          .select('id')
          .where('event_id', 'in', [...during.saved, ...events.slice(4, 8).map((e) => e.eventId)])
          .where('status_id', '=', 4)
          .execute()
          .then((rows) => rows.length),
        0,
        'nothing refused during the outage was saved',
      );
      assert.deepEqual(await checkConsistency(testDb.db, testDb.filesDir), { problems: [], orphanFiles: [] });
    });

    if (isServer) {
      it('keeps the worker process running through the outage; it completes requests queued meanwhile once the database returns', async () => {
        const noop = await createRequestType(testDb.db, { routineName: 'NOOP' });
        await testDb.db
          .updateTable('request_queue')
          .set({ idle_yield_ms: 300 })
          .where('request_queue', '=', noop.queue)
          .execute();
        const child = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', WORKER], {
          env: {
            ...process.env,
            ...testDb.env,
            DATABASE_URL: appUrl,
            WORKER_QUEUES: noop.queue,
            LOG_LEVEL: 'info',
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let output = '';
        child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
        child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
        try {
          await until(async () => output.includes('queue worker ready'));
          const first = await enqueueRequest(testDb.database, { requestType: noop.requestType });
          await until(routinesComplete([first.requestId]));

          await outage.cut();
          const second = await enqueueRequest(testDb.database, { requestType: noop.requestType });
          await until(async () => output.includes('queue worker pass failed'));
          assert.equal(child.exitCode, null, 'the worker process survives the outage');
          const [waiting] = await testDb.db
            .selectFrom('request_routine')
            .select('status')
            .where('request_id', '=', second.requestId)
            .execute();
          assert.equal(waiting!.status, 'NEW');

          await outage.restore();
          await until(routinesComplete([second.requestId]));
          const executions = await testDb.db
            .selectFrom('request_routine_execution')
            .innerJoin(
              'request_routine',
              'request_routine.id',
              'request_routine_execution.request_routine_id',
            )
            .select('request_routine_execution.id')
            .where('request_routine.request_id', '=', second.requestId)
            .execute();
          assert.equal(executions.length, 1, 'run exactly once');
          assert.equal(child.exitCode, null);
        } finally {
          const exited = once(child, 'exit');
          child.kill('SIGTERM');
          await exited;
        }
      });
    }
  });
});
