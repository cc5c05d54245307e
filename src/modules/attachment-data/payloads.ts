/**
 * Which of a request's `attachment_data` rows are payloads (the files and bodies the caller sent), and
 * their bytes.
 */
import type { Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';

/** Rows written by intake or by routines that describe the request rather than carry its content. */
export const NON_PAYLOAD_MNEMONICS = ['REQUEST_DATA', 'FORM_DATA', 'HEADER_DATA', 'DICOM_HEADER'] as const;

export interface PayloadRow {
  readonly id: number;
  readonly attachment_mnemonic: string;
  readonly mime_type: string;
  readonly hash_code: number | null;
}

/** The request's payload rows (content present, not a describing row), by id. */
export async function findPayloads(db: Kysely<DB>, requestId: number): Promise<PayloadRow[]> {
  return db
    .selectFrom('attachment_data')
    .select(['id', 'attachment_mnemonic', 'mime_type', 'hash_code'])
    .where('request_id', '=', requestId)
    .where('attachment_mnemonic', 'not in', NON_PAYLOAD_MNEMONICS)
    .where('system_only_managed', '=', 0)
    .where((eb) => eb.or([eb('blob_data', 'is not', null), eb('text_data', 'is not', null)]))
    .orderBy('id')
    .execute();
}

/** The ids of the request's payload rows that already have thumbnails. */
export async function findPayloadsWithThumbnails(db: Kysely<DB>, requestId: number): Promise<Set<number>> {
  const rows = await db
    .selectFrom('attachment_data')
    .select('id')
    .where('request_id', '=', requestId)
    .where('thumbnail_small_blob', 'is not', null)
    .execute();
  return new Set(rows.map((r) => r.id));
}

/** The request's DICOM payload: the first `application/dicom` payload, else its `REQUEST_BLOB`. */
export async function findDicomPayload(db: Kysely<DB>, requestId: number): Promise<PayloadRow | undefined> {
  const payloads = await findPayloads(db, requestId);
  return (
    payloads.find((p) => p.mime_type === 'application/dicom') ??
    payloads.find((p) => p.attachment_mnemonic === 'REQUEST_BLOB')
  );
}

/** The bytes of a payload row: its blob, or its text as UTF-8. */
export async function readPayloadBytes(db: Kysely<DB>, id: number): Promise<Buffer> {
  const row = await db
    .selectFrom('attachment_data')
    .select(['blob_data', 'text_data'])
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
  return row.blob_data ?? Buffer.from(row.text_data ?? '', 'utf8');
}

export function isImageMime(mime: string): boolean {
  return /^image\/(jpe?g|png|gif|webp|tiff|bmp)$/i.test(mime);
}
