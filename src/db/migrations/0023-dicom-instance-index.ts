/**
 * `dicom_instance_index`: the query attributes of each SOP Instance UID received by STOW-RS or C-STORE
 * (patient, study, series and instance keys as the device sent them, and the request that holds the
 * bytes), written in the transaction of the request the instance became, so that the query/retrieve
 * C-FIND reads an index and never a stored file. Owned by the dicom-receive module; the service's own
 * table: not in `DB` and not in the dataset format. Values are text, decoded with the instance's
 * Specific Character Set (kept in `character_set`).
 */
import type { AnyDb, DialectAdapter } from './helpers.ts';

export async function up(db: AnyDb, dialect: DialectAdapter): Promise<void> {
  await db.schema
    .createTable('dicom_instance_index')
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
    .addColumn('received_date', dialect.columnTypes.dateTime, (c) => c.notNull())
    .execute();
  for (const column of ['study_instance_uid', 'series_instance_uid', 'patient_id', 'study_date'])
    await db.schema
      .createIndex(`dicom_instance_index_${column}_IDX`)
      .on('dicom_instance_index')
      .column(column)
      .execute();
}
