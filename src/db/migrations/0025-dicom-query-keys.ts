/**
 * Query/retrieve matching in SQL: `dicom_instance_index.patient_name_key` (the Patient's Name as PN
 * matching folds it, written by the dicom-receive module; null on rows indexed before this migration,
 * which every name query then reads as a candidate and matches in JavaScript) and the indexes
 * the C-FIND and QIDO-RS keys filter by: the folded name, the accession number, and `device_event` by
 * study (the patient a study is filed to, read for every page of answers). Dates lose the dots of the
 * ACR-NEMA form, so that SQL compares them as range matching does.
 */
import { sql } from 'kysely';
import type { AnyDb } from './helpers.ts';

export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('dicom_instance_index').addColumn('patient_name_key', 'varchar(324)').execute();
  for (const column of ['patient_name_key', 'accession_number'])
    await db.schema
      .createIndex(`dicom_instance_index_${column}_IDX`)
      .on('dicom_instance_index')
      .column(column)
      .execute();
  await db.schema
    .createIndex('device_event_study_instance_uid_IDX')
    .on('device_event')
    .column('study_instance_uid')
    .execute();
  for (const column of ['study_date', 'patient_birth_date'])
    await sql`update dicom_instance_index set ${sql.ref(column)} = replace(${sql.ref(column)}, '.', '') where ${sql.ref(column)} like '%.%'`.execute(
      db,
    );
}
