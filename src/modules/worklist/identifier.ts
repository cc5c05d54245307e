/**
 * The bounded reader of a C-FIND identifier (PS3.5 7.1, 7.5): the query's data set, Implicit or Explicit
 * VR Little Endian, read into elements with their raw value bytes. It runs in the PDU gate before a byte
 * of the identifier reaches `dcmjs-dimse` (which would parse any data set whole with dcmjs), so that a
 * query of too many elements or too deep sequences is refused unparsed; the worklist SCP then reads the
 * same elements again for matching. dcmjs's own reading is not used for the query: it rewrites the
 * query's Specific Character Set (decoding the values with it) and drops what its dictionary lacks, and
 * the answer must be in the query's character set.
 *
 * The reader is linear in the bytes; it recurses into sequences only as deep as `maxDepth` allows.
 */
import dcmjs from 'dcmjs';

/** Largest identifier read; a device's worklist query is well under 2 KiB. */
export const MAX_IDENTIFIER_BYTES = 16 * 1024;
/** Most elements (items included) of one identifier. */
export const MAX_IDENTIFIER_ELEMENTS = 256;
/** Deepest sequence nesting (the Scheduled Procedure Step Sequence and a code sequence in it is 2). */
export const MAX_IDENTIFIER_DEPTH = 3;

export interface DataElement {
  /** `(group << 16) | element`. */
  readonly tag: number;
  readonly vr: string;
  /** The value's bytes; for a sequence, its items (each a list of elements). */
  readonly value: Buffer | readonly (readonly DataElement[])[];
}

export interface IdentifierLimits {
  readonly maxElements: number;
  readonly maxDepth: number;
}

export type IdentifierRefusal =
  'identifier-too-many-elements' | 'identifier-too-deep' | 'malformed-identifier';

export type IdentifierReading =
  | { readonly ok: true; readonly elements: readonly DataElement[] }
  | { readonly ok: false; readonly refusal: IdentifierRefusal };

const ITEM = 0xfffee000;
const ITEM_END = 0xfffee00d;
const SEQUENCE_END = 0xfffee0dd;
const UNDEFINED_LENGTH = 0xffffffff;
/** Explicit VRs with a 2-byte reserved field and a 4-byte length (PS3.5 Table 7.1-1). */
const LONG_VRS = new Set(['OB', 'OD', 'OF', 'OL', 'OV', 'OW', 'SQ', 'SV', 'UC', 'UN', 'UR', 'UT', 'UV']);

const dictionary = (
  dcmjs as unknown as {
    data: { DicomMetaDictionary: { dictionary: Record<string, { vr?: string } | undefined> } };
  }
).data.DicomMetaDictionary.dictionary;

/** The VR of a tag in Implicit VR (PS3.6): the dictionary's first, `UN` for what it does not know. */
export function implicitVrOf(tag: number): string {
  if ((tag & 0xffff) === 0) return 'UL';
  const key = `(${hex4(tag >>> 16)},${hex4(tag & 0xffff)})`;
  const vr = dictionary[key]?.vr;
  return vr === undefined ? 'UN' : vr.slice(0, 2);
}

/**
 * Reads `bytes` as a data set; refuses more than `limits.maxElements` elements, sequences nested deeper
 * than `limits.maxDepth`, and anything that is not a well-formed data set.
 */
export function readIdentifier(
  bytes: Buffer,
  isExplicitVr: boolean,
  limits: IdentifierLimits = { maxElements: MAX_IDENTIFIER_ELEMENTS, maxDepth: MAX_IDENTIFIER_DEPTH },
): IdentifierReading {
  let count = 0;
  let refusal: IdentifierRefusal | undefined;

  /** Reads elements from `start` up to `end` (or up to the delimiter `until`); returns the offset after. */
  const readList = (
    start: number,
    end: number,
    depth: number,
    until: number | undefined,
    into: DataElement[],
  ): number => {
    let offset = start;
    while (offset < end) {
      if (offset + 8 > end) return fail('malformed-identifier');
      const tag = ((bytes.readUInt16LE(offset) << 16) | bytes.readUInt16LE(offset + 2)) >>> 0;
      if (tag === until) {
        if (bytes.readUInt32LE(offset + 4) !== 0) return fail('malformed-identifier');
        return offset + 8;
      }
      if (tag === ITEM || tag === ITEM_END || tag === SEQUENCE_END) return fail('malformed-identifier');
      count += 1;
      if (count > limits.maxElements) return fail('identifier-too-many-elements');
      let vr: string;
      let length: number;
      if (isExplicitVr) {
        vr = bytes.toString('latin1', offset + 4, offset + 6);
        if (!/^[A-Z]{2}$/.test(vr)) return fail('malformed-identifier');
        if (LONG_VRS.has(vr)) {
          if (offset + 12 > end) return fail('malformed-identifier');
          length = bytes.readUInt32LE(offset + 8);
          offset += 12;
        } else {
          length = bytes.readUInt16LE(offset + 6);
          offset += 8;
        }
      } else {
        vr = implicitVrOf(tag);
        length = bytes.readUInt32LE(offset + 4);
        offset += 8;
      }
      if (vr === 'SQ' || length === UNDEFINED_LENGTH) {
        if (vr !== 'SQ' && vr !== 'UN') return fail('malformed-identifier');
        if (depth + 1 > limits.maxDepth) return fail('identifier-too-deep');
        const items: DataElement[][] = [];
        const isUndefined = length === UNDEFINED_LENGTH;
        const sequenceEnd = isUndefined ? end : offset + length;
        if (sequenceEnd > end) return fail('malformed-identifier');
        offset = readItems(offset, sequenceEnd, depth + 1, isUndefined, items);
        if (refusal !== undefined) return end;
        into.push({ tag, vr: 'SQ', value: items });
        continue;
      }
      if (offset + length > end) return fail('malformed-identifier');
      into.push({ tag, vr, value: bytes.subarray(offset, offset + length) });
      offset += length;
    }
    if (until !== undefined) return fail('malformed-identifier');
    return offset;
  };

  const readItems = (
    start: number,
    end: number,
    depth: number,
    isUndefinedLength: boolean,
    items: DataElement[][],
  ): number => {
    let offset = start;
    while (offset < end) {
      if (offset + 8 > end) return fail('malformed-identifier');
      const tag = ((bytes.readUInt16LE(offset) << 16) | bytes.readUInt16LE(offset + 2)) >>> 0;
      const length = bytes.readUInt32LE(offset + 4);
      offset += 8;
      if (tag === SEQUENCE_END && isUndefinedLength) return offset;
      if (tag !== ITEM) return fail('malformed-identifier');
      count += 1;
      if (count > limits.maxElements) return fail('identifier-too-many-elements');
      const item: DataElement[] = [];
      if (length === UNDEFINED_LENGTH) offset = readList(offset, end, depth, ITEM_END, item);
      else {
        if (offset + length > end) return fail('malformed-identifier');
        readList(offset, offset + length, depth, undefined, item);
        offset += length;
      }
      if (refusal !== undefined) return end;
      items.push(item);
    }
    if (isUndefinedLength) return fail('malformed-identifier');
    return offset;
  };

  const fail = (why: IdentifierRefusal): number => {
    refusal ??= why;
    return bytes.length + 1;
  };

  const elements: DataElement[] = [];
  readList(0, bytes.length, 0, undefined, elements);
  return refusal === undefined ? { ok: true, elements } : { ok: false, refusal };
}

function hex4(value: number): string {
  return value.toString(16).toUpperCase().padStart(4, '0');
}
