/**
 * Strict decoding of the base64 images sign/add receives (an optional `data:<mime>;base64,` prefix stripped).
 * The original decoded leniently and stored whatever came out; here an image is accepted only when it is
 * canonical base64 of a structurally complete PNG or JPEG.
 */
import { crc32 } from 'node:zlib';

export type ImageFormat = 'png' | 'jpeg';

export interface DecodedImage {
  readonly bytes: Uint8Array;
  readonly format: ImageFormat;
}

/** What a body field that should hold an image turned out to be. */
export type ImageField =
  | { readonly state: 'absent' }
  | { readonly state: 'invalid' }
  | { readonly state: 'valid'; readonly image: DecodedImage };

export const IMAGE_MIME_TYPES: Record<ImageFormat, string> = { png: 'image/png', jpeg: 'image/jpeg' };
export const IMAGE_EXTENSIONS: Record<ImageFormat, string> = { png: 'png', jpeg: 'jpg' };

// `data:image/png;base64,` and the like: any media type, optional parameters, then `;base64,`.
const DATA_URL_PREFIX = /^data:[\w!#$&^.+-]+\/[\w!#$&^.+-]+(?:;[\w!#$&^.+-]+=[\w!#$&^.+-]+)*;base64,/i;

/**
 * Decodes strict base64: the standard alphabet, `=` padding to a multiple of four, no whitespace, no
 * URL-safe characters, no stray bits. Returns undefined for anything else. Strictness is checked by
 * re-encoding the decoded bytes: Node's decoder is lenient, and only canonical input round-trips.
 */
export function decodeStrictBase64(text: string): Buffer | undefined {
  if (text.length === 0 || text.length % 4 !== 0) return undefined;
  const bytes = Buffer.from(text, 'base64');
  return bytes.toString('base64') === text ? bytes : undefined;
}

/**
 * Reads one image field of the body. `undefined`, `null` and `""` are absent; anything that is not a
 * string, not strict base64 after an optional `data:<mime>;base64,` prefix, or not a complete PNG or
 * JPEG is invalid.
 */
export function readImageField(value: unknown): ImageField {
  if (value === undefined || value === null || value === '') return { state: 'absent' };
  if (typeof value !== 'string') return { state: 'invalid' };
  const match = DATA_URL_PREFIX.exec(value);
  const bytes = decodeStrictBase64(match === null ? value : value.slice(match[0].length));
  if (bytes === undefined) return { state: 'invalid' };
  const format = detectImageFormat(bytes);
  return format === undefined ? { state: 'invalid' } : { state: 'valid', image: { bytes, format } };
}

/** The format of `bytes` when they are a structurally complete PNG or JPEG, else undefined. */
export function detectImageFormat(bytes: Uint8Array): ImageFormat | undefined {
  if (isCompletePng(bytes)) return 'png';
  if (isCompleteJpeg(bytes)) return 'jpeg';
  return undefined;
}

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];
const MAX_PNG_DIMENSION = 2 ** 31 - 1;

/**
 * PNG: signature, an IHDR chunk first (13 bytes, non-zero size, a known bit depth/colour type), then a
 * chain of chunks with valid CRCs that contains IDAT and ends exactly with IEND at the end of the data.
 * A truncated file fails on the chain or on the missing IEND.
 */
export function isCompletePng(bytes: Uint8Array): boolean {
  if (bytes.length < 8 + 25 + 12) return false;
  for (let i = 0; i < 8; i++) if (bytes[i] !== PNG_SIGNATURE[i]) return false;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let offset = 8;
  let index = 0;
  let hasIdat = false;
  while (offset + 12 <= bytes.length) {
    const length = view.getUint32(offset);
    const type = String.fromCharCode(
      bytes[offset + 4]!,
      bytes[offset + 5]!,
      bytes[offset + 6]!,
      bytes[offset + 7]!,
    );
    const end = offset + 12 + length;
    if (length > 2 ** 31 - 1 || end > bytes.length || !/^[A-Za-z]{4}$/.test(type)) return false;
    const storedCrc = view.getUint32(end - 4);
    if (crc32(bytes.subarray(offset + 4, end - 4)) !== storedCrc) return false;
    if (index === 0) {
      if (type !== 'IHDR' || length !== 13) return false;
      const width = view.getUint32(offset + 8);
      const height = view.getUint32(offset + 12);
      const bitDepth = bytes[offset + 16]!;
      const colourType = bytes[offset + 17]!;
      if (width === 0 || height === 0 || width > MAX_PNG_DIMENSION || height > MAX_PNG_DIMENSION)
        return false;
      if (![1, 2, 4, 8, 16].includes(bitDepth) || ![0, 2, 3, 4, 6].includes(colourType)) return false;
    } else if (type === 'IHDR') {
      return false;
    }
    if (type === 'IDAT') hasIdat = true;
    if (type === 'IEND') return length === 0 && end === bytes.length && hasIdat;
    offset = end;
    index += 1;
  }
  return false;
}

/**
 * JPEG: SOI, then a chain of marker segments with consistent lengths up to the first SOS, containing a
 * frame header (SOFn) with non-zero width, and EOI as the last two bytes. Entropy-coded data after SOS
 * is not decoded: a truncated file fails on the missing EOI.
 */
export function isCompleteJpeg(bytes: Uint8Array): boolean {
  const n = bytes.length;
  if (n < 4 || bytes[0] !== 0xff || bytes[1] !== 0xd8 || bytes[2] !== 0xff) return false;
  if (bytes[n - 2] !== 0xff || bytes[n - 1] !== 0xd9) return false;
  let offset = 2;
  let hasFrame = false;
  while (offset + 4 <= n) {
    if (bytes[offset] !== 0xff) return false;
    let marker = bytes[offset + 1]!;
    // Fill bytes: any number of 0xFF before a marker.
    while (marker === 0xff && offset + 2 < n) {
      offset += 1;
      marker = bytes[offset + 1]!;
    }
    if (marker === 0xd8 || marker === 0xd9 || marker === 0x00) return false;
    // Standalone markers (TEM, RSTn) carry no length.
    if (marker === 0x01 || (marker >= 0xd0 && marker <= 0xd7)) {
      offset += 2;
      continue;
    }
    const length = (bytes[offset + 2]! << 8) | bytes[offset + 3]!;
    if (length < 2 || offset + 2 + length > n) return false;
    const isFrame = marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc;
    if (isFrame) {
      if (length < 8) return false;
      // Height 0 is legal in JPEG (defined later by a DNL marker); width 0 is not.
      const width = (bytes[offset + 7]! << 8) | bytes[offset + 8]!;
      if (width === 0) return false;
      hasFrame = true;
    }
    if (marker === 0xda) return hasFrame && offset + 2 + length <= n - 2;
    offset += 2 + length;
  }
  return false;
}
