/**
 * `REQUEST_DATA` as routines change it (as the Java processor's `putText` does): the engine shallow-merges a
 * patch into the request's JSON row (attachment-data owns the row), and its changed scalar keys are shredded
 * into `request_details`, one name/value row per key. A batch shreds the patches of its successful
 * routines together when it records them ({@link mirrorRequestDetailsMany}).
 */
import type { DeleteQueryBuilder, DeleteResult, Insertable, Kysely, QueryCreator } from 'kysely';
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
  await replaceDetails(trx, database.dialect, deleteOld, rows);
}

/**
 * Deletes the rows `deleteOld` selects and inserts `rows`: in one statement where the engine runs writes
 * inside WITH (the insert does not see the deleted rows, one snapshot, and has no key they could collide
 * on), else a delete then an insert.
 */
async function replaceDetails(
  trx: Kysely<DB>,
  dialect: Database['dialect'],
  deleteOld: (db: QueryCreator<DB>) => DeleteQueryBuilder<DB, 'request_details', DeleteResult>,
  rows: readonly Insertable<DB['request_details']>[],
): Promise<void> {
  if (rows.length > 0 && dialect.hasWritableCte) {
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

/** A `REQUEST_DATA` patch of one request, with the stamp of its writes. */
export interface RequestDetailsPatch {
  readonly requestId: number;
  readonly patch: Record<string, unknown>;
  readonly stamp: AuditStamp;
}

/**
 * {@link mirrorRequestDetails} of each of `patches` in turn, in one statement for all of them where the
 * engine runs writes inside WITH (a delete and an insert elsewhere): the patches of one request are folded
 * first (a later value of a key replaces an earlier one). A schema that versions its rows (OpenEyes) has
 * each patch mirrored on its own.
 */
export async function mirrorRequestDetailsMany(
  trx: Kysely<DB>,
  database: Pick<Database, 'dialect' | 'schema'>,
  patches: readonly RequestDetailsPatch[],
): Promise<void> {
  if (patches.length === 0) return;
  if (database.schema.keepsRowVersions || patches.length === 1) {
    for (const p of patches) await mirrorRequestDetails(trx, database, p.requestId, p.patch, p.stamp);
    return;
  }
  // Per request, each key's last value (in the order a row per patch would have been written).
  const byRequest = new Map<number, Map<string, { value: unknown; isRow: boolean; stamp: AuditStamp }>>();
  for (const { requestId, patch, stamp } of patches) {
    let keys = byRequest.get(requestId);
    if (keys === undefined) {
      keys = new Map();
      byRequest.set(requestId, keys);
    }
    for (const name of Object.keys(patch).filter((k) => k.length <= 100)) {
      const value = patch[name];
      keys.delete(name);
      keys.set(name, { value, isRow: value !== null && typeof value !== 'object', stamp });
    }
  }
  const targets = [...byRequest].filter(([, keys]) => keys.size > 0);
  if (targets.length === 0) return;
  const rows = targets.flatMap(([requestId, keys]) =>
    [...keys]
      .filter(([, key]) => key.isRow)
      .map(([name, { value, stamp }]) => ({
        request_id: requestId,
        name,
        value: String(value as string | number | boolean),
        created_user_id: stamp.userId,
        last_modified_user_id: stamp.userId,
        created_date: stamp.now,
        last_modified_date: stamp.now,
      })),
  );
  const deleteOld = (db: QueryCreator<DB>) =>
    db
      .deleteFrom('request_details')
      .where((eb) =>
        eb.or(
          targets.map(([requestId, keys]) =>
            eb.and([eb('request_id', '=', requestId), eb('name', 'in', [...keys.keys()])]),
          ),
        ),
      );
  await replaceDetails(trx, database.dialect, deleteOld, rows);
}
