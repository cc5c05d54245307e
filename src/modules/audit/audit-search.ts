/**
 * Searching the audit trail (the console's audit screen): by user, patient, action, outcome and time,
 * newest first, one page at a time with a bounded cost (`window-scan.ts`), and the whole selection for a
 * CSV export. "Patient" means rows whose targets are patients (patient search answers name the patient
 * ids they returned); rows about attachments, requests or import logs name those records instead.
 */
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { ScanWindow } from '../../db/window-scan.ts';
import { scanPage } from '../../db/window-scan.ts';
import type { AuditEventRow } from './audit.queries.ts';
import { withAuditTable } from './audit.queries.ts';

export interface AuditSearchFilter {
  /** Rows of these users; an empty list matches nothing (an unknown username). */
  readonly userIds?: readonly number[];
  /** Rows whose targets include one of these patients; an empty list matches nothing. */
  readonly patientIds?: readonly number[];
  /** The action, e.g. `patient.search` or `console.request.retry`. */
  readonly action?: string;
  /** HTTP status range of the answer, inclusive (a single status or a class such as 400-499). */
  readonly outcome?: { readonly min: number; readonly max: number };
  /** `event_time` from (inclusive) and to (exclusive), stored `YYYY-MM-DD HH:MM:SS` UTC text. */
  readonly from?: string;
  readonly to?: string;
}

/** A position in the trail: rows are ordered by (event_time, id), newest first. */
export interface AuditKey {
  readonly eventTime: string;
  readonly id: number;
}

export interface AuditSearchPage {
  readonly rows: readonly AuditEventRow[];
  /** The next page lists rows below this key; undefined at the end. */
  readonly next: AuditKey | undefined;
  /** The page stopped at its time budget before it was full. */
  readonly isPartial: boolean;
}

export interface AuditSearchOptions {
  readonly before?: AuditKey;
  readonly pageSize?: number;
  /** Time budget of one page in ms; 0 = none (exports). */
  readonly budgetMs?: number;
  readonly windowSize?: number;
}

function isEmptySelection(filter: AuditSearchFilter): boolean {
  return filter.userIds?.length === 0 || filter.patientIds?.length === 0;
}

/**
 * Reads one window: the candidates below `after` from the index that serves the filter (user, action,
 * else time), then the rows among them that pass every filter.
 */
async function readWindow(
  db: Kysely<DB>,
  filter: AuditSearchFilter,
  after: AuditKey | undefined,
  limit: number,
  windowSize: number,
): Promise<ScanWindow<AuditEventRow, AuditKey>> {
  const adb = withAuditTable(db);
  let candidates = adb.selectFrom('audit_event').select(['id', 'event_time']);
  const userIds = filter.userIds;
  if (userIds !== undefined && userIds.length === 1)
    candidates = candidates.where('user_id', '=', userIds[0]!);
  else if (filter.action !== undefined) candidates = candidates.where('action', '=', filter.action);
  if (filter.from !== undefined) candidates = candidates.where('event_time', '>=', filter.from);
  if (filter.to !== undefined) candidates = candidates.where('event_time', '<', filter.to);
  // Each keyset bound is also given as a plain range on `event_time`, which the planners use for the
  // index range (an `or` alone is not read as one).
  if (after !== undefined) {
    candidates = candidates
      .where('event_time', '<=', after.eventTime)
      .where((eb) =>
        eb.or([
          eb('event_time', '<', after.eventTime),
          eb.and([eb('event_time', '=', after.eventTime), eb('id', '<', after.id)]),
        ]),
      );
  }
  // The window is the key range [last, after) of the next `windowSize` candidates: its lower end is read
  // from the driving index alone (one index step per candidate), then the rows by range with the filters.
  const last = await candidates
    .orderBy('event_time', 'desc')
    .orderBy('id', 'desc')
    .limit(1)
    .offset(windowSize - 1)
    .executeTakeFirst();
  const low = last === undefined ? undefined : { eventTime: last.event_time, id: last.id };

  let query = adb.selectFrom('audit_event as a').selectAll('a');
  if (userIds !== undefined) query = query.where('a.user_id', 'in', [...userIds]);
  if (filter.action !== undefined) query = query.where('a.action', '=', filter.action);
  if (filter.from !== undefined) query = query.where('a.event_time', '>=', filter.from);
  if (filter.to !== undefined) query = query.where('a.event_time', '<', filter.to);
  if (after !== undefined) {
    query = query
      .where('a.event_time', '<=', after.eventTime)
      .where((eb) =>
        eb.or([
          eb('a.event_time', '<', after.eventTime),
          eb.and([eb('a.event_time', '=', after.eventTime), eb('a.id', '<', after.id)]),
        ]),
      );
  }
  if (low !== undefined) {
    query = query
      .where('a.event_time', '>=', low.eventTime)
      .where((eb) =>
        eb.or([
          eb('a.event_time', '>', low.eventTime),
          eb.and([eb('a.event_time', '=', low.eventTime), eb('a.id', '>=', low.id)]),
        ]),
      );
  }
  const outcome = filter.outcome;
  if (outcome !== undefined)
    query = query.where('a.outcome', '>=', outcome.min).where('a.outcome', '<=', outcome.max);
  const patientIds = filter.patientIds;
  if (patientIds !== undefined) {
    // `target_ids` is a comma-separated list: match whole ids only.
    query = query
      .where('a.target_type', '=', 'patient')
      .where((eb) =>
        eb.or(patientIds.map((id) => eb(sql`concat(',', a.target_ids, ',')`, 'like', `%,${id},%`))),
      );
  }
  const rows = await query.orderBy('a.event_time', 'desc').orderBy('a.id', 'desc').limit(limit).execute();
  if (low !== undefined) return { rows, lastKey: low, isExhausted: false };
  // Fewer than `windowSize` candidates remained: this window reached the end.
  return { rows, lastKey: rows.at(-1) === undefined ? undefined : keyOf(rows.at(-1)!), isExhausted: true };
}

function keyOf(row: AuditEventRow): AuditKey {
  return { eventTime: row.event_time, id: row.id };
}

/** One page of audit rows matching `filter`, newest first. */
export async function searchAuditEvents(
  db: Kysely<DB>,
  filter: AuditSearchFilter,
  options: AuditSearchOptions = {},
): Promise<AuditSearchPage> {
  if (isEmptySelection(filter)) return { rows: [], next: undefined, isPartial: false };
  const windowSize = options.windowSize ?? 2000;
  const page = await scanPage<AuditEventRow, AuditKey>({
    pageSize: options.pageSize ?? 50,
    budgetMs: options.budgetMs ?? 30,
    start: options.before,
    keyOf,
    readWindow: (after, limit) => readWindow(db, filter, after, limit, windowSize),
  });
  return page;
}

/** Every row of the selection, newest first, in batches (for exports of any size in bounded memory). */
export async function* readAuditSelection(
  db: Kysely<DB>,
  filter: AuditSearchFilter,
  batchRows = 1000,
): AsyncGenerator<readonly AuditEventRow[]> {
  let before: AuditKey | undefined;
  for (;;) {
    const page = await searchAuditEvents(db, filter, {
      before,
      pageSize: batchRows,
      budgetMs: 0,
      windowSize: 5000,
    });
    if (page.rows.length > 0) yield page.rows;
    if (page.next === undefined) return;
    before = page.next;
  }
}

/**
 * One CSV line (RFC 4180: fields quoted when they hold a comma, quote or line break, quotes doubled),
 * CRLF-terminated. A text field that a spreadsheet would read as a formula (`=`, `+`, `-`, `@`, tab or
 * CR first) is prefixed with `'`, so an exported value can never run as one.
 */
export function csvLine(cells: readonly (string | number | null)[]): string {
  return `${cells
    .map((cell) => {
      if (cell === null) return '';
      if (typeof cell === 'number') return String(cell);
      const text = /^[=+\-@\t\r]/.test(cell) ? `'${cell}` : cell;
      return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
    })
    .join(',')}\r\n`;
}
