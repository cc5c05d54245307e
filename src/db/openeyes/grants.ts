/**
 * The privileges the service's account needs on an OpenEyes database, as GRANT statements, derived from
 * what the service reads and writes (schema-needs.ts) so that they cannot drift from it:
 * - SELECT on every OpenEyes table it reads; INSERT, UPDATE, DELETE only where it writes;
 * - INSERT on the `_version` twins of the tables whose rows it changes (their previous versions);
 * - SELECT, INSERT, UPDATE, DELETE on its own `cra_` tables, which an administrator creates first
 *   (`npm run cli -- migrate` with an account that may create tables and triggers);
 * - LOCK TABLES on the database: MySQL 8.0.22+ lets a locking read (the queue claim's FOR UPDATE of
 *   `request` rows) run only with it or UPDATE; MariaDB needs no more than SELECT.
 * No CREATE, ALTER, DROP or INDEX on anything: the service never changes OpenEyes's schema.
 * `npm run cli -- openeyes grants <account>` prints them.
 */
import { OWN_TABLE_PREFIX, OWN_TABLES } from './own-tables.ts';
import type { TableNeed } from './schema-needs.ts';
import { OPENEYES_TABLE_NEEDS } from './schema-needs.ts';

/** Kysely's bookkeeping tables of the `cra_` migrations (migrate.ts), read at every start. */
const MIGRATION_TABLES = ['cra_migration', 'cra_migration_lock'];

const quoteName = (name: string): string => `\`${name.replace(/`/g, '``')}\``;

function privilegesOf(need: TableNeed): string[] {
  const columns = Object.values(need.columns);
  return [
    'SELECT',
    ...(columns.some((c) => c.isInserted === true) ? ['INSERT'] : []),
    ...(columns.some((c) => c.isUpdated === true) ? ['UPDATE'] : []),
    ...(need.isDeleted === true ? ['DELETE'] : []),
  ];
}

/**
 * The GRANT statements for `account` (as MySQL writes one: `'name'@'host'`) on database `databaseName`,
 * one per table, in a stable order.
 */
export function openEyesGrants(
  account: string,
  databaseName: string,
  needs: Readonly<Record<string, TableNeed>> = OPENEYES_TABLE_NEEDS,
): string[] {
  const on = (table: string) => `${quoteName(databaseName)}.${quoteName(table)}`;
  const statements: string[] = [];
  for (const [table, need] of Object.entries(needs).sort(([a], [b]) => a.localeCompare(b))) {
    statements.push(`GRANT ${privilegesOf(need).join(', ')} ON ${on(table)} TO ${account};`);
    if (need.isVersionedWrite === true)
      statements.push(`GRANT INSERT ON ${on(`${table}_version`)} TO ${account};`);
  }
  const own = [...OWN_TABLES.map((t) => OWN_TABLE_PREFIX + t), ...MIGRATION_TABLES].sort();
  for (const table of own)
    statements.push(`GRANT SELECT, INSERT, UPDATE, DELETE ON ${on(table)} TO ${account};`);
  statements.push(`GRANT LOCK TABLES ON ${quoteName(databaseName)}.* TO ${account};`);
  return statements;
}
