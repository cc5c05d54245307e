/**
 * Counters per key (client address, username) over windows of time. Windows are aligned to the clock
 * when shared (a window starts at a multiple of its length since the epoch), so that every process names
 * the same window the same way; a limiter alone starts a key's window at its first hit. Two policies:
 * - `createRateLimiter`: a fixed limit per window (the open sign/add endpoint, the login brake's ceilings);
 * - `createBackoffLimiter`: some free attempts per window, then an exponential back-off from the last
 *   counted attempt (the login brake per username and address).
 * Keys live in an LRU cache (`lru-cache`) bounded by `maxKeys`: the least recently used key is forgotten.
 *
 * The hot path (`hit`, `peek`) only ever reads and writes memory. With shared counters (several server
 * processes, or PostgreSQL), a background sync (shared-counters.ts) flushes this process's increments to
 * the database and brings back the combined totals; a key then counts as
 * `max(local hits, last known combined total + hits not yet flushed)`. Without a database, or while it
 * is down, the limiter counts alone, as a single process would.
 */
import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';

export interface RateLimiter {
  /** Counts one hit for `key`; returns the seconds to wait when the limit is exceeded, else 0. */
  hit(key: string): number;
  /**
   * Seconds to wait when `key` is already at its limit, counting `pending` hits that may still come
   * (attempts under way), else 0; counts nothing.
   */
  peek(key: string, pending?: number): number;
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
  /** Keys remembered at most; the least recently used is dropped beyond. */
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
  /** When the count last grew (a hit here, or a larger total read back). */
  lastIncreaseAt: number;
  /** Count at which the key was last cleared (`createBackoffLimiter`): only hits above it count. */
  cleared: number;
  /** When the key was last hit or asked about. */
  lastSeenAt: number;
}

/**
 * Keys without new hits are read back from the database (others' hits) only while they were seen this
 * recently: a window of an hour would otherwise read back every key of the hour at every sync.
 */
const READ_BACK_RECENT_MS = 60_000;

/** The windowed counts of one limiter: memory, and the shared sync when there is one. */
interface WindowCounts {
  readonly now: () => number;
  readonly windowMs: number;
  /** The key's entry in the current window, if it has one. */
  current(key: string, at: number): Entry | undefined;
  /** Counts one hit; returns the key's entry. */
  add(key: string, at: number): Entry;
  count(entry: Entry): number;
  clear(): void;
}

function createWindowCounts(windowMs: number, options: RateLimiterOptions, isActive: boolean): WindowCounts {
  const shared = isActive ? options.shared : undefined;
  const name = options.name ?? 'limiter';
  const clock = options.now ?? Date.now;
  const entries = new LRUCache<string, Entry>({ max: options.maxKeys ?? 100_000 });
  const windowOf = (at: number) => at - (at % windowMs);
  // Shared windows are aligned so that every process names them alike; a process alone starts a key's
  // window at its first hit (no boundary can halve a burst).
  const startOf = (at: number) => (shared === undefined ? at : windowOf(at));
  const count = (entry: Entry) => Math.max(entry.local, entry.global + entry.unflushed);
  const current = (key: string, at: number) => {
    const entry = entries.get(key);
    if (entry === undefined || entry.windowStart + windowMs <= at) return undefined;
    entry.lastSeenAt = at;
    return entry;
  };

  if (shared !== undefined) {
    shared.attach({
      name,
      windowMs,
      collect(at) {
        const windowStart = windowOf(at);
        const taken: { entry: Entry; keyHash: string; delta: number }[] = [];
        for (const [key, entry] of entries.entries()) {
          if (entry.windowStart !== windowStart) continue;
          if (entry.unflushed === 0 && entry.lastSeenAt < at - READ_BACK_RECENT_MS) continue;
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
            const readAt = clock();
            for (const { entry, keyHash } of taken) {
              const total = totals.get(keyHash);
              if (total === undefined || entry.windowStart !== windowStart) continue;
              const before = count(entry);
              entry.global = total;
              if (count(entry) > before) entry.lastIncreaseAt = readAt;
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
    now: clock,
    windowMs,
    current,
    add(key, at) {
      let entry = current(key, at);
      if (entry === undefined) {
        entry = {
          windowStart: startOf(at),
          local: 0,
          unflushed: 0,
          global: 0,
          keyHash: undefined,
          lastIncreaseAt: at,
          cleared: 0,
          lastSeenAt: at,
        };
        entries.set(key, entry);
      }
      entry.local += 1;
      entry.lastIncreaseAt = at;
      if (shared !== undefined) {
        entry.unflushed += 1;
        shared.wake();
      }
      return entry;
    },
    count,
    clear: () => entries.clear(),
  };
}

/** Seconds until the end of the window that started at `windowStart` (at least 1). */
function secondsLeft(windowStart: number, windowMs: number, at: number): number {
  return Math.max(1, Math.ceil((windowStart + windowMs - at) / 1000));
}

export function createRateLimiter(
  limit: number,
  windowMs = 60_000,
  options: RateLimiterOptions = {},
): RateLimiter {
  const counts = createWindowCounts(windowMs, options, limit > 0);
  return {
    hit(key) {
      if (limit <= 0) return 0;
      const at = counts.now();
      const entry = counts.add(key, at);
      return counts.count(entry) > limit ? secondsLeft(entry.windowStart, windowMs, at) : 0;
    },
    peek(key, pending = 0) {
      if (limit <= 0) return 0;
      const at = counts.now();
      const entry = counts.current(key, at);
      const count = entry === undefined ? 0 : counts.count(entry);
      if (count + pending < limit) return 0;
      return entry === undefined || count < limit ? 1 : secondsLeft(entry.windowStart, windowMs, at);
    },
    reset: () => counts.clear(),
  };
}

export interface BackoffPolicy {
  /** Attempts counted in a window before the back-off starts; 0 = never any back-off. */
  readonly freeAttempts: number;
  /** The wait after the first attempt past the free ones, in ms; it doubles with each attempt after. */
  readonly firstDelayMs: number;
  /** The longest wait, in ms. */
  readonly maxDelayMs: number;
  /** How long counted attempts are remembered (the window). */
  readonly windowMs: number;
}

export interface BackoffLimiter {
  /**
   * Seconds to wait before `key` may make another attempt, with `pending` attempts of it still under
   * way (they may yet be counted); 0 when it may go now.
   */
  peek(key: string, pending?: number): number;
  /** Counts one attempt (a failure). */
  hit(key: string): void;
  /** Forgets the attempts counted so far for `key` (in this process: shared totals keep them). */
  clear(key: string): void;
}

/**
 * `freeAttempts` attempts per window, then each attempt must wait `firstDelayMs * 2^(n - freeAttempts)`
 * (at most `maxDelayMs`) after the last counted one, `n` being the attempts counted so far.
 */
export function createBackoffLimiter(
  policy: BackoffPolicy,
  options: RateLimiterOptions = {},
): BackoffLimiter {
  const isOn = policy.freeAttempts > 0;
  const counts = createWindowCounts(policy.windowMs, options, isOn);
  const attemptsOf = (entry: Entry) => Math.max(0, counts.count(entry) - entry.cleared);
  return {
    peek(key, pending = 0) {
      if (!isOn) return 0;
      const at = counts.now();
      const entry = counts.current(key, at);
      const attempts = entry === undefined ? 0 : attemptsOf(entry);
      if (attempts + pending < policy.freeAttempts) return 0;
      // An attempt under way may add to the count: the next one waits for it.
      if (pending > 0 || entry === undefined) return 1;
      const steps = Math.min(attempts - policy.freeAttempts, 40);
      const delayMs = Math.min(policy.maxDelayMs, policy.firstDelayMs * 2 ** steps);
      const waitMs = entry.lastIncreaseAt + delayMs - at;
      return waitMs > 0 ? Math.ceil(waitMs / 1000) : 0;
    },
    hit(key) {
      if (isOn) counts.add(key, counts.now());
    },
    clear(key) {
      const entry = counts.current(key, counts.now());
      if (entry !== undefined) entry.cleared = counts.count(entry);
    },
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
