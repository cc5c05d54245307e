/**
 * Dataset import (shared/spec/dataset-format.md): validates the whole document, then writes it in one
 * transaction in foreign-key order. Any problem aborts with errors naming table, row index and column,
 * and leaves the database and the file store as they were.
 *
 * Rows whose primary key already exists with exactly the same values are skipped, so that an export
 * (which includes the reference rows the migrations seed) imports into any migrated database. A row whose
 * key exists with different values is a duplicate-key error, or an update with `upsert`.
 */
import type { Kysely, Transaction } from 'kysely';
import { sql } from 'kysely';
import type { Database } from '../../db/database.ts';
import type { FileStore } from '../../files/file-store.ts';
import { hashPassword } from '../user/index.ts';
import type { ColumnInfo, TableColumns } from './columns.ts';
import { ValueError, decodeBase64, isSameValue, readTableColumns, toColumnValue } from './columns.ts';
import type { DatasetProblem } from './dataset-errors.ts';
import { DatasetError, ProblemList } from './dataset-errors.ts';
import { FILE_UID, removeStoredFile, writeStoredFile } from './file-contents.ts';
import type { TableSpec } from './table-specs.ts';
import type { DatasetTable } from './table-specs.ts';
import { TABLES_IN_DEPENDENCY_ORDER, TABLE_SPECS, isTableName } from './table-specs.ts';

export const DATASET_FORMAT = 'clinical-records-dataset/1';

export interface ImportOptions {
  /** Update rows whose primary key exists instead of refusing them. */
  readonly upsert?: boolean;
}

export interface TableImportCount {
  inserted: number;
  updated: number;
  /** Rows already present with the same values. */
  unchanged: number;
}

export interface ImportSummary {
  readonly tables: Partial<Record<DatasetTable, TableImportCount>>;
  readonly filesWritten: number;
}

// Tables are reached by name at run time, so the importer uses Kysely untyped.
type LooseDb = Record<string, Record<string, unknown>>;
type LooseTrx = Transaction<LooseDb>;
type Values = Record<string, unknown>;

interface PreparedRow {
  readonly index: number;
  readonly values: Values;
  /** JSON of the primary key values; undefined when an auto-assigned id was omitted. */
  readonly key: string | undefined;
  /** `user_authentication.password`, hashed before the transaction. */
  plainPassword?: string;
  /** `protected_file.content`. */
  content?: Buffer;
  action?: 'insert' | 'update' | 'unchanged';
}

interface PreparedTable {
  readonly table: DatasetTable;
  readonly spec: TableSpec;
  readonly columns: TableColumns;
  readonly rows: PreparedRow[];
}

export interface ImportDeps {
  readonly database: Database;
  readonly files: FileStore;
}

/** Parses dataset JSON text and imports it. */
export async function importDatasetText(
  deps: ImportDeps,
  text: string,
  options: ImportOptions = {},
): Promise<ImportSummary> {
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (error) {
    throw new DatasetError([{ message: `not valid JSON (${(error as Error).message})` }]);
  }
  return importDataset(deps, document, options);
}

/** Imports a parsed dataset document in one transaction; throws {@link DatasetError} on any bad row. */
export async function importDataset(
  deps: ImportDeps,
  document: unknown,
  options: ImportOptions = {},
): Promise<ImportSummary> {
  const tables = await prepareDocument(deps.database, document);
  for (const prepared of tables) {
    for (const row of prepared.rows) {
      if (row.plainPassword !== undefined) row.values.password_hash = await hashPassword(row.plainPassword);
    }
  }
  const createdFiles: string[] = [];
  const summary: ImportSummary = { tables: {}, filesWritten: 0 };
  const db = deps.database.db as unknown as Kysely<LooseDb>;
  try {
    await db.transaction().execute(async (trx) => {
      await checkAgainstDatabase(trx, tables, options);
      for (const prepared of tables) {
        summary.tables[prepared.table] = await writeTable(trx, deps, prepared, createdFiles);
      }
      for (const prepared of tables) await moveIdGenerator(deps, trx, prepared);
    });
  } catch (error) {
    for (const uid of createdFiles) await removeStoredFile(deps.files, uid);
    throw error;
  }
  return { ...summary, filesWritten: createdFiles.length };
}

/** Shape, column and value checks that need no data: everything but keys and references. */
async function prepareDocument(database: Database, document: unknown): Promise<PreparedTable[]> {
  const problems = new ProblemList();
  if (!isPlainObject(document)) throw new DatasetError([{ message: 'expected a JSON object' }]);
  if (document.format !== DATASET_FORMAT) {
    problems.add({ message: `"format" must be "${DATASET_FORMAT}"` });
  }
  for (const key of Object.keys(document)) {
    if (key !== 'format' && key !== 'tables') problems.add({ message: `unknown member "${key}"` });
  }
  const tablesValue = document.tables;
  if (!isPlainObject(tablesValue)) {
    problems.add({ message: '"tables" must be an object of table name -> array of rows' });
    problems.throwIfAny();
    return [];
  }
  const byName = new Map<DatasetTable, PreparedTable>();
  for (const [name, rowsValue] of Object.entries(tablesValue)) {
    if (!isTableName(name)) {
      problems.add({ table: name, message: 'unknown table' });
      continue;
    }
    if (!Array.isArray(rowsValue)) {
      problems.add({ table: name, message: 'expected an array of rows' });
      continue;
    }
    const prepared: PreparedTable = {
      table: name,
      spec: TABLE_SPECS[name],
      columns: await readTableColumns(database, name),
      rows: [],
    };
    byName.set(name, prepared);
    const seen = new Map<string, number>();
    (rowsValue as unknown[]).forEach((rowValue, index) => {
      if (problems.isFull) return;
      const row = prepareRow(prepared, rowValue, index, problems);
      if (row === undefined) return;
      if (row.key !== undefined) {
        const first = seen.get(row.key);
        if (first !== undefined) {
          problems.add({
            table: name,
            row: index,
            column: prepared.spec.primaryKey.join(','),
            message: `duplicate primary key ${row.key} (also in row ${first})`,
          });
          return;
        }
        seen.set(row.key, index);
      }
      prepared.rows.push(row);
    });
  }
  problems.throwIfAny();
  const ordered: PreparedTable[] = [];
  for (const table of TABLES_IN_DEPENDENCY_ORDER) {
    const prepared = byName.get(table);
    if (prepared !== undefined) ordered.push(orderSelfReferences(prepared, problems));
  }
  problems.throwIfAny();
  return ordered;
}

function prepareRow(
  prepared: PreparedTable,
  rowValue: unknown,
  index: number,
  problems: ProblemList,
): PreparedRow | undefined {
  const { table, columns, spec } = prepared;
  const at = (column: string | undefined, message: string): DatasetProblem =>
    column === undefined ? { table, row: index, message } : { table, row: index, column, message };
  if (!isPlainObject(rowValue)) {
    problems.add(at(undefined, 'expected an object'));
    return undefined;
  }
  const values: Values = {};
  const row: PreparedRow = { index, values, key: undefined };
  let isBad = false;
  for (const [column, value] of Object.entries(rowValue)) {
    if (table === 'user_authentication' && column === 'password') {
      if (typeof value !== 'string' || value === '') {
        problems.add(at(column, 'expected a non-empty string'));
        isBad = true;
      } else if (rowValue.password_hash !== undefined) {
        problems.add(at(column, 'give either password or password_hash, not both'));
        isBad = true;
      } else {
        row.plainPassword = value;
      }
      continue;
    }
    if (table === 'protected_file' && column === 'content') {
      try {
        if (typeof value !== 'string') throw new ValueError('expected base64 text');
        row.content = decodeBase64(value);
      } catch (error) {
        problems.add(at(column, (error as Error).message));
        isBad = true;
      }
      continue;
    }
    const info = columns.get(column);
    if (info === undefined) {
      problems.add(at(column, 'unknown column'));
      isBad = true;
      continue;
    }
    try {
      values[column] = toColumnValue(info, value);
    } catch (error) {
      if (!(error instanceof ValueError)) throw error;
      problems.add(at(column, error.message));
      isBad = true;
    }
  }
  for (const info of columns.values()) {
    if (info.isRequired && !(info.name in values) && !isBad) {
      const isHashed = table === 'user_authentication' && info.name === 'password_hash';
      if (!isHashed || row.plainPassword === undefined) {
        problems.add(at(info.name, 'missing; the column has no default'));
        isBad = true;
      }
    }
  }
  const missingKey = spec.primaryKey.filter((c) => values[c] === undefined || values[c] === null);
  if (missingKey.length > 0) {
    const isAutoId = spec.primaryKey.length === 1 && columns.get(spec.primaryKey[0]!)?.isSerial === true;
    if (!isAutoId) {
      problems.add(at(missingKey[0], 'primary key column missing'));
      isBad = true;
    }
  }
  if (table === 'protected_file' && row.content !== undefined) {
    if (typeof values.uid !== 'string' || !FILE_UID.test(values.uid)) {
      problems.add(at('uid', 'a row with content needs a 40-hex uid'));
      isBad = true;
    }
  }
  if (isBad) return undefined;
  return { ...row, key: missingKey.length > 0 ? undefined : keyOf(spec, values) };
}

function keyOf(spec: TableSpec, values: Values): string {
  return JSON.stringify(spec.primaryKey.map((c) => values[c]));
}

/** Rows of a self-referencing table (event.parent_id) come after the rows they reference. */
function orderSelfReferences(prepared: PreparedTable, problems: ProblemList): PreparedTable {
  const selfColumns = Object.entries(prepared.spec.references)
    .filter(([, target]) => target.table === prepared.table)
    .map(([column, target]) => [column, target.column] as const);
  if (selfColumns.length === 0) return prepared;
  const inDocument = new Set<unknown>();
  for (const [, targetColumn] of selfColumns) {
    for (const row of prepared.rows) inDocument.add(row.values[targetColumn]);
  }
  const placed = new Set<unknown>();
  const ordered: PreparedRow[] = [];
  let pending = prepared.rows;
  while (pending.length > 0) {
    const next: PreparedRow[] = [];
    for (const row of pending) {
      const isReady = selfColumns.every(([column]) => {
        const target = row.values[column];
        return target === null || target === undefined || !inDocument.has(target) || placed.has(target);
      });
      if (isReady) {
        ordered.push(row);
        for (const [, targetColumn] of selfColumns) placed.add(row.values[targetColumn]);
      } else {
        next.push(row);
      }
    }
    if (next.length === pending.length) {
      problems.add({
        table: prepared.table,
        row: next[0]!.index,
        column: selfColumns[0]![0],
        message: 'rows reference each other in a cycle',
      });
      return prepared;
    }
    pending = next;
  }
  return { ...prepared, rows: ordered };
}

/** Duplicate keys and broken references, read inside the import transaction. */
async function checkAgainstDatabase(
  trx: LooseTrx,
  tables: readonly PreparedTable[],
  options: ImportOptions,
): Promise<void> {
  const problems = new ProblemList();
  const byName = new Map(tables.map((t) => [t.table, t]));
  for (const prepared of tables) {
    const existing = await findExisting(trx, prepared);
    for (const row of prepared.rows) {
      if (row.key === undefined) {
        row.action = 'insert';
        continue;
      }
      const current = existing.get(row.key);
      if (current === undefined) row.action = 'insert';
      else if (Object.entries(row.values).every(([c, v]) => isSameValue(v, current[c])))
        row.action = 'unchanged';
      else if (options.upsert === true) row.action = 'update';
      else {
        problems.add({
          table: prepared.table,
          row: row.index,
          column: prepared.spec.primaryKey.join(','),
          message: `duplicate key: ${row.key} already exists with different values (--upsert replaces it)`,
        });
      }
    }
  }
  for (const prepared of tables) {
    for (const [column, target] of Object.entries(prepared.spec.references)) {
      const targetRows = byName.get(target.table)?.rows ?? [];
      const known = new Set(targetRows.map((r) => r.values[target.column]));
      const wanted = new Set<unknown>();
      for (const row of prepared.rows) {
        const value = row.values[column];
        if (value !== null && value !== undefined && !known.has(value)) wanted.add(value);
      }
      if (wanted.size === 0) continue;
      const found = new Set<unknown>();
      for (const chunk of chunks([...wanted], 500)) {
        const rows = await trx
          .selectFrom(target.table)
          .select(target.column)
          .where(target.column, 'in', chunk)
          .execute();
        for (const r of rows) found.add(r[target.column]);
      }
      for (const row of prepared.rows) {
        const value = row.values[column];
        if (wanted.has(value) && !found.has(value)) {
          problems.add({
            table: prepared.table,
            row: row.index,
            column,
            message: `broken reference: no ${target.table}.${target.column} = ${JSON.stringify(value)}`,
          });
        }
      }
    }
  }
  problems.throwIfAny();
}

async function findExisting(trx: LooseTrx, prepared: PreparedTable): Promise<Map<string, Values>> {
  const { spec, table } = prepared;
  const keyed = prepared.rows.filter((r) => r.key !== undefined);
  const existing = new Map<string, Values>();
  const size = spec.primaryKey.length === 1 ? 500 : 100;
  for (const chunk of chunks(keyed, size)) {
    const rows = await trx
      .selectFrom(table)
      .selectAll()
      .where((eb) =>
        spec.primaryKey.length === 1
          ? eb(
              spec.primaryKey[0]!,
              'in',
              chunk.map((r) => r.values[spec.primaryKey[0]!]),
            )
          : eb.or(chunk.map((r) => eb.and(spec.primaryKey.map((c) => eb(c, '=', r.values[c]))))),
      )
      .execute();
    for (const r of rows) existing.set(keyOf(spec, r), r);
  }
  return existing;
}

async function writeTable(
  trx: LooseTrx,
  deps: ImportDeps,
  prepared: PreparedTable,
  createdFiles: string[],
): Promise<TableImportCount> {
  const { table, spec, rows } = prepared;
  const count: TableImportCount = { inserted: 0, updated: 0, unchanged: 0 };
  const inserts = rows.filter((r) => r.action === 'insert');
  const withKey = inserts.filter((r) => r.key !== undefined);
  const withoutKey = inserts.filter((r) => r.key === undefined);
  await insertRows(trx, prepared, withKey);
  if (withoutKey.length > 0) {
    // Ids the database assigns must come after the ids the document gave.
    await moveIdGenerator(deps, trx, prepared);
    await insertRows(trx, prepared, withoutKey);
  }
  count.inserted = inserts.length;
  for (const row of rows) {
    if (row.action === 'unchanged') count.unchanged += 1;
    if (row.action !== 'update') continue;
    const set = Object.fromEntries(Object.entries(row.values).filter(([c]) => !spec.primaryKey.includes(c)));
    if (Object.keys(set).length > 0) {
      await runLocated(trx, prepared, row, () =>
        trx
          .updateTable(table)
          .set(set)
          .where((eb) => eb.and(spec.primaryKey.map((c) => eb(c, '=', row.values[c]))))
          .execute(),
      );
    }
    count.updated += 1;
  }
  if (table === 'protected_file') {
    for (const row of rows) {
      if (row.content === undefined) continue;
      try {
        if (await writeStoredFile(deps.files, row.values.uid as string, row.content)) {
          createdFiles.push(row.values.uid as string);
        }
      } catch (error) {
        throw new DatasetError([
          { table, row: row.index, column: 'content', message: (error as Error).message },
        ]);
      }
    }
  }
  return count;
}

/**
 * Multi-row inserts of consecutive rows that give the same columns (Kysely would fill a column missing
 * from one row of a multi-row insert with NULL, not with the default).
 */
async function insertRows(
  trx: LooseTrx,
  prepared: PreparedTable,
  rows: readonly PreparedRow[],
): Promise<void> {
  let start = 0;
  while (start < rows.length) {
    const signature = Object.keys(rows[start]!.values).join('\u0000');
    const columnCount = Math.max(1, Object.keys(rows[start]!.values).length);
    const perBatch = Math.max(1, Math.min(500, Math.floor(30_000 / columnCount)));
    let end = start + 1;
    while (
      end < rows.length &&
      end - start < perBatch &&
      Object.keys(rows[end]!.values).join('\u0000') === signature
    ) {
      end += 1;
    }
    const batch = rows.slice(start, end);
    await sql`savepoint dataset_batch`.execute(trx);
    try {
      await trx
        .insertInto(prepared.table)
        .values(batch.map((r) => r.values))
        .execute();
      await sql`release savepoint dataset_batch`.execute(trx);
    } catch {
      await sql`rollback to savepoint dataset_batch`.execute(trx);
      await sql`release savepoint dataset_batch`.execute(trx);
      // Find the row the database refused, to name it.
      for (const row of batch) {
        await runLocated(trx, prepared, row, () =>
          trx.insertInto(prepared.table).values(row.values).execute(),
        );
      }
    }
    start = end;
  }
}

/** Runs one row's statement; a database refusal becomes a problem naming that row. */
async function runLocated(
  trx: LooseTrx,
  prepared: PreparedTable,
  row: PreparedRow,
  statement: () => Promise<unknown>,
): Promise<void> {
  try {
    await statement();
  } catch (error) {
    throw new DatasetError([describeDatabaseError(prepared, row, error)]);
  }
}

function describeDatabaseError(prepared: PreparedTable, row: PreparedRow, error: unknown): DatasetProblem {
  const e = error as { message?: string; detail?: string; column?: string; code?: string };
  const message = e.message ?? String(error);
  // PostgreSQL: detail "Key (key)=(x) already exists." / column; SQLite: "UNIQUE constraint failed: t.c".
  const fromDetail = e.detail === undefined ? undefined : /Key \(([^)]+)\)/.exec(e.detail)?.[1];
  const fromSqlite = /constraint failed: ([\w.]+(?:, [\w.]+)*)/.exec(message)?.[1];
  const simpleColumns = (list: string | undefined): string | undefined => {
    const names = list?.split(/,\s*/).filter((c) => /^\w+$/.test(c));
    return names === undefined || names.length === 0 ? undefined : names.join(',');
  };
  const column =
    e.column ??
    simpleColumns(fromDetail) ??
    fromSqlite
      ?.split(', ')
      .map((c) => c.replace(/^\w+\./, ''))
      .join(',');
  const kind = /unique|duplicate/i.test(message) || e.code === '23505' ? 'duplicate key: ' : '';
  return {
    table: prepared.table,
    row: row.index,
    ...(column !== undefined ? { column } : {}),
    message: `${kind}${message}${e.detail !== undefined ? ` (${e.detail})` : ''}`,
  };
}

/** PostgreSQL: the serial sequence moves past the highest id, so later inserts never collide. */
async function moveIdGenerator(deps: ImportDeps, trx: LooseTrx, prepared: PreparedTable): Promise<void> {
  const serial = [...prepared.columns.values()].find((c: ColumnInfo) => c.isSerial);
  if (serial === undefined) return;
  await deps.database.dialect.resetIdGenerator(trx, prepared.table, serial.name);
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
