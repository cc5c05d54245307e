/**
 * SQL of the audit trail: one multi-row insert per batch, and keyset-paged reads for the export. There
 * is no update or delete here on purpose (the table is append-only, enforced by triggers).
 */
import type { Generated, Insertable, Kysely, Selectable } from 'kysely';
import type { DB } from '../../db/schema.ts';

/** `audit_event` (migration 0009). Not in `DB`: it is not part of the dataset format. */
export interface AuditEventTable {
  id: Generated<number>;
  /** `YYYY-MM-DD HH:MM:SS` UTC, when the answer was produced. */
  event_time: string;
  /** The authenticated caller; null for the open `sign/add` and for callers not authenticated. */
  user_id: number | null;
  action: string;
  target_type: string | null;
  /** Comma-separated ids of `target_type`, in answer order. */
  target_ids: string | null;
  /** HTTP status of the answer. */
  outcome: number;
  client_address: string | null;
  request_id: string;
}

export type AuditTables = { audit_event: AuditEventTable };
export type AuditEventRow = Selectable<AuditEventTable>;
export type NewAuditEventRow = Insertable<AuditEventTable>;

/** The same Kysely instance (or transaction), typed with `audit_event`. */
export function withAuditTable<T extends Kysely<DB>>(db: T): Kysely<DB & AuditTables> {
  return db.withTables<AuditTables>();
}

/** Inserts `rows` in one statement (every row has the same keys, so no column goes NULL by accident). */
export async function insertAuditEvents(db: Kysely<DB>, rows: readonly NewAuditEventRow[]): Promise<void> {
  if (rows.length === 0) return;
  await withAuditTable(db).insertInto('audit_event').values(rows).execute();
}

export interface AuditEventPage {
  /** Inclusive lower bound on `event_time` (stored text form). */
  readonly since: string;
  /** Exclusive upper bound on `event_time`, if any. */
  readonly until: string | undefined;
  /** The last row of the previous page (keyset paging), if any. */
  readonly after: { readonly eventTime: string; readonly id: number } | undefined;
  readonly limit: number;
}

/** One page of rows in (event_time, id) order, served by the `audit_event_time` index. */
export async function selectAuditEvents(db: Kysely<DB>, page: AuditEventPage): Promise<AuditEventRow[]> {
  let query = withAuditTable(db).selectFrom('audit_event').selectAll().where('event_time', '>=', page.since);
  if (page.until !== undefined) query = query.where('event_time', '<', page.until);
  const after = page.after;
  if (after !== undefined) {
    query = query.where((eb) =>
      eb.or([
        eb('event_time', '>', after.eventTime),
        eb.and([eb('event_time', '=', after.eventTime), eb('id', '>', after.id)]),
      ]),
    );
  }
  return query.orderBy('event_time').orderBy('id').limit(page.limit).execute();
}
