/**
 * `INSERT ... ON CONFLICT`, which SQLite and PostgreSQL share (MySQL has `ON DUPLICATE KEY UPDATE`).
 */
import type { InsertQueryBuilder, RawBuilder } from 'kysely';
import { sql } from 'kysely';
import type { DialectAdapter } from '../dialect.ts';

type OnConflictPart = Pick<DialectAdapter, 'insertOrIgnore' | 'upsert' | 'insertedValue' | 'existingValue'>;

export const onConflict: OnConflictPart = {
  insertOrIgnore: <DB, TB extends keyof DB, O>(
    insert: InsertQueryBuilder<DB, TB, O>,
    columns: readonly string[],
  ) =>
    // eslint-disable-next-line @typescript-eslint/no-explicit-any, @typescript-eslint/no-unsafe-argument
    insert.onConflict((oc) => oc.columns(columns as any).doNothing()),
  upsert: <DB, TB extends keyof DB, O>(
    insert: InsertQueryBuilder<DB, TB, O>,
    columns: readonly string[],
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    update: any,
  ) =>
    // eslint-disable-next-line @typescript-eslint/no-explicit-any, @typescript-eslint/no-unsafe-argument
    insert.onConflict((oc) => oc.columns(columns as any).doUpdateSet(update)),
  insertedValue: <T>(column: string): RawBuilder<T> => sql<T>`excluded.${sql.ref(column)}`,
  existingValue: <T>(table: string, column: string): RawBuilder<T> =>
    sql<T>`${sql.table(table)}.${sql.ref(column)}`,
};
