/**
 * Rate-limit counters shared between server processes through the database, off the hot path: limiters
 * count in memory (rate-limit.ts) and this hub, every `RATE_LIMIT_SYNC_INTERVAL_MS` on an unref'd timer,
 * flushes each limiter's new hits of the current window into `rate_limit_counter` (through
 * src/db/counters.queries.ts, which owns the table: an upsert adding them), reads back the combined totals of every key it
 * touched in the window, and deletes the windows that are over.
 *
 * A process can therefore overshoot a limit by what the other processes accepted during one sync
 * interval, never by a factor of the number of processes. The timer runs only while some limiter has a
 * key in its current window, so an idle server never queries. A failing database never reaches a
 * request: the sync keeps the hits to flush them later and the limiters go on counting locally.
 */
import type { Config } from '../config.ts';
import type { Database } from '../db/database.ts';
import type { Logger } from '../logger.ts';
import { addWindowHits, deleteEndedWindows, readWindowTotals } from '../db/counters.queries.ts';
import type { SharedCounterHub, SharedCounterSource, SyncBatch } from './rate-limit.ts';

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
        const window = { start: batch.windowStart, end: batch.windowEnd };
        await addWindowHits(
          db,
          source.name,
          window,
          batch.rows.filter((row) => row.delta > 0),
        );
        pending.shift();
        // The flushed hits are in the database now: committed even if the read-back below fails.
        const hashes = batch.rows.map((row) => row.keyHash);
        const totals = await readWindowTotals(db.db, source.name, batch.windowStart, hashes).catch(
          () => new Map<string, number>(),
        );
        batch.commit(totals);
      }
    } catch (error) {
      for (const { batch } of pending) batch.abort();
      throw error;
    }
    if (deleteBefore !== undefined) await deleteEndedWindows(db.db, deleteBefore);
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

/** `RATE_LIMIT_SHARING`: `auto` shares when there are several server processes or on a server database. */
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
