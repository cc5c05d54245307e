/**
 * SQL of the routine look-ups of the queue's admin: `queue list` (the CLI: routines with their request's
 * type, newest request first) and the request a routine belongs to (the console's refused retry form).
 */
import type { Kysely } from 'kysely';
import type { DB, RoutineStatus } from '../../../db/schema.ts';

export interface RoutineListing {
  readonly id: number;
  readonly request_id: number;
  readonly request_type: string;
  readonly execute_request_queue: string;
  readonly routine_name: string;
  readonly status: RoutineStatus;
  readonly try_count: number;
  readonly execute_sequence: number;
  readonly next_try_date_time: string | null;
}

/** Routines for `queue list`, newest request first, optionally of one status. */
export async function listRoutines(
  db: Kysely<DB>,
  options: { status?: RoutineStatus; limit: number },
): Promise<RoutineListing[]> {
  let query = db
    .selectFrom('request_routine as rr')
    .innerJoin('request as r', 'r.id', 'rr.request_id')
    .select([
      'rr.id',
      'rr.request_id',
      'r.request_type',
      'rr.execute_request_queue',
      'rr.routine_name',
      'rr.status',
      'rr.try_count',
      'rr.execute_sequence',
      'rr.next_try_date_time',
    ])
    .orderBy('rr.request_id', 'desc')
    .orderBy('rr.execute_sequence')
    .orderBy('rr.id')
    .limit(options.limit);
  if (options.status !== undefined) query = query.where('rr.status', '=', options.status);
  return query.execute();
}

/** The id of the request routine `routineId` belongs to; undefined for an unknown routine. */
export async function findRoutineRequestId(db: Kysely<DB>, routineId: number): Promise<number | undefined> {
  const routine = await db
    .selectFrom('request_routine')
    .select('request_id')
    .where('id', '=', routineId)
    .executeTakeFirst();
  return routine?.request_id;
}
