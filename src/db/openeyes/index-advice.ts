/**
 * Indexes the service's hot queries use that an OpenEyes database may lack. In openeyes mode the service
 * never creates an index on an OpenEyes table: `npm run cli -- openeyes suggest-indexes` prints the DDL of
 * the missing ones for the site's database administrator (online DDL: `ALGORITHM=INPLACE, LOCK=NONE`,
 * which fails rather than blocking OpenEyes's writes if the server cannot build the index online).
 */
import type { Kysely } from 'kysely';
import { sql } from 'kysely';

export interface IndexNeed {
  /** The name given in the suggested DDL (`cra_` marks it as asked for by this service). */
  readonly name: string;
  readonly table: string;
  /** Columns in order; an existing index whose leading columns are these serves the need. */
  readonly columns: readonly string[];
  /** What the index is for, printed above its DDL. */
  readonly purpose: string;
}

/**
 * OpenEyes v6.8 has, among the indexes these queries can use: `contact_last_name_key` (last_name),
 * `uk_patient_value_patient_type_id` (type, value, source_info) for identifier search,
 * `uk_patient_id_type_value` (patient_id, ...) for a patient's identifiers, and the indexes InnoDB builds
 * for every foreign key (episode.patient_id, et_ophcocvi_esign.event_id, request_routine.request_id, ...).
 */
export const OPENEYES_INDEX_NEEDS: readonly IndexNeed[] = [
  {
    name: 'cra_contact_last_first_name',
    table: 'contact',
    columns: ['last_name', 'first_name'],
    purpose:
      'patient name search: a surname prefix as a range, pages ordered by surname then first name without a sort',
  },
  {
    name: 'cra_contact_first_name',
    table: 'contact',
    columns: ['first_name'],
    purpose: 'patient name search by first name alone (a term with a comma and no surname)',
  },
  {
    name: 'cra_unique_codes_code',
    table: 'unique_codes',
    columns: ['code'],
    purpose: 'sign/add: the unique code posted by a device, looked up on every import',
  },
  {
    name: 'cra_user_authentication_username',
    table: 'user_authentication',
    columns: ['username'],
    purpose: 'Basic authentication: the login looked up by user name when it is not cached',
  },
  {
    name: 'cra_request_routine_claim',
    table: 'request_routine',
    columns: ['execute_request_queue', 'status', 'request_id', 'id'],
    purpose:
      'queue worker: claiming the eligible routines of a queue, oldest request first, without a sort; queue metrics',
  },
  {
    name: 'cra_request_routine_request_sequence',
    table: 'request_routine',
    columns: ['request_id', 'execute_sequence'],
    purpose: 'queue worker and status: the routines of one request in execution order (the ordering rule)',
  },
  {
    name: 'cra_signature_import_log_filename',
    table: 'signature_import_log',
    columns: ['filename', 'id'],
    purpose:
      'console signature imports: a manual crop and the import made from it (rows sharing one original)',
  },
];

interface IndexColumnRow {
  table_name: string;
  index_name: string;
  column_name: string;
}

/** The needs of `needs` that no index of the current database serves. */
export async function findMissingIndexes(
  // Reads information_schema, which the service's table types do not describe.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  db: Kysely<any>,
  needs: readonly IndexNeed[] = OPENEYES_INDEX_NEEDS,
): Promise<IndexNeed[]> {
  const tables = [...new Set(needs.map((n) => n.table))];
  const { rows } = await sql<IndexColumnRow>`
    select table_name as table_name, index_name as index_name, column_name as column_name
    from information_schema.statistics
    where table_schema = database() and table_name in (${sql.join(tables)})
    order by table_name, index_name, seq_in_index`.execute(db);
  const indexes = new Map<string, string[]>();
  for (const row of rows) {
    const key = `${row.table_name}\u0000${row.index_name}`;
    indexes.set(key, [...(indexes.get(key) ?? []), row.column_name.toLowerCase()]);
  }
  const existing = [...indexes.entries()].map(([key, columns]) => ({
    table: key.split('\u0000')[0]!,
    columns,
  }));
  return needs.filter(
    (need) =>
      !existing.some(
        (index) =>
          index.table === need.table &&
          need.columns.every((column, i) => index.columns[i] === column.toLowerCase()),
      ),
  );
}

const quoteName = (name: string): string => `\`${name.replace(/`/g, '``')}\``;

/** The DDL of one index need, preceded by a comment saying what it is for. */
export function indexDdl(need: IndexNeed): string {
  const columns = need.columns.map(quoteName).join(', ');
  return [
    `-- ${need.purpose}`,
    `ALTER TABLE ${quoteName(need.table)} ADD INDEX ${quoteName(need.name)} (${columns}), ALGORITHM=INPLACE, LOCK=NONE;`,
  ].join('\n');
}

/** What `suggest-indexes` prints: the DDL of every missing index, or a line saying none is missing. */
export function formatIndexSuggestions(databaseName: string, missing: readonly IndexNeed[]): string {
  if (missing.length === 0)
    return `-- OpenEyes database ${databaseName} has every index the service's queries use.`;
  return [
    `-- Indexes the service's queries use that OpenEyes database ${databaseName} lacks.`,
    '-- The service never creates them itself; run these as the database administrator.',
    ...missing.map(indexDdl),
  ].join('\n');
}
