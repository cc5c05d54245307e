/**
 * Queue intake: turns one submission (effective content type, body, query, headers)
 * into a validated request, then writes the request, its attachment rows and its first routine in ONE
 * transaction. The 422 message holds one string per field, the first error of each field winning
 * (the original returned arrays, and same-named fields of different rows overwrote each other). No HTTP types
 * here: the route hands over plain values. DICOM instances received by STOW-RS or C-STORE come in through
 * {@link IntakeService.submitDicomInstance}, as a raw `application/dicom` body, so that they make the same
 * rows as queue add.
 */
import { LRUCache } from 'lru-cache';
import type { Kysely } from 'kysely';
import type { Config } from '../../../config.ts';
import type { Database } from '../../../db/database.ts';
import { findUnstorableCharacter, unstorableCharacterMessage } from '../../../db/schema-profile.ts';
import type { DB } from '../../../db/schema.ts';
import { AppError } from '../../../errors.ts';
import { storedRequestHeaders } from '../../../http/stored-headers.ts';
import type { FormObject, HandlerKind } from './content-type.ts';
import { handlerKindOf, hasNulCharacter, nulCharacterMessage } from './content-type.ts';
import type { AlongsideWrite } from './enqueue.ts';
import { enqueueRequest } from './enqueue.ts';
import type { IntakePace } from '../engine/intake-pace.ts';
import type { AttachmentRowInput, RequestTypeRoute } from './intake.queries.ts';
import { findKnownMimeTypes, findRequestTypeRoute } from './intake.queries.ts';
import { findOverlongDicomValue } from '../../dicom/index.ts';
import type { MultipartPart } from './payload.ts';
import { findReservedRequestKeys, reservedKeysMessage } from './reserved-keys.ts';
import { FieldErrors, MAX_ECHO, jsonRow, readPayload, textRow } from './payload.ts';

const MAX_SYSTEM_MESSAGE = 255;
const MAX_REQUEST_TYPE = 45;

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
  /** JSON rows the submitter adds beside REQUEST_DATA (see {@link DicomInstanceSubmission}). */
  readonly describingRows?: readonly DescribingRow[];
}

/** A JSON row that describes the request (a `NON_PAYLOAD_MNEMONICS` name), written with its other rows. */
export interface DescribingRow {
  readonly mnemonic: string;
  readonly value: unknown;
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
  /**
   * What receipt read of the instance (its study record, `DICOM_STUDY`), stored as JSON rows of the
   * request in the transaction that queues it, so that no request exists without them.
   */
  readonly describingRows?: readonly DescribingRow[];
}

export interface IntakeService {
  /**
   * Validates and queues one submission; resolves to the new request id, or throws a 422 AppError (a 400
   * for a query naming a reserved `REQUEST_DATA` key).
   */
  submit(submission: IntakeSubmission): Promise<number>;
  /** {@link submit} of one DICOM instance, as a raw `application/dicom` body. */
  submitDicomInstance(instance: DicomInstanceSubmission): Promise<number>;
}

/** The effective type of a DICOM instance, as OpenEyes's Mirth channel posts it. */
const DICOM_TYPE = 'application/dicom';

export function createIntakeService(deps: {
  readonly database: Database;
  readonly config: Config;
  /** Paces answers to the worker of this process (`WORKER=in-process`); see `intake-pace.ts`. */
  readonly pace?: IntakePace;
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
        ...(instance.describingRows === undefined ? {} : { describingRows: instance.describingRows }),
      }),
    async submit(submission) {
      // What the routines write into REQUEST_DATA never comes from the submitter (reserved-keys.ts).
      const reserved = findReservedRequestKeys(submission.query);
      if (reserved.length > 0) throw new AppError('bad_request', reservedKeysMessage(reserved));
      const errors = new FieldErrors();
      const payload = readPayload(submission, errors);
      refuseOverlongDicomValues(payload.rows, deps.config, errors);
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
        ...(submission.describingRows ?? []).map((row) => jsonRow(row.mnemonic, JSON.stringify(row.value))),
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
        let requestId: number;
        try {
          const queued = await enqueueRequest(deps.database, {
            requestType: route.requestType,
            route,
            systemMessage,
            attachments: rows,
            userId: submission.userId,
            ...(submission.alongside === undefined ? {} : { alongside: submission.alongside }),
          });
          requestId = queued.requestId;
        } catch (error) {
          if (isFresh || deps.database.dialect.classifyError(error) !== 'foreign_key') throw error;
          reference.clear();
          continue;
        }
        // Committed: pacing delays the answer, never the request.
        await deps.pace?.afterAccepted(route.queue, requestId);
        return requestId;
      }
    },
  };
  return service;
}

/**
 * A DICOM payload (a raw `application/dicom` body, or a file part of that type) whose header holds a
 * string value over its limit is refused here, before anything is stored (`findOverlongDicomValue`: a
 * bounded pass over its first element headers; the rest of the file is checked by `DICOM_SEED`).
 */
function refuseOverlongDicomValues(
  rows: readonly AttachmentRowInput[],
  config: Config,
  errors: FieldErrors,
): void {
  for (const row of rows) {
    if (row.mimeType !== DICOM_TYPE || row.blobData === null) continue;
    const refusal = findOverlongDicomValue(row.blobData, config);
    if (refusal !== undefined) errors.add('data', `The DICOM file is refused: ${refusal}`);
  }
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

// --- request_type and system_message (query, then form field, then JSON field)
// -------------------------------------

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
