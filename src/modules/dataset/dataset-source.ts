/**
 * Reading a dataset document without holding it in memory (`@streamparser/json`, a streaming JSON
 * tokenizer and parser). `scanDocument` reads the whole document once: it checks the JSON grammar, reads
 * `format`, and notes where each table's array of rows starts and ends (byte offsets). `readTableRows`
 * then reads one table's array, row by row, as often as the importer needs (checks, then writes, in
 * foreign-key order whatever the order of the tables in the document). Memory is bounded by the largest
 * single row, never by the document; a long base64 value is held decoded, never as text.
 */
import { open, stat } from 'node:fs/promises';
import { TokenParser, TokenType } from '@streamparser/json';
import { DatasetError } from './dataset-errors.ts';
import type { LongValueSizes } from './dataset-strings.ts';
import { createDatasetTokenizer } from './dataset-strings.ts';

/** Bytes of a dataset document that can be read more than once, in ranges. */
export interface DatasetSource {
  readonly sizeBytes: number;
  /** The bytes `[start, end)`; a chunk may be overwritten once the next one is asked for. */
  read(start: number, end: number): AsyncIterable<Uint8Array>;
}

const CHUNK_BYTES = 256 * 1024;

/**
 * A file read in chunks into one buffer per reading: a chunk is valid until the next is asked for (the
 * readers parse each chunk before asking), so a reading of the whole file leaves no garbage behind.
 */
export async function fileSource(file: string): Promise<DatasetSource> {
  const { size } = await stat(file);
  return {
    sizeBytes: size,
    async *read(start, end) {
      if (end <= start) return;
      const handle = await open(file, 'r');
      try {
        const buffer = Buffer.allocUnsafeSlow(Math.min(CHUNK_BYTES, end - start));
        for (let at = start; at < end;) {
          const { bytesRead } = await handle.read(buffer, 0, Math.min(buffer.length, end - at), at);
          if (bytesRead === 0)
            throw new DatasetError([{ message: 'the file ended early (changed while read?)' }]);
          at += bytesRead;
          yield buffer.subarray(0, bytesRead);
        }
      } finally {
        await handle.close();
      }
    },
  };
}

export function bufferSource(bytes: Buffer): DatasetSource {
  return {
    sizeBytes: bytes.length,
    async *read(start, end) {
      for (let at = start; at < end; at += CHUNK_BYTES)
        yield bytes.subarray(at, Math.min(end, at + CHUNK_BYTES));
    },
  };
}

/** Where a table's array of rows is in the document: `[start, end)` covers `[` to `]`. */
export interface TableRange {
  readonly start: number;
  readonly end: number;
}

export interface DocumentOutline {
  /** The `format` member: a string, `null` when it is not one, undefined when absent. */
  readonly format: string | null | undefined;
  readonly unknownMembers: readonly string[];
  readonly hasTablesObject: boolean;
  /** Table name -> its array, in document order; `'not an array'` when the value is something else. */
  readonly tables: ReadonlyMap<string, TableRange | 'not an array'>;
  /** Names given twice in `tables` (JSON would keep the last; the importer refuses them). */
  readonly repeatedTables: readonly string[];
}

type Role = 'root' | 'tables' | 'table' | 'other';

interface Frame {
  readonly isObject: boolean;
  readonly role: Role;
  /** Objects: the key whose value comes next. */
  key: string | undefined;
  /** Objects: the next string token is a key. */
  isKeyNext: boolean;
}

/**
 * Reads the whole document once; throws {@link DatasetError} when it is not JSON or not an object.
 * `onBytes` reports the bytes read so far.
 */
export async function scanDocument(
  source: DatasetSource,
  onBytes: (bytesRead: number) => void = () => {},
): Promise<DocumentOutline> {
  const tables = new Map<string, TableRange | 'not an array'>();
  const unknownMembers: string[] = [];
  const repeatedTables: string[] = [];
  let format: string | null | undefined;
  let hasTablesObject = false;
  let isRootSeen = false;
  const stack: Frame[] = [];
  const openTable = new Map<Frame, { name: string; start: number }>();
  let lastTableName = '';

  // The token parser checks the grammar only: it is asked for no value, and keeps none.
  const grammar = new TokenParser({ paths: ['$.__none__'], keepStack: false });
  // Long strings (binary values) are checked, not kept: this pass needs names and `format` only.
  const tokenizer = createDatasetTokenizer({ isKeepingLongStrings: false });

  /** A value token (or the opening of one) at the current position. */
  const onValue = (token: TokenType, value: unknown, offset: number): Role => {
    const parent = stack.at(-1);
    if (parent === undefined) {
      if (token !== TokenType.LEFT_BRACE) throw new DatasetError([{ message: 'expected a JSON object' }]);
      isRootSeen = true;
      return 'root';
    }
    if (!parent.isObject) return 'other';
    const key = parent.key;
    parent.key = undefined;
    if (parent.role === 'root') {
      if (key === 'format') format = token === TokenType.STRING ? (value as string) : null;
      else if (key === 'tables') {
        if (token === TokenType.LEFT_BRACE) {
          hasTablesObject = true;
          return 'tables';
        }
      } else if (key !== undefined) unknownMembers.push(key);
      return 'other';
    }
    if (parent.role === 'tables' && key !== undefined) {
      if (tables.has(key)) repeatedTables.push(key);
      if (token === TokenType.LEFT_BRACKET) {
        tables.set(key, { start: offset, end: offset });
        lastTableName = key;
        return 'table';
      }
      tables.set(key, 'not an array');
    }
    return 'other';
  };

  tokenizer.onToken = (info) => {
    grammar.write(info);
    const { token, value, offset } = info;
    const top = stack.at(-1);
    switch (token) {
      case TokenType.LEFT_BRACE:
      case TokenType.LEFT_BRACKET: {
        const role = onValue(token, value, offset);
        const frame: Frame = {
          isObject: token === TokenType.LEFT_BRACE,
          role,
          key: undefined,
          isKeyNext: true,
        };
        if (role === 'table') openTable.set(frame, { name: lastTableName, start: offset });
        stack.push(frame);
        return;
      }
      case TokenType.RIGHT_BRACE:
      case TokenType.RIGHT_BRACKET: {
        const frame = stack.pop();
        const open = frame === undefined ? undefined : openTable.get(frame);
        if (frame !== undefined && open !== undefined) {
          tables.set(open.name, { start: open.start, end: offset + 1 });
          openTable.delete(frame);
        }
        return;
      }
      case TokenType.COMMA:
        if (top?.isObject === true) top.isKeyNext = true;
        return;
      case TokenType.COLON:
      case TokenType.SEPARATOR:
        return;
      case TokenType.STRING:
        if (top?.isObject === true && top.isKeyNext) {
          top.key = value as string;
          top.isKeyNext = false;
          return;
        }
        onValue(token, value, offset);
        return;
      case TokenType.NUMBER:
      case TokenType.TRUE:
      case TokenType.FALSE:
      case TokenType.NULL:
        onValue(token, value, offset);
        return;
    }
  };

  let bytesRead = 0;
  try {
    for await (const chunk of source.read(0, source.sizeBytes)) {
      tokenizer.write(chunk);
      bytesRead += chunk.length;
      onBytes(bytesRead);
    }
    if (!isRootSeen) throw new DatasetError([{ message: 'expected a JSON object' }]);
    tokenizer.end();
  } catch (error) {
    if (error instanceof DatasetError) throw error;
    throw new DatasetError([{ message: `not valid JSON (${(error as Error).message})` }]);
  }
  if (stack.length > 0) throw new DatasetError([{ message: 'not valid JSON (the document ends early)' }]);
  return { format, unknownMembers, hasTablesObject, tables, repeatedTables };
}

/**
 * The rows of one table's array, with their index in it, read from `range`. A long base64 string arrives
 * decoded, as a `Base64Value` (`dataset-strings.ts`), never as one string; give the same `sizes` to
 * every reading of a range, so that the later ones decode each such value into a Buffer of its size.
 */
export async function* readTableRows(
  source: DatasetSource,
  range: TableRange,
  sizes?: LongValueSizes,
): AsyncGenerator<{ readonly index: number; readonly value: unknown }> {
  const tokenizer = createDatasetTokenizer({ isKeepingLongStrings: true, ...(sizes ? { sizes } : {}) });
  const parser = new TokenParser({ paths: ['$.*'], keepStack: false });
  tokenizer.onToken = (token) => parser.write(token);
  parser.onError = (error) => tokenizer.error(error);
  parser.onEnd = () => {
    if (!tokenizer.isEnded) tokenizer.end();
  };
  let ready: { index: number; value: unknown }[] = [];
  parser.onValue = ({ value, key }) => {
    ready.push({ index: key as number, value });
  };
  for await (const chunk of source.read(range.start, range.end)) {
    tokenizer.write(chunk);
    if (ready.length > 0) {
      const rows = ready;
      ready = [];
      yield* rows;
    }
  }
}
