/**
 * The statistics an engine keeps per queue in memory (successes, failures, the most routines running at
 * once, the last request claimed) and adds to the `request_queue` rows when flushed.
 */
import type { Kysely } from 'kysely';
import type { DialectAdapter } from '../../../db/dialect.ts';
import type { DB, RoutineStatus } from '../../../db/schema.ts';
import type { QueueCounters } from './claim.queries.ts';
import { addQueueCounters } from './claim.queries.ts';

export interface CounterBook {
  /** Counts one recorded attempt of a routine of `queue`, with the routines running besides it. */
  count(
    queue: string,
    attempt: { status: RoutineStatus; requestId: number; activeCount: number; nowText: string },
  ): void;
  /**
   * Adds the counts to the `request_queue` rows. Unless `isFinal` (the worker stops), a row that other
   * transactions hold (see `addQueueCounters`) keeps its counts for the next flush.
   */
  flush(
    database: { db: Kysely<DB>; dialect: DialectAdapter },
    options: { activeCount: number; isFinal: boolean },
  ): Promise<void>;
}

export function createCounterBook(): CounterBook {
  const counters = new Map<string, QueueCounters>();
  const countersOf = (queue: string): QueueCounters => {
    let c = counters.get(queue);
    if (c === undefined) {
      c = { success: 0, fail: 0, active: 0, lastRequestId: null, lastSpawnAt: null };
      counters.set(queue, c);
    }
    return c;
  };
  return {
    count(queue, attempt) {
      const c = countersOf(queue);
      if (attempt.status === 'COMPLETE') c.success += 1;
      else c.fail += 1;
      c.active = Math.max(c.active, attempt.activeCount + 1);
      c.lastRequestId = attempt.requestId;
      c.lastSpawnAt = attempt.nowText;
    },
    async flush({ db, dialect }, { activeCount, isFinal }) {
      for (const [queue, c] of counters) {
        if (c.success === 0 && c.fail === 0 && c.lastRequestId === null) continue;
        const snapshot = { ...c, active: activeCount };
        c.success = 0;
        c.fail = 0;
        c.lastRequestId = null;
        c.lastSpawnAt = null;
        c.active = 0;
        // Counters are statistics: when not written now, they are put back for the next flush.
        const putBack = () => {
          c.success += snapshot.success;
          c.fail += snapshot.fail;
          if (c.lastRequestId === null) {
            c.lastRequestId = snapshot.lastRequestId;
            c.lastSpawnAt = snapshot.lastSpawnAt;
          }
        };
        let isWritten: boolean;
        try {
          isWritten = await addQueueCounters(db, dialect, queue, snapshot, isFinal);
        } catch (error) {
          putBack();
          throw error;
        }
        if (!isWritten) putBack();
      }
    },
  };
}
