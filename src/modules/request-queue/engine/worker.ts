/**
 * The long-running queue worker (`npm run worker`, or in-process in the server with `WORKER=in-process`).
 * For each served queue it runs a bounded number of slots (config `WORKER_CONCURRENCY`, else the queue's
 * `maximum_active_threads`); each slot loops `engine.runNext(queue)`: it claims one routine of a request
 * no one else is running, runs it and, while work is found, claims the next at once (the original slept
 * `busy_yield_ms` between passes; that would cap throughput at a few routines per second). On PostgreSQL a
 * claim takes a batch of routines of different requests and commits them together (see `batch.ts`).
 *
 * Idle slots wait to be woken, not polling hard: where the dialect has notifications (PostgreSQL) a
 * dedicated connection listens on channel `request_queue` (intake and chaining batches notify the queue
 * name after their commit); in the same process an in-process event does the same; a slow poll every
 * `idle_yield_ms` is the fallback, and also picks up RETRY routines whose next try has come.
 *
 * A single writer (SQLite): one slot per queue (one connection); run one worker process per database file.
 */
import type { Subscription } from '../../../db/dialect.ts';
import type { Logger } from '../../../logger.ts';
import type { EngineOptions, QueueEngine } from './engine.ts';
import { createQueueEngine } from './engine.ts';
import type { IntakePace } from './intake-pace.ts';
import { findQueues } from './claim.queries.ts';
import { REQUEST_QUEUE_CHANNEL, onRequestQueued } from './queue-events.ts';

export interface QueueWorker {
  readonly engine: QueueEngine;
  /** Starts the slots; resolves once they run (and, with notifications, once listening). */
  start(): Promise<void>;
  /** Stops claiming, waits for the routines in flight to finish, flushes the queue counters. */
  stop(): Promise<void>;
  /** Wakes idle slots of `queue` (all queues when omitted): one, or all with `isAll`. */
  wake(queue?: string, isAll?: boolean): void;
}

export interface WorkerOptions extends EngineOptions {
  readonly logger?: Logger;
  /** How often the queue counters are written, in ms. */
  readonly counterFlushMs?: number;
  /** Routines claimed and committed together (see `batch.ts`); default 25. */
  readonly batchSize?: number;
  /**
   * Upper bound of the slots of one queue with several writers. Default: the pool size less two, shared
   * between the served queues (right for the worker inside the server, which shares the pool with HTTP).
   */
  readonly maxSlotsPerQueue?: number;
  /** The intake of the same process, paced to this worker (see `intake-pace.ts`). */
  readonly pace?: IntakePace;
}

export function createQueueWorker(options: WorkerOptions): QueueWorker {
  const { database, config, logger } = options;
  const engine = createQueueEngine(options);
  const batchSize = options.batchSize ?? 25;
  let isRunning = false;
  const loops: Promise<void>[] = [];
  const waiters = new Map<string, Set<() => void>>();
  const generations = new Map<string, number>();
  let subscription: Subscription | undefined;
  let queueHold: { release(): Promise<void> } | undefined;
  let flushTimer: NodeJS.Timeout | undefined;
  let unsubscribe: (() => void) | undefined;

  /**
   * Wakes idle slots of `queue` (every queue when omitted): one slot by default, since one new request
   * needs one claim and twenty slots racing for it only burn CPU; `isAll` for shutdown and for a full batch
   * (more work than one slot takes). Slots claiming right now see the bumped generation and claim again.
   */
  function wake(queue?: string, isAll = false): void {
    for (const [name, set] of waiters) {
      if (queue !== undefined && name !== queue) continue;
      generations.set(name, (generations.get(name) ?? 0) + 1);
      for (const resolve of [...set].slice(0, isAll ? set.size : 1)) resolve();
    }
    if (queue !== undefined && !waiters.has(queue)) generations.set(queue, (generations.get(queue) ?? 0) + 1);
  }

  function waitForWake(queue: string, timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      let set = waiters.get(queue);
      if (set === undefined) {
        set = new Set();
        waiters.set(queue, set);
      }
      const done = () => {
        clearTimeout(timer);
        set.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      set.add(done);
    });
  }

  async function runSlot(queue: string, idleYieldMs: number): Promise<void> {
    while (isRunning) {
      const generation = generations.get(queue) ?? 0;
      try {
        const outcomes = await engine.runBatch(queue, batchSize);
        options.pace?.workerRan(queue, outcomes);
        // A full batch suggests more work: let the idle slots of this process help.
        if (outcomes.length >= batchSize) wake(queue, true);
        if (outcomes.length > 0) continue;
      } catch (error) {
        logger?.error({ err: error, queue }, 'queue worker pass failed; pausing');
        await waitForWake(`${queue}\u0000error`, 1000);
        continue;
      }
      // A wake-up that arrived while the claim ran must not be lost.
      if ((generations.get(queue) ?? 0) !== generation) continue;
      if (isRunning) await waitForWake(queue, idleYieldMs);
    }
  }

  return {
    engine,
    wake,
    async start() {
      if (isRunning) return;
      const queues = await findQueues(database.db, config.workerQueues);
      const missing = config.workerQueues.filter((name) => !queues.some((q) => q.request_queue === name));
      if (missing.length > 0) throw new Error(`Request queue(s) not in the database: ${missing.join(', ')}`);
      // No other engine (OpenEyes's Java processor) may serve these queues meanwhile.
      queueHold = await database.schema.holdQueues?.(
        queues.map((q) => q.request_queue),
        (error) => {
          logger?.error({ err: error }, 'the queue lock was lost to another engine; the worker stops');
          void this.stop();
        },
      );
      isRunning = true;
      options.pace?.workerServes(queues.map((q) => q.request_queue));
      subscription = await database.dialect.subscribe(REQUEST_QUEUE_CHANNEL, {
        onMessage: (queue) => wake(queue === '' ? undefined : queue),
        // Anything queued while the connection was down.
        onReconnect: () => wake(undefined, true),
        onLost: (error) => logger?.warn({ err: error }, 'queue LISTEN connection lost; reconnecting'),
      });
      unsubscribe = onRequestQueued((event) => wake(event.queue));
      // With several writers each running slot holds one pooled connection. Sharing the server's pool
      // (the in-process worker), the slots get at most the pool less two, shared fairly between the
      // queues; a worker process (`maxSlotsPerQueue`) lets the pool queue its own slots. A single writer
      // runs one slot.
      const poolMax = database.dialect.maxConnections;
      const fairShare = Math.max(1, Math.floor(Math.max(1, poolMax - 2) / Math.max(1, queues.length)));
      const cap = database.dialect.hasConcurrentWriters ? (options.maxSlotsPerQueue ?? fairShare) : 1;
      for (const queue of queues) {
        const wanted = config.workerConcurrency || queue.maximum_active_threads || 1;
        const slots = Math.max(1, Math.min(wanted, cap));
        for (let i = 0; i < slots; i += 1)
          loops.push(runSlot(queue.request_queue, queue.idle_yield_ms || 1000));
        logger?.info({ queue: queue.request_queue, slots }, 'queue worker serving');
      }
      flushTimer = setInterval(() => {
        engine
          .flushCounters()
          .catch((error: unknown) => logger?.warn({ err: error }, 'queue counters not saved'));
      }, options.counterFlushMs ?? 1000);
      flushTimer.unref();
    },
    async stop() {
      if (!isRunning) return;
      isRunning = false;
      options.pace?.workerServes([]);
      clearInterval(flushTimer);
      unsubscribe?.();
      wake(undefined, true);
      for (const set of waiters.values()) for (const resolve of set) resolve();
      await Promise.all(loops.splice(0));
      await engine
        .flushCounters({ isFinal: true })
        .catch((error: unknown) => logger?.warn({ err: error }, 'queue counters not saved'));
      await subscription?.close().catch(() => {});
      subscription = undefined;
      await queueHold?.release();
      queueHold = undefined;
    },
  };
}
