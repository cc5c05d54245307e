/**
 * How `EXTRACT_IMAGE` stores what it extracts from a DICOM payload (the images and PDFs), through the
 * `attachment_data` owner module. A row is payload content (`system_only_managed` 0), so
 * `ATTACH_TO_EVENT` links it with the request's other payloads; running the routine again replaces the
 * content of the row of the same mnemonic.
 */
import type { AttachmentDataChange } from '../attachment-data/index.ts';
import { contentHash, insertOneAttachmentData, updateAttachmentData } from '../attachment-data/index.ts';
import type { RoutineContext } from './catalog.ts';
import type { Thumbnails } from './make-thumbnails.ts';

export interface ExtractedAttachment {
  readonly mnemonic: string;
  readonly mimeType: string;
  readonly bytes: Buffer;
  readonly uploadFileName: string;
  readonly thumbnails?: Thumbnails;
}

/**
 * Writes `attachment` as the request's row `mnemonic` (created with no body site; device filing sets the
 * eye when it files the row), its thumbnails in the same statement as its content; returns its id.
 */
export async function writeExtractedAttachment(
  ctx: RoutineContext,
  attachment: ExtractedAttachment,
): Promise<number> {
  const requestId = ctx.routine.request_id;
  const existing = await ctx.trx
    .selectFrom('attachment_data')
    .select('id')
    .where('request_id', '=', requestId)
    .where('attachment_mnemonic', '=', attachment.mnemonic)
    .orderBy('id')
    .executeTakeFirst();
  if (existing === undefined) {
    const inserted = await insertOneAttachmentData(
      ctx.trx,
      {
        requestId,
        mnemonic: attachment.mnemonic,
        mimeType: attachment.mimeType,
        blobData: attachment.bytes,
        uploadFileName: attachment.uploadFileName,
        systemOnlyManaged: 0,
        ...(attachment.thumbnails === undefined ? {} : { thumbnails: attachment.thumbnails }),
      },
      ctx.stamp(),
    );
    return inserted.id;
  }
  const change: AttachmentDataChange = {
    blobData: attachment.bytes,
    hashCode: contentHash(attachment.bytes),
    thumbnails: {
      small: attachment.thumbnails?.small ?? null,
      medium: attachment.thumbnails?.medium ?? null,
      large: attachment.thumbnails?.large ?? null,
    },
  };
  await updateAttachmentData(ctx.trx, ctx.dialect, { id: existing.id }, change, ctx.stamp());
  return existing.id;
}
