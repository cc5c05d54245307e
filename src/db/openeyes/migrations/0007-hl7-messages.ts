/**
 * `cra_hl7_message` on an OpenEyes database: the own schema's `hl7_message` (migration 0023), the HL7
 * messages answered, by sender and message control id, with their acknowledgement.
 */
import { sql } from 'kysely';
import type { AnyDb } from '../../migrations/helpers.ts';

export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .createTable('cra_hl7_message')
    .addColumn('id', 'integer', (c) => c.primaryKey().autoIncrement())
    .addColumn('sender', 'varchar(180)', (c) => c.notNull())
    .addColumn('control_id', 'varchar(199)', (c) => c.notNull())
    .addColumn('message_type', 'varchar(16)', (c) => c.notNull())
    .addColumn('received_date', 'datetime', (c) => c.notNull())
    .addColumn('ack_code', 'varchar(2)', (c) => c.notNull())
    .addColumn('ack_text', 'text')
    .addColumn('patient_id', 'integer')
    .addUniqueConstraint('cra_hl7_message_sender_control_id', ['sender', 'control_id'])
    .modifyEnd(sql`engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci`)
    .execute();
}
