/**
 * "Waiting for a patient": a request whose `PATIENT_MATCH` found no patient (or several) and waits for its
 * next try, which may be days away (the back-off), for a patient who may never be registered. By
 * OpenEyes's overall status rule it is RUNNING, like a request a worker is busy with; every reader that
 * shows a status (the status endpoint, `queue show`, the console's list, detail, filter and health line,
 * `/metrics`) tells the two apart with this one rule: the request is RUNNING (no FAILED routine) and its
 * `PATIENT_MATCH` routine is RETRY. The match's only retryable failures are "no
 * patient" and "several patients" (missing or unreadable criteria fail it at once); the reason shown is
 * its last attempt's own words.
 */
import type { Expression, ExpressionBuilder, SqlBool } from 'kysely';
import type { BackoffStep } from '../../../config.ts';
import type { RoutineStatus } from '../../../db/schema.ts';
import type { OverallStatus } from './overall-status.ts';

/** The routine whose retry means the request waits for a patient. */
export const PATIENT_MATCH_ROUTINE = 'PATIENT_MATCH';

export interface WaitingForPatient {
  /** The match's tries so far (the next is this plus one). */
  readonly tryCount: number;
  /** The next try, stored date-time text, or null when it is due now. */
  readonly nextTry: string | null;
  /** The last attempt's reason ("No patient matches ..."), or null when its log gives none. */
  readonly reason: string | null;
}

interface RoutineState {
  readonly id?: number;
  readonly routine_name: string;
  readonly status: RoutineStatus;
  readonly try_count: number;
  readonly next_try_date_time: string | null;
}

/** Whether `routine` is a patient match waiting for its next try. */
export function isWaitingMatch(routine: RoutineState): boolean {
  return routine.routine_name === PATIENT_MATCH_ROUTINE && routine.status === 'RETRY';
}

/**
 * What the request waits for, given its overall status and routines (any order); null when it does not
 * wait for a patient. `reasonOf` gives the reason of the waiting routine's last attempt.
 */
export function waitingForPatientOf<R extends RoutineState>(
  overall: OverallStatus,
  routines: readonly R[],
  reasonOf: (routine: R) => string | null | undefined,
): WaitingForPatient | null {
  if (overall !== 'RUNNING') return null;
  const match = routines.find(isWaitingMatch);
  if (match === undefined) return null;
  return { tryCount: match.try_count, nextTry: match.next_try_date_time, reason: reasonOf(match) ?? null };
}

/** The try whose failure fails a routine for good under `steps` (the back-off's last `@N`). */
export function maxTriesOf(steps: readonly BackoffStep[]): number {
  return steps.reduce((max, step) => Math.max(max, step.belowTry), 1);
}

/**
 * The status in words: `Waiting for a patient: <reason>; try 3 of 20, next at <time>`, the time written by
 * `formatTime` (the site's zone in the console, stored text elsewhere).
 */
export function describeWaiting(
  waiting: WaitingForPatient,
  maxTries: number,
  formatTime: (stored: string) => string,
): string {
  return `Waiting for a patient: ${describeWaitingDetails(waiting, maxTries, formatTime)}`;
}

/** {@link describeWaiting} without its first words: `<reason>; try 3 of 20, next at <time>`. */
export function describeWaitingDetails(
  waiting: WaitingForPatient,
  maxTries: number,
  formatTime: (stored: string) => string,
): string {
  const reason =
    waiting.reason === null ? 'no reason recorded' : lowerFirst(waiting.reason.replace(/[.;]+$/, ''));
  const next = waiting.nextTry === null ? 'next now' : `next at ${formatTime(waiting.nextTry)}`;
  return `${reason}; try ${Math.min(waiting.tryCount + 1, maxTries)} of ${maxTries}, ${next}`;
}

function lowerFirst(text: string): string {
  return /^[A-Z][a-z]/.test(text) ? `${text.charAt(0).toLowerCase()}${text.slice(1)}` : text;
}

/**
 * The last error line of a redacted execution log without its class prefix (`Error: No patient ...` ->
 * `No patient ...`), or undefined.
 */
export function lastErrorMessage(redactedLog: string): string | undefined {
  const lines = redactedLog.split('\n');
  for (let i = lines.length - 1; i > 0; i -= 1) {
    const match = /^(?:FAILED: |[A-Za-z]*Error: )(.*)$/.exec(lines[i]!);
    if (match !== null) return match[1]!;
  }
  return undefined;
}

/**
 * The rule as an SQL condition on one request: it has a waiting patient match and no FAILED routine.
 * `routines` is the caller's select of the request's routines (correlated on the request).
 */
export function waitingForPatientCondition<DB, TB extends keyof DB>(
  eb: ExpressionBuilder<DB, TB>,
  hasRoutine: (where: { status: RoutineStatus; routineName?: string }) => Expression<SqlBool>,
): Expression<SqlBool> {
  return eb.and([
    hasRoutine({ status: 'RETRY', routineName: PATIENT_MATCH_ROUTINE }),
    eb.not(hasRoutine({ status: 'FAILED' })),
  ]);
}
