/**
 * The owner of `attachment_data` rows and of their filing under events (`event_attachment_group`,
 * `event_attachment_item`): the queue's intake and routines and attachment create write them only through
 * this module. Attachment view reads them itself (its own hot queries and digests).
 */
export type {
  AttachmentDataChange,
  AttachmentDataTarget,
  AuditStamp,
  NewAttachmentData,
} from './attachment-data.ts';
export {
  attachmentDataRow,
  contentHash,
  insertAttachmentData,
  insertOneAttachmentData,
  updateAttachmentData,
} from './attachment-data.ts';
export type { BinaryColumn, ChangeWhileReading, ExpectedBlob } from './blob-slices.ts';
export { ChangedWhileReadingError, readBlobSlices } from './blob-slices.ts';
export type { EventLink } from './event-link.ts';
export { isAttachedToPatient, linkAttachmentsToEvent } from './event-link.ts';
export type { PayloadRow, RequestContent } from './payloads.ts';
export {
  NON_PAYLOAD_MNEMONICS,
  findDicomPayload,
  findPayloads,
  isImageMime,
  readPayloadBytes,
  readRequestContent,
  readRequestContents,
} from './payloads.ts';
export { readRequestText, writeRequestText, writeRequestTexts } from './text-rows.ts';
