/**
 * Account administration used by the CLI and the test factories: users with a local
 * `user_authentication` row, and RBAC assignments. A change that takes rights away (disabling a user,
 * changing a password, revoking a role) records a credential change in the same transaction, so that
 * every server process forgets the credentials it has cached within seconds (authenticator.ts). A
 * password or role change also moves the user's credential stamp (`findUserAccess`), which ends the
 * user's console sessions.
 */
import type { Kysely } from 'kysely';
import { nowDateTime } from '../../db/database.ts';
import type { DB } from '../../db/schema.ts';
import { AppError } from '../../errors.ts';
import type { PasswordPolicy } from './password-policy.ts';
import { findPasswordProblems } from './password-policy.ts';
import { recordCredentialChange } from '../../db/counters.queries.ts';
import { hashPassword } from './passwords.ts';

export interface NewAccount {
  readonly username: string;
  readonly password: string;
  readonly firstName?: string;
  readonly lastName?: string;
  /** RBAC items to assign, for example `API access` or `OprnApi`. */
  readonly roles?: readonly string[];
  /** Refuse a password this policy does not accept (passwords an operator sets); none: any non-empty one. */
  readonly passwordPolicy?: PasswordPolicy;
}

/** Refuses (400) a password that `policy` does not accept, saying why without repeating it. */
async function checkPolicy(password: string, username: string, policy: PasswordPolicy | undefined) {
  if (policy === undefined) return;
  const problems = await findPasswordProblems(password, username, policy);
  if (problems.length > 0) throw new AppError('bad_request', `Password refused: ${problems.join('; ')}`);
}

const USERNAME = /^[\w.@-]{1,40}$/;

/** Creates a user and its local login; returns the user id. */
export async function createAccount(db: Kysely<DB>, account: NewAccount): Promise<number> {
  if (!USERNAME.test(account.username)) {
    throw new AppError('bad_request', 'Username must be 1 to 40 letters, digits, dots, @, _ or -');
  }
  if (account.password.length === 0) throw new AppError('bad_request', 'Password must not be empty');
  await checkPolicy(account.password, account.username, account.passwordPolicy);
  const hash = await hashPassword(account.password);
  return db.transaction().execute(async (trx) => {
    const existing = await trx
      .selectFrom('user_authentication')
      .select('id')
      .where((eb) => eb(eb.fn('lower', ['username']), '=', account.username.toLowerCase()))
      .executeTakeFirst();
    if (existing !== undefined) throw new AppError('bad_request', `User ${account.username} already exists`);
    const now = nowDateTime();
    const user = await trx
      .insertInto('user')
      .values({
        first_name: account.firstName ?? account.username,
        last_name: account.lastName ?? '',
        created_date: now,
        last_modified_date: now,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    await trx
      .insertInto('user_authentication')
      .values({
        user_id: user.id,
        username: account.username,
        password_hash: hash,
        password_last_changed_date: now,
        created_date: now,
        last_modified_date: now,
      })
      .execute();
    for (const role of account.roles ?? []) await assignItem(trx, user.id, role);
    return user.id;
  });
}

async function findUserId(db: Kysely<DB>, username: string): Promise<number> {
  const row = await db
    .selectFrom('user_authentication')
    .select('user_id')
    .where((eb) => eb(eb.fn('lower', ['username']), '=', username.toLowerCase()))
    .executeTakeFirst();
  if (row === undefined) throw new AppError('not_found', `No user named ${username}`);
  return row.user_id;
}

export async function setPassword(
  db: Kysely<DB>,
  username: string,
  password: string,
  options: { readonly passwordPolicy?: PasswordPolicy } = {},
): Promise<void> {
  if (password.length === 0) throw new AppError('bad_request', 'Password must not be empty');
  const userId = await findUserId(db, username);
  await checkPolicy(password, username, options.passwordPolicy);
  const hash = await hashPassword(password);
  const now = nowDateTime();
  await db.transaction().execute(async (trx) => {
    await trx
      .updateTable('user_authentication')
      .set({
        password_hash: hash,
        password_salt: null,
        password_last_changed_date: now,
        last_modified_date: now,
      })
      .where('user_id', '=', userId)
      .execute();
    await recordCredentialChange(trx);
  });
}

export async function setAccountActive(db: Kysely<DB>, username: string, isActive: boolean): Promise<void> {
  const userId = await findUserId(db, username);
  const now = nowDateTime();
  await db.transaction().execute(async (trx) => {
    await trx
      .updateTable('user_authentication')
      .set({ active: isActive ? 1 : 0, last_modified_date: now })
      .where('user_id', '=', userId)
      .execute();
    await trx
      .updateTable('user')
      .set({ active: isActive ? 1 : 0, last_modified_date: now })
      .where('id', '=', userId)
      .execute();
    if (!isActive) await recordCredentialChange(trx);
  });
}

/** True when at least one active local login exists (a new database has none, only the system user). */
export async function hasActiveLogin(db: Kysely<DB>): Promise<boolean> {
  const row = await db
    .selectFrom('user_authentication')
    .select('id')
    .where('active', '=', 1)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

async function assignItem(db: Kysely<DB>, userId: number, item: string): Promise<void> {
  const known = await db.selectFrom('authitem').select('name').where('name', '=', item).executeTakeFirst();
  if (known === undefined) throw new AppError('bad_request', `Unknown role or operation: ${item}`);
  const held = await db
    .selectFrom('authassignment')
    .select('itemname')
    .where('itemname', '=', item)
    .where('userid', '=', String(userId))
    .executeTakeFirst();
  if (held !== undefined) return;
  await db
    .insertInto('authassignment')
    .values({ itemname: item, userid: String(userId), bizrule: null, data: null })
    .execute();
}

export async function grantRole(db: Kysely<DB>, username: string, item: string): Promise<void> {
  await assignItem(db, await findUserId(db, username), item);
}

export async function revokeRole(db: Kysely<DB>, username: string, item: string): Promise<void> {
  const userId = await findUserId(db, username);
  await db.transaction().execute(async (trx) => {
    await trx
      .deleteFrom('authassignment')
      .where('itemname', '=', item)
      .where('userid', '=', String(userId))
      .execute();
    await recordCredentialChange(trx);
  });
}
