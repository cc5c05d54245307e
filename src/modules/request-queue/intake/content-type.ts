/**
 * Content types of queue add: the effective type (the `content_type` query parameter, else the header), the
 * handler it selects, and the strict decoders of the bodies that are not multipart (JSON, URL-encoded forms
 * with nested `data[...]` fields, text). Pure functions, no HTTP types.
 */

/** Which of OpenEyes's handlers (none, JSON, multipart, url-encoded form, raw) an effective type selects. */
export type HandlerKind = 'none' | 'json' | 'multipart' | 'urlencoded' | 'raw';

/**
 * `Type/Sub ; charset=x` -> `type/sub`: lower-case, trimmed, parameters dropped (the
 * original matched case-, space- and parameter-sensitively). Empty or missing -> undefined.
 */
export function normaliseMediaType(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const semicolon = value.indexOf(';');
  const type = (semicolon === -1 ? value : value.slice(0, semicolon)).trim().toLowerCase();
  return type === '' ? undefined : type;
}

/** The `content_type` query parameter when it is a non-empty string, else the header's media type. */
export function effectiveContentType(override: unknown, header: string | undefined): string | undefined {
  if (typeof override === 'string') {
    const normalised = normaliseMediaType(override);
    if (normalised !== undefined) return normalised;
  }
  return normaliseMediaType(header);
}

export function handlerKindOf(type: string | undefined): HandlerKind {
  switch (type) {
    case undefined:
      return 'none';
    case 'application/json':
      return 'json';
    case 'multipart/form-data':
      return 'multipart';
    case 'application/x-www-form-urlencoded':
      return 'urlencoded';
    default:
      return 'raw';
  }
}

const BOUNDARY = /;\s*boundary\s*=\s*(?:"([^"]{1,70})"|([^\s;"]{1,70}))/i;

/** The multipart boundary parameter of a Content-Type header, if any. */
export function boundaryOf(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const match = BOUNDARY.exec(header);
  return match === null ? undefined : (match[1] ?? match[2]);
}

/** Effective types whose payload is stored as text (`text_data`) rather than bytes, as in OpenEyes. */
export const TEXT_PAYLOAD_TYPES: ReadonlySet<string> = new Set([
  'application/json',
  'application/xml',
  'text/plain',
]);

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Strict UTF-8 decoding: undefined when the bytes are not valid UTF-8. */
export function decodeUtf8(bytes: Uint8Array): string | undefined {
  try {
    return utf8.decode(bytes);
  } catch {
    return undefined;
  }
}

/**
 * True when `text` holds a NUL character. PostgreSQL text cannot store one (SQLite can), so every text
 * that reaches a text column is refused with it, the same on every dialect.
 */
export function hasNulCharacter(text: string): boolean {
  return text.includes('\u0000');
}

/** The 422 message for a NUL character in the field labelled `label` (`System Message`). */
export function nulCharacterMessage(label: string): string {
  return `${label} must not contain a NUL character.`;
}

// --- form fields --------------------------------------------------------------------------------------

/** A nested form value: `data[a][b]=1` -> `{ data: { a: { b: '1' } } }`, `x[]=1&x[]=2` -> arrays. */
export type FormValue = string | FormValue[] | { [key: string]: FormValue };
export type FormObject = { [key: string]: FormValue };

export const FORM_LIMITS = {
  /** Bracket levels below the top-level name (`data[a][b]` is 2). */
  maxDepth: 8,
  maxFields: 1000,
  maxNameLength: 200,
} as const;

/** Why a set of form fields was refused; the caller turns it into a 422 `data` message. */
export class FormFieldError extends Error {}

// Names are a safe identifier plus bracketed segments: no control characters, quotes or spaces, so a
// name can never smuggle a header line or markup into a stored row (the "header injection").
const FIELD_NAME = /^([A-Za-z0-9_.-]+)((?:\[[A-Za-z0-9_.-]*\])*)$/;
const SEGMENT = /\[([A-Za-z0-9_.-]*)\]/g;

/** True when `name` is a safe form field name (see FIELD_NAME). */
export function isSafeFieldName(name: string): boolean {
  return name.length <= FORM_LIMITS.maxNameLength && FIELD_NAME.test(name);
}

/**
 * Builds the nested object of a list of `name=value` pairs in order, bounded in count, name length and
 * depth. Objects have no prototype, so a `__proto__` segment is an ordinary key.
 */
export function buildFormObject(pairs: Iterable<readonly [string, string]>): FormObject {
  const root: FormObject = Object.create(null) as FormObject;
  let count = 0;
  for (const [name, value] of pairs) {
    count += 1;
    if (count > FORM_LIMITS.maxFields) throw new FormFieldError('Too many form fields.');
    if (!isSafeFieldName(name)) throw new FormFieldError('Invalid form field name.');
    const match = FIELD_NAME.exec(name)!;
    const path = [match[1]!, ...[...match[2]!.matchAll(SEGMENT)].map((m) => m[1]!)];
    if (path.length - 1 > FORM_LIMITS.maxDepth)
      throw new FormFieldError('Form fields are nested too deeply.');
    setPath(root, path, value);
  }
  return root;
}

function setPath(root: FormObject, path: readonly string[], value: string): void {
  let node: FormObject | FormValue[] = root;
  for (let i = 0; i < path.length; i += 1) {
    const isLast = i === path.length - 1;
    const key = path[i]!;
    if (Array.isArray(node)) {
      // `x[]` appends; any other segment under an array is a conflict.
      if (key !== '') throw new FormFieldError('Conflicting form fields.');
      if (isLast) {
        node.push(value);
        return;
      }
      const child: FormObject = Object.create(null) as FormObject;
      node.push(child);
      node = child;
      continue;
    }
    if (key === '') throw new FormFieldError('Conflicting form fields.');
    const existing: FormValue | undefined = node[key];
    if (isLast) {
      if (existing !== undefined) {
        // A repeated plain name keeps the last value, as PHP and most form parsers do.
        if (typeof existing !== 'string') throw new FormFieldError('Conflicting form fields.');
      }
      node[key] = value;
      return;
    }
    const wantsArray = path[i + 1] === '';
    if (existing === undefined) {
      const child: FormObject | FormValue[] = wantsArray ? [] : (Object.create(null) as FormObject);
      node[key] = child;
      node = child;
    } else if (typeof existing === 'string' || Array.isArray(existing) !== wantsArray) {
      throw new FormFieldError('Conflicting form fields.');
    } else {
      node = existing;
    }
  }
}

/**
 * Splits an `application/x-www-form-urlencoded` body into name/value pairs, decoding `+` and percent
 * escapes strictly: invalid UTF-8 throws a FormFieldError with `Invalid text encoding.`.
 */
export function parseUrlEncoded(text: string): Array<[string, string]> {
  const pairs: Array<[string, string]> = [];
  if (text === '') return pairs;
  for (const piece of text.split('&')) {
    if (piece === '') continue;
    if (pairs.length >= FORM_LIMITS.maxFields) throw new FormFieldError('Too many form fields.');
    const equals = piece.indexOf('=');
    const rawName = equals === -1 ? piece : piece.slice(0, equals);
    const rawValue = equals === -1 ? '' : piece.slice(equals + 1);
    pairs.push([decodeFormComponent(rawName), decodeFormComponent(rawValue)]);
  }
  return pairs;
}

function decodeFormComponent(text: string): string {
  try {
    return decodeURIComponent(text.replaceAll('+', ' '));
  } catch {
    throw new FormFieldError('Invalid text encoding.');
  }
}
