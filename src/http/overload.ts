/**
 * A cap on concurrent heavy requests: uploads and imports that buffer megabytes, hash images and hold a
 * database connection through a transaction, and reads of large attachment fields. Past the cap a heavy
 * request waits briefly (FIFO) for a slot; if none frees in time it is answered 503 `Service Unavailable`
 * with `Retry-After: 1`, in the route's contract shape, before a single body byte is read. Under a flood the
 * service thus keeps answering quickly (light routes are never held back) instead of running out of memory
 * or connections and collapsing.
 *
 * Which requests are heavy: a route may say `config: { heavy: true | false }`; otherwise the default list
 * below decides by method and URL, so that modules need not change. A slot is held from `onRequest` until
 * the handler has returned AND the response is closed (sent, streamed or aborted), whichever is later: a
 * client that hangs up cannot free a slot while its handler still works.
 */
import type { FastifyInstance, FastifyRequest, RouteOptions } from 'fastify';
import { AppError, DEFAULT_MESSAGES } from '../errors.ts';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Counts against MAX_CONCURRENT_HEAVY_REQUESTS; decided by the default list when omitted. */
    heavy?: boolean;
  }
  interface FastifyRequest {
    heavySlot?: HeavySlot;
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
  /** Heavy requests served at once; 0 disables the guard. */
  readonly maxConcurrent: number;
  /** How long a heavy request may wait for a slot, in ms. */
  readonly queueTimeoutMs: number;
}

/**
 * Installs the guard on `app` (before the modules are registered, so that its hooks reach their routes).
 * Returns the gate, whose counts are useful as metrics.
 */
export function installOverloadGuard(app: FastifyInstance, options: OverloadOptions): HeavyGate | undefined {
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

  app.addHook('onRequest', async (request, reply) => {
    if (!isHeavyRequest(request)) return;
    const abort = new AbortController();
    const onClose = () => abort.abort();
    reply.raw.once('close', onClose);
    const isGranted = await gate.acquire(options.queueTimeoutMs, abort.signal);
    reply.raw.removeListener('close', onClose);
    if (!isGranted) {
      // A client that hung up while waiting gets the same answer, to no one: its request must not run.
      if (!abort.signal.aborted)
        request.log.warn({ active: gate.active, waiting: gate.waiting }, 'heavy request refused: overload');
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
