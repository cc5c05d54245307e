/**
 * What the server does with bytes that do not parse as HTTP (Node's `clientError`), replacing Fastify's
 * default, which writes a 400 at once and destroys the connection whatever is still in flight on it.
 *
 * A client may pipeline a complete request and then garbage on one keep-alive connection. The complete
 * request has already reached its route and may be stored; answering the garbage first would hand the
 * client a 400 for a request that was written. So when every request still being answered on the
 * connection was received in full, their answers go out first, the last one says `Connection: close`,
 * and the connection is closed after it: the garbage gets no answer of its own.
 *
 * Otherwise the error belongs to the request being received (a malformed body, a request timeout, a body
 * that fell behind the minimum receive rate (`receive-rate.ts`), or a client that hung up mid-body: `HPE_INVALID_EOF_STATE`, which the overload tests rely on): that request
 * can never complete, so the connection is refused and destroyed at once, as before. Destroying it is
 * what closes the pending response and frees what the request holds (its heavy-request slot); a handler
 * that only waited for that response would keep the half-closed socket, and the slot, forever. When
 * requests received in full precede the broken one, they are answered first and the connection is
 * closed after the last of them.
 *
 * The error's raw packet is never logged: it holds the client's bytes, which may be patient data.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { ConnectionError, FastifyBaseLogger, FastifyInstance } from 'fastify';
import { DEFAULT_MESSAGES } from '../errors.ts';

/** The responses of each connection not yet closed, in the order their requests arrived. */
const pendingAnswers = new WeakMap<Socket, Set<ServerResponse>>();
/** Connections whose closing already waits for their pending answers (`clientError` may fire again). */
const closingAfterAnswers = new WeakSet<Socket>();

/**
 * Records each request's response until it closes, so that `answerClientError` knows what is still owed
 * on a connection (Node keeps pipelined responses in a private queue).
 */
export function trackPendingAnswers(server: Server): void {
  server.prependListener('request', (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket;
    let pending = pendingAnswers.get(socket);
    if (pending === undefined) {
      pending = new Set();
      pendingAnswers.set(socket, pending);
    }
    pending.add(response);
    // One shared listener, no closure per request: a response closes once.
    response.on('close', forgetAnswer);
  });
}

/** The `close` listener of a tracked response: it is no longer owed on its connection. */
function forgetAnswer(this: ServerResponse): void {
  pendingAnswers.get(this.req.socket)?.delete(this);
}

/** Fastify's `clientErrorHandler` (called with the instance as `this`). */
export function answerClientError(this: FastifyInstance, error: ConnectionError, socket: Socket): void {
  refuseConnection(this.log, error.code, socket);
}

/**
 * Ends a connection whose current request can never complete (`code` says why: a parse error, or
 * `ERR_HTTP_REQUEST_TIMEOUT` for a request that arrives too slowly), answering first what is owed on it.
 */
export function refuseConnection(log: Pick<FastifyBaseLogger, 'debug'>, code: string, socket: Socket): void {
  // A reset connection is already destroyed: there is no one to answer.
  if (code === 'ECONNRESET' || socket.destroyed || closingAfterAnswers.has(socket)) return;
  const pending = [...(pendingAnswers.get(socket) ?? [])];
  const received = pending.filter((response) => response.req.complete);
  log.debug({ code, pending: pending.length, received: received.length }, 'client error');
  const last = received.at(-1);
  if (last === undefined) {
    // Never write into an answer that has started: the client would read a corrupt response.
    if (socket.writable && !pending.some((response) => response.headersSent)) socket.write(refusal(code));
    socket.destroy();
    return;
  }
  closingAfterAnswers.add(socket);
  // Answers leave in request order, so the last one closing means all of them are out.
  if (!last.headersSent) last.shouldKeepAlive = false;
  last.once('close', () => closeSoon(socket));
}

/** Ends the connection once what was written has been flushed. */
function closeSoon(socket: Socket): void {
  if (socket.destroyed) return;
  if (socket.writableFinished || !socket.writable) socket.destroy();
  else socket.end(() => socket.destroy());
}

function refusal(code: string): string {
  const [status, body] =
    code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? ['408 Request Timeout', 'Request Timeout']
      : code === 'HPE_HEADER_OVERFLOW'
        ? ['431 Request Header Fields Too Large', 'Request Header Fields Too Large']
        : ['400 Bad Request', DEFAULT_MESSAGES.bad_request];
  const json = JSON.stringify(body);
  return (
    `HTTP/1.1 ${status}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(json)}\r\n` +
    `X-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n${json}`
  );
}
