/**
 * The patient search-term grammar of the original as pure functions: protocol prefix, name
 * detection with an optional `dd/mm/yyyy` date, identifier normalisation (PCRE `validate_regex`,
 * printf-style `pad`). No I/O: the search service feeds these with the reference data. How a result is
 * shown (display values, age) is in `patient-display.ts`; how a prefix becomes an index range is the
 * database dialect's (`namePrefixBounds`).
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
      /** The term without its protocol, spaces and hyphens (as the original validates it). */
      readonly value: string;
    };

export interface ParseOptions {
  /** Setting `dob_mandatory_in_search`: a name without a date is then not a name. */
  readonly isDobMandatory: boolean;
}

// The original's name pattern: a name part without digits, then an optional date.
const NAME_PATTERN = /^(\D+[ ,]?\D*)(\s\d{1,2}[/-]\d{1,2}[/-]\d{2,4})?$/;
const DATE_PATTERN = /^(\d{1,2})[/-](\d{1,2})[/-](\d{2,4})$/;

/**
 * Splits a raw term into a name search, an identifier search or an invalid term. Differences from the
 * original: the year of a date must have 4 digits and the date must
 * exist (else the whole term is invalid), and a name with neither a name part nor a date is invalid
 * (the original listed every patient for a term such as `,`).
 */
export function parseSearchTerm(raw: string, options: ParseOptions): ParsedTerm {
  const trimmed = raw.trim();
  // NUL cannot be stored in PostgreSQL text, so no name or identifier can contain it.
  if (trimmed === '' || trimmed.length > MAX_TERM_LENGTH || trimmed.includes('\u0000')) {
    return { kind: 'invalid' };
  }
  // Exactly two parts around ':' make a protocol; the term is whatever follows the
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

/** A name: `Last, First`, else `First Last...`, else a surname alone; both parts trimmed. */
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
 * printf-style padding of a term by a type's `pad`: `%0Ns` left-pads with zeros to N
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
 * The original's second attempt: pad the normalised term, match the type's regex, and return the whole match,
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
