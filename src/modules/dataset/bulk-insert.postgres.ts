/**
 * PostgreSQL bulk insert: one array parameter per column and `INSERT ... SELECT * FROM unnest(...)`, so
 * a chunk of any size is one short statement with a handful of parameters (a multi-row VALUES list
 * would need one parameter per value, is capped at 65,535 of them and costs more to parse).
 */
import { sql } from 'kysely';
import type { BulkInserter } from './bulk-columns.ts';
import { BULK_COLUMNS } from './bulk-columns.ts';

export function createPostgresBulkInserter(): BulkInserter {
  return {
    async insert(trx, table, rows) {
      if (rows.length === 0) return;
      const columns = Object.entries(BULK_COLUMNS[table]);
      const arrays = columns.map(([, type], i) => sql`${rows.map((r) => r[i])}::${sql.raw(type)}[]`);
      await sql`insert into ${sql.table(table)} (${sql.join(columns.map(([c]) => sql.ref(c)))})
        select * from unnest(${sql.join(arrays)})`.execute(trx);
    },
  };
}
