/**
 * What one engine's functions share: its options resolved once, the routine catalog it was given, and the
 * little state it keeps in memory (requests it is running, routine names known to exist, the reference
 * cache, the queue counters, the routines running right now). Created by `createQueueEngine`, handed to
 * the batch, attempt and run-context functions.
 */
import { hostname } from 'node:os';
import type { Kysely } from 'kysely';
import type { BackoffStep, Config } from '../../../config.ts';
import type { Database } from '../../../db/database.ts';
import type { DialectAdapter } from '../../../db/dialect.ts';
import type { DB } from '../../../db/schema.ts';
import type { Logger } from '../../../logger.ts';
import type { CounterBook } from './counters.ts';
import { createCounterBook } from './counters.ts';
import type { RoutineCatalog } from './routine-catalog.ts';

export interface EngineOptions {
  readonly database: Database;
  readonly config: Config;
  /** The routines this engine runs, by name; the composition root (`src/main`) hands it in. */
  readonly catalog: RoutineCatalog;
  /** The clock; tests inject one to step through back-off without sleeping. */
  readonly now?: () => Date;
  readonly logger?: Logger;
  /** Names this worker in the first line of every execution's `log_text`; default `<host>:<pid>`. */
  readonly workerLabel?: string;
  /** After this many ms a batch starts no further routine; default {@link BATCH_BUDGET_MS}. */
  readonly batchBudgetMs?: number;
}

/**
 * A batch's routines are not started after this budget, so that one slow routine does not hold the
 * others' claims for long. A durable commit costs a disk flush, so committing per routine would cap a
 * worker at a few hundred routines per second; a batch shares one, and its other fixed statements (claim,
 * start marks, records, chains). On a busy machine each routine takes longer by the clock, so a short
 * budget would end batches after a few routines and multiply those statements per routine.
 */
const BATCH_BUDGET_MS = 300;

export interface EngineRuntime {
  readonly database: Database;
  readonly db: Kysely<DB>;
  readonly dialect: DialectAdapter;
  readonly config: Config;
  readonly catalog: RoutineCatalog;
  readonly now: () => Date;
  readonly logger: Logger | undefined;
  readonly workerName: string;
  /** The first line of every execution log of this engine. */
  readonly workerLine: string;
  readonly batchBudgetMs: number;
  /** Without row locks: the requests this process is running, left out of its claims. */
  readonly busyRequestIds: Set<number>;
  /** Routine names seen in `routine_library` (its rows are never removed). */
  readonly knownRoutineNames: Set<string>;
  readonly references: ReferenceCache;
  readonly counters: CounterBook;
  /** Routines running right now in this process. */
  activeCount: number;
  /**
   * The routines of batches whose shared writes (their routines' chains and `request_details` rows, written
   * for all of them at once) failed: a batch that runs one of them again writes each routine's in its own
   * savepoint, so that a routine whose writes cannot be stored fails alone instead of failing every batch
   * it is in. Removed once recorded.
   */
  readonly writingEachRoutineIds: Set<number>;
  /**
   * Routines whose statement failed before their savepoint was open (see `lazy-savepoint.ts`): their batch
   * rolled back, and their next run opens the savepoint at once. Removed once recorded.
   */
  readonly eagerSavepointIds: Set<number>;
  /**
   * With row locks, each batch holds one pool connection throughout (its session keys are that
   * connection's) while its preparation and start marks read and write on others: batches take a turn
   * here first, at most the pool less one at a time, so that however many slots wait for the pool, one
   * connection stays for those reads and every batch can finish.
   */
  readonly batchConnections: Turns;
}

/** A counting semaphore, first come first served: `take` resolves once a turn is free. */
export interface Turns {
  take(): Promise<void>;
  give(): void;
}

function createTurns(limit: number): Turns {
  let free = Math.max(1, limit);
  const waiting: (() => void)[] = [];
  return {
    take() {
      if (free > 0 && waiting.length === 0) {
        free -= 1;
        return Promise.resolve();
      }
      return new Promise((resolve) => waiting.push(resolve));
    },
    give() {
      // Handed over to the first waiter as it is: `free` does not change.
      const next = waiting.shift();
      if (next === undefined) free += 1;
      else next();
    },
  };
}

export function createEngineRuntime(options: EngineOptions): EngineRuntime {
  const workerName = options.workerLabel ?? `${hostname()}:${process.pid}`;
  return {
    database: options.database,
    db: options.database.db,
    dialect: options.database.dialect,
    config: options.config,
    catalog: options.catalog,
    now: options.now ?? (() => new Date()),
    logger: options.logger,
    workerName,
    workerLine: `worker ${workerName}`,
    batchBudgetMs: options.batchBudgetMs ?? BATCH_BUDGET_MS,
    busyRequestIds: new Set(),
    knownRoutineNames: new Set(),
    references: createReferenceCache(options.config.referenceCacheTtlMs),
    counters: createCounterBook(),
    activeCount: 0,
    writingEachRoutineIds: new Set(),
    eagerSavepointIds: new Set(),
    batchConnections: createTurns(options.database.dialect.maxConnections - 1),
  };
}

/**
 * The retry back-off: `tryCount` is the count after the failed attempt. Returns the delay before the next
 * try, or undefined when the routine has used its tries and goes to FAILED.
 */
export function retryDelayMs(tryCount: number, steps: readonly BackoffStep[]): number | undefined {
  const step = steps.find((s) => tryCount < s.belowTry);
  if (step === undefined) return undefined;
  return step.isPerTry ? step.delayMs * tryCount : step.delayMs;
}

export interface ReferenceCache {
  get<T>(key: string, load: () => Promise<T>): Promise<T>;
}

/**
 * Reference rows the routines read on every run (identifier types, event types), kept `ttlMs` (0: not
 * kept) and shared by the routines of this engine; a value still loading is shared, a failed load is not
 * kept.
 */
function createReferenceCache(ttlMs: number): ReferenceCache {
  const entries = new Map<string, { value: Promise<unknown>; expiresAt: number }>();
  return {
    get<T>(key: string, load: () => Promise<T>): Promise<T> {
      const now = Date.now();
      const entry = entries.get(key);
      if (entry !== undefined && entry.expiresAt > now) return entry.value as Promise<T>;
      const value = load();
      if (ttlMs > 0) {
        entries.set(key, { value, expiresAt: now + ttlMs });
        value.catch(() => entries.delete(key));
      }
      return value;
    },
  };
}
