/**
 * Bulk insert as a multi-row `INSERT ... VALUES`, for engines without array parameters (SQLite, MySQL):
 * compiled once by Kysely per (table, row count) and re-run with new parameters, so that the engine's
 * statement cache reuses the prepared statement.
 */
import type { Kysely } from 'kysely';
import { CompiledQuery } from 'kysely';
import type { DialectAdapter } from '../dialect.ts';

/**
 * A row holding a binary value of this size or more is inserted by a statement of its own, never in a
 * multi-row INSERT: an engine may stage the rows of a multi-row INSERT before inserting them (SQLite does
 * for a table with triggers, as attachment_data has, in memory with `temp_store = MEMORY`), which would
 * hold one more copy of every value.
 */
export const LARGE_BLOB_BYTES = 1024 * 1024;

/** Whether `row` holds a binary value of {@link LARGE_BLOB_BYTES} or more: it goes in an INSERT of its own. */
export function hasLargeBlob(row: Readonly<Record<string, unknown>>): boolean {
  return Object.values(row).some((v) => v instanceof Uint8Array && v.length >= LARGE_BLOB_BYTES);
}

/** A bulk inserter that keeps each statement under `maxParameters` bound values. */
export function createMultiRowInsert(
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  db: Kysely<any>,
  maxParameters: number,
): DialectAdapter['bulkInsert'] {
  const compiled = new Map<string, string>();
  const statementFor = (table: string, columns: readonly string[], rows: number): string => {
    const cacheKey = `${table}:${columns.join(',')}:${rows}`;
    let text = compiled.get(cacheKey);
    if (text === undefined) {
      const row = Object.fromEntries(columns.map((c) => [c, null]));
      text = db
        .insertInto(table)
        .values(Array.from({ length: rows }, () => row))
        .compile().sql;
      if (compiled.size >= 200) compiled.delete(compiled.keys().next().value!);
      compiled.set(cacheKey, text);
    }
    return text;
  };
  return async (trx, table, columns, rows) => {
    const names = columns.map((c) => c.name);
    const perStatement = Math.max(1, Math.floor(maxParameters / names.length));
    for (let start = 0; start < rows.length; start += perStatement) {
      const batch = rows.slice(start, start + perStatement);
      await trx.executeQuery(CompiledQuery.raw(statementFor(table, names, batch.length), batch.flat()));
    }
  };
}
