/**
 * `/readyz` says whether the service can work, writes included: when the database answers reads but
 * cannot write, every audited write answers 503 (its audit row cannot be written), and reads too once
 * their rows have waited past AUDIT_MAX_LAG_MS (set low here), so the instance must leave the load
 * balancer's rotation; it is ready again once writes succeed.
 *
 * SQLite: the database lives on a real 32 MiB tmpfs, filled up to the last byte once its WAL file is
 * empty (SQLITE_FULL on every write, reads still served). The room is for the migrations: their WAL
 * grows past 3 MiB when the checkpointer thread has not caught up. Needs `mount` (root, as in CI); skipped where mounting is not permitted.
 * PostgreSQL: the test's database is made read-only (`default_transaction_read_only`, the app's sessions
 * ended so that new ones take it): what a failover to a standby or a full disk's emergency read-only
 * looks like to the service. MariaDB/MySQL: the app's own account loses its write privileges.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, stat, statfs, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import type { Database } from '../../src/db/database.ts';
import { openDatabase } from '../../src/db/database.ts';
import { migrateToLatest } from '../../src/db/migrate.ts';
import { createLocalFileStore } from '../../src/files/file-store.ts';
import { createAuthenticator } from '../../src/modules/user/index.ts';
import { createUser } from '../factories.ts';
import type { TestUser } from '../factories.ts';
import type { TestApp, TestDatabase } from '../harness.ts';
import { createTestDatabase, forEachDialect, startTestApp } from '../harness.ts';
import { until } from '../until.ts';

/** The answer of `/readyz`. */
async function readiness(
  request: (path: string) => Promise<Response>,
): Promise<{ status: number; body: unknown }> {
  const response = await request('/readyz');
  return { status: response.status, body: await response.json() };
}

/** Resolves once `/readyz` answers `status` with `{ status: text }`; fails after 10 s. */
function untilReadiness(
  request: (path: string) => Promise<Response>,
  status: number,
  text: string,
): Promise<void> {
  return until(
    async () => {
      const answer = await readiness(request);
      return answer.status === status && JSON.stringify(answer.body) === JSON.stringify({ status: text });
    },
    { what: `/readyz ${status} ${text}`, timeoutMs: 10_000, intervalMs: 100 },
  );
}

/** The scenario both dialects share: `block` stops writes, `unblock` lets them through again. */
function itFollowsWritability(
  getApp: () => { request: (path: string, init?: RequestInit) => Promise<Response>; user: TestUser },
  blocking: { block(): Promise<void>; unblock(): Promise<void>; isPossible(): boolean },
): void {
  it('answers 503 "database not writable" while writes fail, and 200 again once they succeed', async (t) => {
    if (!blocking.isPossible()) {
      t.skip('mount -t tmpfs is not permitted here');
      return;
    }
    const { request, user } = getApp();
    const search = () =>
      request('/api/v1/patient/search?term=smith', { headers: { authorization: user.authorization } });
    assert.equal((await request('/readyz')).status, 200);
    assert.equal((await search()).status, 200);

    await blocking.block();
    try {
      await untilReadiness(request, 503, 'database not writable');
      // A read is answered while its audit row waits in the read audit sink, and refused once rows have
      // waited past AUDIT_MAX_LAG_MS: no read is answered unaudited for longer than that.
      await until(async () => (await search()).status === 503, {
        what: 'an audited read refused',
        timeoutMs: 10_000,
      });
    } finally {
      await blocking.unblock();
    }
    await untilReadiness(request, 200, 'ready');
    assert.equal((await search()).status, 200);
  });
}

forEachDialect((dialect) => {
  describe(`/readyz and a database that cannot write [${dialect}]`, () => {
    if (dialect === 'sqlite') {
      let dir: string;
      let isMounted = false;
      let database: Database | undefined;
      let app: FastifyInstance | undefined;
      let baseUrl: string;
      let user: TestUser;
      before(async () => {
        dir = await mkdtemp(path.join(tmpdir(), 'cra-ready-'));
        try {
          execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=32m', 'tmpfs', dir], { stdio: 'ignore' });
          isMounted = true;
        } catch {
          return;
        }
        const config = loadConfig({
          DATABASE_URL: `sqlite:${path.join(dir, 'records.db')}`,
          FILES_DIR: path.join(dir, 'files'),
          AUTH_FAILURE_LIMIT_PER_MINUTE: '0',
          AUDIT_MAX_LAG_MS: '300',
        });
        const opened = await openDatabase(config.database);
        database = opened;
        await migrateToLatest(opened);
        const authenticator = createAuthenticator(opened.db, { cacheTtlMs: config.authCacheTtlMs });
        const built = await buildApp({
          config,
          database: opened,
          files: createLocalFileStore(config.filesDir),
          authenticator,
        });
        app = built;
        await built.listen({ host: '127.0.0.1', port: 0 });
        baseUrl = `http://127.0.0.1:${(built.server.address() as { port: number }).port}`;
        user = await createUser(opened.db);
      });
      after(async () => {
        // Whatever the set-up opened is closed even when it failed part way (a database left open
        // keeps the test process alive).
        try {
          await app?.close();
          await database?.close();
        } finally {
          // Lazily: the WAL file's flusher closes its descriptor a moment after the database closes.
          if (isMounted) execFileSync('umount', ['-l', dir]);
          await rm(dir, { recursive: true, force: true });
        }
      });
      const filler = () => path.join(dir, 'filler');
      itFollowsWritability(() => ({ request: (p, init) => fetch(`${baseUrl}${p}`, init), user }), {
        isPossible: () => isMounted,
        async block() {
          // A WAL file keeps its size and is overwritten from its start after a checkpoint: with room in
          // it, small writes still succeed on a full disk. So the disk is full only once the WAL is empty
          // (checkpointed and truncated) and no block is left; a write of the service (the read audit
          // sink, the checkpointer) between the checkpoint and the filler leaves room in the WAL, and the
          // filling starts again.
          const wal = path.join(dir, 'records.db-wal');
          for (let attempt = 1; ; attempt += 1) {
            await rm(filler(), { force: true });
            await sql`pragma wal_checkpoint(truncate)`.execute(database!.db);
            const free = await statfs(dir);
            // A write between the two calls ends the filler at ENOSPC, the disk as full.
            await writeFile(filler(), Buffer.alloc(free.bavail * free.bsize)).catch((error: unknown) => {
              if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
            });
            const walBytes = await stat(wal).then(
              (s) => s.size,
              () => 0,
            );
            if (walBytes === 0 && (await statfs(dir)).bavail === 0) return;
            if (attempt === 20)
              throw new Error(`the disk was not filled with an empty WAL (${walBytes} bytes)`);
          }
        },
        unblock: () => rm(filler(), { force: true }),
      });
    } else if (dialect === 'mysql') {
      // MariaDB/MySQL have no read-only database: the app connects as an account of its own, whose
      // write privileges are revoked (what a read-only replica or a locked-down account looks like).
      const account = `cra_ro_${process.pid}`;
      let testDb: TestDatabase;
      let database: Database;
      let app: FastifyInstance;
      let baseUrl: string;
      let user: TestUser;
      let name: string;
      const admin = (statement: string) => sql.raw(statement).execute(testDb.db);
      const endSessions = async () => {
        const { rows } = await sql<{ id: number }>`
          select id from information_schema.processlist where user = ${account}`.execute(testDb.db);
        for (const { id } of rows) await admin(`kill ${Number(id)}`).catch(() => {});
      };
      before(async () => {
        testDb = await createTestDatabase(dialect);
        name = new URL(testDb.url).pathname.slice(1);
        await admin(`create user '${account}'@'127.0.0.1' identified by 'ro-password'`);
        await admin(`grant all on \`${name}\`.* to '${account}'@'127.0.0.1'`);
        const url = new URL(testDb.url);
        url.username = account;
        url.password = 'ro-password';
        const config = loadConfig({
          ...testDb.env,
          DATABASE_URL: url.toString(),
          AUTH_FAILURE_LIMIT_PER_MINUTE: '0',
        });
        database = await openDatabase(config.database, { poolSize: 3 });
        const authenticator = createAuthenticator(database.db, { cacheTtlMs: config.authCacheTtlMs });
        app = await buildApp({ config, database, files: testDb.files, authenticator });
        await app.listen({ host: '127.0.0.1', port: 0 });
        baseUrl = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
        user = await createUser(testDb.db);
      });
      after(async () => {
        await app.close();
        await database.close();
        await admin(`drop user if exists '${account}'@'127.0.0.1'`);
        await testDb.drop();
      });
      itFollowsWritability(() => ({ request: (p, init) => fetch(`${baseUrl}${p}`, init), user }), {
        isPossible: () => true,
        async block() {
          await admin(`revoke insert, update, delete on \`${name}\`.* from '${account}'@'127.0.0.1'`);
          // Database privileges apply to new sessions: end the app's.
          await endSessions();
        },
        async unblock() {
          await admin(`grant insert, update, delete on \`${name}\`.* to '${account}'@'127.0.0.1'`);
          await endSessions();
        },
      });
    } else {
      let app: TestApp;
      let user: TestUser;
      before(async () => {
        app = await startTestApp(dialect, { env: { AUDIT_MAX_LAG_MS: '300' } });
        user = await createUser(app.db);
      });
      after(() => app.close());
      const admin = async (statement: (name: string) => string) => {
        const name = new URL(app.url).pathname.slice(1);
        const adminDb = await openDatabase(
          loadConfig({ DATABASE_URL: process.env.TEST_DATABASE_URL }).database,
          {
            poolSize: 1,
          },
        );
        try {
          await sql.raw(statement(name)).execute(adminDb.db);
          // End the app's sessions: the pool's new ones take the setting.
          await sql`select pg_terminate_backend(pid) from pg_stat_activity where datname = ${name} and pid <> pg_backend_pid()`.execute(
            adminDb.db,
          );
        } finally {
          await adminDb.close();
        }
      };
      itFollowsWritability(() => ({ request: (p, init) => app.request(p, init), user }), {
        isPossible: () => true,
        block: () => admin((name) => `alter database ${name} set default_transaction_read_only = on`),
        unblock: () => admin((name) => `alter database ${name} reset default_transaction_read_only`),
      });
    }
  });
});
