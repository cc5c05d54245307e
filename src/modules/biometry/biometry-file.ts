/**
 * What a DICOM file is to biometry filing: measurements (an IOLMaster object with the 99CZM private data,
 * or a standard axial measurements / IOL calculation object), a biometry report to attach (an IOLMaster
 * encapsulated PDF without that data), or neither. An IOLMaster is recognised by its model name (0008,1090)
 * together with its private sequences, never by its SOP class alone: the IOLMaster 500 also sends its
 * data as an encapsulated PDF, and a secondary capture from another device may share its SOP class.
 */
import { parseDataSet, readString, tagKey } from './data-set.ts';
import { readIolMaster, zeissReader, zeissVrOf } from './iolmaster.ts';
import type { BiometryReading } from './reading.ts';
import { BiometryFileError, sideOf } from './reading.ts';
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
  /** The event date: acquisition, else content, else series, else study date-time; local time verbatim. */
  readonly eventDate: string;
  /**
   * The eye the header names: Image Laterality (0020,0062), else Laterality (0020,0060); B when the two
   * disagree. Undefined when neither names an eye.
   */
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

/** `YYYY-MM-DD` of a DA value (`YYYYMMDD`, or the old `YYYY.MM.DD`), else undefined. */
function dateOf(value: string | undefined): string | undefined {
  const match = /^(\d{4})\.?(\d{2})\.?(\d{2})$/.exec(value?.trim() ?? '');
  return match === null ? undefined : `${match[1]}-${match[2]}-${match[3]}`;
}

/** `HH:MM:SS` of a TM value (`HH`, `HHMM`, `HHMMSS`, fractions ignored; the old `HH:MM:SS`), or midnight. */
function timeOf(value: string | undefined): string {
  const match = /^(\d{2}):?(\d{2})?:?(\d{2})?/.exec(value?.trim() ?? '');
  if (match === null) return '00:00:00';
  return `${match[1]}:${match[2] ?? '00'}:${match[3] ?? '00'}`;
}

/** `YYYY-MM-DD HH:MM:SS` of a DT value (fractions and any offset suffix ignored), else undefined. */
function dateTimeOf(value: string | undefined): string | undefined {
  const match = /^(\d{4})(\d{2})(\d{2})(\d{2})?(\d{2})?(\d{2})?/.exec(value?.trim() ?? '');
  if (match === null) return undefined;
  return `${match[1]}-${match[2]}-${match[3]} ${match[4] ?? '00'}:${match[5] ?? '00'}:${match[6] ?? '00'}`;
}

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
  const content = dateOf(text(0x0008, 0x0023));
  const contentDateTime = content === undefined ? undefined : `${content} ${timeOf(text(0x0008, 0x0033))}`;
  const series = dateOf(text(0x0008, 0x0021));
  const study = dateOf(text(0x0008, 0x0020));
  const eventDate =
    dateTimeOf(acquisition) ??
    contentDateTime ??
    (series === undefined ? undefined : `${series} ${timeOf(text(0x0008, 0x0031))}`) ??
    (study === undefined ? undefined : `${study} ${timeOf(text(0x0008, 0x0030))}`);
  if (eventDate === undefined) {
    throw new BiometryFileError('The file has no acquisition, content, series or study date');
  }
  const imageSide = sideOf(text(0x0020, 0x0062));
  const seriesSide = sideOf(text(0x0020, 0x0060));
  const laterality =
    imageSide !== undefined && seriesSide !== undefined && imageSide !== seriesSide
      ? 'B'
      : (imageSide ?? seriesSide);
  const info: BiometryStudy = {
    studyInstanceUid,
    eventDate,
    ...(laterality === undefined ? {} : { laterality }),
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
