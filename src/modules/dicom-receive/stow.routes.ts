/**
 * DICOMweb STOW-RS: `POST /api/v1/dicomweb/studies` and `POST /api/v1/dicomweb/studies/{StudyInstanceUID}`
 * (PS3.18 10.5). Basic auth with the queue add operation runs at onRequest, then the Content-Type and the
 * study UID are checked, all before a body byte is read. The body is never buffered: this plugin's only
 * content-type parser hands the request stream to `stow.ts`. The answer is the Store Instances Response
 * (DICOM JSON, or XML when the client accepts only that).
 */
import type { Readable } from 'node:stream';
import { MIMEType } from 'node:util';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { AppError, DATABASE_RETRY_AFTER_SECONDS, DEFAULT_MESSAGES } from '../../errors.ts';
import { describeUploadLimit } from '../../db/upload-limit.ts';
import { spoolDirOf } from '../../files/spool.ts';
import { rejectOtherMethods } from '../../http/error-handler.ts';
import type { ModuleOptions } from '../../http/module.ts';
import type { IntakeService } from '../request-queue/index.ts';
import { findReservedRequestKeys, reservedKeysMessage } from '../request-queue/index.ts';
import { MALFORMED_MULTIPART_MESSAGE } from '../../http/multipart.ts';
import { STUDIES_DOC, STUDY_DOC } from './stow.openapi.ts';
import { createDicomReceiver } from './receive.ts';
import { storeStatus, toDicomJson, toDicomXml } from './store-response.ts';
import { StowBodyError, storeInstances } from './stow.ts';

export const STUDIES_URL = '/api/v1/dicomweb/studies';
export const STUDY_URL = '/api/v1/dicomweb/studies/:StudyInstanceUID';

/** `request.system_message` and REQUEST_DATA `source` of instances received by STOW-RS. */
export const STOW_SOURCE = 'STOW-RS';

const UID = /^[0-9]+(\.[0-9]+)*$/;
const MAX_BOUNDARY_LENGTH = 256;

declare module 'fastify' {
  interface FastifyRequest {
    stowBoundary?: string;
  }
}

const ParamsSchema = Type.Object({
  StudyInstanceUID: Type.String({
    maxLength: 64,
    description: 'Every instance must belong to this study (else FailureReason A900).',
  }),
});

/** The STOW-RS routes' options: the module's, and the process's queue intake. */
export interface StowRouteOptions extends ModuleOptions {
  readonly intake: IntakeService;
}

export async function registerStowRoutes(app: FastifyInstance, options: StowRouteOptions): Promise<void> {
  const { config, database } = options.deps;
  const receiver = createDicomReceiver({ database, config, intake: options.intake });

  // The body is read by stow.ts from the request stream, part by part.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('multipart/related', (_request, payload, done) => done(null, payload));

  const auth = options.basicAuth({ operation: 'OprnApi' });

  /**
   * 415 for anything but `multipart/related` of `application/dicom`; 400 without a boundary, for a bad UID
   * or a reserved `REQUEST_DATA` name in the query string.
   */
  const checkRequest: onRequestAsyncHookHandler = async (request) => {
    const study = (request.params as { StudyInstanceUID?: string }).StudyInstanceUID;
    if (study !== undefined && (study.length > 64 || !UID.test(study)))
      throw new AppError('bad_request', 'Invalid Study Instance UID.');
    // The query string is kept in each instance's REQUEST_DATA: names the routines write are refused.
    const reserved = findReservedRequestKeys(request.query as Record<string, unknown>);
    if (reserved.length > 0) throw new AppError('bad_request', reservedKeysMessage(reserved));
    let type: MIMEType;
    try {
      type = new MIMEType(request.headers['content-type'] ?? '');
    } catch {
      throw new AppError('unsupported_media_type', DEFAULT_MESSAGES.unsupported_media_type);
    }
    const root = type.params.get('type');
    if (type.essence !== 'multipart/related' || (root !== null && root.toLowerCase() !== 'application/dicom'))
      throw new AppError('unsupported_media_type', DEFAULT_MESSAGES.unsupported_media_type);
    const boundary = type.params.get('boundary');
    // RFC 2046 caps boundaries at 70 characters, but senders exceed it (Orthanc's have 73): a few
    // hundred are read.
    if (boundary === null || boundary === '' || boundary.length > MAX_BOUNDARY_LENGTH)
      throw new AppError('bad_request', MALFORMED_MULTIPART_MESSAGE);
    request.stowBoundary = boundary;
  };

  const handler = async (request: FastifyRequest, reply: FastifyReply) => {
    const study = (request.params as { StudyInstanceUID?: string }).StudyInstanceUID;
    let outcome;
    try {
      outcome = await storeInstances(receiver, {
        body: request.body as Readable,
        boundary: request.stowBoundary!,
        expectedStudyUid: study,
        maxInstanceBytes: config.limits.rawBodyBytes,
        memory: options.uploadMemory,
        spoolDir: spoolDirOf(config.filesDir),
        log: request.log,
        source: {
          path: 'stow-rs',
          systemMessage: STOW_SOURCE,
          requestData: {
            ...(request.query as Record<string, unknown>),
            source: STOW_SOURCE,
            source_address: request.ip,
          },
          headers: request.headers,
          clientAddress: request.ip,
          userId: request.principal!.userId,
        },
      });
    } catch (error) {
      if (!(error instanceof StowBodyError)) throw error;
      if (error.kind === 'too-large')
        throw new AppError(
          'payload_too_large',
          `Payload too large: each instance is limited to ${describeUploadLimit(config)}.`,
        );
      throw new AppError(
        'bad_request',
        error.kind === 'empty' ? 'No DICOM instance in the body.' : MALFORMED_MULTIPART_MESSAGE,
      );
    }
    request.audit = { targetType: 'request', targetIds: outcome.stored.map((s) => s.requestId) };
    request.log.info(
      { stored: outcome.stored.length, failed: outcome.failed.length },
      'STOW-RS request answered',
    );
    const status = storeStatus(outcome);
    // Nothing stored, for lack of resources only (the database): the service's usual 503, so that the
    // sender retries the whole request.
    if (status === 503)
      throw new AppError('unavailable', DEFAULT_MESSAGES.unavailable, {
        headers: { 'retry-after': String(DATABASE_RETRY_AFTER_SECONDS) },
      });
    return wantsXml(request.headers.accept)
      ? reply.code(status).type('application/dicom+xml; charset=utf-8').send(toDicomXml(outcome))
      : reply.code(status).type('application/dicom+json; charset=utf-8').send(toDicomJson(outcome));
  };

  for (const url of [STUDIES_URL, STUDY_URL]) {
    app.route({
      method: 'POST',
      url,
      config: {
        heavy: true,
        doc: url === STUDY_URL ? STUDY_DOC : STUDIES_DOC,
        audit: { action: 'dicomweb.store', label: 'DICOMweb store', kind: 'write' },
      },
      ...(url === STUDY_URL ? { schema: { params: ParamsSchema }, attachValidation: true } : {}),
      onRequest: [auth, checkRequest],
      handler,
    });
    // GET (and HEAD) of these URLs are QIDO-RS and WADO-RS (`dicomweb.routes.ts`).
    rejectOtherMethods(app, url, ['GET', 'HEAD', 'POST']);
  }
}

/** XML when the client accepts `application/dicom+xml` and no JSON type (PS3.18 8.7.3: JSON otherwise). */
function wantsXml(accept: string | undefined): boolean {
  if (accept === undefined) return false;
  const types = accept.split(',').map((t) => t.split(';')[0]!.trim().toLowerCase());
  return (
    types.includes('application/dicom+xml') &&
    !types.some((t) => t === 'application/dicom+json' || t === 'application/json')
  );
}
