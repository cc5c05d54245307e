/**
 * Records one audit row per answer of an audited route, from one app-level `onSend` hook: after the
 * handler (or the guard, or the error handler) has decided the answer and before its first byte leaves.
 * A route is audited when it declares `config.audit` (its action, read or write, console label); each is a
 * read or a write:
 * - a write's answer awaits its row's commit (group commit, `audit-trail.ts`), so a write is never
 *   answered when its audit row could be lost;
 * - a read's row goes to the read audit sink (`audit-sink.ts`, `AUDIT_READS=async`, the default) and the
 *   read is answered at once; the sink commits it within `AUDIT_FLUSH_MS`. With `AUDIT_READS=durable`
 *   reads take the write path too.
 * If the row cannot be written (or the sink refuses it: backlog or lag over its bound) the answer becomes
 * 503 (`Retry-After`) in the route's format instead (its JSON error shape, or the HTML page a route's
 * `renderRefusal` gives), and a streamed body is dropped unsent.
 *
 * Which calls are audited: every route that declares it (every Basic-guarded API route, the open
 * `sign/add`, the console's screens, whose answers to a caller without a session are not audited),
 * whatever the outcome: 2xx, refusals (401, 403), bad input (4xx), failures (5xx). Throttled answers
 * (429) are audited once per client address, action and minute (the first refusal, `detail` says so):
 * recording each of them would let an anonymous client write rows without bound, which is what the
 * throttle exists to stop, and a client reaches a throttle only after the calls it was allowed, each
 * audited. Not audited:
 * - the other 429s of that minute;
 * - 503 answers given before authentication (overload, database down): anonymous and unbounded;
 * - other methods on these URLs (405, preflights: routes without `config.audit`) and unknown URLs: no
 *   access decision is made.
 * They are visible in the metrics and the request log.
 *
 * What a row holds: action, user id and username (of an authenticated caller), target type and internal
 * ids, HTTP status, client address, the server-generated request id and the client's `X-Request-Id` if it
 * sent one (`src/http/request-id.ts`). Never names, dates of birth, identifiers, search terms, bodies or
 * claimed usernames (a 401's "username" may be a mistyped password). The action comes from the route
 * (so a refusal is audited before any handler runs); the targets from `request.audit`, which a handler
 * sets once it knows them, or else from the route's `targetOf` (its id query parameter).
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { LRUCache } from 'lru-cache';
import type { AppDeps } from '../../deps.ts';
import { AppError, DATABASE_RETRY_AFTER_SECONDS, DEFAULT_MESSAGES } from '../../errors.ts';
import { errorBody } from '../../http/error-handler.ts';
import { createAuditSink } from './audit-sink.ts';
import type { AuditEntry, AuditTrail } from './audit-trail.ts';

export type AuditTargetType = 'patient' | 'signature_import_log' | 'attachment_data' | 'request';

/** What a handler tells the audit trail about the records its call touched. */
export interface AuditAnnotation {
  readonly targetType: AuditTargetType;
  /** Internal ids only, in answer order (`[]` for none, e.g. a search that found nobody). */
  readonly targetIds: readonly number[];
}

/** Who made an audited call. */
export interface AuditActor {
  readonly userId: number;
  readonly username?: string;
}

/** The body of the 503 that replaces an answer whose audit row cannot be written. */
export interface AuditRefusal {
  readonly contentType: string;
  readonly body: string;
}

/**
 * What a route audits, declared on the route (`config.audit`). The audit hook, the console's action filter
 * and the test that every API route is audited all read it from the registered routes.
 */
export interface RouteAudit {
  readonly action: string;
  /** How the console's audit filter names the action (the action itself when omitted). */
  readonly label?: string;
  /**
   * A read discloses records and changes none: its row may be committed after the answer (the read
   * audit sink). A write's row is committed before its answer, in every mode.
   */
  readonly kind: 'read' | 'write';
  /** A read whose row is committed before its answer all the same (the console's screens). */
  readonly isDurable?: boolean;
  /** Whether answers to an unknown caller are audited (default true: refused credentials are). */
  readonly auditsAnonymous?: boolean;
  /** Targets known from the request itself (kept when the call is refused before its handler). */
  readonly targetOf?: (request: FastifyRequest) => AuditAnnotation | ConsoleTarget | undefined;
  /** The caller, when not the Basic guard's `request.principal` (the console's session user). */
  readonly actorOf?: (request: FastifyRequest) => AuditActor | undefined;
  /** The refusal in the route's own format (an HTML page); the JSON error body when omitted. */
  readonly renderRefusal?: (request: FastifyRequest) => AuditRefusal;
}

/** A target of a console answer (its own target types, such as `user`), with a note for the row. */
interface ConsoleTarget {
  readonly targetType: string;
  readonly targetIds: readonly number[];
  /** Short words the ids cannot say (key names, internal ids); never patient data. */
  readonly detail?: string;
}

/** One row of the table derived from the registered routes. */
export interface AuditedRoute {
  readonly method: string;
  readonly url: string;
  readonly action: string;
  readonly label: string;
  readonly kind: 'read' | 'write';
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by a handler of an audited route: the records the call touched. */
    audit?: AuditAnnotation;
  }
  interface FastifyContextConfig {
    /** What the route audits: every answer of the route records one row (see `audit-hook.ts`). */
    audit?: RouteAudit;
  }
  interface FastifyInstance {
    /** Every audited route and method, from the routes' `config.audit`, in registration order. */
    auditedRoutes?: readonly AuditedRoute[];
  }
}

const ID_PARAMETER = /^\d{1,15}$/;

/** Targets from the route's id query parameter `name` (a refused call keeps the id it asked for). */
export function idParameter(name: string, targetType: AuditTargetType) {
  return (request: FastifyRequest): AuditAnnotation | undefined => {
    const value = (request.query as Record<string, unknown> | undefined)?.[name];
    return typeof value === 'string' && ID_PARAMETER.test(value)
      ? { targetType, targetIds: [Number(value)] }
      : undefined;
  };
}

/** Headers that describe a representation; dropped when the answer is replaced by a 503. */
const REPRESENTATION_HEADERS = [
  'content-length',
  'content-range',
  'content-disposition',
  'content-encoding',
  'content-transfer-encoding',
  'accept-ranges',
  'etag',
  'last-modified',
];

/**
 * Installs the audit hook on `app` (call before the modules' routes are registered, at the root), and
 * the collector of the routes' `config.audit` (`app.auditedRoutes`).
 * Returns the trail, which is flushed when the app closes (and the read audit sink with it).
 */
export function installAuditTrail(app: FastifyInstance, deps: AppDeps, trail: AuditTrail): AuditTrail {
  const throttled = createThrottleLog();
  const { config } = deps;
  const sink =
    config.auditReads === 'async'
      ? createAuditSink(deps.database, {
          flushMs: config.auditFlushMs,
          maxBacklogRows: config.auditMaxBacklog,
          maxLagMs: config.auditMaxLagMs,
          log: app.log,
        })
      : undefined;
  if (sink !== undefined) app.decorate('auditSink', sink);

  // Read when asked, after every onRoute hook (a scope may add `config.audit` to its routes) has run.
  const seen: RouteOptions[] = [];
  app.addHook('onRoute', (route) => {
    seen.push(route);
  });
  app.decorate('auditedRoutes', {
    getter: (): AuditedRoute[] =>
      seen.flatMap((route) => {
        const audit = route.config?.audit;
        if (audit === undefined) return [];
        const methods = Array.isArray(route.method) ? route.method : [route.method];
        return methods.map((method) => ({
          method: method.toUpperCase(),
          url: route.url,
          action: audit.action,
          label: audit.label ?? audit.action,
          kind: audit.kind,
        }));
      }),
  });

  app.addHook('onSend', async (request, reply, payload) => {
    const route = request.routeOptions.config?.audit;
    if (route === undefined) return payload;
    const outcome = reply.statusCode;
    const known = route.actorOf?.(request) ?? request.principal;
    if (known === undefined && (outcome === 503 || route.auditsAnonymous === false)) return payload;
    if (outcome === 429 && !throttled.isFirstThisMinute(route.action, request.ip)) return payload;
    const target: AuditAnnotation | ConsoleTarget | undefined = request.audit ?? route.targetOf?.(request);
    const actor = known ?? (await verifiedActorOf(request, outcome));
    const detail =
      outcome === 429
        ? 'throttled: first refusal of this client this minute'
        : target !== undefined && 'detail' in target
          ? target.detail
          : undefined;
    const entry: AuditEntry = {
      action: route.action,
      userId: actor?.userId ?? null,
      username: actor?.username ?? null,
      ...(detail === undefined ? {} : { detail }),
      targetType: target?.targetType ?? null,
      targetIds: target?.targetIds ?? [],
      outcome,
      clientAddress: request.ip ?? null,
      requestId: request.id,
      clientRequestId: request.clientRequestId ?? null,
    };
    if (route.kind === 'read' && route.isDurable !== true && sink !== undefined) {
      // Refused (backlog or lag over its bound): logged and counted by the sink, not once per read.
      return sink.offer(entry) ? payload : refuseUnaudited(request, reply, payload, route);
    }
    try {
      await trail.record(entry);
    } catch (error) {
      request.log.error(
        { err: error, action: route.action, outcome },
        'audit row not written: answer refused',
      );
      return refuseUnaudited(request, reply, payload, route);
    }
    return payload;
  });
  app.addHook('onClose', async () => {
    await trail.flush();
    await sink?.close();
  });

  /**
   * The authenticated caller of a 403, which comes after a successful verification that the guard does
   * not keep (`request.principal` is set only on success); asking the authenticator again hits its cache,
   * so no password check and no query is repeated in the normal configuration.
   */
  async function verifiedActorOf(request: FastifyRequest, outcome: number): Promise<AuditActor | undefined> {
    const header = request.headers.authorization;
    if (outcome !== 403 || header === undefined) return undefined;
    try {
      const verification = await deps.authenticator.verify(header);
      return verification.ok ? verification.principal : undefined;
    } catch {
      return undefined;
    }
  }

  return trail;
}

/**
 * Which (action, client address) pairs have had a 429 audited in the current minute of the clock. Bounded:
 * a forgotten pair is at worst audited once more in its minute.
 */
function createThrottleLog(): { isFirstThisMinute(action: string, address: string): boolean } {
  const minuteOf = new LRUCache<string, number>({ max: 10_000 });
  return {
    isFirstThisMinute(action, address) {
      const key = `${action} ${address}`;
      const minute = Math.floor(Date.now() / 60_000);
      if (minuteOf.get(key) === minute) return false;
      minuteOf.set(key, minute);
      return true;
    },
  };
}

/** Replaces the answer by a 503 in the route's format: a call is never answered unaudited. */
function refuseUnaudited(
  request: FastifyRequest,
  reply: FastifyReply,
  payload: unknown,
  route: RouteAudit,
): string {
  if (isDestroyable(payload)) payload.destroy();
  for (const name of REPRESENTATION_HEADERS) reply.removeHeader(name);
  const refusal = route.renderRefusal?.(request) ?? jsonRefusal(request);
  void reply
    .code(503)
    .header('retry-after', String(DATABASE_RETRY_AFTER_SECONDS))
    .header('cache-control', 'no-store')
    .header('content-type', refusal.contentType);
  return refusal.body;
}

/** The API's refusal: the error body of the route's shape (JSON string or queue envelope). */
function jsonRefusal(request: FastifyRequest): AuditRefusal {
  const error = new AppError('unavailable', DEFAULT_MESSAGES.unavailable);
  const shape = request.routeOptions.config?.errorShape ?? 'string';
  return {
    contentType: 'application/json; charset=utf-8',
    body: JSON.stringify(errorBody(error, shape, request.id)),
  };
}

function isDestroyable(value: unknown): value is { destroy(): void } {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { destroy?: unknown }).destroy === 'function' &&
    !Buffer.isBuffer(value)
  );
}
