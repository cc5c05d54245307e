/**
 * The request screen that `request.pages.ts` shows and `request-actions.pages.ts` answers with: a
 * request's page (routines in order, each attempt's log, the stored payload parts, the device filing, the
 * matching details, a patient search), and the answer to an action on it: back to the page with the
 * result's message once (a one-shot signed cookie), or the page again with the refusal and its status.
 * An action on a routine that changed since the page was loaded answers 409 with the current state
 * ("changed meanwhile"), never a lost update.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { isHttpsRequest } from '../../http/transport-security.ts';
import { listRequestPayloadParts } from '../attachment/index.ts';
import { readRequestDeviceFiling } from '../device-filing/index.ts';
import { readRequestMatchData } from '../filing/index.ts';
import type { PatientSearchResult } from '../patient/index.ts';
import type { AdminOutcome } from '../request-queue/index.ts';
import { RETRYABLE, VOIDABLE, readRequestDetail } from '../request-queue/index.ts';
import type { ConsoleAuditTarget, ConsoleContext, Flash } from './console-context.ts';
import { badRequestPage, notFoundPage, parseId, textField } from './console-context.ts';

/** The message of each result an action redirects with. */
const RESULT_TEXT: Record<string, string> = {
  retried: 'The routine is queued again.',
  voided: 'The routine is voided.',
  requeued: 'The request will run again from its first routine.',
  edited: 'The details are saved and the request runs on from its failed routine.',
  chosen: 'The patient is chosen and the request runs on from its failed routine.',
  dated: 'The date of the study is saved and the request runs on from its DICOM check.',
};

/**
 * A one-shot cookie naming the result of the action just made (`<request id>:<result>`): the page after
 * the redirect shows the result's message once, and a reload shows the request as it is then.
 */
const FLASH_COOKIE = 'cra_console_flash';

/** The refusal of an edit whose request changed since its page was loaded. */
export const REQUEST_CHANGED: Flash = {
  kind: 'error',
  text: 'Changed meanwhile: the request changed since you loaded the page. Nothing was changed; check the state below and try again.',
};

/** A patient search shown on the request page: the term and the patients found. */
export interface RequestPatientSearch {
  readonly term: string;
  readonly found: readonly PatientSearchResult[];
}

export interface RequestScreen {
  /** Renders request `id`'s page (404 when unknown) with an optional message, status and search. */
  render(
    request: FastifyRequest,
    reply: FastifyReply,
    id: number,
    flash?: Flash,
    status?: number,
    search?: RequestPatientSearch,
  ): Promise<FastifyReply>;
  /**
   * The message of the action just made on request `id` (`result` of the query) when the request carries
   * its one-shot cookie, which the reply clears; undefined on a reload.
   */
  takeFlash(
    request: FastifyRequest,
    reply: FastifyReply,
    id: number,
    result: string | undefined,
  ): Flash | undefined;
  /** Answers an action: back to the request page with the result, or the page with the refusal. */
  answer(
    request: FastifyRequest,
    reply: FastifyReply,
    outcome: AdminOutcome,
    result: string,
    audit?: ConsoleAuditTarget,
  ): Promise<FastifyReply>;
}

export function createRequestScreen(ctx: ConsoleContext): RequestScreen {
  const db = ctx.deps.database.db;

  const render: RequestScreen['render'] = async (request, reply, id, flash, status = 200, search) => {
    request.consoleAudit ??= { targetType: 'request', targetIds: [id] };
    const [detail, parts, device, match] = await Promise.all([
      readRequestDetail(db, id),
      listRequestPayloadParts(db, id),
      readRequestDeviceFiling(db, id),
      readRequestMatchData(db, id),
    ]);
    if (detail === undefined) throw notFoundPage(`Request ${id}`);
    return ctx.render(
      request,
      reply,
      'request',
      {
        title: `Request #${id}`,
        nav: 'requests',
        request: detail,
        parts,
        device,
        retryable: RETRYABLE,
        voidable: VOIDABLE,
        match,
        search,
        ...(flash === undefined ? {} : { flash }),
      },
      status,
    );
  };

  return {
    render,
    takeFlash(request, reply, id, result) {
      const raw = request.cookies[FLASH_COOKIE];
      const unsigned = raw === undefined ? undefined : request.unsignCookie(raw);
      const isFresh = unsigned?.valid === true && unsigned.value === `${id}:${result}`;
      if (raw !== undefined) void reply.clearCookie(FLASH_COOKIE, { path: '/console' });
      const text = result === undefined || !isFresh ? undefined : RESULT_TEXT[result];
      return text === undefined ? undefined : { kind: 'ok', text };
    },
    async answer(request, reply, outcome, result, audit) {
      switch (outcome.kind) {
        case 'not_found':
          throw notFoundPage('This routine or request');
        case 'done':
          request.consoleAudit = audit ?? { targetType: 'request_routine', targetIds: outcome.routineIds };
          void reply.setCookie(FLASH_COOKIE, `${outcome.requestId}:${result}`, {
            path: '/console',
            httpOnly: true,
            sameSite: 'strict',
            secure: isHttpsRequest(request),
            signed: true,
            maxAge: 300,
          });
          return reply.redirect(`/console/requests/${outcome.requestId}?result=${result}`, 303);
        case 'changed':
          return render(
            request,
            reply,
            outcome.requestId,
            {
              kind: 'error',
              text: `Changed meanwhile: the routine changed since you loaded the page (now ${describeVersion(outcome.current)}). Nothing was changed; check the state below and try again.`,
            },
            409,
          );
        case 'busy':
          return render(
            request,
            reply,
            outcome.requestId,
            {
              kind: 'error',
              text: 'A worker is running this request right now. Nothing was changed; try again in a moment.',
            },
            409,
          );
        case 'refused':
          return render(
            request,
            reply,
            outcome.requestId,
            { kind: 'error', text: `${outcome.reason} Nothing was changed.` },
            409,
          );
      }
    },
  };
}

/** The request id of a route's `:id` (a 404 page when it cannot be one). */
export function requestIdOf(params: { id: string }): number {
  const id = parseId(params.id);
  if (id === undefined) throw notFoundPage(`Request ${params.id}`);
  return id;
}

/** The version of the state a form was made from (its `version` field; a 400 page without one). */
export function versionOf(body: unknown): string {
  const version = textField(body, 'version');
  if (version === undefined || version.length > 100) throw badRequestPage('The form has no version.');
  return version;
}

/** `STATUS/tries/next` of a routine version, or a whole request's digest, in words. */
function describeVersion(version: string): string {
  const parts = version.split('/');
  if (parts.length !== 3) return 'different routines';
  return `${parts[0]}, ${parts[1]} tr${parts[1] === '1' ? 'y' : 'ies'}`;
}
