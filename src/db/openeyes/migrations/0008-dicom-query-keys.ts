/**
 * Query/retrieve matching in SQL on an OpenEyes database: the own schema's migration 0025 on the
 * service's `cra_` tables (`cra_dicom_instance_index.patient_name_key`, the indexes by folded name,
 * accession number and `cra_device_event` by study, dates without ACR-NEMA dots). OpenEyes's tables are
 * left as they are.
 */
import { sql } from 'kysely';
import type { AnyDb } from '../../migrations/helpers.ts';

export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .alterTable('cra_dicom_instance_index')
    .addColumn('patient_name_key', 'varchar(324)')
    .execute();
  for (const column of ['patient_name_key', 'accession_number'])
    await db.schema
      .createIndex(`cra_dicom_instance_index_${column}_IDX`)
      .on('cra_dicom_instance_index')
      .column(column)
      .execute();
  await db.schema
    .createIndex('cra_device_event_study_instance_uid_IDX')
    .on('cra_device_event')
    .column('study_instance_uid')
    .execute();
  for (const column of ['study_date', 'patient_birth_date'])
    await sql`update cra_dicom_instance_index set ${sql.ref(column)} = replace(${sql.ref(column)}, '.', '') where ${sql.ref(column)} like '%.%'`.execute(
      db,
    );
}
