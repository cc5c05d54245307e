/**
 * bcrypt password hashing. OpenEyes (PHP `password_hash`) writes `$2y$` hashes; `$2y$`, `$2a$` and `$2b$`
 * are the same algorithm, so a `$2y$` hash is verified as `$2b$` and new hashes are written as `$2y$`
 * so that an OpenEyes installation reading this database verifies them too.
 */
import bcrypt from 'bcrypt';

export const BCRYPT_COST = 10;

/** A hash of a random password: verifying against it costs what a real check costs (timing safety). */
const DUMMY_HASH = bcrypt.hashSync(crypto.randomUUID(), BCRYPT_COST);

export async function hashPassword(password: string): Promise<string> {
  const hash = await bcrypt.hash(password, BCRYPT_COST);
  return hash.replace(/^\$2b\$/, '$2y$');
}

export function isBcryptHash(hash: string): boolean {
  return /^\$2[abxy]\$\d{2}\$[./A-Za-z0-9]{53}$/.test(hash);
}

/** True when `password` matches `hash`. Never throws; an unusable hash is a mismatch. */
export async function verifyPassword(password: string, hash: string | null): Promise<boolean> {
  if (hash === null || !isBcryptHash(hash)) {
    await bcrypt.compare(password, DUMMY_HASH);
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
  await bcrypt.compare(password, DUMMY_HASH);
}
