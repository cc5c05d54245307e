/**
 * Device text for a fixed-width column of OpenEyes's schema. MariaDB in strict mode refuses a value
 * longer than its column (and a utf8mb3 column a character beyond U+FFFF) by failing the statement, and
 * with it the routine's batch, so every device value bound for such a column goes through
 * {@link fitColumn} first: characters the schema cannot store become U+FFFD, and text longer than the
 * column is cut to its width (descriptive text: names, device details) or refused (identifiers, which a
 * cut could make match another's), the reason logged with lengths only, never the value. A device number
 * bound for a `decimal(p,s)` column goes through {@link fitDecimal}: rounded to the column's scale, and
 * refused when the column cannot hold it (MariaDB in strict mode and PostgreSQL fail the statement on an
 * out-of-range value; SQLite would keep it whole).
 */

/** A column a device value is written to: its width in characters and what a longer value gets. */
export interface ColumnWidth {
  /** `table.column`, for the log and the refusal. */
  readonly column: string;
  /** Characters the column holds (`varchar(n)`; a MariaDB `text` holds 65,535 bytes: 21,845 utf8mb3 characters). */
  readonly width: number;
  readonly onOverflow: 'cut' | 'refuse';
}

/** Characters (utf8mb3: three bytes each at most) that a MariaDB `text` column always holds. */
export const TEXT_COLUMN_CHARACTERS = 21_845;

/** A value longer than an identifier's column: the file cannot be filed as it is. */
export class ColumnWidthError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ColumnWidthError';
  }
}

export interface FitOptions {
  /** The highest code point the schema's text columns hold (`SchemaProfile.maxTextCodePoint`). */
  readonly maxCodePoint: number;
  log(line: string): void;
}

/**
 * `value` as `column` can store it (see the file comment); throws a {@link ColumnWidthError} for an
 * identifier longer than its column.
 */
export function fitColumn(value: string, column: ColumnWidth, options: FitOptions): string {
  let text = value;
  if (options.maxCodePoint < 0x10ffff && /[\uD800-\uDFFF]/.test(text)) {
    text = Array.from(text, (c) => (c.codePointAt(0)! > options.maxCodePoint ? '\uFFFD' : c)).join('');
    options.log(`${column.column}: characters the database cannot store replaced by U+FFFD`);
  }
  // UTF-16 units are never fewer than characters: a value within the width in units fits.
  if (text.length <= column.width) return text;
  const characters = Array.from(text);
  if (characters.length <= column.width) return text;
  if (column.onOverflow === 'refuse') {
    throw new ColumnWidthError(
      `${column.column} would be ${characters.length} characters, longer than the column's ${column.width}`,
    );
  }
  options.log(`${column.column}: ${characters.length} characters cut to the column's ${column.width}`);
  return characters.slice(0, column.width).join('');
}

/** {@link fitColumn} of an optional value: null when absent. */
export function fitOptionalColumn(
  value: string | null | undefined,
  column: ColumnWidth,
  options: FitOptions,
): string | null {
  return value === undefined || value === null ? null : fitColumn(value, column, options);
}

/** A `decimal(precision, scale)` column a device number is written to. */
export interface DecimalColumn {
  /** `table.column`, for the refusal. */
  readonly column: string;
  readonly precision: number;
  readonly scale: number;
}

/**
 * `value` rounded to `column`'s scale; throws a {@link ColumnWidthError} when it is not a finite number
 * or its rounded value has more integer digits than the column holds (`precision - scale`). The message
 * gives the column's range, never the value.
 */
export function fitDecimal(value: number, column: DecimalColumn): number {
  const factor = 10 ** column.scale;
  const rounded = Math.round(value * factor) / factor;
  const limit = 10 ** (column.precision - column.scale);
  if (!Number.isFinite(rounded) || Math.abs(rounded) >= limit) {
    const largest = (limit - 1 / factor).toFixed(column.scale);
    throw new ColumnWidthError(
      `${column.column} would be a value outside the column's range (-${largest} to ${largest})`,
    );
  }
  return rounded;
}
