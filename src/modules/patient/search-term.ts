/**
 * The patient search-term grammar (reference 4.1 to 4.4, 4.7, 4.8) as pure functions: protocol prefix,
 * name detection with an optional `dd/mm/yyyy` date, identifier normalisation (PCRE `validate_regex`,
 * printf-style `pad`), the spacing rule of display values, and ages. No I/O: the search service feeds
 * these with the reference data and the database rows.
 */

/** Longest term accepted; anything longer is answered `[]` without touching the database. */
export const MAX_TERM_LENGTH = 200;

export type ParsedTerm =
  | { readonly kind: 'invalid' }
  | {
      readonly kind: 'name';
      /** Lower-cased protocol (`any`, `nhs`), or undefined. */
      readonly protocol: string | undefined;
      /** Surname prefix, trimmed; '' when not given. */
      readonly lastName: string;
      /** First-name prefix, trimmed; '' when not given. */
      readonly firstName: string;
      /** `YYYY-MM-DD`, or undefined. */
      readonly dob: string | undefined;
    }
  | {
      readonly kind: 'identifier';
      readonly protocol: string | undefined;
      /** The term without its protocol, spaces and hyphens (reference 4.3 step 5). */
      readonly value: string;
    };

export interface ParseOptions {
  /** Setting `dob_mandatory_in_search`: a name without a date is then not a name. */
  readonly isDobMandatory: boolean;
}

// Reference 4.2, the original pattern: a name part without digits, then an optional date.
const NAME_PATTERN = /^(\D+[ ,]?\D*)(\s\d{1,2}[/-]\d{1,2}[/-]\d{2,4})?$/;
const DATE_PATTERN = /^(\d{1,2})[/-](\d{1,2})[/-](\d{2,4})$/;

/**
 * Splits a raw term into a name search, an identifier search or an invalid term. Differences from the
 * original (reference 4.2 recommendations): the year of a date must have 4 digits and the date must
 * exist (else the whole term is invalid), and a name with neither a name part nor a date is invalid
 * (the original listed every patient for a term such as `,`).
 */
export function parseSearchTerm(raw: string, options: ParseOptions): ParsedTerm {
  const trimmed = raw.trim();
  // NUL cannot be stored in PostgreSQL text, so no name or identifier can contain it.
  if (trimmed === '' || trimmed.length > MAX_TERM_LENGTH || trimmed.includes('\u0000')) {
    return { kind: 'invalid' };
  }
  // Reference 4.1: exactly two parts around ':' make a protocol; the term is whatever follows the
  // last colon.
  const parts = trimmed.split(':');
  const protocol = parts.length === 2 ? parts[0]!.trim().toLowerCase() : undefined;
  const term = trimmed.slice(trimmed.lastIndexOf(':') + 1).trim();
  if (term === '') return { kind: 'invalid' };

  const name = NAME_PATTERN.exec(term);
  if (name !== null && (name[2] !== undefined || !options.isDobMandatory)) {
    let dob: string | undefined;
    if (name[2] !== undefined) {
      dob = parseDayMonthYear(name[2].trim());
      if (dob === undefined) return { kind: 'invalid' };
    }
    const { lastName, firstName } = splitName(name[1]!.trim());
    if (lastName === '' && firstName === '' && dob === undefined) return { kind: 'invalid' };
    return { kind: 'name', protocol, lastName, firstName, dob };
  }
  return { kind: 'identifier', protocol, value: term.replace(/[ -]/g, '') };
}

/** Reference 4.2: `Last, First`, else `First Last...`, else a surname alone; both parts trimmed. */
export function splitName(namePart: string): { lastName: string; firstName: string } {
  const comma = namePart.indexOf(',');
  if (comma >= 0) {
    return { lastName: namePart.slice(0, comma).trim(), firstName: namePart.slice(comma + 1).trim() };
  }
  const space = namePart.indexOf(' ');
  if (space > 0) {
    return { firstName: namePart.slice(0, space).trim(), lastName: namePart.slice(space + 1).trim() };
  }
  return { lastName: namePart.trim(), firstName: '' };
}

/** `d/m/yyyy` (separators `/` or `-`) to `YYYY-MM-DD`; undefined for 2-digit years and impossible dates. */
export function parseDayMonthYear(text: string): string | undefined {
  const match = DATE_PATTERN.exec(text);
  if (match === null || match[3]!.length !== 4) return undefined;
  const day = Number(match[1]);
  const month = Number(match[2]);
  const year = Number(match[3]);
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined;
  return `${match[3]}-${String(month).padStart(2, '0')}-${String(day).padStart(2, '0')}`;
}

function daysInMonth(year: number, month: number): number {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/**
 * Translates a PCRE pattern stored with delimiters (`/^([0-9]{1,9})$/i`) into a JavaScript RegExp.
 * Supported flags: i, m, s, u. Anything else (notably `x`, which JavaScript lacks) or a pattern that
 * does not compile gives undefined: such a type never matches a term.
 */
export function translatePcre(pattern: string): RegExp | undefined {
  if (pattern.length < 2) return undefined;
  const open = pattern[0]!;
  if (/[\w\s\\]/.test(open)) return undefined;
  const close = ({ '(': ')', '[': ']', '{': '}', '<': '>' } as Record<string, string>)[open] ?? open;
  const end = pattern.lastIndexOf(close);
  if (end <= 0) return undefined;
  const body = pattern.slice(1, end);
  const flags = pattern.slice(end + 1);
  if (!/^[imsu]*$/.test(flags) || new Set(flags).size !== flags.length) return undefined;
  try {
    return new RegExp(body, flags);
  } catch {
    return undefined;
  }
}

/**
 * printf-style padding of a term by a type's `pad` (reference 4.4): `%0Ns` left-pads with zeros to N
 * characters, `%Ns` with spaces, `%s` (or null) leaves the term alone. Other formats are not used by
 * OpenEyes installations and leave the term alone too.
 */
export function applyPad(term: string, pad: string | null): string {
  if (pad === null) return term;
  const match = /^%(0?)(\d*)s$/.exec(pad);
  if (match === null || match[2] === '') return term;
  return term.padStart(Number(match[2]), match[1] === '0' ? '0' : ' ');
}

/**
 * Reference 4.4 attempt 2: pad the normalised term, match the type's regex, and return the whole match,
 * or undefined.
 */
export function matchIdentifier(
  term: string,
  type: { readonly regex: RegExp | undefined; readonly pad: string | null },
): string | undefined {
  if (type.regex === undefined) return undefined;
  type.regex.lastIndex = 0;
  const match = type.regex.exec(applyPad(term, type.pad));
  return match === null ? undefined : match[0];
}

/**
 * Lays a value out by a spacing rule (reference 4.8): each non-space character of the rule takes one
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

/** Per time zone: its formatter (building one costs far more than a search's queries) and its last answer. */
const zones = new Map<string, { readonly format: Intl.DateTimeFormat; minute: number; date: string }>();

/** Today's date (`YYYY-MM-DD`) in an IANA time zone. */
export function todayIn(timeZone: string, now: Date = new Date()): string {
  // Formatting costs ~10 us, a few percent of a search. The date can only change on a UTC minute
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
 * The `age` field (reference 4.7): `Deceased` when the patient is deceased, `Unknown` without a (valid)
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
