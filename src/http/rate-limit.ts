/**
 * A fixed-window counter per key (client address, username), kept in memory. Windows are one minute by
 * default. Used by the open sign/add endpoint and by the Basic-auth failure brake.
 */
export interface RateLimiter {
  /** Counts one hit for `key`; returns the seconds to wait when the limit is exceeded, else 0. */
  hit(key: string): number;
  /** Seconds to wait when `key` is already over its limit, else 0, without counting. */
  peek(key: string): number;
  reset(): void;
}

export function createRateLimiter(limit: number, windowMs = 60_000, maxKeys = 100_000): RateLimiter {
  const windows = new Map<string, { count: number; resetAt: number }>();
  const current = (key: string, now: number) => {
    const entry = windows.get(key);
    if (entry === undefined || entry.resetAt <= now) return undefined;
    return entry;
  };
  const wait = (resetAt: number, now: number) => Math.max(1, Math.ceil((resetAt - now) / 1000));
  return {
    hit(key) {
      if (limit <= 0) return 0;
      const now = Date.now();
      let entry = current(key, now);
      if (entry === undefined) {
        if (windows.size >= maxKeys) {
          for (const [k, v] of windows) if (v.resetAt <= now) windows.delete(k);
          if (windows.size >= maxKeys) windows.delete(windows.keys().next().value!);
        }
        entry = { count: 0, resetAt: now + windowMs };
        windows.set(key, entry);
      }
      entry.count += 1;
      return entry.count > limit ? wait(entry.resetAt, now) : 0;
    },
    peek(key) {
      if (limit <= 0) return 0;
      const now = Date.now();
      const entry = current(key, now);
      return entry !== undefined && entry.count >= limit ? wait(entry.resetAt, now) : 0;
    },
    reset: () => windows.clear(),
  };
}
