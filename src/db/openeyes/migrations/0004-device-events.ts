/**
 * `cra_device_event` on an OpenEyes database: the own schema's `device_event` (migration 0015), the
 * service's index of the device events it filed, one per patient, study, subtype and (visual fields and
 * OCT) model. OpenEyes's device tables themselves are OpenEyes's (its OphGeneric migrations).
 */
import { sql } from 'kysely';
import type { AnyDb } from '../../migrations/helpers.ts';

export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('cra_device_event')
    .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
    .addColumn('patient_id', 'integer', (c) => c.notNull())
    .addColumn('study_instance_uid', 'varchar(64)', (c) => c.notNull())
    .addColumn('event_subtype', 'varchar(100)', (c) => c.notNull())
    .addColumn('model', 'varchar(64)', (c) => c.notNull())
    .addColumn('event_id', 'integer', (c) => c.notNull())
    .addColumn('device_information_id', 'integer')
    .addColumn('eye_id', 'integer')
    .addColumn('created_date', 'datetime', (c) => c.notNull())
    .addColumn('last_modified_date', 'datetime', (c) => c.notNull())
    .addUniqueConstraint('cra_device_event_study_key', [
      'patient_id',
      'study_instance_uid',
      'event_subtype',
      'model',
    ])
    .modifyEnd(sql`engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci`)
    .execute();
}
