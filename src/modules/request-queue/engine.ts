/**
 * The queue engine: claims eligible routines and runs them (reference 9.3 and 9.4). `runBatch(queue, n)`
 * is the unit of work; the long-running worker (`worker.ts`) calls it in a loop per slot, and tests call
 * `step()` / `runNext()` to drive the queue one routine at a time with an injected clock.
 *
 * One batch is one transaction: claim up to n routines of different requests (row locks on PostgreSQL),
 * then for each: savepoint, run the routine, and either record COMPLETE + try count + the execution row,
 * or roll back to the savepoint (undoing every write of that routine) and record RETRY or FAILED + the
 * execution row; one commit makes each routine's writes durable together with its status. Reference 9.4
 * records a failure in a second transaction; the savepoint gives the same result without releasing the
 * request lock between the two, so another worker cannot start the same routine before its failure is
 * recorded. A routine past its timeout rolls back the whole batch (its code may still be running) and is
 * recorded in a short transaction of its own; the others stay as they were and run again.
 */
import { hostname } from 'node:os';
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
  /** Names this worker in the first line of every execution's `log_text`; default `<host>:<pid>`. */
  readonly workerLabel?: string;
}

export interface QueueEngine {
  /** Claims and runs at most one routine of `queue`. Counters are kept in memory until flushed. */
  runNext(queue: string): Promise<StepOutcome>;
  /**
   * Claims up to `maxRoutines` routines of `queue` (different requests; PostgreSQL only, SQLite takes
   * one), runs them in one transaction and commits once. Empty when nothing was eligible.
   */
  runBatch(queue: string, maxRoutines: number): Promise<StepOutcome[]>;
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

/** What `prepare` gave (SQLite runs it before the write transaction). */
interface Prepared {
  readonly prepared: unknown;
  readonly failure: unknown;
}

interface Attempt {
  readonly claimed: ClaimedRoutine;
  readonly record: AttemptRecord;
  readonly failure: unknown;
  readonly startedAt: number;
}

/**
 * PostgreSQL batches: a claim takes up to `maxRoutines` routines (of different requests), runs them one
 * after the other, each in its own savepoint, and commits once. A durable commit costs a WAL flush (about
 * 5-10 ms on ordinary disks), so committing per routine would cap a worker at a few hundred routines per
 * second. Every routine's writes still commit together with its status; a crash rolls the whole batch
 * back, leaving each routine as it was. Routines are not started after this budget, so that one slow
 * routine does not hold the others' locks for long.
 */
const BATCH_BUDGET_MS = 100;

export function createQueueEngine(options: EngineOptions): QueueEngine {
  const { database, files, config } = options;
  const db = database.db;
  const catalog = options.catalog ?? defaultRoutineCatalog;
  const now = options.now ?? (() => new Date());
  const backoff = parseBackoff(config.queueRetryBackoff);
  const workerLine = `worker ${options.workerLabel ?? `${hostname()}:${process.pid}`}`;
  const counters = new Map<string, QueueCounters>();
  // SQLite: the requests this process is running, left out of claims (no row locks there).
  const busyRequestIds = new Set<number>();
  // Routines that chained others in the running batches: their commit must wake the other workers.
  const chainedRoutineIds = new Set<number>();
  // Routines that took a routine lock in the running batches.
  const lockingRoutineIds = new Set<number>();
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
    const [first] = await runBatch(queue, 1);
    return first ?? { kind: 'idle' };
  }

  async function runBatch(queue: string, maxRoutines: number): Promise<StepOutcome[]> {
    const nowText = formatDateTime(now());
    if (database.dialect === 'sqlite') {
      const claimed = await sqliteClaim.claimRoutines(
        db,
        queue,
        nowText,
        busyRequestIds,
        Math.max(1, maxRoutines),
      );
      if (claimed.length === 0) return [];
      for (const routine of claimed) busyRequestIds.add(routine.request_id);
      try {
        return await attemptOnSqlite(claimed);
      } finally {
        for (const routine of claimed) busyRequestIds.delete(routine.request_id);
      }
    }
    const trx = await db.startTransaction().execute();
    const claimedIds: number[] = [];
    try {
      const claimed = await pgClaim.claimRoutines(trx, queue, nowText, Math.max(1, maxRoutines));
      claimedIds.push(...claimed.map((c) => c.id));
      if (claimed.length === 0) {
        await trx.rollback().execute();
        return [];
      }
      const batchStartedAt = Date.now();
      const attempts: (Attempt | 'contended')[] = [];
      const seenRequests = new Set<number>();
      for (const routine of claimed) {
        // Routines claimed but not started stay exactly as they were and are released at commit.
        if (attempts.length > 0 && Date.now() - batchStartedAt > BATCH_BUDGET_MS) break;
        // The row locks made PostgreSQL re-check each claimed routine against its newest version. Only a
        // second routine of a request already run in this batch (a tie in execute_sequence) can have been
        // made ineligible since (for example by addPriorityRoutine), so only that case is read again.
        if (
          seenRequests.has(routine.request_id) &&
          !(await isStillEligible(trx, routine.id, queue, formatDateTime(now())))
        ) {
          attempts.push('contended');
          continue;
        }
        seenRequests.add(routine.request_id);
        attempts.push(await runClaimed(routine, trx, undefined, undefined, false));
        // A routine lock is held until commit: end the batch here, so that the lock is not held while
        // further routines run (convoys) and no transaction ever holds two workers' keys (deadlocks).
        if (lockingRoutineIds.delete(routine.id)) break;
      }
      const ran = attempts.filter((a) => a !== 'contended');
      await pgClaim.recordAttempts(
        trx,
        ran.map((a) => a.record),
      );
      // Every routine that ran leaves the set (`some` would stop at the first that chained and keep the rest).
      const hasChained = ran.map((a) => chainedRoutineIds.delete(a.claimed.id)).includes(true);
      await trx.commit().execute();
      // Routines added by this batch are eligible now: wake the idle workers of other processes. Sent after
      // the commit, not in the transaction: PostgreSQL serialises the commits of notifying transactions.
      if (hasChained) {
        pgClaim.notifyQueue(db, queue).catch(() => {
          // Only a hint: the workers also poll.
        });
      }
      return attempts.map((a) => (a === 'contended' ? { kind: 'contended' } : finish(a)));
    } catch (error) {
      for (const routine of claimedIds) {
        chainedRoutineIds.delete(routine);
        lockingRoutineIds.delete(routine);
      }
      if (!trx.isCommitted && !trx.isRolledBack) {
        await trx
          .rollback()
          .execute()
          .catch(() => {});
      }
      // The other routines of the batch were rolled back too: they stay as they were and run again.
      if (error instanceof RoutineTimeoutError) return [await recordTimeout(error)];
      throw error;
    }
  }

  /** Records a timed-out attempt in a short transaction of its own, unless another worker has it now. */
  async function recordTimeout(error: RoutineTimeoutError): Promise<StepOutcome> {
    const claimed = error.claimed!;
    const attempt = await db.transaction().execute(async (trx) => {
      let query = trx
        .selectFrom('request_routine')
        .select('id')
        .where('id', '=', claimed.id)
        .where('status', '=', claimed.status)
        .where('try_count', '=', claimed.try_count);
      if (database.dialect === 'postgres') query = query.forUpdate().skipLocked();
      if ((await query.executeTakeFirst()) === undefined) return undefined;
      const definition = catalog.get(claimed.routine_name);
      const record = outcomeOf(claimed, definition, error, [...error.logLines]);
      await recordAttempt(trx, record);
      return { claimed, record, failure: error, startedAt: Date.now() };
    });
    return attempt === undefined ? { kind: 'contended' } : finish(attempt);
  }

  /**
   * SQLite: `prepare` runs before the write transaction opens, so slow preparation (thumbnails) never
   * holds the single connection that the HTTP server shares. The routines prepared within the batch budget
   * then run in one transaction, a savepoint each, and share one commit (one fsync with
   * `synchronous = FULL`); the others stay as they were.
   */
  async function attemptOnSqlite(claimed: readonly ClaimedRoutine[]): Promise<StepOutcome[]> {
    const batchStartedAt = Date.now();
    const ready: { claimed: ClaimedRoutine; pre: Prepared; logLines: string[] }[] = [];
    for (const routine of claimed) {
      if (ready.length > 0 && Date.now() - batchStartedAt > BATCH_BUDGET_MS) break;
      const definition = catalog.get(routine.routine_name);
      const logLines: string[] = [workerLine];
      let pre: Prepared = { prepared: undefined, failure: undefined };
      if (definition !== undefined) {
        activeCount += 1;
        try {
          pre = {
            prepared: await withTimeout(
              prepareAndValidate(definition, prepareContextOf(routine, db, logLines)),
              definition.timeoutMs,
            ),
            failure: undefined,
          };
        } catch (error) {
          pre = { prepared: undefined, failure: error };
        } finally {
          activeCount -= 1;
        }
      }
      ready.push({ claimed: routine, pre, logLines });
    }
    const trx = await db.startTransaction().execute();
    try {
      const attempts: (Attempt | 'contended')[] = [];
      for (const { claimed: routine, pre, logLines } of ready) {
        const nowText = formatDateTime(now());
        if (!(await isStillEligible(trx, routine.id, routine.execute_request_queue, nowText))) {
          attempts.push('contended');
          continue;
        }
        attempts.push(await runClaimed(routine, trx, pre, logLines));
      }
      await trx.commit().execute();
      return attempts.map((a) => (a === 'contended' ? { kind: 'contended' } : finish(a)));
    } catch (error) {
      if (!trx.isCommitted && !trx.isRolledBack) {
        await trx
          .rollback()
          .execute()
          .catch(() => {});
      }
      if (error instanceof RoutineTimeoutError) return [await recordTimeout(error)];
      throw error;
    } finally {
      for (const routine of claimed) {
        chainedRoutineIds.delete(routine.id);
        lockingRoutineIds.delete(routine.id);
      }
    }
  }

  function prepareContextOf(claimed: ClaimedRoutine, readDb: Kysely<DB>, logLines: string[]): PrepareContext {
    return {
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
  }

  /**
   * Runs `claimed` inside `trx` (held, not committed here): savepoint, the routine (after `prepare`, unless
   * `pre` carries its result), then its status, try count and execution row; on failure the savepoint is
   * rolled back first, so none of the routine's writes remain.
   */
  async function runClaimed(
    claimed: ClaimedRoutine,
    trx: Trx,
    pre: Prepared | undefined,
    logLines: string[] = [workerLine],
    isRecorded = true,
  ): Promise<Attempt> {
    activeCount += 1;
    const startedAt = Date.now();
    try {
      const definition = catalog.get(claimed.routine_name);
      const prepareContext = prepareContextOf(claimed, trx, logLines);
      let failure: unknown = pre?.failure;
      if (definition === undefined) {
        failure = new PermanentRoutineError(`Unknown routine: ${claimed.routine_name}`);
      } else if (failure === undefined) {
        const inSavepoint = await trx.savepoint('routine').execute();
        try {
          const context = createRunContext(inSavepoint, prepareContext, definition, startedAt);
          await withTimeout(
            (async () => {
              const ready =
                pre === undefined ? await prepareAndValidate(definition, prepareContext) : pre.prepared;
              await definition.run(context, ready);
            })(),
            definition.timeoutMs,
          );
          // Not released: PostgreSQL and SQLite let the next routine of a batch reuse the name, and a
          // release would cost one more round trip per routine.
        } catch (error) {
          if (error instanceof RoutineTimeoutError) {
            throw new RoutineTimeoutError(definition.timeoutMs, claimed, logLines);
          }
          failure = error;
          await inSavepoint.rollbackToSavepoint('routine').execute();
        }
      }
      const record = outcomeOf(claimed, definition, failure, logLines);
      if (isRecorded) await recordAttempt(trx, record);
      return { claimed, record, failure, startedAt };
    } finally {
      activeCount -= 1;
    }
  }

  /** After the commit: counters, one log line, the outcome. */
  function finish({ claimed, record, failure, startedAt }: Attempt): StepOutcome {
    const queueCounters = countersOf(claimed.execute_request_queue);
    if (record.status === 'COMPLETE') queueCounters.success += 1;
    else queueCounters.fail += 1;
    queueCounters.active = Math.max(queueCounters.active, activeCount + 1);
    queueCounters.lastRequestId = claimed.request_id;
    queueCounters.lastSpawnAt = formatDateTime(now());
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
      addRoutine: async (name) => {
        chainedRoutineIds.add(routine.id);
        await addRequestRoutine(trx, {
          requestId: routine.request_id,
          queue: routine.execute_request_queue,
          name,
          sequence: 'append',
        });
      },
      addPriorityRoutine: async (name) => {
        chainedRoutineIds.add(routine.id);
        await addRequestRoutine(trx, {
          requestId: routine.request_id,
          queue: routine.execute_request_queue,
          name,
          sequence: 'priority',
        });
      },
      voidAllNewRoutines: (current) =>
        voidNewRoutines(trx, routine.request_id, current ?? routine.routine_name),
      lock: async (key) => {
        lockingRoutineIds.add(routine.id);
        await (database.dialect === 'postgres'
          ? pgClaim.lockRoutineKey(trx, key, definition.timeoutMs - (Date.now() - startedAt))
          : sqliteClaim.lockRoutineKey(trx, key));
      },
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
    runBatch,
    step,
    flushCounters,
    get activeCount() {
      return activeCount;
    },
  };
}

/**
 * A routine ran past its timeout. Its code may still be running and could still issue queries, so the
 * whole transaction is rolled back (not just the routine's savepoint): later queries on it then fail
 * instead of landing in someone else's commit.
 */
class RoutineTimeoutError extends Error {
  readonly claimed: ClaimedRoutine | undefined;
  readonly logLines: readonly string[];
  constructor(timeoutMs: number, claimed?: ClaimedRoutine, logLines: readonly string[] = []) {
    super(`Routine timed out after ${timeoutMs} ms`);
    this.name = 'RoutineTimeoutError';
    this.claimed = claimed;
    this.logLines = logLines;
  }
}

function withTimeout<T>(promise: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new RoutineTimeoutError(timeoutMs)), timeoutMs);
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
