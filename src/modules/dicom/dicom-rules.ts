/**
 * The rules of a DICOM header's facts that every kind of filing shares (device filing, biometry): the
 * wall-clock time of a date, the event date's attribute order, and the eye a laterality names. Pure
 * functions of a keyword-keyed header (DICOM keyword -> text), light enough for the DICOM threads.
 */

/** A header by DICOM keyword: trimmed text, or anything else for no value. */
export type KeywordValues = Readonly<Record<string, unknown>>;

/** An eye: left, right, or both. */
export type Eye = 'L' | 'R' | 'B';

/** The text of `keyword` in the header, or null. */
export function headerText(header: KeywordValues, keyword: string): string | null {
  const value = header[keyword];
  return typeof value === 'string' && value.trim() !== '' ? value.trim() : null;
}

/** The event date of a DICOM file, and the attribute it was read from. */
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
 * The event date of a DICOM file: Acquisition DateTime (0008,002A) (or Acquisition Date + Time), else
 * Content, else Series, else Study Date + Time, as the device's local wall-clock time
 * `YYYY-MM-DD HH:MM:SS`: fractions of a second and any UTC offset suffix are ignored, a missing time is
 * 00:00:00. A value that is no real date is passed over; the date found is not checked for plausibility
 * here (device filing's `checkEventDate`). Undefined when the file has no date at all.
 */
export function findEventDate(header: KeywordValues): FoundEventDate | undefined {
  for (const [source, dateKey, timeKey] of EVENT_DATE_SOURCES) {
    const date = headerText(header, dateKey);
    const wallClock =
      date === null ? undefined : dicomWallClock(date, timeKey === null ? null : headerText(header, timeKey));
    if (wallClock !== undefined) return { wallClock, source };
  }
  return undefined;
}

/** The wall-clock time of {@link findEventDate}, or undefined. */
export function eventDateOf(header: KeywordValues): string | undefined {
  return findEventDate(header)?.wallClock;
}

/**
 * `YYYY-MM-DD HH:MM:SS` of a DA (or DT) and an optional TM, or undefined when not a real date: the
 * wall-clock time of a DICOM date, the one rule of device and biometry filing. A DT's fraction and its UTC
 * offset suffix (`&ZZXX`, either sign) are ignored, as is Timezone Offset From UTC (0008,0201): the time is
 * the device's own clock, read in the site's zone (event filing's `storedEventDate`). A TM applies only to a DA (a DT
 * carries its own time); no time, or one that is not a TM, is midnight. The old separators (`YYYY.MM.DD`, `YYYY-MM-DD`, `HH:MM:SS`)
 * are read too.
 */
export function dicomWallClock(date: string, time: string | null): string | undefined {
  // DT: YYYYMMDDHHMMSS.FFFFFF&ZZXX, any trailing part optional; DA: YYYYMMDD; TM: HHMMSS.FFFFFF.
  const dt =
    /^(\d{4})[.-]?(\d{2})[.-]?(\d{2})(?:[\sT]?(\d{2})(?::?(\d{2})(?::?(\d{2}))?)?)?(?:\.\d{1,6})?(?:[+-]\d{4})?$/.exec(
      date.trim(),
    );
  if (dt === null) return undefined;
  const [, y, mo, d] = dt;
  let [hh, mi, ss] = [dt[4] ?? '00', dt[5] ?? '00', dt[6] ?? '00'];
  if (dt[4] === undefined && time !== null) {
    const tm = /^(\d{2})(?::?(\d{2})(?::?(\d{2}))?)?(?:\.\d{1,6})?$/.exec(time.trim());
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

/**
 * The eye a laterality value names: R, L, B (also OD, OS, OU; any case and spacing); undefined for U or
 * anything else. The one reading of Image Laterality, Laterality and a profile's rule.
 */
export function eyeOfLaterality(value: string | null | undefined): Eye | undefined {
  switch (value?.trim().toUpperCase() ?? '') {
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

/** Where a header's eye came from, for the log. */
export interface LateralityFinding {
  readonly eye: Eye | null;
  readonly source: string;
}

/**
 * The eye the header names: Image Laterality (0020,0062), then Laterality (0020,0060); when both name an
 * eye and they disagree, both eyes. Undefined when neither names one (`U`, nothing).
 */
export function headerLateralityOf(header: KeywordValues): LateralityFinding | undefined {
  const image = eyeOfLaterality(headerText(header, 'ImageLaterality'));
  const series = eyeOfLaterality(headerText(header, 'Laterality'));
  if (image !== undefined && series !== undefined && image !== series) {
    return { eye: 'B', source: 'Image Laterality and Laterality disagree' };
  }
  if (image !== undefined) return { eye: image, source: 'Image Laterality (0020,0062)' };
  if (series !== undefined) return { eye: series, source: 'Laterality (0020,0060)' };
  return undefined;
}
