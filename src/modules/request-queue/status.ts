/**
 * Processing status of a queued request (reference 9.7 and 9.8; part of the product per section 15):
 * the overall status and every routine, in the order the worker runs them.
 */
import type { Kysely } from 'kysely';
import type { DB, RoutineStatus } from '../../db/schema.ts';
import { AppError } from '../../errors.ts';
import type { RoutineStatusRow } from './status.queries.ts';
import { findRequestRoutines } from './status.queries.ts';

export type OverallStatus = 'COMPLETE' | 'RUNNING' | 'FAILED';

export interface RequestStatus {
  readonly request_id: number;
  readonly status: OverallStatus;
  readonly routines: readonly RoutineStatusRow[];
}

/** Largest id the `request.id` column holds (a 32-bit serial on PostgreSQL). */
const MAX_ID = 2_147_483_647;

/**
 * Reference 9.7 (`Request::getRequestStatus`): a FAILED routine makes the request FAILED; otherwise a
 * NEW or RETRY one makes it RUNNING; otherwise (COMPLETE, VOID, PAUSE, or no routine) it is COMPLETE.
 */
export function overallStatus(statuses: Iterable<RoutineStatus>): OverallStatus {
  let isRunning = false;
  for (const status of statuses) {
    if (status === 'FAILED') return 'FAILED';
    if (status === 'NEW' || status === 'RETRY') isRunning = true;
  }
  return isRunning ? 'RUNNING' : 'COMPLETE';
}

export interface StatusService {
  /** The status of request `rawId` (a query value): 422 when not a positive integer, 404 when unknown. */
  readStatus(rawId: unknown): Promise<RequestStatus>;
}

export function createStatusService(deps: { readonly db: Kysely<DB> }): StatusService {
  return {
    async readStatus(rawId) {
      if (rawId === undefined || rawId === '') {
        throw new AppError('validation_failed', 'Unprocessable Entity', {
          fields: { request_id: 'Request Id cannot be blank.' },
        });
      }
      if (typeof rawId !== 'string' || !/^\d{1,10}$/.test(rawId) || Number(rawId) > MAX_ID) {
        throw new AppError('validation_failed', 'Unprocessable Entity', {
          fields: { request_id: 'Request Id must be an integer.' },
        });
      }
      const requestId = Number(rawId);
      const routines = await findRequestRoutines(deps.db, requestId);
      if (routines === undefined) throw new AppError('not_found', 'Request not found.');
      return {
        request_id: requestId,
        status: overallStatus(routines.map((r) => r.status)),
        routines: routines.map((r) => ({
          routine_name: r.routine_name,
          status: r.status,
          try_count: r.try_count,
          execute_sequence: r.execute_sequence,
          next_try_date_time: r.next_try_date_time,
        })),
      };
    },
  };
}
