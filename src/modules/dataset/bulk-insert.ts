/**
 * Bulk inserts of generated rows (demo population): rows are arrays of values in the column order of
 * `bulk-columns.ts`. The statement differs by dialect (bulk-insert.sqlite.ts, bulk-insert.postgres.ts);
 * this file picks one.
 */
import type { Database } from '../../db/database.ts';
import type { BulkInserter } from './bulk-columns.ts';
import { createPostgresBulkInserter } from './bulk-insert.postgres.ts';
import { createSqliteBulkInserter } from './bulk-insert.sqlite.ts';

export type { BulkInserter, BulkTable } from './bulk-columns.ts';

export function createBulkInserter(database: Database): BulkInserter {
  return database.dialect === 'postgres'
    ? createPostgresBulkInserter()
    : createSqliteBulkInserter(database.db);
}
