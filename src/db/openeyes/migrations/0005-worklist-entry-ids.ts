/**
 * `cra_mwl_entry` on an OpenEyes database: the own schema's `mwl_entry` (migration 0021), the Study
 * Instance UID and accession number the Modality Worklist handed out per `worklist_patient` row.
 */
import { sql } from 'kysely';
import type { AnyDb } from '../../migrations/helpers.ts';

export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('cra_mwl_entry')
    .addColumn('worklist_patient_id', 'integer', (c) => c.primaryKey())
    .addColumn('study_instance_uid', 'varchar(64)', (c) => c.notNull().unique())
    .addColumn('accession_number', 'varchar(16)', (c) => c.notNull().unique())
    .addColumn('created_date', 'datetime', (c) => c.notNull())
    .modifyEnd(sql`engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci`)
    .execute();
}
