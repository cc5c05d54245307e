/**
 * SQL of the status endpoint and `queue show`: whether a request exists and who submitted it, and its
 * routines in execution order, each with the log text of its last execution.
 */
import type { Kysely } from 'kysely';
import type { DB, RoutineStatus } from '../../../db/schema.ts';

export interface RoutineStatusRow {
  readonly routine_name: string;
  readonly status: RoutineStatus;
  readonly try_count: number;
  readonly execute_sequence: number;
  readonly next_try_date_time: string | null;
  /** `log_text` of the routine's newest `request_routine_execution` row; null before its first try. */
  readonly last_log_text: string | null;
}

export interface RequestRoutinesRow {
  /** The user who submitted the request (`request.created_user_id`). */
  readonly submitterUserId: number;
  readonly routines: RoutineStatusRow[];
}

/** The submitter and routines of a request, or undefined when the request does not exist. */
export async function findRequestRoutines(
  db: Kysely<DB>,
  requestId: number,
): Promise<RequestRoutinesRow | undefined> {
  const [request, routines] = await Promise.all([
    db.selectFrom('request').select('created_user_id').where('id', '=', requestId).executeTakeFirst(),
    db
      .selectFrom('request_routine as r')
      .select(['r.routine_name', 'r.status', 'r.try_count', 'r.execute_sequence', 'r.next_try_date_time'])
      .select((eb) =>
        eb
          .selectFrom('request_routine_execution as e')
          .select('e.log_text')
          .whereRef('e.request_routine_id', '=', 'r.id')
          .orderBy('e.id', 'desc')
          .limit(1)
          .as('last_log_text'),
      )
      .where('r.request_id', '=', requestId)
      .orderBy('r.execute_sequence')
      .orderBy('r.id')
      .execute(),
  ]);
  return request === undefined ? undefined : { submitterUserId: request.created_user_id, routines };
}
