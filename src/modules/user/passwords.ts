/**
 * bcrypt password hashing. OpenEyes (PHP `password_hash`) writes `$2y$` hashes; `$2y$`, `$2a$` and `$2b$`
 * are the same algorithm, so a `$2y$` hash is verified as `$2b$` and new hashes are written as `$2y$`
 * so that an OpenEyes installation reading this database verifies them too.
 *
 * bcrypt reads only the first 72 bytes of a password: a longer one would match every password sharing
 * its first 72 bytes. New passwords over 72 bytes are therefore refused; verification keeps bcrypt's
 * rule, so that hashes OpenEyes made from longer passwords still verify with the password as typed.
 */
import { randomUUID } from 'node:crypto';
import bcrypt from 'bcrypt';
import { AppError } from '../../errors.ts';

export const BCRYPT_COST = 10;
/** The most bytes (UTF-8) bcrypt reads of a password. */
export const MAX_PASSWORD_BYTES = 72;

/**
 * A hash of a random password: verifying against it costs what a real check costs (timing safety).
 * Made on first use, on the thread pool, so that importing this module (every CLI command) costs nothing.
 */
let dummyHash: Promise<string> | undefined;

function dummy(): Promise<string> {
  dummyHash ??= bcrypt.hash(randomUUID(), BCRYPT_COST);
  return dummyHash;
}

/** Makes the dummy hash now (in the background), so that the first unknown user costs one check only. */
export function prepareDummyHash(): void {
  dummy().catch(() => {
    dummyHash = undefined;
  });
}

/** Throws a 400 AppError naming the rule when `password` is too long for bcrypt to hash faithfully. */
export function checkPasswordLength(password: string): void {
  const bytes = Buffer.byteLength(password, 'utf8');
  if (bytes > MAX_PASSWORD_BYTES) {
    throw new AppError(
      'bad_request',
      `Password must be at most ${MAX_PASSWORD_BYTES} bytes in UTF-8 (this one has ${bytes}): bcrypt ignores ` +
        'everything after the 72nd byte',
    );
  }
}

/** The `$2y$` hash of a new password; refuses one over 72 bytes. */
export async function hashPassword(password: string): Promise<string> {
  checkPasswordLength(password);
  const hash = await bcrypt.hash(password, BCRYPT_COST);
  return hash.replace(/^\$2b\$/, '$2y$');
}

export function isBcryptHash(hash: string): boolean {
  return /^\$2[abxy]\$\d{2}\$[./A-Za-z0-9]{53}$/.test(hash);
}

/** True when `password` matches `hash`. Never throws; an unusable hash is a mismatch. */
export async function verifyPassword(password: string, hash: string | null): Promise<boolean> {
  if (hash === null || !isBcryptHash(hash)) {
    await bcrypt.compare(password, await dummy());
    return false;
  }
  try {
    return await bcrypt.compare(password, hash.replace(/^\$2[axy]\$/, '$2b$'));
  } catch {
    return false;
  }
}

/** Spends the time of one verification, for unknown users. */
export async function verifyNothing(password: string): Promise<void> {
  await bcrypt.compare(password, await dummy());
}
