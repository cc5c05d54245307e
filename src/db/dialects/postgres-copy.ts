/**
 * PostgreSQL only: runs `COPY (<select>) TO STDOUT (FORMAT binary)` and hands back the rows' fields as
 * the bytes PostgreSQL stores. Why not a plain query: `pg` brings a `bytea` through the text protocol
 * as hex (twice its size on the wire, decoded into a string, then parsed back into a Buffer), which
 * costs several times the CPU of the bytes themselves. Why not `pg`'s `binary: true` result mode: the
 * installed `pg-protocol` decodes every DataRow field as UTF-8 text and `pg` re-encodes it, which
 * corrupts any value that is not valid UTF-8 (brianc/node-postgres#3495). COPY data arrives in
 * CopyData messages that `pg` never decodes, so each field's bytes are copied once, straight into a
 * Buffer of their own.
 *
 * COPY takes no bind parameters: callers build the statement with Kysely, with their values as
 * literals.
 */
import type { CompiledQuery } from 'kysely';
import pg from 'pg';

/** `PGCOPY\n\377\r\n\0`, then a 32-bit flags word and the length of a header extension. */
const SIGNATURE = Buffer.from([0x50, 0x47, 0x43, 0x4f, 0x50, 0x59, 0x0a, 0xff, 0x0d, 0x0a, 0x00]);
const HEADER_BYTES = SIGNATURE.length + 8;

export type CopyRow = (Buffer | null)[];

/**
 * Gives the Buffer that a field of `bytes` bytes in column `column` is copied into (it must be exactly
 * that long); `row` holds the fields of the same row read so far. The default allocates one per
 * field; a caller may hand out parts of one larger Buffer, so that the pieces of a value read over
 * many rows end up side by side.
 */
export type FieldAllocator = (bytes: number, column: number, row: Readonly<CopyRow>) => Buffer;

type Stage = 'header' | 'extension' | 'fieldCount' | 'fieldLength' | 'fieldData' | 'end';

/**
 * Parser of the binary COPY format (PostgreSQL documentation, COPY, "Binary Format"), fed message by
 * message. Fixed-size words may straddle two messages; field data is copied as it arrives.
 */
export class BinaryCopyParser {
  readonly rows: CopyRow[] = [];
  private readonly allocate: FieldAllocator;
  private stage: Stage = 'header';
  /** Bytes of a fixed-size word split across messages. */
  private partial: Buffer = Buffer.alloc(0);
  private skipBytes = 0;
  private fieldsLeft = 0;
  private row: CopyRow = [];
  private field: Buffer = Buffer.alloc(0);
  private filledBytes = 0;

  constructor(allocate: FieldAllocator = (bytes) => Buffer.allocUnsafe(bytes)) {
    this.allocate = allocate;
  }

  /** Consumes one CopyData message; the bytes may be reused by the caller once this returns. */
  push(data: Buffer): void {
    let rest = data;
    while (rest.length > 0) {
      switch (this.stage) {
        case 'header': {
          const header = this.take(rest, HEADER_BYTES);
          rest = header.rest;
          if (header.word === undefined) break;
          if (!header.word.subarray(0, SIGNATURE.length).equals(SIGNATURE))
            throw new Error('not a binary COPY stream');
          this.skipBytes = header.word.readUInt32BE(SIGNATURE.length + 4);
          this.stage = 'extension';
          break;
        }
        case 'extension': {
          const skipped = Math.min(this.skipBytes, rest.length);
          this.skipBytes -= skipped;
          rest = rest.subarray(skipped);
          if (this.skipBytes === 0) this.stage = 'fieldCount';
          break;
        }
        case 'fieldCount': {
          const count = this.take(rest, 2);
          rest = count.rest;
          if (count.word === undefined) break;
          this.fieldsLeft = count.word.readInt16BE(0);
          if (this.fieldsLeft === -1) {
            this.stage = 'end';
          } else {
            this.row = [];
            this.stage = this.fieldsLeft === 0 ? this.endRow() : 'fieldLength';
          }
          break;
        }
        case 'fieldLength': {
          const length = this.take(rest, 4);
          rest = length.rest;
          if (length.word === undefined) break;
          const bytes = length.word.readInt32BE(0);
          if (bytes === -1) {
            this.stage = this.endField(null);
          } else {
            this.field = this.allocate(bytes, this.row.length, this.row);
            if (this.field.length !== bytes) throw new Error('the allocator gave a Buffer of the wrong size');
            this.filledBytes = 0;
            this.stage = bytes === 0 ? this.endField(this.field) : 'fieldData';
          }
          break;
        }
        case 'fieldData': {
          const copied = rest.copy(this.field, this.filledBytes, 0, this.field.length - this.filledBytes);
          this.filledBytes += copied;
          rest = rest.subarray(copied);
          if (this.filledBytes === this.field.length) this.stage = this.endField(this.field);
          break;
        }
        case 'end':
          throw new Error('data after the end of a binary COPY stream');
      }
    }
  }

  /** True once the trailer has been read. */
  get isComplete(): boolean {
    return this.stage === 'end';
  }

  private take(data: Buffer, bytes: number): { word: Buffer | undefined; rest: Buffer } {
    if (this.partial.length === 0 && data.length >= bytes)
      return { word: data.subarray(0, bytes), rest: data.subarray(bytes) };
    const needed = Math.min(bytes - this.partial.length, data.length);
    this.partial = Buffer.concat([this.partial, data.subarray(0, needed)]);
    if (this.partial.length < bytes) return { word: undefined, rest: data.subarray(needed) };
    const word = this.partial;
    this.partial = Buffer.alloc(0);
    return { word, rest: data.subarray(needed) };
  }

  private endField(value: Buffer | null): Stage {
    this.row.push(value);
    this.fieldsLeft -= 1;
    return this.fieldsLeft === 0 ? this.endRow() : 'fieldLength';
  }

  private endRow(): Stage {
    this.rows.push(this.row);
    return 'fieldCount';
  }
}

type CopyConnection = pg.Connection & { sendCopyFail(message: string): void };

/** A `pg` submittable: the client calls these handlers with the backend's messages. */
class CopyOutQuery implements pg.Submittable {
  private readonly text: string;
  private readonly parser: BinaryCopyParser;
  private failure: Error | undefined;
  private readonly settle: (error: Error | undefined, rows?: CopyRow[]) => void;

  constructor(
    text: string,
    allocate: FieldAllocator | undefined,
    settle: (error: Error | undefined, rows?: CopyRow[]) => void,
  ) {
    this.text = text;
    this.parser = new BinaryCopyParser(allocate);
    this.settle = settle;
  }

  submit(connection: pg.Connection): void {
    connection.query(this.text);
  }

  handleCopyData(message: { chunk: Buffer }): void {
    // The chunk is a view of pg's receive buffer, which it reuses: parse (and copy) it now.
    if (this.failure !== undefined) return;
    try {
      this.parser.push(message.chunk);
    } catch (error) {
      this.failure = error as Error;
    }
  }

  handleCopyInResponse(connection: pg.Connection): void {
    (connection as CopyConnection).sendCopyFail('not a COPY FROM');
  }

  handleError(error: Error): void {
    this.settle(error);
  }

  handleReadyForQuery(): void {
    if (this.failure === undefined && !this.parser.isComplete)
      this.failure = new Error('binary COPY stream ended without its trailer');
    if (this.failure !== undefined) this.settle(this.failure);
    else this.settle(undefined, this.parser.rows);
  }

  handleRowDescription(): void {}
  handleDataRow(): void {}
  handlePortalSuspended(): void {}
  handleEmptyQuery(): void {}
  handleCommandComplete(): void {}
}

/**
 * Runs `copy` (a `copy (<select>) to stdout (format binary)` statement without parameters) on a client
 * of `pool` and resolves with its rows, each field as its stored bytes (null for SQL NULL), in Buffers
 * from `allocate`.
 */
export async function copyOutRows(
  pool: pg.Pool,
  copy: CompiledQuery,
  allocate?: FieldAllocator,
): Promise<CopyRow[]> {
  if (copy.parameters.length > 0) throw new Error('COPY takes no parameters: inline them as literals');
  const client = await pool.connect();
  try {
    const rows = await new Promise<CopyRow[]>((resolve, reject) => {
      const query = new CopyOutQuery(copy.sql, allocate, (error, result) => {
        if (error === undefined) resolve(result!);
        else reject(error);
      });
      client.query(query);
    });
    client.release();
    return rows;
  } catch (error) {
    // An error the server answered (an SQL error) leaves the connection ready for the next query: the
    // client goes back to the pool. Any other (a broken connection, a protocol error) discards it.
    client.release(error instanceof pg.DatabaseError ? undefined : (error as Error));
    throw error;
  }
}
