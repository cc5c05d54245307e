/**
 * `hl7_message` (`cra_hl7_message` on OpenEyes): the service's own log of the HL7 messages it answered,
 * one row per sender (MSH-3^MSH-4) and message control id (MSH-10), with the acknowledgement sent, so
 * that a message the PAS sends again is answered with its first outcome and never applied twice.
 */
import type { AnyDb, DialectAdapter } from './helpers.ts';
import { idColumn } from './helpers.ts';

export async function up(db: AnyDb, dialect: DialectAdapter): Promise<void> {
  const t = dialect.columnTypes;
  await idColumn(db.schema.createTable('hl7_message'), t)
    .addColumn('sender', 'varchar(180)', (c) => c.notNull())
    .addColumn('control_id', 'varchar(199)', (c) => c.notNull())
    .addColumn('message_type', 'varchar(16)', (c) => c.notNull())
    .addColumn('received_date', t.dateTime, (c) => c.notNull())
    .addColumn('ack_code', 'varchar(2)', (c) => c.notNull())
    .addColumn('ack_text', t.text)
    .addColumn('patient_id', 'integer')
    .addUniqueConstraint('hl7_message_sender_control_id', ['sender', 'control_id'])
    .execute();
}
