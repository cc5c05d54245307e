/**
 * Queue SQL shared by both dialects: the eligibility rule of reference 9.3, recording an attempt (9.4),
 * chaining (9.6), the queue counters and the admin actions of the CLI. Claiming itself differs per dialect
 * (row locks on PostgreSQL): see `claim.queries.postgres.ts` / `claim.queries.sqlite.ts`.
 */
import type { ExpressionBuilder, Kysely } from 'kysely';
import { sql } from 'kysely';
import type { DB, Row, RoutineStatus } from '../../db/schema.ts';

export type ClaimedRoutine = Row<'request_routine'> & { readonly request_type: string };

type RoutineScope = ExpressionBuilder<DB & { rr: DB['request_routine'] }, 'rr'>;

/**
 * Reference 9.3: on `queue`, NEW or RETRY, next try null or reached, and no sibling of the same request
 * with a lower `execute_sequence` outside COMPLETE/VOID (strict per-request order). The routine table must
 * be aliased `rr`.
 */
export function isEligible(eb: RoutineScope, queue: string, nowText: string) {
  return eb.and([
    eb('rr.execute_request_queue', '=', queue),
    eb('rr.status', 'in', ['NEW', 'RETRY']),
    eb.or([eb('rr.next_try_date_time', 'is', null), eb('rr.next_try_date_time', '<=', nowText)]),
    eb.not(
      eb.exists(
        eb
          .selectFrom('request_routine as sibling')
          .select(sql.lit(1).as('one'))
          .whereRef('sibling.request_id', '=', 'rr.request_id')
          .whereRef('sibling.execute_sequence', '<', 'rr.execute_sequence')
          .where('sibling.status', 'not in', ['COMPLETE', 'VOID']),
      ),
    ),
  ]);
}

/** True when routine `id` is still eligible, read with a fresh statement after the claim's locks are held. */
export async function isStillEligible(
  db: Kysely<DB>,
  id: number,
  queue: string,
  nowText: string,
): Promise<boolean> {
  const row = await db
    .selectFrom('request_routine as rr')
    .select('rr.id')
    .where('rr.id', '=', id)
    .where((eb) => isEligible(eb, queue, nowText))
    .executeTakeFirst();
  return row !== undefined;
}

export interface AttemptRecord {
  readonly routineId: number;
  readonly status: RoutineStatus;
  readonly tryCount: number;
  readonly nextTry: string | null;
  readonly logText: string;
  readonly executedAt: string;
}

/**
 * Writes the outcome of one attempt: the routine's status, try count and next try, and its
 * `request_routine_execution` row. On success this runs inside the routine's own transaction.
 */
export async function recordAttempt(db: Kysely<DB>, attempt: AttemptRecord): Promise<void> {
  await db
    .updateTable('request_routine')
    .set({
      status: attempt.status,
      try_count: attempt.tryCount,
      next_try_date_time: attempt.nextTry,
    })
    .where('id', '=', attempt.routineId)
    .execute();
  await db
    .insertInto('request_routine_execution')
    .values({
      request_routine_id: attempt.routineId,
      log_text: attempt.logText,
      execution_date_time: attempt.executedAt,
      status: attempt.status,
      try_number: attempt.tryCount,
    })
    .execute();
}

/**
 * Adds routine `name` to request `requestId` at `sequence` (or the request's highest sequence + 10, fixing
 * D66), or resets it when the request already has a routine of that name (reference 9.6). Throws when the
 * name is not in `routine_library`.
 */
export async function addRequestRoutine(
  db: Kysely<DB>,
  target: { requestId: number; queue: string; name: string; sequence: 'append' | 'priority' },
): Promise<void> {
  const known = await db
    .selectFrom('routine_library')
    .select('routine_name')
    .where('routine_name', '=', target.name)
    .executeTakeFirst();
  if (known === undefined) throw new Error(`Routine ${target.name} is not in routine_library`);
  const existing = await db
    .selectFrom('request_routine')
    .select('id')
    .where('request_id', '=', target.requestId)
    .where('routine_name', '=', target.name)
    .orderBy('id')
    .executeTakeFirst();
  if (existing !== undefined) {
    await db
      .updateTable('request_routine')
      .set({
        status: 'NEW',
        try_count: 0,
        next_try_date_time: null,
        hash_code: null,
        ...(target.sequence === 'priority' ? { execute_sequence: 1 } : {}),
      })
      .where('id', '=', existing.id)
      .execute();
    return;
  }
  let sequence = 1;
  if (target.sequence === 'append') {
    const top = await db
      .selectFrom('request_routine')
      .select((eb) => eb.fn.max('execute_sequence').as('top'))
      .where('request_id', '=', target.requestId)
      .executeTakeFirst();
    sequence = Number(top?.top ?? 0) + 10;
  }
  await db
    .insertInto('request_routine')
    .values({
      request_id: target.requestId,
      execute_request_queue: target.queue,
      status: 'NEW',
      routine_name: target.name,
      try_count: 0,
      next_try_date_time: null,
      execute_sequence: sequence,
      hash_code: null,
    })
    .execute();
}

/** Reference 9.6 `voidAllNewRoutines`: NEW/RETRY siblings not named `current` become VOID. */
export async function voidNewRoutines(db: Kysely<DB>, requestId: number, current: string): Promise<void> {
  await db
    .updateTable('request_routine')
    .set({ status: 'VOID' })
    .where('request_id', '=', requestId)
    .where('status', 'in', ['NEW', 'RETRY'])
    .where('routine_name', '<>', current)
    .execute();
}

export interface QueueCounters {
  success: number;
  fail: number;
  active: number;
  lastRequestId: number | null;
  lastSpawnAt: string | null;
}

/** Adds a worker's counts to its queue row (reference 9.4, "on exit"), in one short statement. */
export async function addQueueCounters(
  db: Kysely<DB>,
  queue: string,
  counters: QueueCounters,
): Promise<void> {
  await db
    .updateTable('request_queue')
    .set((eb) => ({
      total_success_count: eb('total_success_count', '+', counters.success),
      total_fail_count: eb('total_fail_count', '+', counters.fail),
      total_execute_count: eb('total_execute_count', '+', counters.success + counters.fail),
      total_active_thread_count: counters.active,
      ...(counters.lastRequestId === null
        ? {}
        : {
            last_thread_spawn_request_id: counters.lastRequestId,
            last_thread_spawn_date: counters.lastSpawnAt,
          }),
    }))
    .where('request_queue', '=', queue)
    .execute();
}

/** The queues the worker serves: `names`, or every queue when empty. */
export async function findQueues(db: Kysely<DB>, names: readonly string[]): Promise<Row<'request_queue'>[]> {
  let query = db.selectFrom('request_queue').selectAll().orderBy('request_queue');
  if (names.length > 0) query = query.where('request_queue', 'in', names);
  return query.execute();
}

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

/** `queue retry`: FAILED/RETRY routines of the request back to NEW, try count 0, next try null. */
export async function retryRequestRoutines(db: Kysely<DB>, requestId: number): Promise<number> {
  const result = await db
    .updateTable('request_routine')
    .set({ status: 'NEW', try_count: 0, next_try_date_time: null })
    .where('request_id', '=', requestId)
    .where('status', 'in', ['FAILED', 'RETRY'])
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}

/** `queue void`: NEW/RETRY routines of the request to VOID. */
export async function voidRequestRoutines(db: Kysely<DB>, requestId: number): Promise<number> {
  const result = await db
    .updateTable('request_routine')
    .set({ status: 'VOID' })
    .where('request_id', '=', requestId)
    .where('status', 'in', ['NEW', 'RETRY'])
    .executeTakeFirst();
  return Number(result.numUpdatedRows);
}
