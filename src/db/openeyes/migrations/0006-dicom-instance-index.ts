/**
 * `cra_dicom_instance_index` on an OpenEyes database: the own schema's `dicom_instance_index` (migration
 * 0023), the query attributes of each received SOP Instance UID.
 */
import { sql } from 'kysely';
import type { AnyDb } from '../../migrations/helpers.ts';

export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('cra_dicom_instance_index')
    .addColumn('sop_instance_uid', 'varchar(64)', (c) => c.primaryKey())
    .addColumn('sop_class_uid', 'varchar(64)', (c) => c.notNull())
    .addColumn('study_instance_uid', 'varchar(64)', (c) => c.notNull())
    .addColumn('series_instance_uid', 'varchar(64)', (c) => c.notNull())
    .addColumn('request_id', 'integer', (c) => c.notNull())
    .addColumn('character_set', 'varchar(128)')
    .addColumn('patient_id', 'varchar(64)')
    .addColumn('patient_name', 'varchar(324)')
    .addColumn('patient_birth_date', 'varchar(8)')
    .addColumn('patient_sex', 'varchar(16)')
    .addColumn('study_date', 'varchar(8)')
    .addColumn('study_time', 'varchar(16)')
    .addColumn('accession_number', 'varchar(16)')
    .addColumn('study_id', 'varchar(16)')
    .addColumn('study_description', 'varchar(64)')
    .addColumn('referring_physician_name', 'varchar(324)')
    .addColumn('modality', 'varchar(16)')
    .addColumn('series_number', 'varchar(12)')
    .addColumn('series_description', 'varchar(64)')
    .addColumn('instance_number', 'varchar(12)')
    .addColumn('received_date', 'datetime', (c) => c.notNull())
    .modifyEnd(sql`engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci`)
    .execute();
  for (const column of ['study_instance_uid', 'series_instance_uid', 'patient_id', 'study_date'])
    await db.schema
      .createIndex(`cra_dicom_instance_index_${column}_IDX`)
      .on('cra_dicom_instance_index')
      .column(column)
      .execute();
}
