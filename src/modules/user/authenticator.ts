/**
 * HTTP Basic credential verification (reference 2.4). Successful verifications are remembered for a short
 * time, keyed by a SHA-256 of the whole header, so a caller with known-good credentials costs no bcrypt
 * and no database round trip. Failures are never cached: a wrong password always pays a full bcrypt.
 */
import { hash } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';
import { findLogin, findUserAuthItems } from './user.queries.ts';
import { verifyNothing, verifyPassword } from './passwords.ts';

export interface Principal {
  readonly userId: number;
  readonly username: string;
  /** Every RBAC item held, transitively. */
  readonly authItems: ReadonlySet<string>;
}

export type Verification =
  | { readonly ok: true; readonly principal: Principal }
  | {
      readonly ok: false;
      readonly reason: 'malformed' | 'unknown_user' | 'bad_password' | 'disabled';
      readonly username: string | undefined;
    };

export interface Authenticator {
  /**
   * Verifies an `Authorization` header value. `beforePasswordCheck` runs when the header is not in the
   * cache, just before bcrypt; it may throw to refuse the attempt (failure throttling).
   */
  verify(header: string | undefined, beforePasswordCheck?: (username: string) => void): Promise<Verification>;
  /** The principal of a header verified recently, without waiting: the request hot path. */
  cached(header: string | undefined): Principal | undefined;
  /** Forgets every cached verification (after a password change or a disabled account). */
  clear(): void;
}

interface CacheEntry {
  readonly principal: Principal;
  readonly expiresAt: number;
}

const MAX_CACHE_ENTRIES = 10_000;

/** Splits `Basic <base64(user:password)>`; undefined when the header is not well-formed Basic. */
export function parseBasicHeader(
  header: string | undefined,
): { username: string; password: string } | undefined {
  if (header === undefined || header.length > 4096) return undefined;
  const match = /^basic[ \t]+([A-Za-z0-9+/]+={0,2})[ \t]*$/i.exec(header);
  if (match === null || match[1]!.length % 4 === 1) return undefined;
  const decoded = Buffer.from(match[1]!, 'base64');
  // Reject text that is not valid UTF-8 rather than guessing at its meaning.
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(decoded);
  } catch {
    return undefined;
  }
  const colon = text.indexOf(':');
  // A NUL cannot be part of a username (PostgreSQL text refuses it): malformed, not a lookup.
  if (colon <= 0 || text.slice(0, colon).includes('\u0000')) return undefined;
  return { username: text.slice(0, colon), password: text.slice(colon + 1) };
}

export function createAuthenticator(db: Kysely<DB>, options: { cacheTtlMs: number }): Authenticator {
  const cache = new Map<string, CacheEntry>();
  // Verifications under way, by header hash: when a cache entry expires under load, every connection
  // presenting that header waits for one bcrypt instead of running its own (no thundering herd).
  const inFlight = new Map<string, Promise<Verification>>();

  const remember = (key: string, principal: Principal) => {
    if (options.cacheTtlMs <= 0) return;
    if (cache.size >= MAX_CACHE_ENTRIES) cache.delete(cache.keys().next().value!);
    cache.set(key, { principal, expiresAt: Date.now() + options.cacheTtlMs });
  };

  const lookup = (key: string): Principal | undefined => {
    const entry = cache.get(key);
    if (entry === undefined) return undefined;
    if (entry.expiresAt > Date.now()) return entry.principal;
    cache.delete(key);
    return undefined;
  };

  return {
    clear: () => cache.clear(),
    cached(header) {
      return header === undefined ? undefined : lookup(cacheKey(header));
    },
    async verify(header, beforePasswordCheck) {
      if (header === undefined) return { ok: false, reason: 'malformed', username: undefined };
      const key = cacheKey(header);
      const cached = lookup(key);
      if (cached !== undefined) return { ok: true, principal: cached };
      const pending = inFlight.get(key);
      if (pending !== undefined) return pending;
      const verification = verifyUncached(header, key, beforePasswordCheck);
      inFlight.set(key, verification);
      try {
        return await verification;
      } finally {
        inFlight.delete(key);
      }
    },
  };

  async function verifyUncached(
    header: string,
    key: string,
    beforePasswordCheck: ((username: string) => void) | undefined,
  ): Promise<Verification> {
    const credentials = parseBasicHeader(header);
    if (credentials === undefined) return { ok: false, reason: 'malformed', username: undefined };
    const { username, password } = credentials;
    beforePasswordCheck?.(username);
    const login = await findLogin(db, username);
    if (login === undefined) {
      await verifyNothing(password);
      return { ok: false, reason: 'unknown_user', username };
    }
    // Legacy salted hashes (password_salt set) are not accepted: reset those passwords with the CLI.
    const isMatch = login.passwordSalt === null && (await verifyPassword(password, login.passwordHash));
    if (!isMatch) return { ok: false, reason: 'bad_password', username };
    if (!login.isActive) return { ok: false, reason: 'disabled', username };
    const principal: Principal = {
      userId: login.userId,
      username: login.username,
      authItems: await findUserAuthItems(db, login.userId),
    };
    remember(key, principal);
    return { ok: true, principal };
  }
}

/** The credential cache key: a digest of the header, never the header itself (it holds the password). */
function cacheKey(header: string): string {
  // The one-shot `crypto.hash` costs a third less than createHash().update().digest() on the hot path.
  return hash('sha256', header, 'base64');
}
