/**
 * The queue engine: claims eligible routines and runs them (reference 9.3 and 9.4). `runBatch(queue, n)`
 * is the unit of work; the long-running worker (`worker.ts`) calls it in a loop per slot, and tests call
 * `step()` / `runNext()` to drive the queue one routine at a time with an injected clock.
 *
 * One flow for every engine: claim up to n routines of different requests, mark their attempts started
 * (committed on its own), prepare and run each routine in a savepoint of one write transaction, record
 * each outcome (COMPLETE, or RETRY/FAILED after rolling the routine's savepoint back, so none of its writes
 * remain) with its execution row, and commit once. Reference 9.4 records a failure in a second
 * transaction; the savepoint gives the same result without releasing the claim between the two, so
 * another worker cannot start the same routine before its failure is recorded.
 *
 * The strategy differs by one capability of the dialect, row locks:
 * - with row locks (PostgreSQL, MySQL), the claim locks its rows inside the write transaction and
 *   `prepare` runs in it; several processes share a queue;
 * - without (SQLite, one writer), the claim is a plain read that leaves out the requests this process is
 *   running, `prepare` runs before the write transaction opens (slow work never holds the single
 *   connection), and each routine's eligibility is read again inside the transaction.
 *
 * An attempt that never finishes (the process is killed or crashes) leaves its start mark behind; the
 * next claim of that routine records it as a failed try (with the back-off) instead of running it, and
 * the third unfinished attempt in a row fails the routine for good. Marks are written for the whole batch
 * at once, so a crash counts a try for every routine of its batch that had not been recorded. The marks
 * commit without waiting for the disk (`DialectAdapter.commitWithoutFlush`): a crash of the process keeps
 * them (the database has them), and only a crash of the database server or the machine can lose them,
 * which loses the batch's own uncommitted transaction too, so its routines run again as they were and no
 * outcome is ever recorded without its mark having been seen; the batch's durable commit flushes the
 * marks with it. A routine past its timeout rolls back the whole batch (its code may still be running)
 * and is recorded in a short transaction of its own; the others stay as they were and run again.
 *
 * Routine locks (`ctx.lock(key)`, a patient or a study) are held until the batch commits, so routines of
 * one patient in one batch share the key. The first key a batch takes may wait for another worker's
 * batch; a batch that holds a key never waits for another one: a key held elsewhere puts its routine
 * back untried (`deferred`, rolled back to its savepoint, its mark cleared) for a later batch, whose
 * first key then waits. No transaction waits while holding a key, so two batches never deadlock.
 */
import { hostname } from 'node:os';
import type { ControlledTransaction, Kysely } from 'kysely';
import type { BackoffStep, Config } from '../../../config.ts';
import type { Database } from '../../../db/database.ts';
import { formatDateTime } from '../../../db/database.ts';
import type { DB, RoutineStatus } from '../../../db/schema.ts';
import type { Logger } from '../../../logger.ts';
import type { AttemptRecord, ClaimedRoutine, QueueCounters, RoutineAttemptTable } from './claim.queries.ts';
import {
  addQueueCounters,
  addRequestRoutines,
  claimRoutines,
  clearAttemptMarkers,
  findAttemptMarkers,
  findQueues,
  keepUnfinishedCount,
  markAttemptsStarted,
  recordAttempts,
  stillEligibleIds,
  voidNewRoutines,
} from './claim.queries.ts';
import { notifyQueueAfterCommit } from './queue-events.ts';
import type { PrepareContext, RoutineCatalog, RoutineContext, RoutineDefinition } from './routine-catalog.ts';
import { PermanentRoutineError } from './routine-catalog.ts';
import { defaultRoutineCatalog } from '../routines/index.ts';
import { readRequestContent, readRequestText, writeRequestText } from '../../attachment-data/index.ts';
import { mirrorRequestDetails } from './request-details.ts';
import { replaceUnstorableCharacters } from '../../../db/schema-profile.ts';

/** The longest execution log stored, in bytes (OpenEyes's `request_routine_execution.log_text`). */
const MAX_LOG_BYTES = 65_535;

/**
 * Reference 9.5: `tryCount` is the count after the failed attempt. Returns the delay before the next try,
 * or undefined when the routine has used its tries and goes to FAILED.
 */
export function retryDelayMs(tryCount: number, steps: readonly BackoffStep[]): number | undefined {
  const step = steps.find((s) => tryCount < s.belowTry);
  if (step === undefined) return undefined;
  return step.isPerTry ? step.delayMs * tryCount : step.delayMs;
}

/** Unfinished attempts in a row after which a routine fails for good, whatever its tries left. */
export const MAX_UNFINISHED_ATTEMPTS = 3;

export type StepOutcome =
  | { readonly kind: 'idle' }
  /** A candidate was taken or changed by another worker between the claim and the re-check. */
  | { readonly kind: 'contended' }
  /** Its routine lock was held by another worker's batch: put back untried, for a later batch. */
  | { readonly kind: 'deferred' }
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
  readonly config: Config;
  readonly catalog?: RoutineCatalog;
  /** The clock; tests inject one to step through back-off without sleeping. */
  readonly now?: () => Date;
  readonly logger?: Logger;
  /** Names this worker in the first line of every execution's `log_text`; default `<host>:<pid>`. */
  readonly workerLabel?: string;
  /** After this many ms a batch starts no further routine; default {@link BATCH_BUDGET_MS}. */
  readonly batchBudgetMs?: number;
}

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

/**
 * A batch's routines are not started after this budget, so that one slow routine does not hold the
 * others' claims for long. A durable commit costs a disk flush, so committing per routine would cap a
 * worker at a few hundred routines per second; a batch shares one.
 */
const BATCH_BUDGET_MS = 100;

/** What one attempt did, besides its status: the engine acts on it after the commit. */
interface AttemptEffects {
  /** It added or reset routines of its request (other workers should be woken). */
  hasChained: boolean;
}

/** The routine locks a batch holds (until it commits). */
interface BatchLocks {
  readonly keys: Set<string>;
}

/** Not an attempt's outcome: what a batch does with each claimed routine. */
type BatchEntry = Attempt | 'contended' | 'deferred';

interface Attempt {
  readonly claimed: ClaimedRoutine;
  readonly record: AttemptRecord;
  readonly failure: unknown;
  readonly startedAt: number;
  readonly effects: AttemptEffects;
  /** Set when this records an attempt that never finished: how many in a row, this one included. */
  readonly unfinishedCount?: number;
}

/** A claimed routine to run, with the unfinished attempts in a row before it. */
interface Runnable {
  readonly routine: ClaimedRoutine;
  readonly unfinishedBefore: number;
}

/** A claimed routine whose last attempt never finished, with its start mark. */
interface Unfinished {
  readonly routine: ClaimedRoutine;
  readonly marker: RoutineAttemptTable;
}

/** What `prepare` gave, run before the write transaction (engines without row locks). */
interface Prepared {
  readonly prepared: unknown;
  readonly failure: unknown;
}

type Trx = ControlledTransaction<DB>;

export function createQueueEngine(options: EngineOptions): QueueEngine {
  const { database, config } = options;
  const { db, dialect } = database;
  const catalog = options.catalog ?? defaultRoutineCatalog;
  const now = options.now ?? (() => new Date());
  const workerName = options.workerLabel ?? `${hostname()}:${process.pid}`;
  const workerLine = `worker ${workerName}`;
  const batchBudgetMs = options.batchBudgetMs ?? BATCH_BUDGET_MS;
  const counters = new Map<string, QueueCounters>();
  // Without row locks: the requests this process is running, left out of its claims.
  const busyRequestIds = new Set<number>();
  // Routine names seen in `routine_library` (its rows are never removed).
  const knownRoutineNames = new Set<string>();
  const references = createReferenceCache(config.referenceCacheTtlMs);
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
    const limit = Math.max(1, maxRoutines);
    return dialect.hasRowLocks ? runLockedBatch(queue, limit) : runSingleWriterBatch(queue, limit);
  }

  /**
   * After a batch's transaction failed as a whole (a deadlock, a lost connection: not one of its routines,
   * whose failures its savepoints keep), its routines are as they were before the claim; their start
   * marks go too, so that the next claim does not count those attempts as never finished (a worker that
   * died); a routine whose earlier attempts never finished keeps their count.
   */
  async function forgetAttempts(runnable: readonly Runnable[]): Promise<void> {
    try {
      await clearAttemptMarkers(
        db,
        runnable.filter((r) => r.unfinishedBefore === 0).map((r) => r.routine.id),
      );
      // Earlier attempts that did die still count.
      for (const r of runnable.filter((entry) => entry.unfinishedBefore > 0))
        await keepUnfinishedCount(db, r.routine.id, r.unfinishedBefore);
    } catch {
      // The database is unreachable: the marks stay and count, as after a crash.
    }
  }

  /** Row locks: claim, prepare and run inside one transaction that holds the claims until its commit. */
  async function runLockedBatch(queue: string, limit: number): Promise<StepOutcome[]> {
    const trx = await db.startTransaction().execute();
    let marked: readonly Runnable[] = [];
    try {
      const claimed = await claimRoutines(trx, database, {
        queue,
        nowText: formatDateTime(now()),
        limit,
        excludeRequestIds: new Set(),
      });
      if (claimed.length === 0) {
        await trx.rollback().execute();
        return [];
      }
      const started = await startAttempts(trx, claimed);
      const { runnable, unfinished } = started;
      marked = runnable;
      const batchStartedAt = Date.now();
      const locks: BatchLocks = { keys: new Set() };
      const entries: BatchEntry[] = unfinished.map(recordUnfinished);
      // The claim took one routine per request and its row locks re-checked each against its newest
      // version, so each runs without another read.
      for (const { routine } of runnable) {
        if (entries.length > unfinished.length && Date.now() - batchStartedAt > batchBudgetMs) break;
        entries.push(await runClaimed(trx, routine, { logLines: [workerLine], locks }));
      }
      return await commitBatch(trx, queue, entries, runnable);
    } catch (error) {
      if (!trx.isCommitted && !trx.isRolledBack) {
        await trx
          .rollback()
          .execute()
          .catch(() => {});
      }
      // The other routines of the batch were rolled back too: they stay as they were and run again.
      if (error instanceof RoutineTimeoutError) return [await recordTimeout(error, marked)];
      await forgetAttempts(marked);
      throw error;
    }
  }

  /**
   * A single writer: claim with a plain read, prepare outside any transaction (slow work never holds the
   * connection), then run the prepared routines in one write transaction that re-checks them first.
   */
  async function runSingleWriterBatch(queue: string, limit: number): Promise<StepOutcome[]> {
    const claimed = await claimRoutines(db, database, {
      queue,
      nowText: formatDateTime(now()),
      limit,
      excludeRequestIds: busyRequestIds,
    });
    if (claimed.length === 0) return [];
    for (const routine of claimed) busyRequestIds.add(routine.request_id);
    try {
      const { runnable, unfinished } = await startAttempts(db, claimed);
      const batchStartedAt = Date.now();
      const ready: { routine: ClaimedRoutine; pre: Prepared; logLines: string[] }[] = [];
      for (const { routine } of runnable) {
        if (ready.length > 0 && Date.now() - batchStartedAt > batchBudgetMs) break;
        const logLines = [workerLine];
        ready.push({ routine, pre: await prepareAhead(routine, logLines), logLines });
      }
      const trx = await db.startTransaction().execute();
      try {
        const locks: BatchLocks = { keys: new Set() };
        const eligible = await stillEligibleIds(
          trx,
          [...unfinished.map((u) => u.routine.id), ...ready.map((r) => r.routine.id)],
          queue,
          formatDateTime(now()),
        );
        const entries: BatchEntry[] = unfinished.map((entry) =>
          eligible.has(entry.routine.id) ? recordUnfinished(entry) : 'contended',
        );
        for (const { routine, pre, logLines } of ready) {
          entries.push(
            eligible.has(routine.id)
              ? await runClaimed(trx, routine, { logLines, prepared: pre, locks })
              : 'contended',
          );
        }
        return await commitBatch(trx, queue, entries, runnable);
      } catch (error) {
        if (!trx.isCommitted && !trx.isRolledBack) {
          await trx
            .rollback()
            .execute()
            .catch(() => {});
        }
        if (error instanceof RoutineTimeoutError) return [await recordTimeout(error, runnable)];
        await forgetAttempts(runnable);
        throw error;
      }
    } finally {
      for (const routine of claimed) busyRequestIds.delete(routine.request_id);
    }
  }

  /**
   * Splits claimed routines into those to run and those whose last attempt never finished, and commits
   * the start marks of the former on their own (without waiting for the disk: see the top of this file),
   * before any of them runs.
   */
  async function startAttempts(
    reader: Kysely<DB>,
    claimed: readonly ClaimedRoutine[],
  ): Promise<{ runnable: Runnable[]; unfinished: Unfinished[] }> {
    const markers = await findAttemptMarkers(
      reader,
      claimed.map((c) => c.id),
    );
    const runnable: Runnable[] = [];
    const unfinished: Unfinished[] = [];
    for (const routine of claimed) {
      const marker = markers.get(routine.id);
      if (marker !== undefined && marker.started_date !== null) unfinished.push({ routine, marker });
      else runnable.push({ routine, unfinishedBefore: marker?.unfinished_count ?? 0 });
    }
    await markAttemptsStarted(
      database,
      runnable.map(({ routine, unfinishedBefore }) => ({
        routineId: routine.id,
        tryNumber: routine.try_count + 1,
        unfinishedCount: unfinishedBefore,
      })),
      formatDateTime(now()),
      workerName,
    );
    return { runnable, unfinished };
  }

  /** Records the attempt that a start mark shows never finished: a failed try. */
  function recordUnfinished({ routine, marker }: Unfinished): Attempt {
    const unfinishedCount = marker.unfinished_count + 1;
    const failure =
      unfinishedCount >= MAX_UNFINISHED_ATTEMPTS
        ? new PermanentRoutineError(
            `Attempt ${marker.try_number} never finished: ${unfinishedCount} attempts in a row ended with their worker (${marker.worker}) stopping mid-way (killed, crashed or out of memory)`,
          )
        : new UnfinishedAttemptError(
            `Attempt ${marker.try_number} never finished: its worker (${marker.worker}) stopped mid-way (killed, crashed or out of memory)`,
          );
    const definition = catalog.get(routine.routine_name);
    return {
      claimed: routine,
      record: outcomeOf(routine, definition, failure, [workerLine]),
      failure,
      startedAt: Date.now(),
      effects: { hasChained: false },
      unfinishedCount,
    };
  }

  /**
   * Records every attempt, clears the start marks of recorded attempts and puts back those of routines
   * marked but not run (the batch ended early, another worker changed them, or their key was held
   * elsewhere), commits, then reports.
   */
  async function commitBatch(
    trx: ControlledTransaction<DB>,
    queue: string,
    entries: readonly BatchEntry[],
    marked: readonly Runnable[],
  ): Promise<StepOutcome[]> {
    const ran = entries.filter((a): a is Attempt => typeof a !== 'string');
    await recordAttempts(
      trx,
      dialect,
      ran.map((a) => a.record),
    );
    // An unfinished attempt recorded as RETRY keeps its count, so that a payload that keeps killing its
    // worker fails after MAX_UNFINISHED_ATTEMPTS; every other recorded attempt clears its mark.
    const isCounted = (a: Attempt) => a.unfinishedCount !== undefined && a.record.status === 'RETRY';
    for (const attempt of ran.filter(isCounted))
      await keepUnfinishedCount(trx, attempt.claimed.id, attempt.unfinishedCount!);
    await unmarkNotRun(
      trx,
      marked,
      ran,
      ran.filter((a) => !isCounted(a)).map((a) => a.claimed.id),
    );
    await trx.commit().execute();
    // Routines added by this batch are eligible now: wake the idle workers of other processes. Sent after
    // the commit, not in the transaction: PostgreSQL serialises the commits of notifying transactions.
    if (ran.some((a) => a.effects.hasChained)) notifyQueueAfterCommit(database, queue);
    return entries.map((a) => (typeof a === 'string' ? { kind: a } : finish(a)));
  }

  /**
   * Puts back the start marks of `marked` routines that `ran` does not hold (as before they were set),
   * clearing them in one statement with the marks of `alsoClear`.
   */
  async function unmarkNotRun(
    trx: Kysely<DB>,
    marked: readonly Runnable[],
    ran: readonly Attempt[],
    alsoClear: readonly number[] = [],
  ) {
    const ranIds = new Set(ran.map((a) => a.claimed.id));
    const notRun = marked.filter((m) => !ranIds.has(m.routine.id));
    await clearAttemptMarkers(trx, [
      ...notRun.filter((m) => m.unfinishedBefore === 0).map((m) => m.routine.id),
      ...alsoClear,
    ]);
    for (const m of notRun.filter((m) => m.unfinishedBefore > 0))
      await keepUnfinishedCount(trx, m.routine.id, m.unfinishedBefore);
  }

  /**
   * Records a timed-out attempt in a short transaction of its own, unless another worker has it now, and
   * puts back the start marks of the batch's other routines (rolled back with the batch, they did not run).
   */
  async function recordTimeout(
    error: RoutineTimeoutError,
    marked: readonly Runnable[],
  ): Promise<StepOutcome> {
    const claimed = error.claimed!;
    const attempt = await db.transaction().execute(async (trx): Promise<Attempt | undefined> => {
      await unmarkNotRun(
        trx,
        marked.filter((m) => m.routine.id !== claimed.id),
        [],
      );
      const query = trx
        .selectFrom('request_routine')
        .select('id')
        .where('id', '=', claimed.id)
        .where('status', '=', claimed.status)
        .where('try_count', '=', claimed.try_count);
      if ((await dialect.lockRowsSkipLocked(query).executeTakeFirst()) === undefined) return undefined;
      const definition = catalog.get(claimed.routine_name);
      const record = outcomeOf(claimed, definition, error, [...error.logLines]);
      await recordAttempts(trx, dialect, [record]);
      await clearAttemptMarkers(trx, [claimed.id]);
      return {
        claimed,
        record,
        failure: error,
        startedAt: Date.now(),
        effects: { hasChained: false },
      };
    });
    return attempt === undefined ? { kind: 'contended' } : finish(attempt);
  }

  /** Runs `validate` and `prepare` of `routine` before the write transaction (single writer). */
  async function prepareAhead(routine: ClaimedRoutine, logLines: string[]): Promise<Prepared> {
    const definition = catalog.get(routine.routine_name);
    if (definition === undefined) return { prepared: undefined, failure: undefined };
    activeCount += 1;
    try {
      const prepared = await withTimeout(
        prepareAndValidate(definition, prepareContextOf(routine, db, logLines)),
        definition.timeoutMs,
      );
      return { prepared, failure: undefined };
    } catch (error) {
      return { prepared: undefined, failure: error };
    } finally {
      activeCount -= 1;
    }
  }

  function prepareContextOf(claimed: ClaimedRoutine, reader: Kysely<DB>, logLines: string[]): PrepareContext {
    return {
      db: reader,
      routine: claimed,
      requestType: claimed.request_type,
      config,
      now,
      log: (line) => logLines.push(line),
      readText: (mnemonic) => readRequestText(reader, claimed.request_id, mnemonic),
    };
  }

  /**
   * Runs `claimed` inside `trx` (held, not committed here): a savepoint, the routine (its `prepare` first,
   * unless `prepared` carries what it gave), and its outcome; on failure the savepoint is rolled back, so
   * none of the routine's writes remain. The outcome is recorded by the caller, with the batch's others.
   * `deferred` when its routine lock is held by another batch (rolled back too, not a try).
   */
  async function runClaimed(
    trx: Trx,
    claimed: ClaimedRoutine,
    options: { logLines: string[]; prepared?: Prepared; locks: BatchLocks },
  ): Promise<Attempt | 'deferred'> {
    const { logLines, prepared, locks } = options;
    const effects: AttemptEffects = { hasChained: false };
    activeCount += 1;
    const startedAt = Date.now();
    try {
      const definition = catalog.get(claimed.routine_name);
      const prepareContext = prepareContextOf(claimed, trx, logLines);
      let failure: unknown = prepared?.failure;
      if (definition === undefined) {
        failure = new PermanentRoutineError(`Unknown routine: ${claimed.routine_name}`);
      } else if (failure === undefined) {
        const inSavepoint = await trx.savepoint('routine').execute();
        // The keys this attempt took: released with its savepoint when it fails.
        const keys: string[] = [];
        try {
          const context = createRunContext(inSavepoint, prepareContext, definition, {
            startedAt,
            effects,
            locks,
            keys,
          });
          await withTimeout(
            (async () => {
              const input =
                prepared === undefined
                  ? await prepareAndValidate(definition, prepareContext)
                  : prepared.prepared;
              await definition.run(context, input);
            })(),
            definition.timeoutMs,
          );
          // Not released: every engine lets the next routine of a batch reuse the name, and a release
          // would cost one more round trip per routine.
        } catch (error) {
          if (error instanceof RoutineTimeoutError) {
            throw new RoutineTimeoutError(definition.timeoutMs, claimed, logLines);
          }
          await inSavepoint.rollbackToSavepoint('routine').execute();
          for (const key of keys) locks.keys.delete(key);
          if (error instanceof RoutineLockBusyError) return 'deferred';
          failure = error;
        }
      }
      return {
        claimed,
        record: outcomeOf(claimed, definition, failure, logLines),
        failure,
        startedAt,
        effects,
      };
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
    attempt: { startedAt: number; effects: AttemptEffects; locks: BatchLocks; keys: string[] },
  ): RoutineContext {
    const routine = base.routine;
    const chain = async (names: readonly string[], sequence: 'append' | 'priority') => {
      attempt.effects.hasChained = true;
      await addRequestRoutines(
        trx,
        { requestId: routine.request_id, queue: routine.execute_request_queue, names, sequence },
        knownRoutineNames,
      );
    };
    // The request's JSON rows this attempt read or wrote, so that each is read once: every change to
    // them goes through putText and mergeRequestData, which keep this up to date.
    const texts = new Map<string, Record<string, unknown>>();
    const cachedTexts = (mnemonics: readonly string[]) =>
      Object.fromEntries(mnemonics.map((m) => [m, structuredClone(texts.get(m)!)]));
    const readRequest = async (mnemonics: readonly string[]) => {
      const missing = mnemonics.filter((m) => !texts.has(m));
      const content = await readRequestContent(trx, routine.request_id, missing, dialect);
      for (const mnemonic of missing) texts.set(mnemonic, content.texts[mnemonic] ?? {});
      return { texts: cachedTexts(mnemonics), payloads: content.payloads };
    };
    const readTexts = async (mnemonics: readonly string[]) =>
      mnemonics.every((m) => texts.has(m)) ? cachedTexts(mnemonics) : (await readRequest(mnemonics)).texts;
    const putText = async (mnemonic: string, value: Record<string, unknown>) => {
      await writeRequestText(trx, dialect, routine.request_id, mnemonic, value, stampOf(base.now()));
      texts.set(mnemonic, structuredClone(value));
    };
    const target = (key: string) => ({ table: 'request_routine_lock', column: 'routine_lock', key });
    return {
      ...base,
      db: trx,
      trx,
      dialect,
      schema: database.schema,
      stamp: () => stampOf(base.now()),
      readText: async (mnemonic) => (await readTexts([mnemonic]))[mnemonic]!,
      readTexts,
      readRequest,
      reference: (key, load) => references.get(key, () => load(trx)),
      putText,
      mergeRequestData: async (patch) => {
        const current = (await readTexts(['REQUEST_DATA'])).REQUEST_DATA!;
        await putText('REQUEST_DATA', { ...current, ...patch });
        await mirrorRequestDetails(trx, database, routine.request_id, patch, stampOf(base.now()));
      },
      addRoutine: (name) => chain([name], 'append'),
      addRoutines: (names) => chain(names, 'append'),
      addPriorityRoutine: (name) => chain([name], 'priority'),
      voidAllNewRoutines: (current) =>
        voidNewRoutines(trx, routine.request_id, current ?? routine.routine_name),
      lock: async (key) => {
        const { locks } = attempt;
        if (locks.keys.has(key)) return;
        if (locks.keys.size === 0) {
          await dialect.lockNamedRow(
            trx,
            target(key),
            definition.timeoutMs - (Date.now() - attempt.startedAt),
          );
        } else if (!(await dialect.tryLockNamedRow(trx, target(key)))) {
          throw new RoutineLockBusyError(key);
        }
        locks.keys.add(key);
        attempt.keys.push(key);
      },
    };
  }

  /**
   * An execution log as the database can store it: at most {@link MAX_LOG_BYTES} (OpenEyes's
   * `log_text` is a 64 KiB `text`), the end kept, since an error comes last; characters the database
   * cannot store replaced.
   */
  function storableLog(text: string): string {
    const storable = replaceUnstorableCharacters(text, database.schema.maxTextCodePoint);
    if (Buffer.byteLength(storable) <= MAX_LOG_BYTES) return storable;
    const marker = '(log cut: its start is left out)\n';
    const tail = Buffer.from(storable).subarray(-(MAX_LOG_BYTES - Buffer.byteLength(marker)));
    // A cut inside a character leaves replacement characters at the start; drop them.
    return marker + tail.toString('utf8').replace(/^\uFFFD+/, '');
  }

  function outcomeOf(
    claimed: ClaimedRoutine,
    definition: RoutineDefinition | undefined,
    failure: unknown,
    logLines: readonly string[],
  ): AttemptRecord {
    const tryCount = claimed.try_count + 1;
    const executedAt = formatDateTime(now());
    if (failure === undefined) {
      return {
        routineId: claimed.id,
        status: 'COMPLETE',
        tryCount,
        nextTry: null,
        logText: storableLog(logLines.join('\n')),
        executedAt,
      };
    }
    const isFinal = failure instanceof PermanentRoutineError || definition?.retry === 'never';
    const delayMs = isFinal ? undefined : retryDelayMs(tryCount, config.queueRetryBackoff);
    return {
      routineId: claimed.id,
      status: delayMs === undefined ? 'FAILED' : 'RETRY',
      tryCount,
      nextTry: delayMs === undefined ? null : formatDateTime(new Date(now().getTime() + delayMs)),
      logText: storableLog([...logLines, errorText(failure)].join('\n')),
      executedAt,
    };
  }

  async function flushCounters(options: { isFinal?: boolean } = {}): Promise<void> {
    for (const [queue, c] of counters) {
      if (c.success === 0 && c.fail === 0 && c.lastRequestId === null) continue;
      const snapshot = { ...c, active: activeCount };
      c.success = 0;
      c.fail = 0;
      c.lastRequestId = null;
      c.lastSpawnAt = null;
      c.active = 0;
      // Counters are statistics: when not written now, they are put back for the next flush.
      const putBack = () => {
        c.success += snapshot.success;
        c.fail += snapshot.fail;
        if (c.lastRequestId === null) {
          c.lastRequestId = snapshot.lastRequestId;
          c.lastSpawnAt = snapshot.lastSpawnAt;
        }
      };
      let isWritten: boolean;
      try {
        isWritten = await addQueueCounters(db, dialect, queue, snapshot, options.isFinal === true);
      } catch (error) {
        putBack();
        throw error;
      }
      if (!isWritten) putBack();
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
 * Reference rows the routines read on every run (identifier types, event types), kept `ttlMs` (0: not
 * kept) and shared by the routines of this engine; a value still loading is shared, a failed load is not
 * kept.
 */
function createReferenceCache(ttlMs: number) {
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

/** The audit stamp of the worker's writes: the system user 1, at `now`. */
function stampOf(now: Date) {
  return { userId: 1, now: formatDateTime(now) };
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

/**
 * A batch that already holds a routine lock asked for a key another batch holds: the routine is put back
 * untried rather than wait (see the top of this file). Routines let it propagate.
 */
class RoutineLockBusyError extends Error {
  constructor(key: string) {
    super(`Routine lock ${key} is held by another worker`);
    this.name = 'RoutineLockBusyError';
  }
}

/** An earlier attempt of the routine never finished; it counts as a failed try. */
class UnfinishedAttemptError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnfinishedAttemptError';
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
  if (error instanceof UnfinishedAttemptError) return error.message;
  return error instanceof Error ? (error.stack ?? error.message) : String(error);
}
