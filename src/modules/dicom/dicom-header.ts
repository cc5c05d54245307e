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
} as const;

export type DicomHeader = Record<keyof typeof DICOM_HEADER_TAGS, string | null>;

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
  const header = {} as DicomHeader;
  for (const [keyword, tag] of Object.entries(DICOM_HEADER_TAGS) as [keyof DicomHeader, string][]) {
    const value = dataSet.string(tag);
    header[keyword] = value === undefined || value.trim() === '' ? null : value.trim();
  }
  return header;
}
