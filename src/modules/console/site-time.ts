/**
 * Times in the site's time zone (`TIME_ZONE`): stored times are `YYYY-MM-DD HH:MM:SS` UTC text; pages show
 * them as the site's wall-clock time, and the forms' `datetime-local` values (wall-clock time without a
 * zone) are read back as UTC. Written with `Intl` (no time zone library): a wall time is turned into UTC
 * by guessing with the zone's offset at that instant and correcting once with the offset at the guess,
 * which is exact outside the hour a clock change skips or repeats (there the later offset is taken).
 */

export interface SiteTime {
  readonly timeZone: string;
  /** A stored UTC time as `YYYY-MM-DD HH:MM:SS` in the site's zone, plus the zone's short name. */
  format(stored: string | null | undefined): string;
  /** A stored UTC time as a `datetime-local` value (`YYYY-MM-DDTHH:MM`) in the site's zone. */
  toLocalInput(stored: string | null | undefined): string;
  /**
   * A `datetime-local` value (or a date `YYYY-MM-DD`, meaning its midnight) in the site's zone as stored
   * UTC text; undefined when it is not such a value or not a real date.
   */
  parseLocal(text: string): string | undefined;
}

import { formatDateTime, parseDateTime } from '../../db/database.ts';
import { wallClockFormat } from '../../db/stored-time.ts';

const LOCAL = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2}))?)?$/;

/** The instant of a stored date-time (in the stored zone: UTC, or the OpenEyes server's local time). */
function parseStored(stored: string): number | undefined {
  return parseDateTime(stored)?.getTime();
}

const pad = (n: number, width = 2) => String(n).padStart(width, '0');

export function createSiteTime(timeZone: string): SiteTime {
  const parts = wallClockFormat(timeZone);
  const zoneName = new Intl.DateTimeFormat('en-GB', { timeZone, timeZoneName: 'short' });

  /** Wall-clock fields of instant `time` in the zone. */
  const wall = (time: number) => {
    const fields: Record<string, number> = {};
    for (const part of parts.formatToParts(time))
      if (part.type !== 'literal') fields[part.type] = Number(part.value);
    return fields as {
      year: number;
      month: number;
      day: number;
      hour: number;
      minute: number;
      second: number;
    };
  };
  /** The zone's offset from UTC at instant `time`, in ms. */
  const offsetAt = (time: number) => {
    const w = wall(time);
    return Date.UTC(w.year, w.month - 1, w.day, w.hour, w.minute, w.second) - Math.floor(time / 1000) * 1000;
  };
  const wallText = (time: number, separator: string, withSeconds: boolean) => {
    const w = wall(time);
    const clock = `${pad(w.hour)}:${pad(w.minute)}${withSeconds ? `:${pad(w.second)}` : ''}`;
    return `${pad(w.year, 4)}-${pad(w.month)}-${pad(w.day)}${separator}${clock}`;
  };

  return {
    timeZone,
    format(stored) {
      if (stored === null || stored === undefined) return '';
      const time = parseStored(stored);
      if (time === undefined) return stored;
      const zone = zoneName.formatToParts(time).find((p) => p.type === 'timeZoneName')?.value ?? timeZone;
      return `${wallText(time, ' ', true)} ${zone}`;
    },
    toLocalInput(stored) {
      if (stored === null || stored === undefined) return '';
      const time = parseStored(stored);
      return time === undefined ? '' : wallText(time, 'T', false);
    },
    parseLocal(text) {
      const m = LOCAL.exec(text.trim());
      if (m === null) return undefined;
      const [year, month, day] = [+m[1]!, +m[2]!, +m[3]!];
      const [hour, minute, second] = [+(m[4] ?? 0), +(m[5] ?? 0), +(m[6] ?? 0)];
      if (hour > 23 || minute > 59 || second > 59) return undefined;
      const asUtc = Date.UTC(year, month - 1, day, hour, minute, second);
      const check = new Date(asUtc);
      if (check.getUTCFullYear() !== year || check.getUTCMonth() !== month - 1 || check.getUTCDate() !== day)
        return undefined;
      const guess = asUtc - offsetAt(asUtc);
      const time = asUtc - offsetAt(guess);
      return formatDateTime(new Date(time));
    },
  };
}
