/**
 * A fixed-window counter per key (client address, username). Windows are one minute by default and
 * aligned to the clock (a window starts at a multiple of its length since the epoch), so that every
 * process names the same window the same way. Used by the open sign/add endpoint and by the Basic-auth
 * failure brake.
 *
 * The hot path (`hit`, `peek`) only ever reads and writes memory. With shared counters (several server
 * processes, or PostgreSQL), a background sync (shared-counters.ts) flushes this process's increments to
 * the database and brings back the combined totals; a key then counts as
 * `max(local hits, last known combined total + hits not yet flushed)`. Without a database, or while it
 * is down, the limiter counts alone, as a single process would.
 */
import { createHash } from 'node:crypto';

export interface RateLimiter {
  /** Counts one hit for `key`; returns the seconds to wait when the limit is exceeded, else 0. */
  hit(key: string): number;
  /** Seconds to wait when `key` is already over its limit, else 0, without counting. */
  peek(key: string): number;
  reset(): void;
}

/** The part of a limiter the shared-counter sync talks to. */
export interface SharedCounterSource {
  /** Stable name, stored with each row (at most 32 characters). */
  readonly name: string;
  readonly windowMs: number;
  /**
   * Takes the increments not yet flushed in the current window (they are zeroed: `abort` puts them
   * back) and the hashes of every key touched in it. Undefined when no key is in the current window.
   */
  collect(now: number): SyncBatch | undefined;
}

export interface SyncBatch {
  readonly windowStart: number;
  readonly windowEnd: number;
  /** Hashed keys with hits to add (delta > 0) or only to read back (delta 0). */
  readonly rows: readonly { readonly keyHash: string; readonly delta: number }[];
  /** The combined totals read back; keys absent keep what was known. */
  commit(totals: ReadonlyMap<string, number>): void;
  /** The flush failed: the taken increments count as unflushed again. */
  abort(): void;
}

/** Where limiters with shared counters register (shared-counters.ts). */
export interface SharedCounterHub {
  attach(source: SharedCounterSource): void;
  /** Called on a hit: makes sure a sync is scheduled. Must be cheap and never touch the database. */
  wake(): void;
}

export interface RateLimiterOptions {
  /** Keys remembered at most; the oldest is dropped beyond. */
  readonly maxKeys?: number;
  /** Shares the counts with other processes through the database. Needs `name`. */
  readonly shared?: SharedCounterHub;
  /** The limiter's name in the shared table (for example `sign_add_ip`). */
  readonly name?: string;
  /** Clock, for tests. */
  readonly now?: () => number;
}

interface Entry {
  windowStart: number;
  /** Hits counted by this process in the window. */
  local: number;
  /** Hits of this process not yet flushed to the database. */
  unflushed: number;
  /** Combined total of every process (this one's flushed hits included), as last read back. */
  global: number;
  keyHash: string | undefined;
}

export function createRateLimiter(
  limit: number,
  windowMs = 60_000,
  options: RateLimiterOptions = {},
): RateLimiter {
  const maxKeys = options.maxKeys ?? 100_000;
  const shared = limit > 0 ? options.shared : undefined;
  const name = options.name ?? 'limiter';
  const clock = options.now ?? Date.now;
  const entries = new Map<string, Entry>();
  const windowOf = (now: number) => now - (now % windowMs);
  // Shared windows are aligned so that every process names them alike; a process alone starts a key's
  // window at its first hit (no boundary can halve a burst).
  const startOf = (now: number) => (shared === undefined ? now : windowOf(now));
  const isOver = (entry: Entry, now: number) => entry.windowStart + windowMs <= now;
  const current = (key: string, now: number) => {
    const entry = entries.get(key);
    return entry === undefined || isOver(entry, now) ? undefined : entry;
  };
  const count = (entry: Entry) => Math.max(entry.local, entry.global + entry.unflushed);
  const wait = (windowStart: number, now: number) =>
    Math.max(1, Math.ceil((windowStart + windowMs - now) / 1000));

  if (shared !== undefined) {
    shared.attach({
      name,
      windowMs,
      collect(now) {
        const windowStart = windowOf(now);
        const taken: { entry: Entry; keyHash: string; delta: number }[] = [];
        for (const [key, entry] of entries) {
          if (entry.windowStart !== windowStart) continue;
          entry.keyHash ??= hashKey(name, key);
          taken.push({ entry, keyHash: entry.keyHash, delta: entry.unflushed });
          entry.unflushed = 0;
        }
        if (taken.length === 0) return undefined;
        return {
          windowStart,
          windowEnd: windowStart + windowMs,
          rows: taken.map(({ keyHash, delta }) => ({ keyHash, delta })),
          commit(totals) {
            for (const { entry, keyHash } of taken) {
              const total = totals.get(keyHash);
              if (total !== undefined && entry.windowStart === windowStart) entry.global = total;
            }
          },
          abort() {
            for (const { entry, delta } of taken)
              if (entry.windowStart === windowStart) entry.unflushed += delta;
          },
        };
      },
    });
  }

  return {
    hit(key) {
      if (limit <= 0) return 0;
      const now = clock();
      let entry = current(key, now);
      if (entry === undefined) {
        if (entries.size >= maxKeys) {
          for (const [k, v] of entries) if (isOver(v, now)) entries.delete(k);
          if (entries.size >= maxKeys) entries.delete(entries.keys().next().value!);
        }
        entry = { windowStart: startOf(now), local: 0, unflushed: 0, global: 0, keyHash: undefined };
        entries.set(key, entry);
      }
      entry.local += 1;
      if (shared !== undefined) {
        entry.unflushed += 1;
        shared.wake();
      }
      return count(entry) > limit ? wait(entry.windowStart, now) : 0;
    },
    peek(key) {
      if (limit <= 0) return 0;
      const now = clock();
      const entry = current(key, now);
      return entry !== undefined && count(entry) >= limit ? wait(entry.windowStart, now) : 0;
    },
    reset: () => entries.clear(),
  };
}

/**
 * The stored form of a key: SHA-256 of limiter name and key, 128 bits in base64url. Keeps raw client
 * addresses and usernames out of the table (pseudonymised, not anonymous: an IPv4 address can be found
 * again by trying them all; rows live only minutes).
 */
export function hashKey(name: string, key: string): string {
  return createHash('sha256').update(`${name}\n${key}`).digest('base64url').slice(0, 22);
}
