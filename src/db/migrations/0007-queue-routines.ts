/**
 * Queue processing seed: the routine library of the TypeScript routine catalog, the spec's
 * example request types (`diagnostic_data`, `imaging`, `form_data`) with their default routine and queue,
 * a `noop` request type (pipeline health check and benchmark), and the event type + element type the
 * attach routine files payloads under. No new columns: crash recovery relies on the transaction that holds
 * the claimed request row (PostgreSQL releases it when the worker's connection dies; SQLite rolls back an
 * uncommitted WAL transaction), so no lease column is needed.
 */
import { sql } from 'kysely';
import type { AnyDb, DialectAdapter } from './helpers.ts';

export const QUEUE_ROUTINE_NAMES = [
  'PATIENT_MATCH',
  'MAKE_THUMBNAILS',
  'ATTACH_TO_EVENT',
  'CLEAN_UP',
  'NOOP',
] as const;

export async function up(db: AnyDb, dialect: DialectAdapter): Promise<void> {
  // Claiming walks the pending routines of a queue in id order and stops at the first eligible, unlocked
  // one; this partial index gives that order directly instead of sorting every pending routine per claim.
  // MySQL has no partial index: it reads `request_routine_queue_status` (queue, status, id) instead.
  if (dialect.name !== 'mysql') {
    await sql`create index request_routine_pending on request_routine (execute_request_queue, id) where status in ('NEW', 'RETRY')`.execute(
      db,
    );
  }
  const existing = new Set(
    (await db.selectFrom('routine_library').select('routine_name').execute()).map(
      (r: { routine_name: string }) => r.routine_name,
    ),
  );
  const missing = QUEUE_ROUTINE_NAMES.filter((name) => !existing.has(name));
  if (missing.length > 0) {
    await db
      .insertInto('routine_library')
      .values(missing.map((routine_name) => ({ routine_name, hash_code: null })))
      .execute();
  }

  const queue = await db
    .selectFrom('request_queue')
    .select('request_queue')
    .where('request_queue', '=', 'default_queue')
    .executeTakeFirst();
  if (queue === undefined) {
    await db
      .insertInto('request_queue')
      .values({
        request_queue: 'default_queue',
        maximum_active_threads: 5,
        busy_yield_ms: 1000,
        idle_yield_ms: 1000,
      })
      .execute();
  }

  const types = [
    ['diagnostic_data', 'Diagnostic data', 'Diagnostic data'],
    ['imaging', 'Imaging', 'Imaging'],
    ['form_data', 'Form data', 'Form data'],
  ] as const;
  const knownTypes = new Set(
    (await db.selectFrom('request_type').select('request_type').execute()).map(
      (r: { request_type: string }) => r.request_type,
    ),
  );
  const newTypes = [
    ...types.map(([request_type, title_full, title_short]) => ({
      request_type,
      title_full,
      title_short,
      default_routine_name: 'PATIENT_MATCH',
      default_request_queue: 'default_queue',
    })),
    {
      request_type: 'noop',
      title_full: 'No operation (health check)',
      title_short: 'No operation',
      default_routine_name: 'NOOP',
      default_request_queue: 'default_queue',
    },
  ].filter((t) => !knownTypes.has(t.request_type));
  if (newTypes.length > 0) await db.insertInto('request_type').values(newTypes).execute();

  // The attach routine files payloads as an OphGeneric "Document" event with an attachment element, as the
  // original's image events do. Reuse rows an earlier migration may have created.
  let eventType = await db
    .selectFrom('event_type')
    .select('id')
    .where('class_name', '=', 'OphGeneric')
    .executeTakeFirst();
  if (eventType === undefined) {
    eventType = await db
      .insertInto('event_type')
      .values({
        name: 'Document',
        class_name: 'OphGeneric',
        event_group_id: null,
        parent_id: null,
        rbac_operation_suffix: null,
        show_attachments: 1,
        can_be_created_manually: 0,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
  }
  const element = await db
    .selectFrom('element_type')
    .select('id')
    .where('class_name', '=', 'Element_OphGeneric_Attachment')
    .executeTakeFirst();
  if (element === undefined) {
    await db
      .insertInto('element_type')
      .values({
        name: 'Attachment',
        class_name: 'Element_OphGeneric_Attachment',
        event_type_id: eventType.id,
        parent_element_type_id: null,
        table_name: 'event_attachment_group',
      })
      .execute();
  }
}
