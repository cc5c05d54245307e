/**
 * The value rules PASAPI's resources share: dates and booleans read loosely where OpenEyes reads them
 * loosely, but never misread (no rolled-over date, no "false" taken as true), and the refusal that
 * carries a status and the `<Failure>` messages.
 */

/** A refusal of a PASAPI request: its HTTP status and the `<Error>` texts. Nothing has been written. */
export class PasapiError extends Error {
  readonly statusCode: number;
  readonly errors: readonly string[];
  constructor(statusCode: number, errors: readonly string[]) {
    super(errors.join('; '));
    this.name = 'PasapiError';
    this.statusCode = statusCode;
    this.errors = errors;
  }
}

/**
 * A date as OpenEyes's `Y-m-d` reads it (four-digit year, month and day with or without their leading
 * zero), as `YYYY-MM-DD`; undefined when it is not a date of the calendar. OpenEyes rolls an overflow
 * over (`2021-02-30` becomes `2021-03-02`); this refuses it.
 */
export function parseLooseDate(text: string): string | undefined {
  const match = /^(\d{4})-(\d{1,2})-(\d{1,2})$/.exec(text);
  if (match === null) return undefined;
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
  if (year < 1 || month < 1 || month > 12 || day < 1) return undefined;
  const daysInMonth = new Date(Date.UTC(year, month, 0)).getUTCDate();
  if (day > daysInMonth) return undefined;
  return `${match[1]}-${String(month).padStart(2, '0')}-${String(day).padStart(2, '0')}`;
}

const TRUE_WORDS = new Set(['1', 'true', 'yes', 'on', 'y']);
const FALSE_WORDS = new Set(['', '0', 'false', 'no', 'off', 'n']);

/**
 * A flag of a body element, a root attribute or an `X-OE-*` header: `1`, `true`, `yes`, `on`, `y` are
 * true, `0`, `false`, `no`, `off`, `n` and empty are false, whatever their case and surrounding spaces;
 * undefined for anything else (OpenEyes reads every non-empty text but `0` as true).
 */
export function parseLooseBoolean(text: string): boolean | undefined {
  const word = text.trim().toLowerCase();
  if (TRUE_WORDS.has(word)) return true;
  if (FALSE_WORDS.has(word)) return false;
  return undefined;
}

/** A header flag: absent is false; an unreadable value refuses the request. */
export function readFlagHeader(name: string, value: string | string[] | undefined): boolean {
  if (value === undefined) return false;
  const parsed = parseLooseBoolean(Array.isArray(value) ? value.join(',') : value);
  if (parsed === undefined) throw new PasapiError(400, [`Invalid value for header ${name}`]);
  return parsed;
}
