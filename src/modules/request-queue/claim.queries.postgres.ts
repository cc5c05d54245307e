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
import type { ClaimedRoutine } from './claim.queries.ts';
import { isEligible } from './claim.queries.ts';

/** The first eligible routine of `queue` (by id) whose request no other transaction holds, locked. */
export async function claimNextRoutine(
  trx: Transaction<DB>,
  queue: string,
  nowText: string,
): Promise<ClaimedRoutine | undefined> {
  return trx
    .selectFrom('request_routine as rr')
    .innerJoin('request as r', 'r.id', 'rr.request_id')
    .selectAll('rr')
    .select('r.request_type')
    .where((eb) => isEligible(eb, queue, nowText))
    .orderBy('rr.id')
    .limit(1)
    .forUpdate(['r', 'rr'])
    .skipLocked()
    .executeTakeFirst();
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
