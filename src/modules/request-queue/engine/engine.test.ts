import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Config } from '../../../config.ts';
import { loadConfig, parseBackoff } from '../../../config.ts';
import { sql } from 'kysely';
import { formatDateTime, openDatabase } from '../../../db/database.ts';
import { countRows } from '../../../../test/factories.ts';
import { addFailingTrigger } from '../../../../test/failing-trigger.ts';
import {
  addRoutineRow,
  createRequestType,
  createRoutineName,
  executionsOf,
  jsonRow,
  routinesOf,
} from '../../../../test/factories-queue.ts';
import type { TestDatabase } from '../../../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../../../test/harness.ts';
import type { QueueEngine, StepOutcome } from './engine.ts';
import { claimQuery } from './claim.queries.ts';
import { createQueueEngine, retryDelayMs } from './engine.ts';
import { enqueueRequest } from '../intake/enqueue.ts';
import { voidRoutine } from '../admin/request-actions.ts';
import { routineVersion } from '../admin/request-detail.ts';
import { DEFAULT_ROUTINES } from '../../filing/index.ts';
import type { RoutineContext } from './routine-catalog.ts';
import { PermanentRoutineError, createRoutineCatalog, defineRoutine } from './routine-catalog.ts';

const MINUTE = 60_000;

describe("retry back-off (the Java processor's newest table, the default)", () => {
  const problems: string[] = [];
  const steps = parseBackoff('2m*n@5,30m@13,6h@20', problems);
  it('parses the table without problems, and reports a malformed one', () => {
    assert.deepEqual(problems, []);
    const bad: string[] = [];
    assert.deepEqual(parseBackoff('2m*n@5,soon', bad), []);
    assert.equal(bad.length, 1);
  });
  it('waits 2n minutes for tries 1 to 4', () => {
    assert.deepEqual(
      [1, 2, 3, 4].map((n) => retryDelayMs(n, steps)),
      [2 * MINUTE, 4 * MINUTE, 6 * MINUTE, 8 * MINUTE],
    );
  });
  it('waits 30 minutes for tries 5 to 12 and 6 hours for tries 13 to 19', () => {
    for (let n = 5; n < 13; n += 1) assert.equal(retryDelayMs(n, steps), 30 * MINUTE);
    for (let n = 13; n < 20; n += 1) assert.equal(retryDelayMs(n, steps), 360 * MINUTE);
  });
  it('gives up from try 20', () => {
    assert.equal(retryDelayMs(20, steps), undefined);
    assert.equal(retryDelayMs(25, steps), undefined);
  });
});

/** Test routines: each records what it did in request_details, so rolled-back writes are visible. */
function testCatalog(
  names: Record<string, string>,
  hooks: { gate?: Promise<void>; onLateWrite?: (what: string) => void } = {},
) {
  const mark = async (ctx: RoutineContext, what: string): Promise<void> => {
    await ctx.trx
      .insertInto('request_details')
      .values({ request_id: ctx.routine.request_id, name: what, value: ctx.routine.routine_name })
      .execute();
  };
  return createRoutineCatalog([
    ...DEFAULT_ROUTINES,
    defineRoutine({
      name: names.ok!,
      timeoutMs: 5000,
      retry: 'backoff',
      run: (ctx) => mark(ctx, 'ran'),
    }),
    defineRoutine({
      name: names.fail!,
      timeoutMs: 5000,
      retry: 'backoff',
      run: async (ctx) => {
        await mark(ctx, 'partial');
        throw new Error('device offline');
      },
    }),
    defineRoutine({
      name: names.permanent!,
      timeoutMs: 5000,
      retry: 'backoff',
      run: async () => {
        throw new PermanentRoutineError('bad input');
      },
    }),
    defineRoutine({
      name: names.chain!,
      timeoutMs: 5000,
      retry: 'backoff',
      run: async (ctx) => {
        await ctx.addRoutine(names.ok!);
        await ctx.addPriorityRoutine(names.priority!);
      },
    }),
    defineRoutine({
      name: names.chainFail!,
      timeoutMs: 5000,
      retry: 'backoff',
      run: async (ctx) => {
        await ctx.addRoutine(names.ok!);
        throw new Error('failed after chaining');
      },
    }),
    defineRoutine({
      name: names.chainVoid!,
      timeoutMs: 5000,
      retry: 'backoff',
      run: async (ctx) => {
        await ctx.addRoutines([names.ok!, names.priority!]);
        await ctx.voidAllNewRoutines(names.priority);
      },
    }),
    defineRoutine({
      name: names.echo!,
      timeoutMs: 5000,
      retry: 'backoff',
      run: async (ctx) => {
        const { texts } = await ctx.readRequest(['REQUEST_DATA']);
        await mark(ctx, `echo ${String(texts.REQUEST_DATA!.key)}`);
        await ctx.mergeRequestData({ echoed: true, first: 1 });
        await ctx.mergeRequestData({ echoed: 'twice' });
        const again = await ctx.readText('REQUEST_DATA');
        await mark(ctx, `again ${String(again.key)} ${String(again.echoed)}`);
        if (again.key === 'b') throw new Error('b fails after its merges');
      },
    }),
    defineRoutine({
      name: names.reader!,
      timeoutMs: 5000,
      retry: 'backoff',
      run: async (ctx) => {
        const { key } = await ctx.readText('REQUEST_DATA');
        if (key === 'quiet') throw new Error('fails before any write');
        if (key === 'bad') {
          // A plain read that fails: before any write, so before the routine's savepoint.
          await ctx.trx
            .withTables<{ no_such_table: { id: number } }>()
            .selectFrom('no_such_table')
            .select('id')
            .execute();
        }
        await mark(ctx, `read ${String(key)}`);
      },
    }),
    defineRoutine({
      name: names.merger!,
      timeoutMs: 5000,
      retry: 'backoff',
      run: async (ctx) => {
        const { key } = await ctx.readText('REQUEST_DATA');
        await ctx.mergeRequestData({ [String(key)]: 1 });
        await ctx.addRoutine(names.ok!);
      },
    }),
    defineRoutine({
      name: names.priority!,
      timeoutMs: 5000,
      retry: 'backoff',
      run: (ctx) => mark(ctx, 'priority'),
    }),
    defineRoutine({
      name: names.voider!,
      timeoutMs: 5000,
      retry: 'backoff',
      run: (ctx) => ctx.voidAllNewRoutines(),
    }),
    defineRoutine({
      name: names.slow!,
      timeoutMs: 50,
      retry: 'backoff',
      run: async (ctx) => {
        // Runs on past its timeout, then tries to write: the write must never land.
        await new Promise((resolve) => setTimeout(resolve, 120));
        try {
          await mark(ctx, 'late');
          hooks.onLateWrite?.('written');
        } catch {
          hooks.onLateWrite?.('refused');
        }
      },
    }),
    defineRoutine({
      name: names.keyed!,
      timeoutMs: 10_000,
      retry: 'backoff',
      run: async (ctx) => {
        const { key } = await ctx.readText('REQUEST_DATA');
        await ctx.lock(String(key));
        await mark(ctx, `locked ${String(key)}`);
      },
    }),
    defineRoutine({
      name: names.locker!,
      timeoutMs: 10_000,
      retry: 'backoff',
      run: async (ctx) => {
        await ctx.lock('patient:42');
        await mark(ctx, 'locked');
        await hooks.gate;
      },
    }),
  ]);
}

forEachDialect((dialect) => {
  describe(`queue engine (${dialect})`, () => {
    let testDb: TestDatabase;
    let config: Config;
    let clock = new Date('2030-01-01T00:00:00Z');
    let engine: QueueEngine;
    const names: Record<string, string> = {};
    let gateOpen: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      gateOpen = resolve;
    });
    let lateWrite: (what: string) => void = () => {};
    const hooks = { gate, onLateWrite: (what: string) => lateWrite(what) };

    before(async () => {
      testDb = await createTestDatabase(dialect);
      config = loadConfig(testDb.env);
      for (const key of [
        'ok',
        'fail',
        'permanent',
        'chain',
        'priority',
        'voider',
        'slow',
        'locker',
        'keyed',
        'unknown',
        'chainFail',
        'chainVoid',
        'echo',
        'merger',
        'reader',
      ]) {
        names[key] = await createRoutineName(testDb.db);
      }
      engine = createQueueEngine({
        database: testDb.database,
        config,
        catalog: testCatalog(names, hooks),
        now: () => clock,
        // The batch tests need every claimed routine started, however slow the machine.
        batchBudgetMs: 60_000,
      });
    });
    after(async () => {
      gateOpen();
      await testDb.drop();
    });

    /** A request of a fresh type (so a fresh queue) whose first routine is `routine`. */
    async function newRequest(routine: string) {
      const type = await createRequestType(testDb.db, { routineName: routine });
      const queued = await enqueueRequest(testDb.database, {
        requestType: type.requestType,
        attachments: [jsonRow('REQUEST_DATA', {})],
      });
      const [first] = await routinesOf(testDb.db, queued.requestId);
      return { requestId: queued.requestId, queue: type.queue, routineId: first!.id };
    }

    const details = (requestId: number) =>
      testDb.db
        .selectFrom('request_details')
        .select(['name', 'value'])
        .where('request_id', '=', requestId)
        .orderBy('id')
        .execute();

    it('NEW -> COMPLETE: commits the routine writes with status, try count and an execution row', async () => {
      const { requestId, queue, routineId } = await newRequest(names.ok!);
      const outcome = await engine.step(queue);
      assert.equal(outcome.kind, 'ran');
      const [routine] = await routinesOf(testDb.db, requestId);
      assert.equal(routine!.status, 'COMPLETE');
      assert.equal(routine!.try_count, 1);
      assert.equal(routine!.next_try_date_time, null);
      assert.deepEqual(await details(requestId), [{ name: 'ran', value: names.ok }]);
      const executions = await executionsOf(testDb.db, routineId);
      assert.equal(executions.length, 1);
      assert.equal(executions[0]!.status, 'COMPLETE');
      assert.equal(executions[0]!.try_number, 1);
      const counters = await testDb.db
        .selectFrom('request_queue')
        .selectAll()
        .where('request_queue', '=', queue)
        .executeTakeFirstOrThrow();
      assert.equal(counters.total_success_count, 1);
      assert.equal(counters.total_execute_count, 1);
      assert.equal(counters.last_thread_spawn_request_id, requestId);
      assert.deepEqual(await engine.step(queue), { kind: 'idle' });
    });

    it('NEW -> RETRY -> RETRY -> COMPLETE: rolls back the failed writes and waits out the back-off', async () => {
      const { requestId, queue, routineId } = await newRequest(names.fail!);
      const start = clock;
      const first = await engine.step(queue);
      assert.equal(first.kind === 'ran' && first.status, 'RETRY');
      let [routine] = await routinesOf(testDb.db, requestId);
      assert.equal(routine!.try_count, 1);
      assert.equal(routine!.next_try_date_time, formatDateTime(new Date(start.getTime() + 2 * MINUTE)));
      assert.deepEqual(await details(requestId), [], 'the partial write was rolled back');
      const [execution] = await executionsOf(testDb.db, routineId);
      assert.equal(execution!.status, 'RETRY');
      assert.match(execution!.log_text ?? '', /device offline/);

      assert.deepEqual(await engine.step(queue), { kind: 'idle' }, 'not before its next try');
      clock = new Date(start.getTime() + 2 * MINUTE);
      const second = await engine.step(queue);
      assert.equal(second.kind === 'ran' && second.status, 'RETRY');
      [routine] = await routinesOf(testDb.db, requestId);
      assert.equal(routine!.try_count, 2);
      assert.equal(routine!.next_try_date_time, formatDateTime(new Date(clock.getTime() + 4 * MINUTE)));

      // The routine now succeeds (say the device came back): same name, new behaviour.
      await testDb.db
        .updateTable('request_routine')
        .set({ routine_name: names.ok! })
        .where('id', '=', routineId)
        .execute();
      clock = new Date(clock.getTime() + 4 * MINUTE);
      const third = await engine.step(queue);
      assert.equal(third.kind === 'ran' && third.status, 'COMPLETE');
      [routine] = await routinesOf(testDb.db, requestId);
      assert.equal(routine!.try_count, 3);
      assert.equal(routine!.next_try_date_time, null);
      assert.deepEqual(
        (await executionsOf(testDb.db, routineId)).map((e) => [e.status, e.try_number]),
        [
          ['RETRY', 1],
          ['RETRY', 2],
          ['COMPLETE', 3],
        ],
      );
      const counters = await testDb.db
        .selectFrom('request_queue')
        .selectAll()
        .where('request_queue', '=', queue)
        .executeTakeFirstOrThrow();
      assert.deepEqual(
        [counters.total_success_count, counters.total_fail_count, counters.total_execute_count],
        [1, 2, 3],
      );
    });

    it('RETRY -> FAILED after the last try, which then blocks the later routines of its request', async () => {
      const { requestId, queue, routineId } = await newRequest(names.fail!);
      await testDb.db
        .updateTable('request_routine')
        .set({ status: 'RETRY', try_count: 19, next_try_date_time: formatDateTime(clock) })
        .where('id', '=', routineId)
        .execute();
      const later = await addRoutineRow(testDb.db, { requestId, name: names.ok!, queue, sequence: 20 });
      const outcome = await engine.step(queue);
      assert.equal(outcome.kind === 'ran' && outcome.status, 'FAILED');
      const routines = await routinesOf(testDb.db, requestId);
      assert.deepEqual(
        routines.map((r) => [r.id, r.status, r.try_count, r.next_try_date_time]),
        [
          [routineId, 'FAILED', 20, null],
          [later, 'NEW', 0, null],
        ],
      );
      clock = new Date(clock.getTime() + 24 * 60 * MINUTE);
      assert.deepEqual(await engine.step(queue), { kind: 'idle' }, 'a FAILED sibling blocks the request');
    });

    it('fails an unknown routine at once with an execution row, without retrying', async () => {
      const { requestId, queue, routineId } = await newRequest(names.unknown!);
      const outcome = await engine.step(queue);
      assert.equal(outcome.kind === 'ran' && outcome.status, 'FAILED');
      const [routine] = await routinesOf(testDb.db, requestId);
      assert.deepEqual(
        [routine!.status, routine!.try_count, routine!.next_try_date_time],
        ['FAILED', 1, null],
      );
      const executions = await executionsOf(testDb.db, routineId);
      assert.equal(executions.length, 1);
      assert.match(executions[0]!.log_text ?? '', /Unknown routine/);
      assert.deepEqual(await engine.step(queue), { kind: 'idle' });
    });

    it('fails at once on a permanent error', async () => {
      const { requestId, queue } = await newRequest(names.permanent!);
      const outcome = await engine.step(queue);
      assert.equal(outcome.kind === 'ran' && outcome.status, 'FAILED');
      const [routine] = await routinesOf(testDb.db, requestId);
      assert.equal(routine!.try_count, 1);
    });

    it('retries a routine that exceeds its timeout, and refuses its writes after the timeout', async () => {
      const { requestId, queue, routineId } = await newRequest(names.slow!);
      const late = new Promise<string>((resolve) => {
        lateWrite = resolve;
      });
      const outcome = await engine.step(queue);
      assert.equal(outcome.kind === 'ran' && outcome.status, 'RETRY');
      assert.match(outcome.kind === 'ran' ? (outcome.error ?? '') : '', /timed out/);
      const [routine] = await routinesOf(testDb.db, requestId);
      assert.deepEqual([routine!.status, routine!.try_count], ['RETRY', 1]);
      assert.equal((await executionsOf(testDb.db, routineId)).length, 1);
      assert.equal(await late, 'refused');
      assert.deepEqual(await details(requestId), []);
    });

    it('commits each routine of a batch with its own outcome', async () => {
      const type = await createRequestType(testDb.db, { routineName: names.ok! });
      const ids: number[] = [];
      for (let i = 0; i < 3; i += 1) {
        ids.push((await enqueueRequest(testDb.database, { requestType: type.requestType })).requestId);
      }
      await testDb.db
        .updateTable('request_routine')
        .set({ routine_name: names.fail! })
        .where('request_id', '=', ids[1]!)
        .execute();
      const outcomes = await engine.runBatch(type.queue, 10);
      await engine.flushCounters();
      assert.equal(outcomes.length, 3);
      while ((await engine.runBatch(type.queue, 10)).length > 0);
      const statuses = await Promise.all(ids.map(async (id) => (await routinesOf(testDb.db, id))[0]!.status));
      assert.deepEqual(statuses, ['COMPLETE', 'RETRY', 'COMPLETE']);
      assert.deepEqual(
        await Promise.all(ids.map(async (id) => (await details(id)).length)),
        [1, 0, 1],
        'the failed routine left nothing, its batch neighbours kept their writes',
      );
    });

    it('runs routines of a request in execute_sequence order and requests oldest first', async () => {
      const type = await createRequestType(testDb.db, { routineName: names.ok! });
      const a = await enqueueRequest(testDb.database, { requestType: type.requestType, attachments: [] });
      const b = await enqueueRequest(testDb.database, { requestType: type.requestType, attachments: [] });
      // Request a gets a routine that must run before its first one, inserted later (higher id).
      const early = await addRoutineRow(testDb.db, {
        requestId: a.requestId,
        name: names.priority!,
        queue: type.queue,
        sequence: 5,
      });
      const [aFirst] = await routinesOf(testDb.db, a.requestId);
      const [bFirst] = await routinesOf(testDb.db, b.requestId);
      const ran: number[] = [];
      for (;;) {
        const outcome = await engine.step(type.queue);
        if (outcome.kind !== 'ran') break;
        ran.push(outcome.routineId);
      }
      // a's first routine waits for `early` (newer than b's routine), and a, the older request, goes first.
      assert.deepEqual(ran, [early, aFirst!.id, bFirst!.id]);
    });

    it("finishes a started request first: its chained routine goes before newer requests' first routines", async () => {
      const type = await createRequestType(testDb.db, { routineName: names.merger! });
      const queue = type.queue;
      const enqueue = async (key: string) =>
        (
          await enqueueRequest(testDb.database, {
            requestType: type.requestType,
            attachments: [jsonRow('REQUEST_DATA', { key })],
          })
        ).requestId;
      const a = await enqueue('a');
      const newer: number[] = [];
      for (const key of ['b', 'c', 'd', 'e', 'f']) newer.push(await enqueue(key));
      const first = await engine.step(queue);
      assert.equal(first.kind === 'ran' && first.requestId, a);
      // a's chained routine is the newest pending routine of the queue; b..f's first routines are older.
      const chained = (await routinesOf(testDb.db, a)).find((r) => r.status === 'NEW')!;
      const pendingFirst = await Promise.all(newer.map(async (id) => (await routinesOf(testDb.db, id))[0]!));
      assert.ok(pendingFirst.every((r) => r.status === 'NEW' && r.id < chained.id));
      // The next batch of two: a's chained routine, then the oldest of the others.
      const batch = await engine.runBatch(queue, 2);
      await engine.flushCounters();
      assert.deepEqual(
        batch.map((o) => o.kind === 'ran' && [o.requestId, o.routineId]),
        [
          [a, chained.id],
          [newer[0], pendingFirst[0]!.id],
        ],
      );
      while ((await engine.runBatch(queue, 10)).length > 0);
      await engine.flushCounters();
    });

    it('runs a RETRY routine whose next try has come before NEW routines, even of older requests', async () => {
      const type = await createRequestType(testDb.db, { routineName: names.ok! });
      const older = await enqueueRequest(testDb.database, { requestType: type.requestType, attachments: [] });
      const retrying = await enqueueRequest(testDb.database, {
        requestType: type.requestType,
        attachments: [],
      });
      const [retry] = await routinesOf(testDb.db, retrying.requestId);
      await testDb.db
        .updateTable('request_routine')
        .set({ status: 'RETRY', try_count: 1, next_try_date_time: formatDateTime(clock) })
        .where('id', '=', retry!.id)
        .execute();
      const ran: number[] = [];
      for (;;) {
        const outcome = await engine.step(type.queue);
        if (outcome.kind !== 'ran') break;
        ran.push(outcome.requestId);
      }
      assert.deepEqual(ran, [retrying.requestId, older.requestId]);
    });

    it('does not run a routine whose earlier sibling waits for its next try', async () => {
      const type = await createRequestType(testDb.db, { routineName: names.ok! });
      const r = await enqueueRequest(testDb.database, { requestType: type.requestType, attachments: [] });
      const [first] = await routinesOf(testDb.db, r.requestId);
      await testDb.db
        .updateTable('request_routine')
        .set({
          status: 'RETRY',
          try_count: 1,
          next_try_date_time: formatDateTime(new Date(clock.getTime() + MINUTE)),
        })
        .where('id', '=', first!.id)
        .execute();
      await addRoutineRow(testDb.db, {
        requestId: r.requestId,
        name: names.ok!,
        queue: type.queue,
        sequence: 20,
      });
      assert.deepEqual(await engine.step(type.queue), { kind: 'idle' });
    });

    it('chains: addRoutine appends after the highest sequence, addPriorityRoutine runs first', async () => {
      const { requestId, queue } = await newRequest(names.chain!);
      // A routine already at sequence 40 (inserted before the chain runs): the next must get 50 (the highest
      // sequence + 10, not the last inserted one's + 10).
      await addRoutineRow(testDb.db, {
        requestId,
        name: names.voider!,
        queue,
        sequence: 40,
        status: 'COMPLETE',
      });
      await engine.step(queue);
      let routines = await routinesOf(testDb.db, requestId);
      assert.deepEqual(
        routines.map((r) => [r.routine_name, r.execute_sequence, r.status]),
        [
          [names.chain, 10, 'COMPLETE'],
          [names.voider, 40, 'COMPLETE'],
          [names.ok, 50, 'NEW'],
          [names.priority, 1, 'NEW'],
        ],
      );
      const next = await engine.step(queue);
      assert.equal(next.kind === 'ran' && next.routineName, names.priority);
      await engine.step(queue);
      assert.deepEqual(
        (await details(requestId)).map((d) => d.name),
        ['priority', 'ran'],
      );

      // Running the chain again resets the existing routines instead of adding copies.
      await testDb.db
        .updateTable('request_routine')
        .set({ status: 'NEW', try_count: 0 })
        .where('request_id', '=', requestId)
        .where('routine_name', '=', names.chain!)
        .execute();
      await engine.step(queue);
      routines = await routinesOf(testDb.db, requestId);
      assert.equal(routines.length, 4);
      assert.deepEqual(
        routines
          .filter((r) => r.routine_name !== names.chain)
          .map((r) => [r.routine_name, r.status, r.try_count]),
        [
          [names.voider, 'COMPLETE', 1 - 1],
          [names.ok, 'NEW', 0],
          [names.priority, 'NEW', 0],
        ],
      );
    });

    it('voidAllNewRoutines sets NEW and RETRY siblings to VOID, which count as done for ordering', async () => {
      const { requestId, queue } = await newRequest(names.voider!);
      const retrying = await addRoutineRow(testDb.db, {
        requestId,
        name: names.fail!,
        queue,
        sequence: 20,
        status: 'RETRY',
        tryCount: 2,
      });
      const fresh = await addRoutineRow(testDb.db, {
        requestId,
        name: names.permanent!,
        queue,
        sequence: 30,
      });
      const done = await addRoutineRow(testDb.db, {
        requestId,
        name: names.ok!,
        queue,
        sequence: 5,
        status: 'COMPLETE',
      });
      await engine.step(queue);
      const byId = new Map((await routinesOf(testDb.db, requestId)).map((r) => [r.id, r.status]));
      assert.equal(byId.get(retrying), 'VOID');
      assert.equal(byId.get(fresh), 'VOID');
      assert.equal(byId.get(done), 'COMPLETE');
      const after = await addRoutineRow(testDb.db, { requestId, name: names.ok!, queue, sequence: 40 });
      const outcome = await engine.step(queue);
      assert.equal(outcome.kind === 'ran' && outcome.routineId, after, 'VOID siblings do not block');
    });

    it('runs the routines of one routine lock key in one batch (the batch holds the key until it commits)', async () => {
      gateOpen();
      const type = await createRequestType(testDb.db, { routineName: names.locker! });
      for (let i = 0; i < 3; i += 1) await enqueueRequest(testDb.database, { requestType: type.requestType });
      const sizes = [
        (await engine.runBatch(type.queue, 10)).length,
        (await engine.runBatch(type.queue, 10)).length,
      ];
      assert.deepEqual(sizes, [3, 0]);
      await engine.flushCounters();
    });

    if (dialect === 'postgres') {
      it('puts back untried a routine whose key another batch holds, once its batch holds a key', async () => {
        const type = await createRequestType(testDb.db, { routineName: names.keyed! });
        const keys = ['patient:first', 'patient:busy', 'patient:third'];
        const requestIds: number[] = [];
        for (const key of keys) {
          const queued = await enqueueRequest(testDb.database, {
            requestType: type.requestType,
            attachments: [jsonRow('REQUEST_DATA', { key })],
          });
          requestIds.push(queued.requestId);
        }
        const holder = await testDb.db.startTransaction().execute();
        try {
          await testDb.database.dialect.lockNamedRow(
            holder,
            { table: 'request_routine_lock', column: 'routine_lock', key: 'patient:busy' },
            5000,
          );
          const outcomes = await engine.runBatch(type.queue, 10);
          assert.deepEqual(
            outcomes.map((o) => o.kind),
            ['ran', 'deferred', 'ran'],
          );
          const [busy] = await routinesOf(testDb.db, requestIds[1]!);
          assert.equal(busy!.status, 'NEW');
          assert.equal(busy!.try_count, 0, 'a deferred routine is not a try');
          assert.deepEqual(await executionsOf(testDb.db, busy!.id), []);
          assert.deepEqual(await details(requestIds[1]!), []);
          const marks = await sql<{ n: number }>`select count(*)::int as n from request_routine_attempt
            where request_routine_id = ${busy!.id}`.execute(testDb.db);
          assert.equal(marks.rows[0]!.n, 0, 'its start mark is cleared');
        } finally {
          await holder.commit().execute();
        }
        const next = await engine.runBatch(type.queue, 10);
        assert.equal(next.length, 1);
        assert.equal(next[0]!.kind === 'ran' && next[0]!.status, 'COMPLETE');
        assert.deepEqual(await details(requestIds[1]!), [
          { name: 'locked patient:busy', value: names.keyed },
        ]);
        await engine.flushCounters();
      });
    }

    const queueCounters = (queue: string) =>
      testDb.db
        .selectFrom('request_queue')
        .select(['total_success_count', 'total_execute_count'])
        .where('request_queue', '=', queue)
        .executeTakeFirstOrThrow();

    if (dialect !== 'sqlite') {
      it('keeps the counters for a later flush while an open insert names the queue row, where that blocks its update', async () => {
        const { requestId, queue } = await newRequest(names.ok!);
        assert.equal((await engine.runBatch(queue, 1)).length, 1);
        // An intake under way: its routine row names the queue (a foreign key) until it commits.
        const holder = await testDb.db.startTransaction().execute();
        try {
          await addRoutineRow(holder, { requestId, name: names.ok!, queue, sequence: 20 });
          await engine.flushCounters();
          const during = await queueCounters(queue);
          // InnoDB: the insert's shared lock on the queue row would block the update, which would then
          // block every later insert; PostgreSQL's key-share lock lets the update through.
          assert.equal(during.total_success_count, testDb.database.dialect.hasBlockingParentLocks ? 0 : 1);
        } finally {
          await holder.rollback().execute();
        }
        await engine.flushCounters();
        assert.deepEqual(await queueCounters(queue), { total_success_count: 1, total_execute_count: 1 });
      });
    }

    it('leaves no start mark after a batch whose transaction failed as a whole: the next attempt is its first try', async () => {
      const { requestId, queue, routineId } = await newRequest(names.ok!);
      const remove = await addFailingTrigger(testDb.db, dialect, {
        name: `fail_exec_${requestId}`,
        table: 'request_routine_execution',
        when: `new.request_routine_id = ${routineId}`,
        message: 'injected commit failure',
      });
      try {
        await assert.rejects(engine.runBatch(queue, 1), /injected commit failure/);
      } finally {
        await remove();
      }
      const [routine] = await routinesOf(testDb.db, requestId);
      assert.deepEqual([routine!.status, routine!.try_count], ['NEW', 0]);
      const [outcome] = await engine.runBatch(queue, 1);
      assert.equal(outcome!.kind === 'ran' && outcome!.status, 'COMPLETE');
      const executions = await executionsOf(testDb.db, routineId);
      assert.equal(executions.length, 1);
      assert.equal(executions[0]!.try_number, 1);
      assert.doesNotMatch(executions[0]!.log_text ?? '', /never finished/);
      await engine.flushCounters();
    });

    it('prepares with no transaction open and no lock held, and does not run a routine voided meanwhile', async () => {
      const name = await createRoutineName(testDb.db);
      const seen: string[] = [];
      const { dialect: adapter } = testDb.database;
      const preparing = defineRoutine({
        name,
        timeoutMs: 10_000,
        retry: 'backoff',
        prepare: async (ctx) => {
          if (adapter.hasRowLocks) {
            // From another connection: the claimed routine and request rows are free to lock.
            const free = await testDb.db
              .transaction()
              .execute((trx) =>
                adapter
                  .lockRowsSkipLocked(
                    trx
                      .selectFrom('request_routine as rr')
                      .innerJoin('request as r', 'r.id', 'rr.request_id')
                      .select('rr.id')
                      .where('rr.id', '=', ctx.routine.id),
                    ['r', 'rr'],
                  )
                  .execute(),
              );
            seen.push(free.length === 1 ? 'rows free' : 'rows locked');
          }
          if (dialect === 'postgres') {
            const open = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity
              where datname = current_database() and state like 'idle in transaction%'`.execute(testDb.db);
            seen.push(`${open.rows[0]!.n} idle in transaction`);
          }
          // The console voids the routine while it is being prepared (on SQLite a write transaction of
          // its own: it would wait behind an open batch transaction).
          const [row] = await routinesOf(testDb.db, ctx.routine.request_id);
          const outcome = await voidRoutine(testDb.database, {
            routineId: ctx.routine.id,
            expectedVersion: routineVersion(row!),
          });
          seen.push(`void ${outcome.kind}`);
          return 'prepared';
        },
        run: async (ctx) => {
          seen.push('ran');
          await ctx.trx
            .insertInto('request_details')
            .values({ request_id: ctx.routine.request_id, name: 'ran', value: name })
            .execute();
        },
      });
      const preparer = createQueueEngine({
        database: testDb.database,
        config,
        catalog: createRoutineCatalog([preparing]),
        now: () => clock,
      });
      const { requestId, queue, routineId } = await newRequest(name);
      const outcomes = await preparer.runBatch(queue, 1);
      assert.deepEqual(outcomes, [{ kind: 'contended' }]);
      assert.deepEqual(seen, [
        ...(adapter.hasRowLocks ? ['rows free'] : []),
        ...(dialect === 'postgres' ? ['0 idle in transaction'] : []),
        'void done',
      ]);
      const [routine] = await routinesOf(testDb.db, requestId);
      assert.deepEqual([routine!.status, routine!.try_count], ['VOID', 0]);
      assert.deepEqual(await executionsOf(testDb.db, routineId), []);
      assert.deepEqual(await details(requestId), []);
      const marks = await sql<{ n: number }>`select count(*) as n from request_routine_attempt
        where request_routine_id = ${routineId}`.execute(testDb.db);
      assert.equal(Number(marks.rows[0]!.n), 0, 'its start mark is cleared');
      assert.deepEqual(await preparer.runBatch(queue, 1), []);
    });

    if (dialect !== 'sqlite') {
      it('lets another worker claim and commit other routines while one prepares, never the one it prepares', async () => {
        const name = await createRoutineName(testDb.db);
        const type = await createRequestType(testDb.db, { routineName: name });
        const first = await enqueueRequest(testDb.database, { requestType: type.requestType });
        const second = await enqueueRequest(testDb.database, { requestType: type.requestType });
        let release: () => void = () => {};
        const released = new Promise<void>((resolve) => {
          release = resolve;
        });
        let signalPreparing: () => void = () => {};
        const preparing = new Promise<void>((resolve) => {
          signalPreparing = resolve;
        });
        const ranBy: string[] = [];
        const catalog = (worker: string) =>
          createRoutineCatalog([
            defineRoutine({
              name,
              timeoutMs: 20_000,
              retry: 'backoff',
              prepare: async (ctx) => {
                if (ctx.routine.request_id === first.requestId) {
                  signalPreparing();
                  await released;
                }
                return worker;
              },
              run: async (ctx, by) => {
                ranBy.push(`${by} ${ctx.routine.request_id === first.requestId ? 'first' : 'second'}`);
                await ctx.trx
                  .insertInto('request_details')
                  .values({ request_id: ctx.routine.request_id, name: 'ran', value: by })
                  .execute();
              },
            }),
          ]);
        const other = await openDatabase(config.database, { poolSize: 2 });
        try {
          const workerA = createQueueEngine({ database: testDb.database, config, catalog: catalog('A') });
          const workerB = createQueueEngine({ database: other, config, catalog: catalog('B') });
          const runA = workerA.runBatch(type.queue, 1);
          await preparing;
          // A prepares the first request with nothing locked: B skips it (A's session holds its key),
          // takes the second and commits it.
          const [outcomeB] = await workerB.runBatch(type.queue, 1);
          assert.equal(outcomeB!.kind === 'ran' && outcomeB!.requestId, second.requestId);
          assert.equal(outcomeB!.kind === 'ran' && outcomeB!.status, 'COMPLETE');
          assert.deepEqual(
            await workerB.runBatch(type.queue, 1),
            [],
            'the first request is not claimed twice',
          );
          const [pending] = await routinesOf(testDb.db, first.requestId);
          assert.deepEqual([pending!.status, pending!.try_count], ['NEW', 0]);
          release();
          const [outcomeA] = await runA;
          assert.equal(outcomeA!.kind === 'ran' && outcomeA!.status, 'COMPLETE');
          assert.deepEqual(ranBy, ['B second', 'A first']);
          for (const { requestId } of [first, second]) {
            const [routine] = await routinesOf(testDb.db, requestId);
            assert.deepEqual([routine!.status, routine!.try_count], ['COMPLETE', 1]);
            assert.equal((await executionsOf(testDb.db, routine!.id)).length, 1);
          }
          await workerA.flushCounters();
          await workerB.flushCounters({ isFinal: true });
        } finally {
          release();
          await other.close();
        }
      });
    }

    if (dialect !== 'sqlite') {
      it('keeps a pool connection for the preparations: batches past the pool less one wait for their turn', async () => {
        const name = await createRoutineName(testDb.db);
        const type = await createRequestType(testDb.db, { routineName: name });
        const first = await enqueueRequest(testDb.database, { requestType: type.requestType });
        const second = await enqueueRequest(testDb.database, { requestType: type.requestType });
        let release: () => void = () => {};
        const released = new Promise<void>((resolve) => {
          release = resolve;
        });
        let signalPreparing: () => void = () => {};
        const preparing = new Promise<void>((resolve) => {
          signalPreparing = resolve;
        });
        const prepared: number[] = [];
        const reading = defineRoutine({
          name,
          timeoutMs: 20_000,
          retry: 'backoff',
          // Each batch holds a connection throughout; its preparation reads on another.
          prepare: async (ctx) => {
            if (ctx.routine.request_id === first.requestId) {
              signalPreparing();
              await released;
            }
            const row = await ctx.db
              .selectFrom('request')
              .select('id')
              .where('id', '=', ctx.routine.request_id)
              .executeTakeFirstOrThrow();
            prepared.push(row.id);
            return row.id;
          },
          run: async (ctx, id) => {
            await ctx.trx
              .insertInto('request_details')
              .values({ request_id: id, name: 'ran', value: name })
              .execute();
          },
        });
        // Two connections: two batches each holding one would leave none for their preparations.
        const small = await openDatabase(config.database, { poolSize: 2 });
        try {
          const worker = createQueueEngine({
            database: small,
            config,
            catalog: createRoutineCatalog([reading]),
          });
          const runFirst = worker.runBatch(type.queue, 1);
          await preparing;
          const runSecond = worker.runBatch(type.queue, 1);
          release();
          const outcomes = [...(await runFirst), ...(await runSecond)];
          assert.deepEqual(
            outcomes.map((o) => o.kind === 'ran' && [o.requestId, o.status]),
            [
              [first.requestId, 'COMPLETE'],
              [second.requestId, 'COMPLETE'],
            ],
          );
          assert.deepEqual(prepared, [first.requestId, second.requestId], 'the second batch waited its turn');
          await worker.flushCounters({ isFinal: true });
        } finally {
          release();
          await small.close();
        }
      });
    }

    it('claims through the index in request order, without a sort, however many finished ones come before them', async () => {
      const type = await createRequestType(testDb.db, { routineName: names.ok! });
      await testDb.db.transaction().execute(async (trx) => {
        const requests = await trx
          .insertInto('request')
          .values(
            Array.from({ length: 3000 }, () => ({ request_type: type.requestType, system_message: '' })),
          )
          .returning('id')
          .execute();
        await trx
          .insertInto('request_routine')
          .values(
            requests.map((r, i) => ({
              request_id: r.id,
              execute_request_queue: type.queue,
              status: i < 2700 ? ('COMPLETE' as const) : ('NEW' as const),
              routine_name: names.ok!,
              try_count: i < 2700 ? 1 : 0,
              next_try_date_time: null,
              execute_sequence: 10,
              hash_code: null,
            })),
          )
          .execute();
      });
      await (dialect === 'mysql' ? sql`analyze table request_routine` : sql`analyze`).execute(testDb.db);
      const claim = claimQuery(testDb.db, testDb.database.dialect, {
        queue: type.queue,
        status: 'NEW',
        nowText: formatDateTime(clock),
        limit: 25,
        excludeRequestIds: new Set(),
      }).compile();
      let plan: string;
      if (dialect === 'postgres') {
        // The plan the worker runs: the prepared statement's generic plan (this session forces it).
        plan = await testDb.db.connection().execute(async (connection) => {
          await sql`prepare claim_plan as ${sql.raw(claim.sql)}`.execute(connection);
          const explained = await sql<{
            'QUERY PLAN': string;
          }>`explain (costs off) execute claim_plan(${sql.lit(formatDateTime(clock))})`.execute(connection);
          await sql`deallocate claim_plan`.execute(connection);
          return explained.rows.map((r) => r['QUERY PLAN']).join('\n');
        });
        assert.match(plan, /Index Scan using request_routine_claim on request_routine rr/);
        assert.doesNotMatch(plan, /Sort/, 'no sort of every pending routine');
        assert.doesNotMatch(
          plan,
          /Merge/,
          'no merge join that reads the request and sibling indexes from their start',
        );
      } else if (dialect === 'mysql') {
        // An index that leads with the status the claim names and gives the request order. A sorted claim
        // would also keep every pending routine it read locked, so that other workers' claims find none.
        const explained = await testDb.db.executeQuery<{
          table: string;
          key: string | null;
          Extra: string | null;
        }>({
          ...claim,
          sql: `explain ${claim.sql}`,
        });
        const rr = explained.rows.find((r) => r.table === 'rr');
        plan = JSON.stringify(explained.rows);
        assert.ok(['request_routine_claim', 'request_routine_status_request'].includes(rr?.key ?? ''), plan);
        assert.doesNotMatch(plan, /filesort/, plan);
      } else {
        const explained = await testDb.db.executeQuery<{ detail: string }>({
          ...claim,
          sql: `explain query plan ${claim.sql}`,
        });
        plan = explained.rows.map((r) => r.detail).join('\n');
        assert.match(plan, /SEARCH rr USING INDEX request_routine_claim/);
        assert.doesNotMatch(plan, /TEMP B-TREE/, 'no sort of every pending routine');
      }
      const claimed = await engine.runBatch(type.queue, 25);
      assert.equal(claimed.length, 25);
      await engine.flushCounters();
    });

    it('takes the routine lock row for a key', async () => {
      gateOpen();
      const { requestId, queue } = await newRequest(names.locker!);
      await engine.step(queue);
      const [routine] = await routinesOf(testDb.db, requestId);
      assert.equal(routine!.status, 'COMPLETE');
      const lock = await testDb.db
        .selectFrom('request_routine_lock')
        .selectAll()
        .where('routine_lock', '=', 'patient:42')
        .executeTakeFirst();
      assert.ok(lock);
      assert.ok((await countRows(testDb.db, 'request_routine_lock')) >= 1);
    });

    it('chains the routines of every successful routine of a batch once, and none of a failed one', async () => {
      const type = await createRequestType(testDb.db, { routineName: names.chain! });
      const ids: number[] = [];
      for (let i = 0; i < 4; i += 1) {
        ids.push((await enqueueRequest(testDb.database, { requestType: type.requestType })).requestId);
      }
      await testDb.db
        .updateTable('request_routine')
        .set({ routine_name: names.chainFail! })
        .where('request_id', '=', ids[1]!)
        .execute();
      const outcomes = await engine.runBatch(type.queue, 10);
      await engine.flushCounters();
      assert.deepEqual(
        outcomes.map((o) => o.kind === 'ran' && o.status),
        ['COMPLETE', 'RETRY', 'COMPLETE', 'COMPLETE'],
        'one batch ran the four first routines',
      );
      const shapes = await Promise.all(
        ids.map(async (id) =>
          (await routinesOf(testDb.db, id)).map((r) => [r.routine_name, r.execute_sequence, r.status]),
        ),
      );
      const chained = [
        [names.chain, 10, 'COMPLETE'],
        [names.ok, 20, 'NEW'],
        [names.priority, 1, 'NEW'],
      ];
      assert.deepEqual(shapes[0], chained);
      assert.deepEqual(shapes[1], [[names.chainFail, 10, 'RETRY']], 'the failed routine chained nothing');
      assert.deepEqual(shapes[2], chained);
      assert.deepEqual(shapes[3], chained);
      // The chained routines run next, each once, in their order.
      while ((await engine.runBatch(type.queue, 10)).length > 0);
      await engine.flushCounters();
      for (const id of [ids[0]!, ids[2]!, ids[3]!]) {
        assert.deepEqual(
          (await details(id)).map((d) => d.name),
          ['priority', 'ran'],
        );
      }
      assert.deepEqual(await details(ids[1]!), []);
    });

    it('voidAllNewRoutines after chaining voids the routines the same routine chained', async () => {
      const { requestId, queue } = await newRequest(names.chainVoid!);
      await engine.step(queue);
      assert.deepEqual(
        (await routinesOf(testDb.db, requestId)).map((r) => [r.routine_name, r.status]),
        [
          [names.chainVoid, 'COMPLETE'],
          [names.ok, 'VOID'],
          [names.priority, 'NEW'],
        ],
      );
      const next = await engine.step(queue);
      assert.equal(next.kind === 'ran' && next.routineName, names.priority);
    });

    it("gives each routine of a batch its own request's content, read for the batch at once", async () => {
      const type = await createRequestType(testDb.db, { routineName: names.echo! });
      const ids: number[] = [];
      for (const key of ['a', 'b', 'c']) {
        const queued = await enqueueRequest(testDb.database, {
          requestType: type.requestType,
          attachments: [jsonRow('REQUEST_DATA', { key })],
        });
        ids.push(queued.requestId);
      }
      const outcomes = await engine.runBatch(type.queue, 10);
      await engine.flushCounters();
      assert.deepEqual(
        outcomes.map((o) => o.kind === 'ran' && o.status),
        ['COMPLETE', 'RETRY', 'COMPLETE'],
      );
      // The REQUEST_DATA keys are shredded into request_details when the batch records its attempts:
      // each key once, with its last value; nothing of the failed routine.
      assert.deepEqual(
        await Promise.all(ids.map(async (id) => (await details(id)).map((d) => [d.name, d.value]))),
        [
          [
            ['echo a', names.echo],
            ['again a twice', names.echo],
            ['first', '1'],
            ['echoed', 'twice'],
          ],
          [],
          [
            ['echo c', names.echo],
            ['again c twice', names.echo],
            ['first', '1'],
            ['echoed', 'twice'],
          ],
        ],
      );
      // REQUEST_DATA too is written when the batch records its attempts, each request's own, and the
      // failed routine's merges are not.
      const requestData = await testDb.db
        .selectFrom('attachment_data')
        .select(['request_id', 'text_data'])
        .where('request_id', 'in', ids)
        .where('attachment_mnemonic', '=', 'REQUEST_DATA')
        .orderBy('request_id')
        .execute();
      assert.deepEqual(
        requestData.map((r) => JSON.parse(r.text_data!) as unknown),
        [{ key: 'a', echoed: 'twice', first: 1 }, { key: 'b' }, { key: 'c', echoed: 'twice', first: 1 }],
      );
    });

    it("creates the REQUEST_DATA rows of a batch's requests that have none", async () => {
      const type = await createRequestType(testDb.db, { routineName: names.merger! });
      const ids: number[] = [];
      for (const key of ['with_row', 'without_row', 'also_with_row']) {
        const queued = await enqueueRequest(testDb.database, {
          requestType: type.requestType,
          attachments: key === 'without_row' ? [] : [jsonRow('REQUEST_DATA', { key })],
        });
        ids.push(queued.requestId);
      }
      const outcomes = await engine.runBatch(type.queue, 10);
      await engine.flushCounters();
      assert.deepEqual(
        outcomes.map((o) => o.kind === 'ran' && o.status),
        ['COMPLETE', 'COMPLETE', 'COMPLETE'],
      );
      const rows = await testDb.db
        .selectFrom('attachment_data')
        .select(['request_id', 'text_data', 'mime_type', 'system_only_managed'])
        .where('request_id', 'in', ids)
        .where('attachment_mnemonic', '=', 'REQUEST_DATA')
        .orderBy('request_id')
        .execute();
      assert.deepEqual(
        rows.map((r) => [
          r.request_id,
          JSON.parse(r.text_data!) as unknown,
          r.mime_type,
          r.system_only_managed,
        ]),
        [
          [ids[0], { key: 'with_row', with_row: 1 }, 'application/json', 0],
          // Created as the worker creates a JSON row: system-managed.
          [ids[1], { undefined: 1 }, 'application/json', 1],
          [ids[2], { key: 'also_with_row', also_with_row: 1 }, 'application/json', 0],
        ],
      );
    });

    it('fails alone a routine that fails before writing, whether or not a statement of it failed', async () => {
      const type = await createRequestType(testDb.db, { routineName: names.reader! });
      const enqueue = async (keys: readonly string[]) => {
        const ids: number[] = [];
        for (const key of keys) {
          const queued = await enqueueRequest(testDb.database, {
            requestType: type.requestType,
            attachments: [jsonRow('REQUEST_DATA', { key })],
          });
          ids.push(queued.requestId);
        }
        return ids;
      };
      const statuses = (outcomes: readonly StepOutcome[]) =>
        outcomes.map((o) => o.kind === 'ran' && o.status);
      const marks = (ids: readonly number[]) =>
        Promise.all(ids.map(async (id) => (await details(id)).map((d) => d.name)));
      // Nothing written, nothing failed in the database: no savepoint to roll back, the batch goes on.
      const quiet = await enqueue(['a', 'quiet', 'c']);
      assert.deepEqual(statuses(await engine.runBatch(type.queue, 10)), ['COMPLETE', 'RETRY', 'COMPLETE']);
      assert.deepEqual(await marks(quiet), [['read a'], [], ['read c']]);
      // A failed statement before the savepoint may have spoilt the transaction: the batch rolls back
      // (nothing kept, no try counted), then the routine runs with its savepoint and fails alone.
      const bad = await enqueue(['d', 'bad', 'e']);
      await assert.rejects(engine.runBatch(type.queue, 10), /no_such_table/);
      assert.deepEqual(await marks(bad), [[], [], []]);
      for (const id of bad) {
        assert.deepEqual(
          (await routinesOf(testDb.db, id)).map((r) => [r.status, r.try_count]),
          [['NEW', 0]],
        );
      }
      assert.deepEqual(statuses(await engine.runBatch(type.queue, 10)), ['COMPLETE', 'RETRY', 'COMPLETE']);
      await engine.flushCounters();
      assert.deepEqual(await marks(bad), [['read d'], [], ['read e']]);
      // Each routine's own status, try count and next try, recorded for the batch at once.
      const rows = await Promise.all(bad.map(async (id) => (await routinesOf(testDb.db, id))[0]!));
      assert.deepEqual(
        rows.map((r) => [r.status, r.try_count, r.next_try_date_time === null]),
        [
          ['COMPLETE', 1, true],
          ['RETRY', 1, false],
          ['COMPLETE', 1, true],
        ],
      );
    });

    it('fails alone a routine whose writes the batch cannot store for all its routines at once', async () => {
      const type = await createRequestType(testDb.db, { routineName: names.merger! });
      const ids: number[] = [];
      for (const key of ['fine_one', 'poison', 'fine_two']) {
        const queued = await enqueueRequest(testDb.database, {
          requestType: type.requestType,
          attachments: [jsonRow('REQUEST_DATA', { key })],
        });
        ids.push(queued.requestId);
      }
      const remove = await addFailingTrigger(testDb.db, dialect, {
        name: `fail_details_${ids[1]}`,
        table: 'request_details',
        when: `new.name = 'poison'`,
        message: 'injected details failure',
      });
      try {
        // The batch's shared writes fail: nothing of it is kept, no attempt is counted.
        await assert.rejects(engine.runBatch(type.queue, 10), /injected details failure/);
        for (const id of ids) {
          const routines = await routinesOf(testDb.db, id);
          assert.deepEqual(
            routines.map((r) => [r.status, r.try_count]),
            [['NEW', 0]],
          );
        }
        // Run again, each routine writes its own: the one whose row cannot be stored fails alone.
        const outcomes = await engine.runBatch(type.queue, 10);
        assert.deepEqual(
          outcomes.map((o) => o.kind === 'ran' && o.status),
          ['COMPLETE', 'RETRY', 'COMPLETE'],
        );
      } finally {
        await remove();
      }
      await engine.flushCounters();
      const shapes = await Promise.all(
        ids.map(async (id) => (await routinesOf(testDb.db, id)).map((r) => [r.routine_name, r.status])),
      );
      assert.deepEqual(shapes, [
        [
          [names.merger, 'COMPLETE'],
          [names.ok, 'NEW'],
        ],
        [[names.merger, 'RETRY']],
        [
          [names.merger, 'COMPLETE'],
          [names.ok, 'NEW'],
        ],
      ]);
      assert.deepEqual(
        (await details(ids[0]!)).map((d) => [d.name, d.value]),
        [['fine_one', '1']],
      );
      assert.deepEqual(await details(ids[1]!), []);
    });
  });
});
