/**
 * The audit screen: search the audit trail by user, patient, action (endpoint), outcome and time, newest
 * first, and export the selection as CSV (streamed, any size). Users are searched by username and shown
 * by username; patients by one of their identifiers or by `#<id>`.
 */
import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { formatDateTime, parseDateTime } from '../../db/database.ts';
import type { AuditKey, AuditSearchFilter, AuditedRoute } from '../audit/index.ts';
import { csvLine, readAuditSelection, searchAuditEvents } from '../audit/index.ts';
import { findPatientIdsByIdentifier } from '../patient/index.ts';
import { findUserIdsByUsername, findUsernames } from '../user/index.ts';
import type { ConsoleContext } from './console-context.ts';
import { OPERATIONS, badRequestPage, consoleUrl, textField, timeField } from './console-context.ts';
import type { ConsoleGuard } from './console-guard.ts';

type Query = Record<string, string | string[] | undefined>;

/** The actions the search offers, with their labels: every audited route's (the API's and the console's). */
function auditActionsOf(routes: readonly AuditedRoute[]): { action: string; label: string }[] {
  const byAction = new Map<string, string>();
  for (const route of routes) if (!byAction.has(route.action)) byAction.set(route.action, route.label);
  return [...byAction].map(([action, label]) => ({ action, label }));
}

const BEFORE = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})_(\d{1,18})$/;
const CSV_COLUMNS = [
  'id',
  'time',
  'time_utc',
  'user_id',
  'username',
  'action',
  'target_type',
  'target_ids',
  'outcome',
  'client_address',
  'request_id',
];

export function registerAuditPages(app: FastifyInstance, ctx: ConsoleContext, guard: ConsoleGuard): void {
  const db = ctx.deps.database.db;
  const guardAudit = guard(OPERATIONS.audit);

  /** The filter of the query (400 for values that cannot be one) and the values to echo in the form. */
  async function readFilter(
    query: Query,
  ): Promise<{ filter: AuditSearchFilter; form: Record<string, string> }> {
    const text = (name: string, max: number) => {
      const value = (textField(query, name) ?? '').trim();
      if (value.length > max) throw badRequestPage(`"${name}" is too long.`);
      return value;
    };
    const user = text('user', 40);
    const patient = text('patient', 64);
    const action = text('action', 64);
    const outcome = text('outcome', 3).toLowerCase();
    // Action names: dotted words, with hyphens (`console.request.patient-search`).
    if (action !== '' && !/^[\w.-]+$/.test(action)) throw badRequestPage('Unknown action.');
    if (outcome !== '' && !/^[1-5](\d\d|xx)$/.test(outcome))
      throw badRequestPage('The outcome must be a status such as 403 or a class such as 4xx.');
    const from = timeField(ctx, query, 'from');
    const to = timeField(ctx, query, 'to');
    let userIds: number[] | undefined;
    if (user !== '')
      userIds = /^#\d{1,9}$/.test(user) ? [Number(user.slice(1))] : await findUserIdsByUsername(db, user);
    let patientIds: number[] | undefined;
    if (patient !== '')
      patientIds = /^#\d{1,9}$/.test(patient)
        ? [Number(patient.slice(1))]
        : await findPatientIdsByIdentifier(db, patient);
    const filter: AuditSearchFilter = {
      ...(userIds === undefined ? {} : { userIds }),
      ...(patientIds === undefined ? {} : { patientIds }),
      ...(action === '' ? {} : { action }),
      ...(outcome === ''
        ? {}
        : {
            outcome: outcome.endsWith('xx')
              ? { min: Number(outcome[0]) * 100, max: Number(outcome[0]) * 100 + 99 }
              : { min: Number(outcome), max: Number(outcome) },
          }),
      ...(from === undefined ? {} : { from }),
      ...(to === undefined ? {} : { to }),
    };
    return {
      filter,
      form: {
        user,
        patient,
        action,
        outcome,
        from: ctx.siteTime.toLocalInput(from),
        to: ctx.siteTime.toLocalInput(to),
      },
    };
  }

  /** The query values that define the selection, as given (for links to other pages and the export). */
  const selectionOf = (query: Query) =>
    Object.fromEntries(
      ['user', 'patient', 'action', 'outcome', 'from', 'to'].map((name) => [name, textField(query, name)]),
    );

  app.get<{ Querystring: Query }>(
    '/audit',
    { preHandler: guardAudit, config: { consoleAction: 'console.audit.search' } },
    async (request, reply) => {
      const { filter, form } = await readFilter(request.query);
      const beforeText = textField(request.query, 'before');
      let before: AuditKey | undefined;
      if (beforeText !== undefined) {
        const match = BEFORE.exec(beforeText);
        if (match === null) throw badRequestPage('"before" is not a position in the audit log.');
        before = { eventTime: `${match[1]} ${match[2]}`, id: Number(match[3]) };
      }
      const page = await searchAuditEvents(db, filter, before === undefined ? {} : { before });
      const usernames = await findUsernames(
        db,
        page.rows.flatMap((row) => (row.user_id === null ? [] : [row.user_id])),
      );
      const selection = selectionOf(request.query);
      return ctx.render(request, reply, 'audit', {
        title: 'Audit log',
        nav: 'audit',
        form,
        actions: auditActionsOf(request.server.auditedRoutes ?? []),
        page,
        usernames,
        exportUrl: consoleUrl('/console/audit.csv', selection),
        firstUrl: before === undefined ? undefined : consoleUrl('/console/audit', selection),
        nextUrl:
          page.next === undefined
            ? undefined
            : consoleUrl('/console/audit', {
                ...selection,
                before: `${page.next.eventTime.replace(' ', 'T')}_${page.next.id}`,
              }),
      });
    },
  );

  app.get<{ Querystring: Query }>(
    '/audit.csv',
    { preHandler: guardAudit, config: { consoleAction: 'console.audit.export' } },
    async (request, reply) => {
      const { filter } = await readFilter(request.query);
      const siteTime = ctx.siteTime;
      async function* lines(): AsyncGenerator<string> {
        yield csvLine(CSV_COLUMNS);
        for await (const rows of readAuditSelection(db, filter)) {
          const usernames = await findUsernames(
            db,
            rows.flatMap((row) => (row.user_id === null ? [] : [row.user_id])),
          );
          let chunk = '';
          for (const row of rows) {
            chunk += csvLine([
              row.id,
              siteTime.format(row.event_time),
              parseDateTime(row.event_time)?.toISOString().slice(0, 19).concat('Z') ?? row.event_time,
              row.user_id,
              row.user_id === null ? null : (usernames.get(row.user_id) ?? null),
              row.action,
              row.target_type,
              row.target_ids,
              row.outcome,
              row.client_address,
              row.request_id,
            ]);
          }
          yield chunk;
        }
      }
      const stamp = formatDateTime(new Date()).replace(/[-: ]/g, '').slice(0, 14);
      return reply
        .code(200)
        .header('content-type', 'text/csv; charset=utf-8')
        .header('content-disposition', `attachment; filename="audit-${stamp}.csv"`)
        .send(Readable.from(lines()));
    },
  );
}
