/**
 * Attachments: view (`GET|HEAD attachmentdisplay/view`) and upload (`POST attachmentdisplay/create`).
 * Other modules that write `attachment_data` may call `refreshAttachmentDigests` afterwards to spare the
 * first view a read; `last_modified_date` is moved by a database trigger on every write (migration 0005).
 */
export { attachmentRoutes } from './attachment.routes.ts';
export { digestField, refreshAttachmentDigests, saveFieldDigest } from './attachment-digest.ts';
export type { DataField } from './attachment.queries.ts';
export { DATA_FIELDS } from './attachment.queries.ts';
export type { FoundAttachment, PayloadPart } from './attachment-find.ts';
export {
  MAX_FOUND_ATTACHMENTS,
  findAttachment,
  findAttachmentRequestId,
  findEventAttachments,
  findPatientAttachments,
  findFiledAttachment,
  listRequestPayloadParts,
} from './attachment-find.ts';
export type { AttachmentService, LoadedAttachment } from './attachment.service.ts';
export { createAttachmentService } from './attachment.service.ts';
