/**
 * Name prefixes as index ranges, for engines that compare `lower(name)` in code-point order (SQLite's
 * BINARY collation, PostgreSQL's `COLLATE "C"`): `prefix <= key < upper bound`.
 */
import type { Expression, RawBuilder, SqlBool } from 'kysely';
import { sql } from 'kysely';

/**
 * The smallest string greater than every string that starts with `prefix`, in code-point order (which
 * is byte order for UTF-8): undefined when no such bound exists (a prefix made only of U+10FFFF), and
 * then only the lower bound applies.
 */
export function prefixUpperBound(prefix: string): string | undefined {
  const chars = Array.from(prefix);
  while (chars.length > 0) {
    const last = chars.pop()!.codePointAt(0)!;
    if (last < 0x10ffff) {
      const next = last + 1 === 0xd800 ? 0xe000 : last + 1;
      return chars.join('') + String.fromCodePoint(next);
    }
  }
  return undefined;
}

/** `key >= low [and key < high]`; `high` is left out when the bounds had none. */
export function prefixRangeMatch(key: Expression<string>, low: unknown, high: unknown): RawBuilder<SqlBool> {
  return high === undefined
    ? sql<SqlBool>`${key} >= ${low}`
    : sql<SqlBool>`${key} >= ${low} and ${key} < ${high}`;
}
