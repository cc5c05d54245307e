/**
 * The minimum receive rate of request bodies. A body must arrive at `minBytesPerSecond` on average, with
 * `timeoutMs` of slack: a token bucket in time, where a request starts with `timeoutMs` of credit, each
 * byte received buys `1 / minBytesPerSecond` seconds, and the credit never exceeds `timeoutMs`. A body
 * whose credit runs out is cut: 408 on its connection (`refuseConnection`), which is then closed. A client
 * sending one byte every few seconds is thus cut after about `timeoutMs`, whatever the body's length; a
 * steady one at or above the rate never is. Node's own `requestTimeout` bounds the whole request besides.
 *
 * Time the server itself holds a body back does not count: while the request waits for a heavy-request
 * slot (`hold`), and while its bytes are not being read (the request's buffer is full, so Node has stopped
 * reading the socket: the handler or the parser is behind, not the client).
 *
 * Progress is read from the socket's byte count, so watching a body never reads it: the route's parser
 * (or @fastify/multipart, which reads the raw request itself) gets every byte.
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';

export interface ReceiveRateOptions {
  /** Slack: how far a body may fall behind the rate, in ms. */
  readonly timeoutMs: number;
  readonly minBytesPerSecond: number;
}

export interface BodyWatch {
  /** The server holds the body back (a slot wait): its time does not count until `resume`. */
  hold(): void;
  resume(): void;
  /** Stops watching (the body is complete, or the request is answered). */
  stop(): void;
}

/** Whether a request announces a body (chunked, or a Content-Length above 0). */
export function hasBody(headers: IncomingHttpHeaders): boolean {
  if (headers['transfer-encoding'] !== undefined) return true;
  const length = headers['content-length'];
  return length !== undefined && length !== '0';
}

/**
 * Watches the body of `raw` and calls `onSlow` once when it falls behind. Checks run on one timer per
 * body, at most every second, and stop when the body is complete or the connection closes.
 */
export function watchBody(raw: IncomingMessage, options: ReceiveRateOptions, onSlow: () => void): BodyWatch {
  const socket = raw.socket;
  const checkEveryMs = Math.max(10, Math.min(1000, Math.floor(options.timeoutMs / 4)));
  const msPerByte = 1000 / options.minBytesPerSecond;
  let bytesSeen = socket.bytesRead;
  let deadline = Date.now() + options.timeoutMs;
  let holds = 0;
  let timer: NodeJS.Timeout | undefined;

  const isHeldByServer = () => holds > 0 || raw.readableLength >= raw.readableHighWaterMark;
  const stop = () => {
    if (timer !== undefined) clearTimeout(timer);
    timer = undefined;
  };
  const check = () => {
    timer = undefined;
    if (raw.complete || socket.destroyed) return;
    const now = Date.now();
    const bytes = socket.bytesRead;
    deadline = isHeldByServer()
      ? Math.max(deadline, now + options.timeoutMs)
      : Math.min(now + options.timeoutMs, deadline + (bytes - bytesSeen) * msPerByte);
    bytesSeen = bytes;
    if (now >= deadline) {
      onSlow();
      return;
    }
    timer = setTimeout(check, Math.min(checkEveryMs, deadline - now));
    timer.unref();
  };
  timer = setTimeout(check, checkEveryMs);
  timer.unref();
  raw.once('close', stop);

  return {
    hold() {
      holds += 1;
    },
    resume() {
      holds = Math.max(0, holds - 1);
      if (holds === 0) {
        bytesSeen = socket.bytesRead;
        deadline = Math.max(deadline, Date.now() + options.timeoutMs);
      }
    },
    stop,
  };
}

/**
 * Resolves true once the body of `raw` is flowing: complete, or as many bytes buffered as Node reads ahead
 * before it waits for a reader (the request's high-water mark, 64 KiB). Resolves false if the request
 * closes first. Nothing is read: the bytes stay for the route's parser.
 */
export function waitForBodyStart(raw: IncomingMessage): Promise<boolean> {
  const length = Number(raw.headers['content-length']);
  const threshold = Math.min(Number.isFinite(length) ? length : Infinity, raw.readableHighWaterMark);
  const isStarted = () => raw.complete || raw.readableLength >= threshold;
  if (isStarted()) return Promise.resolve(true);
  if (raw.destroyed) return Promise.resolve(false);
  return new Promise((resolve) => {
    const finish = (isFlowing: boolean) => {
      raw.removeListener('readable', onReadable);
      raw.removeListener('close', onClose);
      resolve(isFlowing);
    };
    // A 'readable' listener only looks: without read() the bytes stay buffered, and once it is removed
    // the stream starts flowing for whoever reads it next (Node's readable state goes back to "no mode").
    const onReadable = () => {
      if (isStarted()) finish(true);
    };
    const onClose = () => finish(false);
    raw.on('readable', onReadable);
    raw.once('close', onClose);
  });
}
