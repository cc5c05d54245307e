/**
 * HTTP routes of the request queue: `POST|PUT /api/v1/request/queue/add` and
 * `GET /api/v1/request/queue/status`, as the OpenEyes API module's contract has them. Errors use the queue envelope
 * `{"success":0,"message":{...}}`.
 *
 * The body is parsed by the EFFECTIVE content type (the `content_type` query parameter, else the header;
 * matched without regard to case, spaces or parameters): an onRequest hook computes it and rewrites the Content-Type that Fastify's parser
 * selection sees, so JSON and forms get the 1 MiB limit, raw bodies and multipart the 100 MiB one.
 * Basic auth also runs at onRequest, before any body byte is read, so an anonymous client cannot make
 * the server buffer a large upload.
 */
import type { IncomingHttpHeaders } from 'node:http';
import multipart from '@fastify/multipart';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { AppError } from '../../errors.ts';
import { sniffContentType } from '../../files/content-sniffer.ts';
import { rejectOtherMethods } from '../../http/error-handler.ts';
import type { ModuleOptions } from '../../http/module.ts';
import type { SpoolOptions, SpooledBytes } from '../../files/spool.ts';
import { SPOOL_THRESHOLD_BYTES, spoolDirOf, spoolStream } from '../../files/spool.ts';
import { holdSpool, loadSpooled } from '../../http/upload-spool.ts';
import { MALFORMED_MULTIPART_MESSAGE } from '../../http/multipart.ts';
import { idParameter } from '../audit/index.ts';
import { requestReaderOf } from '../user/index.ts';
import { ADD_DOC, STATUS_DOC } from './request-queue.openapi.ts';
import type { HandlerKind } from './intake/content-type.ts';
import {
  boundaryOf,
  effectiveContentType,
  handlerKindOf,
  hasNulCharacter,
  nulCharacterMessage,
} from './intake/content-type.ts';
import type { MultipartPart } from './intake/payload.ts';
import type { IntakeService } from './intake/intake.service.ts';
import { findReservedRequestKeys, reservedKeysMessage } from './intake/reserved-keys.ts';
import { createStatusService } from './status/status.ts';

const ADD_URL = '/api/v1/request/queue/add';
const STATUS_URL = '/api/v1/request/queue/status';

/** What the onRequest hook learned about the submission before the body was read. */
interface IntakeContext {
  readonly effectiveType: string | undefined;
  readonly kind: HandlerKind;
  /** The headers as the client sent them (the Content-Type is rewritten for parsing). */
  readonly headers: IncomingHttpHeaders;
}

declare module 'fastify' {
  interface FastifyRequest {
    queueIntake?: IntakeContext;
  }
}

/**
 * The query parameters queue add reads, for the OpenAPI document. The route attaches validation
 * failures instead of answering 400: intake checks every value itself and names the field in a 422.
 * Any other parameter is accepted and kept in REQUEST_DATA, but for the names the service writes there
 * itself (`reserved-keys.ts`), which are refused with a 400 before the body is read.
 */
const AddQuerySchema = Type.Object({
  request_type: Type.Optional(
    Type.String({
      maxLength: 45,
      description:
        'Kind of request (a `request_type` row); DEFAULT_REQUEST_TYPE when omitted here, in the form and in the JSON body.',
    }),
  ),
  system_message: Type.Optional(
    Type.String({ maxLength: 255, description: 'Free text stored with the request; empty when omitted.' }),
  ),
  content_type: Type.Optional(
    Type.String({
      description:
        'Overrides the Content-Type header: the type that picks the handler (JSON, form, multipart, raw) and is stored.',
    }),
  ),
});

/** The query parameter of queue status; checked by the status service (422 with its own words). */
const StatusQuerySchema = Type.Object({
  request_id: Type.String({ pattern: '^[0-9]{1,10}$', description: 'Id returned by queue add.' }),
});

/** Limits of the multipart reader beyond the byte limits. */
const MULTIPART_LIMITS = { files: 200, fields: 1000, parts: 1200, headerPairs: 100, fieldNameSize: 200 };

function unprocessable(fields: Record<string, string>): AppError {
  return new AppError('validation_failed', 'Unprocessable Entity', { fields });
}

/** The queue routes' options: the module's, and the process's queue intake. */
export interface RequestQueueRouteOptions extends ModuleOptions {
  readonly intake: IntakeService;
}

export async function registerRequestQueueRoutes(
  app: FastifyInstance,
  options: RequestQueueRouteOptions,
): Promise<void> {
  const { config, database } = options.deps;
  const { jsonBodyBytes, rawBodyBytes } = config.limits;
  const spoolOptions: SpoolOptions = {
    dir: spoolDirOf(config.filesDir),
    memoryThresholdBytes: SPOOL_THRESHOLD_BYTES,
    limitBytes: rawBodyBytes,
  };
  const { intake } = options;
  const status = createStatusService({ db: database.db, retryBackoff: config.queueRetryBackoff });

  // Own parsers for this plugin only: each returns the raw bytes, and intake decodes them strictly.
  app.removeAllContentTypeParsers();
  const keepBytes = (_request: FastifyRequest, body: Buffer, done: (err: null, body: Buffer) => void) =>
    done(null, body);
  app.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit: jsonBodyBytes }, keepBytes);
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'buffer', bodyLimit: jsonBodyBytes },
    keepBytes,
  );
  // Raw uploads arrive into memory or, past a threshold, into a temporary file (upload-spool.ts).
  app.addContentTypeParser('*', { bodyLimit: rawBodyBytes }, (request, payload, done) => {
    spoolStream(payload, spoolOptions).then(
      (spooled) => done(null, holdSpool(request, spooled)),
      (error: Error) => done(error),
    );
  });
  await app.register(multipart, {
    throwFileSizeLimit: true,
    limits: { ...MULTIPART_LIMITS, fileSize: rawBodyBytes, fieldSize: jsonBodyBytes },
  });

  const auth = options.basicAuth({ operation: 'OprnApi' });

  const prepareIntake: onRequestAsyncHookHandler = async (request) => {
    const header = request.headers['content-type'];
    const query = request.query as Record<string, unknown>;
    const reserved = findReservedRequestKeys(query);
    if (reserved.length > 0) throw new AppError('bad_request', reservedKeysMessage(reserved));
    if (typeof query.content_type === 'string' && hasNulCharacter(query.content_type))
      throw unprocessable({ content_type: nulCharacterMessage('Content Type') });
    const effectiveType = effectiveContentType(query.content_type, header);
    const kind = handlerKindOf(effectiveType);
    request.queueIntake = { effectiveType, kind, headers: { ...request.headers } };
    const declaredLength = Number(request.headers['content-length'] ?? 0);
    let parseAs: string | undefined;
    switch (kind) {
      case 'json':
        parseAs = 'application/json';
        break;
      case 'urlencoded':
        parseAs = 'application/x-www-form-urlencoded';
        break;
      case 'multipart': {
        // The parts are found by the boundary of the real header, whatever the override said.
        const boundary = boundaryOf(header);
        if (boundary === undefined) throw unprocessable({ data: MALFORMED_MULTIPART_MESSAGE });
        if (declaredLength > rawBodyBytes) throw new AppError('payload_too_large', 'Payload too large.');
        parseAs = `multipart/form-data; boundary="${boundary}"`;
        break;
      }
      case 'raw':
      case 'none':
        parseAs = header === undefined ? undefined : 'application/octet-stream';
        break;
    }
    if (parseAs !== undefined) request.headers['content-type'] = parseAs;
  };

  const addHandler = async (request: FastifyRequest) => {
    const context = request.queueIntake!;
    const received =
      context.kind === 'multipart'
        ? await readMultipartParts(request, rawBodyBytes, spoolOptions)
        : (request.body as SpooledBytes | Buffer | undefined);
    // Spooled bytes are loaded into memory under the upload budget, released once the request is queued.
    const spooled = Array.isArray(received)
      ? received.flatMap((part) => (part.kind === 'file' ? [part.bytes] : []))
      : received !== undefined && !Buffer.isBuffer(received)
        ? [received]
        : [];
    const loaded = await loadSpooled(options.uploadMemory, spooled);
    let requestId: number;
    try {
      const buffers = [...loaded.buffers];
      const body = Array.isArray(received)
        ? received.map((part): MultipartPart =>
            part.kind === 'file' ? { ...part, bytes: buffers.shift()! } : part,
          )
        : Buffer.isBuffer(received)
          ? received
          : buffers[0];
      requestId = await intake.submit({
        effectiveType: context.effectiveType,
        kind: context.kind,
        body,
        query: request.query as Record<string, unknown>,
        headers: context.headers,
        clientAddress: request.ip,
        userId: request.principal!.userId,
      });
    } finally {
      loaded.release();
    }
    request.audit = { targetType: 'request', targetIds: [requestId] };
    return { request_id: requestId };
  };

  app.route({
    method: ['POST', 'PUT'],
    url: ADD_URL,
    config: {
      errorShape: 'envelope',
      doc: ADD_DOC,
      audit: { action: 'queue.add', label: 'Request queued', kind: 'write' },
    },
    schema: { querystring: AddQuerySchema },
    attachValidation: true,
    onRequest: [auth, prepareIntake],
    handler: addHandler,
  });
  rejectOtherMethods(app, ADD_URL, ['POST', 'PUT'], 'envelope');

  app.route({
    method: 'GET',
    url: STATUS_URL,
    config: {
      errorShape: 'envelope',
      doc: STATUS_DOC,
      audit: {
        action: 'queue.status',
        label: 'Request status',
        kind: 'read',
        targetOf: idParameter('request_id', 'request'),
      },
    },
    schema: { querystring: StatusQuerySchema },
    attachValidation: true,
    onRequest: auth,
    handler: async (request) => {
      const query = request.query as Record<string, unknown>;
      return status.readStatus(query.request_id, requestReaderOf(request.principal!));
    },
  });
  rejectOtherMethods(app, STATUS_URL, ['GET', 'HEAD'], 'envelope');
}

/** A multipart part as received: a file part's bytes still spooled (in memory or a temporary file). */
type ReceivedPart =
  | Exclude<MultipartPart, { kind: 'file' }>
  | (Omit<Extract<MultipartPart, { kind: 'file' }>, 'bytes'> & { readonly bytes: SpooledBytes });

interface MultipartError {
  readonly code?: string;
  readonly statusCode?: number;
}

/**
 * Reads every part of a multipart body into memory (files and fields alike), bounded by the raw body
 * limit in total. Transport failures become contract answers: limits 413; a truncated body 422
 * `AttachmentData: <field>` (PHP's partial-upload text, as the original answers) or `data` = malformed.
 */
async function readMultipartParts(
  request: FastifyRequest,
  limitBytes: number,
  spoolOptions: SpoolOptions,
): Promise<ReceivedPart[]> {
  const parts: ReceivedPart[] = [];
  let totalBytes = 0;
  let currentFile: string | undefined;
  try {
    for await (const part of request.parts()) {
      const name = part.fieldname === '' ? undefined : (part.fieldname as string | undefined);
      if (part.type === 'file') {
        currentFile = name;
        const bytes = holdSpool(
          request,
          await spoolStream(part.file, { ...spoolOptions, limitBytes: limitBytes - totalBytes }),
        );
        if (part.file.truncated) throw new AppError('payload_too_large', 'Payload too large.');
        currentFile = undefined;
        totalBytes += bytes.sizeBytes;
        if (hasNulCharacter(part.filename))
          throw unprocessable({ upload_file_name: nulCharacterMessage('Upload File Name') });
        if (hasNulCharacter(part.mimetype))
          throw unprocessable({ mime_type: nulCharacterMessage('Mime Type') });
        const mimeType = part.mimetype.split(';')[0]!.trim().toLowerCase();
        const sniffedType = await sniffContentType(bytes.head);
        parts.push({
          kind: 'file',
          name,
          fileName: part.filename,
          mimeType: mimeType || undefined,
          sniffedType,
          bytes,
        });
      } else {
        if (part.valueTruncated || part.fieldnameTruncated)
          throw new AppError('payload_too_large', 'Payload too large.');
        // @fastify/multipart parses a field declared application/json; keep it as JSON text.
        const value = typeof part.value === 'string' ? part.value : JSON.stringify(part.value);
        totalBytes += Buffer.byteLength(value);
        parts.push({ kind: 'field', name, value });
      }
      if (totalBytes > limitBytes) throw new AppError('payload_too_large', 'Payload too large.');
    }
  } catch (error) {
    if (error instanceof AppError) throw error;
    const { code, statusCode } = error as MultipartError;
    if (statusCode === 413 || code === 'FST_REQ_FILE_TOO_LARGE')
      throw new AppError('payload_too_large', 'Payload too large.', { cause: error });
    if (code === 'FST_PROTO_VIOLATION') throw unprocessable({ data: 'Invalid form field name.' });
    if (code === 'FST_INVALID_JSON_FIELD_ERROR') throw unprocessable({ data: 'Invalid JSON body.' });
    if (currentFile !== undefined && /^[A-Za-z0-9_.[\]-]{1,45}$/.test(currentFile))
      throw unprocessable({
        [`AttachmentData: ${currentFile}`]: 'The uploaded file was only partially uploaded',
      });
    throw unprocessable({ data: MALFORMED_MULTIPART_MESSAGE });
  }
  return parts;
}
