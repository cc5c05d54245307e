/**
 * A request's page (as OpenEyes's request admin; rendered by `request-screen.ts`), a search for the
 * patient to file it for, and its stored payload parts and their thumbnails. A part's HEADER_DATA is
 * shown with only the headers intake stores.
 */
import { createHash } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { sendBinary } from '../../http/binary-reply.ts';
import { keepStoredHeaders } from '../../http/stored-headers.ts';
import { findAttachmentRequestId, listRequestPayloadParts } from '../attachment/index.ts';
import { readRequestMatchData } from '../filing/index.ts';
import { isRequestThumbnail } from '../request-queue/index.ts';
import type { ConsoleContext } from './console-context.ts';
import { OPERATIONS, badRequestPage, notFoundPage, parseId, textField } from './console-context.ts';
import type { ConsoleGuard } from './console-guard.ts';
import type { RequestScreen } from './request-screen.ts';
import { requestIdOf } from './request-screen.ts';

type Query = Record<string, string | string[] | undefined>;

/** The most patients a search on the request page lists. */
const PATIENT_SEARCH_SIZE = 20;

export function registerRequestPages(
  app: FastifyInstance,
  ctx: ConsoleContext,
  guard: ConsoleGuard,
  screen: RequestScreen,
): void {
  const db = ctx.deps.database.db;
  const { attachments, patients } = ctx;
  const guardQueue = guard(OPERATIONS.queue);

  app.get<{ Params: { id: string }; Querystring: Query }>(
    '/requests/:id',
    { preHandler: guardQueue, config: { consoleAction: 'console.request.view' } },
    async (request, reply) => {
      const id = requestIdOf(request.params);
      // The message only right after the action (its one-shot cookie): a reload shows the current state.
      const flash = screen.takeFlash(request, reply, id, textField(request.query, 'result'));
      return screen.render(request, reply, id, flash);
    },
  );

  app.get<{ Params: { id: string }; Querystring: Query }>(
    '/requests/:id/patients',
    { preHandler: guardQueue, config: { consoleAction: 'console.request.patient-search' } },
    async (request, reply) => {
      const id = requestIdOf(request.params);
      const term = (textField(request.query, 'term') ?? '').trim();
      if (term.length > 100) throw badRequestPage('The search term is too long.');
      // An unknown request answers 404 before any patient is searched (and named in the audit row).
      if ((await readRequestMatchData(db, id)) === undefined) throw notFoundPage(`Request ${id}`);
      const found =
        term === ''
          ? []
          : await patients.searchPatients({
              term,
              identifierType: undefined,
              pageSize: PATIENT_SEARCH_SIZE,
              page: 1,
              sortColumn: 'default',
              isDescending: false,
              institutionCookie: undefined,
              siteCookie: undefined,
            });
      request.consoleAudit = { targetType: 'patient', targetIds: found.map((p) => p.id) };
      return screen.render(request, reply, id, undefined, 200, { term, found });
    },
  );

  app.get<{ Params: { id: string; partId: string } }>(
    '/requests/:id/parts/:partId/thumbnail',
    { preHandler: guardQueue, config: { consoleAction: 'console.request.thumbnail' } },
    async (request, reply) => {
      const requestId = requestIdOf(request.params);
      const partId = parseId(request.params.partId);
      if (partId === undefined || !(await isRequestThumbnail(db, requestId, partId)))
        throw notFoundPage(`The thumbnail of part ${request.params.partId} of request ${requestId}`);
      request.consoleAudit = { targetType: 'attachment_data', targetIds: [partId] };
      const { representation, body } = await attachments.readAttachment({
        id: partId,
        field: 'thumbnail_small_blob',
        mime: undefined,
      });
      return sendBinary(reply, representation, typeof body === 'function' ? body() : body);
    },
  );

  app.get<{ Params: { id: string; partId: string } }>(
    '/requests/:id/parts/:partId',
    { preHandler: guardQueue, config: { consoleAction: 'console.request.part' } },
    async (request, reply) => {
      const requestId = requestIdOf(request.params);
      const partId = parseId(request.params.partId);
      if (partId === undefined || (await findAttachmentRequestId(db, partId)) !== requestId)
        throw notFoundPage(`Part ${request.params.partId} of request ${requestId}`);
      const part = (await listRequestPayloadParts(db, requestId)).find((p) => p.id === partId);
      if (part?.field === null || part === undefined) throw notFoundPage(`Part ${partId}`);
      request.consoleAudit = { targetType: 'attachment_data', targetIds: [partId] };
      const { representation, body } = await attachments.readAttachment({
        id: partId,
        field: part.field,
        mime: undefined,
      });
      if (part.mnemonic === 'HEADER_DATA' && Buffer.isBuffer(body)) {
        const redacted = Buffer.from(redactHeaders(body.toString('utf8')));
        const etag = `"${createHash('sha256').update(redacted).digest('base64url')}"`;
        return sendBinary(reply, { ...representation, sizeBytes: redacted.length, etag }, redacted);
      }
      return sendBinary(reply, representation, typeof body === 'function' ? body() : body);
    },
  );
}

/**
 * A HEADER_DATA JSON object with only the headers intake stores (older rows may hold credentials or
 * any header); anything that is not such an object is withheld.
 */
function redactHeaders(text: string): string {
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return '{}';
    return JSON.stringify(keepStoredHeaders(value as Record<string, unknown>), null, 2);
  } catch {
    return '{}';
  }
}
