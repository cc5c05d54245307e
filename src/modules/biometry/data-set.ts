/**
 * Values of a DICOM data set read by their VR with `dicom-parser`: the element's own VR in an explicit
 * VR file, else (implicit VR, or a private element sent as UN) the VR the caller expects from the
 * device's conformance statement. Private elements are found through their creator, never at an assumed
 * block: a private creator element (gggg,00xx) holding the creator's name reserves the elements
 * (gggg,xx00-xxFF), and a nested item without creators of its own uses its parent's block.
 */
import dicomParser from 'dicom-parser';

export type DataSet = dicomParser.DataSet;

/** The VRs the readers below decode as numbers. */
export type NumberVr = 'FD' | 'FL' | 'DS' | 'IS' | 'SL' | 'SS' | 'UL' | 'US';

/**
 * Parses a Part 10 file up to its pixel data. dicom-parser records each element's offset without
 * copying its value, so a large image or encapsulated document costs no more than its header. In an
 * implicit VR file `vrOf` names the VR of elements the parser cannot know (private sequences of defined
 * length, which it would otherwise keep as bytes).
 */
export function parseDataSet(bytes: Uint8Array, vrOf?: VrOf): DataSet {
  const dataSet = dicomParser.parseDicom(bytes, {
    untilTag: 'x7fe00010',
    ...(vrOf === undefined ? {} : { vrCallback: vrOf }),
  });
  if (vrOf !== undefined) vrOfByBytes.set(dataSet.byteArray, vrOf);
  return dataSet;
}

export type VrOf = (tag: string) => string | undefined;

/** The `vrOf` a file was parsed with, by its bytes (nested items share their file's bytes). */
const vrOfByBytes = new WeakMap<object, VrOf>();

/** dicom-parser's key of (group, element). */
export function tagKey(group: number, element: number): string {
  return `x${group.toString(16).padStart(4, '0')}${element.toString(16).padStart(4, '0')}`;
}

/** The trimmed text of a string element, or undefined when absent or empty. */
export function readString(dataSet: DataSet, tag: string): string | undefined {
  const element = dataSet.elements[tag];
  if (element === undefined || element.length === 0) return undefined;
  const value = dataSet.string(tag)?.replace(/\0+$/, '').trim();
  return value === undefined || value === '' ? undefined : value;
}

/** The `index`-th value of a numeric element, decoded by its VR (else `expected`), or undefined. */
export function readNumber(dataSet: DataSet, tag: string, expected: NumberVr, index = 0): number | undefined {
  const element = dataSet.elements[tag];
  if (element === undefined || element.length === 0) return undefined;
  const vr = element.vr === undefined || element.vr === 'UN' ? expected : element.vr;
  let value: number | undefined;
  switch (vr) {
    case 'FD':
      value = element.length >= 8 * (index + 1) ? dataSet.double(tag, index) : undefined;
      break;
    case 'FL':
      value = element.length >= 4 * (index + 1) ? dataSet.float(tag, index) : undefined;
      break;
    case 'DS':
      value = dataSet.floatString(tag, index);
      break;
    case 'IS':
      value = dataSet.intString(tag, index);
      break;
    case 'SL':
      value = dataSet.int32(tag, index);
      break;
    case 'SS':
      value = dataSet.int16(tag, index);
      break;
    case 'UL':
      value = dataSet.uint32(tag, index);
      break;
    case 'US':
      value = dataSet.uint16(tag, index);
      break;
    default: {
      // A string VR where a number was expected: read the text.
      const text = readString(dataSet, tag);
      value = text === undefined ? undefined : Number(text.split('\\')[index]);
    }
  }
  return value === undefined || !Number.isFinite(value) ? undefined : value;
}

/** The item data sets of a sequence element (none when absent or empty). */
export function readItems(dataSet: DataSet, tag: string): DataSet[] {
  const element = dataSet.elements[tag];
  if (element === undefined) return [];
  if (element.items === undefined && element.length > 0) parsePrivateSequence(dataSet, element, tag);
  const items = element.items ?? [];
  return items.flatMap((item) => (item.dataSet === undefined ? [] : [item.dataSet]));
}

/**
 * Parses the items of a private sequence that dicom-parser left as bytes: one of defined length in an
 * implicit VR file, or one sent as UN (whose value is implicit VR little endian, PS3.5 6.2.2). Only
 * elements the file says are sequences, or that the caller's `vrOf` names so, are parsed.
 */
function parsePrivateSequence(dataSet: DataSet, element: dicomParser.Element, tag: string): void {
  const vrOf = vrOfByBytes.get(dataSet.byteArray);
  const isSequence =
    element.vr === 'SQ' || ((element.vr === undefined || element.vr === 'UN') && vrOf?.(tag) === 'SQ');
  if (!isSequence) return;
  try {
    const stream = new dicomParser.ByteStream(
      dicomParser.littleEndianByteArrayParser,
      dataSet.byteArray,
      element.dataOffset,
    );
    // dicom-parser types its callback as always naming a VR; undefined lets it peek, as in parseDicom.
    dicomParser.readSequenceItemsImplicit(stream, element, vrOf as ((tag: string) => string) | undefined);
  } catch {
    // Bytes that are no sequence after all: no items.
    element.items = [];
  }
}

/** The block (0x10-0xFF) that `creator` reserves in `group` of `dataSet`, or undefined. */
export function findPrivateBlock(dataSet: DataSet, group: number, creator: string): number | undefined {
  for (let block = 0x10; block <= 0xff; block++) {
    const key = tagKey(group, block);
    if (dataSet.elements[key] !== undefined && readString(dataSet, key) === creator) return block;
  }
  return undefined;
}

/**
 * The private elements of one creator in one group, addressed by their low byte (`0x43` for the element
 * the creator's documents call (gggg,xx43)).
 */
export interface PrivateReader {
  readonly dataSet: DataSet;
  tag(low: number): string;
  has(low: number): boolean;
  string(low: number): string | undefined;
  number(low: number, expected: NumberVr, index?: number): number | undefined;
  /** The items of sequence `low`, each with its own block (its creator, else this one). */
  items(low: number): PrivateReader[];
}

/** A reader of `dataSet`'s elements of `creator` in `group`; `block` is the parent's, for nested items. */
export function privateReader(
  dataSet: DataSet,
  group: number,
  creator: string,
  block: number,
): PrivateReader {
  const own = findPrivateBlock(dataSet, group, creator) ?? block;
  const tag = (low: number) => tagKey(group, (own << 8) | low);
  return {
    dataSet,
    tag,
    has: (low) => dataSet.elements[tag(low)] !== undefined,
    string: (low) => readString(dataSet, tag(low)),
    number: (low, expected, index) => readNumber(dataSet, tag(low), expected, index),
    items: (low) => readItems(dataSet, tag(low)).map((item) => privateReader(item, group, creator, own)),
  };
}
