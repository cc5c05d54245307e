/**
 * Request admin (reference 9.7): the filtered request list with each request's overall status, a
 * request's routines and executions, live queue counts and worker health, and the admin actions (retry a
 * routine, void a routine, run a whole request again).
 *
 * Actions and the worker never race:
 * - only routines the worker does not run are changed in a way the worker could overwrite: a retry takes
 *   a FAILED, VOID or PAUSE routine back to NEW/RETRY; a re-queue resets the routines that are not
 *   pending (NEW/RETRY ones are left as they are); a void makes a pending routine ineligible, which the
 *   worker re-checks before it runs a claimed routine;
 * - every action runs in a write transaction that first takes the request's locks as the worker does
 *   (`lockRequestRows`: the request and routine rows through the adapter's `lockRowsSkipLocked`, so a
 *   request a worker holds answers "busy" at once; with a single writer the write transaction is the
 *   database-wide lock the worker's batch also takes);
 * - under those locks the routine is read again and compared with the version the operator saw: any
 *   difference answers "changed meanwhile" and nothing is written (never a lost update).
 */
import { createHash } from 'node:crypto';
import type { ExpressionBuilder, Kysely, SelectQueryBuilder, Transaction, Updateable } from 'kysely';
import { sql } from 'kysely';
import type { Database } from '../../../db/database.ts';
import type { DialectAdapter } from '../../../db/dialect.ts';
import type { DB, RoutineStatus } from '../../../db/schema.ts';
import { scanPage } from '../../../db/window-scan.ts';
import type { OverallStatus } from '../status/status.ts';
import { maskSecrets } from '../status/status.ts';

export const ROUTINE_STATUSES: readonly RoutineStatus[] = [
  'NEW',
  'RETRY',
  'COMPLETE',
  'FAILED',
  'VOID',
  'PAUSE',
];

/** Reference 9.7's list filters on the overall state of a request. */
export type OverallFilter = 'complete' | 'incomplete' | 'failed';

export interface RequestListFilter {
  readonly overall?: OverallFilter;
  /** Some routine was tried more than once. */
  readonly isRetried?: boolean;
  readonly routineName?: string;
  readonly routineStatus?: RoutineStatus;
  readonly requestType?: string;
  /** Some routine runs on this queue. */
  readonly queue?: string;
  /** A `request_details` row with this name (and this exact value, when given). */
  readonly detailName?: string;
  readonly detailValue?: string;
  /** `request.created_date` from (inclusive) and to (exclusive), stored `YYYY-MM-DD HH:MM:SS` UTC text. */
  readonly createdFrom?: string;
  readonly createdTo?: string;
}

/** Reference 9.7 `getRequestStatus`: the first FAILED routine, else the first NEW/RETRY one (id order). */
export interface OverallState {
  readonly status: OverallStatus;
  readonly routineName: string | null;
  readonly tryCount: number | null;
}

export interface RequestListRow {
  readonly id: number;
  readonly requestType: string;
  readonly systemMessage: string;
  readonly createdDate: string;
  readonly overall: OverallState;
  readonly routineCount: number;
}

export interface RequestListPage {
  readonly rows: readonly RequestListRow[];
  /** The next page lists requests below this id; undefined at the end. */
  readonly nextBefore: number | undefined;
  /** The page stopped at its time budget before it was full (the search goes on below `nextBefore`). */
  readonly isPartial: boolean;
}

export interface ListOptions {
  /** List requests with ids below this one. */
  readonly before?: number;
  readonly pageSize?: number;
  /** Time budget of one page in ms (see `window-scan.ts`); 0 = none. */
  readonly budgetMs?: number;
  /** Candidate requests read per window. */
  readonly windowSize?: number;
}

type RequestScope = ExpressionBuilder<DB & { r: DB['request'] }, 'r'>;
type IdQuery = SelectQueryBuilder<DB, keyof DB, { id: number }>;

/**
 * Statuses whose index rows drive the list: rare states are read from the (status, request_id) index
 * directly. COMPLETE and VOID are most of the table: with a routine name, that name's index drives.
 */
function drivingStatuses(filter: RequestListFilter): RoutineStatus[] | undefined {
  if (filter.routineStatus !== undefined) {
    const isCommon = filter.routineStatus === 'COMPLETE' || filter.routineStatus === 'VOID';
    return isCommon && filter.routineName !== undefined ? undefined : [filter.routineStatus];
  }
  if (filter.overall === 'failed') return ['FAILED'];
  if (filter.overall === 'incomplete') return ['NEW', 'RETRY'];
  return undefined;
}

/**
 * The candidate request ids below `before`, newest first, at most `limit`, read from the index that
 * serves the most selective filter given (routine status, retried routines, request detail name,
 * routine name, request type), else from the primary key.
 */
function candidates(
  db: Kysely<DB>,
  filter: RequestListFilter,
  before: number | undefined,
  limit: number,
): IdQuery {
  /** `query` below `before` on `column`, newest first, at most `limit`. */
  const window = (query: IdQuery, column: string): IdQuery =>
    (before === undefined ? query : query.where(sql.ref(column), '<', before))
      .orderBy(sql.ref(column), 'desc')
      .limit(limit);
  const routineIds = () => db.selectFrom('request_routine').select('request_id as id').distinct() as IdQuery;
  const statuses = drivingStatuses(filter);
  if (statuses !== undefined) {
    const branch = (status: RoutineStatus) => {
      let query = routineIds().where(sql.ref('status'), '=', status);
      if (filter.routineName !== undefined)
        query = query.where(sql.ref('routine_name'), '=', filter.routineName);
      return window(query, 'request_id');
    };
    if (statuses.length === 1) return branch(statuses[0]!);
    // One index range per status, each read in order and limited, then merged: an `in` list would make
    // the database sort every pending routine.
    const [first, ...rest] = statuses.map((status, i) =>
      db.selectFrom(branch(status).as(`s${i}`)).select('id'),
    );
    const merged = rest.reduce((union, next) => union.union(next), first!);
    return window(db.selectFrom(merged.as('merged')).select('id') as IdQuery, 'id');
  }
  // The literal predicate matches the partial index `request_routine_retried`.
  if (filter.isRetried === true) return window(routineIds().where(sql<boolean>`try_count > 1`), 'request_id');
  if (filter.detailName !== undefined) {
    const query = db
      .selectFrom('request_details')
      .select('request_id as id')
      .distinct()
      .where('name', '=', filter.detailName) as IdQuery;
    return window(query, 'request_id');
  }
  if (filter.routineName !== undefined)
    return window(routineIds().where(sql.ref('routine_name'), '=', filter.routineName), 'request_id');
  let query = db.selectFrom('request').select('id') as IdQuery;
  if (filter.requestType !== undefined) query = query.where(sql.ref('request_type'), '=', filter.requestType);
  return window(query, 'id');
}

/**
 * The ids of the driving index of {@link candidates} within [low, after), unordered, or undefined when
 * the primary key drives (the range on `request.id` is then the whole of it).
 */
function drivingIds(
  db: Kysely<DB>,
  filter: RequestListFilter,
  low: number,
  after: number | undefined,
): SelectQueryBuilder<DB, keyof DB, { id: number }> | undefined {
  const inRange = (query: IdQuery): IdQuery => {
    const bounded = query.where(sql.ref('request_id'), '>=', low);
    return after === undefined ? bounded : bounded.where(sql.ref('request_id'), '<', after);
  };
  const routineIds = () => db.selectFrom('request_routine').select('request_id as id') as IdQuery;
  const statuses = drivingStatuses(filter);
  if (statuses !== undefined) {
    let query = routineIds().where(sql.ref('status'), 'in', statuses);
    if (filter.routineName !== undefined)
      query = query.where(sql.ref('routine_name'), '=', filter.routineName);
    return inRange(query);
  }
  if (filter.isRetried === true) return inRange(routineIds().where(sql<boolean>`try_count > 1`));
  if (filter.detailName !== undefined) {
    return inRange(
      db.selectFrom('request_details').select('request_id as id').where('name', '=', filter.detailName),
    );
  }
  if (filter.routineName !== undefined)
    return inRange(routineIds().where(sql.ref('routine_name'), '=', filter.routineName));
  return undefined;
}

/** Every filter as a condition on the request `r` (the driving one included: it costs an index probe). */
function matchesFilter(eb: RequestScope, filter: RequestListFilter) {
  const routines = () =>
    eb.selectFrom('request_routine as x').select(sql.lit(1).as('one')).whereRef('x.request_id', '=', 'r.id');
  const conditions = [];
  if (filter.overall === 'complete') {
    conditions.push(eb.not(eb.exists(routines().where('x.status', 'in', ['NEW', 'RETRY', 'FAILED']))));
  } else if (filter.overall === 'failed') {
    // A FAILED routine with no pending routine before it (reference 9.7).
    conditions.push(
      eb.exists(
        eb
          .selectFrom('request_routine as f')
          .select(sql.lit(1).as('one'))
          .whereRef('f.request_id', '=', 'r.id')
          .where('f.status', '=', 'FAILED')
          .where((inner) =>
            inner.not(
              inner.exists(
                inner
                  .selectFrom('request_routine as p')
                  .select(sql.lit(1).as('one'))
                  .whereRef('p.request_id', '=', 'r.id')
                  .where('p.status', 'in', ['NEW', 'RETRY'])
                  .whereRef('p.execute_sequence', '<', 'f.execute_sequence'),
              ),
            ),
          ),
      ),
    );
  } else if (filter.overall === 'incomplete') {
    // A pending routine with no FAILED routine before it: it can still run.
    conditions.push(
      eb.exists(
        eb
          .selectFrom('request_routine as p')
          .select(sql.lit(1).as('one'))
          .whereRef('p.request_id', '=', 'r.id')
          .where('p.status', 'in', ['NEW', 'RETRY'])
          .where((inner) =>
            inner.not(
              inner.exists(
                inner
                  .selectFrom('request_routine as f')
                  .select(sql.lit(1).as('one'))
                  .whereRef('f.request_id', '=', 'r.id')
                  .where('f.status', '=', 'FAILED')
                  .whereRef('f.execute_sequence', '<', 'p.execute_sequence'),
              ),
            ),
          ),
      ),
    );
  }
  if (filter.isRetried === true) conditions.push(eb.exists(routines().where(sql<boolean>`x.try_count > 1`)));
  if (filter.routineName !== undefined || filter.routineStatus !== undefined) {
    let query = routines();
    if (filter.routineName !== undefined) query = query.where('x.routine_name', '=', filter.routineName);
    if (filter.routineStatus !== undefined) query = query.where('x.status', '=', filter.routineStatus);
    conditions.push(eb.exists(query));
  }
  if (filter.queue !== undefined)
    conditions.push(eb.exists(routines().where('x.execute_request_queue', '=', filter.queue)));
  if (filter.requestType !== undefined) conditions.push(eb('r.request_type', '=', filter.requestType));
  if (filter.detailName !== undefined) {
    let query = eb
      .selectFrom('request_details as d')
      .select(sql.lit(1).as('one'))
      .whereRef('d.request_id', '=', 'r.id')
      .where('d.name', '=', filter.detailName);
    if (filter.detailValue !== undefined) query = query.where('d.value', '=', filter.detailValue);
    conditions.push(eb.exists(query));
  }
  if (filter.createdFrom !== undefined) conditions.push(eb('r.created_date', '>=', filter.createdFrom));
  if (filter.createdTo !== undefined) conditions.push(eb('r.created_date', '<', filter.createdTo));
  return eb.and(conditions);
}

/** Reference 9.7 over routines in id order. */
export function overallStateOf(
  routines: readonly { status: RoutineStatus; routine_name: string; try_count: number }[],
): OverallState {
  const failed = routines.find((r) => r.status === 'FAILED');
  if (failed !== undefined)
    return { status: 'FAILED', routineName: failed.routine_name, tryCount: failed.try_count };
  const pending = routines.find((r) => r.status === 'NEW' || r.status === 'RETRY');
  if (pending !== undefined)
    return { status: 'RUNNING', routineName: pending.routine_name, tryCount: pending.try_count };
  return { status: 'COMPLETE', routineName: null, tryCount: null };
}

/** One page of requests matching `filter`, newest first (keyset paging by id). */
export async function listRequests(
  db: Kysely<DB>,
  filter: RequestListFilter,
  options: ListOptions = {},
): Promise<RequestListPage> {
  const windowSize = options.windowSize ?? 1000;
  type Listed = { id: number; request_type: string; system_message: string; created_date: string };
  const page = await scanPage<Listed, number>({
    pageSize: options.pageSize ?? 50,
    budgetMs: options.budgetMs ?? 30,
    start: options.before,
    keyOf: (row) => row.id,
    readWindow: async (after, limit) => {
      // The window is the key range [low, after) holding the next `windowSize` candidates: its lower
      // bound comes from the driving index alone, then the rows are read by range with every filter.
      const bounds = await db
        .selectFrom(candidates(db, filter, after, windowSize).as('c'))
        .select((eb) => [eb.fn.min('c.id').as('low'), eb.fn.countAll<number>().as('n')])
        .executeTakeFirstOrThrow();
      if (bounds.low === null) return { rows: [], lastKey: undefined, isExhausted: true };
      const low = Number(bounds.low);
      let query = db
        .selectFrom('request as r')
        .select(['r.id', 'r.request_type', 'r.system_message', 'r.created_date'])
        .where('r.id', '>=', low);
      if (after !== undefined) query = query.where('r.id', '<', after);
      const driver = drivingIds(db, filter, low, after);
      if (driver !== undefined) query = query.where('r.id', 'in', driver);
      const rows = await query
        .where((eb) => matchesFilter(eb, filter))
        .orderBy('r.id', 'desc')
        .limit(limit)
        .execute();
      return { rows, lastKey: low, isExhausted: Number(bounds.n) < windowSize };
    },
  });
  const ids = page.rows.map((r) => r.id);
  const routines =
    ids.length === 0
      ? []
      : await db
          .selectFrom('request_routine')
          .select(['request_id', 'routine_name', 'status', 'try_count'])
          .where('request_id', 'in', ids)
          .orderBy('request_id')
          .orderBy('id')
          .execute();
  const byRequest = new Map<number, typeof routines>();
  for (const routine of routines) {
    const list = byRequest.get(routine.request_id);
    if (list === undefined) byRequest.set(routine.request_id, [routine]);
    else list.push(routine);
  }
  return {
    rows: page.rows.map((r) => ({
      id: r.id,
      requestType: r.request_type,
      systemMessage: r.system_message,
      createdDate: r.created_date,
      overall: overallStateOf(byRequest.get(r.id) ?? []),
      routineCount: byRequest.get(r.id)?.length ?? 0,
    })),
    nextBefore: page.next,
    isPartial: page.isPartial,
  };
}

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

function requestVersion(
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
  return {
    id: request.id,
    requestType: request.request_type,
    systemMessage: request.system_message,
    overrideQueue: request.request_override_default_queue,
    createdDate: request.created_date,
    overall: overallStateOf(routines),
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
          logText: (e.log_text ?? '').split('\n').map(maskSecrets).join('\n'),
        })),
    })),
    details,
    version: requestVersion(routines),
  };
}

/** What an admin action did. */
export type AdminOutcome =
  | { readonly kind: 'done'; readonly requestId: number; readonly routineIds: readonly number[] }
  /** The routine (or request) differs from the version the operator saw; nothing was written. */
  | { readonly kind: 'changed'; readonly requestId: number; readonly current: string }
  /** A worker holds the request right now; nothing was written. */
  | { readonly kind: 'busy'; readonly requestId: number }
  /** The action does not apply to the routine's status; nothing was written. */
  | { readonly kind: 'refused'; readonly requestId: number; readonly reason: string }
  | { readonly kind: 'not_found' };

/** Statuses a retry starts from: states the worker never claims, so it cannot be running them. */
export const RETRYABLE: readonly RoutineStatus[] = ['FAILED', 'VOID', 'PAUSE'];
/** Statuses a void applies to. */
export const VOIDABLE: readonly RoutineStatus[] = ['NEW', 'RETRY', 'FAILED', 'PAUSE'];

/**
 * Takes the locks the worker takes on a request before it runs one of its routines: the request row and
 * its routine rows, skipping rows another transaction holds (with the database's single writer, the write
 * transaction itself is that lock and nothing is skipped). Returns false when a worker holds any of them,
 * so that the page answers "busy" at once instead of waiting for a routine that may run for minutes.
 */
async function lockRequestRows(
  trx: Transaction<DB>,
  dialect: DialectAdapter,
  requestId: number,
): Promise<boolean> {
  const request = await dialect
    .lockRowsSkipLocked(trx.selectFrom('request').select('id').where('id', '=', requestId))
    .execute();
  if (request.length === 0) return false;
  const [locked, all] = await Promise.all([
    dialect
      .lockRowsSkipLocked(trx.selectFrom('request_routine').select('id').where('request_id', '=', requestId))
      .execute(),
    trx
      .selectFrom('request_routine')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('request_id', '=', requestId)
      .executeTakeFirstOrThrow(),
  ]);
  return locked.length === Number(all.n);
}

/** Thrown inside the transaction when a lock is held, so that the transaction is rolled back. */
class BusyMarker extends Error {}

/** Runs `action` in a write transaction holding the request's locks; 'busy' when a worker holds them. */
async function withRequestLocks<T>(
  database: Database,
  requestId: number,
  action: (trx: Transaction<DB>) => Promise<T>,
): Promise<T | 'busy'> {
  try {
    return await database.writeTransaction(async (trx) => {
      if (!(await lockRequestRows(trx, database.dialect, requestId))) throw new BusyMarker();
      return action(trx);
    });
  } catch (error) {
    if (error instanceof BusyMarker) return 'busy';
    throw error;
  }
}

async function findRoutine(db: Kysely<DB>, routineId: number) {
  return db.selectFrom('request_routine').selectAll().where('id', '=', routineId).executeTakeFirst();
}

export interface RetryInput {
  readonly routineId: number;
  /** {@link RoutineDetail.version} as shown to the operator. */
  readonly expectedVersion: string;
  readonly status: 'NEW' | 'RETRY';
  readonly tryCount: number;
  /** Stored UTC text, or null for "as soon as possible". */
  readonly nextTry: string | null;
}

/** Reference 9.7 admin edit: a FAILED (or VOID, PAUSE) routine back to NEW or RETRY. */
export function retryRoutine(database: Database, input: RetryInput): Promise<AdminOutcome> {
  return changeRoutine(database, input, RETRYABLE, 'retried', {
    status: input.status,
    try_count: input.tryCount,
    next_try_date_time: input.nextTry,
  });
}

/** Voids one routine (it will not run; VOID counts as done for the ordering rule). */
export function voidRoutine(
  database: Database,
  input: { readonly routineId: number; readonly expectedVersion: string },
): Promise<AdminOutcome> {
  return changeRoutine(database, input, VOIDABLE, 'voided', { status: 'VOID' });
}

/**
 * Sets `change` on one routine under its request's locks, once it is still the version the operator saw
 * and its status is one of `allowed`.
 */
async function changeRoutine(
  database: Database,
  input: { readonly routineId: number; readonly expectedVersion: string },
  allowed: readonly RoutineStatus[],
  verb: string,
  change: Updateable<DB['request_routine']>,
): Promise<AdminOutcome> {
  const seen = await findRoutine(database.db, input.routineId);
  if (seen === undefined) return { kind: 'not_found' };
  const requestId = seen.request_id;
  const outcome = await withRequestLocks(database, requestId, async (trx): Promise<AdminOutcome> => {
    const routine = await findRoutine(trx, input.routineId);
    if (routine === undefined) return { kind: 'not_found' };
    const current = routineVersion(routine);
    if (current !== input.expectedVersion) return { kind: 'changed', requestId, current };
    if (!allowed.includes(routine.status))
      return { kind: 'refused', requestId, reason: `A ${routine.status} routine cannot be ${verb}.` };
    await trx.updateTable('request_routine').set(change).where('id', '=', routine.id).execute();
    return { kind: 'done', requestId, routineIds: [routine.id] };
  });
  return outcome === 'busy' ? { kind: 'busy', requestId } : outcome;
}

/**
 * Runs a whole request again: every routine that is not pending (COMPLETE, FAILED, VOID, PAUSE) goes
 * back to NEW with try count 0 and no next try, so the request runs again from its first routine in
 * sequence order; NEW and RETRY routines are left as they are.
 */
export async function requeueRequest(
  database: Database,
  input: { readonly requestId: number; readonly expectedVersion: string },
): Promise<AdminOutcome> {
  const requestId = input.requestId;
  const exists = await database.db
    .selectFrom('request')
    .select('id')
    .where('id', '=', requestId)
    .executeTakeFirst();
  if (exists === undefined) return { kind: 'not_found' };
  const outcome = await withRequestLocks(database, requestId, async (trx): Promise<AdminOutcome> => {
    const routines = await trx
      .selectFrom('request_routine')
      .selectAll()
      .where('request_id', '=', requestId)
      .orderBy('id')
      .execute();
    const current = requestVersion(routines);
    if (current !== input.expectedVersion) return { kind: 'changed', requestId, current };
    const reset = routines.filter((r) => r.status !== 'NEW' && r.status !== 'RETRY').map((r) => r.id);
    if (reset.length === 0)
      return { kind: 'refused', requestId, reason: 'Every routine is already pending.' };
    await trx
      .updateTable('request_routine')
      .set({ status: 'NEW', try_count: 0, next_try_date_time: null })
      .where('id', 'in', reset)
      .execute();
    return { kind: 'done', requestId, routineIds: reset };
  });
  return outcome === 'busy' ? { kind: 'busy', requestId } : outcome;
}

/** Live routine counts are exact up to this many per queue and status, then shown as "at least". */
export const COUNT_CAP = 100_000;

export interface QueueHealth {
  readonly queue: string;
  /** Routines per pending or stuck status (NEW, RETRY, FAILED, PAUSE), capped at {@link COUNT_CAP}. */
  readonly counts: Readonly<Record<'NEW' | 'RETRY' | 'FAILED' | 'PAUSE', number>>;
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
      const counts = await Promise.all(LIVE_STATUSES.map((status) => capped(q.request_queue, status)));
      return {
        queue: q.request_queue,
        counts: { NEW: counts[0]!, RETRY: counts[1]!, FAILED: counts[2]!, PAUSE: counts[3]! },
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
