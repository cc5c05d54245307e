/**
 * `cra_console_session.credential_stamp` on an OpenEyes database: the own schema's migration 0015 (the
 * user's credential stamp and assigned RBAC items at sign-in; a session whose stamp no longer matches,
 * or one of whose items is revoked, ends).
 */
import type { AnyDb } from '../../migrations/helpers.ts';

export async function up(db: AnyDb): Promise<void> {
  await db.schema.alterTable('cra_console_session').addColumn('credential_stamp', 'varchar(64)').execute();
  await db.schema.alterTable('cra_console_session').addColumn('signed_in_items', 'text').execute();
}
