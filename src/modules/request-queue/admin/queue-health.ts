/**
 * Live queue counts and worker health for the console, and the values its request list offers.
 */
import type { Kysely } from 'kysely';
import type { DB, RoutineStatus } from '../../../db/schema.ts';
import { PATIENT_MATCH_ROUTINE } from '../status/waiting.ts';

/** Live routine counts are exact up to this many per queue and status, then shown as "at least". */
export const COUNT_CAP = 100_000;

export interface QueueHealth {
  readonly queue: string;
  /** Routines per pending or stuck status (NEW, RETRY, FAILED, PAUSE), capped at {@link COUNT_CAP}. */
  readonly counts: Readonly<Record<'NEW' | 'RETRY' | 'FAILED' | 'PAUSE', number>>;
  /** Requests of this queue waiting for a patient (`status/waiting.ts`; a part of RETRY), capped too. */
  readonly waitingForPatient: number;
  readonly totalExecuted: number;
  readonly totalSucceeded: number;
  readonly totalFailed: number;
  /** Routines the worker processes reported running at their last counter flush. */
  readonly activeRoutines: number;
  readonly maximumActiveThreads: number;
  /** When a worker last claimed a routine of this queue, and of which request. */
  readonly lastClaimAt: string | null;
  readonly lastClaimRequestId: number | null;
}

export interface WorkerHealth {
  readonly queues: readonly QueueHealth[];
  /** The newest attempt of any routine (its execution row). */
  readonly lastExecution:
    { readonly at: string; readonly status: string; readonly routineId: number } | undefined;
}

const LIVE_STATUSES = ['NEW', 'RETRY', 'FAILED', 'PAUSE'] as const;

/**
 * The routines that make their requests wait for a patient (`status/waiting.ts`): RETRY patient matches of
 * requests with no FAILED routine; the caller adds its queue condition, count or grouping.
 */
export function waitingForPatientRoutines(db: Kysely<DB>) {
  return db
    .selectFrom('request_routine as w')
    .where('w.routine_name', '=', PATIENT_MATCH_ROUTINE)
    .where('w.status', '=', 'RETRY')
    .where((eb) =>
      eb.not(
        eb.exists(
          eb
            .selectFrom('request_routine as f')
            .select('f.id')
            .whereRef('f.request_id', '=', 'w.request_id')
            .where('f.status', '=', 'FAILED'),
        ),
      ),
    );
}

/**
 * Counts per queue and pending or stuck status, read from the (queue, status, id) index alone (covering)
 * with a cap so that a backlog of millions still answers at once; COMPLETE and VOID totals come from the counters the
 * workers keep on `request_queue` (counting them would read most of the table).
 */
export async function readWorkerHealth(db: Kysely<DB>): Promise<WorkerHealth> {
  const queues = await db.selectFrom('request_queue').selectAll().orderBy('request_queue').execute();
  const capped = (queue: string, status: RoutineStatus) =>
    db
      .selectFrom(
        db
          .selectFrom('request_routine')
          .select('id')
          .where('execute_request_queue', '=', queue)
          .where('status', '=', status)
          .limit(COUNT_CAP)
          .as('capped'),
      )
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow()
      .then((row) => Number(row.n));
  const health = await Promise.all(
    queues.map(async (q): Promise<QueueHealth> => {
      const [counts, waiting] = await Promise.all([
        Promise.all(LIVE_STATUSES.map((status) => capped(q.request_queue, status))),
        db
          .selectFrom(
            waitingForPatientRoutines(db)
              .select('w.id')
              .where('w.execute_request_queue', '=', q.request_queue)
              .limit(COUNT_CAP)
              .as('capped'),
          )
          .select((eb) => eb.fn.countAll<number>().as('n'))
          .executeTakeFirstOrThrow(),
      ]);
      return {
        queue: q.request_queue,
        counts: { NEW: counts[0]!, RETRY: counts[1]!, FAILED: counts[2]!, PAUSE: counts[3]! },
        waitingForPatient: Number(waiting.n),
        totalExecuted: q.total_execute_count,
        totalSucceeded: q.total_success_count,
        totalFailed: q.total_fail_count,
        activeRoutines: q.total_active_thread_count,
        maximumActiveThreads: q.maximum_active_threads,
        lastClaimAt: q.last_thread_spawn_date,
        lastClaimRequestId: q.last_thread_spawn_request_id,
      };
    }),
  );
  const last = await db
    .selectFrom('request_routine_execution')
    .select(['execution_date_time', 'status', 'request_routine_id'])
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirst();
  return {
    queues: health,
    lastExecution:
      last === undefined
        ? undefined
        : { at: last.execution_date_time, status: last.status, routineId: last.request_routine_id },
  };
}

export interface QueueChoices {
  readonly requestTypes: readonly string[];
  readonly queues: readonly string[];
  readonly routineNames: readonly string[];
}

/** The values the list's selects offer (small reference tables). */
export async function readQueueChoices(db: Kysely<DB>): Promise<QueueChoices> {
  const [types, queues, names] = await Promise.all([
    db.selectFrom('request_type').select('request_type').orderBy('request_type').execute(),
    db.selectFrom('request_queue').select('request_queue').orderBy('request_queue').execute(),
    db.selectFrom('routine_library').select('routine_name').orderBy('routine_name').execute(),
  ]);
  return {
    requestTypes: types.map((t) => t.request_type),
    queues: queues.map((q) => q.request_queue),
    routineNames: names.map((n) => n.routine_name),
  };
}
