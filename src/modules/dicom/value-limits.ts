/**
 * The longest value each string VR may carry, checked by the structural scan (`part10-scan.ts`) for
 * every element before any library decodes one: a file whose header holds a value megabytes long is
 * refused in the scan's single pass over element headers, instead of costing a decoding thread seconds
 * of text decoding and being stored whole with the request.
 *
 * The limits are PS3.5 Table 6.2-1's maximum lengths, counted in bytes at 4 bytes per character
 * ({@link BYTES_PER_CHARACTER}): a text VR (SH, LO, PN, ST, LT, UC, UT) may be written in any
 * character set, UTF-8's widest characters included; for the VRs of the default repertoire (AE, AS, CS,
 * DA, DS, DT, IS, TM, UI) the same slack takes the slightly overlong values some devices write (a DS
 * with too many digits, a CS code of 20 characters) while each value stays far under a kilobyte. A
 * multi-valued element is checked value by value (between backslashes), except the VRs whose single
 * value may hold a backslash (ST, LT, UT, UR).
 *
 * The long-text VRs (ST, LT, UT, UC, UR) of standard elements have the site's limit as well
 * (`DICOM_MAX_TEXT_BYTES`: a few KB by default), since UC, UT and UR have no maximum of their own.
 * Private elements (odd groups) are checked against the VR's own maximum only: devices keep long private
 * texts (XML reports and the like) that the service never decodes. Binary VRs (OB, OW, OF, OD, OL, OV,
 * UN, the numbers) and sequences are not limited here: pixel data and encapsulated documents keep only
 * the file size limit.
 *
 * An element the service reads as text (the tags of {@link IMPLICIT_VRS}, private creators) is also
 * limited in whole to the site's text limit, so that many short values joined by backslashes cannot
 * make a long one either.
 *
 * In implicit VR, and for an element sent as UN, the VR is the one the service expects for the tags it
 * reads as text ({@link IMPLICIT_VRS}); other elements of such a file are not decoded as text, so they
 * are not limited.
 */

/** Bytes allowed per character of a PS3.5 maximum (see the file's comment). */
export const BYTES_PER_CHARACTER = 4;

/** The default of `DICOM_MAX_TEXT_BYTES`: the longest ST, LT, UT, UC or UR value of a standard element. */
export const DEFAULT_MAX_TEXT_BYTES = 16 * 1024;

/**
 * PS3.5 Table 6.2-1's maximum length of one value, in characters; a PN's is 64 per component group, of
 * which it has up to three (alphabetic, ideographic, phonetic, separated by `=`). TM is taken at 16
 * characters, the ACR-NEMA form some devices still write; DA at 10 (`YYYY.MM.DD`) for the same reason.
 */
const MAX_CHARACTERS: Readonly<Record<string, number>> = {
  AE: 16,
  AS: 4,
  CS: 16,
  DA: 10,
  DS: 16,
  DT: 26,
  IS: 12,
  LO: 64,
  LT: 10_240,
  PN: 3 * 64 + 2,
  SH: 16,
  ST: 1_024,
  TM: 16,
  UI: 64,
};

/** VRs with no maximum of their own (2^32 - 2 bytes), limited by the site's text limit. */
const UNBOUNDED_TEXT_VRS: ReadonlySet<string> = new Set(['UC', 'UR', 'UT']);
/** VRs of the site's text limit on standard elements. */
const LONG_TEXT_VRS: ReadonlySet<string> = new Set(['LT', 'ST', 'UC', 'UR', 'UT']);
/** VRs whose value is one value, a backslash being a character of it. */
const SINGLE_VALUE_VRS: ReadonlySet<string> = new Set(['LT', 'ST', 'UR', 'UT']);

const BACKSLASH = 0x5c;

/**
 * The VRs of the elements the service reads as text (the header of `dicom-header.ts`), by tag number:
 * what an implicit VR file, or an element sent as UN, is checked against. Private creator elements
 * (gggg,0010-00FF of an odd group) are LO wherever they are.
 */
export const IMPLICIT_VRS: ReadonlyMap<number, string> = new Map([
  [0x00080016, 'UI'], // SOPClassUID
  [0x00080018, 'UI'], // SOPInstanceUID
  [0x00080020, 'DA'], // StudyDate
  [0x00080021, 'DA'], // SeriesDate
  [0x00080022, 'DA'], // AcquisitionDate
  [0x00080023, 'DA'], // ContentDate
  [0x0008002a, 'DT'], // AcquisitionDateTime
  [0x00080030, 'TM'], // StudyTime
  [0x00080031, 'TM'], // SeriesTime
  [0x00080032, 'TM'], // AcquisitionTime
  [0x00080033, 'TM'], // ContentTime
  [0x00080060, 'CS'], // Modality
  [0x00080070, 'LO'], // Manufacturer
  [0x00080080, 'LO'], // InstitutionName
  [0x00080100, 'SH'], // CodeValue
  [0x00080102, 'SH'], // CodingSchemeDesignator
  [0x00081010, 'SH'], // StationName
  [0x00081030, 'LO'], // StudyDescription
  [0x0008103e, 'LO'], // SeriesDescription
  [0x00081070, 'PN'], // OperatorsName
  [0x00081090, 'LO'], // ManufacturerModelName
  [0x00100010, 'PN'], // PatientName
  [0x00100020, 'LO'], // PatientID
  [0x00100030, 'DA'], // PatientBirthDate
  [0x00100040, 'CS'], // PatientSex
  [0x00181000, 'LO'], // DeviceSerialNumber
  [0x00181020, 'LO'], // SoftwareVersions
  [0x0020000d, 'UI'], // StudyInstanceUID
  [0x0020000e, 'UI'], // SeriesInstanceUID
  [0x00200010, 'SH'], // StudyID
  [0x00200011, 'IS'], // SeriesNumber
  [0x00200013, 'IS'], // InstanceNumber
  [0x00200060, 'CS'], // Laterality
  [0x00200062, 'CS'], // ImageLaterality
  [0x00280004, 'CS'], // PhotometricInterpretation
  [0x0040a30a, 'DS'], // NumericValue
  [0x00420010, 'ST'], // DocumentTitle
  [0x00420012, 'LO'], // MIMETypeOfEncapsulatedDocument
]);

function isPrivateCreator(tag: number): boolean {
  const element = tag & 0xffff;
  return (tag >>> 16) % 2 === 1 && element >= 0x0010 && element <= 0x00ff;
}

/** Whether the service reads element `tag` as text (the header's tags, private creators). */
function isReadAsText(tag: number): boolean {
  return IMPLICIT_VRS.has(tag) || isPrivateCreator(tag);
}

/**
 * The VR an element is checked as: for the elements the service reads as text, the VR it reads them as
 * (whatever VR the file gives: an explicit UT or OB on a PN tag is still decoded as text); else the
 * element's own (none for implicit VR or UN: such an element is never decoded as text).
 */
export function checkedVrOf(tag: number, vr: string | undefined): string | undefined {
  if (isPrivateCreator(tag)) return 'LO';
  const expected = IMPLICIT_VRS.get(tag);
  if (expected !== undefined) return expected;
  return vr === 'UN' ? undefined : vr;
}

/** Why a value is over its limit: the VR's own maximum, or the site's text limit (`DICOM_MAX_TEXT_BYTES`). */
export interface OverlongValue {
  readonly limit: 'vr' | 'site';
  readonly maxBytes: number;
  readonly valueBytes: number;
}

/**
 * Whether the value of element `tag`, checked as VR `vr` ({@link checkedVrOf}), `length` bytes of
 * `bytes` from `offset`, is over its limit; undefined when within it or the VR has none. Costs nothing
 * per byte for a value within its element limit; a longer multi-valued one is split at its backslashes
 * (a native byte search).
 */
export function findOverlongValue(
  bytes: Uint8Array,
  offset: number,
  length: number,
  tag: number,
  vr: string,
  maxTextBytes: number,
): OverlongValue | undefined {
  const characters = UNBOUNDED_TEXT_VRS.has(vr) ? undefined : MAX_CHARACTERS[vr];
  if (characters !== undefined) {
    // One byte more for the padding that makes an odd value even.
    const maxBytes = characters * BYTES_PER_CHARACTER + 1;
    const longest = length <= maxBytes ? length : longestValue(bytes, offset, length, vr);
    if (longest > maxBytes) return { limit: 'vr', maxBytes, valueBytes: longest };
  }
  const isStandard = (tag >>> 16) % 2 === 0;
  const hasSiteLimit = isReadAsText(tag) || (isStandard && LONG_TEXT_VRS.has(vr));
  if (hasSiteLimit && length > maxTextBytes)
    return { limit: 'site', maxBytes: maxTextBytes, valueBytes: length };
  return undefined;
}

/** The length of the longest value of a multi-valued element (split at backslashes), or of its one value. */
function longestValue(bytes: Uint8Array, offset: number, length: number, vr: string): number {
  if (SINGLE_VALUE_VRS.has(vr)) return length;
  const value = bytes.subarray(offset, offset + length);
  let longest = 0;
  let start = 0;
  for (;;) {
    const next = value.indexOf(BACKSLASH, start);
    const stop = next === -1 ? length : next;
    longest = Math.max(longest, stop - start);
    if (next === -1) return longest;
    start = next + 1;
  }
}
