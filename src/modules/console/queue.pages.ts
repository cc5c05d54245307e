/**
 * Request admin pages (as OpenEyes's request admin): the filtered list, a request's detail (routines in
 * order, each attempt's log, the stored payload parts, the request details) and the actions retry, void and
 * run again, all through the request queue module. An action on a routine that changed since the page was
 * loaded answers 409 with the current state ("changed meanwhile"), never a lost update.
 */
import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { sendBinary } from '../../http/binary-reply.ts';
import { keepStoredHeaders } from '../../http/stored-headers.ts';
import { isHttpsRequest } from '../../http/transport-security.ts';
import type { RoutineStatus } from '../../db/schema.ts';
import { findAttachmentRequestId, listRequestPayloadParts } from '../attachment/index.ts';
import type { PatientSearchResult } from '../patient/index.ts';
import { describePatients } from '../patient/index.ts';
import type { AdminOutcome, RequestListFilter } from '../request-queue/index.ts';
import type { EditChange } from '../filing/index.ts';
import {
  RETRYABLE,
  ROUTINE_STATUSES,
  VOIDABLE,
  isRequestThumbnail,
  listRequests,
  readQueueChoices,
  readRequestDetail,
  readRequestSummaries,
  requeueRequest,
  retryRoutine,
  voidRoutine,
} from '../request-queue/index.ts';
import {
  checkGivenEventDate,
  editRequestEventDate,
  editRequestMatchData,
  readRequestMatchData,
  checkMatchCriteria,
} from '../filing/index.ts';
import { readRequestDeviceFiling } from '../device-filing/index.ts';
import type { ConsoleAuditTarget, ConsoleContext, Flash } from './console-context.ts';
import {
  OPERATIONS,
  badRequestPage,
  consoleUrl,
  notFoundPage,
  parseId,
  timeField,
  textField,
} from './console-context.ts';
import type { ConsoleGuard } from './console-guard.ts';

type Query = Record<string, string | string[] | undefined>;

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

/** The most patients a search on the request page lists. */
const PATIENT_SEARCH_SIZE = 20;

function optionalText(query: Query, name: string, maxLength: number): string | undefined {
  const value = textField(query, name)?.trim();
  if (value === undefined || value === '') return undefined;
  if (value.length > maxLength) throw badRequestPage(`The filter "${name}" is too long.`);
  return value;
}

export function registerQueuePages(app: FastifyInstance, ctx: ConsoleContext, guard: ConsoleGuard): void {
  const { database } = ctx.deps;
  const db = database.db;
  const { attachments, patients } = ctx;
  const guardQueue = guard(OPERATIONS.queue);

  /** The list filter of the query (400 for values that cannot be one) and the form's echo. */
  function readFilter(query: Query): { filter: RequestListFilter; form: { from: string; to: string } } {
    const overall = optionalText(query, 'overall', 20);
    if (overall !== undefined && !['complete', 'incomplete', 'failed', 'waiting'].includes(overall))
      throw badRequestPage('Unknown overall status.');
    const status = optionalText(query, 'status', 20);
    if (status !== undefined && !ROUTINE_STATUSES.includes(status as RoutineStatus))
      throw badRequestPage('Unknown routine status.');
    const createdFrom = timeField(ctx, query, 'from');
    const createdTo = timeField(ctx, query, 'to');
    const filter: RequestListFilter = {
      ...(overall === undefined ? {} : { overall: overall as RequestListFilter['overall'] }),
      ...(status === undefined ? {} : { routineStatus: status as RoutineStatus }),
      ...(textField(query, 'retried') === '1' ? { isRetried: true } : {}),
      ...optionalEntry('routineName', optionalText(query, 'routine', 45)),
      ...optionalEntry('requestType', optionalText(query, 'type', 45)),
      ...optionalEntry('queue', optionalText(query, 'queue', 45)),
      ...optionalEntry('detailName', optionalText(query, 'detail_name', 100)),
      ...optionalEntry('detailValue', optionalText(query, 'detail_value', 1000)),
      ...optionalEntry('createdFrom', createdFrom),
      ...optionalEntry('createdTo', createdTo),
    };
    return {
      filter,
      form: { from: ctx.siteTime.toLocalInput(createdFrom), to: ctx.siteTime.toLocalInput(createdTo) },
    };
  }

  const listed = { preHandler: guardQueue, config: { consoleAction: 'console.request.list' } };
  app.get<{ Querystring: Query }>('/requests', listed, async (request, reply) => {
    const { filter, form } = readFilter(request.query);
    const beforeText = textField(request.query, 'before');
    const before = beforeText === undefined ? undefined : parseId(beforeText);
    if (beforeText !== undefined && before === undefined)
      throw badRequestPage('"before" must be a request id.');
    const [page, choices] = await Promise.all([
      listRequests(db, filter, before === undefined ? {} : { before }),
      readQueueChoices(db),
    ]);
    request.consoleAudit = { targetType: 'request', targetIds: page.rows.map((r) => r.id) };
    const summaries = await readRequestSummaries(
      db,
      page.rows.map((r) => r.id),
    );
    const patients = await describePatients(
      db,
      [...summaries.values()].flatMap((s) => (s.matchedPatientId === null ? [] : [s.matchedPatientId])),
    );
    const echo = { ...request.query, before: undefined };
    const pick = (q: Query) =>
      Object.fromEntries(Object.entries(q).filter((e): e is [string, string] => typeof e[1] === 'string'));
    return ctx.render(request, reply, 'requests', {
      title: 'Requests',
      nav: 'requests',
      filter,
      form,
      page,
      summaries,
      patients,
      choices,
      statuses: ROUTINE_STATUSES,
      firstUrl: before === undefined ? undefined : consoleUrl('/console/requests', pick(echo)),
      nextUrl:
        page.nextBefore === undefined
          ? undefined
          : consoleUrl('/console/requests', { ...pick(echo), before: page.nextBefore }),
    });
  });

  /** Renders request `id`'s page (404 when unknown) with an optional message and status. */
  async function renderRequest(
    request: FastifyRequest,
    reply: FastifyReply,
    id: number,
    flash?: Flash,
    status = 200,
    search?: { term: string; found: readonly PatientSearchResult[] },
  ): Promise<FastifyReply> {
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
  }

  const requestIdOf = (params: { id: string }) => {
    const id = parseId(params.id);
    if (id === undefined) throw notFoundPage(`Request ${params.id}`);
    return id;
  };

  app.get<{ Params: { id: string }; Querystring: Query }>(
    '/requests/:id',
    { preHandler: guardQueue, config: { consoleAction: 'console.request.view' } },
    async (request, reply) => {
      const id = requestIdOf(request.params);
      const result = textField(request.query, 'result');
      // The message only right after the action (its one-shot cookie): a reload shows the current state.
      const raw = request.cookies[FLASH_COOKIE];
      const unsigned = raw === undefined ? undefined : request.unsignCookie(raw);
      const isFresh = unsigned?.valid === true && unsigned.value === `${id}:${result}`;
      if (raw !== undefined) void reply.clearCookie(FLASH_COOKIE, { path: '/console' });
      const text = result === undefined || !isFresh ? undefined : RESULT_TEXT[result];
      return renderRequest(request, reply, id, text === undefined ? undefined : { kind: 'ok', text });
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
      return renderRequest(request, reply, id, undefined, 200, { term, found });
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

  /** Answers an action: back to the request page with the result, or the page with the refusal. */
  async function answer(
    request: FastifyRequest,
    reply: FastifyReply,
    outcome: AdminOutcome,
    result: string,
    audit?: ConsoleAuditTarget,
  ) {
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
        return renderRequest(
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
        return renderRequest(
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
        return renderRequest(
          request,
          reply,
          outcome.requestId,
          { kind: 'error', text: `${outcome.reason} Nothing was changed.` },
          409,
        );
    }
  }

  const versionOf = (body: unknown) => {
    const version = textField(body, 'version');
    if (version === undefined || version.length > 100) throw badRequestPage('The form has no version.');
    return version;
  };
  const routineIdOf = (params: { id: string }) => {
    const id = parseId(params.id);
    if (id === undefined) throw notFoundPage(`Routine ${params.id}`);
    return id;
  };

  app.post<{ Params: { id: string } }>(
    '/routines/:id/retry',
    { preHandler: guardQueue, config: { consoleAction: 'console.request.retry' } },
    async (request, reply) => {
      const routineId = routineIdOf(request.params);
      const expectedVersion = versionOf(request.body);
      const status = textField(request.body, 'status');
      const tryText = (textField(request.body, 'try_count') ?? '').trim();
      const nextText = (textField(request.body, 'next_try') ?? '').trim();
      const problems: string[] = [];
      if (status !== 'NEW' && status !== 'RETRY') problems.push('The new status must be NEW or RETRY.');
      if (!/^\d{1,4}$/.test(tryText) || Number(tryText) > 1000)
        problems.push('The try count must be a whole number from 0 to 1000.');
      const nextTry = nextText === '' ? null : ctx.siteTime.parseLocal(nextText);
      if (nextTry === undefined) problems.push('The next try must be a date and time.');
      if (problems.length > 0) {
        const routine = await db
          .selectFrom('request_routine')
          .select('request_id')
          .where('id', '=', routineId)
          .executeTakeFirst();
        if (routine === undefined) throw notFoundPage(`Routine ${routineId}`);
        return renderRequest(
          request,
          reply,
          routine.request_id,
          { kind: 'error', text: `${problems.join(' ')} Nothing was changed.` },
          422,
        );
      }
      const outcome = await retryRoutine(database, {
        routineId,
        expectedVersion,
        status: status as 'NEW' | 'RETRY',
        tryCount: Number(tryText),
        nextTry: nextTry ?? null,
      });
      return answer(request, reply, outcome, 'retried');
    },
  );

  app.post<{ Params: { id: string } }>(
    '/routines/:id/void',
    { preHandler: guardQueue, config: { consoleAction: 'console.request.void' } },
    async (request, reply) => {
      const outcome = await voidRoutine(database, {
        routineId: routineIdOf(request.params),
        expectedVersion: versionOf(request.body),
      });
      return answer(request, reply, outcome, 'voided');
    },
  );

  app.post<{ Params: { id: string } }>(
    '/requests/:id/requeue',
    { preHandler: guardQueue, config: { consoleAction: 'console.request.requeue' } },
    async (request, reply) => {
      const outcome = await requeueRequest(database, {
        requestId: requestIdOf(request.params),
        expectedVersion: versionOf(request.body),
      });
      return answer(request, reply, outcome, 'requeued');
    },
  );

  /** Runs an edit of the request's matching details and answers it like the other actions. */
  async function editRequest(
    request: FastifyRequest<{ Params: { id: string } }>,
    reply: FastifyReply,
    change: EditChange,
  ) {
    const requestId = requestIdOf(request.params);
    const outcome = await editRequestMatchData(database, {
      requestId,
      expectedVersion: versionOf(request.body),
      userId: request.consoleUser!.userId,
      change,
    });
    if (outcome.kind === 'changed')
      return renderRequest(
        request,
        reply,
        requestId,
        {
          kind: 'error',
          text: 'Changed meanwhile: the request changed since you loaded the page. Nothing was changed; check the state below and try again.',
        },
        409,
      );
    if (outcome.kind === 'done') {
      const edited = outcome.changedKeys.length === 0 ? 'none' : outcome.changedKeys.join(' ');
      // Key names and internal ids only: the old and new values stay with the request.
      return answer(request, reply, outcome, change.kind === 'patient' ? 'chosen' : 'edited', {
        targetType: 'request',
        targetIds: [requestId],
        detail: `REQUEST_DATA keys changed: ${edited}; routines run on: ${outcome.routineIds.join(' ')}${change.kind === 'patient' ? `; patient chosen: ${change.patientId}` : ''}`,
      });
    }
    return answer(request, reply, outcome, 'edited');
  }

  app.post<{ Params: { id: string } }>(
    '/requests/:id/edit',
    { preHandler: guardQueue, config: { consoleAction: 'console.request.edit' } },
    async (request, reply) => {
      const field = (name: string, maxLength: number) => {
        const value = (textField(request.body, name) ?? '').trim();
        if (value.length > maxLength) throw badRequestPage(`The field "${name}" is too long.`);
        return value;
      };
      const change = {
        kind: 'fields',
        identifier: field('identifier', 200),
        dob: field('dob', 30),
        sex: field('sex', 10),
      } as const;
      const problems = checkMatchCriteria(change);
      if (problems.length > 0)
        return renderRequest(
          request,
          reply,
          requestIdOf(request.params),
          { kind: 'error', text: `${problems.join(' ')} Nothing was changed.` },
          422,
        );
      return editRequest(request, reply, change);
    },
  );

  // The study date of a DICOM file refused for its date: audited by key name only, as the edits are.
  app.post<{ Params: { id: string } }>(
    '/requests/:id/event-date',
    { preHandler: guardQueue, config: { consoleAction: 'console.request.event-date' } },
    async (request, reply) => {
      const requestId = requestIdOf(request.params);
      const eventDate = (textField(request.body, 'event_date') ?? '').trim();
      if (eventDate.length > 30) throw badRequestPage('The field "event_date" is too long.');
      const checked = checkGivenEventDate(eventDate, new Date());
      if ('problem' in checked)
        return renderRequest(
          request,
          reply,
          requestId,
          { kind: 'error', text: `${checked.problem} Nothing was changed.` },
          422,
        );
      const outcome = await editRequestEventDate(database, {
        requestId,
        expectedVersion: versionOf(request.body),
        userId: request.consoleUser!.userId,
        eventDate,
      });
      if (outcome.kind === 'changed')
        return renderRequest(
          request,
          reply,
          requestId,
          {
            kind: 'error',
            text: 'Changed meanwhile: the request changed since you loaded the page. Nothing was changed; check the state below and try again.',
          },
          409,
        );
      if (outcome.kind === 'done') {
        const edited = outcome.changedKeys.length === 0 ? 'none' : outcome.changedKeys.join(' ');
        return answer(request, reply, outcome, 'dated', {
          targetType: 'request',
          targetIds: [requestId],
          detail: `REQUEST_DATA keys changed: ${edited}; routines run on: ${outcome.routineIds.join(' ')}`,
        });
      }
      return answer(request, reply, outcome, 'dated');
    },
  );

  app.post<{ Params: { id: string } }>(
    '/requests/:id/patient',
    { preHandler: guardQueue, config: { consoleAction: 'console.request.choose-patient' } },
    async (request, reply) => {
      const patientId = parseId(textField(request.body, 'patient_id'));
      if (patientId === undefined) throw badRequestPage('The form names no patient.');
      return editRequest(request, reply, { kind: 'patient', patientId });
    },
  );
}

function optionalEntry<K extends string>(key: K, value: string | undefined): { [P in K]?: string } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: string };
}

/** `STATUS/tries/next` of a routine version, or a whole request's digest, in words. */
function describeVersion(version: string): string {
  const parts = version.split('/');
  if (parts.length !== 3) return 'different routines';
  return `${parts[0]}, ${parts[1]} tr${parts[1] === '1' ? 'y' : 'ies'}`;
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
