/**
 * `console_session.credential_stamp`: the user's credential stamp when the session signed in (a digest
 * of its passwords and role assignments, `src/modules/user`). A session whose stamp no longer matches
 * the user's ends at its next request, so a password change or a revoked role ends the user's console
 * sessions in every process. Sessions from before this column have none and end likewise.
 */
import type { AnyDb } from './helpers.ts';

export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('console_session').addColumn('credential_stamp', 'varchar(64)').execute();
}
