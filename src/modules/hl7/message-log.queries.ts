/**
 * `hl7_message` (`cra_hl7_message` on OpenEyes), owned by this module: the acknowledgement each sender's
 * message control id got, written in the transaction of the change it acknowledges (AA) or alone (AE),
 * and read before a message is applied, so that a message sent again is answered as the first time.
 */
import type { Generated, Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';
import { nowDateTime } from '../../db/stored-time.ts';
import type { AckCode } from './hl7-text.ts';

/** `hl7_message`: the service's own table, not in `DB`. */
type MessageTables = {
  hl7_message: {
    id: Generated<number>;
    sender: string;
    control_id: string;
    message_type: string;
    received_date: string;
    ack_code: string;
    ack_text: string | null;
    patient_id: number | null;
  };
};

export interface LoggedMessage {
  readonly sender: string;
  readonly controlId: string;
  readonly messageType: string;
  readonly ackCode: AckCode;
  readonly ackText: string;
  readonly patientId: number | undefined;
}

/** The answer a sender's control id got, if any. */
export async function findLoggedMessage(
  db: Kysely<DB>,
  sender: string,
  controlId: string,
): Promise<LoggedMessage | undefined> {
  const row = await db
    .withTables<MessageTables>()
    .selectFrom('hl7_message')
    .select(['sender', 'control_id', 'message_type', 'ack_code', 'ack_text', 'patient_id'])
    .where('sender', '=', sender)
    .where('control_id', '=', controlId)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return {
    sender: row.sender,
    controlId: row.control_id,
    messageType: row.message_type,
    ackCode: row.ack_code as AckCode,
    ackText: row.ack_text ?? '',
    patientId: row.patient_id ?? undefined,
  };
}

/** Records the answer of a message; a second record of the same sender and control id fails (unique). */
export async function logMessage(db: Kysely<DB>, message: LoggedMessage): Promise<void> {
  await db
    .withTables<MessageTables>()
    .insertInto('hl7_message')
    .values({
      sender: message.sender,
      control_id: message.controlId,
      message_type: message.messageType,
      received_date: nowDateTime(),
      ack_code: message.ackCode,
      ack_text: message.ackText === '' ? null : message.ackText.slice(0, 2000),
      patient_id: message.patientId ?? null,
    })
    .execute();
}
