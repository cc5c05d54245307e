/**
 * The two batch strategies and what they share. A batch claims up to n routines of different requests,
 * marks their attempts started (committed on its own), runs each in a savepoint of one write transaction
 * (`run-routine.ts`), records every outcome with its execution row and commits once. What several
 * routines of the batch do alike is one statement for all of them: the claim, the start marks, the
 * records, the routines they chain (`addRoutinesToRequests`), their `request_details` rows
 * (`mirrorRequestDetailsMany`) and the first read of their requests' content (`BatchReadAhead`).
 * OpenEyes's Java processor records a failure in a second transaction; the savepoint gives the same result
 * without releasing the claim between the two, so another worker cannot start the same routine before its
 * failure is recorded.
 *
 * The strategies differ in the claim, by one capability of the dialect, row locks:
 * - with row locks (PostgreSQL, MySQL), the claim locks its rows in a short transaction of its own that
 *   also takes a session lock per claimed request and commits; several processes share a queue
 *   ({@link runLockedBatch});
 * - without (SQLite, one writer), the claim is a plain read that leaves out the requests this process is
 *   running ({@link runSingleWriterBatch}).
 * Then both alike ({@link prepareAndRun}): `prepare` runs outside any transaction (slow work, a PAS query,
 * holds neither a lock nor the single connection), and the write transaction reads each claimed routine
 * again (locking its row) and runs only those still as they were claimed.
 *
 * Both run their transaction through {@link runBatchTransaction}: one commit path and one rollback path.
 * A routine past its timeout rolls back the whole batch (its code may still be running) and is recorded
 * in a short transaction of its own; the others stay as they were and run again.
 */
import type { ControlledTransaction, Kysely } from 'kysely';
import { formatDateTime } from '../../../db/database.ts';
import type { DB } from '../../../db/schema.ts';
import type { Attempt, BatchEntry, Runnable, StepOutcome, Unfinished } from './attempts.ts';
import {
  forgetAttempts,
  outcomeOf,
  recordUnfinished,
  reportAttempt,
  startAttempts,
  unmarkNotRun,
} from './attempts.ts';
import type { ClaimedRoutine } from './claim.queries.ts';
import {
  addRoutinesToRequests,
  claimRoutines,
  clearAttemptMarkers,
  keepUnfinishedCount,
  recordAttempts,
  stillClaimedIds,
} from './claim.queries.ts';
import { notifyQueueAfterCommit } from './queue-events.ts';
import { writeRequestTexts } from '../../attachment-data/index.ts';
import { mirrorRequestDetailsMany } from './request-details.ts';
import type { BatchLocks } from './run-context.ts';
import { createReadAhead } from './run-context.ts';
import type { Prepared } from './run-routine.ts';
import { RoutineTimeoutError, prepareAhead, runClaimed } from './run-routine.ts';
import type { EngineRuntime } from './runtime.ts';

type Trx = ControlledTransaction<DB>;

/** A batch's open write transaction, the routine locks it holds and the start marks it committed. */
interface BatchTransaction {
  readonly trx: Trx;
  readonly locks: BatchLocks;
}

/**
 * Opens the batch's write transaction on `db` (the database, or the one connection the batch holds),
 * lets `fill` run the batch's routines in it and commits their outcomes; on any failure rolls the whole
 * transaction back (the one rollback path of both strategies): a timed-out routine is then recorded on
 * its own, and otherwise the start marks of the batch's routines are forgotten and the error goes on.
 */
async function runBatchTransaction(
  rt: EngineRuntime,
  db: Kysely<DB>,
  queue: string,
  marked: readonly Runnable[],
  fill: (batch: BatchTransaction) => Promise<BatchEntry[]>,
): Promise<StepOutcome[]> {
  const trx = await db.startTransaction().execute();
  const batch: BatchTransaction = { trx, locks: { keys: new Set() } };
  try {
    return await commitBatch(rt, trx, queue, await fill(batch), marked);
  } catch (error) {
    if (!trx.isCommitted && !trx.isRolledBack) {
      await trx
        .rollback()
        .execute()
        .catch(() => {});
    }
    // The other routines of the batch were rolled back too: they stay as they were and run again.
    if (error instanceof RoutineTimeoutError) return [await recordTimeout(rt, error, marked)];
    await forgetAttempts(rt, marked);
    throw error;
  }
}

/** A batch that runs a routine whose batch's shared writes failed writes each routine's itself. */
function isWritingEachRoutine(rt: EngineRuntime, claimed: readonly ClaimedRoutine[]): boolean {
  return rt.writingEachRoutineIds.size > 0 && claimed.some((c) => rt.writingEachRoutineIds.has(c.id));
}

/** Routines a batch claimed and marked: those to run and those whose last attempt never finished. */
interface ClaimedBatch {
  readonly claimed: readonly ClaimedRoutine[];
  readonly runnable: readonly Runnable[];
  readonly unfinished: readonly Unfinished[];
}

/** How many claims a batch makes at most when the routines it claimed are held by other workers. */
const MAX_CLAIM_ROUNDS = 3;

/**
 * Row locks, several worker processes: the batch holds one connection throughout (`db.connection()`).
 * 1. Claim, in a short transaction on it: the claim's row locks (`FOR UPDATE SKIP LOCKED`) choose
 *    routines that no other transaction is claiming or running; each claimed request is then locked for
 *    the session (`tryLockSessionKeys`), and a request whose key another worker's session holds (it is
 *    preparing or running a routine of it) is left out and the claim is made again without it. The start
 *    marks are committed, and so is the claim: no row lock is held any more.
 * 2. Prepare, outside any transaction: slow preparation (a PAS query) holds neither locks nor an open
 *    transaction. The session keys keep other workers off the batch's requests meanwhile; a process that
 *    dies loses its session and with it its keys, and its start marks count the attempts as tries.
 * 3. Run, as the single writer does: one write transaction locks the routine rows again and runs only
 *    those still as they were claimed (a console void or re-queue meanwhile leaves its routine unrun).
 * The session keys are released once the batch is over. Batches take a turn first
 * (`rt.batchConnections`): the preparation needs a connection besides the one its batch holds.
 */
export async function runLockedBatch(
  rt: EngineRuntime,
  queue: string,
  limit: number,
): Promise<StepOutcome[]> {
  await rt.batchConnections.take();
  try {
    return await rt.db.connection().execute(async (conn) => {
      const held: number[] = [];
      try {
        const batch = await claimAndHold(rt, conn, queue, limit, held);
        return batch === undefined ? [] : await prepareAndRun(rt, conn, queue, batch);
      } finally {
        // Should this fail, the connection is broken, and its session, keys included, goes with it.
        await rt.dialect.unlockSessionKeys(conn, held).catch(() => {});
      }
    });
  } finally {
    rt.batchConnections.give();
  }
}

/**
 * Step 1 of {@link runLockedBatch}: claims up to `limit` routines of requests whose session keys it
 * takes (adding them to `held`, also on failure, for the caller to release) and marks their attempts
 * started, in a transaction of `conn` that commits before it returns. Undefined: nothing to run.
 */
async function claimAndHold(
  rt: EngineRuntime,
  conn: Kysely<DB>,
  queue: string,
  limit: number,
  held: number[],
): Promise<ClaimedBatch | undefined> {
  return conn.transaction().execute(async (trx) => {
    const claimed: ClaimedRoutine[] = [];
    // Its own claimed requests too: a claim returns the rows its own transaction has locked.
    const seen = new Set<number>();
    for (let round = 0; round < MAX_CLAIM_ROUNDS && claimed.length < limit; round += 1) {
      const found = await claimRoutines(trx, rt.database, {
        queue,
        nowText: formatDateTime(rt.now()),
        limit: limit - claimed.length,
        excludeRequestIds: seen,
      });
      if (found.length === 0) break;
      const keys = await rt.dialect.tryLockSessionKeys(
        trx,
        found.map((r) => r.request_id),
      );
      held.push(...keys);
      for (const routine of found) {
        seen.add(routine.request_id);
        if (keys.has(routine.request_id)) claimed.push(routine);
      }
      if (keys.size === found.length) break;
    }
    if (claimed.length === 0) return undefined;
    const { runnable, unfinished } = await startAttempts(rt, trx, claimed);
    return { claimed, runnable, unfinished };
  });
}

/**
 * A single writer: claim with a plain read, prepare outside any transaction (slow work never holds the
 * connection), then run the prepared routines in one write transaction that re-checks them first.
 */
export async function runSingleWriterBatch(
  rt: EngineRuntime,
  queue: string,
  limit: number,
): Promise<StepOutcome[]> {
  const claimed = await claimRoutines(rt.db, rt.database, {
    queue,
    nowText: formatDateTime(rt.now()),
    limit,
    excludeRequestIds: rt.busyRequestIds,
  });
  if (claimed.length === 0) return [];
  for (const routine of claimed) rt.busyRequestIds.add(routine.request_id);
  try {
    const { runnable, unfinished } = await startAttempts(rt, rt.db, claimed);
    return await prepareAndRun(rt, rt.db, queue, { claimed, runnable, unfinished });
  } finally {
    for (const routine of claimed) rt.busyRequestIds.delete(routine.request_id);
  }
}

/**
 * What both strategies do once their claims are marked: prepare the runnable routines outside any
 * transaction (within the batch's time budget; the others are put back), then in one write transaction
 * on `db` re-check each claimed routine (locking its row where the engine has row locks) and run, or
 * record as never finished, those still as they were claimed; the others are 'contended'.
 */
async function prepareAndRun(
  rt: EngineRuntime,
  db: Kysely<DB>,
  queue: string,
  { claimed, runnable, unfinished }: ClaimedBatch,
): Promise<StepOutcome[]> {
  const batchStartedAt = Date.now();
  const ready: { routine: ClaimedRoutine; pre: Prepared; logLines: string[] }[] = [];
  for (const { routine } of runnable) {
    if (ready.length > 0 && Date.now() - batchStartedAt > rt.batchBudgetMs) break;
    const logLines = [rt.workerLine];
    ready.push({ routine, pre: await prepareAhead(rt, routine, logLines), logLines });
  }
  return runBatchTransaction(rt, db, queue, runnable, async ({ trx, locks }) => {
    const current = await stillClaimedIds(
      trx,
      rt.dialect,
      [...unfinished.map((u) => u.routine), ...ready.map((r) => r.routine)],
      queue,
      formatDateTime(rt.now()),
    );
    const entries: BatchEntry[] = unfinished.map((entry) =>
      current.has(entry.routine.id) ? recordUnfinished(rt, entry) : 'contended',
    );
    locks.readAhead = createReadAhead(ready.filter((r) => current.has(r.routine.id)).map((r) => r.routine));
    locks.isWritingEachRoutine = isWritingEachRoutine(rt, claimed);
    for (const { routine, pre, logLines } of ready) {
      entries.push(
        current.has(routine.id)
          ? await runClaimed(rt, trx, routine, { logLines, prepared: pre, locks })
          : 'contended',
      );
    }
    return entries;
  });
}

/**
 * Records every attempt, clears the start marks of recorded attempts and puts back those of routines
 * marked but not run (the batch ended early, another worker changed them, or their key was held
 * elsewhere), commits, then reports.
 */
async function commitBatch(
  rt: EngineRuntime,
  trx: Trx,
  queue: string,
  entries: readonly BatchEntry[],
  marked: readonly Runnable[],
): Promise<StepOutcome[]> {
  const ran = entries.filter((a): a is Attempt => typeof a !== 'string');
  // What the successful attempts chained and merged into REQUEST_DATA (a failed attempt's went with its
  // savepoint), for all of them at once. Should that fail, the next batch writes each routine's itself.
  const succeeded = ran.filter((a) => a.failure === undefined);
  try {
    await addRoutinesToRequests(
      trx,
      succeeded.flatMap((a) => a.effects.chains),
    );
    await writeRequestDataMany(rt, trx, succeeded);
    await mirrorRequestDetailsMany(
      trx,
      rt.database,
      succeeded.flatMap((a) => a.effects.details),
    );
  } catch (error) {
    for (const attempt of succeeded) rt.writingEachRoutineIds.add(attempt.claimed.id);
    throw error;
  }
  await recordAttempts(
    trx,
    rt.dialect,
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
  for (const attempt of ran) {
    rt.writingEachRoutineIds.delete(attempt.claimed.id);
    rt.eagerSavepointIds.delete(attempt.claimed.id);
  }
  // Routines added by this batch are eligible now: wake the idle workers of other processes. Sent after
  // the commit, not in the transaction: PostgreSQL serialises the commits of notifying transactions.
  if (ran.some((a) => a.effects.hasChained)) notifyQueueAfterCommit(rt.database, queue);
  return entries.map((a) => (typeof a === 'string' ? { kind: a } : reportAttempt(rt, a)));
}

/**
 * The `REQUEST_DATA` rows the successful attempts left unwritten, in one statement, stamped with the
 * latest of their stamps (the batch commits them together).
 */
async function writeRequestDataMany(rt: EngineRuntime, trx: Trx, succeeded: readonly Attempt[]) {
  const written = succeeded.flatMap((a) =>
    a.effects.requestData === undefined
      ? []
      : [{ requestId: a.claimed.request_id, ...a.effects.requestData }],
  );
  if (written.length === 0) return;
  const stamp = written.reduce(
    (latest, w) => (w.stamp.now > latest.now ? w.stamp : latest),
    written[0]!.stamp,
  );
  await writeRequestTexts(trx, rt.dialect, 'REQUEST_DATA', written, stamp);
}

/**
 * Records a timed-out attempt in a short transaction of its own, unless another worker has it now, and
 * puts back the start marks of the batch's other routines (rolled back with the batch, they did not run).
 */
async function recordTimeout(
  rt: EngineRuntime,
  error: RoutineTimeoutError,
  marked: readonly Runnable[],
): Promise<StepOutcome> {
  const claimed = error.claimed!;
  const attempt = await rt.db.transaction().execute(async (trx): Promise<Attempt | undefined> => {
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
    if ((await rt.dialect.lockRowsSkipLocked(query).executeTakeFirst()) === undefined) return undefined;
    const definition = rt.catalog.get(claimed.routine_name);
    const record = outcomeOf(rt, claimed, definition, error, [...error.logLines]);
    await recordAttempts(trx, rt.dialect, [record]);
    await clearAttemptMarkers(trx, [claimed.id]);
    return {
      claimed,
      record,
      failure: error,
      startedAt: Date.now(),
      effects: { hasChained: false, chains: [], details: [] },
    };
  });
  return attempt === undefined ? { kind: 'contended' } : reportAttempt(rt, attempt);
}
