/**
 * Reads a sign/add request body into a {@link SignatureInput}: strict JSON, every field's type checked,
 * images decoded and verified. Pure and synchronous, so that large bodies
 * can be read on a worker thread (`body-decoder.ts`) and small ones inline.
 */
import type { ImageField } from './signature-image.ts';
import { readImageField } from './signature-image.ts';

/** The longest `return_message` stored for a signature: it embeds the client's `extra_info` text. */
export const MAX_RETURN_MESSAGE_CHARS = 1000;

/** Largest value of the `integer` id columns: a larger id cannot exist (and would overflow PostgreSQL). */
export const MAX_ID = 2 ** 31 - 1;

export interface SignatureInput {
  /** A non-empty string, else undefined (`Missing unique_identifier`). */
  readonly uniqueIdentifier: string | undefined;
  /** `extra_info` was present and not null. */
  readonly hasExtraInfo: boolean;
  /** `e_id` of `extra_info` when it is a positive integer (or its decimal text), else undefined. */
  readonly elementId: number | undefined;
  /** `e_t_id` of `extra_info`, same rule as `elementId`. */
  readonly elementTypeId: number | undefined;
  /** `extra_info` as sent (serialised when it was an object), cut to the return-message cap. */
  readonly extraInfoText: string;
  readonly image: ImageField;
  readonly origImage: ImageField;
  /** Absent, a positive integer, or `invalid` (wrong type or format). */
  readonly originalLogId: number | 'invalid' | undefined;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Parses `body` strictly (valid UTF-8, valid JSON) and reads its fields. Returns undefined when the body
 * is not a JSON object: the route answers 400 `"Bad request"`.
 */
export function readSignatureBody(body: Uint8Array): SignatureInput | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(utf8.decode(body));
  } catch {
    return undefined;
  }
  if (!isPlainObject(parsed)) return undefined;
  return readSignatureFields(parsed);
}

/** Reads the fields of a parsed body object. */
export function readSignatureFields(body: Record<string, unknown>): SignatureInput {
  const code = own(body, 'unique_identifier');
  const extraInfo = own(body, 'extra_info');
  const hasExtraInfo = extraInfo !== undefined && extraInfo !== null;
  const extra = hasExtraInfo ? readExtraInfo(extraInfo) : {};
  return {
    uniqueIdentifier: typeof code === 'string' && code !== '' ? code : undefined,
    hasExtraInfo,
    elementId: readPositiveInteger(own(extra, 'e_id')),
    elementTypeId: readPositiveInteger(own(extra, 'e_t_id')),
    extraInfoText: hasExtraInfo ? extraInfoText(extraInfo) : '',
    image: readImageField(own(body, 'image')),
    origImage: readImageField(own(body, 'origImage')),
    originalLogId: readOriginalLogId(own(body, 'original_log_id')),
  };
}

/**
 * `extra_info` may be a JSON object or JSON text of one (the QR flow sends text). Anything else, or
 * undecodable text, counts as `{}`, as in the original.
 */
function readExtraInfo(value: unknown): Record<string, unknown> {
  if (typeof value === 'string') {
    try {
      const decoded: unknown = JSON.parse(value);
      return isPlainObject(decoded) ? decoded : {};
    } catch {
      return {};
    }
  }
  return isPlainObject(value) ? value : {};
}

/**
 * A positive integer given as a JSON number or as its plain decimal text (`12`, `"12"`). Negative, zero,
 * fractional, exponent or padded forms, booleans, objects and arrays give undefined: such an id cannot
 * name an element, so it counts as missing.
 */
export function readPositiveInteger(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isSafeInteger(value) && value > 0 ? value : undefined;
  if (typeof value === 'string' && /^[1-9][0-9]{0,15}$/.test(value)) {
    const n = Number(value);
    return Number.isSafeInteger(n) ? n : undefined;
  }
  return undefined;
}

function readOriginalLogId(value: unknown): number | 'invalid' | undefined {
  if (value === undefined || value === null) return undefined;
  const id = readPositiveInteger(value);
  return id === undefined || id > MAX_ID ? 'invalid' : id;
}

export const UNSERIALISABLE_EXTRA_INFO = '[extra_info nested too deeply to serialise]';

function extraInfoText(value: unknown): string {
  if (typeof value === 'string') return capText(value, MAX_RETURN_MESSAGE_CHARS);
  try {
    return capText(JSON.stringify(value), MAX_RETURN_MESSAGE_CHARS);
  } catch {
    // JSON.parse accepts any depth, JSON.stringify recurses and runs out of stack.
    return UNSERIALISABLE_EXTRA_INFO;
  }
}

/**
 * Cuts `text` to `maxChars` without splitting a surrogate pair, and replaces NUL characters (which
 * PostgreSQL text columns refuse).
 */
export function capText(text: string, maxChars: number): string {
  let cut = text.length > maxChars ? text.slice(0, maxChars) : text;
  if (cut.length < text.length && /[\uD800-\uDBFF]$/.test(cut)) cut = cut.slice(0, -1);
  return cut.includes('\u0000') ? cut.replaceAll('\u0000', '\uFFFD') : cut;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A property of a parsed JSON object, never one inherited from Object.prototype. */
function own(object: Record<string, unknown>, key: string): unknown {
  return Object.hasOwn(object, key) ? object[key] : undefined;
}
