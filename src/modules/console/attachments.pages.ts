/**
 * Attachment pages: find the attachments filed under an event or under a patient's events (by one of
 * the patient's identifiers) or by id (uploads filed under no event too), with thumbnails, and open one. Bytes are served by the attachment module's
 * view service with the API's headers (type, length, ETag, nosniff, the API's CSP), so the console shows
 * exactly what `attachmentdisplay/view` would. Only filed attachments open here: a request's raw payload
 * parts are on the request page, for request admins.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sendBinary } from '../../http/binary-reply.ts';
import { API_CSP } from '../../http/transport-security.ts';
import type { FoundAttachment } from '../attachment/index.ts';
import {
  MAX_FOUND_ATTACHMENTS,
  findEventAttachments,
  findAttachment,
  findPatientAttachments,
} from '../attachment/index.ts';
import { readEventSubtypes } from '../device-filing/index.ts';
import { findPatientIdsByIdentifier } from '../patient/index.ts';
import type { ConsoleContext } from './console-context.ts';
import {
  ConsolePageError,
  OPERATIONS,
  badRequestPage,
  can,
  notFoundPage,
  parseId,
  textField,
} from './console-context.ts';
import type { ConsoleGuard } from './console-guard.ts';

type Query = Record<string, string | string[] | undefined>;

export function registerAttachmentPages(
  app: FastifyInstance,
  ctx: ConsoleContext,
  guard: ConsoleGuard,
): void {
  const db = ctx.deps.database.db;
  const { attachments } = ctx;
  const guardClinical = guard(OPERATIONS.clinical);

  app.get<{ Querystring: Query }>(
    '/attachments',
    { preHandler: guardClinical, config: { consoleAction: 'console.attachment.search' } },
    async (request, reply) => {
      const idText = (textField(request.query, 'id') ?? '').trim();
      const eventText = (textField(request.query, 'event') ?? '').trim();
      const identifier = (textField(request.query, 'identifier') ?? '').trim();
      if (identifier.length > 64) throw badRequestPage('The identifier is too long.');
      let results: FoundAttachment[] | undefined;
      if (idText !== '') {
        const id = parseId(idText);
        if (id === undefined) throw badRequestPage('The attachment id must be a positive whole number.');
        const found = await findAttachment(db, id);
        results = found === undefined ? [] : [found];
        if (found !== undefined && !mayOpen(request, found)) throw unfiledRefused();
        request.consoleAudit = { targetType: 'attachment_data', targetIds: results.map((a) => a.id) };
      } else if (eventText !== '') {
        const eventId = parseId(eventText);
        if (eventId === undefined) throw badRequestPage('The event id must be a positive whole number.');
        results = await findEventAttachments(db, eventId);
        request.consoleAudit = { targetType: 'attachment_data', targetIds: results.map((a) => a.id) };
      } else if (identifier !== '') {
        const patientIds = await findPatientIdsByIdentifier(db, identifier);
        results = await findPatientAttachments(db, patientIds);
        request.consoleAudit = { targetType: 'patient', targetIds: patientIds };
      }
      // Grouped by event (in the order found), each titled with its subtype when it has one; uploads filed
      // under no event form a group of their own (event id null).
      const eventIds = (results ?? []).flatMap((a) => (a.eventId === null ? [] : [a.eventId]));
      const subtypes = await readEventSubtypes(db, eventIds);
      const groups: { eventId: number | null; subtype: string | null; attachments: FoundAttachment[] }[] = [];
      for (const attachment of results ?? []) {
        const { eventId } = attachment;
        let group = groups.find((g) => g.eventId === eventId);
        if (group === undefined) {
          group = {
            eventId,
            subtype: eventId === null ? null : (subtypes.get(eventId) ?? null),
            attachments: [],
          };
          groups.push(group);
        }
        group.attachments.push(attachment);
      }
      return ctx.render(request, reply, 'attachments', {
        title: 'Attachments',
        nav: 'attachments',
        form: { id: idText, event: eventText, identifier },
        results,
        groups,
        isCapped: results !== undefined && results.length >= MAX_FOUND_ATTACHMENTS,
      });
    },
  );

  /**
   * An upload filed under no event is private to its request, as on the API: only request admins open it
   * here (the API also lets its uploader, who has no console screen for it).
   */
  const mayOpen = (request: FastifyRequest, attachment: FoundAttachment) =>
    attachment.eventId !== null || can(request.consoleUser, OPERATIONS.queue);
  const unfiledRefused = () =>
    new ConsolePageError(
      403,
      'Forbidden',
      `This attachment is filed under no event; opening it needs the operation ${OPERATIONS.queue}, as on the API.`,
    );

  /** The attachment of the path's id (404 otherwise), named in the audit row either way. */
  const filedOf = async (request: FastifyRequest<{ Params: { id: string } }>) => {
    const id = parseId(request.params.id);
    if (id !== undefined) request.consoleAudit = { targetType: 'attachment_data', targetIds: [id] };
    const attachment = id === undefined ? undefined : await findAttachment(db, id);
    if (attachment === undefined) throw notFoundPage(`Attachment ${request.params.id}`);
    if (!mayOpen(request, attachment)) throw unfiledRefused();
    return attachment;
  };

  app.get<{ Params: { id: string } }>(
    '/attachments/:id',
    { preHandler: guardClinical, config: { consoleAction: 'console.attachment.view' } },
    async (request, reply) => {
      const attachment = await filedOf(request);
      return ctx.render(request, reply, 'attachment', {
        title: `Attachment ${attachment.id}`,
        nav: 'attachments',
        attachment,
      });
    },
  );

  /** The bytes of `field`, as the attachment view sends them (type, length, ETag, nosniff, the API's CSP). */
  const sendField = async (
    request: FastifyRequest<{ Params: { id: string } }>,
    reply: FastifyReply,
    field: 'thumbnail_small_blob' | undefined,
  ) => {
    const { id } = await filedOf(request);
    const { representation, body } = await attachments.readAttachment({ id, field, mime: undefined });
    void reply.header('content-security-policy', API_CSP);
    return sendBinary(reply, representation, typeof body === 'function' ? body() : body);
  };

  app.get<{ Params: { id: string } }>(
    '/attachments/:id/file',
    { preHandler: guardClinical, config: { consoleAction: 'console.attachment.open' } },
    (request, reply) => sendField(request, reply, undefined),
  );

  app.get<{ Params: { id: string } }>(
    '/attachments/:id/thumbnail',
    { preHandler: guardClinical, config: { consoleAction: 'console.attachment.thumbnail' } },
    (request, reply) => sendField(request, reply, 'thumbnail_small_blob'),
  );
}
