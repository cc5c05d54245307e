import type { Kysely, RawBuilder } from 'kysely';
import { sql } from 'kysely';
import type { DB } from '../../db/schema.ts';

export interface LoginRow {
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
    .select(['ua.user_id', 'ua.username', 'ua.password_hash', 'ua.password_salt', 'ua.active'])
    .select((eb) => (options.hasUserActiveColumn ? eb.ref('u.active') : eb.lit(1)).as('user_active'))
    .where((eb) => eb((options.foldedKey ?? lowerKey)('ua.username'), '=', username.toLowerCase()))
    .orderBy((eb) => eb.case().when('ua.institution_authentication_id', 'is', null).then(0).else(1).end())
    .orderBy('ua.id')
    .limit(1)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return {
    userId: row.user_id,
    username: row.username,
    passwordHash: row.password_hash,
    // OpenEyes writes an empty salt for accounts without one (its special users, m200517).
    passwordSalt: row.password_salt === '' ? null : row.password_salt,
    isActive: row.active === 1 && row.user_active === 1,
  };
}

/** Every RBAC item the user holds, directly or through the `authitemchild` hierarchy (transitive). */
export async function findUserAuthItems(db: Kysely<DB>, userId: number): Promise<Set<string>> {
  const assigned = await db
    .selectFrom('authassignment')
    .select('itemname')
    .where('userid', '=', String(userId))
    .execute();
  const held = new Set(assigned.map((a) => a.itemname));
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
