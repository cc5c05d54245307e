/**
 * Dataset import (shared/spec/dataset-format.md), streamed: the document is read three times from its
 * file (`dataset-source.ts`) and never held whole in memory.
 * 1. Reading: the JSON grammar, `format`, and where each table's rows are.
 * 2. Checking: every row against its table's columns (types, required columns, keys given twice in the
 *    document), plain passwords hashed. Any problem refuses the document before anything is written,
 *    the errors naming table, row index and column.
 * 3. Writing: one transaction, table by table in foreign-key order whatever the order of the tables in
 *    the document, in batches: keys against the database, references, inserts and updates. A problem
 *    found here (a broken reference, a duplicate key) rolls everything back and removes the files the
 *    import wrote, so the database and the file store are as they were.
 * Memory is bounded by a batch (at most 500 rows and about 8 MB of values) and the largest single row,
 * plus a bit per row for the keys of the document (to refuse keys given twice).
 *
 * Rows whose primary key already exists with exactly the same values are skipped, so that an export
 * (which includes the reference rows the migrations seed) imports into any migrated database. A row whose
 * key exists with different values is a duplicate-key error, or an update with `upsert`; except the
 * reference rows the migrations seed (queues, request types, routines, MIME and attachment types, body
 * sites, RBAC items, settings, the system user), which take the dataset's values: the service changes
 * some of them as it runs (a queue's counters), and a backup must restore into a new database.
 *
 * Rows that reference a row of their own table that comes later (`event.parent_id`) are written with the
 * reference empty and completed once the table is written, so any order of rows works.
 */
import type { Kysely, Transaction } from 'kysely';
import { sql } from 'kysely';
import type { Database } from '../../db/database.ts';
import { hasLargeBlob } from '../../db/dialects/multi-row-insert.ts';
import { AppError } from '../../errors.ts';
import type { FileStore } from '../../files/file-store.ts';
import type { PasswordPolicy } from '../user/index.ts';
import { findPasswordProblems, hashPassword } from '../user/index.ts';
import type { ColumnInfo, TableColumns } from './columns.ts';
import { ValueError, decodeBase64, isSameValue, readTableColumns, toColumnValue } from './columns.ts';
import type { DatasetProblem } from './dataset-errors.ts';
import { DatasetError, ProblemList, formatProblem } from './dataset-errors.ts';
import { Base64Value, LongValueSizes } from './dataset-strings.ts';
import type { DatasetSource, DocumentOutline, TableRange } from './dataset-source.ts';
import { bufferSource, fileSource, readTableRows, scanDocument } from './dataset-source.ts';
import { FILE_UID, removeStoredFile, writeStoredFile } from './file-contents.ts';
import type { DatasetTable, TableSpec } from './table-specs.ts';
import { TABLES_IN_DEPENDENCY_ORDER, TABLE_SPECS, isTableName } from './table-specs.ts';

export const DATASET_FORMAT = 'clinical-records-dataset/1';

/** The passes of an import, for progress: bytes read, bytes checked, rows written. */
export type ImportPhase = 'reading' | 'checking' | 'writing';

export interface ImportOptions {
  /** Update rows whose primary key exists instead of refusing them. */
  readonly upsert?: boolean;
  /** Progress of each pass: `done` of `total` (bytes for reading and checking, rows for writing). */
  readonly onProgress?: (phase: ImportPhase, done: number, total: number) => void;
  /** Remarks that do not stop the import (plain passwords the policy would refuse). */
  readonly onWarning?: (message: string) => void;
  /** The policy plain passwords are compared with, for the warnings; none: no warnings. */
  readonly passwordPolicy?: PasswordPolicy;
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

export interface ImportDeps {
  readonly database: Database;
  readonly files: FileStore;
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
  /** `user_authentication.password`, hashed in the checking pass. */
  plainPassword?: string;
  /** `protected_file.content`. */
  content?: Buffer;
  action?: 'insert' | 'update' | 'unchanged';
}

/** What the checking pass learnt of one table. */
interface TablePlan {
  readonly table: DatasetTable;
  readonly spec: TableSpec;
  readonly columns: TableColumns;
  readonly range: TableRange;
  /** Columns that reference this same table, with the column they reference. */
  readonly selfReferences: readonly (readonly [string, string])[];
  rowCount: number;
  /** Rows that omit an auto-assigned id (written after the others). */
  keylessCount: number;
  /** Row index -> bcrypt hash of its plain password (`user_authentication`). */
  readonly hashes: Map<number, string>;
  /** Sizes of the table's large binary values, learnt by the checking pass for the writing pass. */
  readonly sizes: LongValueSizes;
}

/** Tables the migrations seed: their rows take the dataset's values (see the header). */
const SEEDED_TABLES: ReadonlySet<DatasetTable> = new Set<DatasetTable>([
  'authitem',
  'authitemchild',
  'mime_type',
  'attachment_type',
  'body_site_type',
  'request_queue',
  'routine_library',
  'request_type',
  'setting_metadata',
  'setting_installation',
]);
const SYSTEM_USER_ID = 1;

function isSeededRow(table: DatasetTable, values: Values): boolean {
  return SEEDED_TABLES.has(table) || (table === 'user' && values.id === SYSTEM_USER_ID);
}

const BATCH_ROWS = 500;
const BATCH_BYTES = 8 * 1024 * 1024;

/** Imports a parsed dataset document (tests, small documents); see {@link importDatasetFrom}. */
export async function importDataset(
  deps: ImportDeps,
  document: unknown,
  options: ImportOptions = {},
): Promise<ImportSummary> {
  if (typeof document !== 'object' || document === null || Array.isArray(document)) {
    throw new DatasetError([{ message: 'expected a JSON object' }]);
  }
  return importDatasetFrom(deps, bufferSource(Buffer.from(JSON.stringify(document))), options);
}

/** Imports the dataset file `file`, streamed. */
export async function importDatasetFile(
  deps: ImportDeps,
  file: string,
  options: ImportOptions = {},
): Promise<ImportSummary> {
  return importDatasetFrom(deps, await fileSource(file), options);
}

/** Imports a dataset in one transaction; throws {@link DatasetError} on any bad row, having changed nothing. */
export async function importDatasetFrom(
  deps: ImportDeps,
  source: DatasetSource,
  options: ImportOptions = {},
): Promise<ImportSummary> {
  const outline = await scanDocument(source, (bytes) =>
    options.onProgress?.('reading', bytes, source.sizeBytes),
  );
  const plans = await checkDocument(deps, source, outline, options);
  const totalRows = plans.reduce((sum, p) => sum + p.rowCount, 0);
  const createdFiles: string[] = [];
  const tables: Partial<Record<DatasetTable, TableImportCount>> = {};
  const db = deps.database.db as unknown as Kysely<LooseDb>;
  let rowsDone = 0;
  try {
    await db.transaction().execute(async (trx) => {
      for (const plan of plans) {
        tables[plan.table] = await writeTable(trx, deps, source, plan, options, createdFiles, (rows) => {
          rowsDone += rows;
          options.onProgress?.('writing', rowsDone, totalRows);
        });
      }
      for (const plan of plans) await moveIdGenerator(deps, trx, plan);
    });
  } catch (error) {
    for (const uid of createdFiles) await removeStoredFile(deps.files, uid);
    throw error;
  }
  return { tables, filesWritten: createdFiles.length };
}

/** The checking pass: everything that needs no data. Returns the tables in foreign-key order. */
async function checkDocument(
  deps: ImportDeps,
  source: DatasetSource,
  outline: DocumentOutline,
  options: ImportOptions,
): Promise<TablePlan[]> {
  const problems = new ProblemList();
  if (outline.format !== DATASET_FORMAT) problems.add({ message: `"format" must be "${DATASET_FORMAT}"` });
  for (const key of outline.unknownMembers) problems.add({ message: `unknown member "${key}"` });
  if (!outline.hasTablesObject) {
    problems.add({ message: '"tables" must be an object of table name -> array of rows' });
    problems.throwIfAny();
  }
  for (const name of outline.repeatedTables) problems.add({ table: name, message: 'table given twice' });
  const totalBytes = [...outline.tables.values()].reduce(
    (sum, r) => sum + (r === 'not an array' ? 0 : r.end - r.start),
    0,
  );
  let bytesChecked = 0;
  const byName = new Map<DatasetTable, TablePlan>();
  for (const [name, range] of outline.tables) {
    if (!isTableName(name)) {
      problems.add({ table: name, message: 'unknown table' });
      continue;
    }
    if (range === 'not an array') {
      problems.add({ table: name, message: 'expected an array of rows' });
      continue;
    }
    const spec = TABLE_SPECS[name];
    const plan: TablePlan = {
      table: name,
      spec,
      columns: await readTableColumns(deps.database, name),
      range,
      selfReferences: Object.entries(spec.references)
        .filter(([, target]) => target.table === name)
        .map(([column, target]) => [column, target.column] as const),
      rowCount: 0,
      keylessCount: 0,
      hashes: new Map(),
      sizes: new LongValueSizes(),
    };
    byName.set(name, plan);
    const seen = createKeySet();
    for await (const { index, value } of readTableRows(source, range, plan.sizes)) {
      plan.rowCount += 1;
      if (problems.isFull) continue;
      const row = prepareRow(plan, value, index, problems);
      if (row === undefined) continue;
      if (row.key === undefined) plan.keylessCount += 1;
      else if (!seen.add(seenKeyOf(spec, row))) {
        problems.add({
          table: name,
          row: index,
          column: spec.primaryKey.join(','),
          message: `duplicate primary key ${row.key} (given earlier in the document)`,
        });
        continue;
      }
      if (row.plainPassword !== undefined) {
        await warnOfWeakPassword(plan, row, options);
        try {
          plan.hashes.set(index, await hashPassword(row.plainPassword));
        } catch (error) {
          // bcrypt cannot hash it faithfully (over 72 bytes): refused, where it is.
          if (!(error instanceof AppError)) throw error;
          problems.add({ table: name, row: index, column: 'password', message: error.message });
        }
      }
    }
    bytesChecked += range.end - range.start;
    options.onProgress?.('checking', bytesChecked, totalBytes);
  }
  problems.throwIfAny();
  return TABLES_IN_DEPENDENCY_ORDER.flatMap((t) => {
    const plan = byName.get(t);
    return plan === undefined ? [] : [plan];
  });
}

/**
 * The keys of one table seen so far in the document. Whole-number keys (nearly every table's) take one bit
 * each in a bitmap, so that checking a table of millions of rows costs a few hundred KB; other keys (the
 * composite RBAC links, names) are kept as text.
 */
function createKeySet(): { add(key: string | number): boolean } {
  const MAX_BITMAP_ID = 1 << 27; // 16 MiB of bitmap at most
  let bits = new Uint8Array(1024);
  const others = new Set<string | number>();
  return {
    add(key) {
      if (typeof key === 'number' && Number.isInteger(key) && key >= 0 && key < MAX_BITMAP_ID) {
        const byte = key >>> 3;
        if (byte >= bits.length) {
          const grown = new Uint8Array(Math.max(byte + 1, bits.length * 2));
          grown.set(bits);
          bits = grown;
        }
        const mask = 1 << (key & 7);
        if ((bits[byte]! & mask) !== 0) return false;
        bits[byte]! |= mask;
        return true;
      }
      if (others.has(key)) return false;
      others.add(key);
      return true;
    },
  };
}

function seenKeyOf(spec: TableSpec, row: PreparedRow): string | number {
  const only = spec.primaryKey.length === 1 ? row.values[spec.primaryKey[0]!] : undefined;
  return typeof only === 'number' ? only : row.key!;
}

/** Dataset import accepts the accounts it is given (it migrates existing ones), but says which are weak. */
async function warnOfWeakPassword(plan: TablePlan, row: PreparedRow, options: ImportOptions): Promise<void> {
  if (options.passwordPolicy === undefined || options.onWarning === undefined) return;
  const username = typeof row.values.username === 'string' ? row.values.username : '';
  const reasons = await findPasswordProblems(row.plainPassword!, username, options.passwordPolicy);
  if (reasons.length === 0) return;
  options.onWarning(
    formatProblem({
      table: plan.table,
      row: row.index,
      column: 'password',
      message: `the password of ${username} does not meet the password policy (${reasons.join('; ')}); imported as given`,
    }),
  );
}

function prepareRow(
  plan: TablePlan,
  rowValue: unknown,
  index: number,
  problems: ProblemList,
): PreparedRow | undefined {
  const { table, columns, spec } = plan;
  const at = (column: string | undefined, message: string): DatasetProblem =>
    column === undefined ? { table, row: index, message } : { table, row: index, column, message };
  if (!isPlainObject(rowValue)) {
    problems.add(at(undefined, 'expected an object'));
    return undefined;
  }
  const values: Values = {};
  const row: PreparedRow = { index, values, key: undefined };
  let isBad = false;
  for (const [column, given] of Object.entries(rowValue)) {
    const value = column === 'password' && given instanceof Base64Value ? given.toBase64() : given;
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
        if (typeof value !== 'string' && !(value instanceof Base64Value))
          throw new ValueError('expected base64 text');
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

/** Rough size of a row's values, to keep a batch's memory bounded. */
function sizeOf(row: PreparedRow): number {
  let size = 64 + (row.content?.length ?? 0);
  for (const value of Object.values(row.values)) {
    if (typeof value === 'string') size += value.length;
    else if (value instanceof Uint8Array) size += value.length;
    else size += 8;
  }
  return size;
}

/** A self reference whose target row was not there yet when its row was written. */
interface PendingReference {
  readonly index: number;
  readonly keyValues: Values;
  readonly column: string;
  readonly value: unknown;
}

/** The writing pass of one table: rows with their keys first, then rows that omit an auto-assigned id. */
async function writeTable(
  trx: LooseTrx,
  deps: ImportDeps,
  source: DatasetSource,
  plan: TablePlan,
  options: ImportOptions,
  createdFiles: string[],
  onRows: (rows: number) => void,
): Promise<TableImportCount> {
  const count: TableImportCount = { inserted: 0, updated: 0, unchanged: 0 };
  const pending: PendingReference[] = [];
  const knownTargets = new Map<string, Set<unknown>>();
  const sweeps = plan.keylessCount > 0 ? (['keyed', 'keyless'] as const) : (['keyed'] as const);
  for (const sweep of sweeps) {
    // Ids the database assigns must come after the ids the document gave.
    if (sweep === 'keyless') await moveIdGenerator(deps, trx, plan);
    let batch: PreparedRow[] = [];
    let batchBytes = 0;
    const flush = async (): Promise<void> => {
      if (batch.length === 0) return;
      await writeBatch(trx, deps, plan, batch, { options, createdFiles, count, pending, knownTargets });
      onRows(batch.length);
      batch = [];
      batchBytes = 0;
    };
    for await (const { index, value } of readTableRows(source, plan.range, plan.sizes)) {
      const problems = new ProblemList();
      const row = prepareRow(plan, value, index, problems);
      // The checking pass read the same bytes: a row it accepted is accepted again.
      if (row === undefined) throw new DatasetError(problems.items);
      if ((row.key === undefined) !== (sweep === 'keyless')) continue;
      const hash = plan.hashes.get(index);
      if (hash !== undefined) row.values.password_hash = hash;
      const rowBytes = sizeOf(row);
      // A large row does not join a batch that would then hold more than its bytes.
      if (batchBytes + rowBytes > BATCH_BYTES) await flush();
      batch.push(row);
      batchBytes += rowBytes;
      if (batch.length >= BATCH_ROWS || batchBytes >= BATCH_BYTES) await flush();
    }
    await flush();
  }
  await completeSelfReferences(trx, plan, pending);
  return count;
}

interface BatchContext {
  readonly options: ImportOptions;
  readonly createdFiles: string[];
  readonly count: TableImportCount;
  readonly pending: PendingReference[];
  /** `table.column` -> values known to exist (cleared when large). */
  readonly knownTargets: Map<string, Set<unknown>>;
}

async function writeBatch(
  trx: LooseTrx,
  deps: ImportDeps,
  plan: TablePlan,
  rows: PreparedRow[],
  context: BatchContext,
): Promise<void> {
  const { table, spec } = plan;
  const problems = new ProblemList();
  const existing = await findExisting(trx, plan, rows);
  for (const row of rows) {
    const current = row.key === undefined ? undefined : existing.get(row.key);
    if (current === undefined) row.action = 'insert';
    else if (Object.entries(row.values).every(([c, v]) => isSameValue(v, current[c])))
      row.action = 'unchanged';
    else if (context.options.upsert === true || isSeededRow(table, row.values)) row.action = 'update';
    else {
      problems.add({
        table,
        row: row.index,
        column: spec.primaryKey.join(','),
        message: `duplicate key: ${row.key} already exists with different values (--upsert replaces it)`,
      });
    }
  }
  await checkReferences(trx, plan, rows, problems, context);
  problems.throwIfAny();

  await insertRows(
    trx,
    plan,
    rows.filter((r) => r.action === 'insert'),
  );
  for (const row of rows) {
    if (row.action === 'insert') context.count.inserted += 1;
    if (row.action === 'unchanged') context.count.unchanged += 1;
    if (row.action !== 'update') continue;
    const set = Object.fromEntries(Object.entries(row.values).filter(([c]) => !spec.primaryKey.includes(c)));
    if (Object.keys(set).length > 0) {
      await runLocated(plan, row, () =>
        trx
          .updateTable(table)
          .set(set)
          .where((eb) => eb.and(spec.primaryKey.map((c) => eb(c, '=', row.values[c]))))
          .execute(),
      );
    }
    context.count.updated += 1;
  }
  if (table === 'protected_file') {
    for (const row of rows) {
      if (row.content === undefined) continue;
      try {
        if (await writeStoredFile(deps.files, row.values.uid as string, row.content)) {
          context.createdFiles.push(row.values.uid as string);
        }
      } catch (error) {
        throw new DatasetError([
          { table, row: row.index, column: 'content', message: (error as Error).message },
        ]);
      }
    }
  }
}

/**
 * References of a batch, read inside the import transaction: the referenced tables are written already
 * (foreign-key order). A reference to a row of the same table that is not there yet is written empty and
 * left to {@link completeSelfReferences}.
 */
async function checkReferences(
  trx: LooseTrx,
  plan: TablePlan,
  rows: readonly PreparedRow[],
  problems: ProblemList,
  context: BatchContext,
): Promise<void> {
  const written = rows.filter((r) => r.action === 'insert' || r.action === 'update');
  for (const [column, target] of Object.entries(plan.spec.references)) {
    const cacheKey = `${target.table}.${target.column}`;
    let known = context.knownTargets.get(cacheKey);
    if (known === undefined || known.size > 100_000) {
      known = new Set();
      context.knownTargets.set(cacheKey, known);
    }
    const wanted = new Set<unknown>();
    for (const row of written) {
      const value = row.values[column];
      if (value !== null && value !== undefined && !known.has(value)) wanted.add(value);
    }
    if (wanted.size === 0) continue;
    for (const chunk of chunks([...wanted], 500)) {
      const found = await trx
        .selectFrom(target.table)
        .select(target.column)
        .where(target.column, 'in', chunk)
        .execute();
      for (const r of found) known.add(r[target.column]);
    }
    const isSelf = target.table === plan.table;
    for (const row of written) {
      const value = row.values[column];
      if (value === null || value === undefined || known.has(value)) continue;
      if (isSelf) {
        context.pending.push({ index: row.index, keyValues: keyValuesOf(plan, row), column, value });
        row.values[column] = null;
        continue;
      }
      problems.add({
        table: plan.table,
        row: row.index,
        column,
        message: `broken reference: no ${target.table}.${target.column} = ${JSON.stringify(value)}`,
      });
    }
  }
}

function keyValuesOf(plan: TablePlan, row: PreparedRow): Values {
  return Object.fromEntries(plan.spec.primaryKey.map((c) => [c, row.values[c]]));
}

/** Sets the self references written empty, now that the whole table is written. */
async function completeSelfReferences(
  trx: LooseTrx,
  plan: TablePlan,
  pending: readonly PendingReference[],
): Promise<void> {
  const problems = new ProblemList();
  for (const p of pending) {
    const target = plan.selfReferences.find(([column]) => column === p.column)![1];
    const found = await trx
      .selectFrom(plan.table)
      .select(target)
      .where(target, '=', p.value)
      .executeTakeFirst();
    if (found === undefined) {
      problems.add({
        table: plan.table,
        row: p.index,
        column: p.column,
        message: `broken reference: no ${plan.table}.${target} = ${JSON.stringify(p.value)}`,
      });
      continue;
    }
    await trx
      .updateTable(plan.table)
      .set({ [p.column]: p.value })
      .where((eb) => eb.and(Object.entries(p.keyValues).map(([c, v]) => eb(c, '=', v))))
      .execute();
  }
  problems.throwIfAny();
}

async function findExisting(
  trx: LooseTrx,
  plan: TablePlan,
  rows: readonly PreparedRow[],
): Promise<Map<string, Values>> {
  const { spec, table } = plan;
  const keyed = rows.filter((r) => r.key !== undefined);
  const existing = new Map<string, Values>();
  const size = spec.primaryKey.length === 1 ? 500 : 100;
  for (const chunk of chunks(keyed, size)) {
    const found = await trx
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
    for (const r of found) existing.set(keyOf(spec, r), r);
  }
  return existing;
}

/**
 * Parameters of one multi-row insert. Statements are prepared and kept by the SQLite executor, and a
 * prepared statement's size grows with its parameters: small statements, of few distinct sizes, keep that
 * cache small, and cost no speed (a row's insert costs far more than its share of a statement).
 */
const INSERT_PARAMETERS = 2000;

/**
 * Multi-row inserts of consecutive rows that give the same columns (Kysely would fill a column missing
 * from one row of a multi-row insert with NULL, not with the default). A row with a large binary value
 * goes alone (`hasLargeBlob`, which says why).
 */
async function insertRows(trx: LooseTrx, plan: TablePlan, rows: readonly PreparedRow[]): Promise<void> {
  let start = 0;
  while (start < rows.length) {
    const signature = Object.keys(rows[start]!.values).join('\u0000');
    const columnCount = Math.max(1, Object.keys(rows[start]!.values).length);
    const perBatch = hasLargeBlob(rows[start]!.values)
      ? 1
      : Math.max(1, Math.min(100, Math.floor(INSERT_PARAMETERS / columnCount)));
    let end = start + 1;
    while (
      end < rows.length &&
      end - start < perBatch &&
      Object.keys(rows[end]!.values).join('\u0000') === signature &&
      !hasLargeBlob(rows[end]!.values)
    ) {
      end += 1;
    }
    // A run shorter than a full statement is cut to a power of two: each table then prepares a handful
    // of statement sizes, not one per run length.
    if (end - start < perBatch) end = start + 2 ** Math.floor(Math.log2(end - start));
    const batch = rows.slice(start, end);
    await sql`savepoint dataset_batch`.execute(trx);
    try {
      await trx
        .insertInto(plan.table)
        .values(batch.map((r) => r.values))
        .execute();
      await sql`release savepoint dataset_batch`.execute(trx);
    } catch {
      await sql`rollback to savepoint dataset_batch`.execute(trx);
      await sql`release savepoint dataset_batch`.execute(trx);
      // Find the row the database refused, to name it.
      for (const row of batch) {
        await runLocated(plan, row, () => trx.insertInto(plan.table).values(row.values).execute());
      }
    }
    start = end;
  }
}

/** Runs one row's statement; a database refusal becomes a problem naming that row. */
async function runLocated(
  plan: TablePlan,
  row: PreparedRow,
  statement: () => Promise<unknown>,
): Promise<void> {
  try {
    await statement();
  } catch (error) {
    throw new DatasetError([describeDatabaseError(plan, row, error)]);
  }
}

function describeDatabaseError(plan: TablePlan, row: PreparedRow, error: unknown): DatasetProblem {
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
    table: plan.table,
    row: row.index,
    ...(column !== undefined ? { column } : {}),
    message: `${kind}${message}${e.detail !== undefined ? ` (${e.detail})` : ''}`,
  };
}

/** The id generator (PostgreSQL's serial sequence) moves past the highest id, so later inserts never collide. */
async function moveIdGenerator(deps: ImportDeps, trx: LooseTrx, plan: TablePlan): Promise<void> {
  const serial = [...plan.columns.values()].find((c: ColumnInfo) => c.isSerial);
  if (serial === undefined) return;
  await deps.database.dialect.resetIdGenerator(trx, plan.table, serial.name);
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return (
    typeof value === 'object' && value !== null && !Array.isArray(value) && !(value instanceof Base64Value)
  );
}
