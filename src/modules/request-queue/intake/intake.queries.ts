/**
 * SQL of queue intake, written once for both dialects: the look-ups that validation needs and the writes
 * of one queued request (request, its attachment_data rows, its first request_routine).
 */
import type { Expression, InsertObject, Kysely } from 'kysely';
import { attachmentDataRow } from '../../attachment-data/index.ts';
import { hasLargeBlob } from '../../../db/dialects/multi-row-insert.ts';
import type { DB, NewRow } from '../../../db/schema.ts';

/** Where a request type's work starts: its default routine and queue. */
export interface RequestTypeRoute {
  readonly requestType: string;
  readonly routineName: string;
  readonly queue: string;
}

export async function findRequestTypeRoute(
  db: Kysely<DB>,
  requestType: string,
): Promise<RequestTypeRoute | undefined> {
  const row = await db
    .selectFrom('request_type')
    .select(['request_type', 'default_routine_name', 'default_request_queue'])
    .where('request_type', '=', requestType)
    .executeTakeFirst();
  return row === undefined
    ? undefined
    : {
        requestType: row.request_type,
        routineName: row.default_routine_name,
        queue: row.default_request_queue,
      };
}

/** The subset of `mimeTypes` present in the `mime_type` table. */
export async function findKnownMimeTypes(db: Kysely<DB>, mimeTypes: readonly string[]): Promise<Set<string>> {
  if (mimeTypes.length === 0) return new Set();
  const rows = await db
    .selectFrom('mime_type')
    .select('mime_type')
    .where('mime_type', 'in', [...new Set(mimeTypes)])
    .execute();
  return new Set(rows.map((r) => r.mime_type));
}

/** One `attachment_data` row of a new request, before it has a request id. */
export interface AttachmentRowInput {
  readonly mnemonic: string;
  readonly mimeType: string;
  readonly textData: string | null;
  readonly blobData: Buffer | null;
  readonly uploadFileName: string | null;
  readonly hashCode: number | null;
}

export interface QueuedRequestRows {
  readonly route: RequestTypeRoute;
  readonly systemMessage: string;
  readonly attachments: readonly AttachmentRowInput[];
  readonly userId: number;
  /** `YYYY-MM-DD HH:MM:SS` of the audit columns. */
  readonly now: string;
}

function auditOf(rows: QueuedRequestRows) {
  return {
    created_user_id: rows.userId,
    last_modified_user_id: rows.userId,
    created_date: rows.now,
    last_modified_date: rows.now,
  };
}

/** The `request` row of a submission. */
export function requestRowOf(rows: QueuedRequestRows): NewRow<'request'> {
  return {
    request_type: rows.route.requestType,
    system_message: rows.systemMessage,
    request_override_default_queue: null,
    ...auditOf(rows),
  };
}

/** The `attachment_data` rows of a submission, as their owner builds them. */
export function attachmentRowsOf(
  requestId: number | Expression<number>,
  rows: QueuedRequestRows,
): InsertObject<DB, 'attachment_data'>[] {
  const stamp = { userId: rows.userId, now: rows.now };
  return rows.attachments.map((a) =>
    attachmentDataRow(
      {
        requestId,
        mnemonic: a.mnemonic,
        mimeType: a.mimeType,
        blobData: a.blobData,
        textData: a.textData,
        uploadFileName: a.uploadFileName,
        hashCode: a.hashCode,
      },
      stamp,
    ),
  );
}

/** The first routine of a submission: NEW, try count 0, sequence 10, no next try, as OpenEyes saves it. */
export function firstRoutineRowOf(
  requestId: number | Expression<number>,
  rows: QueuedRequestRows,
): InsertObject<DB, 'request_routine'> {
  return {
    request_id: requestId,
    execute_request_queue: rows.route.queue,
    status: 'NEW',
    routine_name: rows.route.routineName,
    try_count: 0,
    next_try_date_time: null,
    execute_sequence: 10,
    hash_code: null,
  };
}

/**
 * Inserts the request (of type `requestType`, `attachment_upload` in the own schema, with no routine: no
 * worker ever picks it up) that an upload through attachment create hangs its `attachment_data` row on
 * (`request_id` is NOT NULL).
 */
export async function insertUploadRequest(
  trx: Kysely<DB>,
  requestType: string,
  userId: number,
  now: string,
): Promise<number> {
  const request = await trx
    .insertInto('request')
    .values({
      request_type: requestType,
      system_message: 'attachment upload',
      request_override_default_queue: null,
      created_user_id: userId,
      last_modified_user_id: userId,
      created_date: now,
      last_modified_date: now,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return request.id;
}

/**
 * Inserts the request, its attachment rows and its first routine in `trx`. The attachment rows go in one
 * multi-row INSERT, except when one holds a large blob (`hasLargeBlob`, which says why): then one INSERT
 * per row, in order.
 */
export async function insertQueuedRequest(trx: Kysely<DB>, rows: QueuedRequestRows): Promise<number> {
  const request = await trx
    .insertInto('request')
    .values(requestRowOf(rows))
    .returning('id')
    .executeTakeFirstOrThrow();
  const attachments = attachmentRowsOf(request.id, rows);
  if (attachments.some(hasLargeBlob)) {
    for (const attachment of attachments)
      await trx.insertInto('attachment_data').values(attachment).execute();
  } else if (attachments.length > 0) await trx.insertInto('attachment_data').values(attachments).execute();
  await trx.insertInto('request_routine').values(firstRoutineRowOf(request.id, rows)).execute();
  return request.id;
}
