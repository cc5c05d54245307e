/**
 * The queue engine: claims eligible routines and runs them, one worker per request. `runBatch(queue, n)`
 * is the unit of work; the long-running worker (`worker.ts`) calls it in a loop per slot, and tests call
 * `step()` / `runNext()` to drive the queue one routine at a time with an injected clock.
 *
 * The engine is generic: it runs the routines of the catalog it is given (the composition root in
 * `src/main` hands it the service's routines). Its parts: the batch strategies and their one commit and
 * rollback path (`batch.ts`), attempts and their start marks (`attempts.ts`), one routine's run
 * (`run-routine.ts`) and the context it runs with (`run-context.ts`), the claim and record SQL
 * (`claim.queries.ts`), the queue counters (`counters.ts`).
 */
import type { StepOutcome } from './attempts.ts';
import { runLockedBatch, runSingleWriterBatch } from './batch.ts';
import { findQueues } from './claim.queries.ts';
import type { EngineOptions } from './runtime.ts';
import { createEngineRuntime } from './runtime.ts';

export type { StepOutcome } from './attempts.ts';
export { MAX_UNFINISHED_ATTEMPTS } from './attempts.ts';
export type { EngineOptions } from './runtime.ts';
export { retryDelayMs } from './runtime.ts';

export interface QueueEngine {
  /** Claims and runs at most one routine of `queue`. Counters are kept in memory until flushed. */
  runNext(queue: string): Promise<StepOutcome>;
  /**
   * Claims up to `maxRoutines` routines of `queue` (different requests), runs them in one transaction and
   * commits once. Empty when nothing was eligible.
   */
  runBatch(queue: string, maxRoutines: number): Promise<StepOutcome[]>;
  /**
   * Runs at most one routine of `queue`, or of the first served queue (config `workerQueues`, else every
   * queue) that has one, then flushes the counters. For tests and the CLI.
   */
  step(queue?: string): Promise<StepOutcome>;
  /**
   * Adds the in-memory counters to the `request_queue` rows. Unless `isFinal` (the worker stops), a row
   * that other transactions hold (see `addQueueCounters`) keeps its counts for the next flush.
   */
  flushCounters(options?: { isFinal?: boolean }): Promise<void>;
  /** Routines running right now in this process. */
  readonly activeCount: number;
}

export function createQueueEngine(options: EngineOptions): QueueEngine {
  const rt = createEngineRuntime(options);

  async function runBatch(queue: string, maxRoutines: number): Promise<StepOutcome[]> {
    const limit = Math.max(1, maxRoutines);
    return rt.dialect.hasRowLocks ? runLockedBatch(rt, queue, limit) : runSingleWriterBatch(rt, queue, limit);
  }

  async function runNext(queue: string): Promise<StepOutcome> {
    const [first] = await runBatch(queue, 1);
    return first ?? { kind: 'idle' };
  }

  function flushCounters(flush: { isFinal?: boolean } = {}): Promise<void> {
    return rt.counters.flush(rt, { activeCount: rt.activeCount, isFinal: flush.isFinal === true });
  }

  async function step(queue?: string): Promise<StepOutcome> {
    const queues =
      queue === undefined
        ? (await findQueues(rt.db, rt.config.workerQueues)).map((q) => q.request_queue)
        : [queue];
    let outcome: StepOutcome = { kind: 'idle' };
    for (const name of queues) {
      outcome = await runNext(name);
      if (outcome.kind !== 'idle') break;
    }
    await flushCounters();
    return outcome;
  }

  return {
    runNext,
    runBatch,
    step,
    flushCounters,
    get activeCount() {
      return rt.activeCount;
    },
  };
}
