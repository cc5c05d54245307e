/**
 * PAS messages: what the PAS sent, newest first: the HL7 messages the MLLP listener answered
 * (`hl7_message`), with their sender, message type, patient, answer (AA, AE, AR) and reason, and the
 * PASAPI calls the audit trail recorded (read-only: account, resource, patient, HTTP status; the audit
 * keeps no reason), filtered by source and outcome and paged by key (`pas-message-feed.ts`). A message
 * answered AE keeps its text: a request admin (the operation of the request pages' edit and retry)
 * corrects it on its page and applies it again through the listener's own code; the new answer
 * replaces the AE, and the console's audit row names who applied which message. A correction that is
 * still refused answers its reason again and changes nothing. The message text is patient data: it is
 * shown escaped on the page and never logged; the audit rows name ids and codes only.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isHttpsRequest } from '../../http/transport-security.ts';
import type { AckCode, LoggedMessageDetail } from '../hl7/index.ts';
import type { AuditTrail } from '../audit/index.ts';
import type { ReapplyInput, ReapplyOutcome } from '../hl7/index.ts';
import { createHl7Reapplier, messageTextVersion, readLoggedMessage } from '../hl7/index.ts';
import type { Logger } from '../../logger.ts';
import { describePatients } from '../patient/index.ts';
import type { ConsoleContext, Flash } from './console-context.ts';
import {
  OPERATIONS,
  badRequestPage,
  consoleUrl,
  notFoundPage,
  parseId,
  textField,
} from './console-context.ts';
import type { ConsoleGuard } from './console-guard.ts';
import type { FeedKey, FeedRow } from './pas-message-feed.ts';
import { listPasFeed } from './pas-message-feed.ts';

type Query = Record<string, string | string[] | undefined>;

const PAGE_SIZE = 50;
const OUTCOMES: readonly AckCode[] = ['AA', 'AE', 'AR'];
const BEFORE = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})_([hp])_(\d{1,16})$/;
/** The one-shot cookie of the result just made (`pas:<id>:<result>`), as on the request pages. */
const FLASH_COOKIE = 'cra_console_flash';

export function registerPasMessagePages(
  app: FastifyInstance,
  ctx: ConsoleContext,
  guard: ConsoleGuard,
  services: { readonly auditTrail: AuditTrail; readonly logger: Logger },
): void {
  const { database, config } = ctx.deps;
  const db = database.db;
  const guardQueue = guard(OPERATIONS.queue);
  // The listener's code is loaded on the first correction, as the listener itself is.
  let reapplier: Promise<(input: ReapplyInput) => Promise<ReapplyOutcome>> | undefined;
  const reapply = async (input: ReapplyInput) => {
    reapplier ??= createHl7Reapplier({ database, config, ...services });
    return (await reapplier)(input);
  };

  app.get<{ Querystring: Query }>(
    '/pas-messages',
    { preHandler: guardQueue, config: { consoleAction: 'console.pas-message.list' } },
    async (request, reply) => {
      const outcomeText = (textField(request.query, 'outcome') ?? '').trim().toUpperCase();
      if (outcomeText !== '' && !OUTCOMES.includes(outcomeText as AckCode))
        throw badRequestPage('The outcome must be AA, AE or AR.');
      const outcome = outcomeText === '' ? undefined : (outcomeText as AckCode);
      const sourceText = (textField(request.query, 'source') ?? '').trim().toUpperCase();
      if (sourceText !== '' && sourceText !== 'HL7' && sourceText !== 'PASAPI')
        throw badRequestPage('The source must be HL7 or PASAPI.');
      const source = sourceText === '' ? undefined : sourceText;
      const beforeText = textField(request.query, 'before');
      let before: FeedKey | undefined;
      if (beforeText !== undefined) {
        const match = BEFORE.exec(beforeText);
        if (match === null) throw badRequestPage('"before" is not a position in the message list.');
        before = { time: `${match[1]} ${match[2]}`, rank: match[3] === 'h' ? 0 : 1, id: Number(match[4]) };
      }
      // The PASAPI routes the audit trail records (`pasapi.*`), with their labels.
      const pasapiRoutes = new Map<string, string>();
      for (const route of request.server.auditedRoutes ?? [])
        if (route.action.startsWith('pasapi.') && !pasapiRoutes.has(route.action))
          pasapiRoutes.set(route.action, route.label);
      const page = await listPasFeed(
        db,
        {
          pasapiActions: [...pasapiRoutes.keys()],
          ...(source === undefined ? {} : { source }),
          ...(outcome === undefined ? {} : { outcome }),
        },
        { pageSize: PAGE_SIZE, ...(before === undefined ? {} : { before }) },
      );
      const hl7Ids = page.rows.flatMap((r) => (r.source === 'HL7' ? [r.message.id] : []));
      const callIds = page.rows.flatMap((r) => (r.source === 'PASAPI' ? [r.call.id] : []));
      request.consoleAudit = {
        targetType: 'hl7_message',
        targetIds: hl7Ids,
        ...(callIds.length === 0 ? {} : { detail: `PASAPI audit rows: ${callIds.join(' ')}`.slice(0, 255) }),
      };
      const patientIdOf = (row: FeedRow): number | undefined => {
        if (row.source === 'HL7') return row.message.patientId;
        if (row.call.target_type !== 'patient') return undefined;
        return parseId(row.call.target_ids?.split(',')[0]);
      };
      const patients = await describePatients(
        db,
        page.rows.flatMap((r) => {
          const id = patientIdOf(r);
          return id === undefined ? [] : [id];
        }),
      );
      const selection = { outcome, source };
      return ctx.render(request, reply, 'pas-messages', {
        title: 'PAS messages',
        nav: 'pas-messages',
        outcome: outcome ?? '',
        source: source ?? '',
        page,
        patientIdOf,
        patients,
        pasapiLabels: pasapiRoutes,
        isListening: config.hl7.port !== undefined,
        firstUrl: before === undefined ? undefined : consoleUrl('/console/pas-messages', selection),
        nextUrl:
          page.next === undefined
            ? undefined
            : consoleUrl('/console/pas-messages', {
                ...selection,
                before: `${page.next.time.replace(' ', 'T')}_${page.next.rank === 0 ? 'h' : 'p'}_${page.next.id}`,
              }),
      });
    },
  );

  /** Renders message `id`'s page (404 when unknown), with the text in the editor given or kept. */
  async function renderMessage(
    request: FastifyRequest,
    reply: FastifyReply,
    message: LoggedMessageDetail,
    options: { flash?: Flash; status?: number; editedText?: string } = {},
  ): Promise<FastifyReply> {
    const patients = await describePatients(db, message.patientId === undefined ? [] : [message.patientId]);
    const text = options.editedText ?? message.messageText;
    return ctx.render(
      request,
      reply,
      'pas-message',
      {
        title: `PAS message #${message.id}`,
        nav: 'pas-messages',
        message,
        patient: message.patientId === undefined ? undefined : patients.get(message.patientId),
        // Segments one per line in the editor; HL7 ends them with CR.
        editorText: text === null ? null : text.replace(/\r\n?|\n/g, '\n'),
        canReapply: message.ackCode === 'AE' && message.messageText !== null,
        version: message.messageText === null ? '' : messageTextVersion(message.messageText),
        ...(options.flash === undefined ? {} : { flash: options.flash }),
      },
      options.status ?? 200,
    );
  }

  const messageOf = async (params: { id: string }) => {
    const id = parseId(params.id);
    const message = id === undefined ? undefined : await readLoggedMessage(db, id);
    if (message === undefined) throw notFoundPage(`PAS message ${params.id}`);
    return message;
  };

  app.get<{ Params: { id: string }; Querystring: Query }>(
    '/pas-messages/:id',
    { preHandler: guardQueue, config: { consoleAction: 'console.pas-message.view' } },
    async (request, reply) => {
      const message = await messageOf(request.params);
      request.consoleAudit = { targetType: 'hl7_message', targetIds: [message.id] };
      const result = textField(request.query, 'result');
      const raw = request.cookies[FLASH_COOKIE];
      const unsigned = raw === undefined ? undefined : request.unsignCookie(raw);
      const isFresh = unsigned?.valid === true && unsigned.value === `pas:${message.id}:${result}`;
      if (raw !== undefined) void reply.clearCookie(FLASH_COOKIE, { path: '/console' });
      const flash: Flash | undefined =
        isFresh && result === 'applied'
          ? { kind: 'ok', text: 'The corrected message is applied (AA).' }
          : undefined;
      return renderMessage(request, reply, message, flash === undefined ? {} : { flash });
    },
  );

  app.post<{ Params: { id: string } }>(
    '/pas-messages/:id/reapply',
    { preHandler: guardQueue, config: { consoleAction: 'console.pas-message.reapply' } },
    async (request, reply) => {
      const message = await messageOf(request.params);
      request.consoleAudit = { targetType: 'hl7_message', targetIds: [message.id] };
      const edited = textField(request.body, 'message_text');
      const version = textField(request.body, 'version');
      if (edited === undefined || version === undefined || version.length > 100)
        throw badRequestPage('The form has no message or no version.');
      if (edited.length > config.hl7.maxMessageBytes)
        throw badRequestPage('The message is longer than HL7_MAX_MESSAGE_BYTES.');
      const user = request.consoleUser!;
      const outcome = await reapply({
        id: message.id,
        userId: user.userId,
        username: user.username,
        // The editor's lines are the message's segments.
        text: edited.replace(/\r\n?|\n/g, '\r').replace(/\r+$/, ''),
        expectedVersion: version,
      });
      switch (outcome.kind) {
        case 'applied':
          // Ids and codes only: the message text and the patient's details stay out of the audit trail.
          request.consoleAudit = {
            targetType: 'hl7_message',
            targetIds: [message.id],
            detail: `${outcome.messageType} AE -> AA; patients: ${outcome.patientIds.join(' ') || 'none'}`,
          };
          void reply.setCookie(FLASH_COOKIE, `pas:${message.id}:applied`, {
            path: '/console',
            httpOnly: true,
            sameSite: 'strict',
            secure: isHttpsRequest(request),
            signed: true,
            maxAge: 300,
          });
          return reply.redirect(`/console/pas-messages/${message.id}?result=applied`, 303);
        case 'refused':
          return renderMessage(request, reply, message, {
            status: 422,
            editedText: edited,
            flash: {
              kind: 'error',
              text: `Not applied (${outcome.ackCode}): ${outcome.reason} Nothing was changed.`,
            },
          });
        case 'changed': {
          const current = (await readLoggedMessage(db, message.id)) ?? message;
          return renderMessage(request, reply, current, {
            status: 409,
            flash: {
              kind: 'error',
              text:
                current.ackCode === 'AE'
                  ? 'Changed meanwhile: the message changed since you loaded the page. Nothing was changed; check it below and try again.'
                  : `Changed meanwhile: the message is answered ${current.ackCode} now. Nothing was changed.`,
            },
          });
        }
      }
    },
  );
}
