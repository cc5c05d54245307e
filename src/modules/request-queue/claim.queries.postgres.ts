/**
 * PostgreSQL claiming. Differs from SQLite because PostgreSQL has row locks: several worker processes on
 * several machines share one queue by claiming inside the transaction that runs the routine with
 * `SELECT ... FOR UPDATE OF r, rr SKIP LOCKED`. The lock on the `request` row gives "one worker per
 * request"; the lock on the routine row makes PostgreSQL re-check the routine's status against its newest
 * version, so a routine another worker has just completed is skipped. If the worker dies, its connection
 * closes, the server rolls the transaction back and releases both locks: the routine is left as it was
 * (NEW/RETRY) and another worker runs it: never lost, never committed twice.
 */
import type { Kysely, Transaction } from 'kysely';
import { sql } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { AttemptRecord, ClaimedRoutine } from './claim.queries.ts';
import { isEligible } from './claim.queries.ts';

/** The first `limit` eligible routines of `queue` (by id) whose requests no other transaction holds, locked. */
export async function claimRoutines(
  trx: Transaction<DB>,
  queue: string,
  nowText: string,
  limit: number,
): Promise<ClaimedRoutine[]> {
  return trx
    .selectFrom('request_routine as rr')
    .innerJoin('request as r', 'r.id', 'rr.request_id')
    .selectAll('rr')
    .select('r.request_type')
    .where((eb) => isEligible(eb, queue, nowText))
    .orderBy('rr.id')
    .limit(limit)
    .forUpdate(['r', 'rr'])
    .skipLocked()
    .execute();
}

/**
 * Reference 9.6 `synchronizedJavaSubroutine`: insert the `request_routine_lock` row for `key` when missing
 * and lock it until the transaction ends. A holder that takes longer than `waitMs` makes this fail (and the
 * routine retry later) instead of blocking the worker forever.
 */
export async function lockRoutineKey(trx: Kysely<DB>, key: string, waitMs: number): Promise<void> {
  await trx
    .insertInto('request_routine_lock')
    .values({ routine_lock: key })
    .onConflict((oc) => oc.column('routine_lock').doNothing())
    .execute();
  await sql`select set_config('lock_timeout', ${`${Math.max(1, Math.floor(waitMs))}ms`}, true)`.execute(trx);
  await trx
    .selectFrom('request_routine_lock')
    .select('routine_lock')
    .where('routine_lock', '=', key)
    .forUpdate()
    .execute();
}

/**
 * Records the attempts of a batch (status, try count, next try, and the execution rows) with one UPDATE
 * and one INSERT, in the batch's transaction.
 */
export async function recordAttempts(trx: Kysely<DB>, attempts: readonly AttemptRecord[]): Promise<void> {
  if (attempts.length === 0) return;
  const values = sql.join(
    attempts.map(
      (a) =>
        sql`(${a.routineId}::integer, ${a.status}::varchar, ${a.tryCount}::integer, ${a.nextTry}::timestamp)`,
    ),
  );
  await sql`update request_routine as rr
    set status = v.status, try_count = v.try_count, next_try_date_time = v.next_try
    from (values ${values}) as v(id, status, try_count, next_try)
    where rr.id = v.id`.execute(trx);
  await trx
    .insertInto('request_routine_execution')
    .values(
      attempts.map((a) => ({
        request_routine_id: a.routineId,
        log_text: a.logText,
        execution_date_time: a.executedAt,
        status: a.status,
        try_number: a.tryCount,
      })),
    )
    .execute();
}

/** `NOTIFY request_queue, '<queue>'` (the channel intake uses), wakes the idle workers of every process. */
export async function notifyQueue(trx: Kysely<DB>, queue: string): Promise<void> {
  await sql`select pg_notify('request_queue', ${queue})`.execute(trx);
}
