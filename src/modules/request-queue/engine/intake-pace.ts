/**
 * Intake paced to the worker in the same process (`WORKER=in-process`), so that the queue is never far
 * behind: a server whose event loop is saturated by queue add answers each request at once, while the
 * worker's statements wait their turn behind them; intake then runs several times faster than the worker
 * drains and every request waits for the end of the burst. Here each queue keeps how far behind its
 * worker is — the age of the oldest request this process accepted that the worker has not reached yet —
 * and while that passes `lagTargetMs`, an accepted request's answer waits for the worker's next batches,
 * at most by how much the worker is past the target (`lag - lagTargetMs`) and never more than
 * `lagTargetMs`. The wait is what the backlog justifies: a worker just past the target costs each client
 * a few milliseconds, not a whole target, so paced intake settles where it equals the drain (each
 * client's wait grows with the lag until intake no longer outruns the worker) instead of below it. The
 * request is committed before it waits: pacing delays answers, never data, and a client that gives up
 * meanwhile has its request queued all the same.
 *
 * The worker reports each batch ({@link IntakePace.workerRan}): claims go oldest request first, so the
 * lowest request id of a batch is where the worker is; an empty batch means it has caught up.
 */
import type { StepOutcome } from './attempts.ts';

export interface IntakePace {
  /** After a request's commit: resolves at once, or once the worker is back within the target. */
  afterAccepted(queue: string, requestId: number): Promise<void>;
  /** The queues the worker serves (none once it stops): only their intake is paced. */
  workerServes(queues: readonly string[]): void;
  /** The worker's batch on `queue` ended with these outcomes. */
  workerRan(queue: string, outcomes: readonly StepOutcome[]): void;
  /** How far behind the worker of `queue` is now, in ms (a gauge, and what tests observe). */
  lagMs(queue: string): number;
}

/** Accepted requests remembered per queue at most; beyond, the oldest are forgotten (lag then a floor). */
const MAX_REMEMBERED = 100_000;

interface QueuePace {
  /** Accepted request ids and when, oldest first, from the worker's position on. */
  readonly ids: number[];
  readonly times: number[];
  /** Index of the first entry still ahead of the worker. */
  start: number;
  /** Answers waiting for the worker's next batch. */
  readonly waiters: Set<() => void>;
}

export function createIntakePace(options: { lagTargetMs: number; now?: () => number }): IntakePace {
  const now = options.now ?? Date.now;
  const target = options.lagTargetMs;
  const queues = new Map<string, QueuePace>();
  let served = new Set<string>();
  const paceOf = (queue: string) => {
    let pace = queues.get(queue);
    if (pace === undefined) {
      pace = { ids: [], times: [], start: 0, waiters: new Set() };
      queues.set(queue, pace);
    }
    return pace;
  };
  const lagOf = (pace: QueuePace) => (pace.start < pace.ids.length ? now() - pace.times[pace.start]! : 0);
  const compact = (pace: QueuePace) => {
    if (pace.start > 1024 && pace.start * 2 > pace.ids.length) {
      pace.ids.splice(0, pace.start);
      pace.times.splice(0, pace.start);
      pace.start = 0;
    }
  };

  return {
    async afterAccepted(queue, requestId) {
      if (target <= 0 || !served.has(queue)) return;
      const pace = paceOf(queue);
      pace.ids.push(requestId);
      pace.times.push(now());
      if (pace.ids.length - pace.start > MAX_REMEMBERED) pace.start += 1;
      compact(pace);
      const deadline = now() + Math.min(target, lagOf(pace) - target);
      while (served.has(queue) && lagOf(pace) > target) {
        const left = deadline - now();
        if (left <= 0) return;
        await new Promise<void>((resolve) => {
          const done = () => {
            clearTimeout(timer);
            pace.waiters.delete(done);
            resolve();
          };
          const timer = setTimeout(done, left);
          pace.waiters.add(done);
        });
      }
    },
    workerServes(names) {
      served = new Set(names);
      for (const [name, pace] of queues) {
        if (served.has(name)) continue;
        queues.delete(name);
        for (const resolve of [...pace.waiters]) resolve();
      }
    },
    workerRan(queue, outcomes) {
      const pace = queues.get(queue);
      if (pace === undefined) return;
      // An empty batch: the worker has reached every request it can run now. Otherwise it is at the
      // lowest request id it ran (none ran: contended or deferred claims, the position is unknown).
      let position = outcomes.length === 0 ? Infinity : undefined;
      for (const outcome of outcomes) {
        if (outcome.kind === 'ran') position = Math.min(position ?? Infinity, outcome.requestId);
      }
      if (position !== undefined) {
        // Requests accepted out of id order (commits ending in another order) are few and close.
        while (pace.start < pace.ids.length && pace.ids[pace.start]! < position) pace.start += 1;
        compact(pace);
      }
      for (const resolve of [...pace.waiters]) resolve();
    },
    lagMs(queue) {
      const pace = queues.get(queue);
      return pace === undefined ? 0 : lagOf(pace);
    },
  };
}
