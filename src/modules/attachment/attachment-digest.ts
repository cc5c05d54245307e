/**
 * Content digests of attachment fields (SHA-256 of the stored bytes), kept in `attachment_data_digest`
 * so that the ETag of a HEAD or a 304 costs no byte reads. A digest is tied to the row's
 * `last_modified_date`, which a trigger moves forward on every write: a write by any module makes the
 * old digest invalid by itself, and the next view computes it again, once, from the one field it needs.
 */
import { createHash } from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../../db/database.ts';
import type { DialectAdapter } from '../../db/dialect.ts';
import type { DB } from '../../db/schema.ts';
import type { DataField } from './attachment.queries.ts';
import { DATA_FIELDS, isThumbnail, readAttachmentContent, upsertDigest } from './attachment.queries.ts';
import { digestInChunks } from './attachment-chunks.ts';
import { thumbnailTypeOf } from './content-type.ts';

export interface FieldDigest {
  readonly sha256: string;
  /** For thumbnails: JPEG/PNG by sniffing, else application/octet-stream; null for other fields. */
  readonly sniffedType: string | null;
}

/** Digest of `bytes` as stored for `field`. */
export async function digestField(field: DataField, bytes: Buffer): Promise<FieldDigest> {
  return {
    sha256: createHash('sha256').update(bytes).digest('hex'),
    sniffedType: isThumbnail(field) ? await thumbnailTypeOf(bytes) : null,
  };
}

/** Stores the digest of `field` computed from `bytes`, read while the row's date was `modifiedDate`. */
export async function saveFieldDigest(
  db: Kysely<DB> | Transaction<DB>,
  dialect: DialectAdapter,
  attachmentDataId: number,
  modifiedDate: string,
  field: DataField,
  bytes: Buffer,
): Promise<FieldDigest> {
  const digest = await digestField(field, bytes);
  await upsertDigest(db, dialect, attachmentDataId, modifiedDate, field, digest.sha256, digest.sniffedType);
  return digest;
}

/**
 * Stores a digest computed outside any transaction, as a short write of its own. The table is a cache:
 * if the write fails (the row was deleted meanwhile), the next view computes the digest again.
 */
export async function storeDigest(
  database: Database,
  attachmentDataId: number,
  modifiedDate: string,
  field: DataField,
  digest: FieldDigest,
): Promise<void> {
  try {
    await database.writeTransaction((trx) =>
      upsertDigest(
        trx,
        database.dialect,
        attachmentDataId,
        modifiedDate,
        field,
        digest.sha256,
        digest.sniffedType,
      ),
    );
  } catch {
    // A cache write: nothing to undo, and the answer does not depend on it.
  }
}

/**
 * For writers outside this module (queue intake, worker thumbnails, dataset import): call after
 * writing an `attachment_data` row to precompute the digests of its non-null fields, so the first view
 * needs no extra read. Optional: a missing or outdated digest is computed lazily by the view. Reads one
 * field at a time, each with the row's date in the same statement.
 */
export async function refreshAttachmentDigests(
  database: Database,
  attachmentDataId: number,
  fields: readonly DataField[] = DATA_FIELDS,
): Promise<void> {
  const maxInlineBytes = database.dialect.maxInlineBlobBytes;
  for (const field of fields) {
    const content = await readAttachmentContent(database, attachmentDataId, field, maxInlineBytes);
    if (content === undefined) return;
    if (content.bytes !== null) {
      const digest = await digestField(field, content.bytes);
      await storeDigest(database, attachmentDataId, content.lastModifiedDate, field, digest);
    } else if (content.sizeBytes !== null && field !== 'text_data') {
      await digestInChunks(database, attachmentDataId, field, content.lastModifiedDate, content.sizeBytes);
    }
  }
}
