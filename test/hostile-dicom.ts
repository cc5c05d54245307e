/**
 * DICOM instances whose header holds a value far longer than its VR allows (the hostile files of the
 * value-length limits), and well-formed ones with large values that are not limited (pixel data, an
 * encapsulated document, private text): built byte by byte, since dcmjs refuses to write an overlong
 * value. Each is a whole instance of an accepted storage class, so that only the long value is wrong.
 */
import { deflateRawSync } from 'node:zlib';
import { newUid } from './dicom-instances.ts';
import { buildPart10File } from './factories-queue.ts';

export const IMPLICIT_VR_LITTLE_ENDIAN = '1.2.840.10008.1.2';
export const EXPLICIT_VR_LITTLE_ENDIAN = '1.2.840.10008.1.2.1';
export const DEFLATED_EXPLICIT_VR_LITTLE_ENDIAN = '1.2.840.10008.1.2.1.99';
const SECONDARY_CAPTURE = '1.2.840.10008.5.1.4.1.1.7';

const LONG_VRS = new Set(['OB', 'OD', 'OF', 'OL', 'OV', 'OW', 'SQ', 'SV', 'UC', 'UN', 'UR', 'UT', 'UV']);

/** One element, in implicit VR or explicit VR little endian; padded to even as its VR is. */
function element(tag: number, vr: string, value: Buffer, isImplicit: boolean): Buffer {
  const padded =
    value.length % 2 === 0
      ? value
      : Buffer.concat([value, Buffer.from([vr === 'OB' || vr === 'UI' ? 0 : 0x20])]);
  let head: Buffer;
  if (isImplicit) {
    head = Buffer.alloc(8);
    head.writeUInt32LE(padded.length, 4);
  } else if (LONG_VRS.has(vr)) {
    head = Buffer.alloc(12);
    head.write(vr, 4, 'latin1');
    head.writeUInt32LE(padded.length, 8);
  } else {
    head = Buffer.alloc(8);
    head.write(vr, 4, 'latin1');
    head.writeUInt16LE(padded.length, 6);
  }
  head.writeUInt16LE(tag >>> 16, 0);
  head.writeUInt16LE(tag & 0xffff, 2);
  return Buffer.concat([head, padded]);
}

export interface ExtraElement {
  readonly tag: number;
  /** The explicit VR it is written with (ignored in implicit VR). */
  readonly vr: string;
  readonly value: Buffer;
}

export interface HostileOptions {
  readonly transferSyntaxUid?: string;
  readonly sopInstanceUid?: string;
  /** Elements added to the data set (in tag order with the others). */
  readonly extra?: readonly ExtraElement[];
  /** PatientName's value (default `TEST^PATIENT`), written as PN (implicit VR: no VR at all). */
  readonly patientName?: Buffer;
  /** The VR PatientName is written with in explicit VR (default PN; UT carries more than 64 KiB). */
  readonly patientNameVr?: string;
}

/**
 * A Secondary Capture instance with a 2 x 2 grey image, in `transferSyntaxUid` (implicit or explicit VR
 * little endian, or deflated explicit VR), with the given extra elements.
 */
export function instanceWith(options: HostileOptions = {}): Buffer {
  const syntax = options.transferSyntaxUid ?? EXPLICIT_VR_LITTLE_ENDIAN;
  const isImplicit = syntax === IMPLICIT_VR_LITTLE_ENDIAN;
  const sopInstanceUid = options.sopInstanceUid ?? newUid();
  const text = (s: string) => Buffer.from(s, 'latin1');
  const us = (value: number) => {
    const b = Buffer.alloc(2);
    b.writeUInt16LE(value, 0);
    return b;
  };
  const elements: ExtraElement[] = [
    { tag: 0x00080016, vr: 'UI', value: text(SECONDARY_CAPTURE) },
    { tag: 0x00080018, vr: 'UI', value: text(sopInstanceUid) },
    { tag: 0x00080020, vr: 'DA', value: text('20240101') },
    { tag: 0x00080060, vr: 'CS', value: text('OT') },
    {
      tag: 0x00100010,
      vr: options.patientNameVr ?? 'PN',
      value: options.patientName ?? text('TEST^PATIENT'),
    },
    { tag: 0x00100020, vr: 'LO', value: text('HOSTILE-1') },
    { tag: 0x0020000d, vr: 'UI', value: text(newUid()) },
    { tag: 0x00280002, vr: 'US', value: us(1) },
    { tag: 0x00280004, vr: 'CS', value: text('MONOCHROME2') },
    { tag: 0x00280010, vr: 'US', value: us(2) },
    { tag: 0x00280011, vr: 'US', value: us(2) },
    { tag: 0x00280100, vr: 'US', value: us(8) },
    { tag: 0x00280101, vr: 'US', value: us(8) },
    { tag: 0x00280102, vr: 'US', value: us(7) },
    { tag: 0x00280103, vr: 'US', value: us(0) },
    { tag: 0x7fe00010, vr: 'OB', value: Buffer.from([0, 64, 128, 255]) },
    ...(options.extra ?? []),
  ].sort((a, b) => a.tag - b.tag);
  const dataSet = Buffer.concat(elements.map((e) => element(e.tag, e.vr, e.value, isImplicit)));
  const file = buildPart10File(dataSet, {
    transferSyntaxUid: syntax,
    sopClassUid: SECONDARY_CAPTURE,
    sopInstanceUid,
  });
  if (syntax !== DEFLATED_EXPLICIT_VR_LITTLE_ENDIAN) return file;
  return Buffer.concat([file.subarray(0, file.length - dataSet.length), deflateRawSync(dataSet)]);
}

/** `bytes` bytes of `A`, a value no VR limit allows as a name (never printed by the tests). */
export function longText(bytes: number): Buffer {
  return Buffer.alloc(bytes, 0x41);
}
