/**
 * The one function through which `EXTRACT_IMAGE` writes `attachment_data` rows (the images and PDFs it
 * extracts from a DICOM payload), kept apart so that it can call the table's owner module instead.
 * A row is payload content (`system_only_managed` 0), so `ATTACH_TO_EVENT` links it with the request's
 * other payloads; running the routine again replaces the row of the same mnemonic.
 */
import type { Kysely } from 'kysely';
import { formatDateTime } from '../../../db/database.ts';
import type { DB } from '../../../db/schema.ts';
import type { Thumbnails } from './make-thumbnails.ts';
import { contentHash } from './payloads.ts';

export interface ExtractedAttachment {
  readonly mnemonic: string;
  readonly mimeType: string;
  readonly bytes: Buffer;
  readonly uploadFileName: string;
  readonly thumbnails?: Thumbnails;
}

/** Writes `attachment` as the request's row `mnemonic` (body site null); returns its id. */
export async function writeExtractedAttachment(
  db: Kysely<DB>,
  requestId: number,
  attachment: ExtractedAttachment,
  now: Date,
): Promise<number> {
  const stamp = formatDateTime(now);
  const values = {
    mime_type: attachment.mimeType,
    blob_data: attachment.bytes,
    text_data: null,
    upload_file_name: attachment.uploadFileName,
    hash_code: contentHash(attachment.bytes),
    thumbnail_small_blob: attachment.thumbnails?.small ?? null,
    thumbnail_medium_blob: attachment.thumbnails?.medium ?? null,
    thumbnail_large_blob: attachment.thumbnails?.large ?? null,
    last_modified_date: stamp,
  };
  const existing = await db
    .selectFrom('attachment_data')
    .select('id')
    .where('request_id', '=', requestId)
    .where('attachment_mnemonic', '=', attachment.mnemonic)
    .where('body_site_snomed_type', 'is', null)
    .executeTakeFirst();
  if (existing !== undefined) {
    await db.updateTable('attachment_data').set(values).where('id', '=', existing.id).execute();
    return existing.id;
  }
  const inserted = await db
    .insertInto('attachment_data')
    .values({
      ...values,
      request_id: requestId,
      attachment_mnemonic: attachment.mnemonic,
      body_site_snomed_type: null,
      system_only_managed: 0,
      attachment_type: 'NONE',
      created_date: stamp,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return inserted.id;
}
