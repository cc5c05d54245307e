/** The DICOM payload of a request, as the routines of the DICOM chain read it. */
import { findDicomPayload, readPayloadBytes } from '../../attachment-data/index.ts';
import type { PrepareContext } from './catalog.ts';
import { PermanentRoutineError } from './catalog.ts';

/** The bytes of the request's DICOM payload; a request without one fails permanently. */
export async function readDicomPayload(ctx: PrepareContext): Promise<Buffer> {
  const payload = await findDicomPayload(ctx.db, ctx.routine.request_id);
  if (payload === undefined) throw new PermanentRoutineError('No DICOM payload in the request');
  return readPayloadBytes(ctx.db, payload.id);
}
