/**
 * The forms of a request's page, each through the request queue or the filing module and answered by
 * `request-screen.ts`: retry or void a routine and run the request again from its first routine (the
 * queue's locked changes of routines); edit the matching details, choose the patient, and give the
 * study's date of a DICOM file refused for its date (the filing module's request edits, audited by key
 * name only: the old and new values stay with the request).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { EditChange } from '../filing/index.ts';
import {
  checkGivenEventDate,
  checkMatchCriteria,
  editRequestEventDate,
  editRequestMatchData,
} from '../filing/index.ts';
import { findRoutineRequestId, requeueRequest, retryRoutine, voidRoutine } from '../request-queue/index.ts';
import type { ConsoleContext } from './console-context.ts';
import { OPERATIONS, badRequestPage, notFoundPage, parseId, textField } from './console-context.ts';
import type { ConsoleGuard } from './console-guard.ts';
import type { RequestScreen } from './request-screen.ts';
import { REQUEST_CHANGED, requestIdOf, versionOf } from './request-screen.ts';

const routineIdOf = (params: { id: string }) => {
  const id = parseId(params.id);
  if (id === undefined) throw notFoundPage(`Routine ${params.id}`);
  return id;
};

export function registerRequestActionPages(
  app: FastifyInstance,
  ctx: ConsoleContext,
  guard: ConsoleGuard,
  screen: RequestScreen,
): void {
  const { database } = ctx.deps;
  const guardQueue = guard(OPERATIONS.queue);

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
        const requestId = await findRoutineRequestId(database.db, routineId);
        if (requestId === undefined) throw notFoundPage(`Routine ${routineId}`);
        return screen.render(
          request,
          reply,
          requestId,
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
      return screen.answer(request, reply, outcome, 'retried');
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
      return screen.answer(request, reply, outcome, 'voided');
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
      return screen.answer(request, reply, outcome, 'requeued');
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
    if (outcome.kind === 'changed') return screen.render(request, reply, requestId, REQUEST_CHANGED, 409);
    if (outcome.kind === 'done') {
      const edited = outcome.changedKeys.length === 0 ? 'none' : outcome.changedKeys.join(' ');
      // Key names and internal ids only: the old and new values stay with the request.
      return screen.answer(request, reply, outcome, change.kind === 'patient' ? 'chosen' : 'edited', {
        targetType: 'request',
        targetIds: [requestId],
        detail: `REQUEST_DATA keys changed: ${edited}; routines run on: ${outcome.routineIds.join(' ')}${change.kind === 'patient' ? `; patient chosen: ${change.patientId}` : ''}`,
      });
    }
    return screen.answer(request, reply, outcome, 'edited');
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
        return screen.render(
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
        return screen.render(
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
      if (outcome.kind === 'changed') return screen.render(request, reply, requestId, REQUEST_CHANGED, 409);
      if (outcome.kind === 'done') {
        const edited = outcome.changedKeys.length === 0 ? 'none' : outcome.changedKeys.join(' ');
        return screen.answer(request, reply, outcome, 'dated', {
          targetType: 'request',
          targetIds: [requestId],
          detail: `REQUEST_DATA keys changed: ${edited}; routines run on: ${outcome.routineIds.join(' ')}`,
        });
      }
      return screen.answer(request, reply, outcome, 'dated');
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
