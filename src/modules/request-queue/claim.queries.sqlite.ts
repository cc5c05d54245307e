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

/**
 * The first `limit` eligible routines of `queue` (by id) whose requests are not among `busyRequestIds`,
 * at most one per request.
 */
export async function claimRoutines(
  db: Kysely<DB>,
  queue: string,
  nowText: string,
  busyRequestIds: ReadonlySet<number>,
  limit: number,
): Promise<ClaimedRoutine[]> {
  let query = db
    .selectFrom('request_routine as rr')
    .innerJoin('request as r', 'r.id', 'rr.request_id')
    .selectAll('rr')
    .select('r.request_type')
    .where((eb) => isEligible(eb, queue, nowText))
    .orderBy('rr.id')
    .limit(limit);
  if (busyRequestIds.size > 0) query = query.where('rr.request_id', 'not in', [...busyRequestIds]);
  const seen = new Set<number>();
  return (await query.execute()).filter((r) => !seen.has(r.request_id) && seen.add(r.request_id));
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
