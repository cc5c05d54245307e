/**
 * `EXTRACT_IMAGE` (the Java processor's `GENERIC_EXTRACT_IMAGE`): turns the request's DICOM payload into
 * viewable attachments, between `DICOM_SEED` and `PATIENT_MATCH`. The DICOM module decodes on its worker
 * threads; this routine stores, in `prepare` (outside the write transaction on SQLite), what it made:
 *
 * - an image file: one PNG (lossless source) or JPEG (lossy source) row per extracted frame,
 *   `DICOM_IMAGE_<frame number>`, at most `DICOM_MAX_FRAMES` of them evenly spaced (the frame count is
 *   kept in `REQUEST_DATA`), each with small/medium/large thumbnails made from the decoded pixels;
 * - an Encapsulated PDF: the PDF as an `application/pdf` row `DICOM_PDF`, with thumbnails of page 1;
 * - a well-formed file with no image to extract (no pixel data, a video transfer syntax, an unsupported
 *   photometric interpretation): no row, a log line naming the reason and the transfer syntax, and the
 *   chain goes on, so that the DICOM file is still attached as the original;
 * - a file that cannot be decoded (corrupt or truncated pixel data, a frame over the pixel limit, a
 *   decoder past its time or memory limit): FAILED at once, the reason and transfer syntax logged.
 *
 * The payload is parsed here for its pixels (or document) only: what its header says is the study
 * record's. The DICOM payload row itself stays as it is (the original).
 */
import type { DicomExtraction } from '../dicom/index.ts';
import { DicomError, describeTransferSyntax, extractDicomImages } from '../dicom/index.ts';
import { PermanentRoutineError, defineFilingRoutine } from './catalog.ts';
import { readDicomPayload } from './dicom-payload.ts';
import { readStoredStudyRecord } from './study-record.ts';
import type { ExtractedAttachment } from './extracted-attachments.ts';
import { writeExtractedAttachment } from './extracted-attachments.ts';
import { THUMBNAIL_SIZES_PX, makeThumbnails, thumbnailOptionsOf } from './make-thumbnails.ts';

interface Extracted {
  readonly attachments: readonly ExtractedAttachment[];
  readonly extraction: DicomExtraction;
}

export const extractImageRoutine = defineFilingRoutine<Extracted>({
  name: 'EXTRACT_IMAGE',
  timeoutMs: 120_000,
  retry: 'backoff',
  prepare: async (ctx) => {
    const bytes = await readDicomPayload(ctx);
    let extraction: DicomExtraction;
    try {
      // Thumbnails are all that is made from the pixels of a frame kept as the file holds it.
      extraction = await extractDicomImages(bytes, ctx.config, { previewSizePx: THUMBNAIL_SIZES_PX.large });
    } catch (error) {
      if (!(error instanceof DicomError)) throw error;
      // The transfer syntax the study record names; a request whose DICOM_SEED ran before receipt
      // stored records has none, and the syntax goes unnamed rather than the file parsed again.
      const record = await readStoredStudyRecord(ctx);
      throw new PermanentRoutineError(
        `No image extracted (${error.code}): ${error.message}; transfer syntax ${describeTransferSyntax(record?.transferSyntaxUid)}`,
      );
    }
    const attachments: ExtractedAttachment[] = [];
    if (extraction.kind === 'images') {
      for (const image of extraction.images) {
        const extension = image.mimeType === 'image/png' ? 'png' : 'jpg';
        attachments.push({
          mnemonic: `DICOM_IMAGE_${image.frameNumber}`,
          mimeType: image.mimeType,
          bytes: image.bytes,
          uploadFileName: `frame-${image.frameNumber}.${extension}`,
          thumbnails: await makeThumbnails(image.raw, thumbnailOptionsOf(ctx.config)),
        });
      }
    } else if (extraction.kind === 'pdf') {
      attachments.push({
        mnemonic: 'DICOM_PDF',
        mimeType: 'application/pdf',
        bytes: extraction.pdf,
        uploadFileName: 'document.pdf',
        ...(extraction.page === undefined
          ? {}
          : { thumbnails: await makeThumbnails(extraction.page, thumbnailOptionsOf(ctx.config)) }),
      });
    }
    return { attachments, extraction };
  },
  run: async (ctx, { attachments, extraction }) => {
    const syntax = describeTransferSyntax(extraction.transferSyntaxUid);
    for (const attachment of attachments) {
      const id = await writeExtractedAttachment(ctx, attachment);
      ctx.log(
        `attachment_data ${id}: ${attachment.mnemonic} ${attachment.mimeType}${attachment.thumbnails ? ' with thumbnails' : ''}`,
      );
    }
    if (extraction.kind === 'images') {
      await ctx.mergeRequestData({ dicom_extracted_frames: extraction.images.length });
      ctx.log(
        `${extraction.images.length} of ${extraction.numberOfFrames} frame(s) extracted; transfer syntax ${syntax}`,
      );
    } else if (extraction.kind === 'pdf') {
      ctx.log(
        extraction.pageError === undefined
          ? `encapsulated PDF extracted; transfer syntax ${syntax}`
          : `encapsulated PDF extracted, page 1 not rendered (${extraction.pageError}); transfer syntax ${syntax}`,
      );
    } else {
      ctx.log(`no image extracted (${extraction.code}): ${extraction.message}; transfer syntax ${syntax}`);
    }
  },
});
