/**
 * What device filing reads from a DICOM header (the `DICOM_HEADER` row that `DICOM_SEED` stores, keyed by
 * DICOM keyword): the facts a profile is chosen from, the event date, the eye, and the columns of the
 * Device Information element.
 */
import type { DeviceFacts, DeviceProfile, EyeLetter } from './profiles.ts';
import type { DeviceInformationColumn, DeviceInformationValues } from './tables.ts';
import { DEVICE_INFORMATION_COLUMNS } from './tables.ts';

/** The header as stored: DICOM keyword -> trimmed text, or null. */
export type DeviceHeader = Readonly<Record<string, unknown>>;

const ENCAPSULATED_PDF_SOP_CLASS = '1.2.840.10008.5.1.4.1.1.104.1';

/** The text of `keyword` in the header, or null. */
export function headerText(header: DeviceHeader, keyword: string): string | null {
  const value = header[keyword];
  return typeof value === 'string' && value.trim() !== '' ? value.trim() : null;
}

/** The facts a profile is chosen from. */
export function deviceFactsOf(
  header: DeviceHeader,
  file: { readonly sopClassUid: string | null; readonly hasPixelData: boolean },
): DeviceFacts {
  const sopClassUid = file.sopClassUid ?? headerText(header, 'SOPClassUID');
  const mime = headerText(header, 'MIMETypeOfEncapsulatedDocument')?.toLowerCase();
  const isPdf = sopClassUid === ENCAPSULATED_PDF_SOP_CLASS || mime === 'application/pdf';
  return {
    manufacturer: headerText(header, 'Manufacturer'),
    modality: headerText(header, 'Modality'),
    model: headerText(header, 'ManufacturerModelName'),
    sopClassUid,
    // The first of the versions (VM 1-n).
    softwareVersion: headerText(header, 'SoftwareVersions')?.split('\\')[0]?.trim() ?? null,
    seriesDescription: headerText(header, 'SeriesDescription'),
    content: isPdf ? 'pdf' : file.hasPixelData ? 'image' : 'none',
  };
}

/** The event date of a device file, and the attribute it was read from. */
export interface FoundEventDate {
  /** The device's local wall-clock time, `YYYY-MM-DD HH:MM:SS`. */
  readonly wallClock: string;
  /** The attribute, in words (`Study Date`). */
  readonly source: string;
}

const EVENT_DATE_SOURCES = [
  ['Acquisition DateTime', 'AcquisitionDateTime', null],
  ['Acquisition Date', 'AcquisitionDate', 'AcquisitionTime'],
  ['Content Date', 'ContentDate', 'ContentTime'],
  ['Series Date', 'SeriesDate', 'SeriesTime'],
  ['Study Date', 'StudyDate', 'StudyTime'],
] as const;

/**
 * The event date of a device file: Acquisition DateTime (0008,002A) (or Acquisition Date + Time), else
 * Content, else Series, else Study Date + Time, as the device's local wall-clock time
 * `YYYY-MM-DD HH:MM:SS`: fractions of a second and any UTC offset suffix are ignored, a missing time is
 * 00:00:00. A value that is no real date is passed over; the date found is not checked for plausibility
 * here ({@link checkEventDate}). Undefined when the file has no date at all.
 */
export function findEventDate(header: DeviceHeader): FoundEventDate | undefined {
  for (const [source, dateKey, timeKey] of EVENT_DATE_SOURCES) {
    const date = headerText(header, dateKey);
    const wallClock =
      date === null ? undefined : wallClockOf(date, timeKey === null ? null : headerText(header, timeKey));
    if (wallClock !== undefined) return { wallClock, source };
  }
  return undefined;
}

/** The wall-clock time of {@link findEventDate}, or undefined. */
export function eventDateOf(header: DeviceHeader): string | undefined {
  return findEventDate(header)?.wallClock;
}

/** The earliest event date accepted from a device or a person. */
export const EARLIEST_EVENT_DATE = '1900-01-01';
/** How far past now an event date may lie (clocks of devices and sites differ). */
const FUTURE_SLACK_MS = 24 * 60 * 60 * 1000;

/**
 * Why the event date `wallClock` (`YYYY-MM-DD HH:MM:SS`, a local wall-clock time) cannot date an event,
 * or undefined when it can: it must be a real date and time, not before {@link EARLIEST_EVENT_DATE} nor
 * before `birthDate` (the patient's, `YYYY-MM-DD...`, when known), and not more than a day after `now`.
 * The day's slack also covers the site's zone, whose wall clock is at most 14 hours ahead of UTC.
 */
export function checkEventDate(
  wallClock: string,
  limits: { readonly now: Date; readonly birthDate?: string | null },
): string | undefined {
  const match = /^(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})$/.exec(wallClock);
  if (match === null || wallClockOf(wallClock.replace(/[-: ]/g, ''), null) !== wallClock)
    return 'is not a date and time';
  if (wallClock < EARLIEST_EVENT_DATE) return `is before ${EARLIEST_EVENT_DATE.slice(0, 4)}`;
  const birth = limits.birthDate?.slice(0, 10);
  if (birth !== undefined && /^\d{4}-\d{2}-\d{2}$/.test(birth) && wallClock.slice(0, 10) < birth)
    return "is before the patient's date of birth";
  const latest = new Date(limits.now.getTime() + FUTURE_SLACK_MS)
    .toISOString()
    .replace('T', ' ')
    .slice(0, 19);
  if (wallClock > latest) return 'is more than a day in the future';
  return undefined;
}

/**
 * A date and time a person typed (`YYYY-MM-DD`, `YYYY-MM-DDTHH:MM` from a `datetime-local` input, or with
 * seconds, `T` or a space between) as `YYYY-MM-DD HH:MM:SS`; undefined when it is not a real one.
 */
export function normaliseEventDate(text: string): string | undefined {
  const match = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2}))?)?$/.exec(text.trim());
  if (match === null) return undefined;
  const [, y, mo, d, hh = '00', mi = '00', ss = '00'] = match;
  const wallClock = `${y}-${mo}-${d} ${hh}:${mi}:${ss}`;
  return wallClockOf(`${y}${mo}${d}${hh}${mi}${ss}`, null) === wallClock ? wallClock : undefined;
}

/** `YYYY-MM-DD HH:MM:SS` of a DA (or DT) and an optional TM, or undefined when not a real date. */
function wallClockOf(date: string, time: string | null): string | undefined {
  // DT: YYYYMMDDHHMMSS.FFFFFF&ZZXX, any trailing part optional; DA: YYYYMMDD; TM: HHMMSS.FFFFFF.
  const dt = /^(\d{4})(\d{2})(\d{2})(\d{2})?(\d{2})?(\d{2})?/.exec(date.replace(/[-:\s]/g, ''));
  if (dt === null) return undefined;
  const [, y, mo, d] = dt;
  let [hh, mi, ss] = [dt[4] ?? '00', dt[5] ?? '00', dt[6] ?? '00'];
  if (dt[4] === undefined && time !== null) {
    const tm = /^(\d{2})(\d{2})?(\d{2})?/.exec(time.replace(/[:\s]/g, ''));
    if (tm !== null) [hh, mi, ss] = [tm[1]!, tm[2] ?? '00', tm[3] ?? '00'];
  }
  // setUTCFullYear, not Date.UTC, which reads the years 0 to 99 as 1900 to 1999.
  const day = new Date(0);
  day.setUTCFullYear(Number(y), Number(mo) - 1, Number(d));
  if (
    Number.isNaN(day.getTime()) ||
    day.getUTCFullYear() !== Number(y) ||
    day.getUTCMonth() !== Number(mo) - 1 ||
    day.getUTCDate() !== Number(d) ||
    Number(hh) > 23 ||
    Number(mi) > 59 ||
    Number(ss) > 60
  ) {
    return undefined;
  }
  return `${y}-${mo}-${d} ${hh}:${mi}:${ss === '60' ? '59' : ss}`;
}

/** The eye a laterality value names: R, L, B (also OD, OS, OU); undefined for U or anything else. */
function eyeOfValue(value: string | null): EyeLetter | undefined {
  switch (value?.toUpperCase() ?? '') {
    case 'R':
    case 'OD':
      return 'R';
    case 'L':
    case 'OS':
      return 'L';
    case 'B':
    case 'OU':
      return 'B';
    default:
      return undefined;
  }
}

/** Where a file's eye came from, for the log. */
export interface LateralityFinding {
  readonly eye: EyeLetter | null;
  readonly source: string;
}

/**
 * The eye of a file: Image Laterality (0020,0062), then Laterality (0020,0060), then the profile's fixed
 * rule; when both header values name an eye and they disagree, both eyes. `U` or nothing gives no eye.
 */
export function lateralityOf(header: DeviceHeader, profile: DeviceProfile): LateralityFinding {
  const image = eyeOfValue(headerText(header, 'ImageLaterality'));
  const series = eyeOfValue(headerText(header, 'Laterality'));
  if (image !== undefined && series !== undefined && image !== series) {
    return { eye: 'B', source: 'Image Laterality and Laterality disagree' };
  }
  if (image !== undefined) return { eye: image, source: 'Image Laterality (0020,0062)' };
  if (series !== undefined) return { eye: series, source: 'Laterality (0020,0060)' };
  if (profile.laterality !== undefined) {
    return { eye: profile.laterality, source: `profile ${profile.name}` };
  }
  return { eye: null, source: 'no laterality in the file (none, or U)' };
}

/** `eye.id` of an eye: 1 left, 2 right, 3 both. */
export function eyeIdOf(eye: EyeLetter): 1 | 2 | 3 {
  return eye === 'L' ? 1 : eye === 'R' ? 2 : 3;
}

/** The SNOMED CT body site of an eye (`body_site_type`). */
export function bodySiteOf(eye: EyeLetter): string {
  return eye === 'L' ? '8966001' : eye === 'R' ? '18944008' : '40638003';
}

/** Two eyes together: left and right make both. */
export function mergeEyes(a: EyeLetter | null, b: EyeLetter | null): EyeLetter | null {
  if (a === null) return b;
  if (b === null || a === b) return a;
  return 'B';
}

/** The Device Information columns of a file's header. */
export function deviceInformationOf(header: DeviceHeader): DeviceInformationValues {
  const values = {} as DeviceInformationValues;
  for (const [column, keyword] of Object.entries(DEVICE_INFORMATION_COLUMNS)) {
    values[column as DeviceInformationColumn] = keyword === null ? null : headerText(header, keyword);
  }
  return values;
}

/** The stored date-time of a device's wall-clock time: event filing's rule, one for every event. */
export { storedEventDate } from '../event-filing/index.ts';
