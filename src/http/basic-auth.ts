/**
 * The one guard of every Basic-protected route (reference 2.4): 401 `"401 Unauthorized"` with
 * `WWW-Authenticate: Basic realm="OpenEyes"` for missing, malformed, wrong or disabled credentials, then
 * 403 `"403 Forbidden"` when the user lacks the operation. Stateless: no session, no cookie. Repeated
 * failures from one address, or for one username, are answered 429 before any password is checked
 * (credentials verified before the brake engaged stay valid from the cache).
 */
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction, preHandlerHookHandler } from 'fastify';
import type { AppDeps } from '../deps.ts';
import { AppError } from '../errors.ts';
import type { Principal } from '../modules/user/index.ts';
import { createRateLimiter } from './rate-limit.ts';
import { sharedCountersFor } from './shared-counters.ts';
import { presentsCredentialsInsecurely } from './transport-security.ts';

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

/** Builds the guard factory for one app; failure counters live with the app. */
export function createBasicAuthGuard(deps: AppDeps): BasicAuthGuard {
  const limit = deps.config.authFailureLimitPerMinute;
  const shared = sharedCountersFor(deps);
  const failuresByAddress = createRateLimiter(limit, 60_000, { shared, name: 'auth_failure_ip' });
  const failuresByUsername = createRateLimiter(limit, 60_000, { shared, name: 'auth_failure_user' });

  /** The caller may proceed (undefined) or the refusal. */
  const authorize = (principal: Principal, options: GuardOptions): AppError | undefined => {
    if (deps.config.requireOprnLogin && !principal.authItems.has('OprnLogin')) return forbidden();
    if (options.operation !== undefined && !principal.authItems.has(options.operation)) return forbidden();
    return undefined;
  };

  async function verify(request: FastifyRequest): Promise<Principal> {
    const address = request.ip;
    const verification = await deps.authenticator.verify(request.headers.authorization, (username) => {
      const wait = Math.max(failuresByAddress.peek(address), failuresByUsername.peek(username.toLowerCase()));
      if (wait > 0) throw tooManyFailures(wait);
    });
    if (!verification.ok) {
      const waitAddress = failuresByAddress.hit(address);
      const waitUser =
        verification.username === undefined ? 0 : failuresByUsername.hit(verification.username.toLowerCase());
      request.log.info({ reason: verification.reason }, 'basic authentication failed');
      if (waitAddress > 0 || waitUser > 0) throw tooManyFailures(Math.max(waitAddress, waitUser));
      throw unauthorized();
    }
    return verification.principal;
  }

  // A callback-style hook, so that a cached credential (the common case) passes without a promise.
  return (options = {}) =>
    function basicAuthGuard(
      request: FastifyRequest,
      _reply: FastifyReply,
      done: HookHandlerDoneFunction,
    ): void {
      // REQUIRE_TLS (reference D10): credentials sent in clear are refused before any password check.
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
        proceed(cached);
        return;
      }
      verify(request).then(proceed, (error: unknown) => done(error as Error));
    };
}

function forbidden(): AppError {
  return new AppError('forbidden', '403 Forbidden');
}

function tooManyFailures(retryAfterSeconds: number): AppError {
  return new AppError('too_many_requests', 'Too Many Requests', {
    headers: { 'retry-after': String(retryAfterSeconds) },
  });
}
