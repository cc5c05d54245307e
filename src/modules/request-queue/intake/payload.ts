/**
 * The payload of a queue add submission by its handler (the one OpenEyes picks by effective type): a JSON
 * body, a url-encoded form, a raw body of any other type, or multipart parts, each turned into attachment
 * rows (REQUEST_BLOB or one row per file part, FORM_DATA for the form fields) with field errors collected the
 * way the 422 answer reports them.
 */
import { NON_PAYLOAD_MNEMONICS, contentHash } from '../../attachment-data/index.ts';
import type { FormObject, HandlerKind } from './content-type.ts';
import {
  FormFieldError,
  TEXT_PAYLOAD_TYPES,
  buildFormObject,
  decodeUtf8,
  hasNulCharacter,
  nulCharacterMessage,
  parseUrlEncoded,
} from './content-type.ts';
import type { AttachmentRowInput } from './intake.queries.ts';

/** The rows every request carries besides its payload; no client part may take these names. */
export const RESERVED_MNEMONICS: ReadonlySet<string> = new Set([...NON_PAYLOAD_MNEMONICS, 'REQUEST_BLOB']);

const MAX_MNEMONIC = 45;
const MAX_FILE_NAME = 100;
/** Longest client text echoed back in a message (a mime type), so a 422 never mirrors a huge header. */
export const MAX_ECHO = 100;
/** One part of a multipart body, already read in full by the route. */
export type MultipartPart =
  | {
      readonly kind: 'file';
      readonly name: string | undefined;
      readonly fileName: string;
      readonly mimeType: string | undefined;
      /** The type the bytes prove (the shared content sniffer), when any. */
      readonly sniffedType: string | undefined;
      readonly bytes: Buffer;
    }
  | { readonly kind: 'field'; readonly name: string | undefined; readonly value: string };

/** What the route hands over: everything the client sent, parsed only as far as the transport needs. */
/** Field -> first message. */
export class FieldErrors {
  readonly map: Record<string, string> = {};
  add(field: string, message: string): void {
    if (!(field in this.map)) this.map[field] = message;
  }
  copy(): FieldErrors {
    const copy = new FieldErrors();
    Object.assign(copy.map, this.map);
    return copy;
  }
  get isEmpty(): boolean {
    return Object.keys(this.map).length === 0;
  }
}

export interface Payload {
  /** Payload rows (REQUEST_BLOB or the file parts), in order. */
  readonly rows: AttachmentRowInput[];
  /** FORM_DATA row for the form types. */
  readonly form: { readonly mimeType: string; readonly fields: FormObject } | undefined;
  /** Top-level JSON fields (a source of request_type / system_message). */
  readonly jsonFields: Readonly<Record<string, unknown>> | undefined;
}

/** What {@link readPayload} reads: the effective type, its handler and the body. */
export interface PayloadSubmission {
  readonly effectiveType: string | undefined;
  readonly kind: HandlerKind;
  readonly body: Buffer | readonly MultipartPart[] | undefined;
}

const NO_PAYLOAD: Payload = { rows: [], form: undefined, jsonFields: undefined };

export function readPayload(submission: PayloadSubmission, errors: FieldErrors): Payload {
  const { body, kind } = submission;
  switch (kind) {
    case 'none':
      errors.add('data', 'Data cannot be blank.');
      return NO_PAYLOAD;
    case 'multipart':
      return readMultipart(Array.isArray(body) ? (body as readonly MultipartPart[]) : [], errors);
    case 'json':
      return readJson(asBuffer(body), errors);
    case 'urlencoded':
      return readUrlEncoded(asBuffer(body), errors);
    case 'raw':
      return readRaw(submission.effectiveType ?? 'application/octet-stream', asBuffer(body), errors);
  }
}

function asBuffer(body: PayloadSubmission['body']): Buffer {
  return Buffer.isBuffer(body) ? body : Buffer.alloc(0);
}

function readJson(bytes: Buffer, errors: FieldErrors): Payload {
  const text = decodeUtf8(bytes);
  let parsed: unknown;
  try {
    if (text === undefined) throw new SyntaxError('not UTF-8');
    parsed = JSON.parse(text);
  } catch {
    errors.add('data', 'Invalid JSON body.');
    return NO_PAYLOAD;
  }
  const fields = isPlainObject(parsed) ? parsed : undefined;
  const data = fields?.data;
  if (data === undefined || data === null) errors.add('data', 'Data cannot be blank.');
  else if (!isPlainObject(data)) errors.add('data', 'Data must be a JSON object.');
  return {
    rows: [payloadRow('REQUEST_BLOB', 'application/json', bytes, text, null)],
    form: undefined,
    jsonFields: fields,
  };
}

function readUrlEncoded(bytes: Buffer, errors: FieldErrors): Payload {
  const text = decodeUtf8(bytes);
  if (text === undefined) {
    errors.add('data', 'Invalid text encoding.');
    return NO_PAYLOAD;
  }
  let fields: FormObject;
  try {
    fields = buildFormObject(parseUrlEncoded(text));
  } catch (error) {
    if (!(error instanceof FormFieldError)) throw error;
    errors.add('data', error.message);
    return NO_PAYLOAD;
  }
  if (!hasFormData(fields)) errors.add('data', 'Data cannot be blank.');
  return { rows: [], form: { mimeType: 'application/x-www-form-urlencoded', fields }, jsonFields: undefined };
}

function readRaw(type: string, bytes: Buffer, errors: FieldErrors): Payload {
  if (bytes.length === 0) {
    errors.add('data', 'Data cannot be blank.');
    return {
      rows: [payloadRow('REQUEST_BLOB', type, bytes, undefined, null)],
      form: undefined,
      jsonFields: undefined,
    };
  }
  let text: string | undefined;
  if (TEXT_PAYLOAD_TYPES.has(type)) {
    text = decodeUtf8(bytes);
    if (text === undefined) errors.add('data', 'Invalid text encoding.');
    else if (hasNulCharacter(text)) errors.add('data', nulCharacterMessage('Text data'));
  }
  return {
    rows: [payloadRow('REQUEST_BLOB', type, bytes, text, null)],
    form: undefined,
    jsonFields: undefined,
  };
}

const FILE_FIELD = /^[A-Za-z0-9_.-]+$/;

function readMultipart(parts: readonly MultipartPart[], errors: FieldErrors): Payload {
  const rows: AttachmentRowInput[] = [];
  const pairs: Array<[string, string]> = [];
  const used = new Set<string>(RESERVED_MNEMONICS);
  // A refused file part still counts as a file: its own message explains the refusal, not "blank".
  let hasFile = false;
  for (const part of parts) {
    if (part.name === undefined || part.name === '') {
      errors.add('data', 'Every multipart part must have a name.');
      continue;
    }
    if (part.kind === 'field') {
      pairs.push([part.name, part.value]);
      continue;
    }
    if (part.bytes.length === 0 && part.fileName === '') continue; // a file input left empty by a browser
    hasFile = true;
    // `file[]` is the array style of HTML forms (OpenEyes crashed on it); the parts become file, file_2, ...
    const field = part.name.endsWith('[]') ? part.name.slice(0, -2) : part.name;
    if (!FILE_FIELD.test(field)) {
      errors.add(
        'attachment_mnemonic',
        'Attachment Mnemonic may only contain letters, digits, "_", "-" and ".".',
      );
      continue;
    }
    if (RESERVED_MNEMONICS.has(field)) {
      errors.add('attachment_mnemonic', `Attachment Mnemonic is reserved: ${field}`);
      continue;
    }
    const mnemonic = uniqueMnemonic(field, used);
    if (mnemonic.length > MAX_MNEMONIC) {
      errors.add(
        'attachment_mnemonic',
        `Attachment Mnemonic is too long (maximum is ${MAX_MNEMONIC} characters).`,
      );
      continue;
    }
    used.add(mnemonic);
    if (part.fileName.length > MAX_FILE_NAME) {
      errors.add(
        'upload_file_name',
        `Upload File Name is too long (maximum is ${MAX_FILE_NAME} characters).`,
      );
      continue;
    }
    if (part.bytes.length === 0) {
      errors.add(`AttachmentData: ${field}`, 'No file was uploaded');
      continue;
    }
    const declared = part.mimeType;
    const mimeType =
      declared === undefined || declared === 'application/octet-stream' || declared === 'text/plain'
        ? (part.sniffedType ?? declared ?? 'application/octet-stream')
        : declared;
    rows.push(
      payloadRow(mnemonic, mimeType, part.bytes, undefined, part.fileName === '' ? null : part.fileName),
    );
  }
  let fields: FormObject = Object.create(null) as FormObject;
  try {
    fields = buildFormObject(pairs);
  } catch (error) {
    if (!(error instanceof FormFieldError)) throw error;
    errors.add('data', error.message);
  }
  if (!hasFile && !hasFormData(fields)) errors.add('data', 'Data cannot be blank.');
  return { rows, form: { mimeType: 'multipart/form-data', fields }, jsonFields: undefined };
}

/** `field`, then `field_2`, `field_3`, ... skipping any name already taken. */
function uniqueMnemonic(field: string, used: ReadonlySet<string>): string {
  if (!used.has(field)) return field;
  for (let n = 2; ; n += 1) {
    const candidate = `${field}_${n}`;
    if (!used.has(candidate)) return candidate;
  }
}

function hasFormData(fields: FormObject): boolean {
  const data = fields.data;
  if (data === undefined) return false;
  if (typeof data === 'string') return data.trim() !== '';
  return Array.isArray(data) ? data.length > 0 : Object.keys(data).length > 0;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

// --- rows ---------------------------------------------------------------------------------------------

export function jsonRow(mnemonic: string, text: string): AttachmentRowInput {
  return textRow(mnemonic, 'application/json', text);
}

export function textRow(mnemonic: string, mimeType: string, text: string): AttachmentRowInput {
  return { mnemonic, mimeType, textData: text, blobData: null, uploadFileName: null, hashCode: null };
}

/**
 * A payload row: JSON, XML and plain text bodies go to `text_data`, everything else to `blob_data`, as in
 * OpenEyes. `hash_code` is the first 48 bits of the SHA-256 of the bytes, for de-duplication.
 */
function payloadRow(
  mnemonic: string,
  mimeType: string,
  bytes: Buffer,
  text: string | undefined,
  uploadFileName: string | null,
): AttachmentRowInput {
  const hashCode = contentHash(bytes);
  return text === undefined
    ? { mnemonic, mimeType, textData: null, blobData: bytes, uploadFileName, hashCode }
    : { mnemonic, mimeType, textData: text, blobData: null, uploadFileName, hashCode };
}
