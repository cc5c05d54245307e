/**
 * PostgreSQL form of the intake write. Why a dialect file: PostgreSQL runs data-modifying CTEs, so the
 * request, its attachment rows and its first routine go to the server as ONE statement (one round trip,
 * its own implicit transaction) instead of BEGIN, three INSERTs and COMMIT. SQLite has no INSERT inside
 * WITH; it uses `insertQueuedRequest` inside a transaction (intake.queries.ts). Both write the same rows.
 */
import type { Kysely } from 'kysely';
import { CompiledQuery, sql } from 'kysely';
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
  // Building and compiling this statement costs more CPU than the rest of intake together, and its
  // text depends only on the number of attachment rows: compile once per count, then send the cached
  // text with the parameters in Kysely's order (checked against Kysely's own on the first use).
  const count = rows.attachments.length;
  const parameters = parametersOf(rows);
  let text = compiledTexts.get(count);
  if (text === undefined) {
    const compiled = buildStatement(db, rows).compile();
    const isSameOrder =
      compiled.parameters.length === parameters.length &&
      compiled.parameters.every((value, i) => value === parameters[i]);
    if (!isSameOrder) {
      const fallback = await db.executeQuery<{ id: number }>(compiled);
      return fallback.rows[0]!.id;
    }
    text = compiled.sql;
    if (count <= MAX_CACHED_COUNT) compiledTexts.set(count, text);
  }
  const result = await db.executeQuery<{ id: number }>(CompiledQuery.raw(text, parameters));
  return result.rows[0]!.id;
}

/** Attachment-row counts whose statement text is kept (requests carry 3 rows, plus one per file). */
const MAX_CACHED_COUNT = 32;
const compiledTexts = new Map<number, string>();

/** The statement's parameters in the order of {@link buildStatement}'s values. */
function parametersOf(rows: QueuedRequestRows): unknown[] {
  const audit = [rows.userId, rows.userId, rows.now, rows.now];
  const parameters: unknown[] = [rows.route.requestType, rows.systemMessage, null, ...audit];
  for (const a of rows.attachments) {
    parameters.push(
      a.mnemonic,
      null,
      0,
      'NONE',
      a.mimeType,
      a.blobData,
      a.textData,
      a.uploadFileName,
      a.hashCode,
      ...audit,
    );
  }
  parameters.push(rows.route.queue, 'NEW', rows.route.routineName, 0, null, 10, null);
  return parameters;
}

function buildStatement(db: Kysely<DB>, rows: QueuedRequestRows) {
  const audit = {
    created_user_id: rows.userId,
    last_modified_user_id: rows.userId,
    created_date: rows.now,
    last_modified_date: rows.now,
  };
  return db
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
    .select('id');
}
