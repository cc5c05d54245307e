/**
 * `GET|HEAD /api/v1/attachmentdisplay/view` and `POST /api/v1/attachmentdisplay/create` (which the
 * original routes but never implemented; here it stores an upload). A request's private rows (its parts
 * until filed under an event, an upload filed under none) are viewed only by request admins and by the
 * user who submitted them (`mayReadRequest`), 404 as for an unknown id otherwise. Authentication runs in `onRequest`, before the query is validated, before any
 * 304 and before an upload body is read: a stranger learns nothing and cannot make the server buffer.
 */
import multipart from '@fastify/multipart';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { isNotModified, sendBinary, sendNotModified } from '../../http/binary-reply.ts';
import { rejectOtherMethods } from '../../http/error-handler.ts';
import type { ModuleOptions } from '../../http/module.ts';
import { MALFORMED_MULTIPART_MESSAGE } from '../../http/multipart.ts';
import type { SpoolOptions, SpooledBytes } from '../../files/spool.ts';
import { SPOOL_THRESHOLD_BYTES, spoolDirOf, spoolStream } from '../../files/spool.ts';
import { holdSpool, loadSpooled } from '../../http/upload-spool.ts';
import { idParameter } from '../audit/index.ts';
import { requestReaderOf } from '../user/index.ts';
import { CREATE_DOC, VIEW_DOC } from './attachment.openapi.ts';
import { AppError } from '../../errors.ts';
import { DATA_FIELDS } from './attachment.queries.ts';
import type { UploadInput } from './attachment.service.ts';
import type { AttachmentService } from './attachment.service.ts';
import { MAX_ID } from './attachment.service.ts';
import { mediaTypeOfHeader, normaliseMediaType } from './content-type.ts';

const VIEW_URL = '/api/v1/attachmentdisplay/view';
const CREATE_URL = '/api/v1/attachmentdisplay/create';

// A repeated parameter arrives as an array, which no `string` schema accepts: 400.
const ViewQuerySchema = Type.Object({
  id: Type.String({ pattern: '^[1-9][0-9]{0,18}$' }),
  attachment: Type.Optional(Type.Union(DATA_FIELDS.map((f) => Type.Literal(f)))),
  mime: Type.Optional(Type.String({ maxLength: 255 })),
});

const CreateQuerySchema = Type.Object({
  event_id: Type.Optional(Type.String({ maxLength: 32 })),
  element_type_id: Type.Optional(Type.String({ maxLength: 32 })),
});

const MIME_REQUIRED = 'A Content-Type of the form type/subtype is required.';

function badRequest(): AppError {
  return new AppError('bad_request', 'Bad request');
}

function invalid(fields: Record<string, string>): AppError {
  return new AppError('validation_failed', 'Invalid attachment', { fields });
}

/** The attachment routes' options: the module's, and the process's attachment service. */
export interface AttachmentRouteOptions extends ModuleOptions {
  readonly attachments: AttachmentService;
}

export const attachmentRoutes: FastifyPluginAsync<AttachmentRouteOptions> = async (
  instance,
  { deps, basicAuth, uploadMemory, attachments: service },
) => {
  const app = instance.withTypeProvider<TypeBoxTypeProvider>();
  const uploadLimitBytes = deps.config.limits.rawBodyBytes;
  const spoolOptions: SpoolOptions = {
    dir: spoolDirOf(deps.config.filesDir),
    memoryThresholdBytes: SPOOL_THRESHOLD_BYTES,
    limitBytes: uploadLimitBytes,
  };

  // Uploads are taken as bytes whatever their type: this scope drops the inherited JSON/text parsers.
  app.removeAllContentTypeParsers();
  await app.register(multipart, {
    limits: { fileSize: uploadLimitBytes, files: 2, fields: 20, fieldSize: 64 * 1024, parts: 40 },
  });
  // Uploads arrive into memory or, past a threshold, into a temporary file (upload-spool.ts).
  app.addContentTypeParser('*', { bodyLimit: uploadLimitBytes }, (request, payload, done) => {
    spoolStream(payload, spoolOptions).then(
      (spooled) => done(null, holdSpool(request, spooled)),
      (error: Error) => done(error),
    );
  });

  const viewGuard = basicAuth(deps.config.attachmentRequireOprnApi ? { operation: 'OprnApi' } : {});
  app.route({
    method: ['GET', 'HEAD'],
    url: VIEW_URL,
    exposeHeadRoute: false,
    config: {
      doc: VIEW_DOC,
      audit: {
        action: 'attachment.view',
        label: 'Attachment view',
        kind: 'read',
        targetOf: idParameter('id', 'attachment_data'),
      },
    },
    schema: { querystring: ViewQuerySchema },
    onRequest: viewGuard,
    handler: async (request, reply) => {
      const { id: idText, attachment, mime: mimeText } = request.query;
      const id = Number(idText);
      if (id > MAX_ID) throw badRequest();
      const mime = mimeText === undefined ? undefined : normaliseMediaType(mimeText);
      if (mimeText !== undefined && mime === undefined) throw badRequest();
      const query = { id, field: attachment, mime, reader: requestReaderOf(request.principal!) };
      const isConditional =
        request.headers['if-none-match'] !== undefined || request.headers['if-modified-since'] !== undefined;
      if (request.method === 'GET' && !isConditional) {
        const { representation, body } = await service.readAttachment(query);
        return sendBinary(reply, representation, typeof body === 'function' ? body() : body);
      }
      const view = await service.describeAttachment(query);
      if (isNotModified(request, view.representation)) return sendNotModified(reply, view.representation);
      if (request.method === 'HEAD') return sendBinary(reply, view.representation, undefined);
      const { representation, body } = await view.load();
      return sendBinary(reply, representation, typeof body === 'function' ? body() : body);
    },
  });
  rejectOtherMethods(app, VIEW_URL, ['GET', 'HEAD']);

  app.route({
    method: 'POST',
    url: CREATE_URL,
    bodyLimit: uploadLimitBytes,
    config: {
      errorShape: 'envelope',
      doc: CREATE_DOC,
      audit: { action: 'attachment.create', label: 'Attachment upload', kind: 'write' },
    },
    schema: { querystring: CreateQuerySchema },
    onRequest: basicAuth({ operation: 'OprnApi' }),
    // A malformed Content-Type is bad input like any other (422), not the parser's 415.
    preParsing: async (request) => {
      const header = request.headers['content-type'];
      if (header !== undefined && mediaTypeOfHeader(header) === undefined)
        throw invalid({ mime_type: MIME_REQUIRED });
    },
    handler: async (request, reply) => {
      const spooled = request.isMultipart()
        ? await readMultipartUpload(request, spoolOptions)
        : readRawUpload(request);
      const loaded = await loadSpooled(uploadMemory, spooled.bytes === undefined ? [] : [spooled.bytes]);
      let id: number;
      try {
        id = await service.createAttachment({
          declaredType: spooled.declaredType,
          fileName: spooled.fileName,
          bytes: loaded.buffers[0],
          userId: request.principal!.userId,
          eventId: request.query.event_id,
          elementTypeId: request.query.element_type_id,
        });
      } finally {
        loaded.release();
      }
      request.log.info({ attachmentDataId: id }, 'attachment stored');
      request.audit = { targetType: 'attachment_data', targetIds: [id] };
      return reply
        .code(200)
        .header('content-type', 'application/json; charset=utf-8')
        .send(JSON.stringify({ id }));
    },
  });
  rejectOtherMethods(app, CREATE_URL, ['POST'], 'envelope');
};

/** An upload as received: its bytes still spooled (in memory or a temporary file). */
interface SpooledUpload extends Pick<UploadInput, 'declaredType' | 'fileName'> {
  readonly bytes: SpooledBytes | undefined;
}

function readRawUpload(request: FastifyRequest): SpooledUpload {
  const body = request.body as SpooledBytes | undefined;
  return {
    declaredType: mediaTypeOfHeader(request.headers['content-type']),
    bytes: body,
    fileName: null,
  };
}

/** The one file part of a multipart body, with its own type and file name; other fields are ignored. */
async function readMultipartUpload(request: FastifyRequest, options: SpoolOptions): Promise<SpooledUpload> {
  let upload: SpooledUpload | undefined;
  try {
    for await (const part of request.parts()) {
      if (part.type !== 'file') continue;
      if (upload !== undefined) throw invalid({ data: 'Send exactly one file part.' });
      const bytes = holdSpool(request, await spoolStream(part.file, options));
      if (part.file.truncated) throw new AppError('payload_too_large', 'Payload too large');
      const fileName = part.filename === '' ? null : (part.filename.split(/[\\/]/).pop() ?? null);
      upload = { declaredType: normaliseMediaType(part.mimetype), bytes, fileName };
    }
  } catch (error) {
    if (error instanceof AppError) throw error;
    const status = (error as { statusCode?: unknown }).statusCode;
    if (status === 413) throw new AppError('payload_too_large', 'Payload too large', { cause: error });
    throw invalid({ data: MALFORMED_MULTIPART_MESSAGE });
  }
  if (upload === undefined) throw invalid({ data: 'Send exactly one file part.' });
  return upload;
}
