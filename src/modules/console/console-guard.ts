/**
 * The console's guard: the signed session cookie, the user it signs in (re-read on every request, so that
 * a disabled account, a changed password or role, or a lost OprnLogin ends its sessions), the operation a screen needs (its 403
 * page names the roles of this database that grant it, and how) and the CSRF token of every POST. The pages take it from `console.routes.ts`, which builds it once per app.
 */
import type { FastifyReply, FastifyRequest, preHandlerAsyncHookHandler } from 'fastify';
import { findActivePrincipal } from '../user/index.ts';
import type { ConsoleContext, ConsoleUser } from './console-context.ts';
import { ConsolePageError, can, findRoleGrantHelp, textField } from './console-context.ts';

export const CONSOLE_PREFIX = '/console';
export const SESSION_COOKIE = 'cra_console';

/** A guard that requires a signed-in user, and `operation` when given; POSTs also need a valid CSRF token. */
export type ConsoleGuard = (operation?: string) => preHandlerAsyncHookHandler;

/** The session token of the request's cookie when its signature is valid. */
function sessionToken(request: FastifyRequest): string | undefined {
  const raw = request.cookies[SESSION_COOKIE];
  if (raw === undefined) return undefined;
  const unsigned = request.unsignCookie(raw);
  return unsigned.valid && unsigned.value !== null ? unsigned.value : undefined;
}

type CurrentUser = { kind: 'user'; user: ConsoleUser } | { kind: 'none' | 'expired' };

/** Whether every item of `signedIn` is still among `current` (a session from before the column keeps none). */
function keepsItems(signedIn: readonly string[] | null, current: readonly string[]): boolean {
  return signedIn !== null && signedIn.every((item) => current.includes(item));
}

/** Who the request's session cookie signs in, if anyone. */
export async function currentUser(ctx: ConsoleContext, request: FastifyRequest): Promise<CurrentUser> {
  const token = sessionToken(request);
  if (token === undefined) return { kind: 'none' };
  const lookup = await ctx.sessions.lookup(token);
  if (lookup.kind !== 'active') return { kind: lookup.kind };
  const principal = await findActivePrincipal(ctx.deps.database.db, lookup.session.userId, {
    hasUserActiveColumn: ctx.deps.database.schema.hasUserActiveColumn,
  });
  const isAllowed =
    principal !== undefined &&
    principal.credentialStamp === lookup.session.credentialStamp &&
    keepsItems(lookup.session.signedInItems, principal.assignedItems) &&
    (!ctx.deps.config.requireOprnLogin || principal.authItems.has('OprnLogin'));
  if (!isAllowed) {
    // A disabled account, a changed password (the user's credential stamp moved), a role revoked since
    // sign-in (whichever process made the change), or a lost OprnLogin ends the session at its next
    // request. A role granted meanwhile leaves it running: the guard reads the user's items anew anyway.
    await ctx.sessions.destroy(lookup.session.id);
    return { kind: 'expired' };
  }
  return {
    kind: 'user',
    user: { ...principal, sessionId: lookup.session.id, csrfSecret: lookup.session.csrfSecret },
  };
}

/** The guard factory of one console app. */
export function createGuard(ctx: ConsoleContext): ConsoleGuard {
  return (operation) =>
    async function consoleGuard(request: FastifyRequest, reply: FastifyReply) {
      const current = await currentUser(ctx, request);
      if (current.kind !== 'user') {
        if (request.method === 'GET' || request.method === 'HEAD') {
          const query = new URLSearchParams({ next: request.url });
          if (current.kind === 'expired') query.set('expired', '1');
          return reply.redirect(`${CONSOLE_PREFIX}/login?${query.toString()}`, 303);
        }
        // A form of an ended session: stale, refused.
        throw new ConsolePageError(
          403,
          'Session ended',
          'Your session has ended. Sign in again, then repeat the change.',
        );
      }
      request.consoleUser = current.user;
      if (operation !== undefined && !can(current.user, operation)) {
        throw new ConsolePageError(
          403,
          'Forbidden',
          `Your account does not have the operation ${operation} that this screen needs.`,
          {},
          await findRoleGrantHelp(ctx.deps, current.user, operation),
        );
      }
      if (request.method === 'POST' && !ctx.isValidCsrf(current.user, textField(request.body, '_csrf'))) {
        throw new ConsolePageError(
          403,
          'Form refused',
          'This form was not issued by your current session (it is stale or forged). Reload the page and try again.',
        );
      }
    };
}
