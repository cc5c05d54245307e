/**
 * `cra_hl7_message.message_text` on an OpenEyes database: the own schema's migration 0026 (the text of a
 * message answered AE, kept for the console to correct and apply again) and the indexes of the console's
 * list of PAS messages.
 */
import { sql } from 'kysely';
import type { AnyDb } from '../../migrations/helpers.ts';

export async function up(db: AnyDb): Promise<void> {
  await db.schema
    .alterTable('cra_hl7_message')
    .addColumn('message_text', sql`longtext`)
    .execute();
  await db.schema
    .createIndex('cra_hl7_message_received')
    .on('cra_hl7_message')
    .columns(['received_date', 'id'])
    .execute();
  await db.schema
    .createIndex('cra_hl7_message_ack_received')
    .on('cra_hl7_message')
    .columns(['ack_code', 'received_date', 'id'])
    .execute();
}
