/**
 * The one guard of every Basic-protected route, with OpenEyes's status texts: 401 `"401 Unauthorized"` with
 * `WWW-Authenticate: Basic realm="OpenEyes"` for missing, malformed, wrong or disabled credentials, then
 * 403 `"403 Forbidden"` when the user lacks the operation. Stateless: no session, no cookie. A header
 * not in the credential cache goes through the failed-login brake (`login-brake.ts`: 429 before any
 * password is checked). A cached credential passes without a password check, but only after the brake's
 * back-off and ceilings for its username and the client address (memory reads, nothing counted): a
 * throttled login gets 429 whatever the credential, so a guess cannot be confirmed through the cache.
 */
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction, preHandlerHookHandler } from 'fastify';
import type { AppDeps } from '../deps.ts';
import { AppError } from '../errors.ts';
import { parseBasicHeader } from './basic-header.ts';
import type { LoginAttempt } from './login-brake.ts';
import { beginLoginAttempt, checkLoginThrottle } from './login-brake.ts';
import { presentsCredentialsInsecurely } from './transport-security.ts';

// The authenticator's answers, taken from AppDeps: src/http sits below the modules and imports none.
type Verification = Awaited<ReturnType<AppDeps['authenticator']['verify']>>;
type Principal = Extract<Verification, { readonly ok: true }>['principal'];

declare module 'fastify' {
  interface FastifyRequest {
    /** The authenticated caller, set by the Basic guard. */
    principal?: Principal;
  }
}

export const BASIC_REALM = 'OpenEyes';

export interface GuardOptions {
  /** RBAC operation the caller must hold; omit for "any authenticated user". */
  readonly operation?: string;
}

export type BasicAuthGuard = (options?: GuardOptions) => preHandlerHookHandler;

export function unauthorized(): AppError {
  return new AppError('unauthorized', '401 Unauthorized', {
    headers: { 'www-authenticate': `Basic realm="${BASIC_REALM}"` },
  });
}

/** Builds the guard factory for one app; the failure brake (`login-brake.ts`) is the app's. */
export function createBasicAuthGuard(deps: AppDeps): BasicAuthGuard {
  /** The caller may proceed (undefined) or the refusal. */
  const authorize = (principal: Principal, options: GuardOptions): AppError | undefined => {
    if (deps.config.requireOprnLogin && !principal.authItems.has('OprnLogin')) return forbidden();
    if (options.operation !== undefined && !principal.authItems.has(options.operation)) return forbidden();
    return undefined;
  };

  async function verify(request: FastifyRequest): Promise<Principal> {
    // The brake first: the authenticator may still answer from its cache (after a revocation poll) or
    // share the outcome of a check already under way for the same header.
    const presented = parseBasicHeader(request.headers.authorization)?.username;
    const refusal = presented === undefined ? undefined : checkLoginThrottle(deps, presented, request.ip);
    if (refusal !== undefined) throw refusal;
    // Set only when this request runs the check (a request presenting the same header meanwhile shares
    // its outcome and counts nothing).
    let attempt: LoginAttempt | undefined;
    let verification: Verification;
    try {
      verification = await deps.authenticator.verify(request.headers.authorization, async (username) => {
        attempt = await beginLoginAttempt(deps, username, request.ip);
      });
    } catch (error) {
      attempt?.abandon();
      throw error;
    }
    if (verification.ok) {
      attempt?.succeed();
      return verification.principal;
    }
    attempt?.fail();
    request.log.info({ reason: verification.reason }, 'basic authentication failed');
    throw unauthorized();
  }

  // A callback-style hook, so that a cached credential (the common case) passes without a promise.
  return (options = {}) =>
    function basicAuthGuard(
      request: FastifyRequest,
      _reply: FastifyReply,
      done: HookHandlerDoneFunction,
    ): void {
      // REQUIRE_TLS: Basic credentials never travel in clear; they are refused before any password check.
      if (presentsCredentialsInsecurely(deps.config, request)) {
        request.log.info({ reason: 'plain_http' }, 'basic authentication refused');
        done(unauthorized());
        return;
      }
      const proceed = (principal: Principal) => {
        const refusal = authorize(principal, options);
        if (refusal === undefined) request.principal = principal;
        done(refusal);
      };
      const cached = deps.authenticator.cached(request.headers.authorization);
      if (cached !== undefined) {
        const refusal = checkLoginThrottle(deps, cached.username, request.ip);
        if (refusal === undefined) proceed(cached.principal);
        else done(refusal);
        return;
      }
      verify(request).then(proceed, (error: unknown) => done(error as Error));
    };
}

function forbidden(): AppError {
  return new AppError('forbidden', '403 Forbidden');
}
