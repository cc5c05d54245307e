/**
 * Two columns of `audit_event`:
 * - `username`: the acting account's name beside its id, so that a row reads without a join and still
 *   names the account after the user row is gone. For an API call, the authenticated username; for an
 *   operator's CLI command, the operating-system account that ran it (`user_id` is then null).
 * - `detail`: short words that the ids cannot say, for example the RBAC item of a `role.grant` or that a
 *   429 was the first refusal of its minute. Never patient data.
 * Adding columns is allowed by the append-only triggers (they refuse UPDATE, DELETE and TRUNCATE only).
 */
import type { AnyDb } from './helpers.ts';

export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('audit_event').addColumn('username', 'varchar(64)').execute();
  await db.schema.alterTable('audit_event').addColumn('detail', 'varchar(255)').execute();
}
