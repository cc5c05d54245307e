/**
 * A `multipart/related` body (RFC 2046 5.1, RFC 2387) read part by part from its stream, each part's
 * content spooled as it arrives (`files/spool.ts`: memory up to 1 MiB, then a temporary file), so that a
 * STOW-RS instance never sits whole in memory until the caller loads it under the upload memory budget.
 * Written here because the multipart readers at hand either hold each part whole in memory
 * (`@remix-run/multipart-parser`) or read only `multipart/form-data` (busboy): finding the delimiter
 * with `Buffer.indexOf` over the bytes not yet passed on keeps the reading linear.
 */
import type { Readable } from 'node:stream';
import { PassThrough } from 'node:stream';
import { AppError } from '../../errors.ts';
import type { SpooledBytes } from '../../files/spool.ts';
import { SPOOL_THRESHOLD_BYTES, spoolStream } from '../../files/spool.ts';

/** Why the body cannot be read further. */
export class MultipartFramingError extends Error {
  readonly kind: 'malformed' | 'too-large' | 'too-many-parts';
  constructor(kind: 'malformed' | 'too-large' | 'too-many-parts', message: string) {
    super(message);
    this.name = 'MultipartFramingError';
    this.kind = kind;
  }
}

export interface SpooledPart {
  /** Header fields, names in lower case. */
  readonly headers: Readonly<Record<string, string>>;
  /** The content; the caller disposes of it. */
  readonly bytes: SpooledBytes;
}

export interface MultipartSpoolOptions {
  readonly boundary: string;
  /** Largest part content; a larger part stops the body (`too-large`). */
  readonly maxPartBytes: number;
  readonly maxParts: number;
  /** Largest header block of one part. */
  readonly maxHeaderBytes: number;
  /** The spool directory. */
  readonly dir: string;
}

const CRLF = Buffer.from('\r\n');
const HEADER_END = Buffer.from('\r\n\r\n');
/** Transport padding allowed after a delimiter (RFC 2046: linear white space). */
const MAX_PADDING_BYTES = 256;

/**
 * Yields each part of `body` once its content is complete and spooled. Throws a
 * {@link MultipartFramingError} when the body breaks its framing or a limit, and the stream's error when
 * the stream fails; a part not yet complete is removed then.
 */
export async function* spoolMultipartParts(
  body: Readable,
  options: MultipartSpoolOptions,
): AsyncGenerator<SpooledPart> {
  const delimiter = Buffer.from(`\r\n--${options.boundary}`);
  // The first delimiter may open the body without a line break before it.
  let buffer: Buffer = Buffer.from(CRLF);
  let state: 'preamble' | 'after-delimiter' | 'headers' | 'content' | 'done' = 'preamble';
  let parts = 0;
  let headers: Record<string, string> = {};
  let open: { input: PassThrough; result: Promise<SpooledBytes>; failure?: unknown } | undefined;

  /** Keeps only the last bytes that may begin a delimiter, copied so that the chunk can be freed. */
  const keepTail = (from: number) => {
    buffer = Buffer.from(buffer.subarray(Math.max(from, buffer.length - (delimiter.length - 1))));
  };
  const writeContent = async (bytes: Buffer) => {
    if (bytes.length === 0 || open === undefined) return;
    if (open.failure !== undefined || open.input.destroyed) throw tooLarge(open.failure);
    if (!open.input.write(bytes)) {
      const input = open.input;
      await new Promise<void>((resolve) => {
        const done = () => {
          input.off('drain', done);
          input.off('close', done);
          resolve();
        };
        input.on('drain', done);
        input.on('close', done);
      });
    }
    if (open.failure !== undefined) throw tooLarge(open.failure);
  };

  try {
    for await (const chunk of body as AsyncIterable<Buffer>) {
      buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
      for (;;) {
        if (state === 'done') {
          buffer = Buffer.alloc(0);
          break;
        }
        if (state === 'preamble') {
          const at = buffer.indexOf(delimiter);
          if (at === -1) {
            keepTail(0);
            break;
          }
          buffer = buffer.subarray(at + delimiter.length);
          state = 'after-delimiter';
        } else if (state === 'after-delimiter') {
          if (buffer.length < 2) break;
          if (buffer[0] === 0x2d && buffer[1] === 0x2d) {
            state = 'done';
            continue;
          }
          const lineEnd = buffer.indexOf(CRLF);
          if (lineEnd === -1) {
            if (buffer.length > MAX_PADDING_BYTES) throw malformed('no line break after a delimiter');
            break;
          }
          if (!/^[ \t]*$/.test(buffer.subarray(0, lineEnd).toString('latin1')))
            throw malformed('text after a delimiter');
          buffer = buffer.subarray(lineEnd + 2);
          parts += 1;
          if (parts > options.maxParts)
            throw new MultipartFramingError('too-many-parts', `more than ${options.maxParts} parts`);
          state = 'headers';
        } else if (state === 'headers') {
          let end: number;
          let skip: number;
          if (buffer.length >= 2 && buffer[0] === 0x0d && buffer[1] === 0x0a) {
            end = 0;
            skip = 2;
          } else {
            end = buffer.indexOf(HEADER_END);
            skip = 4;
          }
          if (end === -1) {
            if (buffer.length > options.maxHeaderBytes) throw malformed('part headers too large');
            break;
          }
          if (end > options.maxHeaderBytes) throw malformed('part headers too large');
          headers = parseHeaders(buffer.subarray(0, end).toString('latin1'));
          buffer = buffer.subarray(end + skip);
          const input = new PassThrough();
          const started: NonNullable<typeof open> = {
            input,
            result: spoolStream(input, {
              dir: options.dir,
              memoryThresholdBytes: SPOOL_THRESHOLD_BYTES,
              limitBytes: options.maxPartBytes,
            }),
          };
          started.result.catch((error: unknown) => (started.failure = error));
          open = started;
          state = 'content';
        } else {
          const at = buffer.indexOf(delimiter);
          if (at === -1) {
            const safe = buffer.length - (delimiter.length - 1);
            if (safe > 0) {
              const content = buffer.subarray(0, safe);
              keepTail(safe);
              await writeContent(content);
            }
            break;
          }
          await writeContent(buffer.subarray(0, at));
          buffer = buffer.subarray(at + delimiter.length);
          const finished = open!;
          open = undefined;
          finished.input.end();
          let bytes: SpooledBytes;
          try {
            bytes = await finished.result;
          } catch (error) {
            throw tooLarge(error);
          }
          state = 'after-delimiter';
          yield { headers, bytes };
        }
      }
    }
    if (state !== 'done') {
      // A part cut off by the end of the body: over the size limit already, or merely incomplete.
      if (open !== undefined) {
        const cut = open;
        open = undefined;
        cut.input.end();
        const bytes = await cut.result.catch((error: unknown) => {
          if (isTooLarge(error)) throw tooLarge(error);
          return undefined;
        });
        await bytes?.dispose();
      }
      throw malformed('the body ends before its close delimiter');
    }
  } finally {
    // A part cut off (the stream failed, a limit, or the caller stopped): its spool is removed.
    if (open !== undefined) {
      open.input.destroy();
      await open.result.catch(() => {});
    }
  }
}

function malformed(message: string): MultipartFramingError {
  return new MultipartFramingError('malformed', message);
}

/** The spool's failure: past the part limit (its 413 AppError), or the file could not be written. */
function tooLarge(error: unknown): Error {
  if (isTooLarge(error)) return new MultipartFramingError('too-large', 'a part is larger than the limit');
  return error instanceof Error ? error : new Error('spool failed');
}

function isTooLarge(error: unknown): boolean {
  return error instanceof AppError && error.code === 'payload_too_large';
}

/** `Name: value` lines (RFC 5322 header fields, no folding), names in lower case. */
function parseHeaders(block: string): Record<string, string> {
  const headers: Record<string, string> = {};
  if (block === '') return headers;
  for (const line of block.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon <= 0) throw malformed('a part header line without a name');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return headers;
}
