/**
 * The HL7 v2 listener (MLLP release 1) on `HL7_PORT`: the PAS's ADT and SIU feeds without Mirth. `@medplum/hl7`'s
 * `Hl7Connection` frames and parses each message on a socket of this server's own (so that the host,
 * the connection limit and the gate are the service's); `apply-message.ts` decides, applies and records
 * each message, and this file sends its acknowledgement.
 *
 * - With `HL7_TLS`, MLLP runs inside TLS (the server's certificate and key).
 * - Gate, before the library: at most `HL7_MAX_CONNECTIONS` connections, a connection silent for
 *   `HL7_IDLE_TIMEOUT_MS` is closed, and one whose unframed bytes exceed `HL7_MAX_MESSAGE_BYTES` or
 *   that sends more messages than it waits acknowledgements for is closed.
 * - Per connection, messages are answered one after the other, in the order received; the sender is
 *   checked against `HL7_ALLOWED_SENDERS` with the peer's address.
 * - What a message is answered (AR, AE, AA, a duplicate's first answer) and what it writes: `apply-message.ts`.
 */
import type { Hl7ErrorEvent, Hl7MessageEvent } from '@medplum/hl7';
import { Hl7Connection } from '@medplum/hl7';
import type { Hl7Message } from '@medplum/core';
import type { AddressInfo, Server, Socket } from 'node:net';
import { createServer } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import type { Hl7ApplierDeps } from './apply-message.ts';
import { createHl7Applier } from './apply-message.ts';
import { encodingOf } from './hl7-text.ts';

/** Messages one connection may send ahead of their acknowledgements (a PAS sends one and waits). */
const MAX_PENDING_PER_CONNECTION = 32;
const FS = 0x1c;

export interface Hl7Server {
  /** The port listened on (the one asked for, or the one the system chose for port 0). */
  readonly port: number;
  /** Stops accepting, lets the messages being answered finish, then closes every connection. */
  stop(timeoutMs?: number): Promise<void>;
}

/** The database, configuration, logger and audit trail the listener's messages are applied with. */
export type Hl7ServerDeps = Hl7ApplierDeps;

function normaliseAddress(address: string): string {
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}

/** Starts the listener on `HL7_PORT` (and `HL7_HOST`, else `HOST`); resolves once it listens. */
export async function startHl7Server(deps: Hl7ServerDeps): Promise<Hl7Server> {
  const { config, logger } = deps;
  const settings = config.hl7;
  if (settings.port === undefined) throw new Error('HL7_PORT is not set');
  const log = logger.child({ component: 'hl7' });
  const applier = createHl7Applier(deps);
  const sockets = new Set<Socket>();
  const inFlight = new Set<Promise<void>>();
  let isStopping = false;

  /** Answers one message on `connection`, its audit row committed before its acknowledgement. */
  async function serve(connection: Hl7Connection, raw: Hl7Message | undefined, address: string) {
    const result = await applier.apply(raw, { address });
    if (connection.isClosed()) return;
    connection.setEncoding(encodingOf(result.charset));
    try {
      connection.send(applier.ackOf(result));
    } finally {
      connection.setEncoding('latin1');
    }
  }

  function accept(socket: Socket): void {
    if (isStopping || sockets.size >= settings.maxConnections) {
      log.warn({ address: socket.remoteAddress }, 'HL7 connection refused: limit reached');
      socket.destroy();
      return;
    }
    sockets.add(socket);
    const address = normaliseAddress(socket.remoteAddress ?? '');
    socket.setTimeout(settings.idleTimeoutMs, () => socket.destroy());
    socket.on('close', () => sockets.delete(socket));
    // The gate: bytes of a frame not yet ended, bounded before the library buffers them.
    let unframedBytes = 0;
    socket.prependListener('data', (chunk: Buffer) => {
      const end = chunk.lastIndexOf(FS);
      unframedBytes = end === -1 ? unframedBytes + chunk.length : chunk.length - end - 1;
      if (unframedBytes > settings.maxMessageBytes) {
        log.warn({ address }, 'HL7 connection closed: message longer than HL7_MAX_MESSAGE_BYTES');
        socket.destroy();
      }
    });
    // Latin-1 keeps every byte: the character set MSH-18 declares is applied once MSH is read.
    const connection = new Hl7Connection(socket, 'latin1');
    let pending = 0;
    let chain = Promise.resolve();
    const enqueue = (raw: Hl7Message | undefined) => {
      if (socket.destroyed) return;
      pending += 1;
      if (pending > MAX_PENDING_PER_CONNECTION) {
        log.warn({ address }, 'HL7 connection closed: too many messages without waiting for answers');
        socket.destroy();
        return;
      }
      const job = chain.then(() => serve(connection, raw, address));
      chain = job
        .catch((error: unknown) => log.error({ err: error }, 'HL7 answer not sent'))
        .finally(() => {
          pending -= 1;
        });
      const tracked = chain.then(() => {
        inFlight.delete(tracked);
      });
      inFlight.add(tracked);
    };
    connection.addEventListener('message', (event: Hl7MessageEvent) => enqueue(event.message));
    connection.addEventListener('error', (event: Hl7ErrorEvent) => {
      // A frame that is not HL7 (the library's parse refuses it): AR. Socket errors end the connection.
      if (event.error.message === 'Invalid HL7 message') enqueue(undefined);
      else log.debug({ address, err: event.error.message }, 'HL7 connection error');
    });
  }

  const tls = config.tls;
  const server: Server =
    settings.isTls && tls !== undefined
      ? createTlsServer({ cert: tls.cert, key: tls.key, minVersion: 'TLSv1.2' }, accept)
      : createServer(accept);
  // Connections beyond the limit are refused by Node before a TLS handshake or a byte is read.
  server.maxConnections = settings.maxConnections;
  const host = settings.host ?? config.host;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(settings.port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  log.info({ port, host, tls: settings.isTls }, 'HL7 MLLP listener listening');

  return {
    port,
    async stop(timeoutMs = 10_000) {
      isStopping = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      const timer = setTimeout(() => {
        for (const socket of sockets) socket.destroy();
      }, timeoutMs);
      timer.unref();
      await Promise.all([...inFlight]);
      for (const socket of sockets) socket.destroy();
      await closed;
      clearTimeout(timer);
      log.info('HL7 MLLP listener stopped');
    },
  };
}
