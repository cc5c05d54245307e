/**
 * Bulk inserts of generated rows (demo population): rows are arrays of values in the column order given
 * here, inserted by the dialect's `bulkInsert`.
 */
import type { Transaction } from 'kysely';
import type { Database } from '../../db/database.ts';
import type { BulkColumn } from '../../db/dialect.ts';
import type { DB } from '../../db/schema.ts';

/** Column -> portable type (PostgreSQL's array element type). */
export const BULK_COLUMNS = {
  contact: {
    id: 'int4',
    first_name: 'text',
    last_name: 'text',
    created_date: 'timestamp',
    last_modified_date: 'timestamp',
  },
  patient: {
    id: 'int4',
    contact_id: 'int4',
    dob: 'date',
    gender: 'text',
    is_deceased: 'int4',
    date_of_death: 'date',
    deleted: 'int4',
    hos_num: 'text',
    nhs_num: 'text',
    primary_institution_id: 'int4',
    created_date: 'timestamp',
    last_modified_date: 'timestamp',
  },
  patient_identifier: {
    id: 'int4',
    patient_id: 'int4',
    patient_identifier_type_id: 'int4',
    value: 'text',
    source_info: 'text',
    deleted: 'int4',
    unique_row_string: 'text',
    created_date: 'timestamp',
    last_modified_date: 'timestamp',
  },
} as const;

export type BulkTable = keyof typeof BULK_COLUMNS;

export interface BulkInserter {
  /** Inserts `rows` (values in {@link BULK_COLUMNS} order) inside `trx`. */
  insert(trx: Transaction<DB>, table: BulkTable, rows: readonly unknown[][]): Promise<void>;
}

export function createBulkInserter(database: Database): BulkInserter {
  const columnsOf = (table: BulkTable): BulkColumn[] =>
    Object.entries(BULK_COLUMNS[table]).map(([name, type]) => ({ name, type }));
  return {
    insert: (trx, table, rows) => database.dialect.bulkInsert(trx, table, columnsOf(table), rows),
  };
}
