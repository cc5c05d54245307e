/**
 * The request's JSON rows (as the Java processor's `bindTextObject` / `putText`): a text row is read as a
 * JSON object (or `{}`) and written back as JSON.
 */
import type { ExpressionBuilder, Kysely } from 'kysely';
import type { DialectAdapter } from '../../db/dialect.ts';
import type { DB } from '../../db/schema.ts';
import type { AuditStamp } from './attachment-data.ts';
import { insertAttachmentData, updateAttachmentData } from './attachment-data.ts';

/**
 * The request text rows of `mnemonic` of the requests `ids`: the rows without a body site (the per-eye
 * rows of a device share the mnemonic).
 */
function isRequestText(
  eb: ExpressionBuilder<DB, 'attachment_data'>,
  ids: number | readonly number[],
  mnemonic: string,
) {
  return eb.and([
    typeof ids === 'number' ? eb('request_id', '=', ids) : eb('request_id', 'in', ids),
    eb('attachment_mnemonic', '=', mnemonic),
    eb('body_site_snomed_type', 'is', null),
  ]);
}

/** The JSON object in `text`, or `{}` (no text, not JSON, or not an object). */
export function jsonObjectOf(text: string | null | undefined): Record<string, unknown> {
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
    .where((eb) => isRequestText(eb, requestId, mnemonic))
    .executeTakeFirst();
  return jsonObjectOf(row?.text_data);
}

/**
 * Writes `value` as JSON into the request's `mnemonic` row, creating it when missing (mime
 * `application/json`, system-managed, attachment type `dicom_header` for `DICOM_HEADER`, no hash).
 */
export async function writeRequestText(
  trx: Kysely<DB>,
  dialect: DialectAdapter,
  requestId: number,
  mnemonic: string,
  value: Record<string, unknown>,
  stamp: AuditStamp,
): Promise<void> {
  const text = JSON.stringify(value);
  const updated = await updateAttachmentData(
    trx,
    dialect,
    { requestId, mnemonic },
    { textData: text },
    stamp,
  );
  if (updated > 0) return;
  await insertAttachmentData(
    trx,
    [
      {
        requestId,
        mnemonic,
        mimeType: 'application/json',
        textData: text,
        hashCode: null,
        systemOnlyManaged: 1,
        attachmentType: mnemonic === 'DICOM_HEADER' ? 'dicom_header' : 'NONE',
      },
    ],
    stamp,
  );
}

/**
 * {@link writeRequestText} of several requests' `mnemonic` rows in one update (a CASE on the request id
 * gives each its JSON), stamped alike; rows found missing are then created as `writeRequestText` would.
 */
export async function writeRequestTexts(
  trx: Kysely<DB>,
  dialect: DialectAdapter,
  mnemonic: string,
  values: readonly { readonly requestId: number; readonly value: Record<string, unknown> }[],
  stamp: AuditStamp,
): Promise<void> {
  if (values.length === 0) return;
  if (values.length === 1) {
    const [only] = values;
    await writeRequestText(trx, dialect, only!.requestId, mnemonic, only!.value, stamp);
    return;
  }
  const texts = new Map(values.map((v) => [v.requestId, JSON.stringify(v.value)]));
  const ids = [...texts.keys()];
  const result = await trx
    .updateTable('attachment_data')
    .set((eb) => {
      let text = eb.case('request_id').when(ids[0]!).then(texts.get(ids[0]!)!);
      for (const id of ids.slice(1)) text = text.when(id).then(texts.get(id)!);
      return {
        text_data: text.end(),
        last_modified_user_id: stamp.userId,
        last_modified_date: dialect.nextModifiedDate('last_modified_date', stamp.now),
      };
    })
    .where((eb) => isRequestText(eb, ids, mnemonic))
    .executeTakeFirst();
  if (Number(result.numUpdatedRows) >= ids.length) return;
  const found = await trx
    .selectFrom('attachment_data')
    .select('request_id')
    .where((eb) => isRequestText(eb, ids, mnemonic))
    .execute();
  const present = new Set(found.map((r) => r.request_id));
  await insertAttachmentData(
    trx,
    ids
      .filter((id) => !present.has(id))
      .map((requestId) => ({
        requestId,
        mnemonic,
        mimeType: 'application/json',
        textData: texts.get(requestId)!,
        hashCode: null,
        systemOnlyManaged: 1 as const,
        attachmentType: mnemonic === 'DICOM_HEADER' ? 'dicom_header' : 'NONE',
      })),
    stamp,
  );
}
