/**
 * Byte and media-type rules of attachments: the `type/subtype` syntax, the type an upload is stored
 * as (by the shared content sniffer), and the original's strict base64 rule kept behind a compatibility
 * switch (decode when strict base64 gives a non-empty, non-"0" result).
 */
import { sniffContentType } from '../../files/content-sniffer.ts';

// RFC 6838 4.2 restricted-name, both halves; no parameters, no whitespace, no CR/LF.
const MEDIA_TYPE = /^[a-z0-9][a-z0-9!#$&^_.+-]{0,126}\/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}$/i;

/** The lower-cased `type/subtype` when `value` is one, else undefined. */
export function normaliseMediaType(value: string): string | undefined {
  return MEDIA_TYPE.test(value) ? value.toLowerCase() : undefined;
}

/** The `type/subtype` of a Content-Type header, parameters dropped; undefined when malformed. */
export function mediaTypeOfHeader(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  return normaliseMediaType((header.split(';')[0] ?? '').trim());
}

/** Form types describe how fields were sent, never what a file is: never stored as an attachment's type. */
const FORM_TYPES: ReadonlySet<string> = new Set(['application/x-www-form-urlencoded', 'multipart/form-data']);

/**
 * The type an upload is stored as: the declared one, or, when the client declared none or a form type
 * (curl's default for `--data-binary`), the type its bytes prove; undefined when neither says.
 */
export async function uploadTypeOf(declared: string | undefined, bytes: Buffer): Promise<string | undefined> {
  if (declared !== undefined && !FORM_TYPES.has(declared)) return declared;
  return sniffContentType(bytes);
}

/** What a thumbnail is served as when the caller names no `mime`: JPEG/PNG by sniffing, else octet-stream. */
export async function thumbnailTypeOf(bytes: Buffer): Promise<string> {
  const sniffed = await sniffContentType(bytes);
  return sniffed === 'image/jpeg' || sniffed === 'image/png' ? sniffed : 'application/octet-stream';
}

/** The declared types whose bytes must prove them (an upload that lies about them is refused). */
const PROVABLE: Readonly<Record<string, string>> = {
  'image/jpeg': 'image/jpeg',
  'image/jpg': 'image/jpeg',
  'image/png': 'image/png',
  'application/pdf': 'application/pdf',
};

/** True when `declared` is an image or PDF type that the bytes do not bear out. */
export async function contradictsDeclaredType(declared: string, bytes: Buffer): Promise<boolean> {
  const expected = PROVABLE[declared];
  return expected !== undefined && (await sniffContentType(bytes)) !== expected;
}

/**
 * The original's rule (PHP `base64_decode($data, true)`): when the whole value is strict base64
 * (whitespace skipped, correct padding, nothing after it) and decodes to something other than "" or
 * "0", those decoded bytes are sent; otherwise the raw value. Off by default because it corrupts any
 * stored text that happens to be valid base64 (`test`, `1234`).
 */
export function decodeLikeOriginal(raw: Buffer): Buffer {
  // Skip the work for anything with a byte outside the base64 alphabet and PHP's skipped whitespace.
  for (const byte of raw) {
    const isAlphabet =
      (byte >= 0x41 && byte <= 0x5a) ||
      (byte >= 0x61 && byte <= 0x7a) ||
      (byte >= 0x30 && byte <= 0x39) ||
      byte === 0x2b ||
      byte === 0x2f ||
      byte === 0x3d;
    const isSkipped = byte === 0x20 || byte === 0x09 || byte === 0x0a || byte === 0x0d;
    if (!isAlphabet && !isSkipped) return raw;
  }
  const text = raw.toString('latin1').replace(/[ \t\r\n]/g, '');
  const match = /^([A-Za-z0-9+/]*)(={0,2})$/.exec(text);
  if (match === null) return raw;
  const [, body = '', padding = ''] = match;
  if (body.length % 4 === 1) return raw;
  if (padding.length > 0 && (body.length + padding.length) % 4 !== 0) return raw;
  const decoded = Buffer.from(body, 'base64');
  if (decoded.length === 0 || (decoded.length === 1 && decoded[0] === 0x30)) return raw;
  return decoded;
}
