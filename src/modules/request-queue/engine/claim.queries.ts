/**
 * Queue SQL: the eligibility rule, claiming, recording an attempt, the markers of attempts under way,
 * chaining (`addRoutine`, `voidAllNewRoutines`) and the queue counters.
 *
 * Claiming: where the engine has row locks (`DialectAdapter.hasRowLocks`), several worker processes on
 * several machines share one queue by claiming with `SELECT ... FOR UPDATE SKIP LOCKED` on the routine
 * and its request, in a short transaction that takes a session lock per claimed request
 * (`DialectAdapter.tryLockSessionKeys`) before it commits. The row locks keep two claims apart and make
 * the engine re-check the routine against its newest version, so a routine another worker has just
 * completed is skipped; the session lock gives "one worker per request" while the routine is prepared
 * (outside any transaction) and run (in a transaction that locks its row again and re-checks it:
 * {@link stillClaimedIds}). If the worker dies, its connection closes, the server rolls back any open
 * transaction and releases its locks, session locks included: the routine is left as it was
 * (NEW/RETRY), with the start mark that counts the attempt as a try.
 * Without row locks (SQLite, one writer) one worker process serves the database: it keeps the ids of the
 * requests it is running in memory and leaves them out of the claim, and its write transaction is the
 * database-wide writer lock.
 */
import type { ExpressionBuilder, Kysely, RawBuilder } from 'kysely';
import { sql } from 'kysely';
import type { ShapeCache } from '../../../db/compiled-queries.ts';
import type { DialectAdapter } from '../../../db/dialect.ts';
import type { DB, PendingStatus, Row, RoutineStatus } from '../../../db/schema.ts';
import { PENDING_STATUSES } from '../../../db/schema.ts';

export type ClaimedRoutine = Row<'request_routine'> & { readonly request_type: string };

type RoutineScope = ExpressionBuilder<DB & { rr: DB['request_routine'] }, 'rr'>;

/** A status written into the SQL text rather than bound. */
const literal = (status: RoutineStatus) => sql.lit<RoutineStatus>(status);

/**
 * Eligible: on `queue`, NEW or RETRY (or only `status`), next try null or reached, and no sibling of the
 * same request with a lower `execute_sequence` outside COMPLETE/VOID (strict per-request order). The
 * routine table must be aliased `rr`. The statuses are literals, not bound values, so that a plan made
 * once for every value (a prepared claim's generic plan) reads the one index range of its status.
 */
export function isEligible(
  eb: RoutineScope,
  queue: string | RawBuilder<string>,
  nowText: unknown,
  status?: RoutineStatus,
) {
  return eb.and([
    eb('rr.execute_request_queue', '=', queue),
    status === undefined
      ? eb('rr.status', 'in', PENDING_STATUSES.map(literal))
      : eb('rr.status', '=', literal(status)),
    eb.or([eb('rr.next_try_date_time', 'is', null), eb('rr.next_try_date_time', '<=', nowText as string)]),
    eb.not(
      eb.exists(
        eb
          .selectFrom('request_routine as sibling')
          .select(sql.lit(1).as('one'))
          .where('sibling.request_id', '=', unordered(sql.ref<number>('rr.request_id')))
          .whereRef('sibling.execute_sequence', '<', 'rr.execute_sequence')
          .where('sibling.status', 'not in', [literal('COMPLETE'), literal('VOID')]),
      ),
    ),
  ]);
}

/**
 * `ref + 0`: the same value, which a planner does not know to be in the order of `ref`. The claim reads
 * routines in request order and looks up each one's request and siblings by `request_id`; with the key
 * itself PostgreSQL may instead merge-join the request and sibling indexes from their first rows (its
 * estimate takes the claim to start near the oldest request, when the pending routines are the newest),
 * reading the whole history of the queue on every claim. Through the expression each row is looked up.
 */
function unordered(ref: RawBuilder<number>) {
  return sql<number>`${ref} + 0`;
}

/** What the engine needs to run claims: the database's compile cache and dialect. */
export interface ClaimDatabase {
  readonly shapes: ShapeCache;
  readonly dialect: DialectAdapter;
}

/**
 * The statuses a claim takes, in order, one statement each: the RETRY routines whose next try has come,
 * then the NEW ones. Both belong to the same eligibility rule; a RETRY routine's request has started, so
 * it goes first (see {@link claimQuery} for the order within each).
 */
export const CLAIM_STATUSES = ['RETRY', 'NEW'] as const satisfies readonly PendingStatus[];

export type ClaimStatus = (typeof CLAIM_STATUSES)[number];

/**
 * The first `limit` eligible routines of `queue` (due RETRY ones first, then NEW ones, each oldest
 * request first), at most one per request, none of the requests in `excludeRequestIds`; locked (skipping
 * rows other transactions hold) where the engine has row locks, so `db` must then be the transaction that
 * will run them. Each statement is compiled once per shape and runs prepared (a worker with small batches
 * claims hundreds of times a second, and planning the claim costs more than running it).
 */
export async function claimRoutines(
  db: Kysely<DB>,
  database: ClaimDatabase,
  options: ClaimOptions,
): Promise<ClaimedRoutine[]> {
  const claimed: ClaimedRoutine[] = [];
  const seen = new Set<number>();
  for (const status of CLAIM_STATUSES) {
    const limit = options.limit - claimed.length;
    if (limit <= 0) break;
    const compiled = compileClaim(db, database, { ...options, status, limit });
    const { rows } = await database.dialect.runPreparedOn(db, compiled);
    for (const row of rows) {
      // Siblings of one sequence can be eligible together: one routine per request.
      if (seen.has(row.request_id)) continue;
      seen.add(row.request_id);
      claimed.push(row);
    }
  }
  return claimed;
}

/**
 * The claim statement of `options` for one status, compiled once per shape (queue, status, limit, count
 * of excluded requests).
 */
export function compileClaim(
  db: Kysely<DB>,
  database: ClaimDatabase,
  options: ClaimOptions & { readonly status: ClaimStatus },
) {
  const excluded = [...options.excludeRequestIds];
  return database.shapes.compile(
    `queue:claim:${JSON.stringify(options.queue)}:${options.status}:${options.limit}:${excluded.length}`,
    [options.nowText, ...excluded],
    (slots) =>
      claimQuery(db, database.dialect, {
        queue: options.queue,
        status: options.status,
        nowText: slots[0],
        limit: options.limit,
        excludeRequestIds: slots.slice(1),
      }),
  );
}

export interface ClaimOptions {
  readonly queue: string;
  readonly nowText: string;
  readonly limit: number;
  readonly excludeRequestIds: ReadonlySet<number>;
}

/**
 * The claim statement of {@link claimRoutines} for the eligible routines of one status (its SQL is tested
 * per dialect): bound time and excluded request ids (values, or the compile cache's placeholders).
 *
 * Order: oldest request first (request id), then routine id. A request's chained routine is inserted
 * when its previous routine completes, so it has a newer id than the first routines of every request
 * queued meanwhile; in routine id order it would wait behind all of them, and under steady intake a
 * started request would not finish until intake stopped. By request, a started request is finished
 * before newer ones start. One status per statement, so that one index range, (queue, status,
 * request_id, id) (`request_routine_claim`; in OpenEyes mode the suggested `cra_request_routine_claim`),
 * gives this order on every engine and the claim stops at `limit` eligible rows: a sort would read and
 * test every pending routine of the queue, and on MariaDB a sorted `FOR UPDATE SKIP LOCKED` locks every
 * row it read, so that concurrent claims would find nothing.
 *
 * The queue, the status and the limit are literals, so that a plan made once (a generic plan) knows how
 * many pending routines the queue has and how few rows it needs: with a bound queue PostgreSQL guesses
 * the pending routines spread evenly over the queues, and where there are several it hashes every
 * unfinished routine per claim instead of walking the queue's pending ones in order. Queue names come
 * from `request_queue`, never from a request.
 */
export function claimQuery(
  db: Kysely<DB>,
  dialect: DialectAdapter,
  options: {
    readonly queue: string;
    readonly status: ClaimStatus;
    readonly nowText: unknown;
    readonly limit: number;
    readonly excludeRequestIds: Iterable<unknown>;
  },
) {
  const excluded = [...options.excludeRequestIds] as number[];
  let query = db
    .selectFrom('request_routine as rr')
    .innerJoin('request as r', (join) => join.on('r.id', '=', unordered(sql.ref<number>('rr.request_id'))))
    // Named columns, not `rr.*`: a prepared statement's result columns must not change under it.
    .select([
      'rr.id',
      'rr.request_id',
      'rr.execute_request_queue',
      'rr.status',
      'rr.routine_name',
      'rr.try_count',
      'rr.next_try_date_time',
      'rr.execute_sequence',
      'rr.hash_code',
      'r.request_type',
    ])
    .where((eb) => isEligible(eb, sql.lit(options.queue), options.nowText, options.status))
    .orderBy('rr.request_id')
    .orderBy('rr.id')
    .limit(sql.lit(Math.max(1, Math.floor(options.limit))));
  if (excluded.length > 0) query = query.where('rr.request_id', 'not in', excluded);
  return dialect.lockRowsSkipLocked(query, ['r', 'rr']);
}

/**
 * The ids of the `claimed` routines that are still as they were claimed: eligible, with the status, try
 * count and next try the claim read (a console void, retry or re-queue, or another worker's record,
 * changes one of them). Read inside the transaction that runs them, after their preparation, with their
 * rows locked where the engine has row locks (waiting: claims skip locked rows and never hold them for
 * long), so that nobody changes them before the transaction ends.
 */
export async function stillClaimedIds(
  db: Kysely<DB>,
  dialect: DialectAdapter,
  claimed: readonly ClaimedRoutine[],
  queue: string,
  nowText: string,
): Promise<Set<number>> {
  if (claimed.length === 0) return new Set();
  const rows = await dialect
    .lockRows(
      db
        .selectFrom('request_routine as rr')
        .select(['rr.id', 'rr.status', 'rr.try_count', 'rr.next_try_date_time'])
        .where(
          'rr.id',
          'in',
          claimed.map((c) => c.id),
        )
        .where((eb) => isEligible(eb, queue, nowText)),
    )
    .execute();
  const byId = new Map(claimed.map((c) => [c.id, c]));
  return new Set(
    rows
      .filter((row) => {
        const was = byId.get(row.id)!;
        return (
          row.status === was.status &&
          row.try_count === was.try_count &&
          sameTime(row.next_try_date_time, was.next_try_date_time)
        );
      })
      .map((row) => row.id),
  );
}

/** Two values of one date-time column, as the driver gave them (a string, a Date or null). */
function sameTime(a: unknown, b: unknown): boolean {
  if (a instanceof Date && b instanceof Date) return a.getTime() === b.getTime();
  return a === b;
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
 * Writes the outcomes of attempts: each routine's status, try count and next try, and its
 * `request_routine_execution` row, inside the caller's transaction. Where the engine has
 * `UPDATE ... FROM (VALUES ...)` the routines are updated by one statement.
 */
export async function recordAttempts(
  db: Kysely<DB>,
  dialect: DialectAdapter,
  attempts: readonly AttemptRecord[],
): Promise<void> {
  if (attempts.length === 0) return;
  if (dialect.hasUpdateFromValues && attempts.length > 1) {
    const values = sql.join(
      attempts.map(
        (a) =>
          sql`(${a.routineId}::integer, ${a.status}::varchar, ${a.tryCount}::integer, ${a.nextTry}::timestamp)`,
      ),
    );
    await sql`update request_routine as rr
      set status = v.status, try_count = v.try_count, next_try_date_time = v.next_try
      from (values ${values}) as v(id, status, try_count, next_try)
      where rr.id = v.id`.execute(db);
  } else if (attempts.length > 1) {
    // Elsewhere one statement too: each column a CASE on the routine id.
    const [first, ...rest] = attempts;
    await db
      .updateTable('request_routine')
      .set((eb) => {
        const column = <V extends string | number | null>(of: (a: AttemptRecord) => V) => {
          let value = eb.case('id').when(first!.routineId).then(of(first!));
          for (const a of rest) value = value.when(a.routineId).then(of(a));
          return value.end();
        };
        return {
          // Every row the update touches has its branch (the WHERE takes the same ids).
          status: column((a) => a.status).$notNull(),
          try_count: column((a) => a.tryCount).$notNull(),
          next_try_date_time: column((a) => a.nextTry),
        };
      })
      .where(
        'id',
        'in',
        attempts.map((a) => a.routineId),
      )
      .execute();
  } else {
    const [only] = attempts;
    await db
      .updateTable('request_routine')
      .set({ status: only!.status, try_count: only!.tryCount, next_try_date_time: only!.nextTry })
      .where('id', '=', only!.routineId)
      .execute();
  }
  await db
    .insertInto('request_routine_execution')
    .values(
      attempts.map((a) => ({
        request_routine_id: a.routineId,
        log_text: a.logText,
        execution_date_time: a.executedAt,
        status: a.status,
        try_number: a.tryCount,
      })),
    )
    .execute();
}

// --- attempts under way -------------------------------------------------------------------------------

/**
 * `request_routine_attempt` (migration 0011, the service's own table): one row per routine whose attempt
 * has started and not been recorded. It is written and committed on its own before the routine runs, and
 * removed in the transaction that records the outcome; a row that is still there when the routine is
 * claimed again means the attempt never finished (the process was killed, crashed or lost power mid-way),
 * and that attempt counts as a try. No foreign key: the claim holds the routine row locked, and a key
 * check on it from the marker's own transaction would wait on that lock.
 */
export interface RoutineAttemptTable {
  request_routine_id: number;
  /** The try this attempt is (`try_count` + 1 when it started). */
  try_number: number;
  /** When the attempt started; null once an unfinished attempt was counted. */
  started_date: string | null;
  /** Unfinished attempts in a row, counted so far. */
  unfinished_count: number;
  /** `<host>:<pid>` of the worker that started it. */
  worker: string;
}

type AttemptDb = DB & { request_routine_attempt: RoutineAttemptTable };

function attemptDb(db: Kysely<DB>): Kysely<AttemptDb> {
  return db.withTables<{ request_routine_attempt: RoutineAttemptTable }>();
}

/** The markers of `routineIds`, by routine id. */
export async function findAttemptMarkers(
  db: Kysely<DB>,
  routineIds: readonly number[],
): Promise<Map<number, RoutineAttemptTable>> {
  if (routineIds.length === 0) return new Map();
  const rows = await attemptDb(db)
    .selectFrom('request_routine_attempt')
    .selectAll()
    .where('request_routine_id', 'in', [...routineIds])
    .execute();
  return new Map(rows.map((r) => [r.request_routine_id, r]));
}

/**
 * Marks the attempts of `routines` as started, keeping the count of unfinished attempts before them, in
 * a transaction of its own that commits without waiting for the disk (`commitWithoutFlush`): the mark
 * survives a crash of the attempt's process, and is lost only with the database server or the machine,
 * which loses the attempt's own transaction too (attempts.ts).
 */
export async function markAttemptsStarted(
  database: { readonly db: Kysely<DB>; readonly dialect: DialectAdapter },
  routines: readonly { routineId: number; tryNumber: number; unfinishedCount: number }[],
  startedDate: string,
  worker: string,
): Promise<void> {
  if (routines.length === 0) return;
  const { db, dialect } = database;
  const insert = attemptDb(db)
    .insertInto('request_routine_attempt')
    .values(
      routines.map((r) => ({
        request_routine_id: r.routineId,
        try_number: r.tryNumber,
        started_date: startedDate,
        unfinished_count: r.unfinishedCount,
        worker,
      })),
    );
  await dialect.commitWithoutFlush(
    dialect
      .upsert(insert, ['request_routine_id'], {
        try_number: dialect.insertedValue('try_number'),
        started_date: dialect.insertedValue('started_date'),
        unfinished_count: dialect.insertedValue('unfinished_count'),
        worker: dialect.insertedValue('worker'),
      })
      .compile(),
  );
}

/** Removes the markers of attempts whose outcome the caller's transaction records. */
export async function clearAttemptMarkers(db: Kysely<DB>, routineIds: readonly number[]): Promise<void> {
  if (routineIds.length === 0) return;
  await attemptDb(db)
    .deleteFrom('request_routine_attempt')
    .where('request_routine_id', 'in', [...routineIds])
    .execute();
}

/** Keeps the count of an unfinished attempt that was just recorded (`started_date` null: not running). */
export async function keepUnfinishedCount(db: Kysely<DB>, routineId: number, count: number): Promise<void> {
  await attemptDb(db)
    .updateTable('request_routine_attempt')
    .set({ started_date: null, unfinished_count: count })
    .where('request_routine_id', '=', routineId)
    .execute();
}

/** Routines to add to one request, in order, as one `addRoutine` / `addRoutines` / `addPriorityRoutine` call. */
export interface ChainTarget {
  readonly requestId: number;
  readonly queue: string;
  readonly names: readonly string[];
  readonly sequence: 'append' | 'priority';
}

/**
 * Throws when a name of `names` is not in `routine_library`; names found there are remembered in
 * `knownNames` (rows of `routine_library` are never removed), so that a known name costs no read.
 */
export async function checkRoutineNames(
  db: Kysely<DB>,
  names: readonly string[],
  knownNames: Set<string>,
): Promise<void> {
  const unknown = [...new Set(names.filter((name) => !knownNames.has(name)))];
  if (unknown.length === 0) return;
  const known = await db
    .selectFrom('routine_library')
    .select('routine_name')
    .where('routine_name', 'in', unknown)
    .execute();
  for (const row of known) knownNames.add(row.routine_name);
  const missing = unknown.find((name) => !knownNames.has(name));
  if (missing !== undefined) throw new Error(`Routine ${missing} is not in routine_library`);
}

/**
 * Adds routines `names` to request `requestId`, in order: each at `sequence` (the request's highest
 * sequence + 10, where the Java processor took the last inserted one's, or 1 for `priority`), or resets it
 * when the request already has a routine of that name, as `addRoutine` does. Throws when a name is not in
 * `routine_library` (see {@link checkRoutineNames}).
 */
export async function addRequestRoutines(
  db: Kysely<DB>,
  target: ChainTarget,
  knownNames: Set<string>,
): Promise<void> {
  if (target.names.length === 0) return;
  await checkRoutineNames(db, target.names, knownNames);
  await addRoutinesToRequests(db, [target]);
}

/**
 * Applies `targets` (names already checked, see {@link checkRoutineNames}) in their order, as many
 * {@link addRequestRoutines} calls would one after the other, with one read of the requests' routines and
 * one insert of every new routine (resets of existing routines, rare, are one update each). A batch
 * chains its successful attempts' routines this way.
 */
export async function addRoutinesToRequests(db: Kysely<DB>, targets: readonly ChainTarget[]): Promise<void> {
  const live = targets.filter((t) => t.names.length > 0);
  if (live.length === 0) return;
  const requestIds = [...new Set(live.map((t) => t.requestId))];
  const siblings = await db
    .selectFrom('request_routine')
    .select(['id', 'request_id', 'routine_name', 'execute_sequence'])
    .where('request_id', 'in', requestIds)
    .orderBy('id')
    .execute();
  interface NewRoutine {
    readonly requestId: number;
    readonly queue: string;
    readonly name: string;
    sequence: number;
  }
  interface RequestState {
    /** The first routine of each name: an existing id, or a routine this call inserts. */
    readonly byName: Map<string, number | NewRoutine>;
    /** The sequence of each of the request's routines, as the targets so far left it. */
    readonly sequences: Map<number | NewRoutine, number>;
  }
  const states = new Map<number, RequestState>(
    requestIds.map((id) => [id, { byName: new Map(), sequences: new Map() }]),
  );
  for (const s of siblings) {
    const state = states.get(s.request_id)!;
    if (!state.byName.has(s.routine_name)) state.byName.set(s.routine_name, s.id);
    state.sequences.set(s.id, s.execute_sequence);
  }
  const inserts: NewRoutine[] = [];
  const resets = new Map<number, { isPriority: boolean }>();
  for (const target of live) {
    const state = states.get(target.requestId)!;
    const isPriority = target.sequence === 'priority';
    // As a call of its own would read it: the highest sequence once the earlier targets are applied.
    let top = Math.max(0, ...state.sequences.values());
    for (const name of target.names) {
      const found = state.byName.get(name);
      if (found !== undefined) {
        if (typeof found === 'number') {
          // Reset: NEW, try count 0, next try and hash cleared; sequence 1 when priority.
          const earlier = resets.get(found);
          resets.set(found, { isPriority: isPriority || earlier?.isPriority === true });
        } else if (isPriority) {
          // Added by an earlier target: already NEW.
          found.sequence = 1;
        }
        if (isPriority) state.sequences.set(found, 1);
        continue;
      }
      const added: NewRoutine = {
        requestId: target.requestId,
        queue: target.queue,
        name,
        sequence: isPriority ? 1 : top + 10,
      };
      top = Math.max(top, added.sequence);
      state.byName.set(name, added);
      state.sequences.set(added, added.sequence);
      inserts.push(added);
    }
  }
  for (const [id, { isPriority }] of resets) {
    await db
      .updateTable('request_routine')
      .set({
        status: 'NEW',
        try_count: 0,
        next_try_date_time: null,
        hash_code: null,
        ...(isPriority ? { execute_sequence: 1 } : {}),
      })
      .where('id', '=', id)
      .execute();
  }
  if (inserts.length === 0) return;
  await db
    .insertInto('request_routine')
    .values(
      inserts.map((r) => ({
        request_id: r.requestId,
        execute_request_queue: r.queue,
        status: 'NEW' as const,
        routine_name: r.name,
        try_count: 0,
        next_try_date_time: null,
        execute_sequence: r.sequence,
        hash_code: null,
      })),
    )
    .execute();
}

/** As the Java processor's `voidAllNewRoutines`: NEW/RETRY siblings not named `current` become VOID. */
export async function voidNewRoutines(db: Kysely<DB>, requestId: number, current: string): Promise<void> {
  await db
    .updateTable('request_routine')
    .set({ status: 'VOID' })
    .where('request_id', '=', requestId)
    .where('status', 'in', PENDING_STATUSES)
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

/**
 * Adds a worker's counts to its queue row (as the Java worker does when it exits), in one short statement.
 * Where inserts of routines hold shared locks on their queue's row that block this update
 * (`hasBlockingParentLocks`), and `mayWait` is false, the row is first locked with SKIP LOCKED: while another
 * transaction holds it the counts are not written (false) and the caller keeps them for later, instead of
 * queueing an exclusive lock that every intake and worker transaction would then wait behind.
 */
export async function addQueueCounters(
  db: Kysely<DB>,
  dialect: DialectAdapter,
  queue: string,
  counters: QueueCounters,
  mayWait: boolean,
): Promise<boolean> {
  if (dialect.hasBlockingParentLocks && !mayWait) {
    return db.transaction().execute(async (trx) => {
      const held = await dialect
        .lockRowsSkipLocked(
          trx.selectFrom('request_queue').select('request_queue').where('request_queue', '=', queue),
        )
        .executeTakeFirst();
      if (held === undefined) return false;
      await updateQueueCounters(trx, queue, counters);
      return true;
    });
  }
  await updateQueueCounters(db, queue, counters);
  return true;
}

async function updateQueueCounters(db: Kysely<DB>, queue: string, counters: QueueCounters): Promise<void> {
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
