/**
 * The failed-login brake, shared by every way of logging in (Basic auth, and any login form): one per app,
 * reached with `beginLoginAttempt(deps, username, address)` before a password is checked, and with
 * `checkLoginThrottle` before a credential is answered from the authenticator's cache (a throttled login
 * is refused even with the right password; a cached success costs a few map reads and counts nothing).
 *
 * An attempt counts from the moment it starts (it is in flight until it ends), so a burst of concurrent
 * guesses is judged on the attempts already running, not only on those that have failed. Every refusal is
 * a 429 with `Retry-After`, answered before any password is hashed:
 * - per (username, address): `AUTH_FAILURE_FREE_ATTEMPTS` failures an hour, then an exponential back-off
 *   from the last failure (1 s, 2 s, 4 s, ... up to `AUTH_FAILURE_MAX_BACKOFF_SECONDS`); a success clears
 *   it. One attacker therefore slows only their own guesses, not the user's other devices;
 * - per address (any usernames): `AUTH_FAILURE_LIMIT_PER_MINUTE` failures a minute;
 * - per username (every address): `AUTH_FAILURE_LIMIT_PER_USERNAME` failures an hour, a ceiling far above
 *   what one address can reach under its back-off. Known addresses (where the username logged in
 *   successfully in the last 24 hours, remembered by this process) pass both ceilings, so that guesses
 *   spread over many addresses do not lock a clinician out of the devices they use;
 * - password checks in flight: `AUTH_CONCURRENT_VERIFICATIONS_PER_CLIENT` per address and per username,
 *   and `AUTH_CONCURRENT_VERIFICATIONS` in the process (more wait up to a second, FIFO). bcrypt runs on
 *   libuv's thread pool, which file writes share: a burst cannot queue more than that many checks ahead
 *   of a signature's fsync.
 * Failure counts are shared between processes through the database like every rate limit
 * (`shared-counters.ts`); attempts in flight, clears and known addresses are per process.
 */
import { LRUCache } from 'lru-cache';
import type { AppDeps } from '../deps.ts';
import { AppError, DEFAULT_MESSAGES } from '../errors.ts';
import { createHeavyGate } from './overload.ts';
import { createBackoffLimiter, createRateLimiter } from './rate-limit.ts';
import { sharedCountersFor } from './shared-counters.ts';

/** One login attempt under way: end it exactly once. */
export interface LoginAttempt {
  /** The password matched (and the account may log in): the pair's failures are forgotten. */
  succeed(): void;
  /** Wrong password, unknown user or disabled account: counted everywhere. */
  fail(): void;
  /** The check could not run (the database is down): counted nowhere. */
  abandon(): void;
}

export interface LoginBrake {
  /**
   * Seconds a login of `username` from `address` must wait under the per-pair back-off and the
   * per-address and per-username ceilings, else 0; counts nothing.
   */
  wait(username: string, address: string): number;
  /** Reserves an attempt for `username` from `address`, or throws the 429 (an AppError). */
  begin(username: string, address: string): Promise<LoginAttempt>;
}

const HOUR_MS = 3_600_000;
const KNOWN_ADDRESS_MS = 24 * HOUR_MS;
/** How long a check waits for one of the process's verification slots before 429. */
const VERIFICATION_WAIT_MS = 1000;

const brakes = new WeakMap<AppDeps, LoginBrake>();

/**
 * Starts a login attempt through the app's one brake (the `deps` given to `buildApp`), or throws 429.
 * `address` is the client address (`request.ip`: the forwarded one behind trusted proxies).
 */
export function beginLoginAttempt(deps: AppDeps, username: string, address: string): Promise<LoginAttempt> {
  return brakeOf(deps).begin(username, address);
}

/**
 * The 429 that a login of `username` from `address` gets now under the brake's back-off and ceilings,
 * or undefined; counts nothing and reads memory only. Every login is asked this first, also one whose
 * credential was verified before and is answered from the authenticator's cache: a throttled
 * (username, address) or address is refused whatever the credential, so the cache cannot confirm a
 * guess that the brake would have refused.
 */
export function checkLoginThrottle(deps: AppDeps, username: string, address: string): AppError | undefined {
  const wait = brakeOf(deps).wait(username, address);
  return wait > 0 ? tooManyAttempts(wait) : undefined;
}

function brakeOf(deps: AppDeps): LoginBrake {
  let brake = brakes.get(deps);
  if (brake === undefined) {
    brake = createLoginBrake(deps);
    brakes.set(deps, brake);
  }
  return brake;
}

function createLoginBrake(deps: AppDeps): LoginBrake {
  const { config } = deps;
  const shared = sharedCountersFor(deps);
  const byAddress = createRateLimiter(config.authFailureLimitPerMinute, 60_000, {
    shared,
    name: 'auth_failure_ip',
  });
  const byUsername = createRateLimiter(config.authFailureLimitPerUsername, HOUR_MS, {
    shared,
    name: 'auth_failure_user_hour',
  });
  const byPair = createBackoffLimiter(
    {
      freeAttempts: config.authFailureFreeAttempts,
      firstDelayMs: 1000,
      maxDelayMs: config.authFailureMaxBackoffSeconds * 1000,
      windowMs: HOUR_MS,
    },
    { shared, name: 'auth_failure_pair' },
  );
  const knownAddresses = new LRUCache<string, true>({ max: 100_000, ttl: KNOWN_ADDRESS_MS });
  const gate =
    config.authConcurrentVerifications > 0 ? createHeavyGate(config.authConcurrentVerifications) : undefined;
  const perClient = config.authConcurrentVerificationsPerClient;
  /** Attempts in flight by key: `a:` address, `u:` username, `p:` pair. */
  const inFlight = new Map<string, number>();
  const pending = (key: string) => inFlight.get(key) ?? 0;
  const change = (keys: readonly string[], by: 1 | -1) => {
    for (const key of keys) {
      const count = pending(key) + by;
      if (count <= 0) inFlight.delete(key);
      else inFlight.set(key, count);
    }
  };

  const keysOf = (username: string, address: string) => {
    const user = username.toLowerCase();
    const pair = `${user}\n${address}`;
    return { user, pair, keys: [`a:${address}`, `u:${user}`, `p:${pair}`] as const };
  };
  /** The back-off and the ceilings, counting the attempts under way as if they were to fail. */
  const waitFor = ({ user, pair, keys }: ReturnType<typeof keysOf>, address: string) => {
    const wait = byPair.peek(pair, pending(keys[2]));
    if (knownAddresses.has(pair)) return wait;
    return Math.max(wait, byAddress.peek(address, pending(keys[0])), byUsername.peek(user, pending(keys[1])));
  };

  return {
    wait: (username, address) => waitFor(keysOf(username, address), address),
    async begin(username, address) {
      const login = keysOf(username, address);
      const { user, pair, keys } = login;
      if (perClient > 0 && (pending(keys[0]) >= perClient || pending(keys[1]) >= perClient))
        throw tooManyAttempts(1);
      const wait = waitFor(login, address);
      if (wait > 0) throw tooManyAttempts(wait);
      change(keys, 1);
      if (gate !== undefined && !(await gate.acquire(VERIFICATION_WAIT_MS))) {
        change(keys, -1);
        throw tooManyAttempts(1);
      }
      let isOver = false;
      const end = () => {
        if (isOver) return false;
        isOver = true;
        change(keys, -1);
        gate?.release();
        return true;
      };
      return {
        succeed() {
          if (!end()) return;
          byPair.clear(pair);
          knownAddresses.set(pair, true);
        },
        fail() {
          if (!end()) return;
          byAddress.hit(address);
          byUsername.hit(user);
          byPair.hit(pair);
        },
        abandon: end,
      };
    },
  };
}

export function tooManyAttempts(retryAfterSeconds: number): AppError {
  return new AppError('too_many_requests', DEFAULT_MESSAGES.too_many_requests, {
    headers: { 'retry-after': String(retryAfterSeconds) },
  });
}
