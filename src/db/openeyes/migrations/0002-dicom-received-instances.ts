/**
 * `cra_dicom_received_instance` on an OpenEyes database: the own schema's `dicom_received_instance`
 * (migration 0014), one row per SOP Instance UID received by STOW-RS or C-STORE.
 */
import { sql } from 'kysely';
import type { AnyDb } from '../../migrations/helpers.ts';

export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('cra_dicom_received_instance')
    .addColumn('sop_instance_uid', 'varchar(64)', (c) => c.primaryKey())
    .addColumn('sop_class_uid', 'varchar(64)', (c) => c.notNull())
    .addColumn('first_request_id', 'integer', (c) => c.notNull())
    .addColumn('last_request_id', 'integer', (c) => c.notNull())
    .addColumn('received_count', 'integer', (c) => c.notNull())
    .addColumn('last_received_date', 'datetime', (c) => c.notNull())
    .modifyEnd(sql`engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci`)
    .execute();
}
