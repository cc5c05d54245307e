import { hash } from 'node:crypto';
import type { Kysely, RawBuilder } from 'kysely';
import { sql } from 'kysely';
import type { DB } from '../../db/schema.ts';

export interface LoginRow {
  /** The `user_authentication` row. */
  readonly loginId: number;
  readonly userId: number;
  readonly username: string;
  readonly passwordHash: string | null;
  readonly passwordSalt: string | null;
  readonly isActive: boolean;
}

export interface LoginLookupOptions {
  /**
   * `user.active` exists and must be 1 too (`SchemaProfile.hasUserActiveColumn`); OpenEyes keeps the
   * flag in `user_authentication` only.
   */
  readonly hasUserActiveColumn: boolean;
  /**
   * The username column in its case-insensitive form (`DialectAdapter.foldedKey`: `lower(username)`, or
   * on MySQL the column itself, so that its index serves); `lower()` when not given.
   */
  readonly foldedKey?: (column: string) => RawBuilder<string>;
}

const lowerKey = (column: string): RawBuilder<string> => sql<string>`lower(${sql.ref(column)})`;

/**
 * The login of `username`, matched case-insensitively like the original's MySQL collation. A local
 * account (no institution authentication) wins over institution-bound ones.
 */
export async function findLogin(
  db: Kysely<DB>,
  username: string,
  options: LoginLookupOptions = { hasUserActiveColumn: true },
): Promise<LoginRow | undefined> {
  const row = await db
    .selectFrom('user_authentication as ua')
    .innerJoin('user as u', 'u.id', 'ua.user_id')
    .select(['ua.id', 'ua.user_id', 'ua.username', 'ua.password_hash', 'ua.password_salt', 'ua.active'])
    .select((eb) => (options.hasUserActiveColumn ? eb.ref('u.active') : eb.lit(1)).as('user_active'))
    .where((eb) => eb((options.foldedKey ?? lowerKey)('ua.username'), '=', username.toLowerCase()))
    .orderBy((eb) => eb.case().when('ua.institution_authentication_id', 'is', null).then(0).else(1).end())
    .orderBy('ua.id')
    .limit(1)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return {
    loginId: row.id,
    userId: row.user_id,
    username: row.username,
    passwordHash: row.password_hash,
    // OpenEyes writes an empty salt for accounts without one (its special users, m200517).
    passwordSalt: row.password_salt === '' ? null : row.password_salt,
    isActive: row.active === 1 && row.user_active === 1,
  };
}

export interface UserAccess {
  /** Every RBAC item the user holds, directly or through the `authitemchild` hierarchy (transitive). */
  readonly authItems: Set<string>;
  /**
   * A digest of the user's passwords (every login's hash and salt): it changes with a password change,
   * wherever the change is made. A console session keeps the stamp it signed in with and ends when the
   * user's stamp moves.
   */
  readonly credentialStamp: string;
  /**
   * The RBAC items assigned to the user directly, sorted. A console session keeps those it signed in
   * with and ends when one of them is revoked (a grant leaves it running).
   */
  readonly assignedItems: readonly string[];
  /** The password hash of each login as read for the stamp, by `user_authentication.id`. */
  readonly passwordHashes: ReadonlyMap<number, string | null>;
}

/** The user's RBAC items and its credential stamp. */
export async function findUserAccess(db: Kysely<DB>, userId: number): Promise<UserAccess> {
  const logins = await db
    .selectFrom('user_authentication')
    .select(['id', 'password_hash', 'password_salt'])
    .where('user_id', '=', userId)
    .orderBy('id')
    .execute();
  const assigned = (
    await db.selectFrom('authassignment').select('itemname').where('userid', '=', String(userId)).execute()
  )
    .map((a) => a.itemname)
    .sort();
  const credentialStamp = hash(
    'sha256',
    JSON.stringify(logins.map((l) => [l.id, l.password_hash, l.password_salt])),
    'base64url',
  );
  return {
    authItems: await closureOf(db, assigned),
    credentialStamp,
    assignedItems: assigned,
    passwordHashes: new Map(logins.map((l) => [l.id, l.password_hash])),
  };
}

/** `assigned` and every item below them in the `authitemchild` hierarchy. */
async function closureOf(db: Kysely<DB>, assigned: readonly string[]): Promise<Set<string>> {
  const held = new Set(assigned);
  if (held.size === 0) return held;
  const edges = await db.selectFrom('authitemchild').select(['parent', 'child']).execute();
  const children = new Map<string, string[]>();
  for (const { parent, child } of edges) {
    const list = children.get(parent);
    if (list === undefined) children.set(parent, [child]);
    else list.push(child);
  }
  const pending = [...held];
  while (pending.length > 0) {
    for (const child of children.get(pending.pop()!) ?? []) {
      if (!held.has(child)) {
        held.add(child);
        pending.push(child);
      }
    }
  }
  return held;
}
