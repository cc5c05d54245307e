/**
 * Which of a request's `attachment_data` rows are payloads (the files and bodies the caller sent), their
 * bytes, and what a routine reads of its request at once.
 */
import type { Expression, Kysely, SqlBool } from 'kysely';
import { sql } from 'kysely';
import type { DialectAdapter } from '../../db/dialect.ts';
import type { DB } from '../../db/schema.ts';
import { jsonObjectOf } from './text-rows.ts';

/** Rows written by intake or by routines that describe the request rather than carry its content. */
export const NON_PAYLOAD_MNEMONICS = [
  'REQUEST_DATA',
  'FORM_DATA',
  'HEADER_DATA',
  'DICOM_HEADER',
  'DICOM_STUDY',
] as const;

export interface PayloadRow {
  readonly id: number;
  readonly attachment_mnemonic: string;
  readonly mime_type: string;
  readonly hash_code: number | null;
  /** It has its thumbnails (made by MAKE_THUMBNAILS, or extracted with its image). */
  readonly hasThumbnails: boolean;
}

/** What a routine reads of its request at once: the JSON objects of some of its rows, and its payload rows. */
export interface RequestContent {
  /** The JSON object of each mnemonic asked for (body site null), `{}` when missing or not an object. */
  readonly texts: Record<string, Record<string, unknown>>;
  /** The payload rows (content present, not a describing row), by id. */
  readonly payloads: PayloadRow[];
}

/**
 * The request's payload rows and the JSON objects of its rows `textMnemonics`, in one read of the
 * request's rows (their flags; the text of the rows asked for only, never a blob). With `dialect`, the
 * statement runs prepared (planned once per connection).
 */
export async function readRequestContent(
  db: Kysely<DB>,
  requestId: number,
  textMnemonics: readonly string[] = [],
  dialect?: DialectAdapter,
): Promise<RequestContent> {
  const wanted = [...new Set(textMnemonics)];
  const query = contentQuery(db, wanted).where('request_id', '=', requestId).orderBy('id');
  const rows =
    dialect === undefined ? await query.execute() : (await dialect.runPreparedOn(db, query.compile())).rows;
  return contentOf(rows, wanted);
}

/**
 * {@link readRequestContent} of several requests in one read: each request's content, by request id
 * (every id of `requestIds` has one).
 */
export async function readRequestContents(
  db: Kysely<DB>,
  requestIds: readonly number[],
  textMnemonics: readonly string[] = [],
  dialect?: DialectAdapter,
): Promise<Map<number, RequestContent>> {
  const wanted = [...new Set(textMnemonics)];
  const ids = [...new Set(requestIds)];
  if (ids.length === 0) return new Map();
  const query = contentQuery(db, wanted)
    .select('request_id')
    .where('request_id', 'in', ids)
    .orderBy('request_id')
    .orderBy('id');
  const rows =
    dialect === undefined ? await query.execute() : (await dialect.runPreparedOn(db, query.compile())).rows;
  const byRequest = new Map<number, typeof rows>(ids.map((id) => [id, []]));
  for (const row of rows) byRequest.get(row.request_id)?.push(row);
  return new Map(ids.map((id) => [id, contentOf(byRequest.get(id)!, wanted)]));
}

/** The select of {@link readRequestContent}, without its request condition and order. */
function contentQuery(db: Kysely<DB>, wanted: readonly string[]) {
  const flag = (condition: Expression<SqlBool>) => sql<number>`case when ${condition} then 1 else 0 end`;
  return db
    .selectFrom('attachment_data')
    .select(['id', 'attachment_mnemonic', 'mime_type', 'hash_code', 'system_only_managed'])
    .select((eb) => [
      flag(eb('thumbnail_small_blob', 'is not', null)).as('has_thumbnails'),
      flag(eb.or([eb('blob_data', 'is not', null), eb('text_data', 'is not', null)])).as('has_content'),
      flag(eb('body_site_snomed_type', 'is', null)).as('is_unsited'),
      (wanted.length === 0
        ? sql<string | null>`null`
        : sql<
            string | null
          >`case when ${eb('attachment_mnemonic', 'in', wanted)} then ${eb.ref('text_data')} end`
      ).as('text'),
    ]);
}

interface ContentRow {
  readonly id: number;
  readonly attachment_mnemonic: string;
  readonly mime_type: string;
  readonly hash_code: number | null;
  readonly system_only_managed: number;
  readonly has_thumbnails: number;
  readonly has_content: number;
  readonly is_unsited: number;
  readonly text: string | null;
}

/** One request's content from its rows (in id order). */
function contentOf(rows: readonly ContentRow[], wanted: readonly string[]): RequestContent {
  const texts: Record<string, Record<string, unknown>> = Object.fromEntries(wanted.map((m) => [m, {}]));
  const seen = new Set<string>();
  const payloads: PayloadRow[] = [];
  for (const row of rows) {
    const mnemonic = row.attachment_mnemonic;
    // The first unsited row of a mnemonic, as a read of that one row finds (there is one per request).
    if (wanted.includes(mnemonic) && Number(row.is_unsited) === 1 && !seen.has(mnemonic)) {
      seen.add(mnemonic);
      texts[mnemonic] = jsonObjectOf(row.text);
    }
    const isPayload =
      !(NON_PAYLOAD_MNEMONICS as readonly string[]).includes(mnemonic) &&
      row.system_only_managed === 0 &&
      Number(row.has_content) === 1;
    if (isPayload) {
      payloads.push({
        id: row.id,
        attachment_mnemonic: mnemonic,
        mime_type: row.mime_type,
        hash_code: row.hash_code,
        hasThumbnails: Number(row.has_thumbnails) === 1,
      });
    }
  }
  return { texts, payloads };
}

/** The request's payload rows (content present, not a describing row), by id. */
export async function findPayloads(db: Kysely<DB>, requestId: number): Promise<PayloadRow[]> {
  return (await readRequestContent(db, requestId)).payloads;
}

/** The request's DICOM payload: the first `application/dicom` payload, else its `REQUEST_BLOB`. */
export async function findDicomPayload(db: Kysely<DB>, requestId: number): Promise<PayloadRow | undefined> {
  const payloads = await findPayloads(db, requestId);
  return (
    payloads.find((p) => p.mime_type === 'application/dicom') ??
    payloads.find((p) => p.attachment_mnemonic === 'REQUEST_BLOB')
  );
}

/** The bytes of a payload row: its blob, or its text as UTF-8. */
export async function readPayloadBytes(db: Kysely<DB>, id: number): Promise<Buffer> {
  const row = await db
    .selectFrom('attachment_data')
    .select(['blob_data', 'text_data'])
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
  return row.blob_data ?? Buffer.from(row.text_data ?? '', 'utf8');
}

export function isImageMime(mime: string): boolean {
  return /^image\/(jpe?g|png|gif|webp|tiff|bmp)$/i.test(mime);
}
