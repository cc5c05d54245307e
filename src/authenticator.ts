/**
 * What the HTTP layer needs of a Basic credential verifier: the guards, the failed-login brake and the
 * metrics call it through `AppDeps`, and the user module (`createAuthenticator`) provides it. Declared
 * here, beside `deps.ts` and below both src/http and the modules, so that neither depends on the other.
 */
export interface Principal {
  readonly userId: number;
  readonly username: string;
  /** Every RBAC item held, transitively. */
  readonly authItems: ReadonlySet<string>;
  /** The user's credential stamp when the principal was read (`findUserAccess`). */
  readonly credentialStamp: string;
  /** The RBAC items assigned to the user directly when the principal was read, sorted. */
  readonly assignedItems: readonly string[];
}

/** A credential verified recently: its principal and the username as the header presents it. */
export interface CachedLogin {
  readonly principal: Principal;
  /** The username of the header (the failed-login brake's key), which may differ in case from the account's. */
  readonly username: string;
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
   * cache, before the login is looked up and bcrypt runs; it may reject to refuse the attempt (the
   * failed-login brake).
   */
  verify(
    header: string | undefined,
    beforePasswordCheck?: (username: string) => void | Promise<void>,
  ): Promise<Verification>;
  /**
   * Verifies an `Authorization` header value without the cache and without sharing a check under way:
   * the password is checked and the principal read now (a sign-in that starts a session keeps the
   * principal's credential stamp, which must be the one of the password presented).
   */
  verifyNow(
    header: string,
    beforePasswordCheck?: (username: string) => void | Promise<void>,
  ): Promise<Verification>;
  /**
   * The login of a header verified recently, without waiting: the request hot path. The caller asks
   * the failed-login brake about its username first (`checkLoginThrottle`).
   */
  cached(header: string | undefined): CachedLogin | undefined;
  /** Forgets every cached verification (after a password change or a disabled account). */
  clear(): void;
  /** Password checks (bcrypt compares, real or dummy) run so far: what guessing costs, for metrics. */
  readonly passwordChecks: number;
}
