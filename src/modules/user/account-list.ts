/**
 * Who has access, for `user list` and `role list`: every local or institution login with its account's
 * state, and the RBAC items each user holds, directly or through the `authitemchild` hierarchy.
 */
import type { Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';

export interface AccountSummary {
  readonly userId: number;
  readonly username: string;
  /** The login and its user are both active. */
  readonly isActive: boolean;
  /** RBAC items assigned directly, sorted. */
  readonly items: readonly string[];
  readonly passwordLastChangedDate: string | null;
  /** `last_successful_login_date` as stored (an OpenEyes import carries it). */
  readonly lastSuccessfulLoginDate: string | null;
}

/**
 * Every login, ordered by username. `hasUserActiveColumn` false: the database's `user` table has no
 * `active` (OpenEyes v6), so the login's own flag alone says whether it is active.
 */
export async function listAccounts(
  db: Kysely<DB>,
  options: { readonly hasUserActiveColumn: boolean } = { hasUserActiveColumn: true },
): Promise<AccountSummary[]> {
  const logins = await db
    .selectFrom('user_authentication as ua')
    .innerJoin('user as u', 'u.id', 'ua.user_id')
    .select([
      'ua.user_id',
      'ua.username',
      'ua.active',
      'ua.password_last_changed_date',
      'ua.last_successful_login_date',
    ])
    .$if(options.hasUserActiveColumn, (q) => q.select('u.active as user_active'))
    .orderBy('ua.username')
    .orderBy('ua.id')
    .execute();
  const assignments = await db.selectFrom('authassignment').select(['userid', 'itemname']).execute();
  const itemsOf = new Map<string, string[]>();
  for (const a of assignments) {
    // `userid` is Yii's varchar on the service's schema and an integer on OpenEyes (m131104).
    const key = String(a.userid);
    const list = itemsOf.get(key);
    if (list === undefined) itemsOf.set(key, [a.itemname]);
    else list.push(a.itemname);
  }
  return logins.map((l) => ({
    userId: l.user_id,
    username: l.username,
    isActive: l.active === 1 && (!options.hasUserActiveColumn || l.user_active === 1),
    items: [...(itemsOf.get(String(l.user_id)) ?? [])].sort(),
    passwordLastChangedDate: l.password_last_changed_date,
    lastSuccessfulLoginDate: l.last_successful_login_date,
  }));
}

export type AuthItemKind = 'operation' | 'task' | 'role';

export interface ItemHolder {
  readonly item: string;
  readonly kind: AuthItemKind;
  readonly userId: number;
  /** The item assigned to the user that gives this one (itself when assigned directly). */
  readonly through: string;
}

const KINDS: Readonly<Record<number, AuthItemKind>> = { 0: 'operation', 1: 'task', 2: 'role' };

/**
 * Every RBAC item (or only `item`) with the users who hold it, directly or through the hierarchy, ordered
 * by item. Items nobody holds are listed with no holder.
 */
export async function listItemHolders(
  db: Kysely<DB>,
  item?: string,
): Promise<{ item: string; kind: AuthItemKind; holders: ItemHolder[] }[]> {
  let itemQuery = db.selectFrom('authitem').select(['name', 'type']).orderBy('name');
  if (item !== undefined) itemQuery = itemQuery.where('name', '=', item);
  const items = await itemQuery.execute();
  const edges = await db.selectFrom('authitemchild').select(['parent', 'child']).execute();
  const assignments = await db.selectFrom('authassignment').select(['userid', 'itemname']).execute();
  const children = new Map<string, string[]>();
  for (const { parent, child } of edges) children.set(parent, [...(children.get(parent) ?? []), child]);
  // item -> holders, by walking down from each assignment.
  const holders = new Map<string, ItemHolder[]>();
  const kindOf = new Map(items.map((i) => [i.name, KINDS[i.type] ?? 'operation']));
  for (const a of assignments) {
    const userId = Number(a.userid);
    if (!Number.isSafeInteger(userId)) continue;
    const seen = new Set<string>();
    const pending = [a.itemname];
    while (pending.length > 0) {
      const name = pending.pop()!;
      if (seen.has(name)) continue;
      seen.add(name);
      const kind = kindOf.get(name);
      if (kind !== undefined) {
        const list = holders.get(name) ?? [];
        list.push({ item: name, kind, userId, through: a.itemname });
        holders.set(name, list);
      }
      pending.push(...(children.get(name) ?? []));
    }
  }
  return items.map((i) => {
    // One line per user: the direct assignment when there is one, else the first item that gives it.
    const byUser = new Map<number, ItemHolder>();
    for (const h of holders.get(i.name) ?? []) {
      const known = byUser.get(h.userId);
      if (known === undefined || (h.through === h.item && known.through !== known.item))
        byUser.set(h.userId, h);
    }
    return {
      item: i.name,
      kind: kindOf.get(i.name)!,
      holders: [...byUser.values()].sort((x, y) => x.userId - y.userId),
    };
  });
}

/**
 * The roles (`authitem` type 2) that give any of `items`, being one of them or above one in the
 * `authitemchild` hierarchy, sorted by name: who may be given a screen on this database.
 */
export async function findRolesGranting(db: Kysely<DB>, items: readonly string[]): Promise<string[]> {
  if (items.length === 0) return [];
  const edges = await db.selectFrom('authitemchild').select(['parent', 'child']).execute();
  const parentsOf = new Map<string, string[]>();
  for (const { parent, child } of edges) parentsOf.set(child, [...(parentsOf.get(child) ?? []), parent]);
  const reached = new Set(items);
  const pending = [...items];
  while (pending.length > 0) {
    for (const parent of parentsOf.get(pending.pop()!) ?? []) {
      if (!reached.has(parent)) {
        reached.add(parent);
        pending.push(parent);
      }
    }
  }
  const roles = await db
    .selectFrom('authitem')
    .select('name')
    .where('type', '=', 2)
    .where('name', 'in', [...reached])
    .orderBy('name')
    .execute();
  return roles.map((r) => r.name);
}
