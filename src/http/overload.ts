/**
 * Overload and slow clients.
 *
 * A cap on concurrent heavy requests: uploads and imports that buffer megabytes, hash images and hold a
 * database connection through a transaction, and reads of large attachment fields. Past the cap a heavy
 * request waits briefly (FIFO) for a slot; if none frees in time it is answered 503 `Service Unavailable`
 * with `Retry-After: 1`, in the route's contract shape. Under a flood the service thus keeps answering
 * quickly (light routes are never held back) instead of running out of memory or connections.
 *
 * A heavy request with a body takes its slot only once the body is flowing (`waitForBodyStart`: complete,
 * or 64 KiB arrived), after the route's `onRequest` guards: a client trickling bytes never holds a slot,
 * and every body must keep up with the minimum receive rate (`receive-rate.ts`) or is cut with 408. A
 * heavy request without a body (a large attachment read) takes its slot in `onRequest`.
 *
 * A cap on requests in flight per client address (`request.ip`: the forwarded address behind trusted
 * proxies), every route counted: past it, 429 `Too Many Requests` with `Retry-After: 1` before anything
 * else runs, so that one address cannot take every slot or connection.
 *
 * Which requests are heavy: a route may say `config: { heavy: true | false }`; otherwise the default list
 * below decides by method and URL, so that modules need not change. A slot is held until the handler has
 * returned AND the response is closed (sent, streamed or aborted), whichever is later: a client that hangs
 * up cannot free a slot while its handler still works.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { AppError, DEFAULT_MESSAGES } from '../errors.ts';
import { refuseConnection } from './client-error.ts';
import type { BodyWatch, ReceiveRateOptions } from './receive-rate.ts';
import { hasBody, waitForBodyStart, watchBody } from './receive-rate.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Counts against MAX_CONCURRENT_HEAVY_REQUESTS; decided by the default list when omitted. */
    heavy?: boolean;
  }
  interface FastifyRequest {
    heavySlot?: HeavySlot;
    /** The receive-rate watch of the request's body, while it arrives. */
    bodyWatch?: BodyWatch;
  }
  interface FastifyInstance {
    /** The heavy-request gate (its counts are metrics); undefined when the cap is off. */
    heavyGate?: HeavyGate;
  }
}

/** Routes heavy by default, lower-case URL -> methods, with a per-request test where size depends on it. */
type HeavyTest = (request: FastifyRequest) => boolean;
const always: HeavyTest = () => true;
const DEFAULT_HEAVY_ROUTES = new Map<string, Readonly<Record<string, HeavyTest>>>([
  ['/api/v1/sign/add', { POST: always }],
  ['/api/sign/add', { POST: always }],
  ['/api/v1/request/queue/add', { POST: always, PUT: always }],
  ['/api/v1/attachmentdisplay/create', { POST: always }],
  // A thumbnail is small; the default field and blob_data / text_data may be hundreds of megabytes.
  ['/api/v1/attachmentdisplay/view', { GET: (request) => !isThumbnailRead(request) }],
]);

function isThumbnailRead(request: FastifyRequest): boolean {
  const field = (request.query as Record<string, unknown> | undefined)?.attachment;
  return typeof field === 'string' && field.startsWith('thumbnail_');
}

/** Whether `request` counts against the cap. */
export function isHeavyRequest(request: FastifyRequest): boolean {
  const declared = request.routeOptions.config?.heavy;
  if (declared !== undefined) return declared;
  const url = request.routeOptions.url;
  if (url === undefined) return false;
  return DEFAULT_HEAVY_ROUTES.get(url.toLowerCase())?.[request.method]?.(request) ?? false;
}

function mayBeHeavy(route: RouteOptions): boolean {
  if (route.config?.heavy !== undefined) return route.config.heavy;
  return DEFAULT_HEAVY_ROUTES.has(route.url.toLowerCase());
}

export interface HeavyGate {
  /** Slots in use. */
  readonly active: number;
  /** Requests waiting for a slot. */
  readonly waiting: number;
  /** Takes a slot, waiting up to `timeoutMs`; false when none freed in time or `signal` aborted. */
  acquire(timeoutMs: number, signal?: AbortSignal): Promise<boolean>;
  release(): void;
}

/** A counting semaphore of `limit` slots with a FIFO wait list. */
export function createHeavyGate(limit: number): HeavyGate {
  let active = 0;
  const waiters = new Set<() => void>();
  return {
    get active() {
      return active;
    },
    get waiting() {
      return waiters.size;
    },
    acquire(timeoutMs, signal) {
      if (active < limit && waiters.size === 0) {
        active += 1;
        return Promise.resolve(true);
      }
      if (timeoutMs <= 0 || signal?.aborted === true) return Promise.resolve(false);
      return new Promise((resolve) => {
        const give = (isGranted: boolean) => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          waiters.delete(grant);
          resolve(isGranted);
        };
        // `release` hands its slot over without decrementing: `active` already counts it.
        const grant = () => give(true);
        const onAbort = () => give(false);
        const timer = setTimeout(onAbort, timeoutMs);
        signal?.addEventListener('abort', onAbort, { once: true });
        waiters.add(grant);
      });
    },
    release() {
      const next = waiters.values().next();
      if (!next.done) next.value();
      else active = Math.max(0, active - 1);
    },
  };
}

/** The slot of one heavy request, released once its handler is done and its response closed. */
export interface HeavySlot {
  isHandlerRunning: boolean;
  isClosed: boolean;
  isReleased: boolean;
  readonly release: () => void;
}

export interface OverloadOptions {
  /** Heavy requests served at once; 0 disables the slots. */
  readonly maxConcurrent: number;
  /** How long a heavy request may wait for a slot, in ms. */
  readonly queueTimeoutMs: number;
  /** Requests in flight per client address; 0 disables the cap. */
  readonly maxPerClient: number;
  /** The minimum receive rate of every request body. */
  readonly receiveRate: ReceiveRateOptions;
}

/**
 * Installs the guards on `app` (before the modules are registered, so that their hooks reach the routes).
 * Returns the heavy-request gate, whose counts are useful as metrics (undefined when slots are off).
 */
export function installOverloadGuard(app: FastifyInstance, options: OverloadOptions): HeavyGate | undefined {
  installClientCap(app, options.maxPerClient);
  app.addHook('onRequest', async (request) => {
    if (!hasBody(request.headers)) return;
    const raw = request.raw;
    const watch = watchBody(raw, options.receiveRate, () => {
      request.log.info({ reason: 'body_too_slow' }, 'request refused: body arrives too slowly');
      refuseConnection(request.log, 'ERR_HTTP_REQUEST_TIMEOUT', raw.socket);
    });
    request.bodyWatch = watch;
  });
  app.addHook('onResponse', async (request) => request.bodyWatch?.stop());
  if (options.maxConcurrent <= 0) return undefined;
  const gate = createHeavyGate(options.maxConcurrent);
  app.decorate('heavyGate', gate);

  const settle = (slot: HeavySlot) => {
    if (slot.isReleased || slot.isHandlerRunning || !slot.isClosed) return;
    slot.isReleased = true;
    slot.release();
  };

  app.addHook('onRoute', (route) => {
    if (!mayBeHeavy(route)) return;
    const handler = route.handler;
    route.handler = async function heavyHandler(this: FastifyInstance, request, reply) {
      const slot = request.heavySlot;
      if (slot !== undefined) slot.isHandlerRunning = true;
      try {
        return await handler.call(this, request, reply);
      } finally {
        if (slot !== undefined) {
          slot.isHandlerRunning = false;
          settle(slot);
        }
      }
    };
  });

  /** Takes a slot for `request` or throws the 503; the slot is released as the header comment says. */
  async function takeSlot(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const abort = new AbortController();
    const onClose = () => abort.abort();
    reply.raw.once('close', onClose);
    request.bodyWatch?.hold();
    const isGranted = await gate.acquire(options.queueTimeoutMs, abort.signal);
    request.bodyWatch?.resume();
    reply.raw.removeListener('close', onClose);
    if (!isGranted) {
      // A client that hung up while waiting gets the same answer, to no one: its request must not run.
      if (!abort.signal.aborted)
        request.log.warn({ active: gate.active, waiting: gate.waiting }, 'heavy request refused: overload');
      if (request.bodyWatch !== undefined) void reply.header('connection', 'close');
      throw new AppError('unavailable', DEFAULT_MESSAGES.unavailable, { headers: { 'retry-after': '1' } });
    }
    const slot: HeavySlot = {
      isHandlerRunning: false,
      isClosed: false,
      isReleased: false,
      release: () => gate.release(),
    };
    request.heavySlot = slot;
    const socket = request.raw.socket as { destroyed?: boolean } | null;
    if (abort.signal.aborted || socket === null || socket.destroyed === true) {
      slot.isClosed = true;
      settle(slot);
      return;
    }
    reply.raw.once('close', () => {
      slot.isClosed = true;
      settle(slot);
    });
  }

  app.addHook('onRequest', async (request, reply) => {
    if (request.bodyWatch === undefined && isHeavyRequest(request)) await takeSlot(request, reply);
  });
  app.addHook('preParsing', async (request, reply, payload) => {
    if (request.bodyWatch === undefined || !isHeavyRequest(request)) return payload;
    if (!(await waitForBodyStart(request.raw))) {
      // The connection closed while the body was awaited (the client hung up, or it was too slow).
      throw new AppError('bad_request', DEFAULT_MESSAGES.bad_request);
    }
    await takeSlot(request, reply);
    return payload;
  });
  // A backstop for the 'close' event: a finished response is closed for the purpose of the cap.
  app.addHook('onResponse', async (request) => {
    const slot = request.heavySlot;
    if (slot === undefined) return;
    slot.isClosed = true;
    settle(slot);
  });
  return gate;
}

/** 429 for a request from an address that already has `limit` requests in flight; 0 = no cap. */
function installClientCap(app: FastifyInstance, limit: number): void {
  if (limit <= 0) return;
  const inFlight = new Map<string, number>();
  app.addHook('onRequest', async (request, reply) => {
    const address = request.ip;
    const count = inFlight.get(address) ?? 0;
    if (count >= limit) {
      request.log.info({ reason: 'client_in_flight_cap' }, 'request refused: too many in flight');
      // An unread body is not waited for: the connection closes after the answer.
      if (hasBody(request.headers)) void reply.header('connection', 'close');
      throw new AppError('too_many_requests', DEFAULT_MESSAGES.too_many_requests, {
        headers: { 'retry-after': '1' },
      });
    }
    inFlight.set(address, count + 1);
    reply.raw.once('close', () => {
      const left = (inFlight.get(address) ?? 1) - 1;
      if (left <= 0) inFlight.delete(address);
      else inFlight.set(address, left);
    });
  });
}
