/**
 * `REQUEST_DATA` as routines change it (as the Java processor's `putText` does): the engine shallow-merges a
 * patch into the request's JSON row (attachment-data owns the row), and its changed scalar keys are shredded
 * into `request_details`, one name/value row per key.
 */
import type { Kysely, QueryCreator } from 'kysely';
import type { Database } from '../../../db/database.ts';
import type { DB } from '../../../db/schema.ts';
import type { AuditStamp } from '../../attachment-data/index.ts';

/**
 * Mirrors the scalar keys of a `REQUEST_DATA` patch into `request_details` (replacing their old rows): one
 * statement where the engine runs writes inside WITH, a delete and an insert elsewhere; where the schema
 * versions its rows (OpenEyes), the replaced rows' versions are kept first.
 */
export async function mirrorRequestDetails(
  trx: Kysely<DB>,
  database: Pick<Database, 'dialect' | 'schema'>,
  requestId: number,
  patch: Record<string, unknown>,
  stamp: AuditStamp,
): Promise<void> {
  const names = Object.keys(patch).filter((k) => k.length <= 100);
  if (names.length === 0) return;
  const rows = names
    .filter((name) => patch[name] !== null && typeof patch[name] !== 'object')
    .map((name) => ({
      request_id: requestId,
      name,
      value: String(patch[name] as string | number | boolean),
      created_user_id: stamp.userId,
      last_modified_user_id: stamp.userId,
      created_date: stamp.now,
      last_modified_date: stamp.now,
    }));
  const deleteOld = (db: QueryCreator<DB>) =>
    db.deleteFrom('request_details').where('request_id', '=', requestId).where('name', 'in', names);
  if (database.schema.keepsRowVersions) {
    // A versioned table (OpenEyes): the rows' last versions are kept before they go.
    const replaced = await trx
      .selectFrom('request_details')
      .select('id')
      .where('request_id', '=', requestId)
      .where('name', 'in', names)
      .execute();
    const ids = replaced.map((r) => r.id);
    await database.schema.keepRowVersions(trx, 'request_details', ids);
    if (ids.length > 0) await trx.deleteFrom('request_details').where('id', 'in', ids).execute();
    if (rows.length > 0) await trx.insertInto('request_details').values(rows).execute();
    return;
  }
  if (rows.length > 0 && database.dialect.hasWritableCte) {
    // The insert does not see the deleted rows (one snapshot), and has no key they could collide on.
    await trx
      .with('old_details', (db) => deleteOld(db))
      .insertInto('request_details')
      .values(rows)
      .execute();
    return;
  }
  await deleteOld(trx).execute();
  if (rows.length > 0) await trx.insertInto('request_details').values(rows).execute();
}
