/**
 * The queue engine: claims one eligible routine and runs it (reference 9.3 and 9.4). `runNext(queue)` is
 * the unit of work; the long-running worker (`worker.ts`) calls it in a loop per slot, and tests call
 * `step()` to drive the queue one routine at a time with an injected clock.
 *
 * One attempt is one transaction: claim (row locks on PostgreSQL), re-check eligibility, savepoint, run
 * the routine, then either record COMPLETE + try count + the execution row and commit together with the
 * routine's writes, or roll back to the savepoint (undoing every write of the routine) and record RETRY
 * or FAILED + the execution row in the same, still-locked transaction. Reference 9.4 records a failure in
 * a second transaction; the savepoint gives the same result without releasing the request lock between
 * the two, so another worker cannot start the same routine before its failure is recorded.
 */
import type { ControlledTransaction, Kysely } from 'kysely';
import type { Config } from '../../config.ts';
import type { Database } from '../../db/database.ts';
import { formatDateTime } from '../../db/database.ts';
import type { DB, RoutineStatus } from '../../db/schema.ts';
import type { FileStore } from '../../files/file-store.ts';
import type { Logger } from '../../logger.ts';
import type { AttemptRecord, ClaimedRoutine, QueueCounters } from './claim.queries.ts';
import {
  addQueueCounters,
  addRequestRoutine,
  findQueues,
  isStillEligible,
  recordAttempt,
  voidNewRoutines,
} from './claim.queries.ts';
import * as pgClaim from './claim.queries.postgres.ts';
import * as sqliteClaim from './claim.queries.sqlite.ts';
import type {
  PrepareContext,
  RoutineCatalog,
  RoutineContext,
  RoutineDefinition,
} from './routines/catalog.ts';
import { PermanentRoutineError } from './routines/catalog.ts';
import { defaultRoutineCatalog } from './routines/index.ts';
import { readRequestText, writeRequestText, mergeRequestData } from './routines/request-data.ts';

export interface BackoffStep {
  /** The step applies while the try count (after the failed attempt) is below this. */
  readonly belowTry: number;
  readonly delayMs: number;
  /** Multiply the delay by the try count (`2m*n`). */
  readonly isPerTry: boolean;
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Parses `2m*n@5,30m@13,6h@20` (the default, reference 9.5 newest branch) into steps. */
export function parseBackoff(text: string): BackoffStep[] {
  return text.split(',').map((part) => {
    const match = /^(\d+)(ms|s|m|h)(\*n)?@(\d+)$/.exec(part.trim());
    if (match === null) throw new Error(`Bad back-off step: ${part}`);
    return {
      delayMs: Number(match[1]) * UNIT_MS[match[2]!]!,
      isPerTry: match[3] !== undefined,
      belowTry: Number(match[4]),
    };
  });
}

/**
 * Reference 9.5: `tryCount` is the count after the failed attempt. Returns the delay before the next try,
 * or undefined when the routine has used its tries and goes to FAILED.
 */
export function retryDelayMs(tryCount: number, steps: readonly BackoffStep[]): number | undefined {
  const step = steps.find((s) => tryCount < s.belowTry);
  if (step === undefined) return undefined;
  return step.isPerTry ? step.delayMs * tryCount : step.delayMs;
}

export type StepOutcome =
  | { readonly kind: 'idle' }
  /** A candidate was taken or changed by another worker between the claim and the re-check. */
  | { readonly kind: 'contended' }
  | {
      readonly kind: 'ran';
      readonly routineId: number;
      readonly requestId: number;
      readonly routineName: string;
      readonly status: RoutineStatus;
      readonly tryCount: number;
      readonly nextTry: string | null;
      readonly error?: string;
    };

export interface EngineOptions {
  readonly database: Database;
  readonly files: FileStore;
  readonly config: Config;
  readonly catalog?: RoutineCatalog;
  /** The clock; tests inject one to step through back-off without sleeping. */
  readonly now?: () => Date;
  readonly logger?: Logger;
}

export interface QueueEngine {
  /** Claims and runs at most one routine of `queue`. Counters are kept in memory until flushed. */
  runNext(queue: string): Promise<StepOutcome>;
  /**
   * Runs at most one routine of `queue`, or of the first served queue (config `workerQueues`, else every
   * queue) that has one, then flushes the counters. For tests and the CLI.
   */
  step(queue?: string): Promise<StepOutcome>;
  /** Adds the in-memory counters to the `request_queue` rows. */
  flushCounters(): Promise<void>;
  /** Routines running right now in this process. */
  readonly activeCount: number;
}

type Trx = ControlledTransaction<DB>;

export function createQueueEngine(options: EngineOptions): QueueEngine {
  const { database, files, config } = options;
  const db = database.db;
  const catalog = options.catalog ?? defaultRoutineCatalog;
  const now = options.now ?? (() => new Date());
  const backoff = parseBackoff(config.queueRetryBackoff);
  const counters = new Map<string, QueueCounters>();
  // SQLite: the requests this process is running, left out of claims (no row locks there).
  const busyRequestIds = new Set<number>();
  let activeCount = 0;

  const countersOf = (queue: string): QueueCounters => {
    let c = counters.get(queue);
    if (c === undefined) {
      c = { success: 0, fail: 0, active: 0, lastRequestId: null, lastSpawnAt: null };
      counters.set(queue, c);
    }
    return c;
  };

  async function runNext(queue: string): Promise<StepOutcome> {
    const nowText = formatDateTime(now());
    if (database.dialect === 'postgres') {
      const trx = await db.startTransaction().execute();
      try {
        const claimed = await pgClaim.claimNextRoutine(trx, queue, nowText);
        if (claimed === undefined) {
          await trx.rollback().execute();
          return { kind: 'idle' };
        }
        if (!(await isStillEligible(trx, claimed.id, queue, nowText))) {
          await trx.rollback().execute();
          return { kind: 'contended' };
        }
        return await attempt(claimed, trx, trx);
      } catch (error) {
        if (!trx.isCommitted && !trx.isRolledBack)
          await trx
            .rollback()
            .execute()
            .catch(() => {});
        throw error;
      }
    }
    const claimed = await sqliteClaim.claimNextRoutine(db, queue, nowText, busyRequestIds);
    if (claimed === undefined) return { kind: 'idle' };
    busyRequestIds.add(claimed.request_id);
    try {
      return await attempt(claimed, undefined, db);
    } finally {
      busyRequestIds.delete(claimed.request_id);
    }
  }

  /**
   * Runs `claimed`. On PostgreSQL `held` is the claim's transaction; on SQLite it is undefined and the
   * write transaction opens after `prepare` (so slow preparation never holds the single connection).
   */
  async function attempt(
    claimed: ClaimedRoutine,
    held: Trx | undefined,
    readDb: Kysely<DB>,
  ): Promise<StepOutcome> {
    activeCount += 1;
    const queueCounters = countersOf(claimed.execute_request_queue);
    queueCounters.active = Math.max(queueCounters.active, activeCount);
    queueCounters.lastRequestId = claimed.request_id;
    queueCounters.lastSpawnAt = formatDateTime(now());
    const logLines: string[] = [];
    const startedAt = Date.now();
    const definition = catalog.get(claimed.routine_name);
    const prepareContext: PrepareContext = {
      db: readDb,
      dialect: database.dialect,
      routine: claimed,
      requestType: claimed.request_type,
      config,
      files,
      now,
      log: (line) => logLines.push(line),
      readText: (mnemonic) => readRequestText(readDb, claimed.request_id, mnemonic),
    };
    let trx = held;
    try {
      let failure: unknown;
      let prepared: unknown;
      if (definition === undefined) {
        failure = new PermanentRoutineError(`Unknown routine: ${claimed.routine_name}`);
      } else if (held === undefined) {
        try {
          prepared = await withTimeout(prepareAndValidate(definition, prepareContext), definition.timeoutMs);
        } catch (error) {
          failure = error;
        }
      }
      if (trx === undefined) {
        trx = await db.startTransaction().execute();
        const nowText = formatDateTime(now());
        if (!(await isStillEligible(trx, claimed.id, claimed.execute_request_queue, nowText))) {
          await trx.rollback().execute();
          return { kind: 'contended' };
        }
      }
      if (failure === undefined && definition !== undefined) {
        const inSavepoint = await trx.savepoint('routine').execute();
        try {
          const context = createRunContext(inSavepoint, prepareContext, definition, startedAt);
          await withTimeout(
            (async () => {
              const ready =
                held === undefined ? prepared : await prepareAndValidate(definition, prepareContext);
              await definition.run(context, ready);
            })(),
            definition.timeoutMs,
          );
          await inSavepoint.releaseSavepoint('routine').execute();
        } catch (error) {
          failure = error;
          await inSavepoint.rollbackToSavepoint('routine').execute();
        }
      }
      const record = outcomeOf(claimed, definition, failure, logLines);
      await recordAttempt(trx, record);
      await trx.commit().execute();
      if (record.status === 'COMPLETE') queueCounters.success += 1;
      else queueCounters.fail += 1;
      options.logger?.info(
        {
          routineId: claimed.id,
          requestId: claimed.request_id,
          routine: claimed.routine_name,
          status: record.status,
          tryCount: record.tryCount,
          ms: Date.now() - startedAt,
        },
        'routine attempt',
      );
      return {
        kind: 'ran',
        routineId: claimed.id,
        requestId: claimed.request_id,
        routineName: claimed.routine_name,
        status: record.status,
        tryCount: record.tryCount,
        nextTry: record.nextTry,
        ...(failure === undefined ? {} : { error: messageOf(failure) }),
      };
    } catch (error) {
      if (trx !== undefined && !trx.isCommitted && !trx.isRolledBack) {
        await trx
          .rollback()
          .execute()
          .catch(() => {});
      }
      throw error;
    } finally {
      activeCount -= 1;
    }
  }

  async function prepareAndValidate(
    definition: RoutineDefinition,
    context: PrepareContext,
  ): Promise<unknown> {
    await definition.validate?.(context);
    return definition.prepare === undefined ? undefined : definition.prepare(context);
  }

  function createRunContext(
    trx: Trx,
    base: PrepareContext,
    definition: RoutineDefinition,
    startedAt: number,
  ): RoutineContext {
    const routine = base.routine;
    return {
      ...base,
      db: trx,
      trx,
      readText: (mnemonic) => readRequestText(trx, routine.request_id, mnemonic),
      putText: (mnemonic, value) => writeRequestText(trx, routine.request_id, mnemonic, value, base.now()),
      mergeRequestData: (patch) => mergeRequestData(trx, routine.request_id, patch, base.now()),
      addRoutine: (name) =>
        addRequestRoutine(trx, {
          requestId: routine.request_id,
          queue: routine.execute_request_queue,
          name,
          sequence: 'append',
        }),
      addPriorityRoutine: (name) =>
        addRequestRoutine(trx, {
          requestId: routine.request_id,
          queue: routine.execute_request_queue,
          name,
          sequence: 'priority',
        }),
      voidAllNewRoutines: (current) =>
        voidNewRoutines(trx, routine.request_id, current ?? routine.routine_name),
      lock: (key) =>
        database.dialect === 'postgres'
          ? pgClaim.lockRoutineKey(trx, key, definition.timeoutMs - (Date.now() - startedAt))
          : sqliteClaim.lockRoutineKey(trx, key),
    };
  }

  function outcomeOf(
    claimed: ClaimedRoutine,
    definition: RoutineDefinition | undefined,
    failure: unknown,
    logLines: string[],
  ): AttemptRecord {
    const tryCount = claimed.try_count + 1;
    const executedAt = formatDateTime(now());
    if (failure === undefined) {
      return {
        routineId: claimed.id,
        status: 'COMPLETE',
        tryCount,
        nextTry: null,
        logText: logLines.join('\n'),
        executedAt,
      };
    }
    const isFinal = failure instanceof PermanentRoutineError || definition?.retry === 'never';
    const delayMs = isFinal ? undefined : retryDelayMs(tryCount, backoff);
    const logText = [...logLines, errorText(failure)].join('\n');
    return {
      routineId: claimed.id,
      status: delayMs === undefined ? 'FAILED' : 'RETRY',
      tryCount,
      nextTry: delayMs === undefined ? null : formatDateTime(new Date(now().getTime() + delayMs)),
      logText,
      executedAt,
    };
  }

  async function flushCounters(): Promise<void> {
    for (const [queue, c] of counters) {
      if (c.success === 0 && c.fail === 0 && c.lastRequestId === null) continue;
      const snapshot = { ...c, active: activeCount };
      c.success = 0;
      c.fail = 0;
      c.lastRequestId = null;
      c.lastSpawnAt = null;
      c.active = 0;
      try {
        await addQueueCounters(db, queue, snapshot);
      } catch (error) {
        // Counters are statistics; put them back and try again at the next flush.
        c.success += snapshot.success;
        c.fail += snapshot.fail;
        throw error;
      }
    }
  }

  async function step(queue?: string): Promise<StepOutcome> {
    const queues =
      queue === undefined ? (await findQueues(db, config.workerQueues)).map((q) => q.request_queue) : [queue];
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
    step,
    flushCounters,
    get activeCount() {
      return activeCount;
    },
  };
}

function withTimeout<T>(promise: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`Routine timed out after ${timeoutMs} ms`)), timeoutMs);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function errorText(error: unknown): string {
  if (error instanceof PermanentRoutineError) return `FAILED: ${error.message}`;
  return error instanceof Error ? (error.stack ?? error.message) : String(error);
}
