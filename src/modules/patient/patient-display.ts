/**
 * How a search result shows a patient (its age, its primary identifier) as pure functions: an identifier's display
 * value (prefix, spacing rule, suffix), today's date in the configured time zone, and the age.
 */

/**
 * Lays a value out by an identifier type's spacing rule: each non-space character of the rule takes one
 * character of the value, each space of the rule inserts a space, and any leftover characters follow
 * after one space. `### ### ####` turns `4505577104` into `450 557 7104`.
 */
export function applySpacingRule(value: string, rule: string | null): string {
  if (rule === null || rule.trim() === '') return value;
  let out = '';
  let next = 0;
  for (const char of rule) {
    if (next >= value.length) break;
    if (char === ' ') out += ' ';
    else out += value[next++];
  }
  if (next < value.length) out += ` ${value.slice(next)}`;
  return out;
}

/** The display value of an identifier: prefix, value by spacing rule, suffix. */
export function formatDisplayValue(
  value: string,
  type: {
    readonly valueDisplayPrefix: string | null;
    readonly spacingRule: string | null;
    readonly valueDisplaySuffix: string | null;
  },
): string {
  return `${type.valueDisplayPrefix ?? ''}${applySpacingRule(value, type.spacingRule)}${type.valueDisplaySuffix ?? ''}`;
}

/** Per time zone: its formatter (building one costs more than a search's queries) and its last answer. */
const zones = new Map<string, { readonly format: Intl.DateTimeFormat; minute: number; date: string }>();

/** Today's date (`YYYY-MM-DD`) in an IANA time zone. */
export function todayIn(timeZone: string, now: Date = new Date()): string {
  // Formatting a date is a measurable part of a search. The date can only change on a UTC minute
  // boundary (every offset in use is a whole number of minutes), so one answer serves a whole minute.
  const minute = Math.floor(now.getTime() / 60_000);
  let zone = zones.get(timeZone);
  if (zone === undefined) {
    // en-CA formats dates as YYYY-MM-DD.
    const format = new Intl.DateTimeFormat('en-CA', {
      timeZone,
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
    });
    zone = { format, minute: Number.NaN, date: '' };
    zones.set(timeZone, zone);
  }
  if (zone.minute !== minute) {
    zone.date = zone.format.format(now);
    zone.minute = minute;
  }
  return zone.date;
}

/**
 * The `age` field: `Deceased` when the patient is deceased, `Unknown` without a (valid)
 * date of birth, else the whole years from the date of birth to today, or to the date of death when that
 * is earlier. A date of birth in the future gives `0` (the original printed the absolute difference).
 */
export function computeAge(
  patient: { readonly dob: string | null; readonly dateOfDeath: string | null; readonly isDeceased: boolean },
  today: string,
): string {
  if (patient.isDeceased) return 'Deceased';
  const dob = splitDate(patient.dob);
  if (dob === undefined) return 'Unknown';
  const death = splitDate(patient.dateOfDeath);
  const todayParts = splitDate(today)!;
  const reference = death !== undefined && compareDates(death, todayParts) < 0 ? death : todayParts;
  let years = reference[0] - dob[0];
  if (reference[1] < dob[1] || (reference[1] === dob[1] && reference[2] < dob[2])) years -= 1;
  return String(Math.max(0, years));
}

type DateParts = readonly [number, number, number];

function splitDate(text: string | null): DateParts | undefined {
  if (text === null) return undefined;
  const match = /^(\d{4})-(\d{2})-(\d{2})/.exec(text);
  if (match === null) return undefined;
  const parts = [Number(match[1]), Number(match[2]), Number(match[3])] as const;
  if (parts[1] < 1 || parts[1] > 12 || parts[2] < 1 || parts[2] > 31) return undefined;
  return parts;
}

function compareDates(a: DateParts, b: DateParts): number {
  return a[0] - b[0] || a[1] - b[1] || a[2] - b[2];
}
