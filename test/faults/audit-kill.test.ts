// test-needs: processes
/**
 * The read audit sink (AUDIT_READS=async) when the real server process ends under read load:
 * - SIGKILL: the rows lost are only those of reads answered within the flush window before the kill. Every
 *   search answered 200 is compared with the audit rows; each missing row must belong to a read answered
 *   at most AUDIT_FLUSH_MS before the kill, plus a margin for a loaded machine (the bound on loss, not a
 *   speed figure: a sink that stopped writing, or dropped a batch, would miss rows of reads answered long
 *   before). The counts and the oldest lost answer are printed as diagnostics.
 * - SIGTERM: every row of a read answered 200 is written before the process exits 0, with a flush
 *   interval so long that the rows are still waiting when the signal comes.
 * Each read carries its own `X-Request-Id`, found in the audit rows as `client_request_id`.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import type { TestUser } from '../factories.ts';
import { createUser } from '../factories.ts';
import type { TestDatabase } from '../harness.ts';
import { createTestDatabase, forEachDialect } from '../harness.ts';
import type { ServerProcess } from './consistency.ts';
import { startServerProcess } from './consistency.ts';

const CLIENTS = 16;
/** Reads answered 200 before the kill. */
const KILL_AFTER = 3000;
const FLUSH_MS = 50;
/** How long before the kill a read whose row was lost may have been answered. */
const LOSS_BOUND_MS = FLUSH_MS + 2000;
const SEARCH = '/api/v1/patient/search?term=Nobodyzzq';

forEachDialect((dialect) => {
  describe(`read audit when the server process ends [${dialect}]`, () => {
    let testDb: TestDatabase;
    let user: TestUser;
    let server: ServerProcess | undefined;
    before(async () => {
      testDb = await createTestDatabase(dialect);
      user = await createUser(testDb.db);
    });
    after(async () => {
      server?.child.kill('SIGKILL');
      await testDb.drop();
    });

    const search = (base: string, requestId: string) =>
      fetch(`${base}${SEARCH}`, {
        headers: { authorization: user.authorization, 'x-request-id': requestId },
      }).then(async (response) => {
        await response.arrayBuffer();
        return response.status;
      });

    const auditedIds = async (prefix: string): Promise<Set<string>> => {
      const rows = await sql<{ client_request_id: string }>`select client_request_id from audit_event
        where client_request_id like ${`${prefix}%`}`.execute(testDb.db);
      return new Set(rows.rows.map((row) => row.client_request_id));
    };

    it('loses on SIGKILL under read load only the rows of reads answered within the flush window before the kill', async (t) => {
      server = await startServerProcess({ ...testDb.env, AUDIT_FLUSH_MS: String(FLUSH_MS) });
      const { baseUrl, child } = server;
      const exited = once(child, 'exit');
      // Prime the credential cache, so that every read below is answered from the first one on.
      assert.equal(await search(baseUrl, 'kill-prime'), 200);

      const answered: { id: string; atMs: number }[] = [];
      let killedAtMs: number | undefined;
      let sent = 0;
      const clients = Array.from({ length: CLIENTS }, async (_, client) => {
        while (killedAtMs === undefined) {
          const id = `kill-${client}-${(sent += 1)}`;
          let status: number;
          try {
            status = await search(baseUrl, id);
          } catch {
            return; // cut by the kill
          }
          if (status === 200) answered.push({ id, atMs: performance.now() });
          if (answered.length >= KILL_AFTER && killedAtMs === undefined) {
            killedAtMs = performance.now();
            child.kill('SIGKILL');
          }
        }
      });
      await Promise.all(clients);
      await exited;
      server = undefined;
      assert.ok(killedAtMs !== undefined);

      const audited = await auditedIds('kill-');
      const lost = answered.filter((read) => !audited.has(read.id));
      const ages = lost.map((read) => killedAtMs! - read.atMs);
      const oldestMs = Math.max(0, ...ages);
      const inWindow = answered.filter((read) => killedAtMs! - read.atMs <= FLUSH_MS).length;
      t.diagnostic(
        `${answered.length} reads answered 200, ${lost.length} audit rows lost, ` +
          `${inWindow} answered within ${FLUSH_MS} ms of the kill; oldest lost answer ${oldestMs.toFixed(1)} ms before it`,
      );
      for (const age of ages)
        assert.ok(
          age <= LOSS_BOUND_MS,
          `a lost row's read was answered ${age.toFixed(0)} ms before the kill`,
        );
    });

    it('writes the row of every read answered 200 before it exits on SIGTERM under read load', async () => {
      server = await startServerProcess({
        ...testDb.env,
        AUDIT_FLUSH_MS: '10000',
        AUDIT_MAX_LAG_MS: '60000',
      });
      const { baseUrl, child } = server;
      const exited = once(child, 'exit');
      const answered: string[] = [];
      let isStopping = false;
      let sent = 0;
      const clients = Array.from({ length: CLIENTS }, async (_, client) => {
        // Until the server stops accepting: its answers turn into 503s or refused connections.
        for (;;) {
          const id = `term-${client}-${(sent += 1)}`;
          let status: number;
          try {
            status = await search(baseUrl, id);
          } catch {
            return;
          }
          if (status === 200) answered.push(id);
          else if (isStopping) return;
          if (answered.length >= 200 && !isStopping) {
            isStopping = true;
            child.kill('SIGTERM');
          }
        }
      });
      await Promise.all(clients);
      const [code] = (await exited) as [number | null];
      const output = server.output();
      server = undefined;
      assert.equal(code, 0, 'a graceful stop');
      assert.match(output, /audit sink: writing the rows left/, 'rows were still waiting at SIGTERM');

      const audited = await auditedIds('term-');
      assert.deepEqual(
        answered.filter((id) => !audited.has(id)),
        [],
        'every read answered 200 is audited',
      );
    });
  });
});
