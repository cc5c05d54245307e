/**
 * How the dataset reader gathers the characters of JSON strings. A binary value of some MB is a base64
 * string of 4/3 its size in the document: gathered whole it would be one long JavaScript string (and the
 * pieces it is built from) before being decoded. Here a string that outgrows {@link SHORT_STRING_BYTES}
 * while every character so far is base64 is decoded as its characters arrive, into Buffer chunks, and
 * reaches the parser as a {@link Base64Value}. A long string that turns out not to be strict standard
 * base64 (another character, a bad length, padding that is not canonical) is given back as the very
 * same text, so text columns keep it and binary columns refuse it with the usual message.
 *
 * The builder replaces the tokenizer's own (`@streamparser/json` gathers strings through a
 * `StringBuilder` object, and keeps the same byte count for its token offsets).
 */
import { Tokenizer } from '@streamparser/json';
import type { StringBuilder } from '@streamparser/json/utils/bufferedString.js';

/** Strings up to this size are gathered as text; longer ones may be decoded as they come. */
export const SHORT_STRING_BYTES = 64 * 1024;
/** Decoded bytes are gathered in chunks of this size: a whole number of decoded pieces. */
const CHUNK_BYTES = (SHORT_STRING_BYTES / 4) * 3 * 21;
/** Characters a value's description shows. */
const HEAD_CHARS = 40;

const EQUALS = 0x3d;
const IS_BASE64 = new Uint8Array(256);
for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/')
  IS_BASE64[c.charCodeAt(0)] = 1;

/** A long JSON string that is strict standard base64, held decoded. */
export class Base64Value {
  #chunks: readonly Buffer[];
  /** Decoded size. */
  readonly byteLength: number;
  /** The first characters of the text, for messages. */
  readonly head: string;

  constructor(chunks: readonly Buffer[], head: string) {
    this.#chunks = chunks;
    this.byteLength = chunks.reduce((sum, c) => sum + c.length, 0);
    this.head = head;
  }

  /** The decoded bytes as one Buffer (joined once; the chunks' memory is then given back at once). */
  toBuffer(): Buffer {
    if (this.#chunks.length !== 1) {
      const joined = Buffer.concat(this.#chunks, this.byteLength);
      // Each chunk has an ArrayBuffer of its own (allocUnsafeSlow): detaching it frees it now, not at
      // the next garbage collection.
      for (const chunk of this.#chunks) (chunk.buffer as ArrayBuffer).transfer(0);
      this.#chunks = [joined];
    }
    return this.#chunks[0]!;
  }

  /** The text as the document gives it. */
  toBase64(): string {
    return this.#chunks.map((c) => c.toString('base64')).join('');
  }

  toString(): string {
    return this.toBase64();
  }
}

export interface DatasetStringOptions {
  /**
   * false: long strings are checked (UTF-8) but not kept; they read as their first
   * {@link SHORT_STRING_BYTES} followed by an ellipsis (the outline pass, which needs no value).
   */
  readonly isKeepingLongStrings: boolean;
  /** Decoded sizes of the long base64 strings of a range, learnt by its first reading (see {@link LongValueSizes}). */
  readonly sizes?: LongValueSizes;
}

/**
 * The decoded sizes of the long base64 strings of one range of the document, in order. The first
 * reading of the range records them; a later reading of the same bytes decodes each value straight into
 * a Buffer of its size, instead of into chunks joined at the end (one copy less of every large value).
 */
export class LongValueSizes {
  readonly #sizes: number[] = [];
  #isKnown = false;
  #next = 0;

  /** Starts a reading of the range: the first records, the others replay. */
  startReading(): void {
    this.#isKnown = this.#isKnown || this.#sizes.length > 0;
    this.#next = 0;
  }

  /** A long string starts decoding: its expected size (undefined: unknown), and its place in the list. */
  nextValue(): { expectedBytes: number | undefined; place: number } {
    const place = this.#next++;
    if (!this.#isKnown) this.#sizes.push(-1);
    const size = this.#sizes[place];
    return { expectedBytes: this.#isKnown && size !== undefined && size >= 0 ? size : undefined, place };
  }

  /** The string at `place` ended as a value of `bytes` (or as text: -1). */
  record(place: number, bytes: number): void {
    if (!this.#isKnown) this.#sizes[place] = bytes;
  }
}

/** A tokenizer whose strings are gathered by {@link DatasetStringBuilder}. */
export function createDatasetTokenizer(options: DatasetStringOptions): Tokenizer {
  const tokenizer = new Tokenizer();
  // The tokenizer offers no option for its string builder: it is set on the field the tokenizer reads,
  // and refused loudly if a version of the library keeps its strings elsewhere.
  const fields = tokenizer as unknown as { bufferedString?: Partial<StringBuilder> };
  if (typeof fields.bufferedString?.appendBuf !== 'function') {
    throw new Error('@streamparser/json: the tokenizer has no bufferedString to replace');
  }
  fields.bufferedString = new DatasetStringBuilder(options);
  options.sizes?.startReading();
  return tokenizer;
}

/**
 * Gathers one string at a time (`reset` starts the next). Bytes arrive through `appendChar` and
 * `appendBuf` as whole UTF-8 characters, escapes already resolved; `appendCharCode` brings a lone
 * surrogate, which no base64 text has.
 */
export class DatasetStringBuilder implements StringBuilder {
  /** Bytes of the string in the document, as the tokenizer counts them for its offsets. */
  byteLength = 0;
  readonly #isKeeping: boolean;
  readonly #sizes: LongValueSizes | undefined;
  /** This string's place in {@link LongValueSizes}, once it decodes. */
  #place = -1;
  readonly #decoder = new TextDecoder('utf-8', { fatal: true });
  /** Bytes not yet turned into text or decoded. */
  readonly #bytes = new Uint8Array(SHORT_STRING_BYTES);
  #length = 0;
  /** Text gathered so far (text mode). */
  #text = '';
  /** Every byte so far is a base64 character, then at most two `=` at the end. */
  #isBase64 = true;
  #padding = 0;
  /** Decoded mode: the full chunks, and the one being filled. */
  #chunks: Buffer[] = [];
  #chunk: Buffer | undefined;
  #chunkUsed = 0;
  #head = '';
  /** Long strings not kept: bytes read past the first buffer. */
  #isTruncated = false;

  constructor(options: DatasetStringOptions) {
    this.#isKeeping = options.isKeepingLongStrings;
    this.#sizes = options.sizes;
  }

  reset(): void {
    this.byteLength = 0;
    this.#length = 0;
    this.#text = '';
    this.#isBase64 = true;
    this.#padding = 0;
    this.#chunks = [];
    this.#chunk = undefined;
    this.#chunkUsed = 0;
    this.#head = '';
    this.#isTruncated = false;
    this.#place = -1;
  }

  appendChar(char: number): void {
    this.byteLength += 1;
    if (this.#isBase64) {
      if (this.#length === this.#bytes.length) this.#makeRoom();
      if (!this.#isBase64Next(char)) this.#toText();
    }
    if (!this.#isBase64 && this.#length === this.#bytes.length) this.#flushText();
    this.#bytes[this.#length++] = char;
  }

  appendBuf(buf: Uint8Array, start = 0, end = buf.length): void {
    this.byteLength += end - start;
    let at = start;
    while (this.#isBase64 && at < end) {
      if (this.#length === this.#bytes.length) this.#makeRoom();
      const stop = Math.min(end, at + this.#bytes.length - this.#length);
      let next = at;
      while (next < stop && this.#isBase64Next(buf[next]!)) next += 1;
      this.#bytes.set(buf.subarray(at, next), this.#length);
      this.#length += next - at;
      at = next;
      // Every byte before `at` is ASCII: the rest starts on a character.
      if (next < stop) this.#toText();
    }
    if (at === end) return;
    // Text mode: the run is whole characters; it is not cut, so that each decoded piece is whole too.
    if (this.#length + (end - at) > this.#bytes.length) this.#flushText();
    if (end - at > this.#bytes.length) {
      this.#addText(this.#decoder.decode(buf.subarray(at, end)));
      return;
    }
    this.#bytes.set(buf.subarray(at, end), this.#length);
    this.#length += end - at;
  }

  appendCharCode(code: number): void {
    this.#toText();
    this.#flushText();
    this.#addText(String.fromCharCode(code));
  }

  /** The string: text, or a {@link Base64Value} once decoding has started and the end is valid. */
  toString(): string {
    if (this.#isBase64 && this.#chunk !== undefined && this.#isValidEnd()) {
      this.#decode(this.#length);
      this.#chunks.push(this.#chunk.subarray(0, this.#chunkUsed));
      const value = new Base64Value(this.#chunks, this.#head);
      if (this.#place >= 0) this.#sizes?.record(this.#place, value.byteLength);
      // The tokenizer types its values as strings; this reader's callers know the Base64Value.
      return value as unknown as string;
    }
    this.#toText();
    this.#flushText();
    return this.#isTruncated ? `${this.#text}\u2026` : this.#text;
  }

  /** Whether `byte`, appended next, keeps the string strict base64 so far (counts the padding). */
  #isBase64Next(byte: number): boolean {
    if (byte === EQUALS) {
      this.#padding += 1;
      return this.#padding <= 2;
    }
    return IS_BASE64[byte] === 1 && this.#padding === 0;
  }

  /** The undecoded end is whole groups of four, its padding canonical (no bits past the data). */
  #isValidEnd(): boolean {
    if (this.#length % 4 !== 0) return false;
    if (this.#padding === 0) return true;
    const last = this.#latin1(this.#length - 4, this.#length);
    return Buffer.from(last, 'base64').toString('base64') === last;
  }

  /** The buffer is full: decode what can be decoded, or turn the bytes into text. */
  #makeRoom(): void {
    if (this.#isBase64 && this.#isKeeping) {
      if (this.#chunk === undefined) {
        this.#head = this.#latin1(0, Math.min(HEAD_CHARS, this.#length));
        const next = this.#sizes?.nextValue();
        if (next !== undefined) this.#place = next.place;
        if (next?.expectedBytes !== undefined) {
          this.#chunk = Buffer.allocUnsafeSlow(next.expectedBytes);
          this.#chunkUsed = 0;
        }
      }
      // Bytes before the padding are whole groups of four characters: the buffer's size is a multiple of four.
      const whole = this.#padding === 0 ? this.#length : Math.floor((this.#length - this.#padding) / 4) * 4;
      this.#decode(whole);
      return;
    }
    this.#toText();
    this.#flushText();
  }

  /** Decodes the first `upTo` bytes (whole groups of four, or the valid end) into the chunks. */
  #decode(upTo: number): void {
    const text = this.#latin1(0, upTo);
    // Whole groups decode to 3 bytes each; the padded end (when decoded) to one or two fewer.
    const need = (upTo / 4) * 3 - (upTo === this.#length ? this.#padding : 0);
    if (this.#chunk === undefined || this.#chunk.length - this.#chunkUsed < need) {
      if (this.#chunk !== undefined) this.#chunks.push(this.#chunk.subarray(0, this.#chunkUsed));
      this.#chunk = Buffer.allocUnsafeSlow(Math.max(CHUNK_BYTES, need));
      this.#chunkUsed = 0;
    }
    this.#chunkUsed += this.#chunk.write(text, this.#chunkUsed, 'base64');
    this.#bytes.copyWithin(0, upTo, this.#length);
    this.#length -= upTo;
  }

  /** Leaves base64 mode: what was decoded is encoded back (whole groups give back the same text). */
  #toText(): void {
    if (!this.#isBase64) return;
    this.#isBase64 = false;
    if (this.#chunk === undefined) return;
    this.#chunks.push(this.#chunk.subarray(0, this.#chunkUsed));
    const text = this.#chunks.map((c) => c.toString('base64')).join('');
    this.#chunks = [];
    this.#chunk = undefined;
    this.#chunkUsed = 0;
    this.#addText(text);
  }

  /** Text mode: the buffered bytes (whole characters) become text. */
  #flushText(): void {
    if (this.#length === 0) return;
    this.#addText(this.#decoder.decode(this.#bytes.subarray(0, this.#length)));
    this.#length = 0;
  }

  #addText(text: string): void {
    if (this.#isKeeping || this.#text.length < SHORT_STRING_BYTES) this.#text += text;
    else this.#isTruncated = true;
  }

  #latin1(start: number, end: number): string {
    return Buffer.from(this.#bytes.buffer, this.#bytes.byteOffset + start, Math.max(0, end - start)).toString(
      'latin1',
    );
  }
}
