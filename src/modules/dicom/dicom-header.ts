/**
 * The identifying tags of a DICOM file, read with `dicom-parser` once {@link scanPart10} has checked the
 * file's structure and limits (so the library parses a bounded, well-formed file), up to the pixel data.
 */
import dicomParser from 'dicom-parser';
import { DicomError, messageOf } from './dicom-error.ts';
import type { Part10Scan } from './part10-scan.ts';

/** The tags read, by DICOM keyword: (group,element) as dicom-parser names them. */
export const DICOM_HEADER_TAGS = {
  PatientID: 'x00100020',
  PatientName: 'x00100010',
  PatientBirthDate: 'x00100030',
  PatientSex: 'x00100040',
  Modality: 'x00080060',
  Manufacturer: 'x00080070',
  StudyInstanceUID: 'x0020000d',
  StudyDate: 'x00080020',
  // What device filing reads: the device, the dates, the eye and the identifiers of the study and file.
  ManufacturerModelName: 'x00081090',
  SoftwareVersions: 'x00181020',
  DeviceSerialNumber: 'x00181000',
  StationName: 'x00081010',
  InstitutionName: 'x00080080',
  SOPClassUID: 'x00080016',
  SOPInstanceUID: 'x00080018',
  SeriesInstanceUID: 'x0020000e',
  StudyID: 'x00200010',
  SeriesNumber: 'x00200011',
  InstanceNumber: 'x00200013',
  StudyDescription: 'x00081030',
  SeriesDescription: 'x0008103e',
  DocumentTitle: 'x00420010',
  MIMETypeOfEncapsulatedDocument: 'x00420012',
  OperatorsName: 'x00081070',
  Laterality: 'x00200060',
  ImageLaterality: 'x00200062',
  AcquisitionDateTime: 'x0008002a',
  AcquisitionDate: 'x00080022',
  AcquisitionTime: 'x00080032',
  ContentDate: 'x00080023',
  ContentTime: 'x00080033',
  SeriesDate: 'x00080021',
  SeriesTime: 'x00080031',
  StudyTime: 'x00080030',
  PhotometricInterpretation: 'x00280004',
  // What the query/retrieve index keeps beside the above (`dicom_instance_index`).
  SpecificCharacterSet: 'x00080005',
  AccessionNumber: 'x00080050',
  ReferringPhysicianName: 'x00080090',
} as const;

/**
 * Visual field indices, read by their VR (decimal strings, or binary floats as text):
 * - `ZeissHfaMeanDeviation` / `ZeissHfaVisualFieldIndex`: the Humphrey's private (7717,xx16) / (7717,xx34),
 *   only from the block whose private creator (7717,00xx) starts with `99CZM`;
 * - `GlobalDeviationFromNormal`: (0024,0066) of the Results Normals Sequence (0024,0064) item, or of the
 *   data set, in a Visual Field Static Perimetry Measurements object;
 * - `VisualFieldIndex`: the Numeric Value (0040,A30A) of the Visual Field Global Results Index Sequence
 *   (0024,0320) item whose Data Observation Sequence (0024,0325) names concept (111852, DCM, "Visual
 *   Field Index").
 */
export const DICOM_MEASUREMENT_KEYS = [
  'ZeissHfaMeanDeviation',
  'ZeissHfaVisualFieldIndex',
  'GlobalDeviationFromNormal',
  'VisualFieldIndex',
] as const;

/**
 * Values read beyond a top-level text element:
 * - `RequestedProcedureID` (0040,1001): the data set's own, else the first Request Attributes Sequence
 *   (0040,0275) item's, as a device copies it from the worklist entry it was given;
 * - `Rows` (0028,0010) / `Columns` (0028,0011): the image size, as decimals.
 */
export const DICOM_DERIVED_KEYS = ['RequestedProcedureID', 'Rows', 'Columns'] as const;

export type DicomHeaderKeyword =
  | keyof typeof DICOM_HEADER_TAGS
  | (typeof DICOM_MEASUREMENT_KEYS)[number]
  | (typeof DICOM_DERIVED_KEYS)[number];

export type DicomHeader = Record<DicomHeaderKeyword, string | null>;

/** Every keyword of a {@link DicomHeader}, in the order it is read. */
export const DICOM_HEADER_KEYWORDS: readonly DicomHeaderKeyword[] = [
  ...(Object.keys(DICOM_HEADER_TAGS) as (keyof typeof DICOM_HEADER_TAGS)[]),
  ...DICOM_MEASUREMENT_KEYS,
  ...DICOM_DERIVED_KEYS,
];

/**
 * The decoder of the character set a data set declares in Specific Character Set (0008,0005), PS3.3
 * C.12.1.1.2. Only the VRs PS3.5 6.1.2.3 names (SH, LO, ST, LT, UT, UC, PN) may use it; every other
 * value is in the default repertoire, which each of these decoders reads alike. No value, ISO_IR 6 or a
 * term this service does not know reads each byte as one character (Latin-1): devices that declare
 * nothing often send Latin-1, and a byte is never lost. Code extensions (ISO 2022, several values) are
 * read by their first value's single-byte set, escape sequences and all.
 */
const CHARACTER_SETS: Readonly<Record<string, string>> = {
  'ISO_IR 100': 'latin1',
  'ISO_IR 101': 'iso-8859-2',
  'ISO_IR 109': 'iso-8859-3',
  'ISO_IR 110': 'iso-8859-4',
  'ISO_IR 144': 'iso-8859-5',
  'ISO_IR 127': 'iso-8859-6',
  'ISO_IR 126': 'iso-8859-7',
  'ISO_IR 138': 'iso-8859-8',
  'ISO_IR 148': 'iso-8859-9',
  'ISO_IR 203': 'iso-8859-15',
  'ISO_IR 13': 'shift_jis',
  'ISO_IR 166': 'windows-874',
  'ISO_IR 192': 'utf-8',
  GB18030: 'gb18030',
  GBK: 'gbk',
};
const TEXT_VRS = new Set(['SH', 'LO', 'ST', 'LT', 'UT', 'UC', 'PN']);

type Decode = (bytes: Uint8Array) => string;
const latin1: Decode = (bytes) =>
  Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).toString('latin1');

/** The decoder of a data set's Specific Character Set (see {@link CHARACTER_SETS}). */
function decoderOf(dataSet: dicomParser.DataSet): Decode {
  const element = dataSet.elements.x00080005;
  if (element === undefined || element.length === 0) return latin1;
  const declared = latin1(
    dataSet.byteArray.subarray(element.dataOffset, element.dataOffset + element.length),
  );
  const first = declared
    .split('\\')[0]!
    .trim()
    .replace(/^ISO 2022 IR /, 'ISO_IR ');
  const label = CHARACTER_SETS[first];
  if (label === undefined || label === 'latin1') return latin1;
  const decoder = new TextDecoder(label);
  return (bytes) => decoder.decode(bytes);
}

/**
 * The text of element `tag` (up to the first NUL, trimmed), decoded in one native call rather than a
 * character at a time, by `decode` (the data set's character set) for the VRs that use one: undefined
 * when absent or empty. The scan has bounded its length by its VR (`value-limits.ts`). Values read inside
 * sequence items here are codes, private creators and numbers, in the default repertoire: Latin-1 reads
 * them whatever an item declares.
 */
function textOf(dataSet: dicomParser.DataSet, tag: string, decode: Decode = latin1): string | undefined {
  const element = dataSet.elements[tag];
  if (element === undefined || element.length === 0) return undefined;
  const bytes = dataSet.byteArray;
  const value = bytes.subarray(element.dataOffset, element.dataOffset + element.length);
  const nul = value.indexOf(0);
  const content = nul === -1 ? value : value.subarray(0, nul);
  // Implicit VR files carry no VR: the text tags read here are then taken as text VRs (their decoders
  // read the default repertoire alike, so a UID or code string reads the same either way).
  return (element.vr === undefined || TEXT_VRS.has(element.vr) ? decode : latin1)(content).trim();
}

/** The value of `tag` as text by its VR: binary floats and integers as decimals; null when absent or empty. */
function valueText(dataSet: dicomParser.DataSet, tag: string): string | null {
  const element = dataSet.elements[tag];
  if (element === undefined || element.length === 0) return null;
  let value: number | string | undefined;
  switch (element.vr ?? '') {
    case 'FL':
      value = dataSet.float(tag);
      break;
    case 'FD':
      value = dataSet.double(tag);
      break;
    case 'SL':
      value = dataSet.int32(tag);
      break;
    case 'SS':
      value = dataSet.int16(tag);
      break;
    case 'UL':
      value = dataSet.uint32(tag);
      break;
    case 'US':
      value = dataSet.uint16(tag);
      break;
    default:
      value = textOf(dataSet, tag);
  }
  if (value === undefined) return null;
  const text = String(value).trim();
  return text === '' ? null : text;
}

/** `value`, or null when absent or empty. */
function nonEmpty(value: string | undefined): string | null {
  return value === undefined || value === '' ? null : value;
}

/** The data set of the first item of sequence `tag`, if any. */
function firstItem(dataSet: dicomParser.DataSet, tag: string): dicomParser.DataSet | undefined {
  return dataSet.elements[tag]?.items?.[0]?.dataSet;
}

/** The Humphrey's private values, from the 7717 block whose creator starts with `99CZM` (none else). */
function readZeissHfaValues(dataSet: dicomParser.DataSet): [string | null, string | null] {
  for (let block = 0x10; block <= 0xff; block++) {
    const hex = block.toString(16).padStart(2, '0');
    const creator = textOf(dataSet, `x771700${hex}`);
    if (creator?.trim().startsWith('99CZM') === true) {
      return [valueText(dataSet, `x7717${hex}16`), valueText(dataSet, `x7717${hex}34`)];
    }
  }
  return [null, null];
}

/** The Visual Field Index of the global results index items (concept 111852, DCM). */
function readVisualFieldIndex(dataSet: dicomParser.DataSet): string | null {
  for (const item of dataSet.elements.x00240320?.items ?? []) {
    const observation = item.dataSet === undefined ? undefined : firstItem(item.dataSet, 'x00240325');
    const concept = observation === undefined ? undefined : firstItem(observation, 'x0040a043');
    if (
      observation !== undefined &&
      concept !== undefined &&
      textOf(concept, 'x00080100') === '111852' &&
      textOf(concept, 'x00080102') === 'DCM'
    ) {
      return valueText(observation, 'x0040a30a');
    }
  }
  return null;
}

/** The tags of {@link DICOM_HEADER_TAGS} of a scanned file (null when absent or empty). */
export function readDicomHeader(scan: Part10Scan): DicomHeader {
  // A deflated file was inflated by the scan: dicom-parser is handed that copy instead of inflating again.
  let dataSet: dicomParser.DataSet;
  try {
    dataSet = dicomParser.parseDicom(scan.bytes, { untilTag: 'x7fe00010', inflater: () => scan.bytes });
  } catch (error) {
    throw new DicomError(
      'unreadable-data-set',
      `The data set cannot be parsed: ${messageOf(error).slice(0, 200)}`,
    );
  }
  const decode = decoderOf(dataSet);
  const header = {} as DicomHeader;
  for (const [keyword, tag] of Object.entries(DICOM_HEADER_TAGS) as [
    keyof typeof DICOM_HEADER_TAGS,
    string,
  ][]) {
    const value = textOf(dataSet, tag, decode);
    header[keyword] = value === undefined || value === '' ? null : value;
  }
  [header.ZeissHfaMeanDeviation, header.ZeissHfaVisualFieldIndex] = readZeissHfaValues(dataSet);
  const normals = firstItem(dataSet, 'x00240064');
  header.GlobalDeviationFromNormal =
    (normals === undefined ? null : valueText(normals, 'x00240066')) ?? valueText(dataSet, 'x00240066');
  header.VisualFieldIndex = readVisualFieldIndex(dataSet);
  const requestAttributes = firstItem(dataSet, 'x00400275');
  header.RequestedProcedureID =
    nonEmpty(textOf(dataSet, 'x00401001', decode)) ??
    (requestAttributes === undefined ? null : nonEmpty(textOf(requestAttributes, 'x00401001', decode)));
  header.Rows = valueText(dataSet, 'x00280010');
  header.Columns = valueText(dataSet, 'x00280011');
  return header;
}
