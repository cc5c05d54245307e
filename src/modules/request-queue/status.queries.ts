/**
 * SQL of the status endpoint: whether a request exists, and its routines in execution order.
 */
import type { Kysely } from 'kysely';
import type { DB, RoutineStatus } from '../../db/schema.ts';

export interface RoutineStatusRow {
  readonly routine_name: string;
  readonly status: RoutineStatus;
  readonly try_count: number;
  readonly execute_sequence: number;
  readonly next_try_date_time: string | null;
}

/** The routines of a request, or undefined when the request does not exist. */
export async function findRequestRoutines(
  db: Kysely<DB>,
  requestId: number,
): Promise<RoutineStatusRow[] | undefined> {
  const [request, routines] = await Promise.all([
    db.selectFrom('request').select('id').where('id', '=', requestId).executeTakeFirst(),
    db
      .selectFrom('request_routine')
      .select(['routine_name', 'status', 'try_count', 'execute_sequence', 'next_try_date_time'])
      .where('request_id', '=', requestId)
      .orderBy('execute_sequence')
      .orderBy('id')
      .execute(),
  ]);
  return request === undefined ? undefined : routines;
}
