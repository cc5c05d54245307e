/**
 * The operations console (`src/modules/console`): its sessions and signing key, the RBAC items its
 * screens check, and the indexes that keep its lists fast on large tables.
 *
 * - `console_session`: one row per signed-in browser. The cookie holds a random token; the row is keyed
 *   by its SHA-256, so the table alone cannot be replayed as cookies. Idle and absolute expiry are read
 *   from `last_seen_at` and `created_at`.
 * - `console_secret`: the key that signs console cookies when `CONSOLE_SESSION_SECRET` is unset, created
 *   once and shared by every server process.
 * - RBAC (inserted only when missing, so that an OpenEyes database keeps its own rows): the original's
 *   `Edit Payload Processor` -> `TaskEditAPIRequest` -> `OprnEditRequestData` (request admin),
 *   `OprnViewClinical` (the original's rule for the signature import log viewer, also used for
 *   attachments) under `TaskViewClinical`, and a new `OprnViewAuditLog` under `TaskViewAuditLog` and role
 *   `View Audit Log`.
 * - Indexes: every console list is read newest first in key order from an index that leads with the
 *   filter it drives (routine status, routine name, retried routines, request type, request detail
 *   name, import log status, audit action), so that a page never sorts or scans a whole table.
 */
import { sql } from 'kysely';
import type { AnyDb, DialectAdapter } from './helpers.ts';

const AUTH_ITEMS: readonly { name: string; type: number; description: string }[] = [
  { name: 'OprnEditRequestData', type: 0, description: 'Edit payload processor requests' },
  { name: 'TaskEditAPIRequest', type: 1, description: 'Edit payload processor requests' },
  { name: 'Edit Payload Processor', type: 2, description: 'Edit payload processor requests' },
  { name: 'OprnViewClinical', type: 0, description: 'View clinical data' },
  { name: 'TaskViewClinical', type: 1, description: 'View clinical data' },
  { name: 'OprnViewAuditLog', type: 0, description: 'View the audit log' },
  { name: 'TaskViewAuditLog', type: 1, description: 'View the audit log' },
  { name: 'View Audit Log', type: 2, description: 'View the audit log' },
];

const AUTH_ITEM_CHILDREN: readonly { parent: string; child: string }[] = [
  { parent: 'TaskEditAPIRequest', child: 'OprnEditRequestData' },
  { parent: 'Edit Payload Processor', child: 'TaskEditAPIRequest' },
  { parent: 'TaskViewClinical', child: 'OprnViewClinical' },
  { parent: 'TaskViewAuditLog', child: 'OprnViewAuditLog' },
  { parent: 'View Audit Log', child: 'TaskViewAuditLog' },
];

export async function up(db: AnyDb, dialect: DialectAdapter): Promise<void> {
  const t = dialect.columnTypes;
  await db.schema
    .createTable('console_session')
    .addColumn('id', 'varchar(64)', (c) => c.primaryKey())
    .addColumn('user_id', 'integer', (c) => c.notNull())
    .addColumn('csrf_secret', 'varchar(64)', (c) => c.notNull())
    .addColumn('created_at', t.dateTime, (c) => c.notNull())
    .addColumn('last_seen_at', t.dateTime, (c) => c.notNull())
    .execute();
  await db.schema
    .createIndex('console_session_last_seen')
    .on('console_session')
    .column('last_seen_at')
    .execute();
  await db.schema
    .createTable('console_secret')
    .addColumn('name', 'varchar(32)', (c) => c.primaryKey())
    .addColumn('value', 'varchar(128)', (c) => c.notNull())
    .execute();

  const items = new Set(
    (await db.selectFrom('authitem').select('name').execute()).map((r: { name: string }) => r.name),
  );
  const missingItems = AUTH_ITEMS.filter((item) => !items.has(item.name));
  if (missingItems.length > 0) {
    await db
      .insertInto('authitem')
      .values(missingItems.map((item) => ({ ...item, bizrule: null, data: null })))
      .execute();
  }
  const edges = new Set(
    (await db.selectFrom('authitemchild').select(['parent', 'child']).execute()).map(
      (r: { parent: string; child: string }) => `${r.parent}\n${r.child}`,
    ),
  );
  const missingEdges = AUTH_ITEM_CHILDREN.filter((edge) => !edges.has(`${edge.parent}\n${edge.child}`));
  if (missingEdges.length > 0) await db.insertInto('authitemchild').values(missingEdges).execute();

  const index = (name: string, table: string, columns: string[]) =>
    db.schema.createIndex(name).on(table).columns(columns).execute();
  await index('request_routine_status_request', 'request_routine', ['status', 'request_id']);
  await index('request_routine_name_request', 'request_routine', ['routine_name', 'request_id']);
  // Partial: only routines tried more than once, a small part of the table. The predicate is written as
  // a literal so that queries with the same literal can use the index (a bound parameter cannot). MySQL
  // has no partial index: `try_count > 1` is a range of a (try_count, request_id) index there.
  if (dialect.name === 'mysql')
    await index('request_routine_retried', 'request_routine', ['try_count', 'request_id']);
  else
    await sql`create index request_routine_retried on request_routine (request_id) where try_count > 1`.execute(
      db,
    );
  await index('request_request_type_id', 'request', ['request_type', 'id']);
  await index('request_details_name_request', 'request_details', ['name', 'request_id']);
  await index('signature_import_log_status', 'signature_import_log', ['status_id', 'id']);
  await index('audit_event_action_time', 'audit_event', ['action', 'event_time', 'id']);
}
