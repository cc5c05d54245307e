/**
 * SQL of the audit trail: one multi-row insert per batch, and keyset-paged reads for the export. There
 * is no update or delete here on purpose (the table is append-only, enforced by triggers).
 */
import type { Generated, Insertable, Kysely, Selectable } from 'kysely';
import type { BackgroundWriter } from '../../db/background-writer.ts';
import { createShapeCache, runCompiled } from '../../db/compiled-queries.ts';
import type { Database } from '../../db/database.ts';
import type { BulkColumn } from '../../db/dialect.ts';
import type { DB } from '../../db/schema.ts';

/** `audit_event` (migrations 0009, 0012, 0013). Not in `DB`: it is not part of the dataset format. */
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
  /** Server-generated (never the client's). */
  request_id: string;
  /** The client's `X-Request-Id`, when it sent a sane one (migration 0012). */
  client_request_id: string | null;
  /** The acting account's name (API: the authenticated username; CLI: the operating-system account). */
  username: string | null;
  /** Short words the ids cannot say (the RBAC item of a role grant, ...); never patient data. */
  detail: string | null;
}

export type AuditTables = { audit_event: AuditEventTable };
export type AuditEventRow = Selectable<AuditEventTable>;
export type NewAuditEventRow = Insertable<AuditEventTable>;

/** The same Kysely instance (or transaction), typed with `audit_event`. */
export function withAuditTable<T extends Kysely<DB>>(db: T): Kysely<DB & AuditTables> {
  return db.withTables<AuditTables>();
}

const AUDIT_COLUMNS = [
  'event_time',
  'user_id',
  'action',
  'target_type',
  'target_ids',
  'outcome',
  'client_address',
  'request_id',
  'client_request_id',
  'username',
  'detail',
] as const satisfies readonly (keyof NewAuditEventRow)[];

/** Portable types of the audit columns, for a bulk insert (PostgreSQL binds each column as a typed array). */
const AUDIT_COLUMN_TYPES = {
  event_time: 'timestamp',
  user_id: 'int4',
  action: 'text',
  target_type: 'text',
  target_ids: 'text',
  outcome: 'int4',
  client_address: 'text',
  request_id: 'text',
  client_request_id: 'text',
  username: 'text',
  detail: 'text',
} as const satisfies Record<(typeof AUDIT_COLUMNS)[number], BulkColumn['type']>;

/**
 * A writer of audit rows through a background writer (the read audit sink, on a connection of its own):
 * each call inserts `rows` in one transaction, durable when it resolves. Every row gets every column.
 */
export function createBackgroundAuditInserter(
  writer: BackgroundWriter,
): (rows: readonly NewAuditEventRow[]) => Promise<void> {
  const columns = AUDIT_COLUMNS.map((name) => ({ name, type: AUDIT_COLUMN_TYPES[name] }));
  return (rows) =>
    writer.insertRows(
      'audit_event',
      columns,
      rows.map((row) => AUDIT_COLUMNS.map((column) => row[column] ?? null)),
    );
}

/**
 * A writer of audit rows: each call inserts `rows` in one statement, in autocommit, durable when it
 * resolves (SQLite: the executor flushes the WAL after a committed write; PostgreSQL: the commit). A
 * single statement is atomic on its own, so no transaction (and on SQLite none of the four extra
 * statements of a batched write transaction) is needed. The statement is compiled once per row count
 * and runs as a prepared statement (`runCompiled`). Every row gets every column (absent ones as NULL),
 * so no column goes NULL by accident.
 */
export function createAuditInserter(
  database: Database,
): (rows: readonly NewAuditEventRow[]) => Promise<void> {
  const shapes = createShapeCache(64);
  return async (rows) => {
    if (rows.length === 0) return;
    const values = rows.flatMap((row) => AUDIT_COLUMNS.map((column) => row[column] ?? null));
    const query = shapes.compile(String(rows.length), values, (slots) =>
      withAuditTable(database.db)
        .insertInto('audit_event')
        .values(
          rows.map((_, r) =>
            Object.fromEntries(
              AUDIT_COLUMNS.map((column, c) => [column, slots[r * AUDIT_COLUMNS.length + c]]),
            ),
          ) as unknown as NewAuditEventRow[],
        ),
    );
    await runCompiled(database, query);
  };
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

/** How many rows fall in `[since, until)` (for the export's progress), served by the `audit_event_time` index. */
export async function countAuditEvents(
  db: Kysely<DB>,
  since: string,
  until: string | undefined,
): Promise<number> {
  let query = withAuditTable(db)
    .selectFrom('audit_event')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('event_time', '>=', since);
  if (until !== undefined) query = query.where('event_time', '<', until);
  const row = await query.executeTakeFirstOrThrow();
  return Number(row.count);
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

/**
 * The latest audited call of each of `userIds` (an authenticated API call, whatever its outcome), served
 * by the `audit_event_user` index; users without one are absent from the map.
 */
export async function findLastActivity(
  db: Kysely<DB>,
  userIds: readonly number[],
): Promise<Map<number, string>> {
  const last = new Map<number, string>();
  if (userIds.length === 0) return last;
  const rows = await withAuditTable(db)
    .selectFrom('audit_event')
    .select(['user_id', (eb) => eb.fn.max('event_time').as('last_time')])
    .where('user_id', 'in', userIds)
    .groupBy('user_id')
    .execute();
  for (const row of rows) {
    if (row.user_id !== null && row.last_time !== null) last.set(row.user_id, String(row.last_time));
  }
  return last;
}
