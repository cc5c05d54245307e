/**
 * `console_session.credential_stamp`: the user's credential stamp when the session signed in (a digest
 * of its passwords, `src/modules/user`), and `signed_in_items`: the RBAC items assigned to it then (a
 * JSON array). A session whose stamp no longer matches the user's, or one of whose items is no longer
 * assigned, ends at its next request, so a password change or a revoked role ends the user's console
 * sessions in every process. Sessions from before these columns have neither and end likewise.
 */
import type { AnyDb } from './helpers.ts';

export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('console_session').addColumn('credential_stamp', 'varchar(64)').execute();
  await db.schema.alterTable('console_session').addColumn('signed_in_items', 'text').execute();
}
