// test-needs: processes
/**
 * The real server process is SIGKILLed while many signature imports and queue intakes are in flight.
 * Afterwards: no half-written rows (every signature has its files and its status-4 log, every request its
 * routine and REQUEST_DATA row, every protected_file row its file), nothing that was answered 200 is
 * missing, and the orphan files a kill between file write and commit can leave are removed by the sweep,
 * which a restarted server runs at start.
 */
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sweepOrphanFiles } from '../../src/files/orphan-sweep.ts';
import { createUser } from '../factories.ts';
import { ADD_PATH } from '../factories-queue.ts';
import { b64, createCviEventType, createSignableEvent, makePng } from '../factories-signature.ts';
import type { TestDatabase } from '../harness.ts';
import { createTestDatabase, forEachDialect } from '../harness.ts';
import type { ServerProcess } from './consistency.ts';
import { until } from '../until.ts';
import { checkConsistency, filesOnDisk, startServerProcess } from './consistency.ts';

const SIGNS = 40;
const QUEUE_CLIENTS = 8;

forEachDialect((dialect) => {
  describe(`server killed mid-flight [${dialect}]`, () => {
    let testDb: TestDatabase;
    let server: ServerProcess | undefined;
    before(async () => {
      testDb = await createTestDatabase(dialect);
    });
    after(async () => {
      server?.child.kill('SIGKILL');
      await testDb.drop();
    });

    it('leaves no half-written rows after SIGKILL during concurrent sign/add and queue add, and the sweep leaves no orphan file', async (t) => {
      const eventType = await createCviEventType(testDb.db);
      const events = [];
      for (let i = 0; i < SIGNS; i += 1) events.push(await createSignableEvent(testDb.db, { eventType }));
      const user = await createUser(testDb.db);
      server = await startServerProcess({
        ...testDb.env,
        SIGN_RATE_LIMIT_PER_MINUTE: '0',
        AUTH_FAILURE_LIMIT_PER_MINUTE: '0',
        ORPHAN_SWEEP_INTERVAL_MS: '0',
      });
      const base = server.baseUrl;
      // Prime the credential cache, so that the intakes below reach their transactions quickly.
      const queueInit = (i: number): RequestInit => ({
        method: 'POST',
        headers: { authorization: user.authorization, 'content-type': 'application/json' },
        body: JSON.stringify({ data: { n: i, padding: 'x'.repeat(50_000) } }),
      });
      assert.equal((await fetch(`${base}${ADD_PATH}`, queueInit(-1))).status, 200);

      const savedEvents: number[] = [];
      const queuedIds: number[] = [];
      let killed: Promise<unknown> | undefined;
      const child = server.child;
      // Killed once both kinds have committed a few, with most of the rest still in flight.
      const killSoon = () => {
        if (savedEvents.length >= 3 && queuedIds.length >= 3 && killed === undefined) {
          killed = once(child, 'exit');
          child.kill('SIGKILL');
        }
      };
      const image = makePng(160, 120, { isNoisy: true });
      const signs = events.map(async (event) => {
        const response = await fetch(`${base}/api/v1/sign/add`, {
          method: 'POST',
          body: JSON.stringify({
            unique_identifier: event.code,
            extra_info: JSON.stringify({ e_id: event.elementId, e_t_id: event.esignElementTypeId }),
            image: b64(image),
            orig_image: b64(makePng(160, 120, { isNoisy: true })),
          }),
        });
        const body = await response.json();
        if (response.status === 200 && body === 'Correct signature saved!') savedEvents.push(event.eventId);
        killSoon();
      });
      // Intake clients that keep submitting until the kill, so that intakes are in flight when it comes.
      let sent = 0;
      const adds = Array.from({ length: QUEUE_CLIENTS }, async () => {
        while (killed === undefined) {
          const response = await fetch(`${base}${ADD_PATH}`, queueInit((sent += 1)));
          const body = (await response.json()) as { request_id?: number };
          if (response.status === 200 && typeof body.request_id === 'number') queuedIds.push(body.request_id);
          killSoon();
        }
      });
      const outcomes = await Promise.allSettled([...signs, ...adds]);
      if (killed === undefined) {
        killed = once(child, 'exit');
        child.kill('SIGKILL');
      }
      await killed;
      const cut = outcomes.filter((o) => o.status === 'rejected').length;
      t.diagnostic(
        `saved ${savedEvents.length} signatures, queued ${queuedIds.length}, ${cut} cut by the kill`,
      );
      assert.ok(cut > 0, 'the kill came while requests were in flight');

      const state = await checkConsistency(testDb.db, testDb.filesDir);
      assert.deepEqual(state.problems, []);
      t.diagnostic(
        `${state.orphanFiles.length} orphan file(s) of ${(await filesOnDisk(testDb.filesDir)).length} left by the kill`,
      );

      // Nothing answered 200 is missing.
      const logged = await testDb.db
        .selectFrom('signature_import_log')
        .select('event_id')
        .where('status_id', '=', 4)
        .execute();
      for (const eventId of savedEvents)
        assert.ok(
          logged.some((log) => log.event_id === eventId),
          `saved signature of event ${eventId} is stored`,
        );
      const requests = await testDb.db.selectFrom('request').select('id').execute();
      for (const id of queuedIds)
        assert.ok(
          requests.some((r) => r.id === id),
          `queued request ${id} is stored`,
        );

      await sweepOrphanFiles(testDb.database, testDb.files, { olderThanMs: 0 });
      const swept = await checkConsistency(testDb.db, testDb.filesDir);
      assert.deepEqual(swept, { problems: [], orphanFiles: [] });
      assert.ok((await filesOnDisk(testDb.filesDir)).every((f) => /^[0-9a-f]{40}$/.test(path.basename(f))));
    });

    it('sweeps orphan and temporary files when the server starts again, and serves sign/add', async () => {
      const orphan = path.join(testDb.filesDir, 'f', 'e', 'd', `fed${'0'.repeat(37)}`);
      const temp = `${path.join(testDb.filesDir, 'f', 'e', 'd', `fed${'1'.repeat(37)}`)}.a1b2c3d4e5f6.tmp`;
      await mkdir(path.dirname(orphan), { recursive: true });
      await writeFile(orphan, 'orphan');
      await writeFile(temp, 'partial');
      server = await startServerProcess({
        ...testDb.env,
        SIGN_RATE_LIMIT_PER_MINUTE: '0',
        ORPHAN_SWEEP_GRACE_MS: '0',
      });
      await until(async () => (await checkConsistency(testDb.db, testDb.filesDir)).orphanFiles.length === 0, {
        what: 'the start-up sweep removing the orphans',
      });
      const event = await createSignableEvent(testDb.db);
      const response = await fetch(`${server.baseUrl}/api/v1/sign/add`, {
        method: 'POST',
        body: JSON.stringify({
          unique_identifier: event.code,
          extra_info: JSON.stringify({ e_id: event.elementId, e_t_id: event.esignElementTypeId }),
          image: b64(makePng()),
        }),
      });
      assert.equal(response.status, 200);
      assert.equal(await response.json(), 'Correct signature saved!');
      assert.deepEqual(await checkConsistency(testDb.db, testDb.filesDir), { problems: [], orphanFiles: [] });
      const exited = once(server.child, 'exit');
      server.child.kill('SIGTERM');
      await exited;
      server = undefined;
    });
  });
});
