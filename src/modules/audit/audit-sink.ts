/**
 * The read audit sink (`AUDIT_READS=async`, the default): the audit rows of reads (patient search,
 * attachment view, queue status) are handed here and the read is answered at once; the sink commits them
 * in groups, on a connection of its own (`Database.openBackgroundWriter`: on SQLite a worker thread with
 * its own connection, so the HTTP thread does no audit I/O; on a server database one more connection).
 *
 * - When: a row is committed at most `flushMs` after it was handed over while the database keeps up. The
 *   first row of an empty sink starts a timer that fires `flushMs` after it, less the time recent commits
 *   took; every row handed over until then joins that transaction (up to `maxBatchRows`, beyond which the
 *   next one starts at once). Few commits (and on SQLite few turns at the write lock, each of which also
 *   makes the server's connection drop its page cache) instead of one per read.
 * - Loss: rows live in this process's memory until committed, so a crash (kill -9, power loss) loses at
 *   most the rows of the last `flushMs` and those of a commit under way; `close` (the server's graceful
 *   stop) commits every row before it resolves.
 * - Failure: a batch that fails stays at the head of the queue and is tried again, backing off to 1 s; no
 *   row is ever dropped. While the backlog (rows handed over, not committed) reaches `maxBacklogRows`, or
 *   the oldest of them is older than `maxLagMs` (commits failing, or waiting on a lock), `offer` refuses:
 *   the hook answers the read 503 instead, and `/readyz` reports not ready, until the sink catches up.
 *   A retried batch whose first commit did go through (the connection was lost before it said so) is
 *   written twice: delivery is at least once.
 */
import type { FastifyBaseLogger } from 'fastify';
import type { Database } from '../../db/database.ts';
import type { AuditEntry } from './audit-trail.ts';
import { toAuditRow } from './audit-trail.ts';
import type { NewAuditEventRow } from './audit.queries.ts';
import { createBackgroundAuditInserter } from './audit.queries.ts';

declare module 'fastify' {
  interface FastifyInstance {
    /** The read audit sink, when reads are audited asynchronously (`/readyz`, metrics). */
    auditSink?: AuditSink;
  }
}

export interface AuditSinkOptions {
  /** A row is committed at most this long after it was handed over (while the database keeps up). */
  readonly flushMs: number;
  /** Rows handed over and not yet committed at which reads are refused. */
  readonly maxBacklogRows: number;
  /** Age of the oldest row not yet committed beyond which reads are refused. */
  readonly maxLagMs: number;
  /** Rows per transaction. */
  readonly maxBatchRows?: number;
  /** Where failures, refusals and recoveries are logged (counts and error classes, never rows). */
  readonly log?: FastifyBaseLogger;
}

/** Why the sink refuses reads. */
export type AuditSinkRefusal = 'backlog' | 'lag';

/** The sink's numbers, for the metrics. Counters count since the process started. */
export interface AuditSinkStats {
  /** Rows handed over and not yet committed. */
  readonly backlogRows: number;
  /** Age of the oldest of them (0 when none). */
  readonly lagSeconds: number;
  readonly rowsWritten: number;
  /** Rows of batches that failed and are tried again (a row counts once per failed attempt). */
  readonly rowsRetried: number;
  readonly flushFailures: number;
  /** Reads answered 503 because the sink refused their row. */
  readonly readsRefused: number;
  /** Committed batches and the time their transactions took. */
  readonly flushes: number;
  readonly flushSecondsSum: number;
  readonly isRefusing: boolean;
}

export interface AuditSink {
  /**
   * Takes the row of a read that is about to be answered; false when the sink refuses it (backlog or lag
   * over its bound, or closed): the read must then not be answered with its data.
   */
  offer(entry: AuditEntry): boolean;
  /** Why reads are refused now, or undefined when they are not. */
  refusal(): AuditSinkRefusal | undefined;
  stats(): AuditSinkStats;
  /** Commits every row handed over so far (retrying until it can), then closes the connection. */
  close(): Promise<void>;
}

interface PendingRow {
  readonly row: NewAuditEventRow;
  /** `performance.now()` when it was handed over. */
  readonly offeredAt: number;
}

const DEFAULT_MAX_BATCH_ROWS = 1000;
const RETRY_FIRST_MS = 25;
const RETRY_MAX_MS = 1000;

export function createAuditSink(database: Database, options: AuditSinkOptions): AuditSink {
  const { flushMs, maxBacklogRows, maxLagMs, log } = options;
  const maxBatchRows = options.maxBatchRows ?? DEFAULT_MAX_BATCH_ROWS;
  const writer = database.openBackgroundWriter();
  const insert = createBackgroundAuditInserter(writer);

  /** Rows handed over and not yet committed, oldest first; the first batch of them may be in flight. */
  let queue: PendingRow[] = [];
  let timer: NodeJS.Timeout | undefined;
  let flushing: Promise<void> | undefined;
  let isClosing = false;
  let isClosed = false;
  let failuresInRow = 0;
  /** How long recent commits took (moving average): the timer fires that much before the deadline. */
  let commitEstimateMs = 0;
  let lastRefusal: AuditSinkRefusal | undefined;
  const counts = { rowsWritten: 0, rowsRetried: 0, flushFailures: 0, readsRefused: 0, flushes: 0 };
  let flushSecondsSum = 0;

  const lagMs = (): number => (queue.length === 0 ? 0 : performance.now() - queue[0]!.offeredAt);

  const refusal = (): AuditSinkRefusal | undefined => {
    if (queue.length >= maxBacklogRows) return 'backlog';
    if (lagMs() > maxLagMs) return 'lag';
    return undefined;
  };

  async function flushOnce(): Promise<void> {
    const batch = queue.slice(0, maxBatchRows);
    const started = performance.now();
    try {
      await insert(batch.map((pending) => pending.row));
    } catch (error) {
      counts.flushFailures += 1;
      counts.rowsRetried += batch.length;
      failuresInRow += 1;
      if (failuresInRow === 1)
        log?.error(
          { err: error, backlogRows: queue.length },
          'audit sink: read audit rows not written, retrying',
        );
      const waitMs = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** (failuresInRow - 1));
      await new Promise((resolve) => keepAliveIfClosing(setTimeout(resolve, waitMs)));
      return;
    }
    const tookMs = performance.now() - started;
    // Rows are only ever added at the end: the batch is still the head of the queue.
    queue = queue.slice(batch.length);
    counts.rowsWritten += batch.length;
    counts.flushes += 1;
    flushSecondsSum += tookMs / 1000;
    commitEstimateMs = Math.min(flushMs, commitEstimateMs * 0.8 + tookMs * 0.2);
    if (failuresInRow > 0) {
      log?.info({ failedAttempts: failuresInRow, backlogRows: queue.length }, 'audit sink: writing again');
      failuresInRow = 0;
    }
  }

  function startFlush(): void {
    flushing = flushOnce().finally(() => {
      flushing = undefined;
      schedule();
    });
  }

  /** Arms the timer for the oldest row's deadline, unless a flush or a timer is already under way. */
  function schedule(): void {
    if (isClosed || timer !== undefined || flushing !== undefined || queue.length === 0) return;
    const delayMs =
      isClosing || queue.length >= maxBatchRows
        ? 0
        : Math.max(0, queue[0]!.offeredAt + flushMs - commitEstimateMs - performance.now());
    timer = keepAliveIfClosing(
      setTimeout(() => {
        timer = undefined;
        startFlush();
      }, delayMs),
    );
  }

  /**
   * The sink's timers never keep a running process alive by themselves (the server does), but once
   * `close` has begun they must: the rows left are written before the process may end.
   */
  function keepAliveIfClosing(handle: NodeJS.Timeout): NodeJS.Timeout {
    return isClosing ? handle : handle.unref();
  }

  return {
    offer(entry) {
      const reason = isClosed ? 'backlog' : refusal();
      if (reason !== lastRefusal) {
        if (reason === undefined) log?.info('audit sink caught up: reads answered again');
        else
          log?.error(
            { reason, backlogRows: queue.length, lagMs: Math.round(lagMs()) },
            'audit sink behind: reads refused (503) until it catches up',
          );
        lastRefusal = reason;
      }
      if (reason !== undefined) {
        counts.readsRefused += 1;
        return false;
      }
      queue.push({ row: toAuditRow(entry), offeredAt: performance.now() });
      schedule();
      return true;
    },
    refusal,
    stats: () => ({
      backlogRows: queue.length,
      lagSeconds: lagMs() / 1000,
      ...counts,
      flushSecondsSum,
      isRefusing: refusal() !== undefined,
    }),
    async close() {
      isClosing = true;
      if (queue.length > 0) log?.info({ backlogRows: queue.length }, 'audit sink: writing the rows left');
      while (queue.length > 0 || flushing !== undefined) {
        if (timer !== undefined) {
          clearTimeout(timer);
          timer = undefined;
        }
        if (flushing === undefined) startFlush();
        await flushing;
      }
      isClosed = true;
      await writer.close();
    },
  };
}
