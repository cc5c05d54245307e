/**
 * Encodes a worklist answer (an identifier of text values and sequences) in Implicit or Explicit VR Little
 * Endian (PS3.5 7.1), its text in the answer's character set. Written here rather than through dcmjs,
 * whose writer encodes every text as UTF-8: a device that reads only Latin-1 (`ISO_IR 100`) must get
 * Latin-1 bytes. Every value is text (PS3.5 6.2: AE, CS, DA, LO, PN, SH, TM, UI) or a sequence.
 */
import type { WorklistCharacterSet } from '../../site-files/worklist-stations.ts';

export interface AnswerElement {
  readonly tag: number;
  readonly vr: string;
  /** Text (`''` = present and empty), or a sequence's items. */
  readonly value: string | readonly (readonly AnswerElement[])[];
}

const LONG_VRS = new Set(['OB', 'OD', 'OF', 'OL', 'OV', 'OW', 'SQ', 'SV', 'UC', 'UN', 'UR', 'UT', 'UV']);
const ITEM = [0xfffe, 0xe000] as const;

/** True when a text holds anything outside 7-bit ASCII (then Specific Character Set must be sent). */
export function isNonAscii(text: string): boolean {
  // eslint-disable-next-line no-control-regex
  return /[^\x00-\x7f]/.test(text);
}

/**
 * Latin-1 for what it can hold: accents that Latin-1 lacks are dropped from their letter (NFD), and any
 * other character becomes `?`.
 */
export function toLatin1(text: string): Buffer {
  let out = '';
  for (const char of text) {
    if (char.charCodeAt(0) <= 0xff && char.length === 1) {
      out += char;
      continue;
    }
    const base = char.normalize('NFD').replace(/\p{M}/gu, '');
    out += base.length === 1 && base.charCodeAt(0) <= 0xff ? base : '?';
  }
  return Buffer.from(out, 'latin1');
}

/** Encodes `elements` (any order: they are written in tag order). */
export function encodeAnswer(
  elements: readonly AnswerElement[],
  options: { readonly isExplicitVr: boolean; readonly characterSet: WorklistCharacterSet },
): Buffer {
  const text = (value: string): Buffer =>
    options.characterSet === 'ISO_IR 100' ? toLatin1(value) : Buffer.from(value, 'utf8');

  const encodeList = (list: readonly AnswerElement[]): Buffer[] => {
    const parts: Buffer[] = [];
    for (const element of [...list].sort((a, b) => a.tag - b.tag)) {
      let value: Buffer;
      if (typeof element.value === 'string') {
        value = text(element.value);
        if (value.length % 2 === 1)
          value = Buffer.concat([value, Buffer.from(element.vr === 'UI' ? [0] : [0x20])]);
      } else {
        const items: Buffer[] = [];
        for (const item of element.value) {
          const body = Buffer.concat(encodeList(item));
          const header = Buffer.alloc(8);
          header.writeUInt16LE(ITEM[0], 0);
          header.writeUInt16LE(ITEM[1], 2);
          header.writeUInt32LE(body.length, 4);
          items.push(header, body);
        }
        value = Buffer.concat(items);
      }
      parts.push(headerOf(element.tag, element.vr, value.length, options.isExplicitVr), value);
    }
    return parts;
  };
  return Buffer.concat(encodeList(elements));
}

function headerOf(tag: number, vr: string, length: number, isExplicitVr: boolean): Buffer {
  const isLong = LONG_VRS.has(vr);
  const header = Buffer.alloc(isExplicitVr && isLong ? 12 : 8);
  header.writeUInt16LE(tag >>> 16, 0);
  header.writeUInt16LE(tag & 0xffff, 2);
  if (!isExplicitVr) header.writeUInt32LE(length, 4);
  else {
    header.write(vr, 4, 'latin1');
    if (isLong) header.writeUInt32LE(length, 8);
    else header.writeUInt16LE(Math.min(length, 0xffff), 6);
  }
  return header;
}
