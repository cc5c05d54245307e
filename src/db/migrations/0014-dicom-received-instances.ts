/**
 * `dicom_received_instance`: one row per SOP Instance UID received by STOW-RS or C-STORE, naming the
 * first and the latest request it became, so that a repeated instance can be refused
 * (`DICOM_DUPLICATES=refuse`) or counted. Owned by the dicom-receive module; the service's own table:
 * not in `DB` and not in the dataset format.
 */
import type { AnyDb, DialectAdapter } from './helpers.ts';

export async function up(db: AnyDb, dialect: DialectAdapter): Promise<void> {
  await db.schema
    .createTable('dicom_received_instance')
    .addColumn('sop_instance_uid', 'varchar(64)', (c) => c.primaryKey())
    .addColumn('sop_class_uid', 'varchar(64)', (c) => c.notNull())
    .addColumn('first_request_id', 'integer', (c) => c.notNull())
    .addColumn('last_request_id', 'integer', (c) => c.notNull())
    .addColumn('received_count', 'integer', (c) => c.notNull())
    .addColumn('last_received_date', dialect.columnTypes.dateTime, (c) => c.notNull())
    .execute();
}
