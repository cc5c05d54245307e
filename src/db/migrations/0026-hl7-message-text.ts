/**
 * `hl7_message.message_text`: the text of a message answered AE (not applied), kept so that an operator
 * can correct it in the console and apply it again; null for a message applied (AA) or refused unread
 * (AR). Indexes for the console's list of PAS messages, newest first, with or without an answer code.
 */
import type { AnyDb, DialectAdapter } from './helpers.ts';

export async function up(db: AnyDb, dialect: DialectAdapter): Promise<void> {
  await db.schema.alterTable('hl7_message').addColumn('message_text', dialect.columnTypes.text).execute();
  await db.schema
    .createIndex('hl7_message_received')
    .on('hl7_message')
    .columns(['received_date', 'id'])
    .execute();
  await db.schema
    .createIndex('hl7_message_ack_received')
    .on('hl7_message')
    .columns(['ack_code', 'received_date', 'id'])
    .execute();
}
