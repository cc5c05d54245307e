/**
 * The request list (as OpenEyes's request admin): requests newest first, filtered by overall status,
 * routine status and name, retried, request type, queue, a request detail and the time of creation (in
 * the site's zone), paged by key, each with its summary (source, matched patient, failure reason).
 */
import type { FastifyInstance } from 'fastify';
import type { RoutineStatus } from '../../db/schema.ts';
import { describePatients } from '../patient/index.ts';
import type { RequestListFilter } from '../request-queue/index.ts';
import {
  ROUTINE_STATUSES,
  listRequests,
  readQueueChoices,
  readRequestSummaries,
} from '../request-queue/index.ts';
import type { ConsoleContext } from './console-context.ts';
import { OPERATIONS, badRequestPage, consoleUrl, parseId, timeField, textField } from './console-context.ts';
import type { ConsoleGuard } from './console-guard.ts';

type Query = Record<string, string | string[] | undefined>;

function optionalText(query: Query, name: string, maxLength: number): string | undefined {
  const value = textField(query, name)?.trim();
  if (value === undefined || value === '') return undefined;
  if (value.length > maxLength) throw badRequestPage(`The filter "${name}" is too long.`);
  return value;
}

function optionalEntry<K extends string>(key: K, value: string | undefined): { [P in K]?: string } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: string };
}

/** The list filter of the query (400 for values that cannot be one) and the form's echo. */
function readFilter(
  ctx: ConsoleContext,
  query: Query,
): { filter: RequestListFilter; form: { from: string; to: string } } {
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

export function registerRequestListPage(
  app: FastifyInstance,
  ctx: ConsoleContext,
  guard: ConsoleGuard,
): void {
  const db = ctx.deps.database.db;
  const listed = { preHandler: guard(OPERATIONS.queue), config: { consoleAction: 'console.request.list' } };
  app.get<{ Querystring: Query }>('/requests', listed, async (request, reply) => {
    const { filter, form } = readFilter(ctx, request.query);
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
}
