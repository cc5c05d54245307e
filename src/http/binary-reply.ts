/**
 * The one renderer of binary responses: it sets every header (Content-Type, Content-Length,
 * Last-Modified, ETag, Cache-Control, Content-Transfer-Encoding, Content-Disposition), evaluates the conditional request
 * headers by RFC 9110 section 13 for GET and HEAD, and loads the bytes only when a 200 GET needs them.
 */
import type { ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';

/** What the client is told about a representation before any byte is read. */
export interface BinaryValidators {
  /** A quoted strong entity tag, such as `"abc"`. */
  readonly etag: string;
  /** Seconds precision; omitted from the headers when undefined. */
  readonly lastModified: Date | undefined;
  readonly cacheControl: string;
}

export interface BinaryRepresentation extends BinaryValidators {
  readonly contentType: string;
  /** Content-Length of a HEAD; a GET always sends the length of the bytes it sends. */
  readonly sizeBytes: number;
}

// --- HTTP dates (RFC 9110 5.6.7) ------------------------------------------------------------------

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const IMF_FIXDATE =
  /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), (\d{2}) ([A-Z][a-z]{2}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const RFC_850 =
  /^(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), (\d{2})-([A-Z][a-z]{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
const ASCTIME = /^(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun) ([A-Z][a-z]{2}) ([ \d]\d) (\d{2}):(\d{2}):(\d{2}) (\d{4})$/;

/**
 * Parses an HTTP-date in any of the three forms a recipient must accept (IMF-fixdate, RFC 850,
 * asctime); undefined for anything else, including impossible dates such as 31 Feb.
 */
export function parseHttpDate(value: string): Date | undefined {
  const text = value.trim();
  let parts: [year: number, month: string, day: number, h: number, m: number, s: number] | undefined;
  let match = IMF_FIXDATE.exec(text);
  if (match !== null) {
    parts = [
      Number(match[3]),
      match[2]!,
      Number(match[1]),
      Number(match[4]),
      Number(match[5]),
      Number(match[6]),
    ];
  } else if ((match = RFC_850.exec(text)) !== null) {
    // RFC 9110 5.6.7: a two-digit year more than 50 years in the future means the past century.
    const twoDigit = Number(match[3]);
    const thisYear = new Date().getUTCFullYear();
    let year = Math.floor(thisYear / 100) * 100 + twoDigit;
    if (year > thisYear + 50) year -= 100;
    parts = [year, match[2]!, Number(match[1]), Number(match[4]), Number(match[5]), Number(match[6])];
  } else if ((match = ASCTIME.exec(text)) !== null) {
    parts = [
      Number(match[6]),
      match[1]!,
      Number(match[2]!.trim()),
      Number(match[3]),
      Number(match[4]),
      Number(match[5]),
    ];
  }
  if (parts === undefined) return undefined;
  const [year, monthName, day, hours, minutes, seconds] = parts;
  const month = MONTHS.indexOf(monthName);
  if (month < 0 || hours > 23 || minutes > 59 || seconds > 60) return undefined;
  const time = Date.UTC(year, month, day, hours, minutes, Math.min(seconds, 59));
  const date = new Date(time);
  if (date.getUTCDate() !== day || date.getUTCMonth() !== month) return undefined;
  return date;
}

/** Formats a date as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`). */
export function formatHttpDate(date: Date): string {
  return date.toUTCString();
}

// --- Conditional requests (RFC 9110 13.1.2, 13.1.3, 13.2.2) ---------------------------------------

/** The entity tags of an `If-None-Match` value; `'*'` for the wildcard, undefined when malformed. */
export function parseEntityTagList(value: string): '*' | { tag: string; isWeak: boolean }[] | undefined {
  const text = value.trim();
  if (text === '*') return '*';
  const tags: { tag: string; isWeak: boolean }[] = [];
  // entity-tag = [ "W/" ] DQUOTE *etagc DQUOTE, with etagc = %x21 / %x23-7E / obs-text
  const item = /\s*(W\/)?("[\x21\x23-\x7e\x80-\xff]*")\s*(,|$)/y;
  let position = 0;
  while (position < text.length) {
    // Empty list elements (`a, , b`) are allowed by the list syntax (RFC 9110 5.6.1).
    const skip = /\s*,/y;
    skip.lastIndex = position;
    if (skip.exec(text) !== null) {
      position = skip.lastIndex;
      continue;
    }
    item.lastIndex = position;
    const match = item.exec(text);
    if (match === null) return undefined;
    tags.push({ tag: match[2]!, isWeak: match[1] !== undefined });
    position = item.lastIndex;
    if (match[3] === '') break;
  }
  return tags.length === 0 ? undefined : tags;
}

function headerValue(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

/**
 * True when a GET or HEAD of `validators` must be answered 304. `If-None-Match`, when present,
 * decides alone (weak comparison, as RFC 9110 13.1.2 requires for this header; a malformed value
 * matches nothing); otherwise `If-Modified-Since` gives 304 when it parses and the representation was
 * not modified after it. An unparseable date is ignored (200).
 */
export function isNotModified(request: FastifyRequest, validators: BinaryValidators): boolean {
  const ifNoneMatch = headerValue(request, 'if-none-match');
  if (ifNoneMatch !== undefined) {
    const tags = parseEntityTagList(ifNoneMatch);
    if (tags === undefined) return false;
    if (tags === '*') return true;
    // Weak comparison: opaque tags equal regardless of the W/ prefix.
    return tags.some((t) => t.tag === validators.etag);
  }
  const ifModifiedSince = headerValue(request, 'if-modified-since');
  if (ifModifiedSince === undefined || validators.lastModified === undefined) return false;
  const since = parseHttpDate(ifModifiedSince);
  if (since === undefined) return false;
  return validators.lastModified.getTime() <= since.getTime();
}

function setValidatorHeaders(reply: FastifyReply, validators: BinaryValidators): void {
  void reply.header('cache-control', validators.cacheControl);
  void reply.header('etag', validators.etag);
  if (validators.lastModified !== undefined)
    void reply.header('last-modified', formatHttpDate(validators.lastModified));
}

/** 304: no body and no Content-Length, with the same Cache-Control, ETag and Last-Modified as a 200. */
export function sendNotModified(reply: FastifyReply, validators: BinaryValidators): FastifyReply {
  setValidatorHeaders(reply, validators);
  return reply.code(304).send();
}

// --- Bodies whose memory the reply owns -------------------------------------------------------------

/** Smaller buffers are left to the garbage collector (they may be slices of Node's shared pool). */
const RELEASE_MIN_BYTES = 64 * 1024;

/**
 * Frees the memory of `buffer` now (detaches its ArrayBuffer, so every view of it becomes empty) when
 * it is the whole of an ArrayBuffer of its own; otherwise leaves it to the garbage collector. Why: a
 * large body read from the database is garbage once sent, but V8 collects external memory only after
 * tens of megabytes of it have piled up, and the malloc heap that held it then stays fragmented and
 * resident: parallel large downloads would each leave their bodies behind.
 */
function releaseBuffer(buffer: Buffer): void {
  const arrayBuffer = buffer.buffer;
  if (
    arrayBuffer instanceof ArrayBuffer &&
    !arrayBuffer.detached &&
    !arrayBuffer.resizable &&
    buffer.byteOffset === 0 &&
    buffer.byteLength === arrayBuffer.byteLength &&
    buffer.byteLength >= RELEASE_MIN_BYTES
  )
    arrayBuffer.transfer(0);
}

/**
 * A response body read chunk by chunk from `chunks`, whose Buffers belong to it alone: each one's
 * memory is released as soon as the socket has taken it (the response has drained, or finished)
 * rather than when the garbage collector runs. Nothing else may hold on to a chunk once yielded.
 */
export function ownedChunkStream(chunks: AsyncIterable<Buffer>, response: ServerResponse): Readable {
  const iterator = chunks[Symbol.asyncIterator]();
  /** Chunks pushed and not yet released, in order; the last ones may still be in the stream's buffer. */
  let pushed: Buffer[] = [];
  const stream = new Readable({
    read() {
      iterator.next().then(
        (result) => {
          if (result.done === true) {
            stream.push(null);
          } else {
            pushed.push(result.value);
            stream.push(result.value);
          }
        },
        (error: unknown) => stream.destroy(error as Error),
      );
    },
    destroy(error, callback) {
      // Stopped early (the client went away, or a write failed): the chunks may still be in a write
      // the socket is cancelling, so they are left to the garbage collector.
      pushed = [];
      const closing = iterator.return?.();
      if (closing === undefined) callback(error);
      else closing.then(() => callback(error), callback);
    },
  });
  // 'drain' (registered before the pipe adds its own, so this runs first): the response holds nothing
  // unsent, so every chunk handed to it is done with; chunks still in this stream's buffer are not.
  const releaseWritten = () => {
    if (response.writableLength !== 0) return;
    let unsentBytes = stream.readableLength;
    let keep = pushed.length;
    while (unsentBytes > 0 && keep > 0) unsentBytes -= pushed[--keep]!.length;
    for (const chunk of pushed.splice(0, keep)) releaseBuffer(chunk);
  };
  response.on('drain', releaseWritten);
  response.once('finish', () => {
    response.off('drain', releaseWritten);
    for (const chunk of pushed) releaseBuffer(chunk);
    pushed = [];
  });
  response.once('close', () => response.off('drain', releaseWritten));
  return stream;
}

/**
 * `inline` only for types a browser shows without running them (raster images and PDF); `attachment`
 * for everything else, so that stored HTML, XML, SVG or text is downloaded rather than rendered in the
 * service's origin, whatever type it was stored or asked for with.
 */
export function contentDispositionOf(contentType: string): 'inline' | 'attachment' {
  const type = (contentType.split(';')[0] ?? '').trim().toLowerCase();
  const isRenderedSafely =
    type === 'application/pdf' ||
    (type.startsWith('image/') && !type.includes('svg') && !type.includes('xml'));
  return isRenderedSafely ? 'inline' : 'attachment';
}

/**
 * 200 with every header of `representation`. `body` undefined sends headers only (HEAD), with
 * `representation.sizeBytes` as Content-Length, as do chunks (which must add up to exactly that many
 * bytes). A Buffer is written as is: no copy, no encoding. The body belongs to the reply: its memory
 * is released once sent (see {@link ownedChunkStream}), so the caller must not keep it.
 */
export function sendBinary(
  reply: FastifyReply,
  representation: BinaryRepresentation,
  body: Buffer | AsyncIterable<Buffer> | undefined,
): FastifyReply {
  setValidatorHeaders(reply, representation);
  void reply
    .code(200)
    .header('content-type', representation.contentType)
    .header('content-disposition', contentDispositionOf(representation.contentType))
    .header('content-transfer-encoding', 'binary')
    .header('x-content-type-options', 'nosniff')
    .header('content-length', String(Buffer.isBuffer(body) ? body.length : representation.sizeBytes));
  if (body === undefined) return reply.send();
  if (!Buffer.isBuffer(body)) return reply.send(ownedChunkStream(body, reply.raw));
  reply.raw.once('finish', () => releaseBuffer(body));
  return reply.send(body);
}
