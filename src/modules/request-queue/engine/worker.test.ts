// test-needs: processes
import assert from 'node:assert/strict';
import { sql } from 'kysely';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import type { Config } from '../../../config.ts';
import { loadConfig } from '../../../config.ts';
import type { Database } from '../../../db/database.ts';
import { openDatabase } from '../../../db/database.ts';
import {
  createRequestType,
  createRoutineName,
  executionsOf,
  routinesOf,
} from '../../../../test/factories-queue.ts';
import type { TestDatabase } from '../../../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../../../test/harness.ts';
import { until } from '../../../../test/until.ts';
import { createQueueEngine } from './engine.ts';
import { enqueueRequest } from '../intake/enqueue.ts';
import type { RoutineContext } from './routine-catalog.ts';
import { createRoutineCatalog, defineRoutine } from './routine-catalog.ts';
import { createQueueWorker } from './worker.ts';

const CHILD = new URL('../../../../test/queue-blocking-worker.ts', import.meta.url).pathname;

/** A routine that records one `request_details` row named `name`, with the worker's label as value. */
function recordingRoutine(routineName: string, label: string, then?: string) {
  return defineRoutine({
    name: routineName,
    timeoutMs: 10_000,
    retry: 'backoff',
    run: async (ctx: RoutineContext) => {
      await ctx.trx
        .insertInto('request_details')
        .values({ request_id: ctx.routine.request_id, name: routineName, value: label })
        .execute();
      if (then !== undefined) await ctx.addRoutine(then);
    },
  });
}

forEachDialect((dialect) => {
  describe(`queue worker (${dialect})`, () => {
    let testDb: TestDatabase;
    let config: Config;

    before(async () => {
      testDb = await createTestDatabase(dialect);
      config = loadConfig(testDb.env);
    });
    after(async () => {
      await testDb.drop();
    });

    it('starts a request queued while it idles, woken by intake rather than by its poll', async () => {
      const routine = await createRoutineName(testDb.db);
      const type = await createRequestType(testDb.db, { routineName: routine });
      // A one-minute poll: only the wake-up can complete the request within the wait below.
      await testDb.db
        .updateTable('request_queue')
        .set({ idle_yield_ms: 60_000 })
        .where('request_queue', '=', type.queue)
        .execute();
      let runs = 0;
      const worker = createQueueWorker({
        database: testDb.database,
        config: { ...config, workerQueues: [type.queue] },
        catalog: createRoutineCatalog([
          defineRoutine({
            name: routine,
            timeoutMs: 5000,
            retry: 'backoff',
            run: async () => {
              runs += 1;
            },
          }),
        ]),
      });
      await worker.start();
      try {
        // Let the slot reach its idle wait (a request queued before then is found by its first pass).
        await new Promise((resolve) => setTimeout(resolve, 50));
        const { requestId } = await enqueueRequest(testDb.database, {
          requestType: type.requestType,
          attachments: [],
        });
        await until(async () => (await routinesOf(testDb.db, requestId))[0]!.status === 'COMPLETE', {
          timeoutMs: 30_000,
          what: 'the routine of a request queued while the worker idles COMPLETE',
        });
        assert.equal(runs, 1);
      } finally {
        await worker.stop();
      }
    });

    it('npm run worker completes queued routines and stops cleanly on SIGTERM', async () => {
      const { requestId } = await enqueueRequest(testDb.database, { requestType: 'noop' });
      const child = spawn(
        process.execPath,
        [
          '--disable-warning=ExperimentalWarning',
          new URL('../../../main/worker.ts', import.meta.url).pathname,
        ],
        { env: { ...process.env, ...testDb.env, WORKER_QUEUES: 'default_queue' }, stdio: 'ignore' },
      );
      try {
        await until(async () => (await routinesOf(testDb.db, requestId))[0]!.status === 'COMPLETE');
      } finally {
        child.kill('SIGTERM');
      }
      const [code] = (await once(child, 'exit')) as [number | null];
      assert.equal(code, 0);
      const queue = await testDb.db
        .selectFrom('request_queue')
        .selectAll()
        .where('request_queue', '=', 'default_queue')
        .executeTakeFirstOrThrow();
      assert.ok(queue.total_success_count >= 1, 'the counters are flushed on stop');
    });

    it('counts the attempt of a worker killed mid-routine as a try, then runs it exactly once', async () => {
      const routine = await createRoutineName(testDb.db);
      const type = await createRequestType(testDb.db, { routineName: routine });
      const { requestId } = await enqueueRequest(testDb.database, {
        requestType: type.requestType,
        attachments: [],
      });
      const child = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', CHILD], {
        env: { ...process.env, ...testDb.env, QUEUE: type.queue, ROUTINE: routine },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let output = '';
      child.stdout.setEncoding('utf8');
      await new Promise<void>((resolve, reject) => {
        child.stdout.on('data', (chunk: string) => {
          output += chunk;
          if (output.includes('BLOCKED')) resolve();
        });
        child.once('exit', () => reject(new Error(`child exited early: ${output}`)));
      });
      let clock = Date.now();
      const engine = createQueueEngine({
        database: testDb.database,
        config,
        catalog: createRoutineCatalog([recordingRoutine(routine, 'survivor')]),
        now: () => new Date(clock),
      });
      if (dialect === 'postgres') {
        // While the first worker holds the request, another worker skips it.
        assert.deepEqual(await engine.step(type.queue), { kind: 'idle' });
      }
      child.kill('SIGKILL');
      await once(child, 'exit');

      const [left] = await routinesOf(testDb.db, requestId);
      assert.deepEqual([left!.status, left!.try_count], ['NEW', 0]);
      const details = () =>
        testDb.db.selectFrom('request_details').selectAll().where('request_id', '=', requestId).execute();
      assert.deepEqual(await details(), [], 'no partial write survives');
      assert.equal((await executionsOf(testDb.db, left!.id)).length, 0);

      // PostgreSQL ends the dead worker's session (rolling back, releasing its locks) once it sees the
      // closed socket: until then the request stays skipped. The next claim finds the attempt's start
      // mark and records that attempt as a failed try instead of running the routine.
      let outcome = await engine.step(type.queue);
      await until(async () => {
        if (outcome.kind === 'idle') outcome = await engine.step(type.queue);
        return outcome.kind !== 'idle';
      });
      assert.equal(outcome.kind === 'ran' && outcome.status, 'RETRY');
      assert.equal(outcome.kind === 'ran' && outcome.tryCount, 1);
      assert.match(outcome.kind === 'ran' ? (outcome.error ?? '') : '', /never finished/);
      const [counted] = await executionsOf(testDb.db, left!.id);
      assert.match(counted!.log_text ?? '', /never finished: its worker \(.+\) stopped mid-way/);
      assert.deepEqual(await details(), []);
      // Not due before its back-off.
      assert.deepEqual(await engine.step(type.queue), { kind: 'idle' });

      clock += 3 * 60_000;
      const rerun = await engine.step(type.queue);
      assert.equal(rerun.kind === 'ran' && rerun.status, 'COMPLETE');
      assert.equal(rerun.kind === 'ran' && rerun.tryCount, 2);
      assert.deepEqual(await engine.step(type.queue), { kind: 'idle' });
      assert.deepEqual(
        (await details()).map((d) => [d.name, d.value]),
        [[routine, 'survivor']],
      );
      assert.equal((await executionsOf(testDb.db, left!.id)).length, 2);
    });

    it('fails a routine for good once three attempts in a row never finished (a payload that kills its worker)', async () => {
      const routine = await createRoutineName(testDb.db);
      const type = await createRequestType(testDb.db, { routineName: routine });
      const { requestId } = await enqueueRequest(testDb.database, { requestType: type.requestType });
      // Retries are due at once, so that each new worker claims the routine again.
      const fast = { ...testDb.env, QUEUE_RETRY_BACKOFF: '1ms@20' };
      const engine = createQueueEngine({
        database: testDb.database,
        config: loadConfig(fast),
        catalog: createRoutineCatalog([recordingRoutine(routine, 'never')]),
      });
      const statuses: string[] = [];
      for (let attempt = 1; attempt <= 3; attempt += 1) {
        const child = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', CHILD], {
          env: { ...process.env, ...fast, QUEUE: type.queue, ROUTINE: routine },
          stdio: ['ignore', 'pipe', 'inherit'],
        });
        let output = '';
        child.stdout.setEncoding('utf8');
        await new Promise<void>((resolve, reject) => {
          child.stdout.on('data', (chunk: string) => {
            output += chunk;
            if (output.includes('BLOCKED')) resolve();
          });
          child.once('exit', () => reject(new Error(`child exited early: ${output}`)));
        });
        child.kill('SIGKILL');
        await once(child, 'exit');
        let outcome = await engine.step(type.queue);
        await until(async () => {
          if (outcome.kind === 'idle') outcome = await engine.step(type.queue);
          return outcome.kind !== 'idle';
        });
        statuses.push(outcome.kind === 'ran' ? `${outcome.status}:${outcome.tryCount}` : outcome.kind);
      }
      assert.deepEqual(statuses, ['RETRY:1', 'RETRY:2', 'FAILED:3']);
      const [routineRow] = await routinesOf(testDb.db, requestId);
      assert.equal(routineRow!.status, 'FAILED');
      const logs = (await executionsOf(testDb.db, routineRow!.id)).map((e) => e.log_text);
      assert.match(logs[2] ?? '', /3 attempts in a row ended with their worker .* stopping mid-way/);
      assert.deepEqual(await engine.step(type.queue), { kind: 'idle' });
    });

    if (dialect === 'postgres') {
      it('serialises two workers on one routine lock key until the holder commits', async () => {
        const routine = await createRoutineName(testDb.db);
        const typeA = await createRequestType(testDb.db, { routineName: routine });
        const typeB = await createRequestType(testDb.db, { routineName: routine });
        const a = await enqueueRequest(testDb.database, { requestType: typeA.requestType });
        await enqueueRequest(testDb.database, { requestType: typeB.requestType });
        const events: string[] = [];
        let releaseA: () => void = () => {};
        const gateA = new Promise<void>((resolve) => {
          releaseA = resolve;
        });
        let signalLockedA: () => void = () => {};
        const lockedA = new Promise<void>((resolve) => {
          signalLockedA = resolve;
        });
        const lockingRoutine = defineRoutine({
          name: routine,
          timeoutMs: 20_000,
          retry: 'backoff',
          run: async (ctx) => {
            const who = ctx.routine.request_id === a.requestId ? 'A' : 'B';
            await ctx.lock('patient:7');
            events.push(`${who} locked`);
            if (who === 'A') {
              signalLockedA();
              await gateA;
            }
            events.push(`${who} done`);
          },
        });
        const databases = [
          await openDatabase(config.database, { poolSize: 2 }),
          await openDatabase(config.database, { poolSize: 2 }),
        ];
        try {
          const [engineA, engineB] = databases.map((database) =>
            createQueueEngine({
              database,
              config,
              catalog: createRoutineCatalog([lockingRoutine]),
            }),
          );
          const runA = engineA!.step(typeA.queue);
          await lockedA;
          const runB = engineB!.step(typeB.queue);
          // B waits on the lock row inside PostgreSQL.
          await until(async () => {
            const waiting = await sql<{
              n: number;
            }>`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`.execute(
              testDb.db,
            );
            return waiting.rows[0]!.n > 0;
          });
          assert.deepEqual(events, ['A locked']);
          releaseA();
          const [outcomeA, outcomeB] = await Promise.all([runA, runB]);
          assert.equal(outcomeA.kind === 'ran' && outcomeA.status, 'COMPLETE');
          assert.equal(outcomeB.kind === 'ran' && outcomeB.status, 'COMPLETE');
          assert.deepEqual(events, ['A locked', 'A done', 'B locked', 'B done']);
        } finally {
          releaseA();
          await Promise.all(databases.map((d) => d.close()));
        }
      });

      it('shares one queue between two workers without running any routine twice', async () => {
        const first = await createRoutineName(testDb.db);
        const second = await createRoutineName(testDb.db);
        const type = await createRequestType(testDb.db, { routineName: first });
        const count = 150;
        const requestIds: number[] = [];
        for (let i = 0; i < count; i += 1) {
          requestIds.push(
            (await enqueueRequest(testDb.database, { requestType: type.requestType })).requestId,
          );
        }
        const databases: Database[] = [];
        const workers = [];
        for (const label of ['A', 'B']) {
          const database = await openDatabase(config.database, { poolSize: 6 });
          databases.push(database);
          workers.push(
            createQueueWorker({
              database,
              config: { ...config, workerQueues: [type.queue], workerConcurrency: 4 },
              catalog: createRoutineCatalog([
                recordingRoutine(first, label, second),
                recordingRoutine(second, label),
              ]),
            }),
          );
        }
        const startedAt = Date.now();
        try {
          await Promise.all(workers.map((w) => w.start()));
          await until(async () => {
            const pending = await testDb.db
              .selectFrom('request_routine')
              .select((eb) => eb.fn.countAll<number>().as('n'))
              .where('execute_request_queue', '=', type.queue)
              .where('status', '<>', 'COMPLETE')
              .executeTakeFirstOrThrow();
            const done = await testDb.db
              .selectFrom('request_routine')
              .select((eb) => eb.fn.countAll<number>().as('n'))
              .where('execute_request_queue', '=', type.queue)
              .where('status', '=', 'COMPLETE')
              .executeTakeFirstOrThrow();
            return Number(pending.n) === 0 && Number(done.n) === 2 * count;
          });
        } finally {
          await Promise.all(workers.map((w) => w.stop()));
          await Promise.all(databases.map((d) => d.close()));
        }
        process.stderr.write(`two workers: ${2 * count} routines in ${Date.now() - startedAt} ms\n`);
        const routines = await testDb.db
          .selectFrom('request_routine')
          .select(['id', 'try_count'])
          .where('execute_request_queue', '=', type.queue)
          .execute();
        assert.equal(routines.length, 2 * count);
        assert.ok(routines.every((r) => r.try_count === 1));
        const executions = await testDb.db
          .selectFrom('request_routine_execution as e')
          .innerJoin('request_routine as r', 'r.id', 'e.request_routine_id')
          .select(['e.request_routine_id'])
          .where('r.execute_request_queue', '=', type.queue)
          .execute();
        assert.equal(executions.length, 2 * count, 'one execution row per routine');
        const details = await testDb.db
          .selectFrom('request_details')
          .select(['request_id', 'name', 'value'])
          .where('request_id', 'in', requestIds)
          .execute();
        assert.equal(details.length, 2 * count, 'each routine wrote exactly once');
        const byWorker = new Map<string, number>();
        for (const d of details) byWorker.set(d.value!, (byWorker.get(d.value!) ?? 0) + 1);
        assert.ok((byWorker.get('A') ?? 0) > 0 && (byWorker.get('B') ?? 0) > 0, 'both workers took work');
        const queueRow = await testDb.db
          .selectFrom('request_queue')
          .selectAll()
          .where('request_queue', '=', type.queue)
          .executeTakeFirstOrThrow();
        assert.equal(queueRow.total_success_count, 2 * count);
      });
    }
  });
});
