/**
 * Reads of the user tables for callers that already know who someone is: a console session re-checks
 * its user on every request (a disabled account, a changed password or a changed role takes effect at
 * once), and the audit screen shows usernames for user ids and finds user ids by username.
 */
import type { Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { Principal } from './authenticator.ts';
import type { LoginLookupOptions } from './user.queries.ts';
import { findUserAccess } from './user.queries.ts';

/**
 * The principal of user `userId` when the user and one of its logins are active (a local login first,
 * as `findLogin` prefers), with every RBAC item it holds and its credential stamp; undefined otherwise.
 */
export async function findActivePrincipal(
  db: Kysely<DB>,
  userId: number,
  options: LoginLookupOptions = { hasUserActiveColumn: true },
): Promise<Principal | undefined> {
  let query = db
    .selectFrom('user_authentication as ua')
    .innerJoin('user as u', 'u.id', 'ua.user_id')
    .select(['ua.username'])
    .where('ua.user_id', '=', userId)
    .where('ua.active', '=', 1);
  if (options.hasUserActiveColumn) query = query.where('u.active', '=', 1);
  const login = await query
    .orderBy((eb) => eb.case().when('ua.institution_authentication_id', 'is', null).then(0).else(1).end())
    .orderBy('ua.id')
    .limit(1)
    .executeTakeFirst();
  if (login === undefined) return undefined;
  const access = await findUserAccess(db, userId);
  return {
    userId,
    username: login.username,
    authItems: access.authItems,
    credentialStamp: access.credentialStamp,
    assignedItems: access.assignedItems,
  };
}

/** Usernames of `userIds` (the first login of each), by user id; unknown ids are left out. */
export async function findUsernames(
  db: Kysely<DB>,
  userIds: readonly number[],
): Promise<Map<number, string>> {
  const names = new Map<number, string>();
  if (userIds.length === 0) return names;
  const rows = await db
    .selectFrom('user_authentication')
    .select(['user_id', 'username'])
    .where('user_id', 'in', [...new Set(userIds)])
    .orderBy('id')
    .execute();
  for (const row of rows) if (!names.has(row.user_id)) names.set(row.user_id, row.username);
  return names;
}

/** User ids whose login is `username`, compared case-insensitively like logins are. */
export async function findUserIdsByUsername(db: Kysely<DB>, username: string): Promise<number[]> {
  const rows = await db
    .selectFrom('user_authentication')
    .select('user_id')
    .distinct()
    .where((eb) => eb(eb.fn('lower', ['username']), '=', username.toLowerCase()))
    .execute();
  return rows.map((row) => row.user_id);
}
