/**
 * The console's request list: requests filtered on their overall status, routines,
 * queue, details and dates, each with its overall status, paged by id under a time budget.
 */
import type { ExpressionBuilder, Kysely, SelectQueryBuilder } from 'kysely';
import { sql } from 'kysely';
import type { DB, RoutineStatus } from '../../../db/schema.ts';
import { scanPage } from '../../../db/window-scan.ts';
import type { OverallState, OverallStatus } from '../status/overall-status.ts';
import { overallStateOf, overallStatusCondition, routineStatusesOf } from '../status/overall-status.ts';
import type { WaitingForPatient } from '../status/waiting.ts';
import { waitingForPatientCondition, waitingForPatientOf } from '../status/waiting.ts';

/**
 * The list's filter on the overall status of a request (see `overall-status.ts`); `waiting`: RUNNING
 * requests waiting for a patient (see `waiting.ts`), a part of `incomplete`.
 */
export type OverallFilter = 'complete' | 'incomplete' | 'failed' | 'waiting';

/** The overall status each list filter selects (the rule of `overall-status.ts`). */
const STATUS_OF_FILTER: Readonly<Record<Exclude<OverallFilter, 'waiting'>, OverallStatus>> = {
  complete: 'COMPLETE',
  incomplete: 'RUNNING',
  failed: 'FAILED',
};

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

export type { OverallState } from '../status/overall-status.ts';

export interface RequestListRow {
  readonly id: number;
  readonly requestType: string;
  readonly systemMessage: string;
  readonly createdDate: string;
  readonly overall: OverallState;
  /** Set when the request waits for a patient (its reason comes with the page's summaries). */
  readonly waiting: WaitingForPatient | null;
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
  if (filter.overall === 'waiting') return ['RETRY'];
  // A FAILED or RUNNING request has a routine of the statuses that make it so; a COMPLETE one has none.
  const statuses =
    filter.overall === undefined ? undefined : routineStatusesOf(STATUS_OF_FILTER[filter.overall]);
  return statuses === undefined ? undefined : [...statuses];
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
  if (filter.overall === 'waiting') {
    conditions.push(
      waitingForPatientCondition(eb, ({ status, routineName }) => {
        const query = routines().where('x.status', '=', status);
        return eb.exists(routineName === undefined ? query : query.where('x.routine_name', '=', routineName));
      }),
    );
  } else if (filter.overall !== undefined) {
    conditions.push(
      overallStatusCondition(eb, STATUS_OF_FILTER[filter.overall], (statuses) =>
        eb.exists(routines().where('x.status', 'in', [...statuses])),
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
          .select(['request_id', 'routine_name', 'status', 'try_count', 'next_try_date_time'])
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
    rows: page.rows.map((r) => {
      const own = byRequest.get(r.id) ?? [];
      const overall = overallStateOf(own);
      return {
        id: r.id,
        requestType: r.request_type,
        systemMessage: r.system_message,
        createdDate: r.created_date,
        overall,
        waiting: waitingForPatientOf(overall.status, own, () => null),
        routineCount: own.length,
      };
    }),
    nextBefore: page.next,
    isPartial: page.isPartial,
  };
}
