/**
 * The overall status of a queued request (OpenEyes's `Request::getRequestStatus`), the one rule that
 * the status endpoint, `queue show`, the console's request list and detail, and the list's SQL filters
 * all use: FAILED when a routine of the request is FAILED; otherwise RUNNING while one is NEW or RETRY;
 * otherwise (COMPLETE, VOID, PAUSE, or no routine at all) COMPLETE. The order of the routines does not
 * matter: a FAILED routine makes the request FAILED even with a pending routine before it.
 */
import type { Expression, ExpressionBuilder, SqlBool } from 'kysely';
import type { RoutineStatus } from '../../../db/schema.ts';
import { PENDING_STATUSES } from '../../../db/schema.ts';

export type OverallStatus = 'COMPLETE' | 'RUNNING' | 'FAILED';

/**
 * The rule as data, by precedence: the first entry that one of the request's routines matches gives the
 * status; none gives COMPLETE.
 */
const PRECEDENCE: readonly {
  readonly status: OverallStatus;
  readonly routineStatuses: readonly RoutineStatus[];
}[] = [
  { status: 'FAILED', routineStatuses: ['FAILED'] },
  { status: 'RUNNING', routineStatuses: PENDING_STATUSES },
];

/** The overall status of a request whose routines have `statuses`. */
export function overallStatus(statuses: Iterable<RoutineStatus>): OverallStatus {
  const present = new Set(statuses);
  return PRECEDENCE.find((rule) => rule.routineStatuses.some((s) => present.has(s)))?.status ?? 'COMPLETE';
}

/** The overall status with the routine that gives it (the first such in the order given). */
export interface OverallState {
  readonly status: OverallStatus;
  readonly routineName: string | null;
  readonly tryCount: number | null;
}

/** {@link overallStatus} of `routines`, naming the first routine (in the order given) that decides it. */
export function overallStateOf(
  routines: readonly { status: RoutineStatus; routine_name: string; try_count: number }[],
): OverallState {
  const status = overallStatus(routines.map((r) => r.status));
  const statuses = routineStatusesOf(status);
  const decisive = statuses === undefined ? undefined : routines.find((r) => statuses.includes(r.status));
  return { status, routineName: decisive?.routine_name ?? null, tryCount: decisive?.try_count ?? null };
}

/** The routine statuses whose presence makes a request `status` (none for COMPLETE, its absence of all). */
export function routineStatusesOf(status: OverallStatus): readonly RoutineStatus[] | undefined {
  return PRECEDENCE.find((rule) => rule.status === status)?.routineStatuses;
}

/**
 * {@link overallStatus} as an SQL condition on one request: it has a routine of `status`'s statuses and
 * none of the statuses before them in the precedence (for COMPLETE: none of any). `hasRoutineIn` is the
 * caller's `EXISTS` over the request's routines with a status among those given.
 */
export function overallStatusCondition<DB, TB extends keyof DB>(
  eb: ExpressionBuilder<DB, TB>,
  status: OverallStatus,
  hasRoutineIn: (statuses: readonly RoutineStatus[]) => Expression<SqlBool>,
): Expression<SqlBool> {
  const index = PRECEDENCE.findIndex((rule) => rule.status === status);
  const before = index === -1 ? PRECEDENCE : PRECEDENCE.slice(0, index);
  const conditions: Expression<SqlBool>[] = before.map((rule) => eb.not(hasRoutineIn(rule.routineStatuses)));
  if (index !== -1) conditions.push(hasRoutineIn(PRECEDENCE[index]!.routineStatuses));
  return eb.and(conditions);
}
