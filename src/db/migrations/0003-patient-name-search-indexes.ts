/**
 * PostgreSQL only: patient name search reads prefixes as ranges `lower(name) >= 'smi' and < 'smj'`. Those
 * ranges mean "starts with" only in code-point order. A database created with a linguistic default
 * collation (en_US.UTF-8, ICU) orders `O'Brien` or `van der` by other rules, so the search compares
 * `lower(name) COLLATE "C"`, and its indexes must carry the same collation to be used. The 0001 indexes on
 * the default collation are replaced (nothing else reads them). SQLite's BINARY collation already is
 * byte order, so its 0001 indexes stay.
 */
import { sql } from 'kysely';
import type { AnyDb, DialectAdapter } from './helpers.ts';

export async function up(db: AnyDb, dialect: DialectAdapter): Promise<void> {
  if (dialect.name !== 'postgres') return;
  await sql`drop index if exists contact_last_first_name`.execute(db);
  await sql`drop index if exists contact_first_name`.execute(db);
  await sql`create index contact_last_first_name on contact ((lower(last_name) collate "C"), (lower(first_name) collate "C"))`.execute(
    db,
  );
  await sql`create index contact_first_name on contact ((lower(first_name) collate "C"))`.execute(db);
}
