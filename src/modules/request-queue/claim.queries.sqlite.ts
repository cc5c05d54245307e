/**
 * SQLite claiming. Differs from PostgreSQL because SQLite has no row locks (`FOR UPDATE` does not exist):
 * one worker process (the in-process worker of the server, or one `npm run worker`) serves the database,
 * it keeps the ids of the requests it is running in memory and leaves them out of the claim, and the
 * write transaction it runs each routine in is the database-wide writer lock. A killed worker leaves an
 * uncommitted WAL transaction that SQLite discards, so the routine stays NEW/RETRY. Running two worker
 * processes on one SQLite file is not supported (documented in the README).
 */
import type { Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { ClaimedRoutine } from './claim.queries.ts';
import { isEligible } from './claim.queries.ts';

/** The first eligible routine of `queue` (by id) whose request is not among `busyRequestIds`. */
export async function claimNextRoutine(
  db: Kysely<DB>,
  queue: string,
  nowText: string,
  busyRequestIds: ReadonlySet<number>,
): Promise<ClaimedRoutine | undefined> {
  let query = db
    .selectFrom('request_routine as rr')
    .innerJoin('request as r', 'r.id', 'rr.request_id')
    .selectAll('rr')
    .select('r.request_type')
    .where((eb) => isEligible(eb, queue, nowText))
    .orderBy('rr.id')
    .limit(1);
  if (busyRequestIds.size > 0) query = query.where('rr.request_id', 'not in', [...busyRequestIds]);
  return query.executeTakeFirst();
}

/**
 * Reference 9.6 `synchronizedJavaSubroutine`. One SQLite writer runs one transaction at a time, so holding
 * the write transaction already serialises work on `key`; the row is kept for compatibility.
 */
export async function lockRoutineKey(trx: Kysely<DB>, key: string): Promise<void> {
  await trx
    .insertInto('request_routine_lock')
    .values({ routine_lock: key })
    .onConflict((oc) => oc.column('routine_lock').doNothing())
    .execute();
}
