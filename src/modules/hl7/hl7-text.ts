/**
 * HL7 v2 text rules the library leaves to its caller: the character set MSH-18 declares (the bytes are
 * framed and parsed as Latin-1, which keeps every byte, and decoded again here), the escape sequences
 * of text fields (HL7 v2.5 2.7), and the acknowledgement message (2.9, original mode) with MSA and ERR.
 */
import { Hl7Message, Hl7Segment } from '@medplum/core';
import { randomUUID } from 'node:crypto';

/** The character sets read (HL7 table 0211), by their MSH-18 code; an empty MSH-18 reads as Latin-1. */
export type Hl7Charset = 'ascii' | 'latin1' | 'utf-8';

/** An MSH-18 code to the encoding it names; undefined for one not supported. */
export function charsetOf(code: string): Hl7Charset | undefined {
  switch (code.trim().toUpperCase()) {
    case 'ASCII':
      return 'ascii';
    // UK PAS feeds without MSH-18 are Latin-1 (pas-and-worklists.md 3.1).
    case '':
    case '8859/1':
      return 'latin1';
    case 'UNICODE UTF-8':
    case 'UTF-8':
      return 'utf-8';
    default:
      return undefined;
  }
}

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * The message text of `latin1Text` (the framed bytes read as Latin-1) in `charset`; undefined when the
 * bytes are not of that character set (a byte above 127 in ASCII, invalid UTF-8).
 */
export function decodeAs(latin1Text: string, charset: Hl7Charset): string | undefined {
  if (charset === 'latin1') return latin1Text;
  // eslint-disable-next-line no-control-regex
  if (charset === 'ascii') return /^[\u0000-\u007f]*$/.test(latin1Text) ? latin1Text : undefined;
  try {
    return UTF8.decode(Buffer.from(latin1Text, 'latin1'));
  } catch {
    return undefined;
  }
}

/** The library's encoding name of a character set, for the acknowledgement's bytes. */
export function encodingOf(charset: Hl7Charset): string {
  return charset === 'utf-8' ? 'utf-8' : 'latin1';
}

/** Separators of a message (MSH-1, MSH-2). */
interface Separators {
  readonly fieldSeparator: string;
  readonly componentSeparator: string;
  readonly repetitionSeparator: string;
  readonly escapeCharacter: string;
  readonly subcomponentSeparator: string;
}

/**
 * A text value with its escape sequences replaced: `\F\ \S\ \T\ \R\ \E\` by the separators, `\Xhh..\`
 * by those bytes (Latin-1), formatting sequences (`\H\ \N\ \.br\` ...) by nothing.
 */
export function unescapeText(value: string, separators: Separators): string {
  const escape = separators.escapeCharacter;
  if (escape === '' || !value.includes(escape)) return value;
  let out = '';
  let index = 0;
  while (index < value.length) {
    const start = value.indexOf(escape, index);
    if (start === -1) {
      out += value.slice(index);
      break;
    }
    const end = value.indexOf(escape, start + 1);
    if (end === -1) {
      out += value.slice(index);
      break;
    }
    out += value.slice(index, start);
    const body = value.slice(start + 1, end);
    switch (body) {
      case 'F':
        out += separators.fieldSeparator;
        break;
      case 'S':
        out += separators.componentSeparator;
        break;
      case 'T':
        out += separators.subcomponentSeparator;
        break;
      case 'R':
        out += separators.repetitionSeparator;
        break;
      case 'E':
        out += escape;
        break;
      default:
        if (/^X(?:[0-9A-Fa-f]{2})+$/.test(body)) out += Buffer.from(body.slice(1), 'hex').toString('latin1');
    }
    index = end + 1;
  }
  return out;
}

/** `text` with the separators and the escape character escaped, for MSA-3 and ERR-8. */
export function escapeText(text: string, separators: Separators): string {
  const escape = separators.escapeCharacter || '\\';
  const table: Record<string, string> = {
    [escape]: `${escape}E${escape}`,
    [separators.fieldSeparator]: `${escape}F${escape}`,
    [separators.componentSeparator]: `${escape}S${escape}`,
    [separators.subcomponentSeparator]: `${escape}T${escape}`,
    [separators.repetitionSeparator]: `${escape}R${escape}`,
  };
  // Segment separators and other control characters never reach the acknowledgement.
  // eslint-disable-next-line no-control-regex
  return [...text.replace(/[\u0000-\u001f\u007f]+/g, ' ')].map((c) => table[c] ?? c).join('');
}

export type AckCode = 'AA' | 'AE' | 'AR';

/** HL7 table 0357 codes the listener answers with. */
export const ERROR_CODE = {
  segmentSequence: '100',
  requiredField: '101',
  dataType: '102',
  unsupportedMessageType: '200',
  unsupportedEvent: '201',
  unsupportedProcessingId: '202',
  unsupportedVersion: '203',
  unknownKey: '204',
  applicationError: '207',
  applicationInternal: '207',
} as const;

export interface AckContent {
  readonly code: AckCode;
  /** MSA-3 and ERR-8 (none for AA). */
  readonly text: string;
  /** ERR-3, table 0357 (none for AA). */
  readonly errorCode?: string;
}

/** Nanoseconds-free `YYYYMMDDHHMMSS` in UTC with its offset. */
function hl7Now(): string {
  return `${new Date()
    .toISOString()
    .replace(/[-:T]/g, '')
    .replace(/\.\d+Z$/, '')}+0000`;
}

/**
 * The acknowledgement of `message` (original mode): MSH with sender and receiver swapped, a new control
 * id, MSH-9 `ACK^<event>^ACK`, MSH-11, MSH-12 and MSH-18 echoed; MSA-1 the code, MSA-2 the inbound
 * MSH-10, MSA-3 the text; for AE and AR an ERR segment (ERR-3 code, ERR-4 `E`, ERR-8 text).
 */
export function buildAck(message: Hl7Message | undefined, content: AckContent): Hl7Message {
  const base = message ?? Hl7Message.parse('MSH|^~\\&|||||||||P|2.5');
  const context = base.context;
  const msh = base.getSegment('MSH');
  const field = (index: number) => msh?.getField(index)?.toString() ?? '';
  const event = msh?.getField(9)?.getComponent(2) ?? '';
  const fields = [
    'MSH',
    context.getMsh2(),
    field(5),
    field(6),
    field(3),
    field(4),
    hl7Now(),
    '',
    event === '' ? 'ACK' : `ACK^${event}^ACK`,
    randomUUID().replace(/-/g, '').slice(0, 20),
    field(11) || 'P',
    field(12) || '2.5',
    '',
    '',
    '',
    '',
    '',
    field(18),
  ];
  // Trailing empty fields are not written.
  while (fields.length > 12 && fields[fields.length - 1] === '') fields.pop();
  const text = content.code === 'AA' ? '' : escapeText(content.text.slice(0, 400), context);
  const segments = [
    new Hl7Segment(fields, context),
    new Hl7Segment(['MSA', content.code, field(10), ...(text === '' ? [] : [text])], context),
  ];
  if (content.code !== 'AA')
    segments.push(
      new Hl7Segment(
        ['ERR', '', '', content.errorCode ?? ERROR_CODE.applicationError, 'E', '', '', '', text],
        context,
      ),
    );
  return new Hl7Message(segments, context);
}
