/**
 * `audit_event.client_request_id`: the `X-Request-Id` the client sent (when it was sane), kept beside the
 * server-generated `request_id`. The request id of a row is always the server's, so that a client can
 * neither choose it nor make two calls share it; the client's value stays available for correlating
 * with the client's own logs. Adding a nullable column is allowed by the append-only triggers (they
 * refuse row updates and deletes, not schema changes).
 */
import type { AnyDb } from './helpers.ts';

export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('audit_event').addColumn('client_request_id', 'varchar(64)').execute();
}
