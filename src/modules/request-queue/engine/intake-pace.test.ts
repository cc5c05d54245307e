import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Config } from '../../../config.ts';
import { loadConfig } from '../../../config.ts';
import { createRequestType } from '../../../../test/factories-queue.ts';
import { createUser } from '../../../../test/factories.ts';
import type { TestDatabase } from '../../../../test/harness.ts';
import { createTestDatabase } from '../../../../test/harness.ts';
import { createIntakeService } from '../intake/intake.service.ts';
import type { StepOutcome } from './attempts.ts';
import { createIntakePace } from './intake-pace.ts';
import { createRoutineCatalog, defineRoutine } from './routine-catalog.ts';
import { createQueueWorker } from './worker.ts';

const ran = (requestId: number): StepOutcome => ({
  kind: 'ran',
  routineId: requestId,
  requestId,
  routineName: 'R',
  status: 'COMPLETE',
  tryCount: 1,
  nextTry: null,
});

/** Whether `promise` has settled once the timers and I/O queued so far have run. */
async function isSettled(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  void promise.then(() => (settled = true));
  await new Promise((resolve) => setImmediate(resolve));
  return settled;
}

describe('intake pace', () => {
  it('answers at once while the worker is within the target, waits once it is further behind', async () => {
    let clock = 0;
    const pace = createIntakePace({ lagTargetMs: 60_000, now: () => clock });
    pace.workerServes(['q']);
    await pace.afterAccepted('q', 1);
    clock = 30_000;
    await pace.afterAccepted('q', 2);
    assert.equal(pace.lagMs('q'), 30_000, 'the oldest request not reached is 30 s old');
    clock = 70_000;
    const waiting = pace.afterAccepted('q', 3);
    assert.equal(await isSettled(waiting), false, 'the worker is 70 s behind: the answer waits');
    pace.workerRan('q', [ran(2)]);
    assert.equal(pace.lagMs('q'), 40_000, 'the worker is at request 2, accepted 40 s ago');
    assert.equal(await isSettled(waiting), true, 'back within the target: the answer goes');
    pace.workerRan('q', []);
    assert.equal(pace.lagMs('q'), 0, 'an empty batch: the worker has caught up');
  });

  it('moves only on routines that ran, and never paces a queue the worker does not serve', async () => {
    let clock = 0;
    const pace = createIntakePace({ lagTargetMs: 60_000, now: () => clock });
    await pace.afterAccepted('other', 1);
    clock = 120_000;
    assert.equal(
      await isSettled(pace.afterAccepted('other', 2)),
      true,
      'no worker of this process serves it',
    );
    assert.equal(pace.lagMs('other'), 0);
    pace.workerServes(['q']);
    await pace.afterAccepted('q', 3);
    clock = 200_000;
    const waiting = pace.afterAccepted('q', 4);
    pace.workerRan('q', [{ kind: 'contended' }, { kind: 'deferred' }]);
    assert.equal(pace.lagMs('q'), 80_000, 'a batch that ran nothing says nothing of where the worker is');
    assert.equal(await isSettled(waiting), false);
    pace.workerServes([]);
    assert.equal(await isSettled(waiting), true, 'a stopping worker releases the waiting answers');
  });

  it('waits at most the target, then answers even if the worker is still behind', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    let clock = 0;
    const pace = createIntakePace({ lagTargetMs: 100, now: () => clock });
    pace.workerServes(['q']);
    await pace.afterAccepted('q', 1);
    clock = 500;
    const waiting = pace.afterAccepted('q', 2);
    t.mock.timers.tick(99);
    assert.equal(await isSettled(waiting), false, 'the worker is 400 ms past the target: it waits');
    clock = 600;
    t.mock.timers.tick(1);
    assert.equal(await isSettled(waiting), true, 'the target reached: it answers');
    assert.ok(pace.lagMs('q') > 100, 'the worker never ran: still behind');
  });

  it('waits no longer than the worker is past the target', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    let clock = 0;
    const pace = createIntakePace({ lagTargetMs: 1000, now: () => clock });
    pace.workerServes(['q']);
    await pace.afterAccepted('q', 1);
    clock = 1030;
    const waiting = pace.afterAccepted('q', 2);
    t.mock.timers.tick(29);
    assert.equal(await isSettled(waiting), false, 'the worker is 30 ms past the target: it waits');
    clock = 1060;
    t.mock.timers.tick(1);
    assert.equal(await isSettled(waiting), true, 'after 30 ms it answers, not after the whole target');
  });

  it('is off with a target of 0', async () => {
    let clock = 0;
    const pace = createIntakePace({ lagTargetMs: 0, now: () => clock });
    pace.workerServes(['q']);
    await pace.afterAccepted('q', 1);
    clock = 1_000_000;
    assert.equal(await isSettled(pace.afterAccepted('q', 2)), true);
  });
});

// Clients that send their next request when the previous one is answered (as HTTP connections do):
// with a worker that takes 40 ms per request, intake would run far ahead of it; paced, the last answer
// comes only once the worker is close behind.
describe('intake paced to a worker of the same process (sqlite)', () => {
  let testDb: TestDatabase;
  let config: Config;
  before(async () => {
    testDb = await createTestDatabase('sqlite');
    config = loadConfig(testDb.env);
  });
  after(() => testDb.drop());

  it('keeps the worker within reach of what intake has accepted', async () => {
    const type = await createRequestType(testDb.db);
    const user = await createUser(testDb.db);
    let completed = 0;
    const pace = createIntakePace({ lagTargetMs: 200 });
    const worker = createQueueWorker({
      database: testDb.database,
      config: { ...config, workerQueues: [type.queue] },
      batchSize: 2,
      catalog: createRoutineCatalog([
        defineRoutine({
          name: type.routineName,
          timeoutMs: 5000,
          retry: 'backoff',
          run: async () => {
            await new Promise((resolve) => setTimeout(resolve, 40));
            completed += 1;
          },
        }),
      ]),
      pace,
    });
    const intake = createIntakeService({ database: testDb.database, config, pace });
    await worker.start();
    try {
      const clients = 4;
      const perClient = 15;
      await Promise.all(
        Array.from({ length: clients }, async () => {
          for (let i = 0; i < perClient; i += 1) {
            await intake.submit({
              effectiveType: 'application/json',
              kind: 'json',
              body: Buffer.from('{"data":{"a":1}}'),
              query: { request_type: type.requestType },
              headers: {},
              clientAddress: '127.0.0.1',
              userId: user.userId,
            });
          }
        }),
      );
      const total = clients * perClient;
      // Unpaced, 60 submissions take a fraction of a second and the worker has run a handful of them.
      assert.ok(
        completed >= total / 2,
        `the worker had run ${completed} of ${total} when intake's last answer left`,
      );
    } finally {
      await worker.stop();
    }
  });
});
