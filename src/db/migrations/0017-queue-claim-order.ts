/**
 * The index of the claim's order (`request-queue/engine/claim.queries.ts`): (queue, status, request,
 * id), so that a queue's routines of one status are read oldest request first as one index range that
 * stops at the claim's limit, on every engine. It replaces the (queue, status, id) index, whose other
 * readers (the queue gauges count routines by queue and status) it serves too, and on PostgreSQL and
 * SQLite the partial index of the pending routines in id order, which the claim no longer reads: a
 * claim names one status, so the index range holds only that status's routines without a partial
 * index (SQLite could not use one here and keep the order: it proves a partial index's condition only
 * from the same IN, and then sorts).
 */
import { sql } from 'kysely';
import type { AnyDb, DialectAdapter } from './helpers.ts';

export async function up(db: AnyDb, dialect: DialectAdapter): Promise<void> {
  await db.schema
    .createIndex('request_routine_claim')
    .on('request_routine')
    .columns(['execute_request_queue', 'status', 'request_id', 'id'])
    .execute();
  if (dialect.name === 'mysql') {
    await sql`drop index request_routine_queue_status on request_routine`.execute(db);
    return;
  }
  await db.schema.dropIndex('request_routine_queue_status').execute();
  await db.schema.dropIndex('request_routine_pending').execute();
}
