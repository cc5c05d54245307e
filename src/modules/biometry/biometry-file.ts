/**
 * What a DICOM file is to biometry filing: measurements (an IOLMaster object with the 99CZM private data,
 * or a standard axial measurements / IOL calculation object), a biometry report to attach (an IOLMaster
 * encapsulated PDF without that data), or neither. An IOLMaster is recognised by its model name (0008,1090)
 * together with its private sequences, never by its SOP class alone: the IOLMaster 500 also sends its
 * data as an encapsulated PDF, and a secondary capture from another device may share its SOP class.
 */
import { dicomWallClock, findEventDate, headerLateralityOf } from '../dicom/index.ts';
import { parseDataSet, readString, tagKey } from './data-set.ts';
import { readIolMaster, zeissReader, zeissVrOf } from './iolmaster.ts';
import type { BiometryReading } from './reading.ts';
import { BiometryFileError } from './reading.ts';
import { isStandardBiometry, readStandardBiometry } from './standard-objects.ts';

export const ENCAPSULATED_PDF = '1.2.840.10008.5.1.4.1.1.104.1';

/** The header values of the study an object belongs to, as the imported-event record keeps them. */
export interface BiometryStudy {
  readonly studyInstanceUid: string;
  readonly seriesInstanceUid?: string;
  readonly sopInstanceUid?: string;
  readonly sopClassUid?: string;
  readonly manufacturer?: string;
  readonly model?: string;
  readonly stationName?: string;
  readonly institutionName?: string;
  readonly softwareVersion?: string;
  readonly serialNumber?: string;
  /** Acquisition DateTime (0008,002A) as the file gives it. */
  readonly acquisitionDateTime?: string;
  /** Content Date + Time as `YYYY-MM-DD HH:MM:SS`. */
  readonly contentDateTime?: string;
  /** The event date by the DICOM module's rule (`findEventDate`): the device's wall-clock time. */
  readonly eventDate: string;
  /** The eye the header names by the DICOM module's rule (`headerLateralityOf`); undefined for none. */
  readonly laterality?: 'L' | 'R' | 'B';
}

export type BiometryFile =
  | {
      readonly kind: 'measurements';
      readonly source: string;
      readonly study: BiometryStudy;
      readonly reading: BiometryReading;
    }
  | { readonly kind: 'report'; readonly study: BiometryStudy }
  | { readonly kind: 'other'; readonly reason: string };

export { BiometryFileError };

const t = tagKey;

function optional<K extends string>(key: K, value: string | undefined): Partial<Record<K, string>> {
  return value === undefined ? {} : ({ [key]: value } as Record<K, string>);
}

/** Reads `bytes` (a Part 10 file whose structure was already checked) as biometry. */
export function readBiometryFile(bytes: Uint8Array): BiometryFile {
  const dataSet = parseDataSet(bytes, zeissVrOf);
  const text = (group: number, element: number) => readString(dataSet, t(group, element));
  const model = text(0x0008, 0x1090);
  const sopClassUid = text(0x0008, 0x0016);
  const isIolMaster = model !== undefined && /^IOLMaster\b/i.test(model);
  const zeiss = isIolMaster ? zeissReader(dataSet) : undefined;
  const isStandard = isStandardBiometry(sopClassUid);
  const isReport = isIolMaster && sopClassUid === ENCAPSULATED_PDF;
  if (zeiss === undefined && !isStandard && !isReport) {
    return {
      kind: 'other',
      reason: isIolMaster
        ? 'an IOLMaster object without its 99CZM measurement data'
        : 'not an IOLMaster or standard biometry object',
    };
  }

  const studyInstanceUid = text(0x0020, 0x000d);
  if (studyInstanceUid === undefined) throw new BiometryFileError('The file has no Study Instance UID');
  const acquisition = text(0x0008, 0x002a);
  // The header by keyword, for the DICOM rules that device filing applies to the same attributes.
  const header = {
    AcquisitionDateTime: acquisition,
    AcquisitionDate: text(0x0008, 0x0022),
    AcquisitionTime: text(0x0008, 0x0032),
    ContentDate: text(0x0008, 0x0023),
    ContentTime: text(0x0008, 0x0033),
    SeriesDate: text(0x0008, 0x0021),
    SeriesTime: text(0x0008, 0x0031),
    StudyDate: text(0x0008, 0x0020),
    StudyTime: text(0x0008, 0x0030),
    ImageLaterality: text(0x0020, 0x0062),
    Laterality: text(0x0020, 0x0060),
  };
  const contentDateTime =
    header.ContentDate === undefined
      ? undefined
      : dicomWallClock(header.ContentDate, header.ContentTime ?? null);
  const eventDate = findEventDate(header)?.wallClock;
  if (eventDate === undefined) {
    throw new BiometryFileError('The file has no acquisition, content, series or study date');
  }
  const laterality = headerLateralityOf(header)?.eye;
  const info: BiometryStudy = {
    studyInstanceUid,
    eventDate,
    ...(laterality === undefined || laterality === null ? {} : { laterality }),
    ...optional('seriesInstanceUid', text(0x0020, 0x000e)),
    ...optional('sopInstanceUid', text(0x0008, 0x0018)),
    ...optional('sopClassUid', sopClassUid),
    ...optional('manufacturer', text(0x0008, 0x0070)),
    ...optional('model', model),
    ...optional('stationName', text(0x0008, 0x1010)),
    ...optional('institutionName', text(0x0008, 0x0080)),
    ...optional('softwareVersion', text(0x0018, 0x1020)),
    ...optional('serialNumber', text(0x0018, 0x1000)),
    ...optional('acquisitionDateTime', acquisition),
    ...optional('contentDateTime', contentDateTime),
  };
  const comments = text(0x0010, 0x4000);
  if (zeiss !== undefined) {
    return { kind: 'measurements', source: model!, study: info, reading: readIolMaster(zeiss, comments) };
  }
  if (isStandard) {
    return {
      kind: 'measurements',
      source: `SOP class ${sopClassUid!}`,
      study: info,
      reading: readStandardBiometry(dataSet, sopClassUid!),
    };
  }
  return { kind: 'report', study: info };
}

/** What {@link readBiometryFileTask} returns: the reading, or why the file cannot be filed as biometry. */
export type BiometryFileRead = { readonly file: BiometryFile } | { readonly refusal: string };

/**
 * {@link readBiometryFile} as a task of the DICOM module's threads (`readBiometryFileOnThread`): a
 * {@link BiometryFileError} is returned as a refusal, since an error loses its class between threads.
 */
export function readBiometryFileTask(bytes: Uint8Array): BiometryFileRead {
  try {
    return { file: readBiometryFile(bytes) };
  } catch (error) {
    if (error instanceof BiometryFileError) return { refusal: error.message };
    throw error;
  }
}
