/**
 * The operations console at `/console/` (config `CONSOLE`): server-rendered pages for the support desk.
 * Everything is in one encapsulated scope with its own cookie and form parsers, HTML error pages, a
 * strict CSP and the audit of its routes (`consoleAction`); the screens call the other modules through their `index.ts`.
 *
 * Sign-in: a login form (CSRF-protected through a signed pre-login cookie), the Basic authenticator's
 * password check and the same failure brake (per address and per username, `AUTH_FAILURE_LIMIT_PER_MINUTE`),
 * then a database session (`session-store.ts`) in a signed `HttpOnly; SameSite=Strict` cookie, `Secure`
 * over TLS. Every request re-reads the session and the user's operations (a changed password or role
 * ends the session); every form carries a CSRF token of the session. Unknown ids answer 404 pages,
 * refused forms 403 pages.
 */
import fastifyCookie from '@fastify/cookie';
import formbody from '@fastify/formbody';
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../../errors.ts';
import { toAppError } from '../../http/error-handler.ts';
import type { ModuleOptions } from '../../http/module.ts';
import type { Logger } from '../../logger.ts';
import type { LoginAttempt } from '../../http/login-brake.ts';
import { beginLoginAttempt } from '../../http/login-brake.ts';
import { isHttpsRequest } from '../../http/transport-security.ts';
import type { AttachmentService } from '../attachment/index.ts';
import type { AuditTrail, RouteAudit } from '../audit/index.ts';
import type { PatientSearchService } from '../patient/index.ts';
import { readWorkerHealth } from '../request-queue/index.ts';
import type { Verification } from '../user/index.ts';
import { registerAttachmentPages } from './attachments.pages.ts';
import { registerAuditPages } from './audit.pages.ts';
import { registerBiometryLensPages } from './biometry-lenses.pages.ts';
import { loadConsoleAssets } from './console-assets.ts';
import type { ConsoleContext } from './console-context.ts';
import {
  ConsolePageError,
  OPERATIONS,
  can,
  createConsoleContext,
  findRoleGrantHelp,
  textField,
} from './console-context.ts';
import type { ConsoleGuard } from './console-guard.ts';
import { CONSOLE_PREFIX, SESSION_COOKIE, createGuard, currentUser } from './console-guard.ts';
import { registerPasMessagePages } from './pas-messages.pages.ts';
import { registerRequestActionPages } from './request-actions.pages.ts';
import { createRequestScreen } from './request-screen.ts';
import { registerRequestPages } from './request.pages.ts';
import { registerRequestListPage } from './requests.pages.ts';
import { loadCookieSecret, createSessionStore } from './session-store.ts';
import { registerSignaturePages } from './signatures.pages.ts';
import { createSiteTime } from './site-time.ts';

const LOGIN_COOKIE = 'cra_console_login';

/**
 * The console's CSP: scripts, styles and images from this origin only, no inline code, no framing, forms
 * posting only here, no plugins, no base URL changes.
 */
export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob:; connect-src 'self'; " +
  "form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/** The console's options: the module's, and the process's attachment service, audit trail and logger. */
export interface ConsoleRouteOptions extends ModuleOptions {
  readonly attachments: AttachmentService;
  readonly patients: PatientSearchService;
  /** The process's audit trail, for what the console applies as the HL7 listener would (PAS messages). */
  readonly auditTrail: AuditTrail;
  readonly logger: Logger;
}

export const consoleRoutes: FastifyPluginAsync<ConsoleRouteOptions> = async (
  app,
  { deps, attachments, patients, auditTrail, logger },
) => {
  const secret = deps.config.consoleSessionSecret ?? (await loadCookieSecret(deps.database));
  const sessions = createSessionStore(deps.database, {
    idleMinutes: deps.config.consoleIdleMinutes,
    sessionHours: deps.config.consoleSessionHours,
  });
  const ctx = createConsoleContext({
    deps,
    attachments,
    patients,
    sessions,
    siteTime: createSiteTime(deps.config.timeZone),
    assets: loadConsoleAssets(),
  });

  await app.register(
    async (scope) => {
      // The console is not part of the API: it stays out of the OpenAPI document. Its audited routes
      // name their action (`consoleAction`); the audit hook reads `config.audit`.
      scope.addHook('onRoute', (route) => {
        const action = route.config?.consoleAction;
        const method = Array.isArray(route.method) ? route.method[0]! : route.method;
        route.config = {
          ...route.config,
          openapi: false,
          ...(action === undefined ? {} : { audit: consoleAudit(action, method) }),
        };
      });
      await scope.register(fastifyCookie, { secret, hook: 'onRequest' });
      await scope.register(formbody, { bodyLimit: deps.config.limits.jsonBodyBytes });
      scope.addHook('onRequest', async (_request, reply) => {
        void reply.header('content-security-policy', CONSOLE_CSP);
      });
      installErrorPages(scope, ctx);
      const guard = createGuard(ctx);
      ctx.assets.register(scope);
      registerSessionRoutes(scope, ctx, guard);
      const requestScreen = createRequestScreen(ctx);
      registerRequestListPage(scope, ctx, guard);
      registerRequestPages(scope, ctx, guard, requestScreen);
      registerRequestActionPages(scope, ctx, guard, requestScreen);
      registerPasMessagePages(scope, ctx, guard, { auditTrail, logger });
      registerSignaturePages(scope, ctx, guard);
      registerAttachmentPages(scope, ctx, guard);
      registerAuditPages(scope, ctx, guard);
      registerBiometryLensPages(scope, ctx, guard);
    },
    { prefix: CONSOLE_PREFIX },
  );
};

function sessionCookieOptions(request: FastifyRequest) {
  return {
    path: CONSOLE_PREFIX,
    httpOnly: true,
    sameSite: 'strict' as const,
    secure: isHttpsRequest(request),
    signed: true,
  };
}

/** A path inside the console to return to after sign-in; anything else goes to the overview. */
function safeNext(next: string | undefined): string {
  if (next === undefined || !/^\/console(\/[\w\-./?=&%+]*)?$/.test(next) || next.includes('//'))
    return '/console/';
  return next;
}

function registerSessionRoutes(app: FastifyInstance, ctx: ConsoleContext, guard: ConsoleGuard): void {
  const { config } = ctx.deps;

  /** The pre-login CSRF secret from its signed cookie, or a new one (set on the reply). */
  const loginSecret = (
    request: FastifyRequest,
    reply: FastifyReply,
    isCreating: boolean,
  ): string | undefined => {
    const raw = request.cookies[LOGIN_COOKIE];
    const unsigned = raw === undefined ? undefined : request.unsignCookie(raw);
    if (unsigned?.valid === true && unsigned.value !== null) return unsigned.value;
    if (!isCreating) return undefined;
    const secret = ctx.newCsrfSecret();
    void reply.setCookie(LOGIN_COOKIE, secret, { ...sessionCookieOptions(request), maxAge: 3600 });
    return secret;
  };

  const renderLogin = (
    request: FastifyRequest,
    reply: FastifyReply,
    secret: string,
    values: { next: string; username: string; flash?: { kind: 'ok' | 'warn' | 'error'; text: string } },
    status = 200,
  ) =>
    ctx.render(
      request,
      reply,
      'login',
      {
        title: 'Sign in',
        nav: 'login',
        loginCsrf: ctx.loginCsrfToken(secret),
        next: values.next,
        username: values.username,
        ...(values.flash === undefined ? {} : { flash: values.flash }),
      },
      status,
    );

  app.get<{ Querystring: Record<string, string | string[] | undefined> }>(
    '/login',
    async (request, reply) => {
      const next = safeNext(textField(request.query, 'next'));
      const current = await currentUser(ctx, request);
      if (current.kind === 'user') return reply.redirect(next, 303);
      const secret = loginSecret(request, reply, true)!;
      const flash =
        textField(request.query, 'expired') === '1' || current.kind === 'expired'
          ? ({ kind: 'warn', text: 'Your session has ended. Sign in again.' } as const)
          : textField(request.query, 'signed_out') === '1'
            ? ({ kind: 'ok', text: 'You have signed out.' } as const)
            : undefined;
      return renderLogin(request, reply, secret, {
        next,
        username: '',
        ...(flash === undefined ? {} : { flash }),
      });
    },
  );

  app.post('/login', { config: { consoleAction: 'console.login' } }, async (request, reply) => {
    const secret = loginSecret(request, reply, false);
    if (secret === undefined || !ctx.isValidLoginCsrf(secret, textField(request.body, '_csrf'))) {
      throw new ConsolePageError(
        403,
        'Form refused',
        'This sign-in form has expired or was not issued by this console. Reload the page and sign in again.',
      );
    }
    const username = (textField(request.body, 'username') ?? '').trim();
    const password = textField(request.body, 'password') ?? '';
    const next = safeNext(textField(request.body, 'next'));
    // The Basic guard's brake (http/login-brake.ts): the same counts, limits and back-off, an attempt
    // counted from its start and refused (429) before any password check. The authenticator checks the
    // password every time, never from its cache: a throttled sign-in is refused even with the right
    // password, and the session keeps the credential stamp read with the password it checked (bcrypt,
    // the same timing for unknown users). A colon cannot be part of a username there, so such a name
    // can only fail.
    let attempt: LoginAttempt | undefined;
    let verification: Verification | undefined;
    try {
      verification =
        username === '' || password === '' || username.includes(':')
          ? undefined
          : await ctx.deps.authenticator.verifyNow(
              `Basic ${Buffer.from(`${username}:${password}`, 'utf8').toString('base64')}`,
              async (name) => {
                attempt = await beginLoginAttempt(ctx.deps, name, request.ip);
              },
            );
    } catch (error) {
      attempt?.abandon();
      if (error instanceof AppError && error.code === 'too_many_requests')
        throw tooManyFailures(Number(error.headers['retry-after'] ?? 1));
      throw error;
    }
    const principal = verification?.ok === true ? verification.principal : undefined;
    if (principal === undefined || (config.requireOprnLogin && !principal.authItems.has('OprnLogin'))) {
      if (verification?.ok === true) attempt?.succeed();
      else attempt?.fail();
      request.log.info(
        { reason: verification?.ok === false ? verification.reason : 'refused' },
        'console sign-in failed',
      );
      return renderLogin(
        request,
        reply,
        secret,
        { next, username, flash: { kind: 'error', text: 'Unknown username or wrong password.' } },
        401,
      );
    }
    attempt?.succeed();
    const token = await ctx.sessions.create({
      userId: principal.userId,
      csrfSecret: ctx.newCsrfSecret(),
      credentialStamp: principal.credentialStamp,
      assignedItems: principal.assignedItems,
    });
    request.consoleAudit = { targetType: 'user', targetIds: [principal.userId], userId: principal.userId };
    void reply.setCookie(SESSION_COOKIE, token, sessionCookieOptions(request));
    void reply.clearCookie(LOGIN_COOKIE, { path: CONSOLE_PREFIX });
    return reply.redirect(next, 303);
  });

  app.post(
    '/logout',
    { config: { consoleAction: 'console.logout' }, preHandler: guard() },
    async (request, reply) => {
      await ctx.sessions.destroy(request.consoleUser!.sessionId);
      void reply.clearCookie(SESSION_COOKIE, { path: CONSOLE_PREFIX });
      return reply.redirect(`${CONSOLE_PREFIX}/login?signed_out=1`, 303);
    },
  );

  app.get('/', { preHandler: guard() }, async (request, reply) => {
    const user = request.consoleUser!;
    const health = can(user, OPERATIONS.queue) ? await readWorkerHealth(ctx.deps.database.db) : undefined;
    const hasScreen = Object.values(OPERATIONS).some((operation) => can(user, operation));
    const grants = hasScreen ? [] : await findRoleGrantHelp(ctx.deps, user);
    return ctx.render(request, reply, 'home', { title: 'Overview', nav: 'home', health, grants });
  });
}

function tooManyFailures(waitSeconds: number): ConsolePageError {
  return new ConsolePageError(
    429,
    'Too many failed sign-ins',
    `Too many failed sign-ins from here or for this username. Wait ${waitSeconds} seconds, then try again.`,
    { 'retry-after': String(waitSeconds) },
  );
}

const ERROR_HEADINGS: Record<number, string> = {
  400: 'Bad request',
  403: 'Forbidden',
  404: 'Not found',
  405: 'Method not allowed',
  413: 'Too large',
  415: 'Unsupported form',
  422: 'Invalid input',
  429: 'Too many requests',
  500: 'Something went wrong',
  503: 'Service unavailable',
};

function installErrorPages(app: FastifyInstance, ctx: ConsoleContext): void {
  app.setErrorHandler(async (thrown, request, reply) => {
    if (thrown instanceof ConsolePageError) {
      for (const [name, value] of Object.entries(thrown.headers)) void reply.header(name, value);
      return ctx.render(
        request,
        reply,
        'error',
        { title: thrown.heading, heading: thrown.heading, text: thrown.message, grants: thrown.grants },
        thrown.statusCode,
      );
    }
    const error = toAppError(thrown);
    if (error.code === 'internal') request.log.error({ err: thrown }, 'unhandled console error');
    else if (error.statusCode >= 500) request.log.warn({ code: error.code }, error.message);
    for (const [name, value] of Object.entries(error.headers)) {
      if (name !== 'www-authenticate') void reply.header(name, value);
    }
    const status = error.statusCode;
    const heading = ERROR_HEADINGS[status] ?? 'Error';
    const text =
      error.code === 'internal'
        ? 'The console could not complete this request. Nothing more is known here; give the reference below to support.'
        : error.code === 'unavailable'
          ? 'The database is not reachable right now. Try again in a few seconds.'
          : error.message;
    return ctx.render(
      request,
      reply,
      'error',
      { title: heading, heading, text, ...(error.code === 'internal' ? { reference: request.id } : {}) },
      status,
    );
  });
  app.setNotFoundHandler(async (request, reply) =>
    ctx.render(
      request,
      reply,
      'error',
      { title: 'Not found', heading: 'Not found', text: 'There is no such page in the console.' },
      404,
    ),
  );
}

/**
 * The audit of a console route (its `consoleAction`): answers to a signed-in user, and every sign-in
 * attempt, committed before the answer leaves (reads too: a support user's look at records is audited at
 * once); an answer whose row cannot be written becomes a 503 page. The one audit hook (modules/audit)
 * records them, under the same rules as the API's.
 */
function consoleAudit(action: string, method: string): RouteAudit {
  return {
    action,
    label: `Console: ${action.replace(/^console\./, '').replaceAll('.', ' ')}`,
    kind: method === 'GET' || method === 'HEAD' ? 'read' : 'write',
    isDurable: true,
    auditsAnonymous: action === 'console.login',
    targetOf: (request) => request.consoleAudit,
    actorOf: (request) => {
      const userId = request.consoleAudit?.userId;
      return userId !== undefined ? { userId } : request.consoleUser;
    },
    renderRefusal: () => ({
      contentType: 'text/html; charset=utf-8',
      body:
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Service unavailable</title></head>' +
        '<body><main><h1>Service unavailable</h1><p>The audit log cannot be written right now, so nothing is shown. Try again in a few seconds.</p></main></body></html>',
    }),
  };
}
