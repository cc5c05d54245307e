/**
 * The admin actions wake the workers after they commit, once per dialect: a console retry and a re-queue
 * tell this process's worker (`onRequestQueued`) and, with notifications, every other process (the
 * `request_queue` channel), after the change is visible; the CLI's retry sends its notification before it
 * exits; a void wakes nobody; a running worker that polls once an hour runs a retried routine.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Config } from '../../../config.ts';
import { loadConfig } from '../../../config.ts';
import type { Subscription } from '../../../db/dialect.ts';
import { createRequestType, createRoutineName, routinesOf } from '../../../../test/factories-queue.ts';
import type { TestDatabase } from '../../../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../../../test/harness.ts';
import { runCli } from '../../../../test/run-cli.ts';
import { until } from '../../../../test/until.ts';
import { enqueueRequest } from '../intake/enqueue.ts';
import type { RequestQueuedEvent } from '../engine/queue-events.ts';
import { REQUEST_QUEUE_CHANNEL, onRequestQueued } from '../engine/queue-events.ts';
import { createRoutineCatalog, defineRoutine } from '../engine/routine-catalog.ts';
import { createQueueWorker } from '../engine/worker.ts';
import { requeueRequest, retryRoutine, voidRoutine } from './request-actions.ts';
import { requestVersion, routineVersion } from './request-detail.ts';

forEachDialect((dialect) => {
  describe(`admin actions wake the workers (${dialect})`, () => {
    let t: TestDatabase;
    let config: Config;

    before(async () => {
      t = await createTestDatabase(dialect);
      config = loadConfig(t.env);
    });
    after(async () => {
      await t.drop();
    });

    /** A request of a new type and queue whose one routine is FAILED. */
    async function failedRequest() {
      const routine = await createRoutineName(t.db);
      const type = await createRequestType(t.db, { routineName: routine });
      const { requestId } = await enqueueRequest(t.database, { requestType: type.requestType });
      await t.db
        .updateTable('request_routine')
        .set({ status: 'FAILED', try_count: 3 })
        .where('request_id', '=', requestId)
        .execute();
      const [row] = await routinesOf(t.db, requestId);
      return { requestId, routine, queue: type.queue, row: row! };
    }

    /** Collects this process's wake-ups and (with notifications) the channel's, until `stop`. */
    async function listen() {
      const events: RequestQueuedEvent[] = [];
      const notified: string[] = [];
      // What a reader outside the action's transaction saw when each wake-up was emitted.
      const seen: Promise<string | undefined>[] = [];
      const stopEvents = onRequestQueued((event) => {
        events.push(event);
        seen.push(
          t.db
            .selectFrom('request_routine')
            .select('status')
            .where('request_id', '=', event.requestId)
            .executeTakeFirst()
            .then((r) => r?.status),
        );
      });
      const subscription: Subscription | undefined = await t.database.dialect.subscribe(
        REQUEST_QUEUE_CHANNEL,
        { onMessage: (queue) => notified.push(queue), onReconnect: () => {} },
      );
      return {
        events,
        notified,
        seen,
        async stop() {
          stopEvents();
          await subscription?.close();
        },
      };
    }

    it('a console retry wakes the workers of its queue once committed', async () => {
      const failed = await failedRequest();
      const heard = await listen();
      try {
        const outcome = await retryRoutine(t.database, {
          routineId: failed.row.id,
          expectedVersion: routineVersion(failed.row),
          status: 'NEW',
          tryCount: 0,
          nextTry: null,
        });
        assert.equal(outcome.kind, 'done');
        assert.deepEqual(heard.events, [{ requestId: failed.requestId, queue: failed.queue }]);
        assert.deepEqual(await Promise.all(heard.seen), ['NEW']);
        if (t.database.dialect.hasNotifications)
          await until(() => heard.notified.includes(failed.queue), { what: 'the queue notification' });
      } finally {
        await heard.stop();
      }
    });

    it('a re-queue wakes the workers; a void wakes nobody', async () => {
      const requeued = await failedRequest();
      const voided = await failedRequest();
      const heard = await listen();
      try {
        const outcome = await requeueRequest(t.database, {
          requestId: requeued.requestId,
          expectedVersion: requestVersion([requeued.row]),
        });
        assert.equal(outcome.kind, 'done');
        const voidOutcome = await voidRoutine(t.database, {
          routineId: voided.row.id,
          expectedVersion: routineVersion(voided.row),
        });
        assert.equal(voidOutcome.kind, 'done');
        assert.deepEqual(heard.events, [{ requestId: requeued.requestId, queue: requeued.queue }]);
      } finally {
        await heard.stop();
      }
    });

    it("the CLI's queue retry sends the queue notification before it exits", async () => {
      const failed = await failedRequest();
      const heard = await listen();
      try {
        const result = await runCli(t.env, ['queue', 'retry', String(failed.requestId)]);
        assert.equal(result.status, 0, result.stderr);
        assert.equal((await routinesOf(t.db, failed.requestId))[0]?.status, 'NEW');
        if (t.database.dialect.hasNotifications)
          await until(() => heard.notified.includes(failed.queue), { what: 'the queue notification' });
      } finally {
        await heard.stop();
      }
    });

    it('a running worker that polls once an hour runs a routine retried in the console', async () => {
      const failed = await failedRequest();
      await t.db
        .updateTable('request_queue')
        .set({ idle_yield_ms: 3_600_000 })
        .where('request_queue', '=', failed.queue)
        .execute();
      const worker = createQueueWorker({
        database: t.database,
        config: { ...config, workerQueues: [failed.queue] },
        catalog: createRoutineCatalog([
          defineRoutine({ name: failed.routine, timeoutMs: 5000, retry: 'backoff', run: async () => {} }),
        ]),
      });
      await worker.start();
      try {
        // The worker has gone idle on the FAILED routine before the retry.
        const outcome = await retryRoutine(t.database, {
          routineId: failed.row.id,
          expectedVersion: routineVersion(failed.row),
          status: 'NEW',
          tryCount: 0,
          nextTry: null,
        });
        assert.equal(outcome.kind, 'done');
        await until(async () => (await routinesOf(t.db, failed.requestId))[0]?.status === 'COMPLETE', {
          what: 'the retried routine run after the wake-up',
        });
      } finally {
        await worker.stop();
      }
    });
  });
});
