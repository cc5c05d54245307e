/**
 * HTTP Basic credential verification (split at the first colon, an active user, a bcrypt compare, real or
 * dummy). Successful verifications are remembered for a short time (an LRU cache with a TTL, `lru-cache`),
 * keyed by a SHA-256 of the whole header, so a caller with known-good credentials costs no bcrypt and no
 * database round trip. Failures are never cached: a wrong password always pays a full bcrypt.
 *
 * Revocation: a change that revokes credentials (a user disabled, a password changed, a role revoked, by
 * the CLI in another process or by any server) bumps the credential-change count in the database
 * (`recordCredentialChange`, in the change's transaction). While credentials are cached, the
 * authenticator polls that count every `REVOCATION_POLL_MS` and forgets every cached credential when it
 * moves. A cached credential is used without waiting only while the last successful poll started less
 * than `REVOCATION_STALE_MS` ago; past that (a slow or unreachable database) a request waits for a fresh
 * poll, so a revocation takes effect in every process within that bound whatever the cache TTL.
 */
import { hash } from 'node:crypto';
import type { Kysely } from 'kysely';
import { LRUCache } from 'lru-cache';
import type { DB } from '../../db/schema.ts';
import { readCredentialChanges } from '../../db/counters.queries.ts';
import type { Database } from '../../db/database.ts';
import type { Authenticator, CachedLogin, Principal, Verification } from '../../authenticator.ts';
import { parseBasicHeader } from '../../http/basic-header.ts';
import { findLogin, findUserAccess } from './user.queries.ts';
import { prepareDummyHash, verifyNothing, verifyPassword } from './passwords.ts';

// Parsed in src/http (the Basic guard reads the username too); offered here as before.
export { parseBasicHeader };

// The verifier's contract (`src/authenticator.ts`), read by the HTTP layer through AppDeps, filled in here.
export type { Authenticator, CachedLogin, Principal, Verification };

export interface AuthenticatorOptions {
  /** How long a successful verification is remembered, in ms; 0 = never. */
  readonly cacheTtlMs: number;
  /**
   * The database's capabilities the login lookup uses (`user.active`, the case-insensitive username
   * key); the own schema's with `lower()` when not given.
   */
  readonly database?: Pick<Database, 'dialect' | 'schema'>;
}

const MAX_CACHE_ENTRIES = 10_000;
/** How often the credential-change count is read while credentials are cached. */
const REVOCATION_POLL_MS = 500;
/** The longest a cached credential is trusted after the last successful poll started. */
const REVOCATION_STALE_MS = 1500;

export function createAuthenticator(db: Kysely<DB>, options: AuthenticatorOptions): Authenticator {
  const isCaching = options.cacheTtlMs > 0;
  const cache = new LRUCache<string, CachedLogin>({
    max: MAX_CACHE_ENTRIES,
    ttl: Math.max(1, options.cacheTtlMs),
  });
  // Verifications under way, by header hash: when a cache entry expires under load, every connection
  // presenting that header waits for one bcrypt instead of running its own (no thundering herd).
  const inFlight = new Map<string, Promise<Verification>>();
  let passwordChecks = 0;
  if (isCaching) prepareDummyHash();

  // The credential-change count as last read, when the read started, and how many changes were seen.
  let changes: number | undefined;
  let confirmedAt = -Infinity;
  let changesSeen = 0;
  let polling: Promise<void> | undefined;
  let pollTimer: NodeJS.Timeout | undefined;

  const isFresh = () => Date.now() - confirmedAt <= REVOCATION_STALE_MS;
  const schedulePoll = () => {
    if (pollTimer !== undefined || cache.size === 0) return;
    pollTimer = setTimeout(() => {
      pollTimer = undefined;
      void poll();
    }, REVOCATION_POLL_MS);
    pollTimer.unref();
  };
  /** Reads the count once (concurrent callers share the read); never rejects. */
  const poll = (): Promise<void> => {
    polling ??= (async () => {
      const startedAt = Date.now();
      try {
        const count = await readCredentialChanges(db);
        if (changes !== undefined && count !== changes) {
          cache.clear();
          changesSeen += 1;
        }
        changes = count;
        confirmedAt = Math.max(confirmedAt, startedAt);
      } catch {
        // Unknown: cached credentials go stale and requests verify (or fail) on their own.
      }
    })().finally(() => {
      polling = undefined;
      cache.purgeStale();
      schedulePoll();
    });
    return polling;
  };
  /** The cached login of `key`, only while the credential-change count is fresh. */
  const lookup = (key: string): CachedLogin | undefined => (isFresh() ? cache.get(key) : undefined);

  return {
    clear: () => cache.clear(),
    get passwordChecks() {
      return passwordChecks;
    },
    cached(header) {
      return header === undefined || !isCaching ? undefined : lookup(cacheKey(header));
    },
    verifyNow: (header, beforePasswordCheck) => verifyUncached(header, cacheKey(header), beforePasswordCheck),
    async verify(header, beforePasswordCheck) {
      if (header === undefined) return { ok: false, reason: 'malformed', username: undefined };
      const key = cacheKey(header);
      if (isCaching && cache.has(key)) {
        if (!isFresh()) await poll();
        const cached = lookup(key);
        if (cached !== undefined) return { ok: true, principal: cached.principal };
      }
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
    beforePasswordCheck: ((username: string) => void | Promise<void>) | undefined,
  ): Promise<Verification> {
    const credentials = parseBasicHeader(header);
    if (credentials === undefined) return { ok: false, reason: 'malformed', username: undefined };
    const { username, password } = credentials;
    await beforePasswordCheck?.(username);
    // The count read before the login: a change seen before this verification is cached voids it.
    if (isCaching && !isFresh()) await poll();
    const changesSeenAtStart = changesSeen;
    const database = options.database;
    const login = await findLogin(db, username, {
      hasUserActiveColumn: database?.schema.hasUserActiveColumn ?? true,
      ...(database === undefined ? {} : { foldedKey: (column) => database.dialect.foldedKey(column) }),
    });
    passwordChecks += 1;
    if (login === undefined) {
      await verifyNothing(password);
      return { ok: false, reason: 'unknown_user', username };
    }
    // Legacy salted hashes (password_salt set) are not accepted: reset those passwords with the CLI.
    const isMatch = login.passwordSalt === null && (await verifyPassword(password, login.passwordHash));
    if (!isMatch) return { ok: false, reason: 'bad_password', username };
    if (!login.isActive) return { ok: false, reason: 'disabled', username };
    const access = await findUserAccess(db, login.userId);
    // The password changed while it was being checked: the one presented is being revoked.
    if (access.passwordHashes.get(login.loginId) !== login.passwordHash)
      return { ok: false, reason: 'bad_password', username };
    const principal: Principal = {
      userId: login.userId,
      username: login.username,
      authItems: access.authItems,
      credentialStamp: access.credentialStamp,
      assignedItems: access.assignedItems,
    };
    if (isCaching && changes !== undefined && changesSeen === changesSeenAtStart && isFresh()) {
      cache.set(key, { principal, username });
      schedulePoll();
    }
    return { ok: true, principal };
  }
}

/** The credential cache key: a digest of the header, never the header itself (it holds the password). */
function cacheKey(header: string): string {
  // The one-shot `crypto.hash` costs a third less than createHash().update().digest() on the hot path.
  return hash('sha256', header, 'base64');
}
