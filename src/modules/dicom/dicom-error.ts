/**
 * Why a DICOM payload could not be read or turned into an image: a closed set of causes, each with a
 * message naming the element, offset or limit involved (never a value from the file, which could be
 * patient data).
 */

export type DicomErrorCode =
  /** No `DICM` prefix at byte 128 (not a Part 10 file, or a bare data set without file meta information). */
  | 'no-dicm-prefix'
  /** The file meta information group (0002) is malformed. */
  | 'bad-file-meta'
  | 'missing-transfer-syntax'
  | 'unsupported-transfer-syntax'
  /** An element, item or fragment runs past the end of the file (or of its enclosing item): truncated. */
  | 'element-past-end'
  /** An undefined-length sequence, item or pixel data was not closed before the end of the file. */
  | 'unterminated-sequence'
  | 'bad-vr'
  /** A length that the encoding forbids (undefined length on a plain element, odd structure). */
  | 'bad-length'
  /** A sequence holds something other than items, or a delimiter appears where none is open. */
  | 'bad-sequence'
  | 'bad-deflate'
  /** The structure checks passed but the parser could not read the data set's values. */
  | 'unreadable-data-set'
  | 'too-many-elements'
  | 'nesting-too-deep'
  | 'too-large'
  /** A string value longer than its VR allows (PS3.5 Table 6.2-1; `value-limits.ts`). */
  | 'value-too-long'
  /** A long text, or an element read as text, over the site's limit (`DICOM_MAX_TEXT_BYTES`). */
  | 'text-too-long'
  | 'no-pixel-data'
  /** Rows, Columns, Bits Allocated or Samples per Pixel missing or impossible. */
  | 'bad-image-attributes'
  /** The native pixel data is shorter than the frames it declares. */
  | 'pixel-data-short'
  /** Rows x Columns x Samples per Pixel of one frame is over the pixel limit (a decompression bomb). */
  | 'too-many-pixels'
  /** A compressed frame's own header gives other dimensions than Rows and Columns. */
  | 'codestream-mismatch'
  | 'unsupported-photometric'
  /** The codec or renderer failed on the pixel data. */
  | 'decode-failed'
  | 'bad-encapsulated-document'
  /** The decoding worker ran past its time limit. */
  | 'timeout'
  /** The decoding worker ran past its memory limit. */
  | 'out-of-memory'
  /** The decoding worker stopped for another reason. */
  | 'worker-failed';

/** Causes that retrying cannot change and that make the file unusable (the routine ends FAILED). */
export class DicomError extends Error {
  readonly code: DicomErrorCode;
  constructor(code: DicomErrorCode, message: string) {
    super(message);
    this.name = 'DicomError';
    this.code = code;
  }
}

/** The plain form a worker thread sends back for a {@link DicomError}. */
export interface DicomErrorData {
  readonly code: DicomErrorCode;
  readonly message: string;
}

/** `(7FE0,0010)` for a tag number `0x7FE00010`. */
export function formatTag(tag: number): string {
  const hex = (tag >>> 0).toString(16).toUpperCase().padStart(8, '0');
  return `(${hex.slice(0, 4)},${hex.slice(4)})`;
}

/** The text of anything thrown; dicom-parser throws strings and `{ exception }` objects as well as errors. */
export function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message;
  if (typeof error === 'object' && error !== null && 'exception' in error) return String(error.exception);
  return String(error);
}
