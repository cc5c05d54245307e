/**
 * The DICOM payload of a request, as the routines of the DICOM chain read it: its blob in the dialect's
 * slices (attachment-data's `readBlobSlices`), each as the engine brings binary data cheapest (PostgreSQL: a
 * binary COPY rather than the hex text a plain query brings, a string twice the file's size for the
 * garbage collector to sweep); a payload held as text, as UTF-8.
 */
import type { ChangeWhileReading } from '../attachment-data/index.ts';
import {
  ChangedWhileReadingError,
  findDicomPayload,
  readBlobSlices,
  readPayloadBytes,
} from '../attachment-data/index.ts';
import type { DialectAdapter } from '../../db/dialect.ts';
import type { PrepareContext } from './catalog.ts';
import { PermanentRoutineError } from './catalog.ts';

/** The bytes of the request's DICOM payload; a request without one fails permanently. */
export async function readDicomPayload(ctx: PrepareContext): Promise<Buffer> {
  const payload = await findDicomPayload(ctx.db, ctx.routine.request_id);
  if (payload === undefined) throw new PermanentRoutineError('No DICOM payload in the request');
  return (await readBlobInSlices(ctx.dialect, payload.id)) ?? readPayloadBytes(ctx.db, payload.id);
}

/**
 * The `blob_data` of `attachment_data` row `id`, read slice after slice; undefined when it is null. A row
 * changed between two slices (its `last_modified_date`) fails the read, and the routine's attempt with it.
 */
async function readBlobInSlices(dialect: DialectAdapter, id: number): Promise<Buffer | undefined> {
  const slices: Buffer[] = [];
  let sizeBytes = 0;
  const reader = readBlobSlices(dialect, id, 'blob_data');
  try {
    for (;;) {
      const next = await reader.next();
      if (next.done === true) {
        if (!next.value) return undefined;
        break;
      }
      slices.push(next.value);
      sizeBytes += next.value.length;
    }
  } catch (error) {
    if (error instanceof ChangedWhileReadingError) throw new Error(CHANGE_MESSAGES[error.change]);
    throw error;
  }
  return slices.length === 1 ? slices[0] : Buffer.concat(slices, sizeBytes);
}

const CHANGE_MESSAGES: Record<ChangeWhileReading, string> = {
  deleted: 'The DICOM payload was deleted while it was read',
  emptied: 'The DICOM payload was emptied while it was read',
  changed: 'The DICOM payload changed while it was read',
};
