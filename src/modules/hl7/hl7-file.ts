/**
 * The messages of a file of HL7 v2 messages (a site's backlog), read as a stream: either messages one
 * after the other, each starting with an `MSH` line, their segments ended by CR, LF or CR LF (blank lines
 * skipped); or MLLP frames (0x0b, the message, 0x1c 0x0d), as a channel's archive writes them. The format
 * is the first byte that is not white space: 0x0b for MLLP. Memory holds one message at a time and the
 * chunk being read; a message longer than `maxMessageBytes` is not held (its item has no bytes).
 *
 * The split is done here on bytes: `@medplum/hl7` frames only a socket's stream (its `Hl7Connection`),
 * and each message is then parsed by the library (`Hl7Message.parse`, in the applier).
 */
import { createReadStream } from 'node:fs';

export interface Hl7FileItem {
  /** The message's bytes (segments ended by CR, no framing); undefined for one too long or not HL7. */
  readonly bytes: Buffer | undefined;
  /** Why `bytes` is undefined. */
  readonly problem?: 'too-long' | 'not-hl7';
  /** 1-based line of the message's MSH (plain files), or of its 0x0b (MLLP). */
  readonly line: number;
  /** Bytes of the file read once this message is complete (for progress). */
  readonly bytesRead: number;
}

export type Hl7FileFormat = 'plain' | 'mllp';

const VT = 0x0b;
const FS = 0x1c;
const CR = 0x0d;
const LF = 0x0a;

const isBlank = (byte: number) => byte === 0x20 || byte === 0x09 || byte === CR || byte === LF;

/** Collects the parts of one message, up to a size. */
class MessageBuffer {
  private parts: Buffer[] = [];
  private size = 0;
  isTooLong = false;
  private readonly maxBytes: number;
  constructor(maxBytes: number) {
    this.maxBytes = maxBytes;
  }
  add(part: Buffer): void {
    if (this.isTooLong) return;
    this.size += part.length;
    if (this.size > this.maxBytes) {
      this.isTooLong = true;
      this.parts = [];
      return;
    }
    // A copy: the chunk it comes from is not kept.
    this.parts.push(Buffer.from(part));
  }
  get isEmpty(): boolean {
    return this.size === 0;
  }
  take(): Buffer | undefined {
    const bytes = this.isTooLong ? undefined : Buffer.concat(this.parts, this.size);
    this.parts = [];
    this.size = 0;
    this.isTooLong = false;
    return bytes;
  }
}

/** The messages of the file at `path`, in order. */
export async function* readHl7File(
  path: string,
  options: {
    readonly maxMessageBytes: number;
    /** Bytes read at a time (default 256 KiB). */ readonly chunkBytes?: number;
  },
): AsyncGenerator<Hl7FileItem> {
  const stream = createReadStream(path, { highWaterMark: options.chunkBytes ?? 256 * 1024 });
  let format: Hl7FileFormat | undefined;
  let bytesRead = 0;
  let line = 1;

  // Plain: the line being read (possibly across chunks), and the message it belongs to.
  const message = new MessageBuffer(options.maxMessageBytes);
  let messageLine = 0;
  /** Lines before the first MSH (or between MLLP frames) that are not blank: one "not HL7" item. */
  let garbageLine = 0;
  let partialLine = new MessageBuffer(options.maxMessageBytes);
  let wasCr = false;

  // MLLP: inside a frame or not.
  let isInFrame = false;
  let frameLine = 0;

  function* endPlainLine(): Generator<Hl7FileItem> {
    const text = partialLine.take();
    const isTooLong = text === undefined;
    partialLine = new MessageBuffer(options.maxMessageBytes);
    const thisLine = line;
    if (!isTooLong && text.every(isBlank)) return;
    const startsMessage =
      !isTooLong && text.length >= 4 && text[0] === 0x4d && text[1] === 0x53 && text[2] === 0x48;
    if (startsMessage) {
      if (garbageLine !== 0) {
        yield { bytes: undefined, problem: 'not-hl7', line: garbageLine, bytesRead };
        garbageLine = 0;
      }
      if (messageLine !== 0) yield* endMessage();
      messageLine = thisLine;
    } else if (messageLine === 0) {
      if (garbageLine === 0) garbageLine = thisLine;
      return;
    }
    if (isTooLong) message.isTooLong = true;
    else {
      if (!message.isEmpty) message.add(Buffer.of(CR));
      message.add(text);
    }
  }

  function* endMessage(): Generator<Hl7FileItem> {
    const isTooLong = message.isTooLong;
    const bytes = message.take();
    yield isTooLong
      ? { bytes: undefined, problem: 'too-long', line: messageLine, bytesRead }
      : { bytes, line: messageLine, bytesRead };
    messageLine = 0;
  }

  function* readPlain(chunk: Buffer): Generator<Hl7FileItem> {
    let start = 0;
    for (let i = 0; i < chunk.length; i += 1) {
      const byte = chunk[i]!;
      if (byte !== CR && byte !== LF) continue;
      if (byte === LF && wasCr && i === start) {
        // The LF of a CR LF: the line already ended.
        wasCr = false;
        start = i + 1;
        continue;
      }
      partialLine.add(chunk.subarray(start, i));
      yield* endPlainLine();
      line += 1;
      wasCr = byte === CR;
      start = i + 1;
    }
    if (start < chunk.length) {
      partialLine.add(chunk.subarray(start));
      wasCr = false;
    }
  }

  function* readMllp(chunk: Buffer): Generator<Hl7FileItem> {
    let start = 0;
    for (let i = 0; i < chunk.length; i += 1) {
      const byte = chunk[i]!;
      if (byte === LF) line += 1;
      if (!isInFrame) {
        if (byte === VT) {
          if (garbageLine !== 0) {
            yield { bytes: undefined, problem: 'not-hl7', line: garbageLine, bytesRead };
            garbageLine = 0;
          }
          isInFrame = true;
          frameLine = line;
          start = i + 1;
        } else if (!isBlank(byte) && garbageLine === 0) garbageLine = line;
        continue;
      }
      if (byte === VT) {
        // A frame not ended before the next one starts: not HL7.
        message.take();
        yield { bytes: undefined, problem: 'not-hl7', line: frameLine, bytesRead };
        frameLine = line;
        start = i + 1;
      } else if (byte === FS) {
        message.add(chunk.subarray(start, i));
        const isTooLong = message.isTooLong;
        const bytes = message.take();
        yield isTooLong
          ? { bytes: undefined, problem: 'too-long', line: frameLine, bytesRead }
          : { bytes, line: frameLine, bytesRead };
        // The CR after FS (and any white space) is read outside the frame.
        isInFrame = false;
      }
    }
    if (isInFrame && start < chunk.length) message.add(chunk.subarray(start));
  }

  for await (const data of stream) {
    const chunk = data as Buffer;
    bytesRead += chunk.length;
    if (format === undefined) {
      const first = chunk.findIndex((byte) => !isBlank(byte));
      if (first === -1) continue;
      format = chunk[first] === VT ? 'mllp' : 'plain';
    }
    yield* format === 'mllp' ? readMllp(chunk) : readPlain(chunk);
  }
  if (format === 'plain') {
    yield* endPlainLine();
    if (messageLine !== 0) yield* endMessage();
  } else if (isInFrame) {
    message.take();
    yield { bytes: undefined, problem: 'not-hl7', line: frameLine, bytesRead };
  }
  if (garbageLine !== 0) yield { bytes: undefined, problem: 'not-hl7', line: garbageLine, bytesRead };
}
