/**
 * `REQUEST_DATA` as routines change it (reference 9.6): a shallow merge into the request's JSON row
 * (attachment-data owns the row), and its changed scalar keys shredded into `request_details`, one
 * name/value row per key.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../../../db/database.ts';
import type { DB } from '../../../db/schema.ts';
import type { AuditStamp } from '../../attachment-data/index.ts';
import { readRequestText, writeRequestText } from '../../attachment-data/index.ts';

/** Shallow-merges `patch` into `REQUEST_DATA` and mirrors the changed scalar keys into `request_details`. */
export async function mergeRequestData(
  trx: Kysely<DB>,
  database: Pick<Database, 'dialect' | 'schema'>,
  requestId: number,
  patch: Record<string, unknown>,
  stamp: AuditStamp,
): Promise<void> {
  const current = await readRequestText(trx, requestId, 'REQUEST_DATA');
  await writeRequestText(trx, database.dialect, requestId, 'REQUEST_DATA', { ...current, ...patch }, stamp);
  const names = Object.keys(patch).filter((k) => k.length <= 100);
  if (names.length === 0) return;
  const replaced = await trx
    .selectFrom('request_details')
    .select('id')
    .where('request_id', '=', requestId)
    .where('name', 'in', names)
    .execute();
  if (replaced.length > 0) {
    const ids = replaced.map((r) => r.id);
    // A versioned table (OpenEyes): the rows' last versions are kept before they go.
    await database.schema.keepRowVersions(trx, 'request_details', ids);
    await trx.deleteFrom('request_details').where('id', 'in', ids).execute();
  }
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
  if (rows.length > 0) await trx.insertInto('request_details').values(rows).execute();
}
