/**
 * `hl7_message` (`cra_hl7_message` on OpenEyes), owned by this module: the acknowledgement each sender's
 * message control id got, written in the transaction of the change it acknowledges (AA) or alone (AE),
 * and read before a message is applied, so that a message sent again is answered as the first time.
 * The text of a message answered AE is kept (`message_text`) until it is applied, so that the console can
 * show it, an operator can correct it and apply it again (`replaceLoggedAnswer`); the console lists the
 * rows newest first (`listLoggedMessages`).
 */
import { createHash } from 'node:crypto';
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
    message_text: string | null;
  };
};

export interface LoggedMessage {
  readonly sender: string;
  readonly controlId: string;
  readonly messageType: string;
  readonly ackCode: AckCode;
  readonly ackText: string;
  readonly patientId: number | undefined;
  /** The message as received (AE only: the text an operator may correct and apply again). */
  readonly messageText?: string;
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
      message_text: message.messageText ?? null,
    })
    .execute();
}

/** One row of the log, as the console lists it. */
export interface LoggedMessageRow {
  readonly id: number;
  readonly sender: string;
  readonly controlId: string;
  readonly messageType: string;
  readonly receivedDate: string;
  readonly ackCode: AckCode;
  readonly ackText: string;
  readonly patientId: number | undefined;
  /** Whether the message's text is kept (an AE not yet applied). */
  readonly hasText: boolean;
}

/** A row and its kept text (null once applied, or for a message the log has no text of). */
export interface LoggedMessageDetail extends LoggedMessageRow {
  readonly messageText: string | null;
}

/** A position in the log: rows are ordered by (received_date, id), newest first. */
export interface MessageLogKey {
  readonly receivedDate: string;
  readonly id: number;
}

export interface MessageLogPage {
  readonly rows: readonly LoggedMessageRow[];
  /** The next page lists rows below this key; undefined at the end. */
  readonly next: MessageLogKey | undefined;
}

export interface MessageLogFilter {
  readonly ackCode?: AckCode;
  readonly before?: MessageLogKey;
  readonly pageSize: number;
}

interface SelectedRow {
  readonly id: number;
  readonly sender: string;
  readonly control_id: string;
  readonly message_type: string;
  readonly received_date: string;
  readonly ack_code: string;
  readonly ack_text: string | null;
  readonly patient_id: number | null;
}

function toRow(row: SelectedRow & { has_text: unknown }): LoggedMessageRow {
  return {
    id: row.id,
    sender: row.sender,
    controlId: row.control_id,
    messageType: row.message_type,
    receivedDate: row.received_date,
    ackCode: row.ack_code as AckCode,
    ackText: row.ack_text ?? '',
    patientId: row.patient_id ?? undefined,
    hasText: Number(row.has_text) === 1,
  };
}

/**
 * One page of the log, newest first, below `before`: a keyset read of the index on (received_date, id),
 * or (ack_code, received_date, id) with an answer code, so that a page costs the same at any depth.
 */
export async function listLoggedMessages(db: Kysely<DB>, filter: MessageLogFilter): Promise<MessageLogPage> {
  let query = db
    .withTables<MessageTables>()
    .selectFrom('hl7_message')
    .select((eb) => [
      'id',
      'sender',
      'control_id',
      'message_type',
      'received_date',
      'ack_code',
      'ack_text',
      'patient_id',
      eb.case().when('message_text', 'is not', null).then(1).else(0).end().as('has_text'),
    ]);
  if (filter.ackCode !== undefined) query = query.where('ack_code', '=', filter.ackCode);
  const before = filter.before;
  if (before !== undefined) {
    // The keyset bound is also given as a plain range, which the planners use for the index range.
    query = query
      .where('received_date', '<=', before.receivedDate)
      .where((eb) =>
        eb.or([
          eb('received_date', '<', before.receivedDate),
          eb.and([eb('received_date', '=', before.receivedDate), eb('id', '<', before.id)]),
        ]),
      );
  }
  const rows = await query
    .orderBy('received_date', 'desc')
    .orderBy('id', 'desc')
    .limit(filter.pageSize + 1)
    .execute();
  const page = rows.slice(0, filter.pageSize).map(toRow);
  const last = page.at(-1);
  return {
    rows: page,
    next:
      rows.length > filter.pageSize && last !== undefined
        ? { receivedDate: last.receivedDate, id: last.id }
        : undefined,
  };
}

/** Row `id` of the log with its kept text, if it exists. */
export async function readLoggedMessage(
  db: Kysely<DB>,
  id: number,
): Promise<LoggedMessageDetail | undefined> {
  const row = await db
    .withTables<MessageTables>()
    .selectFrom('hl7_message')
    .selectAll()
    .where('id', '=', id)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return { ...toRow({ ...row, has_text: row.message_text === null ? 0 : 1 }), messageText: row.message_text };
}

/**
 * Replaces the answer of row `id` while it is still the AE that `expectedText` was read with (the
 * operator's correction applied again): the new answer code, reason, patient and message type, and the
 * text kept only while the answer is AE. False when the row changed meanwhile (nothing written).
 */
export async function replaceLoggedAnswer(
  db: Kysely<DB>,
  id: number,
  expectedText: string,
  answer: {
    readonly messageType: string;
    readonly ackCode: AckCode;
    readonly ackText: string;
    readonly patientId: number | undefined;
    readonly messageText: string;
  },
): Promise<boolean> {
  const result = await db
    .withTables<MessageTables>()
    .updateTable('hl7_message')
    .set({
      message_type: answer.messageType,
      ack_code: answer.ackCode,
      ack_text: answer.ackText === '' ? null : answer.ackText.slice(0, 2000),
      patient_id: answer.patientId ?? null,
      message_text: answer.ackCode === 'AE' ? answer.messageText : null,
    })
    .where('id', '=', id)
    .where('ack_code', '=', 'AE')
    .where('message_text', '=', expectedText)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** The version of a kept message text that a correction form carries (a digest: no patient data). */
export function messageTextVersion(text: string): string {
  return createHash('sha256').update(text, 'utf8').digest('base64url');
}
