/**
 * `CLEAN_UP`: the last routine of a chain. Per the request type's policy (config
 * `QUEUE_DROP_BLOB_REQUEST_TYPES`, empty by default, so nothing is dropped), nulls `REQUEST_BLOB.blob_data`
 * once the request's payloads are attached (as the Java processor's `deleteRequestBlobData`), for sites that
 * keep the original file elsewhere (a PACS). The row itself, its hash, thumbnails and event link stay.
 */
import { updateAttachmentData } from '../attachment-data/index.ts';
import { PermanentRoutineError, defineFilingRoutine } from './catalog.ts';

export const cleanUpRoutine = defineFilingRoutine({
  name: 'CLEAN_UP',
  timeoutMs: 30_000,
  retry: 'backoff',
  run: async (ctx) => {
    if (!ctx.config.queueDropBlobRequestTypes.includes(ctx.requestType)) {
      ctx.log('clean-up policy: keep payloads');
      return;
    }
    const data = await ctx.readText('REQUEST_DATA');
    if (typeof data.event_id !== 'number') {
      throw new PermanentRoutineError('Refusing to drop the payload of a request that is not attached');
    }
    const dropped = await updateAttachmentData(
      ctx.trx,
      ctx.dialect,
      { requestId: ctx.routine.request_id, mnemonic: 'REQUEST_BLOB' },
      { blobData: null },
      ctx.stamp(),
    );
    ctx.log(`clean-up policy: dropped ${dropped} REQUEST_BLOB blob(s)`);
  },
});
