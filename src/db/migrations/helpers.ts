/**
 * Column helpers shared by the migrations. The OpenEyes MySQL types are mapped to portable ones
 * (the dialect's `columnTypes`): flags are small integers, date-times are
 * `timestamp` on PostgreSQL, `datetime` on MySQL and ISO text on SQLite, binaries are `bytea` / BLOB /
 * `longblob`, long text is `text` (`longtext` on MySQL).
 */
import type { ColumnDefinitionBuilder, CreateTableBuilder, Kysely } from 'kysely';
import { sql } from 'kysely';
import type { ColumnTypes, DialectAdapter } from '../dialect.ts';

export type { ColumnTypes, DialectAdapter };

// Migrations run against every table, so they are typed loosely on purpose.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyDb = Kysely<any>;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyTable = CreateTableBuilder<any, any>;

export function idColumn(table: AnyTable, types: ColumnTypes, name = 'id'): AnyTable {
  return table.addColumn(name, types.id, (c) =>
    types.id === 'integer' ? c.primaryKey().autoIncrement() : c.primaryKey(),
  );
}

export const OLD_DATE = '1901-01-01 00:00:00';

/** The OpenEyes audit columns: who and when, defaulting to the system user 1, which can never log in. */
export function auditColumns(
  table: AnyTable,
  types: ColumnTypes,
  dateType: 'dateTime' | 'date' = 'dateTime',
): AnyTable {
  const type = types[dateType];
  const fallback = dateType === 'date' ? '1900-01-01' : OLD_DATE;
  const user = (c: ColumnDefinitionBuilder) => c.notNull().defaultTo(1).references('user.id');
  const when = (c: ColumnDefinitionBuilder) => c.notNull().defaultTo(fallback);
  return table
    .addColumn('last_modified_user_id', 'integer', user)
    .addColumn('last_modified_date', type, when)
    .addColumn('created_user_id', 'integer', user)
    .addColumn('created_date', type, when);
}

export function flag(c: ColumnDefinitionBuilder, value: 0 | 1): ColumnDefinitionBuilder {
  return c.notNull().defaultTo(value);
}

/**
 * An index for case-insensitive lookups of `columns` (after `leadingColumns`, compared as they are): on
 * `lower(column)`, or on MySQL on the column itself, whose case-insensitive collation compares it (the
 * queries compare `DialectAdapter.foldedKey`).
 */
export async function lowerIndex(
  db: AnyDb,
  dialect: DialectAdapter,
  name: string,
  table: string,
  columns: readonly string[],
  options: { leadingColumns?: readonly string[] } = {},
): Promise<void> {
  const parts = [
    ...(options.leadingColumns ?? []).map((c) => sql.ref(c)),
    ...columns.map((c) => (dialect.name === 'mysql' ? sql.ref(c) : sql`lower(${sql.ref(c)})`)),
  ];
  await sql`create index ${sql.id(name)} on ${sql.table(table)} (${sql.join(parts)})`.execute(db);
}
