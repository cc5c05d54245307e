/**
 * Request ids. Every request gets a server-generated UUID (`request.id`): it names the request in logs,
 * in the `X-Request-Id` answer header, in error references and in its audit row, and no client can
 * choose it or reuse it. A sane `X-Request-Id` sent by the client is kept as `request.clientRequestId`
 * (in the request's log lines and its audit row) so that a caller can still find its own calls.
 */
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';

declare module 'fastify' {
  interface FastifyRequest {
    /** The client's `X-Request-Id`, when it was sane (at most 64 of `[A-Za-z0-9_.:-]`). */
    clientRequestId?: string;
  }
}

const CLIENT_REQUEST_ID = /^[\w.:-]{1,64}$/;

/** Fastify's `genReqId`. */
export function generateRequestId(): string {
  return randomUUID();
}

/** Keeps the client's id (call before any other `onRequest` hook, so that every log line carries it). */
export function installClientRequestIds(app: FastifyInstance): void {
  app.addHook('onRequest', async (request) => {
    const incoming = request.headers['x-request-id'];
    if (typeof incoming !== 'string' || !CLIENT_REQUEST_ID.test(incoming)) return;
    request.clientRequestId = incoming;
    request.log = request.log.child({ clientRequestId: incoming });
  });
}
