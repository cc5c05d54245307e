/**
 * The password policy for passwords an operator sets (`user create`, `user password`), after NIST SP
 * 800-63B section 5.1.1.2: a minimum length (12 by default), a maximum that is never below 64 characters,
 * no composition rules, and a refusal of passwords known to be common. Dataset import does not enforce it
 * (it migrates accounts that already exist) but reports the weak ones it can see.
 *
 * The common passwords are the `passwords-common` dictionary of `@zxcvbn-ts/language-common` (MIT,
 * maintained by the zxcvbn-ts project): 49,233 passwords ranked by how often they appear in leaked
 * password sets. It is loaded on first use only, so the server never pays for it. Comparison ignores case.
 *
 * bcrypt reads the first 72 bytes of a password (as PHP's `password_hash` does for OpenEyes), so a new
 * password over 72 bytes is refused whatever the policy (`passwords.ts`); the policy says so with its other
 * reasons. 64 characters always fit in ASCII.
 */
import { MAX_PASSWORD_BYTES } from './passwords.ts';

export interface PasswordPolicy {
  /** Characters (Unicode code points), at least. */
  readonly minLength: number;
  /** Characters, at most; never below 64. */
  readonly maxLength: number;
  /** Refuse the passwords of the common-password list. */
  readonly refusesCommon: boolean;
}

export const DEFAULT_PASSWORD_POLICY: PasswordPolicy = { minLength: 12, maxLength: 128, refusesCommon: true };

/** The lowest maximum length a policy may set (`config.ts` refuses less). */
export const MIN_MAX_PASSWORD_LENGTH = 64;

let commonPasswords: Promise<ReadonlySet<string>> | undefined;

function loadCommonPasswords(): Promise<ReadonlySet<string>> {
  commonPasswords ??= import('@zxcvbn-ts/language-common').then(({ dictionary }) => {
    const list = (dictionary as Record<string, readonly (string | number)[]>)['passwords-common'] ?? [];
    return new Set(list.map((p) => String(p).toLowerCase()));
  });
  return commonPasswords;
}

/**
 * What is wrong with `password` under `policy`, in words that never repeat it; empty when it is
 * acceptable. `username` is the account's: a password containing it is refused.
 */
export async function findPasswordProblems(
  password: string,
  username: string,
  policy: PasswordPolicy,
): Promise<string[]> {
  const problems: string[] = [];
  const length = [...password].length;
  if (length < policy.minLength) problems.push(`it must be at least ${policy.minLength} characters long`);
  if (length > policy.maxLength) problems.push(`it must be at most ${policy.maxLength} characters long`);
  const bytes = Buffer.byteLength(password, 'utf8');
  if (bytes > MAX_PASSWORD_BYTES) {
    problems.push(`it must be at most ${MAX_PASSWORD_BYTES} bytes in UTF-8 (this one has ${bytes})`);
  }
  const lower = password.toLowerCase();
  if (username.length >= 3 && lower.includes(username.toLowerCase()))
    problems.push('it must not contain the username');
  if (length > 0 && new Set(password).size === 1) problems.push('it must not be one character repeated');
  if (policy.refusesCommon && (await loadCommonPasswords()).has(lower))
    problems.push('it is on the list of commonly used passwords');
  return problems;
}
