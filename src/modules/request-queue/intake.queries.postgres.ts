/**
 * PostgreSQL form of the intake write. Why a dialect file: PostgreSQL runs data-modifying CTEs, so the
 * request, its attachment rows and its first routine go to the server as ONE statement (one round trip,
 * its own implicit transaction) instead of BEGIN, three INSERTs and COMMIT. SQLite has no INSERT inside
 * WITH; it uses `insertQueuedRequest` inside a transaction (intake.queries.ts). Both write the same rows.
 */
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { QueuedRequestRows } from './intake.queries.ts';

/**
 * Writes one queued request atomically; resolves to its id once committed. `rows.attachments` must not
 * be empty (an INSERT needs at least one row).
 */
export async function insertQueuedRequestInOneStatement(
  db: Kysely<DB>,
  rows: QueuedRequestRows,
): Promise<number> {
  const audit = {
    created_user_id: rows.userId,
    last_modified_user_id: rows.userId,
    created_date: rows.now,
    last_modified_date: rows.now,
  };
  const result = await db
    .with('new_request', (qc) =>
      qc
        .insertInto('request')
        .values({
          request_type: rows.route.requestType,
          system_message: rows.systemMessage,
          request_override_default_queue: null,
          ...audit,
        })
        .returning('id'),
    )
    .with('new_attachments', (qc) =>
      qc.insertInto('attachment_data').values(
        rows.attachments.map((a) => ({
          // Every row with the same keys, as the SQLite form needs too.
          request_id: sql<number>`(select id from new_request)`,
          attachment_mnemonic: a.mnemonic,
          body_site_snomed_type: null,
          system_only_managed: 0,
          attachment_type: 'NONE',
          mime_type: a.mimeType,
          blob_data: a.blobData,
          text_data: a.textData,
          upload_file_name: a.uploadFileName,
          hash_code: a.hashCode,
          ...audit,
        })),
      ),
    )
    .with('new_routine', (qc) =>
      qc.insertInto('request_routine').values({
        request_id: sql<number>`(select id from new_request)`,
        execute_request_queue: rows.route.queue,
        status: 'NEW',
        routine_name: rows.route.routineName,
        try_count: 0,
        next_try_date_time: null,
        execute_sequence: 10,
        hash_code: null,
      }),
    )
    .selectFrom('new_request')
    .select('id')
    .executeTakeFirstOrThrow();
  return result.id;
}
