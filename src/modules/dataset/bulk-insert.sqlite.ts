/**
 * SQLite bulk insert: a multi-row `INSERT ... VALUES` compiled once by Kysely per (table, row count) and
 * re-run with new parameters (the statement cache then reuses the prepared statement). SQLite has no
 * array parameters, so PostgreSQL's `unnest` form is not available.
 */
import type { Kysely } from 'kysely';
import { CompiledQuery } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { BulkInserter, BulkTable } from './bulk-columns.ts';
import { BULK_COLUMNS } from './bulk-columns.ts';

// Under SQLite's bound-parameter limit (32,766).
const MAX_PARAMETERS = 30_000;

export function createSqliteBulkInserter(db: Kysely<DB>): BulkInserter {
  const compiled = new Map<string, string>();
  const statementFor = (table: BulkTable, rows: number): string => {
    const cacheKey = `${table}:${rows}`;
    let text = compiled.get(cacheKey);
    if (text === undefined) {
      const row = Object.fromEntries(Object.keys(BULK_COLUMNS[table]).map((c) => [c, null]));
      // eslint-disable-next-line @typescript-eslint/no-explicit-any
      const loose = db as unknown as Kysely<any>;
      text = loose
        .insertInto(table)
        .values(Array.from({ length: rows }, () => row))
        .compile().sql;
      compiled.set(cacheKey, text);
    }
    return text;
  };
  return {
    async insert(trx, table, rows) {
      const perStatement = Math.floor(MAX_PARAMETERS / Object.keys(BULK_COLUMNS[table]).length);
      for (let start = 0; start < rows.length; start += perStatement) {
        const batch = rows.slice(start, start + perStatement);
        await trx.executeQuery(CompiledQuery.raw(statementFor(table, batch.length), batch.flat()));
      }
    },
  };
}
