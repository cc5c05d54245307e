/**
 * Signature import, `POST api/v1/sign/add`: a JSON body checked in a fixed order (400/413 before
 * any check, then every validation message joined in one 422), one transaction writing the files, the
 * signature row and a status 4 log row. Choices where that contract is silent:
 * - Every POST whose body is a JSON object writes exactly one import log row (a 422, a save or a failed save).
 *   A body refused before validation (400 not a JSON object, 413 too large), a throttled call (429), other
 *   methods (400) and preflights write nothing: no log row and no file.
 * - A 422 keeps the valid original capture (for a manual crop) only when the code resolved to an event:
 *   a wrong or missing code writes its log row with an empty `filename` and no file, so that the
 *   anonymous endpoint cannot fill the disk. The body is bounded by `SIGN_BODY_LIMIT_BYTES` (2 MiB).
 * - The original capture is stored before the signature: the signature is the second `protected_file`
 *   row of the call, and `signature_file_id` / `cropped_file_id` point at it.
 * - `e_id` / `e_t_id`: a positive integer as a JSON number or its plain decimal text (`"12"`); anything
 *   else (negative, zero, fractional, padded, other types) counts as missing (`Missing element id.`).
 *   Ids beyond the integer column range cannot exist: `Invalid UniqueCode or wrong event`.
 * - `unique_identifier` that is not a non-empty string: `Missing unique_identifier`; one that no code
 *   could be (not 1-16 ASCII letters/digits) is `Event not found` without a query.
 * - Images: strict canonical base64 only (padding required; whitespace and URL-safe characters are
 *   refused, not normalised); PNG = signature + IHDR first + CRC-valid chunk chain ending with IEND
 *   exactly at the end; JPEG = SOI + consistent segments up to SOS with a frame header + EOI last.
 *   `image`/`origImage` of `null` or `""` are absent; any other non-string is `Invalid image data`.
 * - `original_log_id`: a positive integer (number or decimal text) naming a log row with a stored
 *   original, whose event is the resolved event or none; otherwise `Invalid original_log_id`.
 * - `extra_info` serialised for `return_message`: as sent when text, `JSON.stringify` when an object;
 *   the whole `return_message` is cut at 1000 characters (it embeds the client's text), NUL replaced.
 * - Bodies above 64 KiB are parsed and their images checked on a worker thread (`body-decoder.ts`).
 */
export { signatureRoutes } from './signature.routes.ts';
export type {
  CropLink,
  ImportLogChange,
  ImportLogDetail,
  ImportLogFilter,
  ImportLogPage,
  ImportLogRow,
  ImportLogStatusId,
  ImportLogType,
} from './import-log.ts';
export {
  IMPORT_LOG_STATUS,
  findCropLinks,
  findImportLogDetail,
  findMissingOriginals,
  importLogStatusName,
  listImportLogs,
  markImportLog,
  readImportLogOriginal,
} from './import-log.ts';
export type { ManualCropInput, ManualCropOutcome, ManualCropper } from './manual-crop.ts';
export { createManualCropper, findSignatureTarget } from './manual-crop.ts';
