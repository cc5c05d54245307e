/**
 * What every console page shares: the signed-in user (re-checked on each request), the operations the
 * screens need, CSRF tokens, page rendering with Eta (auto-escaped), HTML error pages, and small readers
 * of form and query values.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Tokens from '@fastify/csrf';
import { Eta } from 'eta';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { AttachmentService } from '../attachment/index.ts';
import type { PatientSearchService } from '../patient/index.ts';
import type { WaitingForPatient } from '../request-queue/index.ts';
import { describeWaitingDetails, maxTriesOf } from '../request-queue/index.ts';
import type { AppDeps } from '../../deps.ts';
import type { Principal } from '../user/index.ts';
import { findRolesGranting, REQUEST_ADMIN_OPERATION } from '../user/index.ts';
import type { ConsoleAssets } from './console-assets.ts';
import type { SessionStore } from './session-store.ts';
import type { SiteTime } from './site-time.ts';

/** The operations of the console's screens. */
export const OPERATIONS = {
  /** Request admin (OpenEyes's role `Edit Payload Processor` has this operation). */
  queue: REQUEST_ADMIN_OPERATION,
  /** Signature import log and attachments (the original's rule for its log viewer). */
  clinical: 'OprnViewClinical',
  /** The audit screen. */
  audit: 'OprnViewAuditLog',
} as const;

export interface ConsoleUser extends Principal {
  readonly sessionId: string;
  readonly csrfSecret: string;
}

/** What an audited console answer touched. */
export interface ConsoleAuditTarget {
  readonly targetType: string;
  readonly targetIds: readonly number[];
  /** The user, when the answer is not to a signed-in one (a successful sign-in). */
  readonly userId?: number;
  /** Short words the ids cannot say (key names, internal ids); never patient data. */
  readonly detail?: string;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The signed-in console user, set by the console's session guard. */
    consoleUser?: ConsoleUser;
    /** Set by a console handler: the records its answer touched, for the audit row. */
    consoleAudit?: ConsoleAuditTarget;
  }
  interface FastifyContextConfig {
    /** The audit action of a console route (its answers to signed-in users are audited). */
    consoleAction?: string;
  }
}

/** An answer given as an HTML page with a status (404, 403, 409, 422, ...). */
export class ConsolePageError extends Error {
  readonly statusCode: number;
  readonly heading: string;
  readonly headers: Readonly<Record<string, string>>;
  /** A 403 for a missing operation: the roles that grant it and how (`findRoleGrantHelp`). */
  readonly grants: readonly RoleGrantHelp[] | undefined;
  constructor(
    statusCode: number,
    heading: string,
    text: string,
    headers: Readonly<Record<string, string>> = {},
    grants?: readonly RoleGrantHelp[],
  ) {
    super(text);
    this.name = 'ConsolePageError';
    this.statusCode = statusCode;
    this.heading = heading;
    this.headers = headers;
    this.grants = grants;
  }
}

export function notFoundPage(what: string): ConsolePageError {
  return new ConsolePageError(404, 'Not found', `${what} does not exist.`);
}

export function badRequestPage(text: string): ConsolePageError {
  return new ConsolePageError(400, 'Bad request', text);
}

/** The longest time a filter form sends (`YYYY-MM-DDTHH:MM:SS` with some room). */
const TIME_FIELD_MAX_LENGTH = 30;

/**
 * The query field `name` of a filter form, a `datetime-local` value (or a date) in the site's zone, as
 * stored UTC text; undefined when absent or blank; a 400 page when it is not a date and time.
 */
export function timeField(ctx: ConsoleContext, query: unknown, name: string): string | undefined {
  const text = (textField(query, name) ?? '').trim();
  if (text === '') return undefined;
  if (text.length > TIME_FIELD_MAX_LENGTH) throw badRequestPage(`"${name}" is too long.`);
  const stored = ctx.siteTime.parseLocal(text);
  if (stored === undefined) throw badRequestPage(`"${name}" must be a date and time.`);
  return stored;
}

export interface Flash {
  readonly kind: 'ok' | 'warn' | 'error';
  readonly text: string;
}

export interface ConsoleContext {
  readonly deps: AppDeps;
  /** The process's attachment service (the API's). */
  readonly attachments: AttachmentService;
  /** The process's patient search (the API's). */
  readonly patients: PatientSearchService;
  readonly sessions: SessionStore;
  readonly siteTime: SiteTime;
  readonly assets: ConsoleAssets;
  /** A CSRF token for the forms of a page of `user`'s session. */
  csrfToken(user: ConsoleUser): string;
  /** Whether `token` was made for `user`'s session. */
  isValidCsrf(user: ConsoleUser, token: string | undefined): boolean;
  /** A login-form token and its check, bound to the pre-login cookie's secret. */
  loginCsrfToken(secret: string): string;
  isValidLoginCsrf(secret: string, token: string | undefined): boolean;
  newCsrfSecret(): string;
  /** Renders `view` inside the layout and sends it with `status`. */
  render(
    request: FastifyRequest,
    reply: FastifyReply,
    view: string,
    data: Record<string, unknown> & { title: string; nav?: string; flash?: Flash },
    status?: number,
  ): FastifyReply;
}

const VIEWS_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'views');

/**
 * RBAC items of OpenEyes that give the same right as a console operation an OpenEyes database has no
 * entry for: OpenEyes's own audit screen is guarded by the task `TaskViewAudit` (role `Audit`).
 */
const OPENEYES_EQUIVALENTS: Readonly<Record<string, readonly string[]>> = {
  [OPERATIONS.audit]: ['TaskViewAudit'],
};

export function can(user: Principal | undefined, operation: string): boolean {
  if (user === undefined) return false;
  if (user.authItems.has(operation)) return true;
  return (OPENEYES_EQUIVALENTS[operation] ?? []).some((item) => user.authItems.has(item));
}

/** One screen's role, and how an administrator grants it on this database. */
export interface RoleGrantHelp {
  readonly screen: string;
  /** The operation the screen checks. */
  readonly operation: string;
  /** The role to grant; null on an OpenEyes database where no role gives the operation. */
  readonly role: string | null;
  /** Every role of this OpenEyes database that gives the operation (empty on the service's own schema). */
  readonly roles: readonly string[];
  /** The command, SQL row or (no role) the docs section that says how to create one. */
  readonly how: string;
}

/** The docs section with the SQL that creates the audit role on an OpenEyes database without one. */
export const OPENEYES_AUDIT_ROLE_DOCS =
  'docs/OPERATIONS.md, "Operations console", "An OpenEyes database without the Audit role" (also in the README)';

/** Each screen, its operation, and its role on the service's own schema and OpenEyes's usual one. */
const SCREENS: readonly { screen: string; operation: string; ownRole: string; openEyesRole: string }[] = [
  {
    screen: 'Requests',
    operation: OPERATIONS.queue,
    ownRole: 'Edit Payload Processor',
    openEyesRole: 'Edit Payload Processor',
  },
  {
    screen: 'Signature imports and attachments',
    operation: OPERATIONS.clinical,
    ownRole: 'TaskViewClinical',
    openEyesRole: 'View clinical',
  },
  { screen: 'Audit log', operation: OPERATIONS.audit, ownRole: 'View Audit Log', openEyesRole: 'Audit' },
];

/**
 * The role of each console screen (or of the one that checks `operation`) and how to grant it to
 * `user`: the CLI command on the service's own schema (migration 0013 creates its items); on an OpenEyes
 * database, whose users the CLI does not manage, the roles that give the operation there (read from
 * `authitemchild`: OpenEyes's usual one first) and the `authassignment` row, or, when none does, where the
 * docs say how to create one.
 */
export async function findRoleGrantHelp(
  deps: AppDeps,
  user: Principal,
  operation?: string,
): Promise<RoleGrantHelp[]> {
  const schema = deps.database.schema.name;
  const shellWord = (text: string) => (/^[\w.@-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`);
  const help: RoleGrantHelp[] = [];
  for (const s of SCREENS) {
    if (operation !== undefined && s.operation !== operation) continue;
    if (schema !== 'openeyes') {
      const how = `npm run cli -- role grant ${shellWord(user.username)} ${shellWord(s.ownRole)}`;
      help.push({ screen: s.screen, operation: s.operation, role: s.ownRole, roles: [], how });
      continue;
    }
    const found = await findRolesGranting(deps.database.db, [
      s.operation,
      ...(OPENEYES_EQUIVALENTS[s.operation] ?? []),
    ]);
    const roles = found.includes(s.openEyesRole)
      ? [s.openEyesRole, ...found.filter((r) => r !== s.openEyesRole)]
      : found;
    const role = roles[0] ?? null;
    help.push({
      screen: s.screen,
      operation: s.operation,
      role,
      roles,
      how:
        role === null
          ? `No role of this database gives ${s.operation}. An administrator creates one with ${s.operation} as its child, then assigns it: ${
              s.operation === OPERATIONS.audit ? 'the SQL is in' : 'as the SQL for the audit screen in'
            } ${OPENEYES_AUDIT_ROLE_DOCS}.`
          : `INSERT INTO authassignment (itemname, userid) VALUES ('${role.replace(/'/g, "''")}', ${user.userId});`,
    });
  }
  return help;
}

export function createConsoleContext(options: {
  deps: AppDeps;
  attachments: AttachmentService;
  patients: PatientSearchService;
  sessions: SessionStore;
  siteTime: SiteTime;
  assets: ConsoleAssets;
}): ConsoleContext {
  const { siteTime } = options;
  const maxTries = maxTriesOf(options.deps.config.queueRetryBackoff);
  // Tokens carry their own salt; a session's secret never leaves the server.
  const tokens = Tokens();
  const eta = new Eta({ views: VIEWS_DIR, cache: true, autoEscape: true, autoTrim: [false, 'nl'] });
  const helpers = {
    time: (stored: string | null | undefined) => siteTime.format(stored),
    count: (n: number) => (n >= 100_000 ? 'at least 100,000' : n.toLocaleString('en-GB')),
    bytes: (n: number) =>
      n < 1024
        ? `${n} B`
        : n < 1024 * 1024
          ? `${(n / 1024).toFixed(1)} KiB`
          : `${(n / 1048576).toFixed(1)} MiB`,
    cut: (text: string) =>
      text.length > 20_000 ? `${text.slice(0, 20_000)}\n… (${text.length - 20_000} more characters)` : text,
    /** The waiting request's reason, try and next try (`request-queue`'s waiting rule), in the site's zone. */
    waitingDetails: (waiting: WaitingForPatient, reason?: string | null) =>
      describeWaitingDetails(reason === undefined ? waiting : { ...waiting, reason }, maxTries, (stored) =>
        siteTime.format(stored),
      ),
    overallLabel: (state: { status: string; routineName: string | null; tryCount: number | null }) =>
      state.routineName === null
        ? state.status
        : `${state.status} (${state.routineName}) (${state.tryCount})`,
  };

  const context: ConsoleContext = {
    ...options,
    csrfToken: (user) => tokens.create(user.csrfSecret),
    isValidCsrf: (user, token) => typeof token === 'string' && tokens.verify(user.csrfSecret, token),
    loginCsrfToken: (secret) => tokens.create(secret),
    isValidLoginCsrf: (secret, token) => typeof token === 'string' && tokens.verify(secret, token),
    newCsrfSecret: () => tokens.secretSync(),
    render(request, reply, view, data, status = 200) {
      const user = request.consoleUser;
      const page = eta.render(`./${view}`, {
        ...helpers,
        nav: '',
        timeZone: siteTime.timeZone,
        assets: options.assets.urls,
        user:
          user === undefined
            ? undefined
            : {
                username: user.username,
                can: {
                  queue: can(user, OPERATIONS.queue),
                  clinical: can(user, OPERATIONS.clinical),
                  audit: can(user, OPERATIONS.audit),
                },
                schema: options.deps.database.schema.name,
              },
        csrf: user === undefined ? '' : context.csrfToken(user),
        ...data,
      });
      return reply.code(status).header('content-type', 'text/html; charset=utf-8').send(page);
    },
  };
  return context;
}

/** A single-valued text field of a parsed form or query; a repeated field is bad input. */
export function textField(source: unknown, name: string): string | undefined {
  if (typeof source !== 'object' || source === null) return undefined;
  const value = (source as Record<string, unknown>)[name];
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw badRequestPage(`The field "${name}" was sent more than once.`);
  return value;
}

/** A positive integer path or query value that fits the id columns, else undefined. */
export function parseId(text: string | undefined): number | undefined {
  if (text === undefined || !/^[1-9][0-9]{0,9}$/.test(text)) return undefined;
  const id = Number(text);
  return id <= 2_147_483_647 ? id : undefined;
}

/** Builds a console URL with the non-empty query values. */
export function consoleUrl(pathname: string, query: Record<string, string | number | undefined>): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== undefined && value !== '') params.set(key, String(value));
  }
  const text = params.toString();
  return text === '' ? pathname : `${pathname}?${text}`;
}
