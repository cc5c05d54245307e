/**
 * Processing status of a queued request (`GET api/v1/request/queue/status`, not in OpenEyes):
 * the overall status and every routine, in the order the worker runs them, with the log of its last
 * execution. The endpoint shows it to the request's submitter and to request admins only, and answers
 * anyone else as it answers an unknown id; `queue show` (the CLI) shows any request.
 */
import type { Kysely } from 'kysely';
import type { DB, RoutineStatus } from '../../../db/schema.ts';
import { AppError } from '../../../errors.ts';
import type { RequestReader } from '../../user/index.ts';
import { mayReadRequest } from '../../user/index.ts';
import type { OverallStatus } from './overall-status.ts';
import { overallStatus } from './overall-status.ts';
import { findRequestRoutines } from './status.queries.ts';
import type { BackoffStep } from '../../../config.ts';
import { storedTimeZone } from '../../../db/stored-time.ts';
import { describeWaiting, lastErrorMessage, maxTriesOf, waitingForPatientOf } from './waiting.ts';

export type { OverallStatus } from './overall-status.ts';
export { overallStatus } from './overall-status.ts';

export interface RoutineStatusView {
  readonly routine_name: string;
  readonly status: RoutineStatus;
  readonly try_count: number;
  readonly execute_sequence: number;
  readonly next_try_date_time: string | null;
  /** The last execution's log, redacted by {@link redactExecutionLog}; null before the first try. */
  readonly execution_log: string | null;
}

/** A RUNNING request that waits for a patient rather than for a worker (`waiting.ts`). */
export interface WaitingForPatientView {
  /** `Waiting for a patient: <reason>; try 3 of 20, next at <time and zone as stored>`. */
  readonly message: string;
  readonly reason: string | null;
  readonly try_count: number;
  readonly max_tries: number;
  readonly next_try_date_time: string | null;
}

export interface RequestStatus {
  readonly request_id: number;
  readonly status: OverallStatus;
  /** Set when the RUNNING request waits for a patient, else null. */
  readonly waiting_for_patient: WaitingForPatientView | null;
  readonly routines: readonly RoutineStatusView[];
}

/** Largest id the `request.id` column holds (a 32-bit serial on PostgreSQL). */
const MAX_ID = 2_147_483_647;

export interface StatusService {
  /**
   * The status of request `rawId` (a query value): 422 when not a positive integer, 404 when unknown or,
   * with a `reader`, when the reader may not read the request (`mayReadRequest`). Without a reader (the
   * CLI) any request is shown.
   */
  readStatus(rawId: unknown, reader?: RequestReader): Promise<RequestStatus>;
}

export function createStatusService(deps: {
  readonly db: Kysely<DB>;
  /** The worker's back-off (`QUEUE_RETRY_BACKOFF`): how many tries a waiting match has. */
  readonly retryBackoff: readonly BackoffStep[];
}): StatusService {
  const maxTries = maxTriesOf(deps.retryBackoff);
  return {
    async readStatus(rawId, reader) {
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
      const request = await findRequestRoutines(deps.db, requestId);
      // Another user's request answers as an unknown one: ids are sequential, and the logs name the
      // matched patient, the event and what was filed.
      if (request === undefined || (reader !== undefined && !mayReadRequest(reader, request.submitterUserId)))
        throw new AppError('not_found', 'Request not found.');
      const { routines } = request;
      const status = overallStatus(routines.map((r) => r.status));
      const waiting = waitingForPatientOf(status, routines, (r) =>
        r.last_log_text === null ? null : lastErrorMessage(redactExecutionLog(r.last_log_text)),
      );
      return {
        request_id: requestId,
        status,
        waiting_for_patient:
          waiting === null
            ? null
            : {
                message: describeWaiting(waiting, maxTries, (stored) => `${stored} ${storedTimeZone()}`),
                reason: waiting.reason,
                try_count: waiting.tryCount,
                max_tries: maxTries,
                next_try_date_time: waiting.nextTry,
              },
        routines: routines.map((r) => ({
          routine_name: r.routine_name,
          status: r.status,
          try_count: r.try_count,
          execute_sequence: r.execute_sequence,
          next_try_date_time: r.next_try_date_time,
          execution_log: r.last_log_text === null ? null : redactExecutionLog(r.last_log_text),
        })),
      };
    },
  };
}

// A stack frame line (`    at fn (file:line)`), and the line a stack starts with (`TypeError: ...`).
const STACK_FRAME = /^\s+at\s/;
const ERROR_HEAD = /^([A-Za-z_$][\w$]*(?:Error|Exception))(?::|$)/;
const URL_CREDENTIALS = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/@:]+(?::[^\s/@]*)?@/gi;
const SECRET_ASSIGNMENT = /\b(password|passwd|pwd|secret|token|authorization)\b(\s*[=:]\s*)\S+/gi;
/**
 * Errors whose messages are shown: plain `Error`, which routines throw with their own words for a retry
 * ("No patient matches ..."), and the engine's timeout. Other classes are withheld: a `SyntaxError` from
 * JSON.parse or a PostgreSQL `DatabaseError` quotes the very input it choked on.
 */
const SHOWN_ERRORS: ReadonlySet<string> = new Set(['Error', 'RoutineTimeoutError']);

/**
 * An execution's log as a status reader may see it. Routine lines (ids, counts, the reasons routines
 * give) are kept; the stack of an error is dropped, and the message of an error outside
 * {@link SHOWN_ERRORS} is replaced by its class name: such messages can quote values from the request (a
 * parser or driver echoing a patient's identifier), which belong to whoever submitted it, not to every
 * holder of the queue operation. Credentials in URLs or `password=` style text are masked wherever they
 * appear. The full text stays in `request_routine_execution` for operators.
 */
export function redactExecutionLog(logText: string): string {
  const lines = logText.split('\n');
  const firstFrame = lines.findIndex((line) => STACK_FRAME.test(line));
  if (firstFrame === -1) return lines.map(maskSecrets).join('\n');
  // The error's text runs from its head line (`Name: message`, possibly several lines) to the frames.
  let head = Math.max(firstFrame - 1, 0);
  for (let i = firstFrame - 1; i > 0; i -= 1) {
    if (ERROR_HEAD.test(lines[i]!)) {
      head = i;
      break;
    }
  }
  const name = ERROR_HEAD.exec(lines[head]!)?.[1] ?? 'Error';
  const errorLine = SHOWN_ERRORS.has(name)
    ? maskSecrets(lines[head]!)
    : `${name} (message withheld; see the execution log)`;
  return [...lines.slice(0, head).map(maskSecrets), errorLine].join('\n');
}

/**
 * An execution's log as an operator sees it (the console's attempts): the stack of an expected condition
 * (an error of {@link SHOWN_ERRORS}: a routine's own words, the timeout) dropped as
 * {@link redactExecutionLog} drops it, since its frames name only the server's files; the log of any other
 * error kept whole (its message and frames are what a bug report needs), credentials masked in both.
 */
export function operatorExecutionLog(logText: string): string {
  const lines = logText.split('\n');
  const firstFrame = lines.findIndex((line) => STACK_FRAME.test(line));
  if (firstFrame === -1) return lines.map(maskSecrets).join('\n');
  let name = 'Error';
  for (let i = firstFrame - 1; i >= 0; i -= 1) {
    const head = ERROR_HEAD.exec(lines[i]!);
    if (head !== null) {
      name = head[1]!;
      break;
    }
  }
  return SHOWN_ERRORS.has(name) ? redactExecutionLog(logText) : lines.map(maskSecrets).join('\n');
}

/** `line` with credentials in URLs and `password=`-style values masked. */
export function maskSecrets(line: string): string {
  return line.replace(URL_CREDENTIALS, '$1***@').replace(SECRET_ASSIGNMENT, '$1$2***');
}
