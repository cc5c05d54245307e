/**
 * The admin actions on queued requests (those of OpenEyes's request admin): retry a routine, void a routine,
 * run a whole request again.
 *
 * Actions and the worker never race:
 * - only routines the worker does not run are changed in a way the worker could overwrite: a retry takes
 *   a FAILED, VOID or PAUSE routine back to NEW/RETRY; a re-queue resets the routines that are not
 *   pending (NEW/RETRY ones are left as they are); a void makes a pending routine ineligible, which the
 *   worker re-checks before it runs a claimed routine;
 * - every action runs in a write transaction that first takes the request's locks as the worker does
 *   (`lockRequestRows`: the request and routine rows through the adapter's `lockRowsSkipLocked`, so a
 *   request a worker is claiming or running answers "busy" at once; with a single writer the write
 *   transaction is the database-wide lock the worker's batch also takes). While a worker prepares a
 *   routine (outside any transaction) nothing is locked and the action goes through: the worker's run
 *   transaction then finds the routine changed and leaves it unrun;
 * - under those locks the routine is read again and compared with the version the operator saw: any
 *   difference answers "changed meanwhile" and nothing is written (never a lost update);
 * - once committed, a change that makes routines pending wakes the workers of their queues (this
 *   process's through `emitRequestQueued`, others' through the queue notification), so a retried routine
 *   runs at once instead of at the worker's next poll.
 */
import type { Transaction, Updateable } from 'kysely';
import type { Database } from '../../../db/database.ts';
import type { DialectAdapter } from '../../../db/dialect.ts';
import type { DB, PendingStatus, Row, RoutineStatus } from '../../../db/schema.ts';
import { ROUTINE_STATUSES, isPendingStatus } from '../../../db/schema.ts';
import { emitRequestQueued, notifyQueueAfterCommit } from '../engine/queue-events.ts';
import { requestVersion, routineVersion } from './request-detail.ts';

/** What an admin action did. */
export type AdminOutcome =
  | {
      readonly kind: 'done';
      readonly requestId: number;
      readonly routineIds: readonly number[];
      /** The queues of the changed routines (their workers were woken when the change made them pending). */
      readonly queues: readonly string[];
    }
  /** The routine (or request) differs from the version the operator saw; nothing was written. */
  | { readonly kind: 'changed'; readonly requestId: number; readonly current: string }
  /** A worker holds the request right now; nothing was written. */
  | { readonly kind: 'busy'; readonly requestId: number }
  /** The action does not apply to the routine's status; nothing was written. */
  | { readonly kind: 'refused'; readonly requestId: number; readonly reason: string }
  | { readonly kind: 'not_found' };

/** Statuses a retry starts from: states the worker never claims, so it cannot be running them. */
export const RETRYABLE: readonly RoutineStatus[] = ['FAILED', 'VOID', 'PAUSE'];
/** Statuses a void applies to. */
export const VOIDABLE: readonly RoutineStatus[] = ['NEW', 'RETRY', 'FAILED', 'PAUSE'];

/**
 * Takes the locks the worker takes on a request before it runs one of its routines: the request row and
 * its routine rows, skipping rows another transaction holds (with the database's single writer, the write
 * transaction itself is that lock and nothing is skipped). Returns false when a worker holds any of them,
 * so that the page answers "busy" at once instead of waiting for a routine that may run for minutes.
 */
async function lockRequestRows(
  trx: Transaction<DB>,
  dialect: DialectAdapter,
  requestId: number,
): Promise<boolean> {
  const request = await dialect
    .lockRowsSkipLocked(trx.selectFrom('request').select('id').where('id', '=', requestId))
    .execute();
  if (request.length === 0) return false;
  const [locked, all] = await Promise.all([
    dialect
      .lockRowsSkipLocked(trx.selectFrom('request_routine').select('id').where('request_id', '=', requestId))
      .execute(),
    trx
      .selectFrom('request_routine')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('request_id', '=', requestId)
      .executeTakeFirstOrThrow(),
  ]);
  return locked.length === Number(all.n);
}

/** Thrown inside the transaction when a lock is held, so that the transaction is rolled back. */
class BusyMarker extends Error {}

/** Runs `action` in a write transaction holding the request's locks; 'busy' when a worker holds them. */
export async function withRequestLocks<T>(
  database: Database,
  requestId: number,
  action: (trx: Transaction<DB>) => Promise<T>,
): Promise<T | 'busy'> {
  try {
    return await database.writeTransaction(async (trx) => {
      if (!(await lockRequestRows(trx, database.dialect, requestId))) throw new BusyMarker();
      return action(trx);
    });
  } catch (error) {
    if (error instanceof BusyMarker) return 'busy';
    throw error;
  }
}

export type RoutineRow = Row<'request_routine'>;

/** A change of routines: the statuses it applies to, its verb in a refusal, and what it sets. */
export interface RoutineChange {
  readonly allowed: readonly RoutineStatus[];
  readonly verb: string;
  readonly set: { readonly status: RoutineStatus } & Pick<
    Updateable<DB['request_routine']>,
    'try_count' | 'next_try_date_time'
  >;
}

/** Statuses a re-queue resets: every one that is not pending. */
const REQUEUEABLE: readonly RoutineStatus[] = ROUTINE_STATUSES.filter((s) => !isPendingStatus(s));

const VOID_CHANGE: RoutineChange = { allowed: VOIDABLE, verb: 'voided', set: { status: 'VOID' } };

function retryChange(to: { status: PendingStatus; tryCount: number; nextTry: string | null }): RoutineChange {
  return {
    allowed: RETRYABLE,
    verb: 'retried',
    set: { status: to.status, try_count: to.tryCount, next_try_date_time: to.nextTry },
  };
}

/** Picks the routines a change applies to, or answers instead; it may read more inside the transaction. */
export type ChooseRoutines = (
  routines: readonly RoutineRow[],
  trx: Transaction<DB>,
) => readonly RoutineRow[] | AdminOutcome | Promise<readonly RoutineRow[] | AdminOutcome>;

/**
 * The one checked change of routines, which every admin action (console and CLI) and the console's request
 * edits go through: under the request's locks (see the top of this file) it reads the request's routines in
 * id order, lets `choose` pick those to change (or answer instead: the routine is gone, or differs from the
 * version the operator saw), refuses when a chosen routine's status is not one `change` applies to, runs
 * `alongside` (what else the action writes, in the same transaction) and writes `change.set`. Once
 * committed, when `change.set` makes the routines pending, the workers of their queues are woken.
 */
export async function changeRoutines(
  database: Database,
  requestId: number,
  choose: ChooseRoutines,
  change: RoutineChange,
  alongside?: (trx: Transaction<DB>, chosen: readonly RoutineRow[]) => Promise<void>,
): Promise<AdminOutcome> {
  const exists = await database.db
    .selectFrom('request')
    .select('id')
    .where('id', '=', requestId)
    .executeTakeFirst();
  if (exists === undefined) return { kind: 'not_found' };
  const outcome = await withRequestLocks(database, requestId, async (trx): Promise<AdminOutcome> => {
    const routines = await trx
      .selectFrom('request_routine')
      .selectAll()
      .where('request_id', '=', requestId)
      .orderBy('id')
      .execute();
    const chosen = await choose(routines, trx);
    if (isOutcome(chosen)) return chosen;
    const refused = chosen.find((r) => !change.allowed.includes(r.status));
    if (refused !== undefined)
      return { kind: 'refused', requestId, reason: `A ${refused.status} routine cannot be ${change.verb}.` };
    if (alongside !== undefined) await alongside(trx, chosen);
    const ids = chosen.map((r) => r.id);
    if (ids.length > 0)
      await trx.updateTable('request_routine').set(change.set).where('id', 'in', ids).execute();
    const queues = [...new Set(chosen.map((r) => r.execute_request_queue))];
    return { kind: 'done', requestId, routineIds: ids, queues };
  });
  if (outcome === 'busy') return { kind: 'busy', requestId };
  if (outcome.kind === 'done' && isPendingStatus(change.set.status)) wakeWorkers(database, outcome);
  return outcome;
}

/**
 * Wakes the workers of the queues a committed change made routines pending in: this process's at once,
 * other processes' through the queue notification. Only a hint: without it the routines run at the
 * workers' next poll.
 */
function wakeWorkers(database: Database, done: { requestId: number; queues: readonly string[] }): void {
  for (const queue of done.queues) {
    emitRequestQueued({ requestId: done.requestId, queue });
    notifyQueueAfterCommit(database, queue);
  }
}

function isOutcome(chosen: readonly RoutineRow[] | AdminOutcome): chosen is AdminOutcome {
  return !Array.isArray(chosen);
}

/** Picks routine `routineId` when it is still the version the operator saw. */
function seenRoutine(
  input: { readonly routineId: number; readonly expectedVersion: string },
  requestId: number,
) {
  return (routines: readonly RoutineRow[]): readonly RoutineRow[] | AdminOutcome => {
    const routine = routines.find((r) => r.id === input.routineId);
    if (routine === undefined) return { kind: 'not_found' };
    const current = routineVersion(routine);
    return current === input.expectedVersion ? [routine] : { kind: 'changed', requestId, current };
  };
}

/** A change of one routine the operator saw; its request is found first. */
async function changeSeenRoutine(
  database: Database,
  input: { readonly routineId: number; readonly expectedVersion: string },
  change: RoutineChange,
): Promise<AdminOutcome> {
  const seen = await database.db
    .selectFrom('request_routine')
    .select('request_id')
    .where('id', '=', input.routineId)
    .executeTakeFirst();
  if (seen === undefined) return { kind: 'not_found' };
  return changeRoutines(database, seen.request_id, seenRoutine(input, seen.request_id), change);
}

export interface RetryInput {
  readonly routineId: number;
  /** {@link RoutineDetail.version} as shown to the operator. */
  readonly expectedVersion: string;
  readonly status: PendingStatus;
  readonly tryCount: number;
  /** Stored UTC text, or null for "as soon as possible". */
  readonly nextTry: string | null;
}

/** The admin edit: a FAILED (or VOID, PAUSE) routine back to NEW or RETRY. */
export function retryRoutine(database: Database, input: RetryInput): Promise<AdminOutcome> {
  return changeSeenRoutine(database, input, retryChange(input));
}

/** Voids one routine (it will not run; VOID counts as done for the ordering rule). */
export function voidRoutine(
  database: Database,
  input: { readonly routineId: number; readonly expectedVersion: string },
): Promise<AdminOutcome> {
  return changeSeenRoutine(database, input, VOID_CHANGE);
}

/**
 * Runs a whole request again: every routine that is not pending (COMPLETE, FAILED, VOID, PAUSE) goes
 * back to NEW with try count 0 and no next try, so the request runs again from its first routine in
 * sequence order; NEW and RETRY routines are left as they are.
 */
export function requeueRequest(
  database: Database,
  input: { readonly requestId: number; readonly expectedVersion: string },
): Promise<AdminOutcome> {
  const { requestId } = input;
  return changeRoutines(
    database,
    requestId,
    (routines) => {
      const current = requestVersion(routines);
      if (current !== input.expectedVersion) return { kind: 'changed', requestId, current };
      const reset = routines.filter((r) => REQUEUEABLE.includes(r.status));
      if (reset.length === 0)
        return { kind: 'refused', requestId, reason: 'Every routine is already pending.' };
      return reset;
    },
    {
      allowed: REQUEUEABLE,
      verb: 're-queued',
      set: { status: 'NEW', try_count: 0, next_try_date_time: null },
    },
  );
}

/**
 * `queue retry <request>` of the CLI: the console's retry (NEW, try count 0, no next try) of each of the
 * request's FAILED routines. The CLI shows no version to compare: the routines are chosen under the
 * request's locks, from what they are then, so a routine a worker finished meanwhile is seen as it is
 * now. A pending (NEW/RETRY) routine is not retried: a worker may be about to run it.
 */
export function retryFailedRoutines(database: Database, requestId: number): Promise<AdminOutcome> {
  return changeRoutines(
    database,
    requestId,
    (routines) => routines.filter((r) => r.status === 'FAILED'),
    retryChange({ status: 'NEW', tryCount: 0, nextTry: null }),
  );
}

/**
 * `queue void <request>` of the CLI: the console's void of each of the request's pending (NEW/RETRY)
 * routines, chosen under the request's locks (see {@link retryFailedRoutines}).
 */
export function voidPendingRoutines(database: Database, requestId: number): Promise<AdminOutcome> {
  return changeRoutines(
    database,
    requestId,
    (routines) => routines.filter((r) => isPendingStatus(r.status)),
    VOID_CHANGE,
  );
}
