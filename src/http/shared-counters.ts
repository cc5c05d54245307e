/**
 * Rate-limit counters shared between server processes through the database (issue 7 item 1), off the
 * hot path: limiters count in memory (rate-limit.ts) and this hub, every `RATE_LIMIT_SYNC_INTERVAL_MS`
 * on an unref'd timer, flushes each limiter's new hits of the current window into `rate_limit_counter`
 * (`count = count + excluded.count`, one upsert that returns the combined totals), reads back the totals
 * of the other keys touched in the window, and deletes the windows that are over.
 *
 * A process can therefore overshoot a limit by what the other processes accepted during one sync
 * interval, never by a factor of the number of processes. The timer runs only while some limiter has a
 * key in its current window, so an idle server never queries. A failing database never reaches a
 * request: the sync keeps the hits to flush them later and the limiters go on counting locally.
 */
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import type { DB } from '../db/schema.ts';
import type { Logger } from '../logger.ts';
import type { SharedCounterHub, SharedCounterSource, SyncBatch } from './rate-limit.ts';

/** `rate_limit_counter` (migration 0010). Not in `DB`: transient state, not part of the dataset format. */
export interface RateLimitCounterTable {
  limiter: string;
  /** `hashKey(limiter, key)`: never the raw address or username. */
  key_hash: string;
  /** Epoch milliseconds, a multiple of the window length. */
  window_start: number;
  window_end: number;
  count: number;
}

type CounterTables = { rate_limit_counter: RateLimitCounterTable };

export interface SharedCounters extends SharedCounterHub {
  /** Runs one sync now (the timer runs them otherwise); never rejects. */
  sync(): Promise<void>;
  /** Stops the timer; limiters keep counting locally. */
  close(): void;
}

export interface SharedCountersOptions {
  readonly syncIntervalMs?: number;
  /** Reports the start and the end of a database outage (once each, not every sync). */
  readonly logger?: Pick<Logger, 'warn' | 'info'>;
  /** Clock, for tests. */
  readonly now?: () => number;
}

/** Rows per statement: 5 parameters a row stays far below both dialects' parameter limits. */
const CHUNK = 500;
/** Windows are deleted this long after they end, so that a clock a little ahead does not cut others'. */
const DELETE_GRACE_MS = 60_000;
const DELETE_EVERY_MS = 10_000;

export function createSharedCounters(
  database: Database,
  options: SharedCountersOptions = {},
): SharedCounters {
  const interval = options.syncIntervalMs ?? 500;
  const now = options.now ?? Date.now;
  const sources: SharedCounterSource[] = [];
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let isClosed = false;
  let isFailing = false;
  let lastDeleteAt = 0;

  const schedule = () => {
    if (timer !== undefined || isClosed) return;
    timer = setTimeout(() => {
      timer = undefined;
      void sync();
    }, interval);
    timer.unref();
  };

  async function sync(): Promise<void> {
    if (running !== undefined) return running;
    running = runOnce().finally(() => {
      running = undefined;
    });
    return running;
  }

  async function runOnce(): Promise<void> {
    const at = now();
    const batches: { source: SharedCounterSource; batch: SyncBatch }[] = [];
    for (const source of sources) {
      const batch = source.collect(at);
      if (batch !== undefined) batches.push({ source, batch });
    }
    const isDeleteDue = at - lastDeleteAt >= DELETE_EVERY_MS;
    if (batches.length === 0 && !isDeleteDue) return;
    try {
      await exchange(database, batches, isDeleteDue ? at - DELETE_GRACE_MS : undefined);
      if (isDeleteDue) lastDeleteAt = at;
      if (isFailing) options.logger?.info('rate-limit counters shared again');
      isFailing = false;
    } catch (error) {
      if (!isFailing)
        options.logger?.warn(
          { errorClass: (error as Error).constructor.name },
          'rate-limit counters not shared: counting locally until the database answers',
        );
      isFailing = true;
    }
    // Keep syncing while a key is in its current window (others' hits must still be read back).
    if (batches.length > 0) schedule();
  }

  /** Flushes and reads back every batch; a batch whose flush failed is aborted, the others committed. */
  async function exchange(
    db: Database,
    batches: readonly { source: SharedCounterSource; batch: SyncBatch }[],
    deleteBefore: number | undefined,
  ): Promise<void> {
    const pending = [...batches];
    try {
      while (pending.length > 0) {
        const { source, batch } = pending[0]!;
        const totals = await flush(db, source.name, batch);
        pending.shift();
        // The flushed hits are in the database now: committed even if the read-back below fails.
        const readTotals = await readBack(db.db, source.name, batch).catch(() => new Map<string, number>());
        for (const [keyHash, total] of readTotals) totals.set(keyHash, total);
        batch.commit(totals);
      }
    } catch (error) {
      for (const { batch } of pending) batch.abort();
      throw error;
    }
    if (deleteBefore !== undefined) {
      await counters(db.db).deleteFrom('rate_limit_counter').where('window_end', '<', deleteBefore).execute();
    }
  }

  return {
    attach(source) {
      if (source.name.length > 32) throw new Error(`limiter name too long: ${source.name}`);
      sources.push(source);
    },
    wake: schedule,
    sync,
    close() {
      isClosed = true;
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
    },
  };
}

function counters(db: Kysely<DB>): Kysely<DB & CounterTables> {
  return db.withTables<CounterTables>();
}

/** Adds the batch's new hits and returns the combined totals of those keys (one statement a chunk). */
async function flush(database: Database, limiter: string, batch: SyncBatch): Promise<Map<string, number>> {
  const totals = new Map<string, number>();
  const rows = batch.rows.filter((row) => row.delta > 0);
  if (rows.length === 0) return totals;
  // Through writeTransaction: on SQLite (one connection) it joins the request writes' batched commit
  // instead of slipping into someone else's transaction.
  await database.writeTransaction(async (trx) => {
    for (let i = 0; i < rows.length; i += CHUNK) {
      const values = rows.slice(i, i + CHUNK).map((row) => ({
        limiter,
        key_hash: row.keyHash,
        window_start: batch.windowStart,
        window_end: batch.windowEnd,
        count: row.delta,
      }));
      const { dialect } = database;
      const insert = counters(trx).insertInto('rate_limit_counter').values(values);
      const returned = await dialect
        .upsert(insert, ['limiter', 'key_hash', 'window_start'], {
          count: sql<number>`${dialect.existingValue('rate_limit_counter', 'count')} + ${dialect.insertedValue('count')}`,
        })
        .returning(['key_hash', 'count'])
        .execute();
      for (const row of returned) totals.set(row.key_hash, Number(row.count));
    }
  });
  return totals;
}

/** Combined totals of the keys touched in the window without new hits of this process. */
async function readBack(db: Kysely<DB>, limiter: string, batch: SyncBatch): Promise<Map<string, number>> {
  const totals = new Map<string, number>();
  const hashes = batch.rows.filter((row) => row.delta === 0).map((row) => row.keyHash);
  for (let i = 0; i < hashes.length; i += CHUNK) {
    const rows = await counters(db)
      .selectFrom('rate_limit_counter')
      .select(['key_hash', 'count'])
      .where('limiter', '=', limiter)
      .where('window_start', '=', batch.windowStart)
      .where('key_hash', 'in', hashes.slice(i, i + CHUNK))
      .execute();
    for (const row of rows) totals.set(row.key_hash, Number(row.count));
  }
  return totals;
}

/** `RATE_LIMIT_SHARING`: `auto` shares when there are several server processes or on a server database (PostgreSQL, MySQL). */
export function isRateLimitSharingOn(config: Config): boolean {
  if (config.rateLimitSharing === 'on') return true;
  if (config.rateLimitSharing === 'off') return false;
  return config.serverProcesses > 1 || config.database.kind !== 'sqlite';
}

const hubs = new WeakMap<Database, SharedCounters>();

/**
 * The one hub of a database (shared by every limiter of the app), or undefined when sharing is off.
 */
export function sharedCountersFor(deps: {
  readonly config: Config;
  readonly database: Database;
}): SharedCounters | undefined {
  if (!isRateLimitSharingOn(deps.config)) return undefined;
  let hub = hubs.get(deps.database);
  if (hub === undefined) {
    hub = createSharedCounters(deps.database, { syncIntervalMs: deps.config.rateLimitSyncIntervalMs });
    hubs.set(deps.database, hub);
  }
  return hub;
}
