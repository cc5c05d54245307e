/**
 * What device filing reads from a DICOM header (the `DICOM_HEADER` row that `DICOM_SEED` stores, keyed by
 * DICOM keyword): the facts a profile is chosen from, the event date, the eye, and the columns of the
 * Device Information element.
 */
import type { KeywordValues, LateralityFinding } from '../dicom/index.ts';
import { dicomWallClock, headerLateralityOf, headerText } from '../dicom/index.ts';
import type { DeviceFacts, DeviceProfile, EyeLetter } from './profiles.ts';
import type { DeviceInformationColumn, DeviceInformationValues } from './tables.ts';
import { DEVICE_INFORMATION_COLUMNS } from './tables.ts';

// The DICOM rules device filing shares with biometry (dates, eyes), from the DICOM module.
export type { FoundEventDate, LateralityFinding } from '../dicom/index.ts';
export {
  dicomWallClock,
  eventDateOf,
  eyeOfLaterality,
  findEventDate,
  headerLateralityOf,
  headerText,
} from '../dicom/index.ts';

/** The header as stored: DICOM keyword -> trimmed text, or null. */
export type DeviceHeader = KeywordValues;

const ENCAPSULATED_PDF_SOP_CLASS = '1.2.840.10008.5.1.4.1.1.104.1';

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
  if (match === null || dicomWallClock(wallClock, null) !== wallClock) return 'is not a date and time';
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
  return dicomWallClock(`${y}${mo}${d}${hh}${mi}${ss}`, null) === wallClock ? wallClock : undefined;
}

/**
 * The eye of a file: the header's ({@link headerLateralityOf}), else the profile's fixed rule. `U` or
 * nothing gives no eye.
 */
export function lateralityOf(header: DeviceHeader, profile: DeviceProfile): LateralityFinding {
  const found = headerLateralityOf(header);
  if (found !== undefined) return found;
  if (profile.laterality !== undefined) {
    return { eye: profile.laterality, source: `profile ${profile.name}` };
  }
  return { eye: null, source: 'no laterality in the file (none, or U)' };
}

/** `eye.id` of an eye: 1 left, 2 right, 3 both. */
export function eyeIdOf(eye: EyeLetter): 1 | 2 | 3 {
  return eye === 'L' ? 1 : eye === 'R' ? 2 : 3;
}

/** The eye of an `eye.id` ({@link eyeIdOf}'s inverse); undefined for any other id. */
export function eyeOfId(eyeId: number): EyeLetter | undefined {
  return eyeId === 1 ? 'L' : eyeId === 2 ? 'R' : eyeId === 3 ? 'B' : undefined;
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
