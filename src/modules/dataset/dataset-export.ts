/**
 * Dataset export: every table (or the named ones) in foreign-key order, every column, one row per line,
 * binaries as base64 and protected files with their content, so that importing the file into an empty
 * database gives the same rows. Rows are read in pages by primary key and written as they come, so
 * memory stays bounded; the file appears under its name only when complete.
 */
import { open, rename, rm } from 'node:fs/promises';
import type { Kysely } from 'kysely';
import type { ImportDeps } from './dataset-import.ts';
import { DATASET_FORMAT } from './dataset-import.ts';
import { readTableColumns, toDatasetValue } from './columns.ts';
import { readStoredFile } from './file-contents.ts';
import { TABLES_IN_DEPENDENCY_ORDER, TABLE_SPECS, isTableName } from './table-specs.ts';
import type { DatasetTable } from './table-specs.ts';

export interface ExportOptions {
  /** Only these tables; all when undefined. */
  readonly tables?: readonly string[];
}

export interface ExportSummary {
  readonly rows: Partial<Record<DatasetTable, number>>;
  /** protected_file rows whose file is missing from the store (exported without content). */
  readonly missingFiles: number;
}

type LooseDb = Record<string, Record<string, unknown>>;
const PAGE_ROWS = 1000;

/** Writes the dataset to `file` (atomically: a temporary file renamed into place). */
export async function exportDatasetToFile(
  deps: ImportDeps,
  file: string,
  options: ExportOptions = {},
): Promise<ExportSummary> {
  const temp = `${file}.${process.pid}.tmp`;
  const handle = await open(temp, 'w', 0o600);
  try {
    const summary = await exportDataset(
      deps,
      async (text) => {
        await handle.write(text);
      },
      options,
    );
    await handle.sync();
    await handle.close();
    await rename(temp, file);
    return summary;
  } catch (error) {
    await handle.close().catch(() => {});
    await rm(temp, { force: true });
    throw error;
  }
}

/** Streams the dataset as text chunks to `write`. Unknown table names are refused before anything. */
export async function exportDataset(
  deps: ImportDeps,
  write: (text: string) => Promise<void>,
  options: ExportOptions = {},
): Promise<ExportSummary> {
  const wanted = options.tables;
  if (wanted !== undefined) {
    const unknown = wanted.filter((t) => !isTableName(t));
    if (unknown.length > 0) throw new Error(`Unknown table(s): ${unknown.join(', ')}`);
  }
  const tables = TABLES_IN_DEPENDENCY_ORDER.filter((t) => wanted === undefined || wanted.includes(t));
  const db = deps.database.db as unknown as Kysely<LooseDb>;
  const summary: { rows: Partial<Record<DatasetTable, number>>; missingFiles: number } = {
    rows: {},
    missingFiles: 0,
  };
  await write(`{\n  "format": ${JSON.stringify(DATASET_FORMAT)},\n  "tables": {`);
  let isFirstTable = true;
  for (const table of tables) {
    const columns = [...(await readTableColumns(deps.database, table)).keys()];
    const key = TABLE_SPECS[table].primaryKey;
    await write(`${isFirstTable ? '' : ','}\n    ${JSON.stringify(table)}: [`);
    isFirstTable = false;
    let count = 0;
    let after: unknown;
    for (;;) {
      let query = db.selectFrom(table).selectAll();
      for (const c of key) query = query.orderBy(c);
      // Keyset pages for single-column keys; composite-key tables (RBAC links) are small.
      if (key.length === 1) {
        if (after !== undefined) query = query.where(key[0]!, '>', after);
        query = query.limit(PAGE_ROWS);
      }
      const rows = await query.execute();
      let text = '';
      for (const row of rows) {
        const out: Record<string, unknown> = {};
        for (const c of columns) out[c] = toDatasetValue(row[c]);
        if (table === 'protected_file') {
          const content = await readStoredFile(deps.files, String(row.uid));
          if (content === undefined) summary.missingFiles += 1;
          else out.content = content.toString('base64');
        }
        text += `${count === 0 ? '' : ','}\n      ${JSON.stringify(out)}`;
        count += 1;
      }
      if (text !== '') await write(text);
      if (key.length !== 1 || rows.length < PAGE_ROWS) break;
      after = rows[rows.length - 1]![key[0]!];
    }
    await write(count === 0 ? ']' : '\n    ]');
    summary.rows[table] = count;
  }
  await write('\n  }\n}\n');
  return summary;
}
