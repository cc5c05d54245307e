/**
 * Export of the audit trail as JSON lines: one object per row, in (event_time, id) order, read page by
 * page so that any number of rows streams in constant memory. Times are ISO 8601 UTC (`...Z`); target ids
 * are numbers.
 */
import type { Kysely } from 'kysely';
import { formatDateTime, parseDateTime } from '../../db/database.ts';
import type { DB } from '../../db/schema.ts';
import type { AuditEventRow } from './audit.queries.ts';
import { countAuditEvents, selectAuditEvents } from './audit.queries.ts';

export interface AuditExportRange {
  /** Inclusive. */
  readonly since: Date;
  /** Exclusive; open-ended when omitted. */
  readonly until?: Date;
}

/** One exported line. */
export interface AuditExportRecord {
  readonly id: number;
  readonly event_time: string;
  readonly user_id: number | null;
  readonly action: string;
  readonly target_type: string | null;
  readonly target_ids: number[];
  readonly outcome: number;
  readonly client_address: string | null;
  readonly request_id: string;
  readonly client_request_id: string | null;
  readonly username: string | null;
  readonly detail: string | null;
}

const PAGE_ROWS = 1000;

/**
 * Parses an ISO 8601 date (`2026-11-22`, midnight UTC) or date-time (`2026-11-22T03:15:00Z`, with an
 * offset, or without one meaning UTC); undefined for anything else.
 */
export function parseIsoDateTime(text: string): Date | undefined {
  const match =
    /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?$/i.exec(
      text.trim(),
    );
  if (match === null) return undefined;
  const [, year, month, day, hour = '00', minute = '00', second = '00', zone = 'Z'] = match;
  const offset = zone.toUpperCase() === 'Z' ? 'Z' : `${zone.slice(0, 3)}:${zone.slice(-2)}`;
  const date = new Date(`${year}-${month}-${day}T${hour}:${minute}:${second}${offset}`);
  if (Number.isNaN(date.getTime())) return undefined;
  // Date rolls 2026-02-30 over to March: refuse dates that do not exist.
  const local = new Date(`${year}-${month}-${day}T00:00:00Z`);
  if (local.toISOString().slice(0, 10) !== `${year}-${month}-${day}`) return undefined;
  return date;
}

/**
 * The stored `YYYY-MM-DD HH:MM:SS` form, cut to the whole second like the stored times, so that windows
 * `[a, b)` and `[b, c)` split the rows exactly, with none twice and none missed.
 */
function storedText(date: Date): string {
  return formatDateTime(date);
}

function toRecord(row: AuditEventRow): AuditExportRecord {
  return {
    id: row.id,
    event_time: parseDateTime(row.event_time)?.toISOString().slice(0, 19).concat('Z') ?? row.event_time,
    user_id: row.user_id,
    action: row.action,
    target_type: row.target_type,
    target_ids: row.target_ids === null || row.target_ids === '' ? [] : row.target_ids.split(',').map(Number),
    outcome: row.outcome,
    client_address: row.client_address,
    request_id: row.request_id,
    client_request_id: row.client_request_id,
    username: row.username,
    detail: row.detail,
  };
}

/** Yields the rows of `range`, page by page. */
export async function* readAuditEvents(
  db: Kysely<DB>,
  range: AuditExportRange,
): AsyncGenerator<AuditExportRecord> {
  const since = storedText(range.since);
  const until = range.until === undefined ? undefined : storedText(range.until);
  let after: { eventTime: string; id: number } | undefined;
  for (;;) {
    const rows = await selectAuditEvents(db, { since, until, after, limit: PAGE_ROWS });
    for (const row of rows) yield toRecord(row);
    if (rows.length < PAGE_ROWS) return;
    const last = rows.at(-1)!;
    after = { eventTime: last.event_time, id: last.id };
  }
}

/** How many rows `range` holds. */
export async function countAuditRange(db: Kysely<DB>, range: AuditExportRange): Promise<number> {
  return countAuditEvents(
    db,
    storedText(range.since),
    range.until === undefined ? undefined : storedText(range.until),
  );
}

/** Writes the rows of `range` as JSON lines through `writeLine`; returns the row count. */
export async function exportAuditEvents(
  db: Kysely<DB>,
  range: AuditExportRange,
  writeLine: (line: string) => Promise<void> | void,
): Promise<number> {
  let count = 0;
  for await (const record of readAuditEvents(db, range)) {
    await writeLine(JSON.stringify(record));
    count += 1;
  }
  return count;
}
