export type {
  Authenticator,
  AuthenticatorOptions,
  CachedLogin,
  Principal,
  Verification,
} from './authenticator.ts';
export { createAuthenticator, parseBasicHeader } from './authenticator.ts';
export type { NewAccount } from './accounts.ts';
export {
  createAccount,
  grantRole,
  hasActiveLogin,
  revokeRole,
  setAccountActive,
  setPassword,
} from './accounts.ts';
export {
  MAX_PASSWORD_BYTES,
  checkPasswordLength,
  hashPassword,
  isBcryptHash,
  verifyPassword,
} from './passwords.ts';
export { findRolesGranting } from './account-list.ts';
export { findActivePrincipal, findUserIdsByUsername, findUsernames } from './user-directory.ts';
export type { PasswordPolicy } from './password-policy.ts';
export { DEFAULT_PASSWORD_POLICY, MIN_MAX_PASSWORD_LENGTH, findPasswordProblems } from './password-policy.ts';
export type { RequestReader } from './request-access.ts';
export { REQUEST_ADMIN_OPERATION, mayReadRequest, requestReaderOf } from './request-access.ts';
