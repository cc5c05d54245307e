/**
 * DICOMweb QIDO-RS and WADO-RS on `/api/v1/dicomweb` (beside STOW-RS, `stow.routes.ts`):
 * - searches: `GET /studies`, `/series`, `/instances`, `/studies/{study}/series`,
 *   `/studies/{study}/instances`, `/studies/{study}/series/{series}/instances` (`dicomweb-qido.ts`);
 * - retrieves: `GET /studies/{study}[/series/{series}[/instances/{instance}]]`, each with `/metadata`,
 *   and `.../instances/{instance}/rendered`, `.../frames/{frame}/rendered` (`dicomweb-wado.ts`).
 *
 * Authorization is attachment view's: Basic auth (with `OprnApi` when ATTACHMENT_REQUIRE_OPRNAPI is
 * on), then the view's rule on a request's private rows (a study not filed to a patient is seen by its
 * submitter and request admins only; anyone else gets the 404 or the empty search of what does not
 * exist). Every answer is audited as a read (`dicomweb.search`, `dicomweb.retrieve`: the caller, the
 * filed patients as targets, else the requests holding the instances), through the read audit sink
 * before the first byte: a row the sink refuses turns the answer into a 503.
 *
 * Accept: what the route cannot produce is a 406 (a specific transfer syntax: the instances are sent as
 * received); bad UIDs and bad parameters are 400.
 */
import { Readable } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../../errors.ts';
import { rejectOtherMethods } from '../../http/error-handler.ts';
import type { ModuleOptions } from '../../http/module.ts';
import { requestReaderOf } from '../user/index.ts';
import type { QidoAnswer, QidoLevel } from './dicomweb-qido.ts';
import { QidoParameterError, createQidoSearcher } from './dicomweb-qido.ts';
import { MAX_RETRIEVE_INSTANCES, createWadoRetriever, newBoundary } from './dicomweb-wado.ts';
import type { Retrievable, WadoScope } from './dicomweb-wado.ts';
import { RENDERED_DOC, RETRIEVE_DOC, SEARCH_DOC, METADATA_DOC } from './dicomweb.openapi.ts';

export const DICOMWEB_ROOT = '/api/v1/dicomweb';
const STUDY = ':StudyInstanceUID';
const SERIES = ':SeriesInstanceUID';
const INSTANCE = ':SOPInstanceUID';

const UID = /^[0-9]+(\.[0-9]+)*$/;

/** The QIDO-RS search URLs, with their level (the STOW-RS route owns the other methods of `/studies`). */
export const SEARCH_URLS: readonly (readonly [string, QidoLevel])[] = [
  [`${DICOMWEB_ROOT}/studies`, 'study'],
  [`${DICOMWEB_ROOT}/series`, 'series'],
  [`${DICOMWEB_ROOT}/instances`, 'instance'],
  [`${DICOMWEB_ROOT}/studies/${STUDY}/series`, 'series'],
  [`${DICOMWEB_ROOT}/studies/${STUDY}/instances`, 'instance'],
  [`${DICOMWEB_ROOT}/studies/${STUDY}/series/${SERIES}/instances`, 'instance'],
];

const STUDY_URL = `${DICOMWEB_ROOT}/studies/${STUDY}`;
const SERIES_URL = `${STUDY_URL}/series/${SERIES}`;
const INSTANCE_URL = `${SERIES_URL}/instances/${INSTANCE}`;

/** URLs whose other methods this file answers 405 (the study URLs' are STOW-RS's). */
const OWN_URLS = [
  ...SEARCH_URLS.map(([url]) => url).filter((u) => u !== `${DICOMWEB_ROOT}/studies`),
  SERIES_URL,
  INSTANCE_URL,
  `${STUDY_URL}/metadata`,
  `${SERIES_URL}/metadata`,
  `${INSTANCE_URL}/metadata`,
  `${INSTANCE_URL}/rendered`,
  `${INSTANCE_URL}/frames/:frames/rendered`,
];

type Params = Partial<Record<'StudyInstanceUID' | 'SeriesInstanceUID' | 'SOPInstanceUID' | 'frames', string>>;

/** An acceptable media range of the Accept header: its type and parameters (lower-cased names). */
interface MediaRange {
  readonly type: string;
  readonly params: ReadonlyMap<string, string>;
}

function parseAccept(header: string | undefined): MediaRange[] {
  if (header === undefined || header.trim() === '') return [{ type: '*/*', params: new Map() }];
  const ranges: MediaRange[] = [];
  // Parameters may be quoted strings holding `,` (rare): a simple split on commas outside quotes.
  for (const part of header.match(/(?:[^,"]|"[^"]*")+/g) ?? []) {
    const [type, ...rest] = part.split(';');
    const params = new Map<string, string>();
    for (const p of rest) {
      const at = p.indexOf('=');
      if (at < 0) continue;
      params.set(
        p.slice(0, at).trim().toLowerCase(),
        p
          .slice(at + 1)
          .trim()
          .replace(/^"|"$/g, ''),
      );
    }
    if (params.get('q') === '0') continue;
    ranges.push({ type: type!.trim().toLowerCase(), params });
  }
  return ranges;
}

function notAcceptable(): AppError {
  return new AppError('not_acceptable', 'Not Acceptable');
}

/** The JSON answers (QIDO-RS, metadata): DICOM JSON, or plain JSON / any type. */
function checkJsonAccept(header: string | undefined): void {
  const ok = parseAccept(header).some((r) =>
    ['*/*', 'application/*', 'application/dicom+json', 'application/json'].includes(r.type),
  );
  if (!ok) throw notAcceptable();
}

/** `multipart/related; type="application/dicom"` of the instances as received. */
function checkInstancesAccept(header: string | undefined): void {
  const ok = parseAccept(header).some((r) => {
    if (r.type === '*/*' || r.type === 'multipart/*') return true;
    if (r.type !== 'multipart/related') return false;
    const type = r.params.get('type')?.toLowerCase();
    const syntax = r.params.get('transfer-syntax');
    return (type === undefined || type === 'application/dicom') && (syntax === undefined || syntax === '*');
  });
  if (!ok) throw notAcceptable();
}

/** An extracted image of `mimeType`, when the Accept header allows it. */
function checkImageAccept(header: string | undefined, mimeType: string): void {
  const wanted = mimeType.toLowerCase();
  const ok = parseAccept(header).some((r) => r.type === '*/*' || r.type === 'image/*' || r.type === wanted);
  if (!ok) throw notAcceptable();
}

function checkUids(params: Params): void {
  for (const name of ['StudyInstanceUID', 'SeriesInstanceUID', 'SOPInstanceUID'] as const) {
    const value = params[name];
    if (value !== undefined && (value.length > 64 || !UID.test(value)))
      throw new AppError('bad_request', `Invalid ${name}.`);
  }
}

function notFound(): AppError {
  return new AppError('not_found', 'Not Found');
}

/** The audit targets of an answer: its filed patients, else the requests holding what it disclosed. */
function auditOf(patientIds: readonly number[], requestIds: readonly number[]) {
  return patientIds.length > 0
    ? {
        targetType: 'patient' as const,
        targetIds: patientIds,
        detail: `requests ${requestIds.join(',')}`.slice(0, 255),
      }
    : { targetType: 'request' as const, targetIds: requestIds };
}

export async function registerDicomWebRoutes(app: FastifyInstance, options: ModuleOptions): Promise<void> {
  const { config, database } = options.deps;
  const searcher = createQidoSearcher({ database, config });
  const retriever = createWadoRetriever({ database, config });
  const guard = options.basicAuth(config.attachmentRequireOprnApi ? { operation: 'OprnApi' } : {});
  const readerOf = (request: FastifyRequest) => requestReaderOf(request.principal!);
  const baseUrlOf = (request: FastifyRequest) => `${request.protocol}://${request.host}${DICOMWEB_ROOT}`;

  for (const [url, level] of SEARCH_URLS) {
    app.route({
      method: 'GET',
      url,
      config: {
        doc: SEARCH_DOC(level, url),
        audit: { action: 'dicomweb.search', label: 'DICOMweb search', kind: 'read' },
      },
      onRequest: guard,
      handler: async (request, reply) => {
        const params = request.params as Params;
        checkUids(params);
        checkJsonAccept(request.headers.accept);
        let answer: QidoAnswer;
        try {
          answer = await searcher.search({
            level,
            ...(params.StudyInstanceUID === undefined ? {} : { studyUid: params.StudyInstanceUID }),
            ...(params.SeriesInstanceUID === undefined ? {} : { seriesUid: params.SeriesInstanceUID }),
            query: request.query as Record<string, string | string[]>,
            reader: readerOf(request),
            baseUrl: baseUrlOf(request),
          });
        } catch (error) {
          if (error instanceof QidoParameterError) throw new AppError('bad_request', error.message);
          throw error;
        }
        request.audit = auditOf(answer.patientIds, answer.requestIds);
        request.log.info(
          { answers: answer.datasets.length, truncated: answer.isTruncated },
          'QIDO-RS search answered',
        );
        const warnings: string[] = [];
        if (answer.unsupported.length > 0)
          warnings.push(
            `299 ${request.host}: "The following attributes are not supported for matching: ${answer.unsupported.join(', ')}"`,
          );
        if (answer.isTruncated)
          warnings.push(
            `299 ${request.host}: "The number of results exceeded the maximum supported by the server. Additional results can be requested."`,
          );
        if (warnings.length > 0) reply.header('warning', warnings.join(', '));
        if (answer.datasets.length === 0) return reply.code(204).send();
        return reply.code(200).type('application/dicom+json').send(JSON.stringify(answer.datasets));
      },
    });
  }

  /** The instances of the URL's scope the caller may see; 404 for none. */
  async function retrievable(request: FastifyRequest): Promise<Retrievable> {
    const params = request.params as Params;
    checkUids(params);
    const scope: WadoScope = {
      studyUid: params.StudyInstanceUID!,
      ...(params.SeriesInstanceUID === undefined ? {} : { seriesUid: params.SeriesInstanceUID }),
      ...(params.SOPInstanceUID === undefined ? {} : { sopUid: params.SOPInstanceUID }),
    };
    const found = await retriever.find(scope, readerOf(request));
    if (found.instances.length === 0) throw notFound();
    if (found.isOverLimit)
      throw new AppError(
        'payload_too_large',
        `More than ${MAX_RETRIEVE_INSTANCES} instances: retrieve the study series by series.`,
      );
    request.audit = auditOf(found.patient === undefined ? [] : [found.patient.patientId], [
      ...new Set(found.instances.map((i) => i.requestId)),
    ]);
    return found;
  }

  const retrieveConfig = (doc: unknown) => ({
    doc,
    audit: { action: 'dicomweb.retrieve', label: 'DICOMweb retrieve', kind: 'read' as const },
  });

  for (const url of [STUDY_URL, SERIES_URL, INSTANCE_URL]) {
    app.route({
      method: 'GET',
      url,
      config: retrieveConfig(RETRIEVE_DOC(url)) as never,
      onRequest: guard,
      handler: async (request, reply) => {
        checkUids(request.params as Params);
        checkInstancesAccept(request.headers.accept);
        const found = await retrievable(request);
        const boundary = newBoundary();
        request.log.info({ instances: found.instances.length }, 'WADO-RS retrieve answered');
        return reply
          .code(200)
          .type(`multipart/related; type="application/dicom"; boundary=${boundary}`)
          .send(Readable.from(retriever.multipart(found.instances, boundary), { objectMode: false }));
      },
    });
    app.route({
      method: 'GET',
      url: `${url}/metadata`,
      config: retrieveConfig(METADATA_DOC(url)) as never,
      onRequest: guard,
      handler: async (request, reply) => {
        checkUids(request.params as Params);
        checkJsonAccept(request.headers.accept);
        const found = await retrievable(request);
        return reply
          .code(200)
          .type('application/dicom+json')
          .send(Readable.from(retriever.metadata(found.instances, found.patient), { objectMode: false }));
      },
    });
  }

  const renderedHandler = async (request: FastifyRequest, reply: FastifyReply) => {
    const params = request.params as Params;
    checkUids(params);
    let frame = 1;
    if (params.frames !== undefined) {
      // One frame only: a rendered answer is one image.
      if (!/^[1-9][0-9]{0,5}$/.test(params.frames))
        throw new AppError('bad_request', 'Invalid frame number.');
      frame = Number(params.frames);
    }
    const found = await retrievable(request);
    const image = await retriever.rendered(found.instances[0]!, frame);
    if (image === undefined) throw notFound();
    checkImageAccept(request.headers.accept, image.mimeType);
    return reply
      .code(200)
      .type(image.mimeType)
      .header('content-length', String(image.sizeBytes))
      .header('cache-control', 'private, no-cache')
      .send(Readable.from(retriever.imageBytes(image), { objectMode: false }));
  };
  for (const url of [`${INSTANCE_URL}/rendered`, `${INSTANCE_URL}/frames/:frames/rendered`]) {
    app.route({
      method: 'GET',
      url,
      config: retrieveConfig(RENDERED_DOC(url)) as never,
      onRequest: guard,
      handler: renderedHandler,
    });
  }

  for (const url of OWN_URLS) rejectOtherMethods(app, url, ['GET', 'HEAD']);
}
