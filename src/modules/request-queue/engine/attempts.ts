/**
 * Attempts: what one run of a claimed routine did, how it is recorded (status, try count, next try, the
 * execution log) and the start marks that let the next claim see an attempt that never finished.
 *
 * An attempt that never finishes (the process is killed or crashes) leaves its start mark behind; the
 * next claim of that routine records it as a failed try (with the back-off) instead of running it, and
 * the third unfinished attempt in a row fails the routine for good. Marks are written for the whole batch
 * at once, so a crash counts a try for every routine of its batch that had not been recorded. The marks
 * commit without waiting for the disk (`DialectAdapter.commitWithoutFlush`): a crash of the process keeps
 * them (the database has them), and only a crash of the database server or the machine can lose them,
 * which loses the batch's own uncommitted transaction too, so its routines run again as they were and no
 * outcome is ever recorded without its mark having been seen; the batch's durable commit flushes the
 * marks with it.
 */
import type { Kysely } from 'kysely';
import { formatDateTime } from '../../../db/database.ts';
import { replaceUnstorableCharacters } from '../../../db/schema-profile.ts';
import type { DB, RoutineStatus } from '../../../db/schema.ts';
import type { AttemptRecord, ChainTarget, ClaimedRoutine, RoutineAttemptTable } from './claim.queries.ts';
import {
  clearAttemptMarkers,
  findAttemptMarkers,
  keepUnfinishedCount,
  markAttemptsStarted,
} from './claim.queries.ts';
import type { AuditStamp } from '../../attachment-data/index.ts';
import type { RequestDetailsPatch } from './request-details.ts';
import type { RoutineDefinition } from './routine-catalog.ts';
import { PermanentRoutineError } from './routine-catalog.ts';
import type { EngineRuntime } from './runtime.ts';
import { retryDelayMs } from './runtime.ts';

/** The longest execution log stored, in bytes (OpenEyes's `request_routine_execution.log_text`). */
const MAX_LOG_BYTES = 65_535;

/** Unfinished attempts in a row after which a routine fails for good, whatever its tries left. */
export const MAX_UNFINISHED_ATTEMPTS = 3;

export type StepOutcome =
  | { readonly kind: 'idle' }
  /** A candidate was taken or changed by another worker between the claim and the re-check. */
  | { readonly kind: 'contended' }
  /** Its routine lock was held by another worker's batch: put back untried, for a later batch. */
  | { readonly kind: 'deferred' }
  | {
      readonly kind: 'ran';
      readonly routineId: number;
      readonly requestId: number;
      readonly routineName: string;
      readonly status: RoutineStatus;
      readonly tryCount: number;
      readonly nextTry: string | null;
      readonly error?: string;
    };

/** What one attempt did, besides its status: the engine acts on it after the commit. */
export interface AttemptEffects {
  /** It added or reset routines of its request (other workers should be woken). */
  hasChained: boolean;
  /** Its chaining calls not yet written, in order: the batch writes them with its others'. */
  readonly chains: ChainTarget[];
  /** Its `REQUEST_DATA` patches, in order: the batch mirrors them into `request_details` with its others'. */
  readonly details: RequestDetailsPatch[];
  /**
   * Its request's `REQUEST_DATA` as it left it, not yet written: the batch writes every successful
   * attempt's in one statement (a failed attempt's is dropped with it). Absent: unchanged, or written.
   */
  requestData?: { readonly value: Record<string, unknown>; readonly stamp: AuditStamp };
}

export interface Attempt {
  readonly claimed: ClaimedRoutine;
  readonly record: AttemptRecord;
  readonly failure: unknown;
  readonly startedAt: number;
  readonly effects: AttemptEffects;
  /** Set when this records an attempt that never finished: how many in a row, this one included. */
  readonly unfinishedCount?: number;
}

/** Not an attempt's outcome: what a batch does with each claimed routine. */
export type BatchEntry = Attempt | 'contended' | 'deferred';

/** A claimed routine to run, with the unfinished attempts in a row before it. */
export interface Runnable {
  readonly routine: ClaimedRoutine;
  readonly unfinishedBefore: number;
}

/** A claimed routine whose last attempt never finished, with its start mark. */
export interface Unfinished {
  readonly routine: ClaimedRoutine;
  readonly marker: RoutineAttemptTable;
}

/** An earlier attempt of the routine never finished; it counts as a failed try. */
class UnfinishedAttemptError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UnfinishedAttemptError';
  }
}

/**
 * Splits claimed routines into those to run and those whose last attempt never finished, and commits
 * the start marks of the former on their own (without waiting for the disk: see the top of this file),
 * before any of them runs.
 */
export async function startAttempts(
  rt: EngineRuntime,
  reader: Kysely<DB>,
  claimed: readonly ClaimedRoutine[],
): Promise<{ runnable: Runnable[]; unfinished: Unfinished[] }> {
  const markers = await findAttemptMarkers(
    reader,
    claimed.map((c) => c.id),
  );
  const runnable: Runnable[] = [];
  const unfinished: Unfinished[] = [];
  for (const routine of claimed) {
    const marker = markers.get(routine.id);
    if (marker !== undefined && marker.started_date !== null) unfinished.push({ routine, marker });
    else runnable.push({ routine, unfinishedBefore: marker?.unfinished_count ?? 0 });
  }
  await markAttemptsStarted(
    rt.database,
    runnable.map(({ routine, unfinishedBefore }) => ({
      routineId: routine.id,
      tryNumber: routine.try_count + 1,
      unfinishedCount: unfinishedBefore,
    })),
    formatDateTime(rt.now()),
    rt.workerName,
  );
  return { runnable, unfinished };
}

/** Records the attempt that a start mark shows never finished: a failed try. */
export function recordUnfinished(rt: EngineRuntime, { routine, marker }: Unfinished): Attempt {
  const unfinishedCount = marker.unfinished_count + 1;
  const failure =
    unfinishedCount >= MAX_UNFINISHED_ATTEMPTS
      ? new PermanentRoutineError(
          `Attempt ${marker.try_number} never finished: ${unfinishedCount} attempts in a row ended with their worker (${marker.worker}) stopping mid-way (killed, crashed or out of memory)`,
        )
      : new UnfinishedAttemptError(
          `Attempt ${marker.try_number} never finished: its worker (${marker.worker}) stopped mid-way (killed, crashed or out of memory)`,
        );
  const definition = rt.catalog.get(routine.routine_name);
  return {
    claimed: routine,
    record: outcomeOf(rt, routine, definition, failure, [rt.workerLine]),
    failure,
    startedAt: Date.now(),
    effects: { hasChained: false, chains: [], details: [] },
    unfinishedCount,
  };
}

/**
 * After a batch's transaction failed as a whole (a deadlock, a lost connection: not one of its routines,
 * whose failures its savepoints keep), its routines are as they were before the claim; their start
 * marks go too, so that the next claim does not count those attempts as never finished (a worker that
 * died); a routine whose earlier attempts never finished keeps their count.
 */
export async function forgetAttempts(rt: EngineRuntime, runnable: readonly Runnable[]): Promise<void> {
  try {
    await clearAttemptMarkers(
      rt.db,
      runnable.filter((r) => r.unfinishedBefore === 0).map((r) => r.routine.id),
    );
    // Earlier attempts that did die still count.
    for (const r of runnable.filter((entry) => entry.unfinishedBefore > 0))
      await keepUnfinishedCount(rt.db, r.routine.id, r.unfinishedBefore);
  } catch {
    // The database is unreachable: the marks stay and count, as after a crash.
  }
}

/**
 * Puts back the start marks of `marked` routines that `ran` does not hold (as before they were set),
 * clearing them in one statement with the marks of `alsoClear`.
 */
export async function unmarkNotRun(
  trx: Kysely<DB>,
  marked: readonly Runnable[],
  ran: readonly Attempt[],
  alsoClear: readonly number[] = [],
): Promise<void> {
  const ranIds = new Set(ran.map((a) => a.claimed.id));
  const notRun = marked.filter((m) => !ranIds.has(m.routine.id));
  await clearAttemptMarkers(trx, [
    ...notRun.filter((m) => m.unfinishedBefore === 0).map((m) => m.routine.id),
    ...alsoClear,
  ]);
  for (const m of notRun.filter((m) => m.unfinishedBefore > 0))
    await keepUnfinishedCount(trx, m.routine.id, m.unfinishedBefore);
}

/** The record of an attempt of `claimed` that ended with `failure` (undefined: it succeeded). */
export function outcomeOf(
  rt: EngineRuntime,
  claimed: ClaimedRoutine,
  definition: RoutineDefinition | undefined,
  failure: unknown,
  logLines: readonly string[],
): AttemptRecord {
  const tryCount = claimed.try_count + 1;
  const executedAt = formatDateTime(rt.now());
  const maxCodePoint = rt.database.schema.maxTextCodePoint;
  if (failure === undefined) {
    return {
      routineId: claimed.id,
      status: 'COMPLETE',
      tryCount,
      nextTry: null,
      logText: storableLog(logLines.join('\n'), maxCodePoint),
      executedAt,
    };
  }
  const isFinal = isPermanentFailure(failure) || definition?.retry === 'never';
  const delayMs = isFinal ? undefined : retryDelayMs(tryCount, rt.config.queueRetryBackoff);
  return {
    routineId: claimed.id,
    status: delayMs === undefined ? 'FAILED' : 'RETRY',
    tryCount,
    nextTry: delayMs === undefined ? null : formatDateTime(new Date(rt.now().getTime() + delayMs)),
    logText: storableLog([...logLines, errorText(failure)].join('\n'), maxCodePoint),
    executedAt,
  };
}

/** After the commit: counters, one log line, the outcome. */
export function reportAttempt(
  rt: EngineRuntime,
  { claimed, record, failure, startedAt }: Attempt,
): StepOutcome {
  rt.counters.count(claimed.execute_request_queue, {
    status: record.status,
    requestId: claimed.request_id,
    activeCount: rt.activeCount,
    nowText: formatDateTime(rt.now()),
  });
  rt.logger?.info(
    {
      routineId: claimed.id,
      requestId: claimed.request_id,
      routine: claimed.routine_name,
      status: record.status,
      tryCount: record.tryCount,
      ms: Date.now() - startedAt,
    },
    'routine attempt',
  );
  return {
    kind: 'ran',
    routineId: claimed.id,
    requestId: claimed.request_id,
    routineName: claimed.routine_name,
    status: record.status,
    tryCount: record.tryCount,
    nextTry: record.nextTry,
    ...(failure === undefined ? {} : { error: messageOf(failure) }),
  };
}

/**
 * An execution log as the database can store it: at most {@link MAX_LOG_BYTES} (OpenEyes's
 * `log_text` is a 64 KiB `text`), the end kept, since an error comes last; characters the database
 * cannot store replaced.
 */
function storableLog(text: string, maxCodePoint: number): string {
  const storable = replaceUnstorableCharacters(text, maxCodePoint);
  if (Buffer.byteLength(storable) <= MAX_LOG_BYTES) return storable;
  const marker = '(log cut: its start is left out)\n';
  const tail = Buffer.from(storable).subarray(-(MAX_LOG_BYTES - Buffer.byteLength(marker)));
  // A cut inside a character leaves replacement characters at the start; drop them.
  return marker + tail.toString('utf8').replace(/^\uFFFD+/, '');
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Whether a retry would fail the same way: the routine's own verdict. */
function isPermanentFailure(error: unknown): boolean {
  return error instanceof PermanentRoutineError;
}

function errorText(error: unknown): string {
  if (error instanceof PermanentRoutineError) return `FAILED: ${error.message}`;
  if (error instanceof UnfinishedAttemptError) return error.message;
  return error instanceof Error ? (error.stack ?? error.message) : String(error);
}
