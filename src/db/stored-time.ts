/**
 * Date-times as the database stores them: `YYYY-MM-DD HH:MM:SS` text in one time zone per process. The
 * service's own schema stores UTC. An OpenEyes database stores its server's local time, without an
 * offset, and OpenEyes reads it so; on one (`DATABASE_SCHEMA=openeyes`) the zone is `TIME_ZONE`, set once
 * when the database is opened (a process serves one database). Every write of a date-time and every
 * reading of one as an instant goes through here.
 *
 * Local time repeats an hour when clocks go back: two instants of that hour are stored alike, as
 * OpenEyes stores them; reading such a text gives the earlier instant.
 */
let zone = 'UTC';
let localFormat: Intl.DateTimeFormat | undefined;
// The text of the last second formatted: every answer of a busy server stamps an audit row with the
// current second, so most calls format the same second again.
let lastSecond = Number.NaN;
let lastText = '';

/** Sets the zone of stored date-times (an IANA name; `UTC` for the service's own schema). */
export function setStoredTimeZone(timeZone: string): void {
  zone = timeZone;
  localFormat = timeZone === 'UTC' ? undefined : wallClockFormat(timeZone);
  lastSecond = Number.NaN;
}

/** A formatter of the wall-clock fields (year to second, 24-hour) of an instant in `timeZone`. */
export function wallClockFormat(timeZone: string): Intl.DateTimeFormat {
  return new Intl.DateTimeFormat('en-GB', {
    timeZone,
    hourCycle: 'h23',
    year: 'numeric',
    month: '2-digit',
    day: '2-digit',
    hour: '2-digit',
    minute: '2-digit',
    second: '2-digit',
  });
}

/** The zone of stored date-times. */
export function storedTimeZone(): string {
  return zone;
}

/** Formats a Date as the `YYYY-MM-DD HH:MM:SS` text stored in date-time columns. */
export function formatDateTime(date: Date): string {
  const second = Math.floor(date.getTime() / 1000);
  if (second === lastSecond) return lastText;
  let text: string;
  if (localFormat === undefined) {
    text = date.toISOString().slice(0, 19).replace('T', ' ');
  } else {
    const part: Record<string, string> = {};
    for (const { type, value } of localFormat.formatToParts(date)) part[type] = value;
    text = `${part.year}-${part.month}-${part.day} ${part.hour}:${part.minute}:${part.second}`;
  }
  // An invalid Date has a NaN second, which never equals the one kept.
  lastSecond = second;
  lastText = text;
  return text;
}

/** The current time as stored in date-time columns. */
export function nowDateTime(): string {
  return formatDateTime(new Date());
}

const STORED = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})/;

/** The instant a stored `YYYY-MM-DD HH:MM:SS` text names; undefined for anything else. */
export function parseDateTime(text: string): Date | undefined {
  const match = STORED.exec(text);
  if (match === null) return undefined;
  const [year, month, day, hours, minutes, seconds] = match.slice(1).map(Number) as [
    number,
    number,
    number,
    number,
    number,
    number,
  ];
  const asUtc = Date.UTC(year, month - 1, day, hours, minutes, seconds);
  if (Number.isNaN(asUtc)) return undefined;
  if (localFormat === undefined) return new Date(asUtc);
  // The zone's offset at that wall-clock time: guess with the offset at the same UTC time, then correct
  // once with the offset at the guess (enough across one transition).
  const offsetAt = (instant: number) =>
    Date.parse(`${formatDateTime(new Date(instant)).replace(' ', 'T')}Z`) - instant;
  let instant = asUtc - offsetAt(asUtc);
  instant = asUtc - offsetAt(instant);
  return new Date(instant);
}
