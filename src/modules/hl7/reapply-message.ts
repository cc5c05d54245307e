/**
 * A message answered AE, corrected by an operator and applied again (the console's PAS messages): the
 * corrected text goes through the listener's own path (`apply-message.ts`) as the bytes the PAS would
 * have sent in the character set its MSH-18 names, as an operator's action (no allowed-sender check),
 * replacing the AE's row when it is applied. The form carries a digest of the text it was read with,
 * so that a correction of a text that changed meanwhile is refused, never applied over it.
 */
import { Hl7Message } from '@medplum/core';
import type { AckCode } from './hl7-text.ts';
import { charsetOf, encodingOf } from './hl7-text.ts';
import type { Hl7Applier, Hl7ApplierDeps } from './apply-message.ts';
import { createHl7Applier } from './apply-message.ts';
import { messageTextVersion, readLoggedMessage } from './message-log.queries.ts';

export type ReapplyOutcome =
  | { readonly kind: 'applied'; readonly messageType: string; readonly patientIds: readonly number[] }
  /** Still not applied (AE) or not readable (AR): the reason; nothing was written. */
  | { readonly kind: 'refused'; readonly ackCode: AckCode; readonly reason: string }
  /** The row is no longer the AE the form was read with (applied, or its text changed). */
  | { readonly kind: 'changed' };

export interface ReapplyInput {
  readonly id: number;
  /** The corrected message, segments ended by CR. */
  readonly text: string;
  /** `messageTextVersion` of the text the form was read with. */
  readonly expectedVersion: string;
  readonly userId: number;
  readonly username: string;
}

/** The bytes the PAS would have sent for `text`, in the character set its MSH-18 names. */
function bytesOf(text: string): Buffer | undefined {
  let charsetCode = '';
  try {
    charsetCode = Hl7Message.parse(text).getSegment('MSH')?.getField(18)?.getComponent(1) ?? '';
  } catch {
    // Not HL7: the applier refuses the bytes (AR) as it would on the wire.
  }
  const encoding = encodingOf(charsetOf(charsetCode) ?? 'latin1') as BufferEncoding;
  const bytes = Buffer.from(text, encoding);
  // A character the declared set cannot hold would be altered by the encoding: refused, not changed.
  return bytes.toString(encoding) === text ? bytes : undefined;
}

/** Applies corrections through one applier per process (its PASAPI changes are built once). */
export function createReapplier(deps: Hl7ApplierDeps): (input: ReapplyInput) => Promise<ReapplyOutcome> {
  let applier: Hl7Applier | undefined;
  return async (input) => {
    const row = await readLoggedMessage(deps.database.db, input.id);
    if (
      row === undefined ||
      row.ackCode !== 'AE' ||
      row.messageText === null ||
      messageTextVersion(row.messageText) !== input.expectedVersion
    )
      return { kind: 'changed' };
    const bytes = bytesOf(input.text);
    if (bytes === undefined)
      return {
        kind: 'refused',
        ackCode: 'AR',
        reason: 'the text holds characters that the character set of MSH-18 cannot.',
      };
    applier ??= createHl7Applier(deps);
    const answer = await applier.applyBytes(bytes, {
      address: null,
      isOperator: true,
      userId: input.userId,
      username: input.username,
      replaces: {
        id: row.id,
        sender: row.sender,
        controlId: row.controlId,
        messageText: row.messageText,
      },
    });
    if (answer.ack.code === 'AA') {
      const msh = answer.message?.getSegment('MSH');
      const type = `${msh?.getComponent(9, 1) ?? ''}^${msh?.getComponent(9, 2) ?? ''}`.toUpperCase();
      return { kind: 'applied', messageType: type, patientIds: answer.patientIds };
    }
    // Not applied: the row is as it was, unless it changed meanwhile (the applier then wrote nothing).
    const now = await readLoggedMessage(deps.database.db, input.id);
    if (now?.ackCode !== 'AE' || now.messageText !== row.messageText) return { kind: 'changed' };
    const reason = answer.ack.text.endsWith('.') ? answer.ack.text : `${answer.ack.text}.`;
    return { kind: 'refused', ackCode: answer.ack.code, reason };
  };
}
