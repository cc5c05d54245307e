/**
 * The request's JSON rows as routines see them (reference 9.6 `bindTextObject` / `putText`): a text row is
 * read as a JSON object (or `{}`), written back as JSON, and `REQUEST_DATA` changes are shredded into
 * `request_details`, one name/value row per scalar key.
 */
import type { Kysely } from 'kysely';
import { formatDateTime } from '../../../db/database.ts';
import type { DB } from '../../../db/schema.ts';

function asObject(text: string | null | undefined): Record<string, unknown> {
  if (text === null || text === undefined || text === '') return {};
  try {
    const parsed: unknown = JSON.parse(text);
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : {};
  } catch {
    return {};
  }
}

/** The JSON object stored in the request's `mnemonic` row (body site null), or `{}`. */
export async function readRequestText(
  db: Kysely<DB>,
  requestId: number,
  mnemonic: string,
): Promise<Record<string, unknown>> {
  const row = await db
    .selectFrom('attachment_data')
    .select('text_data')
    .where('request_id', '=', requestId)
    .where('attachment_mnemonic', '=', mnemonic)
    .where('body_site_snomed_type', 'is', null)
    .executeTakeFirst();
  return asObject(row?.text_data);
}

/** Writes `value` as JSON into the request's `mnemonic` row, creating it (mime application/json) when missing. */
export async function writeRequestText(
  db: Kysely<DB>,
  requestId: number,
  mnemonic: string,
  value: Record<string, unknown>,
  now: Date,
): Promise<void> {
  const text = JSON.stringify(value);
  const stamp = formatDateTime(now);
  const result = await db
    .updateTable('attachment_data')
    .set({ text_data: text, last_modified_date: stamp })
    .where('request_id', '=', requestId)
    .where('attachment_mnemonic', '=', mnemonic)
    .where('body_site_snomed_type', 'is', null)
    .executeTakeFirst();
  if (Number(result.numUpdatedRows) > 0) return;
  await db
    .insertInto('attachment_data')
    .values({
      request_id: requestId,
      attachment_mnemonic: mnemonic,
      body_site_snomed_type: null,
      system_only_managed: 1,
      attachment_type: mnemonic === 'DICOM_HEADER' ? 'dicom_header' : 'NONE',
      mime_type: 'application/json',
      blob_data: null,
      text_data: text,
      upload_file_name: null,
      hash_code: null,
      created_date: stamp,
      last_modified_date: stamp,
    })
    .execute();
}

/** Shallow-merges `patch` into `REQUEST_DATA` and mirrors the changed scalar keys into `request_details`. */
export async function mergeRequestData(
  db: Kysely<DB>,
  requestId: number,
  patch: Record<string, unknown>,
  now: Date,
): Promise<void> {
  const current = await readRequestText(db, requestId, 'REQUEST_DATA');
  await writeRequestText(db, requestId, 'REQUEST_DATA', { ...current, ...patch }, now);
  const names = Object.keys(patch).filter((k) => k.length <= 100);
  if (names.length === 0) return;
  await db
    .deleteFrom('request_details')
    .where('request_id', '=', requestId)
    .where('name', 'in', names)
    .execute();
  const stamp = formatDateTime(now);
  const rows = names
    .filter((name) => patch[name] !== null && typeof patch[name] !== 'object')
    .map((name) => ({
      request_id: requestId,
      name,
      value: String(patch[name] as string | number | boolean),
      created_date: stamp,
      last_modified_date: stamp,
    }));
  if (rows.length > 0) await db.insertInto('request_details').values(rows).execute();
}
