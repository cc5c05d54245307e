/**
 * The one writer of `attachment_data` rows: every row built here, with its audit columns,
 * its content hash and the defaults the OpenEyes application gives, and every update stamping who changed
 * it and a modification date that moves forward on every write (`DialectAdapter.nextModifiedDate`), which
 * attachment view's ETags and digests rely on. The queue's intake and routines and attachment create call
 * these functions; nothing else inserts or updates the table (the dataset import restores rows as given).
 */
import { createHash } from 'node:crypto';
import type { Expression, InsertObject, Kysely } from 'kysely';
import type { DialectAdapter } from '../../db/dialect.ts';
import type { DB } from '../../db/schema.ts';

/** Who writes and when: the audit columns of every row written (user 1 is the system account). */
export interface AuditStamp {
  readonly userId: number;
  /** `YYYY-MM-DD HH:MM:SS`. */
  readonly now: string;
}

/** One `attachment_data` row to insert. */
export interface NewAttachmentData {
  readonly requestId: number | Expression<number>;
  readonly mnemonic: string;
  readonly mimeType: string;
  readonly blobData?: Buffer | null;
  readonly textData?: string | null;
  readonly uploadFileName?: string | null;
  /** The content hash; computed from the blob (or the text's UTF-8 bytes) when undefined, null for none. */
  readonly hashCode?: number | null;
  /** 1 for rows the system describes the request with (the UI hides their "remove"). */
  readonly systemOnlyManaged?: 0 | 1;
  readonly attachmentType?: string;
  readonly bodySite?: string | null;
  /** The row's thumbnails, when they are made before it is written (one write of its blob, not two). */
  readonly thumbnails?: { readonly small: Buffer; readonly medium: Buffer; readonly large: Buffer };
}

/** A 48-bit content hash (the first 6 bytes of SHA-256): fits `bigint` and a JavaScript number exactly. */
export function contentHash(bytes: Uint8Array): number {
  return createHash('sha256').update(bytes).digest().readUIntBE(0, 6);
}

/**
 * The row of `input`, every column present (a multi-row INSERT on SQLite fills missing keys with NULL
 * rather than the column default).
 */
export function attachmentDataRow(
  input: NewAttachmentData,
  stamp: AuditStamp,
): InsertObject<DB, 'attachment_data'> {
  const blob = input.blobData ?? null;
  const text = input.textData ?? null;
  const hash =
    input.hashCode !== undefined
      ? input.hashCode
      : blob !== null
        ? contentHash(blob)
        : text !== null
          ? contentHash(Buffer.from(text, 'utf8'))
          : null;
  return {
    request_id: input.requestId,
    attachment_mnemonic: input.mnemonic,
    body_site_snomed_type: input.bodySite ?? null,
    system_only_managed: input.systemOnlyManaged ?? 0,
    attachment_type: input.attachmentType ?? 'NONE',
    mime_type: input.mimeType,
    blob_data: blob,
    text_data: text,
    upload_file_name: input.uploadFileName ?? null,
    thumbnail_small_blob: input.thumbnails?.small ?? null,
    thumbnail_medium_blob: input.thumbnails?.medium ?? null,
    thumbnail_large_blob: input.thumbnails?.large ?? null,
    hash_code: hash,
    created_user_id: stamp.userId,
    last_modified_user_id: stamp.userId,
    created_date: stamp.now,
    last_modified_date: stamp.now,
  };
}

/** Inserts `rows` in one statement. */
export async function insertAttachmentData(
  trx: Kysely<DB>,
  rows: readonly NewAttachmentData[],
  stamp: AuditStamp,
): Promise<void> {
  if (rows.length === 0) return;
  await trx
    .insertInto('attachment_data')
    .values(rows.map((row) => attachmentDataRow(row, stamp)))
    .execute();
}

/** Inserts one row; resolves to its id and the modification date it was stored with. */
export async function insertOneAttachmentData(
  trx: Kysely<DB>,
  row: NewAttachmentData,
  stamp: AuditStamp,
): Promise<{ id: number; lastModifiedDate: string }> {
  const inserted = await trx
    .insertInto('attachment_data')
    .values(attachmentDataRow(row, stamp))
    .returning(['id', 'last_modified_date'])
    .executeTakeFirstOrThrow();
  return { id: inserted.id, lastModifiedDate: inserted.last_modified_date };
}

/** What an update may change of a row's content. */
export interface AttachmentDataChange {
  readonly textData?: string | null;
  readonly blobData?: Buffer | null;
  readonly hashCode?: number | null;
  /** The `attachment_type` the row is filed as (a device's report type). */
  readonly attachmentType?: string;
  readonly thumbnails?: {
    readonly small: Buffer | null;
    readonly medium: Buffer | null;
    readonly large: Buffer | null;
  };
  /** The eye of the content (`body_site_type`), as device filing finds it. */
  readonly bodySite?: string | null;
}

/** Which rows an update changes: one by id, or a request's rows of one mnemonic (body site null). */
export type AttachmentDataTarget =
  { readonly id: number } | { readonly requestId: number; readonly mnemonic: string };

/** Updates the rows of `target`; resolves to how many rows it changed. */
export async function updateAttachmentData(
  trx: Kysely<DB>,
  dialect: DialectAdapter,
  target: AttachmentDataTarget,
  change: AttachmentDataChange,
  stamp: AuditStamp,
): Promise<number> {
  let query = trx.updateTable('attachment_data').set({
    ...(change.textData !== undefined ? { text_data: change.textData } : {}),
    ...(change.blobData !== undefined ? { blob_data: change.blobData } : {}),
    ...(change.hashCode !== undefined ? { hash_code: change.hashCode } : {}),
    ...(change.attachmentType !== undefined ? { attachment_type: change.attachmentType } : {}),
    ...(change.thumbnails !== undefined
      ? {
          thumbnail_small_blob: change.thumbnails.small,
          thumbnail_medium_blob: change.thumbnails.medium,
          thumbnail_large_blob: change.thumbnails.large,
        }
      : {}),
    ...(change.bodySite !== undefined ? { body_site_snomed_type: change.bodySite } : {}),
    last_modified_user_id: stamp.userId,
    last_modified_date: dialect.nextModifiedDate('last_modified_date', stamp.now),
  });
  query =
    'id' in target
      ? query.where('id', '=', target.id)
      : query
          .where('request_id', '=', target.requestId)
          .where('attachment_mnemonic', '=', target.mnemonic)
          .where('body_site_snomed_type', 'is', null);
  // Prepared: a handful of shapes (which columns change, which target), run on every routine.
  const result = await dialect.runPreparedOn(trx, query.compile());
  return Number(result.numAffectedRows ?? 0);
}
