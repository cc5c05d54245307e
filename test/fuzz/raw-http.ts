/**
 * A raw HTTP/1.1 client for the fuzz test: it writes the request bytes exactly as given (duplicated or
 * malformed headers, broken percent-encoding, odd methods), which fetch and node:http would normalise
 * away or refuse to send, and reads the answer until the server closes the connection.
 */
import net from 'node:net';

export interface RawRequest {
  readonly method: string;
  /** Path and query as they go on the request line (spaces and line breaks are escaped). */
  readonly target: string;
  /** Header lines in order; duplicates allowed. Host, Connection and the framing are added. */
  readonly headers: readonly (readonly [string, string])[];
  readonly body?: Buffer;
  /** Send the body with `Transfer-Encoding: chunked` instead of a Content-Length. */
  readonly isChunked?: boolean;
  /**
   * A framing fault: both Content-Length and chunked, two different Content-Lengths, or bytes after the
   * body (a second, garbage request on the connection).
   */
  readonly framing?: 'both' | 'double-length' | 'trailing-garbage';
}

export interface RawResponse {
  readonly status: number;
  /** Header names lower-cased; repeated headers joined with ", ". */
  readonly headers: Record<string, string>;
  readonly body: Buffer;
}

export type RawOutcome =
  | { readonly kind: 'response'; readonly response: RawResponse }
  /** The connection ended (reset) before any answer byte arrived. */
  | { readonly kind: 'no-response'; readonly error: string };

/** The request as bytes on the wire. */
export function serialise(request: RawRequest): Buffer {
  const lines = [
    `${request.method} ${request.target.replace(/[\s]/g, (c) => encodeURIComponent(c))} HTTP/1.1`,
    'Host: 127.0.0.1',
    'Connection: close',
  ];
  for (const [name, value] of request.headers) lines.push(`${name}: ${value.replace(/[\r\n]/g, ' ')}`);
  const body = request.body;
  let payload: Buffer = body ?? Buffer.alloc(0);
  if (body !== undefined) {
    if (request.isChunked === true) {
      lines.push('Transfer-Encoding: chunked');
      const chunks: Buffer[] = [];
      for (let at = 0; at < body.length; at += 4096) {
        const piece = body.subarray(at, at + 4096);
        chunks.push(Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n'));
      }
      chunks.push(Buffer.from('0\r\n\r\n'));
      payload = Buffer.concat(chunks);
      if (request.framing === 'both') lines.push(`Content-Length: ${body.length}`);
    } else {
      lines.push(`Content-Length: ${body.length}`);
      if (request.framing === 'double-length') lines.push(`Content-Length: ${body.length + 1}`);
    }
  }
  if (request.framing === 'trailing-garbage')
    payload = Buffer.concat([payload, Buffer.from('GARBAGE / HTTP/1.1\r\nX: \u0001\r\n\r\n')]);
  return Buffer.concat([Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'utf8'), payload]);
}

/** Sends `request` on a new connection to 127.0.0.1:`port`; rejects only when no answer comes in time. */
export function sendRaw(port: number, request: RawRequest, timeoutMs = 15_000): Promise<RawOutcome> {
  const bytes = serialise(request);
  return new Promise((resolve, reject) => {
    const received: Buffer[] = [];
    let lastError = '';
    const socket = net.connect({ port, host: '127.0.0.1' });
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    socket.on('error', (error: NodeJS.ErrnoException) => {
      lastError = error.code ?? error.message;
    });
    socket.on('close', () => {
      clearTimeout(timer);
      const all = Buffer.concat(received);
      const response = parseResponse(all);
      if (response === undefined) {
        if (all.length === 0) resolve({ kind: 'no-response', error: lastError || 'closed' });
        else
          reject(new Error(`unparseable answer: ${JSON.stringify(all.subarray(0, 200).toString('latin1'))}`));
      } else {
        resolve({ kind: 'response', response });
      }
    });
    socket.write(bytes);
  });
}

/** Parses the final (non-1xx) response of a connection's bytes; the body is whatever follows its head. */
function parseResponse(all: Buffer): RawResponse | undefined {
  let rest = all;
  for (;;) {
    const end = rest.indexOf('\r\n\r\n');
    if (end < 0) return undefined;
    const head = rest.subarray(0, end).toString('latin1').split('\r\n');
    const match = /^HTTP\/1\.[01] (\d{3})/.exec(head[0] ?? '');
    if (match === null) return undefined;
    const status = Number(match[1]);
    const body = rest.subarray(end + 4);
    if (status >= 100 && status < 200) {
      rest = body;
      continue;
    }
    const headers: Record<string, string> = {};
    for (const line of head.slice(1)) {
      const colon = line.indexOf(':');
      if (colon <= 0) continue;
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
    }
    return { status, headers, body: headers['transfer-encoding'] === 'chunked' ? dechunk(body) : body };
  }
}

function dechunk(body: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  while (at < body.length) {
    const lineEnd = body.indexOf('\r\n', at);
    if (lineEnd < 0) break;
    const size = parseInt(body.subarray(at, lineEnd).toString('latin1'), 16);
    if (!Number.isFinite(size) || size === 0) break;
    parts.push(body.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
  return Buffer.concat(parts);
}
