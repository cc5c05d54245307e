/**
 * Large binary fields of attachment view, read in the dialect's slices (attachment-data's
 * `readBlobSlices`), so that a download in flight holds one slice, not the whole attachment, and no
 * connection is held while a slow client reads.
 */
import { createHash } from 'node:crypto';
import type { Database } from '../../db/database.ts';
import { ChangedWhileReadingError, readBlobSlices } from '../attachment-data/index.ts';
import type { DataField } from './attachment.queries.ts';
import { isThumbnail, upsertDigest } from './attachment.queries.ts';
import { thumbnailTypeOf } from './content-type.ts';

export { ChangedWhileReadingError };

export type BinaryField = Exclude<DataField, 'text_data'>;

/**
 * Yields the `sizeBytes` bytes of `field` chunk by chunk, as stored while the row's date was
 * `modifiedDate`; throws {@link ChangedWhileReadingError} if the row is written in between.
 */
export async function* readInChunks(
  database: Database,
  id: number,
  field: BinaryField,
  modifiedDate: string,
  sizeBytes: number,
): AsyncGenerator<Buffer> {
  yield* readBlobSlices(database.dialect, id, field, { modifiedDate, sizeBytes });
}

/**
 * Computes and stores the digest of a large field chunk by chunk; undefined when the row was written
 * meanwhile (the caller starts again from fresh metadata).
 */
export async function digestInChunks(
  database: Database,
  id: number,
  field: BinaryField,
  modifiedDate: string,
  sizeBytes: number,
): Promise<{ sha256: string; sniffedType: string | null } | undefined> {
  const hash = createHash('sha256');
  let sniffedType: string | null = null;
  try {
    for await (const chunk of readInChunks(database, id, field, modifiedDate, sizeBytes)) {
      if (sniffedType === null && isThumbnail(field)) sniffedType = await thumbnailTypeOf(chunk);
      hash.update(chunk);
    }
  } catch (error) {
    if (error instanceof ChangedWhileReadingError) return undefined;
    throw error;
  }
  const digest = { sha256: hash.digest('hex'), sniffedType };
  try {
    await database.writeTransaction((trx) =>
      upsertDigest(trx, database.dialect, id, modifiedDate, field, digest.sha256, digest.sniffedType),
    );
  } catch {
    // A cache write (see storeDigest): the next view computes the digest again.
  }
  return digest;
}
