/**
 * The columns of each table as the live database declares them (the dialect's `readColumns`), and the
 * conversion of dataset values to and from column values.
 */
import type { Database } from '../../db/database.ts';
import { Base64Value } from './dataset-strings.ts';
import { TABLE_SPECS } from './table-specs.ts';
import type { DatasetTable } from './table-specs.ts';

export type ColumnKind = 'int32' | 'int64' | 'text' | 'blob' | 'date' | 'datetime';

export interface ColumnInfo {
  readonly name: string;
  readonly kind: ColumnKind;
  /** Declared `varchar(n)` length; undefined for unbounded text and non-text columns. */
  readonly maxLength: number | undefined;
  /** NOT NULL with no default and not an auto-assigned id: a row must give it. */
  readonly isRequired: boolean;
  /** An auto-increment id (PostgreSQL serial, SQLite INTEGER PRIMARY KEY). */
  readonly isSerial: boolean;
}

export type TableColumns = ReadonlyMap<string, ColumnInfo>;

/** Reads the columns of `table` from the database catalog, in table order. */
export async function readTableColumns(database: Database, table: DatasetTable): Promise<TableColumns> {
  const raw = await database.dialect.readColumns(table);
  if (raw.length === 0) throw new Error(`Table ${table} does not exist; is the database migrated?`);
  const specOf = TABLE_SPECS[table];
  const dates = new Set<string>(specOf.dates);
  const dateTimes = new Set<string>(specOf.dateTimes);
  const columns = new Map<string, ColumnInfo>();
  for (const c of raw) {
    let kind = kindOf(c.type);
    if (dates.has(c.name)) kind = 'date';
    else if (dateTimes.has(c.name)) kind = 'datetime';
    columns.set(c.name, {
      name: c.name,
      kind,
      maxLength: kind === 'text' ? c.length : undefined,
      isRequired: c.isNotNull && !c.hasDefault && !c.isSerial,
      isSerial: c.isSerial,
    });
  }
  return columns;
}

/** The kind the catalog itself declares (PostgreSQL and MySQL know dates; SQLite stores them as text). */
export function kindOf(type: string): ColumnKind {
  const t = type.toLowerCase();
  if (t === 'bigint' || t === 'int8') return 'int64';
  if (t.includes('int')) return 'int32';
  // MySQL: tinyblob .. longblob.
  if (t.endsWith('blob') || t === 'bytea') return 'blob';
  if (t === 'date') return 'date';
  if (t.startsWith('timestamp') || t === 'datetime') return 'datetime';
  return 'text';
}

/** A value that does not fit its column; the message says what was expected. */
export class ValueError extends Error {}

// A plain character loop then the padded end: a repeated group of four would make the regular expression
// engine keep a backtracking entry per group, which overflows its stack on values of a few MB.
const BASE64 = /^[A-Za-z0-9+/]*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;
const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})$/;
const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})?$/i;
const INT32_MIN = -2_147_483_648;
const INT32_MAX = 2_147_483_647;

/**
 * Strict standard base64 (padding required, canonical trailing bits) to bytes. A long value arrives
 * checked and decoded already (a {@link Base64Value}).
 */
export function decodeBase64(text: string | Base64Value): Buffer {
  if (text instanceof Base64Value) return text.toBuffer();
  if (text.length % 4 !== 0 || !BASE64.test(text)) throw new ValueError('expected standard base64');
  // Only the last group of four can carry trailing bits that a decoder drops; checking it alone is
  // checking the whole text, without encoding a copy of a large value again.
  const last = text.slice(-4);
  if (Buffer.from(last, 'base64').toString('base64') !== last)
    throw new ValueError('expected canonical standard base64');
  return Buffer.from(text, 'base64');
}

/** Converts one dataset value to what the column stores; throws {@link ValueError}. */
export function toColumnValue(column: ColumnInfo, value: unknown): unknown {
  if (value === null) {
    if (column.isRequired) throw new ValueError('must not be null');
    return null;
  }
  switch (column.kind) {
    case 'int32':
    case 'int64': {
      if (value === true) return 1;
      if (value === false) return 0;
      if (typeof value !== 'number' || !Number.isSafeInteger(value)) {
        throw new ValueError(`expected an integer, got ${describe(value)}`);
      }
      if (column.kind === 'int32' && (value < INT32_MIN || value > INT32_MAX)) {
        throw new ValueError(`integer ${value} is out of range`);
      }
      return value;
    }
    case 'text': {
      // A long text of base64 characters only was decoded as it was read: it is its text again.
      if (value instanceof Base64Value) value = value.toBase64();
      if (typeof value !== 'string') throw new ValueError(`expected a string, got ${describe(value)}`);
      if (column.maxLength !== undefined && [...value].length > column.maxLength) {
        throw new ValueError(`text longer than ${column.maxLength} characters`);
      }
      return value;
    }
    case 'blob': {
      if (typeof value !== 'string' && !(value instanceof Base64Value))
        throw new ValueError(`expected base64 text, got ${describe(value)}`);
      return decodeBase64(value);
    }
    case 'date': {
      if (typeof value !== 'string' || !isRealDate(value)) {
        throw new ValueError(`expected a date YYYY-MM-DD, got ${describe(value)}`);
      }
      return value;
    }
    case 'datetime':
      return normaliseDateTime(value);
  }
}

function isRealDate(text: string): boolean {
  const m = DATE.exec(text);
  if (m === null) return false;
  const date = new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3])));
  return date.toISOString().slice(0, 10) === text;
}

/** `YYYY-MM-DD HH:MM:SS` (UTC) as is, or ISO 8601 converted to UTC; anything else is refused. */
export function normaliseDateTime(value: unknown): string {
  if (typeof value === 'string') {
    const m = DATE_TIME.exec(value);
    if (m !== null) {
      if (isRealDate(value.slice(0, 10)) && Number(m[4]) < 24 && Number(m[5]) < 60 && Number(m[6]) < 60) {
        return value;
      }
    } else if (ISO_DATE_TIME.test(value)) {
      const hasZone = /(?:Z|[+-]\d{2}:?\d{2})$/i.test(value);
      const ms = Date.parse(hasZone ? value : `${value}Z`);
      if (!Number.isNaN(ms) && isRealDate(value.slice(0, 10))) {
        return new Date(ms).toISOString().slice(0, 19).replace('T', ' ');
      }
    }
  }
  throw new ValueError(`expected a date-time YYYY-MM-DD HH:MM:SS (UTC) or ISO 8601, got ${describe(value)}`);
}

function describe(value: unknown): string {
  if (value instanceof Base64Value) return JSON.stringify(`${value.head}...`);
  if (typeof value === 'string')
    return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}...` : value);
  if (Array.isArray(value)) return 'an array';
  if (typeof value === 'object' && value !== null) return 'an object';
  return String(value);
}

/** A stored value as the dataset writes it: binaries as base64, everything else as read. */
export function toDatasetValue(value: unknown): unknown {
  if (Buffer.isBuffer(value)) return value.toString('base64');
  if (value instanceof Uint8Array) return Buffer.from(value).toString('base64');
  if (typeof value === 'bigint') return Number(value);
  return value;
}

/** True when two stored values are the same (binaries compared byte for byte). */
export function isSameValue(a: unknown, b: unknown): boolean {
  if (a instanceof Uint8Array && b instanceof Uint8Array) return Buffer.compare(a, b) === 0;
  if (a === null || a === undefined) return b === null || b === undefined;
  if (typeof a === 'bigint' || typeof b === 'bigint') return Number(a) === Number(b);
  return a === b;
}
