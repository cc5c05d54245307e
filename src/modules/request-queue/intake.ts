/**
 * Queue intake (reference 8.8): turns one submission (effective content type, body, query, headers)
 * into a validated request, then writes the request, its attachment rows and its first routine in ONE
 * transaction. The 422 message holds one string per field, the first error of each field winning
 * (reference D53). No HTTP types here: the route hands over plain values. DICOM instances received by
 * STOW-RS or C-STORE come in through {@link IntakeService.submitDicomInstance}, as a raw
 * `application/dicom` body, so that they make the same rows as queue add.
 */
import { LRUCache } from 'lru-cache';
import type { Kysely } from 'kysely';
import type { Config } from '../../config.ts';
import { NON_PAYLOAD_MNEMONICS, contentHash } from '../attachment-data/index.ts';
import type { Database } from '../../db/database.ts';
import { findUnstorableCharacter, unstorableCharacterMessage } from '../../db/schema-profile.ts';
import { nowDateTime } from '../../db/database.ts';
import type { DB } from '../../db/schema.ts';
import { AppError } from '../../errors.ts';
import { storedRequestHeaders } from '../../http/stored-headers.ts';
import type { FormObject, HandlerKind } from './content-type.ts';
import {
  FormFieldError,
  TEXT_PAYLOAD_TYPES,
  buildFormObject,
  decodeUtf8,
  handlerKindOf,
  hasNulCharacter,
  nulCharacterMessage,
  parseUrlEncoded,
} from './content-type.ts';
import type { AttachmentRowInput, QueuedRequestRows, RequestTypeRoute } from './intake.queries.ts';
import { insertQueuedRequestInOneStatement } from './intake.queries.postgres.ts';
import { findKnownMimeTypes, findRequestTypeRoute, insertQueuedRequest } from './intake.queries.ts';
import { emitRequestQueued, notifyQueueAfterCommit } from './queue-events.ts';

export type { AttachmentRowInput, RequestTypeRoute } from './intake.queries.ts';

/** The rows every request carries besides its payload; no client part may take these names. */
export const RESERVED_MNEMONICS: ReadonlySet<string> = new Set([...NON_PAYLOAD_MNEMONICS, 'REQUEST_BLOB']);

const MAX_MNEMONIC = 45;
const MAX_FILE_NAME = 100;
const MAX_SYSTEM_MESSAGE = 255;
const MAX_REQUEST_TYPE = 45;
/** Longest client text echoed back in a message (a mime type), so a 422 never mirrors a huge header. */
const MAX_ECHO = 100;

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
export interface IntakeSubmission {
  /** Normalised effective content type; undefined when the client gave none. */
  readonly effectiveType: string | undefined;
  readonly kind: HandlerKind;
  /** The raw body (every kind but multipart), or the multipart parts. */
  readonly body: Buffer | readonly MultipartPart[] | undefined;
  /** Parsed query parameters (stored as REQUEST_DATA). */
  readonly query: Readonly<Record<string, unknown>>;
  /** Request headers as received, names lower-case. */
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  /** The socket peer, or the client named by a trusted proxy. */
  readonly clientAddress: string;
  readonly userId: number;
  /** Writes that belong to the request's transaction (see {@link EnqueueRequestInput.alongside}). */
  readonly alongside?: AlongsideWrite;
}

/**
 * One DICOM Part 10 instance from a source other than queue add's body (a STOW-RS part, a C-STORE): it is
 * submitted exactly as queue add takes a raw `application/dicom` body, `requestData` standing for the
 * query string (REQUEST_DATA; its `request_type` and `system_message` are read from it the same way).
 */
export interface DicomInstanceSubmission {
  readonly bytes: Buffer;
  readonly requestData: Readonly<Record<string, unknown>>;
  /** What the transport received besides the bytes (HTTP headers, association details). */
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  readonly clientAddress: string;
  readonly userId: number;
  readonly alongside?: AlongsideWrite;
}

/** Extra writes run in the transaction that inserts a request, after its rows; a throw rolls it all back. */
export type AlongsideWrite = (trx: Kysely<DB>, requestId: number) => Promise<void>;

/** Field -> first message. */
class FieldErrors {
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

interface Payload {
  /** Payload rows (REQUEST_BLOB or the file parts), in order. */
  readonly rows: AttachmentRowInput[];
  /** FORM_DATA row for the form types. */
  readonly form: { readonly mimeType: string; readonly fields: FormObject } | undefined;
  /** Top-level JSON fields (a source of request_type / system_message). */
  readonly jsonFields: Readonly<Record<string, unknown>> | undefined;
}

export interface IntakeService {
  /** Validates and queues one submission; resolves to the new request id, or throws a 422 AppError. */
  submit(submission: IntakeSubmission): Promise<number>;
  /** {@link submit} of one DICOM instance, as a raw `application/dicom` body. */
  submitDicomInstance(instance: DicomInstanceSubmission): Promise<number>;
}

/** The effective type of a DICOM instance, as the Mirth channel of reference 8.2 posts it. */
const DICOM_TYPE = 'application/dicom';

export function createIntakeService(deps: {
  readonly database: Database;
  readonly config: Config;
}): IntakeService {
  const reference = createReferenceCache(deps.database.db, deps.config.referenceCacheTtlMs);
  const service: IntakeService = {
    submitDicomInstance: (instance) =>
      service.submit({
        effectiveType: DICOM_TYPE,
        kind: handlerKindOf(DICOM_TYPE),
        body: instance.bytes,
        query: instance.requestData,
        headers: instance.headers,
        clientAddress: instance.clientAddress,
        userId: instance.userId,
        ...(instance.alongside === undefined ? {} : { alongside: instance.alongside }),
      }),
    async submit(submission) {
      const errors = new FieldErrors();
      const payload = readPayload(submission, errors);
      const formFields = payload.form?.fields;
      const requestType = readRequestType(
        submission.query,
        formFields,
        payload.jsonFields,
        deps.config,
        errors,
      );
      const systemMessage = readSystemMessage(submission.query, formFields, payload.jsonFields, errors);

      const rows: AttachmentRowInput[] = [
        jsonRow('REQUEST_DATA', JSON.stringify(submission.query)),
        ...payload.rows,
        ...(payload.form === undefined
          ? []
          : [textRow('FORM_DATA', payload.form.mimeType, JSON.stringify(payload.form.fields))]),
        jsonRow(
          'HEADER_DATA',
          JSON.stringify(storedRequestHeaders(submission.headers, submission.clientAddress)),
        ),
      ];
      refuseUnstorableText(
        deps.database.schema.maxTextCodePoint,
        { requestType, systemMessage, rows },
        errors,
      );

      // First with the cached reference data; if a cached type or mime was deleted meanwhile, the
      // foreign keys refuse the insert and the submission is validated and written again, uncached.
      for (let attempt = 0; ; attempt += 1) {
        const isFresh = attempt > 0;
        const [route, knownMimes] = await Promise.all([
          requestType === undefined ? undefined : reference.route(requestType, isFresh),
          reference.knownMimes(
            rows.map((r) => r.mimeType),
            isFresh,
          ),
        ]);
        const attemptErrors = errors.copy();
        if (requestType !== undefined && route === undefined)
          attemptErrors.add('request_type', `Unknown request type: ${requestType}`);
        for (const row of rows) {
          if (!knownMimes.has(row.mimeType))
            attemptErrors.add(
              'mime_type',
              `Uploaded file's mime type is not allowed: ${row.mimeType.slice(0, MAX_ECHO)}`,
            );
        }
        if (!attemptErrors.isEmpty || route === undefined || systemMessage === undefined) {
          throw new AppError('validation_failed', 'Unprocessable Entity', { fields: attemptErrors.map });
        }
        try {
          const queued = await enqueueRequest(deps.database, {
            requestType: route.requestType,
            route,
            systemMessage,
            attachments: rows,
            userId: submission.userId,
            ...(submission.alongside === undefined ? {} : { alongside: submission.alongside }),
          });
          return queued.requestId;
        } catch (error) {
          if (isFresh || deps.database.dialect.classifyError(error) !== 'foreign_key') throw error;
          reference.clear();
        }
      }
    },
  };
  return service;
}

/**
 * Positive-only cache of the reference rows intake validates against (request_type, mime_type), so that
 * a submission costs no look-up query in the steady state (entries live `REFERENCE_CACHE_TTL_MS`; 0
 * turns the cache off). A name not cached is always read from the
 * database, so new types work at once; a deleted one is caught by the foreign keys (see `submit`).
 */
function createReferenceCache(db: Kysely<DB>, ttlMs: number) {
  // Only names found in the database are kept, so the bound is never reached in practice; lru-cache
  // reads a ttl of 0 as "never stale", hence nothing is stored then.
  const isCaching = ttlMs > 0;
  const routes = new LRUCache<string, RequestTypeRoute>({ max: 1000, ttl: ttlMs });
  const mimes = new LRUCache<string, true>({ max: 1000, ttl: ttlMs });
  return {
    async route(requestType: string, isFresh: boolean): Promise<RequestTypeRoute | undefined> {
      const cached = isFresh ? undefined : routes.get(requestType);
      if (cached !== undefined) return cached;
      const route = await findRequestTypeRoute(db, requestType);
      if (route === undefined) routes.delete(requestType);
      else if (isCaching) routes.set(requestType, route);
      return route;
    },
    async knownMimes(mimeTypes: readonly string[], isFresh: boolean): Promise<Set<string>> {
      const known = new Set<string>();
      const unknown: string[] = [];
      for (const mime of mimeTypes) {
        if (!isFresh && mimes.has(mime)) known.add(mime);
        else unknown.push(mime);
      }
      if (unknown.length > 0) {
        const found = await findKnownMimeTypes(db, unknown);
        for (const mime of found) {
          known.add(mime);
          if (isCaching) mimes.set(mime, true);
        }
      }
      return known;
    },
    clear(): void {
      routes.clear();
      mimes.clear();
    },
  };
}

// --- the write ----------------------------------------------------------------------------------------

export interface EnqueueRequestInput {
  readonly requestType: string;
  /** The type's routine and queue when the caller already looked them up; read in the transaction if not. */
  readonly route?: RequestTypeRoute;
  readonly systemMessage?: string;
  /** Every attachment_data row of the request (REQUEST_DATA, payload, FORM_DATA, HEADER_DATA). */
  readonly attachments?: readonly AttachmentRowInput[];
  /** Audit user; the system user 1 when omitted. */
  readonly userId?: number;
  /**
   * Writes of the caller's own tables that must commit or roll back with the request (a record of where
   * it came from); run in the same transaction after the request's rows.
   */
  readonly alongside?: AlongsideWrite;
}

export interface QueuedRequest {
  readonly requestId: number;
  readonly routineName: string;
  readonly queue: string;
}

/**
 * Writes one request, its attachment rows and its first routine (NEW, the type's default routine and
 * queue, sequence 10) in one durable write transaction (one statement where the engine has writable
 * CTEs), then, once committed, wakes the workers: {@link emitRequestQueued} in this process and a
 * notification for other processes where the engine has them (see {@link notifyQueueAfterCommit}).
 * Throws a 422 AppError for an unknown request type.
 */
export async function enqueueRequest(database: Database, input: EnqueueRequestInput): Promise<QueuedRequest> {
  const route = input.route ?? (await findRequestTypeRoute(database.db, input.requestType));
  if (route === undefined) {
    throw new AppError('validation_failed', 'Unprocessable Entity', {
      fields: { request_type: `Unknown request type: ${input.requestType}` },
    });
  }
  const rows: QueuedRequestRows = {
    route,
    systemMessage: input.systemMessage ?? '',
    attachments: input.attachments ?? [],
    userId: input.userId ?? 1,
    now: nowDateTime(),
  };
  const { alongside } = input;
  const requestId =
    alongside === undefined && database.dialect.hasWritableCte && rows.attachments.length > 0
      ? await insertQueuedRequestInOneStatement(database, rows)
      : await database.writeTransaction(async (trx) => {
          const id = await insertQueuedRequest(trx, rows);
          await alongside?.(trx, id);
          return id;
        });
  emitRequestQueued({ requestId, queue: route.queue });
  notifyQueueAfterCommit(database, route.queue);
  return { requestId, routineName: route.routineName, queue: route.queue };
}

// --- request_type and system_message (reference 8.8 steps 5 and 6) -------------------------------------

/** Query string first, then a form field, then a top-level JSON field. */
function pickSource(
  name: string,
  query: Readonly<Record<string, unknown>>,
  form: FormObject | undefined,
  json: Readonly<Record<string, unknown>> | undefined,
): unknown {
  for (const source of [query, form, json]) {
    if (source !== undefined && Object.hasOwn(source, name) && source[name] !== undefined)
      return source[name];
  }
  return undefined;
}

function readRequestType(
  query: Readonly<Record<string, unknown>>,
  form: FormObject | undefined,
  json: Readonly<Record<string, unknown>> | undefined,
  config: Config,
  errors: FieldErrors,
): string | undefined {
  const value = pickSource('request_type', query, form, json);
  if (value === undefined || value === '') {
    if (config.defaultRequestType === '') errors.add('request_type', 'Request Type cannot be blank.');
    return config.defaultRequestType === '' ? undefined : config.defaultRequestType;
  }
  if (typeof value !== 'string') {
    errors.add('request_type', 'Request Type must be a string.');
    return undefined;
  }
  if (hasNulCharacter(value)) {
    errors.add('request_type', nulCharacterMessage('Request Type'));
    return undefined;
  }
  if (value.length > MAX_REQUEST_TYPE) {
    errors.add('request_type', `Request Type is too long (maximum is ${MAX_REQUEST_TYPE} characters).`);
    return undefined;
  }
  return value;
}

/**
 * Text the database's character set cannot hold (an emoji in a utf8mb3 column of an OpenEyes database)
 * is refused with a 422 naming the field, before anything is written.
 */
function refuseUnstorableText(
  maxCodePoint: number,
  texts: {
    requestType: string | undefined;
    systemMessage: string | undefined;
    rows: readonly AttachmentRowInput[];
  },
  errors: FieldErrors,
): void {
  const isUnstorable = (text: string | null | undefined) =>
    text !== null && text !== undefined && findUnstorableCharacter(text, maxCodePoint) !== undefined;
  if (isUnstorable(texts.requestType)) errors.add('request_type', unstorableCharacterMessage('Request Type'));
  if (isUnstorable(texts.systemMessage))
    errors.add('system_message', unstorableCharacterMessage('System Message'));
  if (texts.rows.some((row) => isUnstorable(row.textData)))
    errors.add('data', unstorableCharacterMessage('Data'));
  if (texts.rows.some((row) => isUnstorable(row.uploadFileName)))
    errors.add('upload_file_name', unstorableCharacterMessage('Upload File Name'));
}

function readSystemMessage(
  query: Readonly<Record<string, unknown>>,
  form: FormObject | undefined,
  json: Readonly<Record<string, unknown>> | undefined,
  errors: FieldErrors,
): string | undefined {
  const value = pickSource('system_message', query, form, json);
  if (value === undefined) return '';
  if (typeof value !== 'string') {
    errors.add('system_message', 'System Message must be a string.');
    return undefined;
  }
  if (hasNulCharacter(value)) {
    errors.add('system_message', nulCharacterMessage('System Message'));
    return undefined;
  }
  if (value.length > MAX_SYSTEM_MESSAGE) {
    errors.add('system_message', `System Message is too long (maximum is ${MAX_SYSTEM_MESSAGE} characters).`);
    return undefined;
  }
  return value;
}

// --- payload by handler (reference 8.3, 8.8 step 6) ----------------------------------------------------

const NO_PAYLOAD: Payload = { rows: [], form: undefined, jsonFields: undefined };

function readPayload(submission: IntakeSubmission, errors: FieldErrors): Payload {
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

function asBuffer(body: IntakeSubmission['body']): Buffer {
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
    // `file[]` is the array style of HTML forms (reference D52); the parts become file, file_2, ...
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

function jsonRow(mnemonic: string, text: string): AttachmentRowInput {
  return textRow(mnemonic, 'application/json', text);
}

function textRow(mnemonic: string, mimeType: string, text: string): AttachmentRowInput {
  return { mnemonic, mimeType, textData: text, blobData: null, uploadFileName: null, hashCode: null };
}

/**
 * A payload row: JSON, XML and plain text bodies go to `text_data`, everything else to `blob_data`
 * (reference 8.3). `hash_code` is the first 48 bits of the SHA-256 of the bytes, for de-duplication.
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
