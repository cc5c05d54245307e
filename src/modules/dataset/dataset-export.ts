/**
 * Dataset export: every table (or the named ones) in foreign-key order, every column, one row per line,
 * binaries as base64 and protected files with their content, so that importing the file into an empty
 * database gives the same rows. Rows are read in keyset pages and written as they come, so memory stays
 * bounded: pages of tables with binary columns are cut at about 8 MB of values, and a large binary value
 * is read in slices (`substr`, the same on every engine), each written as base64 as it comes: never
 * held whole, nor as one string. The file appears under its name only when complete.
 */
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { writeDurably } from '../../files/durable-file.ts';
import type { ImportDeps } from './dataset-import.ts';
import { DATASET_FORMAT } from './dataset-import.ts';
import type { TableColumns } from './columns.ts';
import { readTableColumns, toDatasetValue } from './columns.ts';
import { readStoredFile } from './file-contents.ts';
import { TABLES_IN_DEPENDENCY_ORDER, TABLE_SPECS, isTableName } from './table-specs.ts';
import type { DatasetTable } from './table-specs.ts';

export interface ExportOptions {
  /** Only these tables; all when undefined. */
  readonly tables?: readonly string[];
  /** Rows written so far of the rows the tables held when the export started. */
  readonly onProgress?: (rowsDone: number, rowsTotal: number) => void;
}

export interface ExportSummary {
  readonly rows: Partial<Record<DatasetTable, number>>;
  /** protected_file rows whose file is missing from the store (exported without content). */
  readonly missingFiles: number;
}

type LooseDb = Record<string, Record<string, unknown>>;
const PAGE_ROWS = 1000;
const PAGE_BYTES = 8 * 1024 * 1024;
/** Text is handed to the writer once this much has gathered. */
const WRITE_CHARS = 1024 * 1024;
/**
 * Binary values longer than this are read and written as base64 in slices of this size: a multiple of 3,
 * so that the slices' base64 put end to end is the value's.
 */
const SLICE_BYTES = 3 * 256 * 1024;

/**
 * Writes the dataset to `file` with the durable writer: the file appears whole under its name, or the
 * name is left as it was.
 */
export async function exportDatasetToFile(
  deps: ImportDeps,
  file: string,
  options: ExportOptions = {},
): Promise<ExportSummary> {
  // Text is encoded into one reused buffer (a Buffer per write would be garbage of the file's size).
  let bytes = Buffer.allocUnsafeSlow(2 * WRITE_CHARS);
  return writeDurably(file, (write) =>
    exportDataset(
      deps,
      async (text) => {
        const size = Buffer.byteLength(text);
        if (size > bytes.length) bytes = Buffer.allocUnsafeSlow(size);
        const length = bytes.write(text);
        await write(bytes.subarray(0, length));
      },
      options,
    ),
  );
}

/** Unknown table names given to the export. */
export class UnknownTableError extends Error {}

/** Streams the dataset as text chunks to `write`. Unknown table names are refused before anything. */
export async function exportDataset(
  deps: ImportDeps,
  write: (text: string) => Promise<void>,
  options: ExportOptions = {},
): Promise<ExportSummary> {
  const wanted = options.tables;
  if (wanted !== undefined) {
    const unknown = wanted.filter((t) => !isTableName(t));
    if (unknown.length > 0) throw new UnknownTableError(`Unknown table(s): ${unknown.join(', ')}`);
  }
  const tables = TABLES_IN_DEPENDENCY_ORDER.filter((t) => wanted === undefined || wanted.includes(t));
  const db = deps.database.db as unknown as Kysely<LooseDb>;
  let rowsTotal = 0;
  for (const table of tables) {
    const row = await db
      .selectFrom(table)
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .executeTakeFirstOrThrow();
    rowsTotal += Number(row.count);
  }
  let rowsDone = 0;
  const summary: { rows: Partial<Record<DatasetTable, number>>; missingFiles: number } = {
    rows: {},
    missingFiles: 0,
  };
  const out = createBufferedWriter(write);
  await out.text(`{\n  "format": ${JSON.stringify(DATASET_FORMAT)},\n  "tables": {`);
  let isFirstTable = true;
  for (const table of tables) {
    const columns = await readTableColumns(deps.database, table);
    await out.text(`${isFirstTable ? '' : ','}\n    ${JSON.stringify(table)}: [`);
    isFirstTable = false;
    let count = 0;
    for await (const { row, sliced } of readRows(db, table, columns)) {
      const values: [string, unknown][] = [...columns.keys()].map((c) => {
        const bytes = sliced?.get(c);
        return [c, bytes === undefined ? row[c] : readSlices(db, table, row, c, bytes)];
      });
      if (table === 'protected_file') {
        const content = await readStoredFile(deps.files, String(row.uid));
        if (content === undefined) summary.missingFiles += 1;
        else values.push(['content', content]);
      }
      await out.text(`${count === 0 ? '' : ','}\n      `);
      await writeRow(out, values);
      count += 1;
      rowsDone += 1;
      options.onProgress?.(rowsDone, Math.max(rowsTotal, rowsDone));
    }
    await out.text(count === 0 ? ']' : '\n    ]');
    summary.rows[table] = count;
  }
  await out.text('\n  }\n}\n');
  await out.flush();
  options.onProgress?.(rowsDone, Math.max(rowsTotal, rowsDone));
  return summary;
}

interface BufferedWriter {
  text(text: string): Promise<void>;
  flush(): Promise<void>;
}

function createBufferedWriter(write: (text: string) => Promise<void>): BufferedWriter {
  let pending: string[] = [];
  let pendingChars = 0;
  const flush = async (): Promise<void> => {
    if (pending.length === 0) return;
    const text = pending.join('');
    pending = [];
    pendingChars = 0;
    await write(text);
  };
  return {
    async text(text) {
      pending.push(text);
      pendingChars += text.length;
      if (pendingChars >= WRITE_CHARS) await flush();
    },
    flush,
  };
}

/** A binary value read slice by slice. */
type Slices = AsyncGenerator<Uint8Array>;

/** One row as a JSON object; binaries as base64, large ones slice by slice (or piece by piece). */
async function writeRow(out: BufferedWriter, values: readonly [string, unknown][]): Promise<void> {
  let text = '{';
  let isFirst = true;
  for (const [column, value] of values) {
    text += `${isFirst ? '' : ','}${JSON.stringify(column)}:`;
    isFirst = false;
    const isLarge = value instanceof Uint8Array && value.length > SLICE_BYTES;
    if (isLarge || (typeof value === 'object' && value !== null && Symbol.asyncIterator in value)) {
      await out.text(`${text}"`);
      text = '';
      const slices = isLarge ? piecesOf(value) : (value as Slices);
      for await (const slice of slices) {
        await out.text(Buffer.from(slice.buffer, slice.byteOffset, slice.byteLength).toString('base64'));
      }
      text = '"';
    } else {
      text += JSON.stringify(toDatasetValue(value));
    }
  }
  await out.text(`${text}}`);
}

async function* piecesOf(value: Uint8Array): Slices {
  for (let at = 0; at < value.length; at += SLICE_BYTES) yield value.subarray(at, at + SLICE_BYTES);
}

/**
 * The binary value `column` of `row`, of `bytes` bytes, read slice by slice; refused if its size changed
 * meanwhile (a value replaced during the export).
 */
async function* readSlices(
  db: Kysely<LooseDb>,
  table: DatasetTable,
  row: Record<string, unknown>,
  column: string,
  bytes: number,
): Slices {
  const keyColumn = TABLE_SPECS[table].primaryKey[0]!;
  for (let at = 0; at < bytes; at += SLICE_BYTES) {
    const found = await db
      .selectFrom(table)
      .select([
        sql<Uint8Array>`substr(${sql.ref(column)}, ${at + 1}, ${SLICE_BYTES})`.as('slice'),
        sql<number>`length(${sql.ref(column)})`.as('size'),
      ])
      .where(keyColumn, '=', row[keyColumn])
      .executeTakeFirst();
    if (found === undefined || Number(found.size) !== bytes) {
      throw new Error(
        `${table}.${column} of ${keyColumn} ${String(row[keyColumn])} changed during the export`,
      );
    }
    yield found.slice;
  }
}

/** A row, and its binary values left out to be read in slices (column -> size in bytes). */
interface ExportRow {
  readonly row: Record<string, unknown>;
  readonly sliced?: ReadonlyMap<string, number>;
}

/**
 * The rows of `table` in primary-key order, page by page (keyset pages for one-column keys; the
 * composite-key tables are the small RBAC links). Pages of a table with binary columns hold at most
 * about {@link PAGE_BYTES} of them: the sizes are read first, then the rows that fit; a binary value
 * over {@link SLICE_BYTES} is left out of the page (read as null), to be read in slices.
 */
async function* readRows(
  db: Kysely<LooseDb>,
  table: DatasetTable,
  columns: TableColumns,
): AsyncGenerator<ExportRow> {
  const key = TABLE_SPECS[table].primaryKey;
  if (key.length !== 1) {
    let query = db.selectFrom(table).selectAll();
    for (const c of key) query = query.orderBy(c);
    for (const row of await query.execute()) yield { row };
    return;
  }
  const keyColumn = key[0]!;
  const blobs = [...columns.values()].filter((c) => c.kind === 'blob').map((c) => c.name);
  // length() is the size in bytes of a BLOB on SQLite, of a bytea on PostgreSQL, of a blob on MySQL.
  const lengthOf = (column: string) => sql<number>`coalesce(length(${sql.ref(column)}), 0)`;
  let after: unknown;
  for (;;) {
    let keys: unknown[] | undefined;
    if (blobs.length > 0) {
      let sizes = db
        .selectFrom(table)
        .select([sql.ref(keyColumn).as('key'), ...blobs.map((b, i) => lengthOf(b).as(`size${i}`))])
        .orderBy(keyColumn)
        .limit(PAGE_ROWS);
      if (after !== undefined) sizes = sizes.where(keyColumn, '>', after);
      const found = await sizes.execute();
      if (found.length === 0) return;
      keys = [];
      let bytes = 0;
      for (const r of found) {
        // Values read in slices take no room in the page.
        const rowBytes = blobs.reduce((sum, _b, i) => {
          const size = Number(r[`size${i}`]);
          return size > SLICE_BYTES ? sum : sum + size;
        }, 0);
        if (keys.length > 0 && bytes + rowBytes > PAGE_BYTES) break;
        keys.push(r.key);
        bytes += rowBytes;
      }
    }
    let query = db.selectFrom(table).orderBy(keyColumn);
    // The keys that fit, as a range: one statement shape whatever their number.
    if (keys !== undefined) {
      query = query.where(keyColumn, '>=', keys[0]).where(keyColumn, '<=', keys.at(-1));
    } else {
      if (after !== undefined) query = query.where(keyColumn, '>', after);
      query = query.limit(PAGE_ROWS);
    }
    // A large value is left out (null) and its size read beside it: the statement decides, row by row.
    const isBlob = new Set(blobs);
    const rows = await query
      .select([
        ...[...columns.keys()].map((c) =>
          isBlob.has(c)
            ? sql`case when ${lengthOf(c)} > ${SLICE_BYTES} then null else ${sql.ref(c)} end`.as(c)
            : sql.ref(c).as(c),
        ),
        ...blobs.map((b, i) => lengthOf(b).as(`dataset_export_size${i}`)),
      ])
      .execute();
    for (const row of rows) {
      const large = new Map<string, number>();
      blobs.forEach((b, i) => {
        const size = Number(row[`dataset_export_size${i}`]);
        if (size > SLICE_BYTES) large.set(b, size);
      });
      yield large.size === 0 ? { row } : { row, sliced: large };
    }
    if (rows.length === 0 || (keys === undefined && rows.length < PAGE_ROWS)) return;
    after = keys === undefined ? rows.at(-1)![keyColumn] : keys.at(-1);
  }
}
