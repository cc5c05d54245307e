/**
 * PostgreSQL only: the socket of a `pg` connection, read into one reused Buffer instead of a new one per
 * read. Why: Node hands each socket read to `'data'` listeners in a Buffer of its own (up to 64 KiB),
 * and `pg`'s parser keeps the last one when it ends inside a message, or copies into buffers it grows.
 * A large value read from the database (a 1 MiB slice of a download) then leaves a megabyte of external
 * memory per read for the garbage collector; V8 counts it against its external memory limit and runs a
 * full mark-compact every few dozen downloads, which costs more CPU than the reads themselves.
 *
 * This socket reads into a Buffer reused by every read (`onread`) and hands `pg` whole protocol
 * messages only (a 1-byte type and a 4-byte length that counts itself, then the body): `pg`'s parser
 * then parses everything it is given and keeps no reference to it once it returns, so the Buffer can
 * be read into again. A message split across reads is gathered in a second reused Buffer (one of its
 * own when larger). Whatever `pg` builds from a message (text fields, errors) is its own copy; the one
 * view it hands on, a CopyData chunk, is copied by its reader before the parse returns
 * (postgres-copy.ts).
 */
import net from 'node:net';

/** Bytes read from the socket at a time (Node's own read size). */
const READ_BYTES = 64 * 1024;
/** A message split across reads is gathered in a kept Buffer up to this size; a larger one in its own. */
const KEPT_GATHER_BYTES = 128 * 1024;
/** Type byte and length word of every backend message after the first (the length counts itself). */
const HEADER_BYTES = 5;

/**
 * The `stream` option of a `pg` client (`pg` calls it with the connection's settings): a socket that
 * hands `pg` whole messages from reused Buffers. A TLS connection gets a plain socket (TLS reads the
 * socket itself), and so does a call without settings.
 */
export function createPostgresSocket(config?: { ssl?: unknown }): net.Socket {
  if (config === undefined || (config.ssl !== undefined && config.ssl !== false && config.ssl !== null))
    return new net.Socket();
  const framer = new MessageFramer((messages) => socket.emit('data', messages));
  const socket = new net.Socket({
    onread: {
      buffer: Buffer.allocUnsafe(READ_BYTES),
      callback: (bytes, buffer) => {
        const isFramed = framer.push((buffer as Buffer).subarray(0, bytes));
        // A length no message can have: the stream is not PostgreSQL's protocol; pg fails the connection.
        if (!isFramed) socket.destroy(new Error('a PostgreSQL message with a bad length'));
        return isFramed;
      },
    },
  });
  return socket;
}

/**
 * Cuts a byte stream of PostgreSQL backend messages into runs of whole messages. `push` hands `emit`
 * views of the pushed Buffer, or of its own gathering Buffer, that are valid only until `emit` returns.
 */
export class MessageFramer {
  private readonly emit: (messages: Buffer) => void;
  /** Gathers a message split across pushes; `gathered` bytes of it are filled. */
  private gather: Buffer = Buffer.alloc(0);
  private kept: Buffer | undefined;
  private gathered = 0;
  /** Length of the message being gathered (header included); 0 until its header is complete. */
  private messageBytes = 0;

  constructor(emit: (messages: Buffer) => void) {
    this.emit = emit;
  }

  /** Takes the next bytes of the stream; false when they hold a length no message can have. */
  push(data: Buffer): boolean {
    let rest = data;
    if (this.gathered > 0) {
      const left = this.fillGather(rest);
      if (left === undefined) return false;
      rest = left;
      if (this.messageBytes === 0 || this.gathered < this.messageBytes) return true;
      const message = this.gather.subarray(0, this.messageBytes);
      this.gathered = 0;
      this.messageBytes = 0;
      // A one-off Buffer of a large message is not kept.
      if (this.gather.length > KEPT_GATHER_BYTES) this.gather = this.kept ?? Buffer.alloc(0);
      this.emit(message);
    }
    let end = 0;
    while (end + HEADER_BYTES <= rest.length) {
      const length = rest.readUInt32BE(end + 1);
      if (length < HEADER_BYTES - 1) return false;
      if (end + 1 + length > rest.length) break;
      end += 1 + length;
    }
    if (end > 0) this.emit(end === rest.length ? rest : rest.subarray(0, end));
    return end === rest.length || this.fillGather(rest.subarray(end)) !== undefined;
  }

  /**
   * Copies from `data` into the gathering Buffer up to the end of the message; answers what is left of
   * `data`, or undefined when the message's length is impossible.
   */
  private fillGather(data: Buffer): Buffer | undefined {
    let rest = data;
    if (this.messageBytes === 0) {
      const headerPart = Math.min(HEADER_BYTES - this.gathered, rest.length);
      this.ensureGather(HEADER_BYTES);
      rest.copy(this.gather, this.gathered, 0, headerPart);
      this.gathered += headerPart;
      rest = rest.subarray(headerPart);
      if (this.gathered < HEADER_BYTES) return rest;
      const length = this.gather.readUInt32BE(1);
      if (length < HEADER_BYTES - 1) return undefined;
      this.messageBytes = 1 + length;
      this.ensureGather(this.messageBytes);
    }
    const copied = rest.copy(this.gather, this.gathered, 0, this.messageBytes - this.gathered);
    this.gathered += copied;
    return rest.subarray(copied);
  }

  /** Makes the gathering Buffer at least `bytes` long, keeping what it holds. */
  private ensureGather(bytes: number): void {
    if (this.gather.length >= bytes) return;
    const next =
      bytes <= KEPT_GATHER_BYTES
        ? (this.kept ??= Buffer.allocUnsafe(KEPT_GATHER_BYTES))
        : Buffer.allocUnsafe(bytes);
    this.gather.copy(next, 0, 0, this.gathered);
    this.gather = next;
  }
}
