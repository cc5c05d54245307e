/**
 * The audit trail writer: group commit. `record(entry)` queues one row and resolves only once the batch
 * holding it is committed, so a caller that awaits it before answering never answers a call whose audit
 * row could still be lost. Entries that arrive while a batch is being written wait for the next one, so
 * under load many requests share one multi-row insert (and on SQLite one commit and one fsync), and at low
 * load a lone entry is written at once: no timer adds latency.
 *
 * Each batch is one multi-row insert in autocommit (`createAuditInserter`): one statement, prepared once
 * per batch size; on PostgreSQL one round trip, on SQLite no begin, savepoint or commit statements (its
 * WAL flush is shared with any commit made meanwhile: a flush covers every commit before it).
 */
import type { Database } from '../../db/database.ts';
import { formatDateTime } from '../../db/database.ts';
import type { NewAuditEventRow } from './audit.queries.ts';
import { createAuditInserter } from './audit.queries.ts';

export interface AuditEntry {
  readonly action: string;
  /** The authenticated caller, or null (open endpoint, refused before authentication). */
  readonly userId: number | null;
  readonly targetType: string | null;
  /** Internal ids only (never identifiers, names or terms): the type makes anything else impossible. */
  readonly targetIds: readonly number[];
  /** HTTP status of the answer. */
  readonly outcome: number;
  readonly clientAddress: string | null;
  /** The server-generated request id. */
  readonly requestId: string;
  /** The client's `X-Request-Id`, if it sent a sane one. */
  readonly clientRequestId?: string | null;
  /** The acting account's name beside `userId` (API: the authenticated username; CLI: the OS account). */
  readonly username?: string | null;
  /** Short words the ids cannot say; never patient data. */
  readonly detail?: string | null;
  /** Defaults to now. */
  readonly at?: Date;
}

export interface AuditTrail {
  /** Queues `entry`; resolves when its row is committed, rejects when its batch failed. */
  record(entry: AuditEntry): Promise<void>;
  /** Resolves once every entry queued so far has been written (or has failed). */
  flush(): Promise<void>;
}

export interface AuditTrailOptions {
  /** Rows per insert statement (10 parameters each: well under both dialects' parameter limits). */
  readonly maxBatchRows?: number;
}

interface PendingEntry {
  readonly row: NewAuditEventRow;
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

const DEFAULT_MAX_BATCH_ROWS = 500;

export function createAuditTrail(database: Database, options: AuditTrailOptions = {}): AuditTrail {
  const maxBatchRows = options.maxBatchRows ?? DEFAULT_MAX_BATCH_ROWS;
  let pending: PendingEntry[] = [];
  let draining: Promise<void> | undefined;

  const write = createAuditInserter(database);

  async function drain(): Promise<void> {
    try {
      // Let the responses finishing in this turn of the event loop join the first batch.
      await new Promise<void>((resolve) => setImmediate(resolve));
      while (pending.length > 0) {
        const batch = pending.slice(0, maxBatchRows);
        pending = pending.slice(batch.length);
        try {
          await write(batch.map((entry) => entry.row));
        } catch (error) {
          for (const entry of batch) entry.reject(error);
          continue;
        }
        for (const entry of batch) entry.resolve();
      }
    } finally {
      draining = undefined;
    }
  }

  return {
    record(entry) {
      return new Promise<void>((resolve, reject) => {
        pending.push({ row: toAuditRow(entry), resolve, reject });
        draining ??= drain();
      });
    },
    async flush() {
      while (draining !== undefined) await draining;
    },
  };
}

const ID = /^\d{1,20}$/;

/** The stored row; bounded text so that one odd value can never fail a whole batch. */
export function toAuditRow(entry: AuditEntry): NewAuditEventRow {
  const ids = entry.targetIds.map((id) => String(id)).filter((id) => ID.test(id));
  return {
    event_time: formatDateTime(entry.at ?? new Date()),
    user_id: entry.userId,
    action: entry.action.slice(0, 64),
    target_type: entry.targetType === null ? null : entry.targetType.slice(0, 32),
    target_ids: ids.length === 0 ? null : ids.join(','),
    outcome: entry.outcome,
    client_address: entry.clientAddress === null ? null : entry.clientAddress.slice(0, 64),
    request_id: entry.requestId.slice(0, 64),
    client_request_id: entry.clientRequestId?.slice(0, 64) ?? null,
    username: entry.username === undefined || entry.username === null ? null : entry.username.slice(0, 64),
    detail: entry.detail === undefined || entry.detail === null ? null : entry.detail.slice(0, 255),
  };
}
