/**
 * SQL of the attachment module. Metadata queries never select a data column: sizes come from
 * `octet_length`, which both dialects answer from the record header or TOAST pointer without reading
 * the value, so a HEAD or a 304 never loads the bytes.
 */
import type { Compilable, Kysely, RawBuilder, Transaction } from 'kysely';
import { sql } from 'kysely';
import { runCompiled } from '../../db/compiled-queries.ts';
import { insertOneAttachmentData, linkAttachmentsToEvent } from '../attachment-data/index.ts';
import { insertUploadRequest } from '../request-queue/index.ts';
import type { Database } from '../../db/database.ts';
import type { DialectAdapter } from '../../db/dialect.ts';
import type { DB } from '../../db/schema.ts';

export const DATA_FIELDS = [
  'blob_data',
  'text_data',
  'thumbnail_small_blob',
  'thumbnail_medium_blob',
  'thumbnail_large_blob',
] as const;
export type DataField = (typeof DATA_FIELDS)[number];
export const THUMBNAIL_FIELDS = [
  'thumbnail_small_blob',
  'thumbnail_medium_blob',
  'thumbnail_large_blob',
] as const;
export type ThumbnailField = (typeof THUMBNAIL_FIELDS)[number];

export function isThumbnail(field: DataField): field is ThumbnailField {
  return field.startsWith('thumbnail_');
}

/** Table of migration 0005; declared here because only this module reads or writes it. */
export interface AttachmentDataDigestTable {
  attachment_data_id: number;
  source_modified_date: string;
  blob_data_sha256: string | null;
  text_data_sha256: string | null;
  thumbnail_small_blob_sha256: string | null;
  thumbnail_medium_blob_sha256: string | null;
  thumbnail_large_blob_sha256: string | null;
  thumbnail_small_blob_type: string | null;
  thumbnail_medium_blob_type: string | null;
  thumbnail_large_blob_type: string | null;
}
export type AttachmentDb = DB & { attachment_data_digest: AttachmentDataDigestTable };

export function attachmentDb(db: Kysely<DB>): Kysely<AttachmentDb> {
  return db.withTables<{ attachment_data_digest: AttachmentDataDigestTable }>();
}

// The hot read queries are built and compiled once per shape, then run prepared with the id bound:
// building a Kysely query costs far more than running it.
async function runById<R>(
  database: Database,
  key: string,
  build: (id: unknown) => Compilable<R>,
  id: number,
): Promise<R | undefined> {
  const [row] = await runCompiled(
    database,
    database.shapes.compile(`attachment:${key}`, [id], (slots) => build(slots[0])),
  );
  return row;
}

/** A field's digest as stored: valid only while `sourceModifiedDate` equals the row's date. */
export interface StoredDigest {
  readonly sha256: string | null;
  /** Sniffed type of a thumbnail; null for the other fields. */
  readonly sniffedType: string | null;
}

export interface AttachmentHead {
  readonly id: number;
  readonly mimeType: string;
  readonly mnemonic: string;
  readonly lastModifiedDate: string;
  /**
   * Readable only by the request's submitter and request admins (`mayReadRequest`): a row not filed
   * under any event that is a part of a request received from a client (queue add, STOW-RS, C-STORE: the
   * request has a HEADER_DATA row; REQUEST_DATA, HEADER_DATA, FORM_DATA, the raw payloads, and the rows
   * routines derive from them) or an upload of attachment create.
   */
  readonly isPrivate: boolean;
  /** The user who submitted the row's request (`request.created_user_id`). */
  readonly submitterUserId: number;
  /** Byte length of each field; null when the field is null. */
  readonly sizes: Readonly<Record<DataField, number | null>>;
  readonly digestSourceDate: string | null;
  readonly digests: Readonly<Record<DataField, StoredDigest>>;
}

export interface AttachmentContent extends Omit<AttachmentHead, 'sizes'> {
  readonly field: DataField;
  /** The stored bytes of `field` (text as its UTF-8 bytes); null when the field is null or not inlined. */
  readonly bytes: Buffer | null;
  /** Byte length of `field`; null when the field is null. */
  readonly sizeBytes: number | null;
}

// `text_data` is text: hand it back as its UTF-8 bytes, one Buffer, never a JS string.
function textBytes(database: Database): RawBuilder<Buffer | null> {
  return database.dialect.textAsBytes('ad.text_data');
}

interface DigestColumns {
  source_modified_date: string | null;
  blob_data_sha256: string | null;
  text_data_sha256: string | null;
  thumbnail_small_blob_sha256: string | null;
  thumbnail_medium_blob_sha256: string | null;
  thumbnail_large_blob_sha256: string | null;
  thumbnail_small_blob_type: string | null;
  thumbnail_medium_blob_type: string | null;
  thumbnail_large_blob_type: string | null;
}

function digestsOf(row: DigestColumns): Record<DataField, StoredDigest> {
  return {
    blob_data: { sha256: row.blob_data_sha256, sniffedType: null },
    text_data: { sha256: row.text_data_sha256, sniffedType: null },
    thumbnail_small_blob: {
      sha256: row.thumbnail_small_blob_sha256,
      sniffedType: row.thumbnail_small_blob_type,
    },
    thumbnail_medium_blob: {
      sha256: row.thumbnail_medium_blob_sha256,
      sniffedType: row.thumbnail_medium_blob_type,
    },
    thumbnail_large_blob: {
      sha256: row.thumbnail_large_blob_sha256,
      sniffedType: row.thumbnail_large_blob_type,
    },
  };
}

/** The row every request received from a client has (queue intake writes it), and no other request. */
const RECEIVED_REQUEST_MNEMONIC = 'HEADER_DATA';

function baseQuery(database: Database, id: unknown) {
  return attachmentDb(database.db)
    .selectFrom('attachment_data as ad')
    .innerJoin('request as r', 'r.id', 'ad.request_id')
    .leftJoin('attachment_data_digest as d', 'd.attachment_data_id', 'ad.id')
    .where('ad.id', '=', id as number)
    .select([
      'ad.id',
      'ad.mime_type',
      'ad.attachment_mnemonic',
      'ad.last_modified_date',
      'r.created_user_id as submitter_user_id',
      'd.source_modified_date',
      'd.blob_data_sha256',
      'd.text_data_sha256',
      'd.thumbnail_small_blob_sha256',
      'd.thumbnail_medium_blob_sha256',
      'd.thumbnail_large_blob_sha256',
      'd.thumbnail_small_blob_type',
      'd.thumbnail_medium_blob_type',
      'd.thumbnail_large_blob_type',
    ])
    .select((eb) =>
      eb
        .case()
        .when(
          eb.exists(
            eb
              .selectFrom('event_attachment_item as i')
              .select('i.id')
              .whereRef('i.attachment_data_id', '=', 'ad.id'),
          ),
        )
        .then(0)
        .when('ad.attachment_mnemonic', '=', UPLOAD_MNEMONIC)
        .then(1)
        .when(
          eb.exists(
            eb
              .selectFrom('attachment_data as h')
              .select('h.id')
              .whereRef('h.request_id', '=', 'ad.request_id')
              .where('h.attachment_mnemonic', '=', RECEIVED_REQUEST_MNEMONIC),
          ),
        )
        .then(1)
        .else(0)
        .end()
        .as('is_private'),
    );
}

/** Everything about an attachment except its bytes; undefined for an unknown id. */
export async function readAttachmentHead(
  database: Database,
  id: number,
): Promise<AttachmentHead | undefined> {
  const size = (field: DataField) => sql<number | null>`octet_length(${sql.ref(`ad.${field}`)})`.as(field);
  const row = await runById(
    database,
    'head',
    (sentinel) =>
      baseQuery(database, sentinel).select([
        size('blob_data'),
        size('text_data'),
        size('thumbnail_small_blob'),
        size('thumbnail_medium_blob'),
        size('thumbnail_large_blob'),
      ]),
    id,
  );
  if (row === undefined) return undefined;
  const toSize = (value: number | string | null) => (value === null ? null : Number(value));
  return {
    id: row.id,
    mimeType: row.mime_type,
    mnemonic: row.attachment_mnemonic,
    lastModifiedDate: row.last_modified_date,
    isPrivate: Number(row.is_private) === 1,
    submitterUserId: row.submitter_user_id,
    sizes: {
      blob_data: toSize(row.blob_data),
      text_data: toSize(row.text_data),
      thumbnail_small_blob: toSize(row.thumbnail_small_blob),
      thumbnail_medium_blob: toSize(row.thumbnail_medium_blob),
      thumbnail_large_blob: toSize(row.thumbnail_large_blob),
    },
    digestSourceDate: row.source_modified_date,
    digests: digestsOf(row),
  };
}

/**
 * The bytes of one field with the metadata read in the same statement (so they always agree).
 * `field` undefined is the view default: `blob_data` when it is not null, else `text_data`; the text is
 * selected only when the blob is null, so only one value is ever loaded. With `maxInlineBytes`, a
 * binary field longer than that is not selected (`bytes` null, `sizeBytes` set): the caller reads it
 * in chunks instead.
 */
export async function readAttachmentContent(
  database: Database,
  id: number,
  field: DataField | undefined,
  maxInlineBytes?: number,
): Promise<AttachmentContent | undefined> {
  const inline = (column: Exclude<DataField, 'text_data'>) => {
    const ref = sql.ref(`ad.${column}`);
    return maxInlineBytes === undefined
      ? sql<Buffer | null>`${ref}`
      : sql<Buffer | null>`case when octet_length(${ref}) <= ${maxInlineBytes} then ${ref} end`;
  };
  const sizeOf = (column: DataField) => sql<number | string | null>`octet_length(${sql.ref(`ad.${column}`)})`;
  if (field !== undefined) {
    const bytes = field === 'text_data' ? textBytes(database) : inline(field);
    const row = await runById(
      database,
      `content:${field}:${maxInlineBytes}`,
      (sentinel) => baseQuery(database, sentinel).select([bytes.as('bytes'), sizeOf(field).as('size_bytes')]),
      id,
    );
    if (row === undefined) return undefined;
    return contentOf(row, field, row.bytes, row.size_bytes);
  }
  const row = await runById(
    database,
    `content:default:${maxInlineBytes}`,
    (sentinel) =>
      baseQuery(database, sentinel).select([
        inline('blob_data').as('blob_bytes'),
        sizeOf('blob_data').as('blob_size'),
        sql<Buffer | null>`case when ad.blob_data is null then ${textBytes(database)} end`.as('text_bytes'),
      ]),
    id,
  );
  if (row === undefined) return undefined;
  return row.blob_size !== null
    ? contentOf(row, 'blob_data', row.blob_bytes, row.blob_size)
    : contentOf(row, 'text_data', row.text_bytes, row.text_bytes?.length ?? null);
}

function contentOf(
  row: DigestColumns & {
    id: number;
    mime_type: string;
    attachment_mnemonic: string;
    last_modified_date: string;
    submitter_user_id: number;
    is_private: number | string;
  },
  field: DataField,
  bytes: Buffer | null,
  sizeBytes: number | string | null,
): AttachmentContent {
  return {
    id: row.id,
    mimeType: row.mime_type,
    mnemonic: row.attachment_mnemonic,
    lastModifiedDate: row.last_modified_date,
    isPrivate: Number(row.is_private) === 1,
    submitterUserId: row.submitter_user_id,
    digestSourceDate: row.source_modified_date,
    digests: digestsOf(row),
    field,
    bytes,
    sizeBytes: sizeBytes === null ? null : Number(sizeBytes),
  };
}

/**
 * Records the digest of one field computed from bytes read while the row's date was
 * `sourceModifiedDate`. Digests of other fields survive only if they were taken at that same date.
 */
export async function upsertDigest(
  db: Kysely<DB> | Transaction<DB>,
  dialect: DialectAdapter,
  id: number,
  sourceModifiedDate: string,
  field: DataField,
  sha256: string,
  sniffedType: string | null,
): Promise<void> {
  const shaColumn = `${field}_sha256` as const;
  const values: AttachmentDataDigestTable = {
    attachment_data_id: id,
    source_modified_date: sourceModifiedDate,
    blob_data_sha256: null,
    text_data_sha256: null,
    thumbnail_small_blob_sha256: null,
    thumbnail_medium_blob_sha256: null,
    thumbnail_large_blob_sha256: null,
    thumbnail_small_blob_type: null,
    thumbnail_medium_blob_type: null,
    thumbnail_large_blob_type: null,
    [shaColumn]: sha256,
  };
  if (sniffedType !== null && field !== 'blob_data' && field !== 'text_data')
    values[`${field}_type`] = sniffedType;
  const existing = (column: keyof AttachmentDataDigestTable) =>
    dialect.existingValue<string | null>('attachment_data_digest', column);
  const inserted = (column: keyof AttachmentDataDigestTable) => dialect.insertedValue<string | null>(column);
  const keep = (
    column: Exclude<keyof AttachmentDataDigestTable, 'attachment_data_id' | 'source_modified_date'>,
  ) =>
    sql<string | null>`case when ${existing('source_modified_date')} = ${inserted('source_modified_date')}
      then coalesce(${inserted(column)}, ${existing(column)})
      else ${inserted(column)} end`;
  const insert = attachmentDb(db as Kysely<DB>)
    .insertInto('attachment_data_digest')
    .values(values);
  // `source_modified_date` last: on MySQL the assignments apply in order, and `keep` compares the old date.
  await dialect
    .upsert(insert, ['attachment_data_id'], {
      blob_data_sha256: keep('blob_data_sha256'),
      text_data_sha256: keep('text_data_sha256'),
      thumbnail_small_blob_sha256: keep('thumbnail_small_blob_sha256'),
      thumbnail_medium_blob_sha256: keep('thumbnail_medium_blob_sha256'),
      thumbnail_large_blob_sha256: keep('thumbnail_large_blob_sha256'),
      thumbnail_small_blob_type: keep('thumbnail_small_blob_type'),
      thumbnail_medium_blob_type: keep('thumbnail_medium_blob_type'),
      thumbnail_large_blob_type: keep('thumbnail_large_blob_type'),
      source_modified_date: inserted('source_modified_date') as RawBuilder<string>,
    })
    .execute();
}

/** The stored spelling of `mimeType` (the foreign key needs it exactly), or undefined. */
export async function findMimeType(
  db: Kysely<DB> | Transaction<DB>,
  mimeType: string,
): Promise<string | undefined> {
  const row = await db
    .selectFrom('mime_type')
    .select('mime_type')
    .where(sql<string>`lower(mime_type)`, '=', mimeType)
    .executeTakeFirst();
  return row?.mime_type;
}

export async function eventExists(db: Kysely<DB> | Transaction<DB>, eventId: number): Promise<boolean> {
  const row = await db
    .selectFrom('event')
    .select('id')
    .where('id', '=', eventId)
    .where('deleted', '=', 0)
    .executeTakeFirst();
  return row !== undefined;
}

export async function elementTypeExists(
  db: Kysely<DB> | Transaction<DB>,
  elementTypeId: number,
): Promise<boolean> {
  const row = await db
    .selectFrom('element_type')
    .select('id')
    .where('id', '=', elementTypeId)
    .executeTakeFirst();
  return row !== undefined;
}

export interface NewUpload {
  /** The request type of the upload's `request` row (`SchemaProfile.uploadRequestType`). */
  readonly requestType: string;
  readonly userId: number;
  readonly mimeType: string;
  readonly bytes: Buffer;
  readonly fileName: string | null;
  readonly modifiedDate: string;
  readonly link: { readonly eventId: number; readonly elementTypeId: number } | undefined;
}

export const UPLOAD_MNEMONIC = 'UPLOAD_BLOB';

/**
 * Inserts the upload's `request` (through the queue module, which owns it), its `attachment_data` row and
 * the optional event link (through attachment-data); returns the new id.
 */
export async function insertUpload(trx: Transaction<DB>, upload: NewUpload): Promise<number> {
  const stamp = { userId: upload.userId, now: upload.modifiedDate };
  const requestId = await insertUploadRequest(trx, upload.requestType, upload.userId, upload.modifiedDate);
  const attachment = await insertOneAttachmentData(
    trx,
    {
      requestId,
      mnemonic: UPLOAD_MNEMONIC,
      mimeType: upload.mimeType,
      blobData: upload.bytes,
      uploadFileName: upload.fileName,
    },
    stamp,
  );
  if (upload.link !== undefined) {
    await linkAttachmentsToEvent(
      trx,
      { ...upload.link, attachmentIds: [attachment.id], systemOnlyManaged: 0 },
      stamp,
    );
  }
  return attachment.id;
}

/** Reads the date the triggers gave a row (after an insert, it may differ from what was written). */
export async function readModifiedDate(
  db: Kysely<DB> | Transaction<DB>,
  id: number,
): Promise<string | undefined> {
  const row = await db
    .selectFrom('attachment_data')
    .select('last_modified_date')
    .where('id', '=', id)
    .executeTakeFirst();
  return row?.last_modified_date;
}
