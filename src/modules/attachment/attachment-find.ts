/**
 * Finding attachments for people rather than programs: those filed under an event
 * (`event_attachment_group` / `event_attachment_item`), those of a patient's events, and the payload
 * parts a queued request stored. Metadata only (sizes from `octet_length`, never the bytes); the bytes
 * are served by the attachment service, with the view's headers.
 */
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { DB } from '../../db/schema.ts';
import { UPLOAD_MNEMONIC } from './attachment.queries.ts';

export interface FoundAttachment {
  readonly id: number;
  /** The event it is filed under; null for an upload filed under none. */
  readonly eventId: number | null;
  readonly eventDate: string | null;
  readonly eventType: string | null;
  readonly patientId: number | null;
  readonly mnemonic: string;
  readonly attachmentType: string;
  readonly mimeType: string;
  readonly fileName: string | null;
  /** Byte length of `blob_data`, else of `text_data`; null when both are null. */
  readonly sizeBytes: number | null;
  readonly hasThumbnail: boolean;
}

/** At most this many attachments are listed for one search, newest first. */
export const MAX_FOUND_ATTACHMENTS = 200;

function filedAttachments(db: Kysely<DB>) {
  return db
    .selectFrom('event_attachment_item as i')
    .innerJoin('event_attachment_group as g', 'g.id', 'i.event_attachment_group_id')
    .innerJoin('event as e', 'e.id', 'g.event_id')
    .innerJoin('event_type as et', 'et.id', 'e.event_type_id')
    .leftJoin('episode as ep', 'ep.id', 'e.episode_id')
    .innerJoin('attachment_data as ad', 'ad.id', 'i.attachment_data_id')
    .select([
      'ad.id',
      'e.id as eventId',
      'e.event_date as eventDate',
      'et.name as eventType',
      'ep.patient_id as patientId',
      'ad.attachment_mnemonic as mnemonic',
      'ad.attachment_type as attachmentType',
      'ad.mime_type as mimeType',
      'ad.upload_file_name as fileName',
      sql<number | string | null>`coalesce(octet_length(ad.blob_data), octet_length(ad.text_data))`.as(
        'size',
      ),
      sql<number>`case when ad.thumbnail_small_blob is null then 0 else 1 end`.as('thumb'),
    ])
    .where('e.deleted', '=', 0)
    .orderBy('ad.id', 'desc')
    .limit(MAX_FOUND_ATTACHMENTS);
}

type FiledRow = Awaited<ReturnType<ReturnType<typeof filedAttachments>['execute']>>[number];

function toFound(row: FiledRow): FoundAttachment {
  return {
    id: row.id,
    eventId: row.eventId,
    eventDate: row.eventDate,
    eventType: row.eventType,
    patientId: row.patientId,
    mnemonic: row.mnemonic,
    attachmentType: row.attachmentType,
    mimeType: row.mimeType,
    fileName: row.fileName,
    sizeBytes: row.size === null ? null : Number(row.size),
    hasThumbnail: Number(row.thumb) === 1,
  };
}

/** The attachments filed under event `eventId` (not deleted), newest first. */
export async function findEventAttachments(db: Kysely<DB>, eventId: number): Promise<FoundAttachment[]> {
  const rows = await filedAttachments(db).where('g.event_id', '=', eventId).execute();
  return rows.map(toFound);
}

/** The attachments filed under the live events of patients `patientIds`, newest first. */
export async function findPatientAttachments(
  db: Kysely<DB>,
  patientIds: readonly number[],
): Promise<FoundAttachment[]> {
  if (patientIds.length === 0) return [];
  const rows = await filedAttachments(db)
    .where('ep.patient_id', 'in', [...patientIds])
    .where('ep.deleted', '=', 0)
    .execute();
  return rows.map(toFound);
}

export interface PayloadPart {
  readonly id: number;
  readonly mnemonic: string;
  readonly mimeType: string;
  readonly fileName: string | null;
  /** Which data column holds the part, and its byte length. */
  readonly field: 'blob_data' | 'text_data' | null;
  readonly sizeBytes: number | null;
}

/** The `attachment_data` rows of request `requestId` (its stored payload parts), in id order. */
export async function listRequestPayloadParts(db: Kysely<DB>, requestId: number): Promise<PayloadPart[]> {
  const rows = await db
    .selectFrom('attachment_data as ad')
    .select([
      'ad.id',
      'ad.attachment_mnemonic',
      'ad.mime_type',
      'ad.upload_file_name',
      sql<number | string | null>`octet_length(ad.blob_data)`.as('blob_size'),
      sql<number | string | null>`octet_length(ad.text_data)`.as('text_size'),
    ])
    .where('ad.request_id', '=', requestId)
    .orderBy('ad.id')
    .execute();
  return rows.map((row) => {
    const field = row.blob_size !== null ? 'blob_data' : row.text_size !== null ? 'text_data' : null;
    const size = row.blob_size ?? row.text_size;
    return {
      id: row.id,
      mnemonic: row.attachment_mnemonic,
      mimeType: row.mime_type,
      fileName: row.upload_file_name,
      field,
      sizeBytes: size === null ? null : Number(size),
    };
  });
}

/** The request an attachment row belongs to; undefined for an unknown id. */
export async function findAttachmentRequestId(
  db: Kysely<DB>,
  attachmentId: number,
): Promise<number | undefined> {
  const row = await db
    .selectFrom('attachment_data')
    .select('request_id')
    .where('id', '=', attachmentId)
    .executeTakeFirst();
  return row?.request_id;
}

/** Attachment `attachmentId` when it is filed under a live event (what the attachment screen opens). */
export async function findFiledAttachment(
  db: Kysely<DB>,
  attachmentId: number,
): Promise<FoundAttachment | undefined> {
  const row = await filedAttachments(db).where('ad.id', '=', attachmentId).executeTakeFirst();
  return row === undefined ? undefined : toFound(row);
}

/**
 * Attachment `attachmentId` as the attachment screen opens it: filed under a live event, or an upload of
 * `attachmentdisplay/create` filed under no event (which the API serves by id). A request's other rows
 * (payload parts, extracted images not yet filed) are not attachments yet.
 */
export async function findAttachment(
  db: Kysely<DB>,
  attachmentId: number,
): Promise<FoundAttachment | undefined> {
  const filed = await findFiledAttachment(db, attachmentId);
  if (filed !== undefined) return filed;
  const row = await db
    .selectFrom('attachment_data as ad')
    .select([
      'ad.id',
      'ad.attachment_mnemonic as mnemonic',
      'ad.attachment_type as attachmentType',
      'ad.mime_type as mimeType',
      'ad.upload_file_name as fileName',
      sql<number | string | null>`coalesce(octet_length(ad.blob_data), octet_length(ad.text_data))`.as(
        'size',
      ),
      sql<number>`case when ad.thumbnail_small_blob is null then 0 else 1 end`.as('thumb'),
    ])
    .where('ad.id', '=', attachmentId)
    .where('ad.attachment_mnemonic', '=', UPLOAD_MNEMONIC)
    .where((eb) =>
      eb.not(
        eb.exists(
          eb
            .selectFrom('event_attachment_item as i')
            .select('i.id')
            .whereRef('i.attachment_data_id', '=', 'ad.id'),
        ),
      ),
    )
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return {
    id: row.id,
    eventId: null,
    eventDate: null,
    eventType: null,
    patientId: null,
    mnemonic: row.mnemonic,
    attachmentType: row.attachmentType,
    mimeType: row.mimeType,
    fileName: row.fileName,
    sizeBytes: row.size === null ? null : Number(row.size),
    hasThumbnail: Number(row.thumb) === 1,
  };
}
