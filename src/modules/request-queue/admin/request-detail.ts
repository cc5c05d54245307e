/**
 * One request as the console shows it: its routines in run order with their executions
 * (logs masked of credentials, an expected condition's stack dropped), its details and the versions the admin actions compare.
 */
import { createHash } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { DB, RoutineStatus } from '../../../db/schema.ts';
import { operatorExecutionLog } from '../status/status.ts';
import type { OverallState } from '../status/overall-status.ts';
import { overallStateOf } from '../status/overall-status.ts';
import type { WaitingForPatient } from '../status/waiting.ts';
import { waitingForPatientOf } from '../status/waiting.ts';
import { failureReasonOf } from './request-summary.ts';

export interface ExecutionDetail {
  readonly id: number;
  readonly executedAt: string;
  readonly status: string;
  readonly tryNumber: number;
  readonly logText: string;
}

export interface RoutineDetail {
  readonly id: number;
  readonly name: string;
  readonly status: RoutineStatus;
  readonly tryCount: number;
  readonly nextTry: string | null;
  readonly sequence: number;
  readonly queue: string;
  /** What the operator saw: an action is refused when the routine no longer matches it. */
  readonly version: string;
  readonly executions: readonly ExecutionDetail[];
}

export interface RequestDetail {
  readonly id: number;
  readonly requestType: string;
  readonly systemMessage: string;
  readonly overrideQueue: string | null;
  readonly createdDate: string;
  readonly overall: OverallState;
  /** Set when the request waits for a patient (`waiting.ts`). */
  readonly waiting: WaitingForPatient | null;
  /** Routines in the order the worker runs them (sequence, then id). */
  readonly routines: readonly RoutineDetail[];
  /** `request_details` rows (name/value pairs written by the routines), at most {@link MAX_DETAILS}. */
  readonly details: readonly { name: string; value: string | null }[];
  /** Version of the whole request (all its routines), for a re-queue. */
  readonly version: string;
}

export const MAX_DETAILS = 200;

/** The version of a routine as compared by the actions. */
export function routineVersion(routine: {
  status: string;
  try_count: number;
  next_try_date_time: string | null;
}): string {
  return `${routine.status}/${routine.try_count}/${routine.next_try_date_time ?? ''}`;
}

export function requestVersion(
  routines: readonly { id: number; status: string; try_count: number; next_try_date_time: string | null }[],
): string {
  const text = routines.map((r) => `${r.id}:${routineVersion(r)}`).join(',');
  return createHash('sha256').update(text).digest('base64url').slice(0, 22);
}

/** A request with its routines, their executions and its details; undefined for an unknown id. */
export async function readRequestDetail(
  db: Kysely<DB>,
  requestId: number,
): Promise<RequestDetail | undefined> {
  const request = await db
    .selectFrom('request')
    .select(['id', 'request_type', 'system_message', 'request_override_default_queue', 'created_date'])
    .where('id', '=', requestId)
    .executeTakeFirst();
  if (request === undefined) return undefined;
  const [routines, details] = await Promise.all([
    db.selectFrom('request_routine').selectAll().where('request_id', '=', requestId).orderBy('id').execute(),
    db
      .selectFrom('request_details')
      .select(['name', 'value'])
      .where('request_id', '=', requestId)
      .orderBy('id')
      .limit(MAX_DETAILS)
      .execute(),
  ]);
  const executions =
    routines.length === 0
      ? []
      : await db
          .selectFrom('request_routine_execution')
          .selectAll()
          .where(
            'request_routine_id',
            'in',
            routines.map((r) => r.id),
          )
          .orderBy('id')
          .execute();
  const ordered = [...routines].sort((a, b) => a.execute_sequence - b.execute_sequence || a.id - b.id);
  const overall = overallStateOf(routines);
  const lastLog = (routineId: number) =>
    executions.findLast((e) => e.request_routine_id === routineId)?.log_text ?? '';
  return {
    id: request.id,
    requestType: request.request_type,
    systemMessage: request.system_message,
    overrideQueue: request.request_override_default_queue,
    createdDate: request.created_date,
    overall,
    waiting: waitingForPatientOf(overall.status, routines, (r) => failureReasonOf(lastLog(r.id))),
    routines: ordered.map((r) => ({
      id: r.id,
      name: r.routine_name,
      status: r.status,
      tryCount: r.try_count,
      nextTry: r.next_try_date_time,
      sequence: r.execute_sequence,
      queue: r.execute_request_queue,
      version: routineVersion(r),
      executions: executions
        .filter((e) => e.request_routine_id === r.id)
        .map((e) => ({
          id: e.id,
          executedAt: e.execution_date_time,
          status: e.status,
          tryNumber: e.try_number,
          logText: operatorExecutionLog(e.log_text ?? ''),
        })),
    })),
    details,
    version: requestVersion(routines),
  };
}
