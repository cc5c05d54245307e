/**
 * The strict structural check of a DICOM Part 10 file, run before any library parses it. `dicom-parser`
 * and `dcmjs` read what they can: they accept a truncated file (the last element is cut short, the pixel
 * data is missing bytes), recurse without a depth bound, and allocate an object per element, so a file of
 * millions of tiny elements or thousands of nested sequences exhausts memory or the stack. Neither has a
 * hook to count elements or to bound nesting, and their errors do not say what was wrong.
 *
 * This scan walks every element header once without allocating per element (an explicit stack of open
 * sequences and items, no recursion), and fails with a {@link DicomError} naming the cause:
 *
 * - the `DICM` prefix, the file meta information group and its transfer syntax;
 * - every element's, item's and fragment's length against the end of the file and of its enclosing
 *   item, the pixel data's included (a truncated file fails);
 * - the VR of every explicit-VR element, and lengths the encoding forbids;
 * - the element count, the sequence nesting depth and the size (of a deflated data set once inflated);
 * - the length of every string value against its VR's limit (`value-limits.ts`), so that no library
 *   is handed a header value megabytes long to decode.
 *
 * It records where the few top-level elements that extraction needs are, and the pixel data's fragments.
 */
import { inflateRawSync } from 'node:zlib';
import { DicomError, formatTag } from './dicom-error.ts';
import type { TransferSyntax } from './transfer-syntaxes.ts';
import { describeTransferSyntax, findTransferSyntax } from './transfer-syntaxes.ts';
import { DEFAULT_MAX_TEXT_BYTES, checkedVrOf, findOverlongValue } from './value-limits.ts';

export interface ScanLimits {
  /** Elements, items and fragments counted over the whole file. */
  readonly maxElements: number;
  /** Sequences open inside each other. */
  readonly maxDepth: number;
  /** The file, and a deflated data set once inflated. */
  readonly maxBytes: number;
  /**
   * The longest long-text value (ST, LT, UT, UC, UR) of a standard element, and the longest element the
   * service reads as text (`value-limits.ts`); default {@link DEFAULT_MAX_TEXT_BYTES}.
   */
  readonly maxTextBytes?: number;
}

export interface ElementRef {
  readonly offset: number;
  readonly length: number;
}

export interface Part10Scan {
  readonly transferSyntax: TransferSyntax;
  /** The bytes that the data set is read from: the file, or its meta information + the inflated data set. */
  readonly bytes: Uint8Array;
  readonly isLittleEndian: boolean;
  readonly elementCount: number;
  /** The data set has overlay data (60xx,3000) at the top level. */
  readonly hasOverlays: boolean;
  /** Where the top-level elements of {@link RECORDED_TAGS} are. */
  readonly elements: ReadonlyMap<number, ElementRef>;
  /** The top-level Pixel Data: its value (native), or its fragments, the offset table first (encapsulated). */
  readonly pixelData?:
    | {
        readonly isEncapsulated: false;
        readonly value: ElementRef;
        /** The explicit VR (OB or OW); undefined in implicit VR. */
        readonly vr?: string;
      }
    | { readonly isEncapsulated: true; readonly fragments: readonly ElementRef[] };
}

export const TAG = {
  SOPClassUID: 0x00080016,
  SamplesPerPixel: 0x00280002,
  PhotometricInterpretation: 0x00280004,
  PlanarConfiguration: 0x00280006,
  NumberOfFrames: 0x00280008,
  Rows: 0x00280010,
  Columns: 0x00280011,
  BitsAllocated: 0x00280100,
  BitsStored: 0x00280101,
  PixelRepresentation: 0x00280103,
  WindowCenter: 0x00281050,
  WindowWidth: 0x00281051,
  RescaleIntercept: 0x00281052,
  RescaleSlope: 0x00281053,
  LossyImageCompression: 0x00282110,
  VOILUTSequence: 0x00283010,
  EncapsulatedDocument: 0x00420011,
  MIMETypeOfEncapsulatedDocument: 0x00420012,
  EncapsulatedDocumentLength: 0x00420015,
  PixelData: 0x7fe00010,
} as const;

const RECORDED_TAGS: ReadonlySet<number> = new Set(Object.values(TAG));

const UNDEFINED_LENGTH = 0xffffffff;
const ITEM = 0xfffee000;
const ITEM_DELIMITER = 0xfffee00d;
const SEQUENCE_DELIMITER = 0xfffee0dd;

const VRS = new Set([
  'AE', 'AS', 'AT', 'CS', 'DA', 'DS', 'DT', 'FD', 'FL', 'IS', 'LO', 'LT', 'OB', 'OD', 'OF', 'OL', 'OV',
  'OW', 'PN', 'SH', 'SL', 'SQ', 'SS', 'ST', 'SV', 'TM', 'UC', 'UI', 'UL', 'UN', 'UR', 'US', 'UT', 'UV',
]); // prettier-ignore
/** VRs whose explicit encoding has two reserved bytes and a 32-bit length (PS3.5 7.1.2). */
const LONG_VRS = new Set(['OB', 'OD', 'OF', 'OL', 'OV', 'OW', 'SQ', 'SV', 'UC', 'UN', 'UR', 'UT', 'UV']);

interface Container {
  readonly kind: 'sequence' | 'item' | 'fragments';
  readonly tag: number;
  /** The end of a defined-length container, or of its parent for an undefined-length one. */
  readonly end: number;
  readonly isUndefinedLength: boolean;
  readonly isImplicit: boolean;
  readonly isLittleEndian: boolean;
}

/** Checks the structure of `file` within `limits`; throws a {@link DicomError} naming the first problem. */
export function scanPart10(file: Uint8Array, limits: ScanLimits): Part10Scan {
  if (file.length > limits.maxBytes) {
    throw new DicomError(
      'too-large',
      `The file has ${file.length} bytes, over the limit of ${limits.maxBytes}`,
    );
  }
  if (file.length < 132 || latin1(file, 128, 4) !== 'DICM') {
    throw new DicomError('no-dicm-prefix', 'No DICM prefix at byte 128: not a DICOM Part 10 file');
  }
  const meta = readFileMeta(file, limits);
  const uid = meta.transferSyntaxUid;
  const syntax = findTransferSyntax(uid);
  if (syntax === undefined) {
    throw new DicomError(
      'unsupported-transfer-syntax',
      `Unsupported transfer syntax ${describeTransferSyntax(uid)}`,
    );
  }
  let bytes = file;
  if (syntax.encoding === 'deflated-le') {
    bytes = inflateDataSet(file, meta.end, limits.maxBytes);
  }
  const isLittleEndian = syntax.encoding !== 'explicit-be';
  const walked = walkDataSet(bytes, meta.end, {
    isImplicit: syntax.encoding === 'implicit-le',
    isLittleEndian,
    limits,
    elementCount: meta.elementCount,
  });
  return { transferSyntax: syntax, bytes, isLittleEndian, ...walked };
}

/**
 * The refusal of the first string value over its limit among the first `limits.maxElements` elements of
 * `file`, on the caller's thread in one bounded pass (element headers only, no inflating: a deflated
 * data set, like anything else this pass cannot read, is left to {@link scanPart10}); undefined when
 * none is found. Queue add calls it so that a body whose header holds an overlong value is refused
 * before it is stored; the whole scan still checks the whole file when the queue reads it.
 */
export function findOverlongValueError(file: Uint8Array, limits: ScanLimits): DicomError | undefined {
  try {
    if (file.length < 132 || latin1(file, 128, 4) !== 'DICM') return undefined;
    const meta = readFileMeta(file, limits);
    const syntax = findTransferSyntax(meta.transferSyntaxUid);
    if (syntax === undefined || syntax.encoding === 'deflated-le') return undefined;
    walkDataSet(file, meta.end, {
      isImplicit: syntax.encoding === 'implicit-le',
      isLittleEndian: syntax.encoding !== 'explicit-be',
      limits,
      elementCount: meta.elementCount,
    });
    return undefined;
  } catch (error) {
    if (error instanceof DicomError && (error.code === 'value-too-long' || error.code === 'text-too-long'))
      return error;
    return undefined;
  }
}

/** Group 0002, always explicit VR little endian; returns the transfer syntax and where the data set starts. */
function readFileMeta(
  file: Uint8Array,
  limits: ScanLimits,
): { transferSyntaxUid: string; end: number; elementCount: number } {
  let pos = 132;
  let transferSyntaxUid: string | undefined;
  let elementCount = 0;
  if (file.length < pos + 8 || readUint16(file, pos, true) !== 0x0002) {
    throw new DicomError('bad-file-meta', 'The file meta information group (0002) is missing after DICM');
  }
  while (pos + 8 <= file.length && readUint16(file, pos, true) === 0x0002) {
    const tag = readTag(file, pos, true);
    const vr = latin1(file, pos + 4, 2);
    if (!VRS.has(vr)) {
      throw new DicomError(
        'bad-file-meta',
        `Bad VR ${printableVr(file, pos + 4)} in the file meta information at ${formatTag(tag)}`,
      );
    }
    let length: number;
    if (LONG_VRS.has(vr)) {
      if (pos + 12 > file.length) throw pastEnd(tag, pos, 12, file.length);
      length = readUint32(file, pos + 8, true);
      pos += 12;
    } else {
      length = readUint16(file, pos + 6, true);
      pos += 8;
    }
    if (length === UNDEFINED_LENGTH) {
      throw new DicomError(
        'bad-file-meta',
        `Undefined length in the file meta information at ${formatTag(tag)}`,
      );
    }
    if (pos + length > file.length) throw pastEnd(tag, pos, length, file.length);
    throwIfOverlong(file, pos, length, tag, vr, limits.maxTextBytes ?? DEFAULT_MAX_TEXT_BYTES);
    if (tag === 0x00020010) transferSyntaxUid = trimValue(latin1(file, pos, length));
    pos += length;
    if (++elementCount > limits.maxElements) throw tooMany(limits.maxElements);
  }
  if (transferSyntaxUid === undefined || transferSyntaxUid === '') {
    throw new DicomError(
      'missing-transfer-syntax',
      'The file meta information has no Transfer Syntax UID (0002,0010)',
    );
  }
  return { transferSyntaxUid, end: pos, elementCount };
}

function inflateDataSet(file: Uint8Array, start: number, maxBytes: number): Uint8Array {
  let inflated: Buffer;
  try {
    inflated = inflateRawSync(file.subarray(start), { maxOutputLength: Math.max(1, maxBytes - start) });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') {
      throw new DicomError('too-large', `The deflated data set inflates to more than ${maxBytes} bytes`);
    }
    throw new DicomError('bad-deflate', 'The deflated data set cannot be inflated');
  }
  const bytes = new Uint8Array(start + inflated.length);
  bytes.set(file.subarray(0, start), 0);
  bytes.set(inflated, start);
  return bytes;
}

interface WalkOptions {
  readonly isImplicit: boolean;
  readonly isLittleEndian: boolean;
  readonly limits: ScanLimits;
  readonly elementCount: number;
}

function walkDataSet(
  bytes: Uint8Array,
  start: number,
  options: WalkOptions,
): Pick<Part10Scan, 'elementCount' | 'elements' | 'pixelData' | 'hasOverlays'> {
  const { limits } = options;
  const maxTextBytes = limits.maxTextBytes ?? DEFAULT_MAX_TEXT_BYTES;
  const fileEnd = bytes.length;
  const stack: Container[] = [];
  const elements = new Map<number, ElementRef>();
  let pixelData: Part10Scan['pixelData'];
  let hasOverlays = false;
  let fragments: ElementRef[] | undefined;
  let depth = 0;
  let count = options.elementCount;
  let pos = start;

  const open = (container: Container) => {
    if (container.kind !== 'item') {
      depth += 1;
      if (depth > limits.maxDepth) {
        throw new DicomError(
          'nesting-too-deep',
          `Sequences nested more than ${limits.maxDepth} deep (at ${formatTag(container.tag)}, byte ${pos})`,
        );
      }
    }
    stack.push(container);
  };
  const close = () => {
    const closed = stack.pop();
    if (closed !== undefined && closed.kind !== 'item') depth -= 1;
  };

  for (;;) {
    const top = stack.at(-1);
    const end = top === undefined ? fileEnd : top.end;
    if (top !== undefined && !top.isUndefinedLength && pos === top.end) {
      close();
      continue;
    }
    if (top === undefined && pos === fileEnd) break;
    if (pos + 8 > end) {
      if (top !== undefined && top.isUndefinedLength && end === fileEnd) {
        throw new DicomError(
          'unterminated-sequence',
          `The ${top.kind === 'fragments' ? 'encapsulated pixel data' : top.kind} ${formatTag(top.tag)} is not closed before the end of the file`,
        );
      }
      throw new DicomError(
        'element-past-end',
        `An element header at byte ${pos} runs past the end of the ${end === fileEnd ? 'file' : 'enclosing item'} (${end - pos} bytes left)`,
      );
    }
    const le = top === undefined ? options.isLittleEndian : top.isLittleEndian;
    const isImplicit = top === undefined ? options.isImplicit : top.isImplicit;
    const tag = readTag(bytes, pos, le);
    if (++count > limits.maxElements) throw tooMany(limits.maxElements);

    if (tag >>> 16 === 0xfffe) {
      const length = readUint32(bytes, pos + 4, le);
      pos += 8;
      if (tag === ITEM) {
        if (top === undefined || top.kind === 'item') {
          throw new DicomError('bad-sequence', `An item tag outside a sequence at byte ${pos - 8}`);
        }
        if (top.kind === 'fragments') {
          if (length === UNDEFINED_LENGTH) {
            throw new DicomError(
              'bad-length',
              `A pixel data fragment of undefined length at byte ${pos - 8}`,
            );
          }
          if (pos + length > end) throw pastEnd(TAG.PixelData, pos, length, end, 'fragment of');
          fragments?.push({ offset: pos, length });
          pos += length;
          continue;
        }
        if (length !== UNDEFINED_LENGTH && pos + length > end)
          throw pastEnd(top.tag, pos, length, end, 'item of');
        open({
          kind: 'item',
          tag: top.tag,
          end: length === UNDEFINED_LENGTH ? end : pos + length,
          isUndefinedLength: length === UNDEFINED_LENGTH,
          isImplicit,
          isLittleEndian: le,
        });
      } else if (tag === ITEM_DELIMITER) {
        if (top?.kind !== 'item' || !top.isUndefinedLength) {
          throw new DicomError('bad-sequence', `An item delimiter with no open item at byte ${pos - 8}`);
        }
        close();
      } else if (tag === SEQUENCE_DELIMITER) {
        if (top === undefined || top.kind === 'item' || !top.isUndefinedLength) {
          throw new DicomError(
            'bad-sequence',
            `A sequence delimiter with no open sequence at byte ${pos - 8}`,
          );
        }
        if (top.kind === 'fragments' && stack.length === 1 && fragments !== undefined) {
          pixelData = { isEncapsulated: true, fragments };
        }
        close();
      } else {
        throw new DicomError('bad-sequence', `Unexpected delimiter tag ${formatTag(tag)} at byte ${pos - 8}`);
      }
      continue;
    }

    if (top !== undefined && top.kind !== 'item') {
      throw new DicomError(
        'bad-sequence',
        `Element ${formatTag(tag)} inside sequence ${formatTag(top.tag)} but outside any item`,
      );
    }
    let vr: string | undefined;
    let length: number;
    if (isImplicit) {
      length = readUint32(bytes, pos + 4, le);
      pos += 8;
    } else {
      vr = latin1(bytes, pos + 4, 2);
      if (!VRS.has(vr)) {
        throw new DicomError(
          'bad-vr',
          `Bad VR ${printableVr(bytes, pos + 4)} for element ${formatTag(tag)} at byte ${pos}`,
        );
      }
      if (LONG_VRS.has(vr)) {
        if (pos + 12 > end) throw pastEnd(tag, pos, 12, end);
        length = readUint32(bytes, pos + 8, le);
        pos += 12;
      } else {
        length = readUint16(bytes, pos + 6, le);
        pos += 8;
      }
    }

    if (length === UNDEFINED_LENGTH) {
      if (tag === TAG.PixelData) {
        if (top === undefined) fragments = [];
        open({ kind: 'fragments', tag, end, isUndefinedLength: true, isImplicit, isLittleEndian: le });
      } else if (vr === undefined || vr === 'SQ' || vr === 'UN') {
        // An undefined-length UN is a sequence encoded in implicit VR little endian (PS3.5 6.2.2).
        const isUn = vr === 'UN';
        open({
          kind: 'sequence',
          tag,
          end,
          isUndefinedLength: true,
          isImplicit: isImplicit || isUn,
          isLittleEndian: isUn ? true : le,
        });
      } else {
        throw new DicomError('bad-length', `Undefined length on element ${formatTag(tag)} (VR ${vr})`);
      }
      continue;
    }
    if (pos + length > end) throw pastEnd(tag, pos, length, end);
    if (top === undefined) {
      if (RECORDED_TAGS.has(tag)) elements.set(tag, { offset: pos, length });
      if (tag >>> 16 >= 0x6000 && tag >>> 16 <= 0x601e && (tag & 0xffff) === 0x3000) hasOverlays = true;
      if (tag === TAG.PixelData) {
        pixelData = {
          isEncapsulated: false,
          value: { offset: pos, length },
          ...(vr === undefined ? {} : { vr }),
        };
      }
    }
    const isSequence =
      vr === 'SQ' ||
      ((vr === undefined || vr === 'UN') && length >= 8 && readTag(bytes, pos, vr === 'UN' || le) === ITEM);
    if (!isSequence) throwIfOverlong(bytes, pos, length, tag, vr, maxTextBytes);
    if (isSequence) {
      const isUn = vr === 'UN';
      open({
        kind: 'sequence',
        tag,
        end: pos + length,
        isUndefinedLength: false,
        isImplicit: isImplicit || isUn,
        isLittleEndian: isUn ? true : le,
      });
      continue;
    }
    pos += length;
  }
  return { elementCount: count, elements, hasOverlays, ...(pixelData === undefined ? {} : { pixelData }) };
}

/** Refuses a string value over its limit (`value-limits.ts`), naming the element, never its value. */
function throwIfOverlong(
  bytes: Uint8Array,
  pos: number,
  length: number,
  tag: number,
  vr: string | undefined,
  maxTextBytes: number,
): void {
  const checkedVr = checkedVrOf(tag, vr);
  if (checkedVr === undefined) return;
  const overlong = findOverlongValue(bytes, pos, length, tag, checkedVr, maxTextBytes);
  if (overlong === undefined) return;
  throw overlong.limit === 'vr'
    ? new DicomError(
        'value-too-long',
        `A value of element ${formatTag(tag)} (VR ${checkedVr}) at byte ${pos} has ${overlong.valueBytes} bytes, over the ${overlong.maxBytes} its VR allows (PS3.5 Table 6.2-1)`,
      )
    : new DicomError(
        'text-too-long',
        `Element ${formatTag(tag)} (VR ${checkedVr}) at byte ${pos} has ${overlong.valueBytes} bytes, over the limit of ${overlong.maxBytes} (DICOM_MAX_TEXT_BYTES)`,
      );
}

// --- reading values of the recorded elements ---------------------------------------------------------

/** The text value of top-level element `tag` (trailing spaces and NULs removed), or undefined. */
export function readText(scan: Part10Scan, tag: number): string | undefined {
  const ref = scan.elements.get(tag);
  if (ref === undefined) return undefined;
  const value = trimValue(latin1(scan.bytes, ref.offset, ref.length));
  return value === '' ? undefined : value;
}

/** The first unsigned 16-bit value (VR US) of top-level element `tag`, or undefined. */
export function readUs(scan: Part10Scan, tag: number): number | undefined {
  const ref = scan.elements.get(tag);
  if (ref === undefined || ref.length < 2) return undefined;
  return readUint16(scan.bytes, ref.offset, scan.isLittleEndian);
}

/** The first unsigned 32-bit value (VR UL) of top-level element `tag`, or undefined. */
export function readUl(scan: Part10Scan, tag: number): number | undefined {
  const ref = scan.elements.get(tag);
  if (ref === undefined || ref.length < 4) return undefined;
  return readUint32(scan.bytes, ref.offset, scan.isLittleEndian);
}

/** The first number of a multi-valued decimal or integer string (VR DS, IS), or undefined. */
export function readNumber(scan: Part10Scan, tag: number): number | undefined {
  const text = readText(scan, tag)?.split('\\')[0]?.trim();
  if (text === undefined || text === '') return undefined;
  const value = Number(text);
  return Number.isFinite(value) ? value : undefined;
}

// --- bytes -------------------------------------------------------------------------------------------

function readUint16(bytes: Uint8Array, pos: number, le: boolean): number {
  return le ? bytes[pos]! | (bytes[pos + 1]! << 8) : (bytes[pos]! << 8) | bytes[pos + 1]!;
}

function readUint32(bytes: Uint8Array, pos: number, le: boolean): number {
  return le
    ? (bytes[pos]! | (bytes[pos + 1]! << 8) | (bytes[pos + 2]! << 16) | (bytes[pos + 3]! << 24)) >>> 0
    : ((bytes[pos]! << 24) | (bytes[pos + 1]! << 16) | (bytes[pos + 2]! << 8) | bytes[pos + 3]!) >>> 0;
}

function readTag(bytes: Uint8Array, pos: number, le: boolean): number {
  return ((readUint16(bytes, pos, le) << 16) | readUint16(bytes, pos + 2, le)) >>> 0;
}

function latin1(bytes: Uint8Array, pos: number, length: number): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset + pos, length).toString('latin1');
}

function trimValue(value: string): string {
  return value.replace(/[\0 ]+$/, '').trim();
}

function printableVr(bytes: Uint8Array, pos: number): string {
  const text = latin1(bytes, pos, 2);
  return /^[\x20-\x7e]{2}$/.test(text)
    ? `'${text}'`
    : `0x${Buffer.from(bytes.subarray(pos, pos + 2)).toString('hex')}`;
}

function pastEnd(tag: number, pos: number, length: number, end: number, what = ''): DicomError {
  return new DicomError(
    'element-past-end',
    `The ${what === '' ? 'element' : `${what} element`} ${formatTag(tag)} at byte ${pos} declares ${length} bytes, but only ${Math.max(0, end - pos)} remain: the file is truncated or corrupt`,
  );
}

function tooMany(maxElements: number): DicomError {
  return new DicomError('too-many-elements', `The file has more than ${maxElements} elements`);
}
