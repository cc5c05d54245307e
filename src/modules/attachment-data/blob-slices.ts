/**
 * Reading one binary field of an `attachment_data` row in the dialect's slices (`blobSliceBytes`), each
 * slice its own statement (`DialectAdapter.readBlobSlice`), so that a reader holds one slice at a time
 * and no connection between slices. A write between two slices is detected by the row's
 * `last_modified_date`, which moves forward on every write and is read with each slice.
 */
import type { DialectAdapter } from '../../db/dialect.ts';

export type BinaryColumn =
  'blob_data' | 'thumbnail_small_blob' | 'thumbnail_medium_blob' | 'thumbnail_large_blob';

/** What happened to the row between two slices of one read. */
export type ChangeWhileReading = 'changed' | 'deleted' | 'emptied';

/** The row was written (or deleted, or its field set to null) between two slices of one read. */
export class ChangedWhileReadingError extends Error {
  readonly change: ChangeWhileReading;
  constructor(change: ChangeWhileReading) {
    super('attachment changed while it was being read');
    this.name = 'ChangedWhileReadingError';
    this.change = change;
  }
}

/** The row's date and the field's size, read before the slices. */
export interface ExpectedBlob {
  readonly modifiedDate: string;
  readonly sizeBytes: number;
}

/**
 * Yields `column` of row `id` slice by slice (empty slices are not yielded); throws
 * {@link ChangedWhileReadingError} when the row is written, deleted or its field set to null meanwhile.
 * With `expected`, every slice must carry that date and be whole, and the read ends at that size.
 * Without it, the first slice's date is the one every later slice must carry, and the read ends at the
 * first slice shorter than the dialect's slice size. Returns false when the field was null at the
 * first slice (only without `expected`: then nothing is yielded), true otherwise.
 */
export async function* readBlobSlices(
  dialect: DialectAdapter,
  id: number,
  column: BinaryColumn,
  expected?: ExpectedBlob,
): AsyncGenerator<Buffer, boolean> {
  if (!Number.isSafeInteger(id) || id < 0) throw new RangeError(`bad row id: ${id}`);
  const sliceBytes = dialect.blobSliceBytes;
  let version = expected?.modifiedDate;
  for (let offset = 0; ;) {
    const lengthBytes =
      expected === undefined ? sliceBytes : Math.min(sliceBytes, expected.sizeBytes - offset);
    if (lengthBytes <= 0) return true;
    const slice = await dialect.readBlobSlice({
      table: 'attachment_data',
      idColumn: 'id',
      id,
      column,
      offset,
      lengthBytes,
      versionColumn: 'last_modified_date',
    });
    if (slice === undefined) throw new ChangedWhileReadingError('deleted');
    if (slice.bytes === null) {
      if (version === undefined) return false;
      throw new ChangedWhileReadingError('emptied');
    }
    if (version !== undefined && slice.version !== version) throw new ChangedWhileReadingError('changed');
    version = slice.version;
    if (expected !== undefined && slice.bytes.length !== lengthBytes)
      throw new ChangedWhileReadingError('changed');
    if (slice.bytes.length > 0) yield slice.bytes;
    offset += slice.bytes.length;
    if (expected === undefined && slice.bytes.length < sliceBytes) return true;
  }
}
