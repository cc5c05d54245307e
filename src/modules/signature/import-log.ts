/**
 * The signature import log viewer's reads and status changes (OpenEyes's `signature_import_log` viewer): the
 * filtered list, one row with its stored original capture, and the admin statuses 5 Manual and 6 Manual
 * Ignore. Only failed rows (status 3) move to 5 or 6, and only when they are still failed when the change is
 * made.
 */
import path from 'node:path';
import type { Kysely } from 'kysely';
import type { Database } from '../../db/database.ts';
import type { DB } from '../../db/schema.ts';
import { formatDateTime } from '../../db/stored-time.ts';
import { scanPage } from '../../db/window-scan.ts';
import type { FileStore } from '../../files/file-store.ts';
import { importLogAuditDates } from './signature.queries.ts';

export const IMPORT_LOG_STATUS = { failed: 3, success: 4, manual: 5, manualIgnore: 6 } as const;
export type ImportLogStatusId = (typeof IMPORT_LOG_STATUS)[keyof typeof IMPORT_LOG_STATUS];

/** The OpenEyes status names; anything else shows as "N/A", as in its log viewer. */
export function importLogStatusName(statusId: number): string {
  switch (statusId) {
    case 3:
      return 'Failed';
    case 4:
      return 'Success';
    case 5:
      return 'Manual';
    case 6:
      return 'Manual Ignore';
    default:
      return 'N/A';
  }
}

/** The original list's "type" filter: the event type of the row's event. */
export type ImportLogType = 'cvi' | 'consent';
const TYPE_CLASSES: Record<ImportLogType, string> = { cvi: 'OphCoCvi', consent: 'OphTrConsent' };

export interface ImportLogFilter {
  readonly statusId?: ImportLogStatusId;
  readonly type?: ImportLogType;
  /** `import_datetime` from (inclusive) and to (exclusive), stored UTC text. */
  readonly from?: string;
  readonly to?: string;
}

export interface ImportLogRow {
  readonly id: number;
  readonly importDatetime: string | null;
  readonly statusId: number;
  readonly statusName: string;
  readonly returnMessage: string;
  readonly eventId: number | null;
  /** The class of the event's type (`OphCoCvi`, ...); null without an event. */
  readonly eventTypeClass: string | null;
  /** The patient of the event (through its episode); null without one. */
  readonly patientId: number | null;
  /** The row names a stored original capture. */
  readonly hasOriginal: boolean;
  /** The original's path relative to the file store ('' for none); shared by a crop and its imports. */
  readonly filename: string;
  readonly croppedFileId: number | null;
}

export interface ImportLogPage {
  readonly rows: readonly ImportLogRow[];
  readonly nextBefore: number | undefined;
  readonly isPartial: boolean;
}

function baseQuery(db: Kysely<DB>) {
  return db
    .selectFrom('signature_import_log as l')
    .leftJoin('event as e', 'e.id', 'l.event_id')
    .leftJoin('event_type as et', 'et.id', 'e.event_type_id')
    .leftJoin('episode as ep', 'ep.id', 'e.episode_id')
    .select([
      'ep.patient_id',
      'l.id',
      'l.import_datetime',
      'l.status_id',
      'l.return_message',
      'l.event_id',
      'l.filename',
      'l.cropped_file_id',
      'et.class_name',
    ]);
}

function toRow(row: {
  id: number;
  import_datetime: string | null;
  status_id: number;
  return_message: string | null;
  event_id: number | null;
  filename: string;
  cropped_file_id: number | null;
  class_name: string | null;
  patient_id: number | null;
}): ImportLogRow {
  return {
    id: row.id,
    importDatetime: row.import_datetime,
    statusId: row.status_id,
    statusName: importLogStatusName(row.status_id),
    returnMessage: row.return_message ?? '',
    eventId: row.event_id,
    eventTypeClass: row.class_name,
    patientId: row.patient_id,
    hasOriginal: row.filename !== '',
    filename: row.filename,
    croppedFileId: row.cropped_file_id,
  };
}

/** One page of import log rows matching `filter`, newest first (keyset paging by id). */
export async function listImportLogs(
  db: Kysely<DB>,
  filter: ImportLogFilter,
  options: { before?: number; pageSize?: number; budgetMs?: number; windowSize?: number } = {},
): Promise<ImportLogPage> {
  const windowSize = options.windowSize ?? 2000;
  const page = await scanPage({
    pageSize: options.pageSize ?? 50,
    budgetMs: options.budgetMs ?? 30,
    start: options.before,
    keyOf: (row: ImportLogRow) => row.id,
    readWindow: async (after, limit) => {
      // The window is the id range [low, after) of the next `windowSize` candidates, from the
      // (status_id, id) index when a status is asked for, else from the primary key.
      let candidates = db.selectFrom('signature_import_log').select('id');
      if (filter.statusId !== undefined) candidates = candidates.where('status_id', '=', filter.statusId);
      if (after !== undefined) candidates = candidates.where('id', '<', after);
      const bounds = await db
        .selectFrom(candidates.orderBy('id', 'desc').limit(windowSize).as('c'))
        .select((eb) => [eb.fn.min('c.id').as('low'), eb.fn.countAll<number>().as('n')])
        .executeTakeFirstOrThrow();
      if (bounds.low === null) return { rows: [], lastKey: undefined, isExhausted: true };
      const low = Number(bounds.low);
      let query = baseQuery(db).where('l.id', '>=', low);
      if (after !== undefined) query = query.where('l.id', '<', after);
      if (filter.statusId !== undefined) query = query.where('l.status_id', '=', filter.statusId);
      if (filter.type !== undefined) query = query.where('et.class_name', '=', TYPE_CLASSES[filter.type]);
      if (filter.from !== undefined) query = query.where('l.import_datetime', '>=', filter.from);
      if (filter.to !== undefined) query = query.where('l.import_datetime', '<', filter.to);
      const rows = await query.orderBy('l.id', 'desc').limit(limit).execute();
      return { rows: rows.map(toRow), lastKey: low, isExhausted: Number(bounds.n) < windowSize };
    },
  });
  return { rows: page.rows, nextBefore: page.next, isPartial: page.isPartial };
}

/**
 * How a row is tied to a manual crop. A crop's import reuses the cropped row's original
 * (`original_log_id`), so the rows sharing one `filename` are the row that stored it (the first) and
 * the re-posts of its original (OpenEyes's own crop screen does the same).
 */
export interface CropLink {
  /** This row re-posted the original of that row: the crop it came from. */
  readonly croppedFromId?: number;
  /** The first successful import made from this row's original. */
  readonly importedAs?: ImportLogRow;
}

/** The crop links of `rows`, by row id (rows without one are absent). */
export async function findCropLinks(
  db: Kysely<DB>,
  rows: readonly ImportLogRow[],
): Promise<Map<number, CropLink>> {
  const links = new Map<number, CropLink>();
  const names = [...new Set(rows.map((r) => r.filename).filter((name) => name !== ''))];
  if (names.length === 0) return links;
  const firsts = await db
    .selectFrom('signature_import_log')
    .select((eb) => ['filename', eb.fn.min<number>('id').as('id')])
    .where('filename', 'in', names)
    .groupBy('filename')
    .execute();
  const firstOf = new Map(firsts.map((r) => [r.filename, Number(r.id)]));
  const firstIds = [...firstOf.values()];
  const imports = await db
    .selectFrom('signature_import_log')
    .select((eb) => ['filename', eb.fn.min<number>('id').as('id')])
    .where('filename', 'in', names)
    .where('status_id', '=', IMPORT_LOG_STATUS.success)
    .where('id', 'not in', firstIds)
    .groupBy('filename')
    .execute();
  const importRows =
    imports.length === 0
      ? []
      : (
          await baseQuery(db)
            .where(
              'l.id',
              'in',
              imports.map((r) => Number(r.id)),
            )
            .execute()
        ).map(toRow);
  const importOf = new Map(importRows.map((r) => [r.filename, r]));
  for (const row of rows) {
    if (row.filename === '') continue;
    const first = firstOf.get(row.filename);
    if (first !== undefined && first !== row.id) {
      links.set(row.id, { croppedFromId: first });
      continue;
    }
    const imported = importOf.get(row.filename);
    if (imported !== undefined) links.set(row.id, { importedAs: imported });
  }
  return links;
}

export interface ImportLogDetail extends ImportLogRow {
  /** The stored original capture, when the row names one that exists. */
  readonly original:
    { readonly uid: string; readonly mimeType: string; readonly sizeBytes: number } | undefined;
  /** An active unique code mapped to the row's event, for the crop screen. */
  readonly eventCode: string | undefined;
  /** The row names an original whose file is not in the file store (checked when a store is given). */
  readonly isOriginalMissing: boolean;
}

/**
 * One import log row with its original file and its event's code; undefined for an unknown id. With
 * `files`, an original whose file is gone from the store counts as none (`isOriginalMissing`).
 */
export async function findImportLogDetail(
  db: Kysely<DB>,
  id: number,
  files?: FileStore,
): Promise<ImportLogDetail | undefined> {
  const row = await baseQuery(db).where('l.id', '=', id).executeTakeFirst();
  if (row === undefined) return undefined;
  const [file, code] = await Promise.all([
    row.filename === ''
      ? undefined
      : db
          .selectFrom('protected_file')
          .select(['uid', 'mimetype', 'size'])
          .where('uid', '=', path.basename(row.filename))
          .executeTakeFirst(),
    row.event_id === null
      ? undefined
      : db
          .selectFrom('unique_codes_mapping as m')
          .innerJoin('unique_codes as uc', 'uc.id', 'm.unique_code_id')
          .select('uc.code')
          .where('m.event_id', '=', row.event_id)
          .orderBy('uc.active', 'desc')
          .orderBy('uc.id')
          .limit(1)
          .executeTakeFirst(),
  ]);
  const isOnDisk = file === undefined || files === undefined || (await files.exists(file.uid));
  return {
    ...toRow(row),
    original:
      file === undefined || !isOnDisk
        ? undefined
        : { uid: file.uid, mimeType: file.mimetype, sizeBytes: Number(file.size) },
    eventCode: code?.code,
    isOriginalMissing: row.filename !== '' && (file === undefined || !isOnDisk),
  };
}

/** The ids among `rows` whose original capture is named but not in the file store. */
export async function findMissingOriginals(
  db: Kysely<DB>,
  files: FileStore,
  rows: readonly ImportLogRow[],
): Promise<Set<number>> {
  const named = await readOriginalNames(
    db,
    rows.filter((r) => r.hasOriginal).map((r) => r.id),
  );
  if (named.length === 0) return new Set();
  const uids = [...new Set(named.map((r) => path.basename(r.filename)))];
  const stored = await db.selectFrom('protected_file').select('uid').where('uid', 'in', uids).execute();
  const known = new Set(stored.map((f) => f.uid));
  const onDisk = new Set(
    (
      await Promise.all(uids.map(async (uid) => (known.has(uid) && (await files.exists(uid)) ? uid : '')))
    ).filter((uid) => uid !== ''),
  );
  return new Set(named.filter((r) => !onDisk.has(path.basename(r.filename))).map((r) => r.id));
}

function readOriginalNames(db: Kysely<DB>, ids: readonly number[]) {
  if (ids.length === 0) return Promise.resolve([]);
  return db
    .selectFrom('signature_import_log')
    .select(['id', 'filename'])
    .where('id', 'in', [...ids])
    .execute();
}

/** The bytes and type of the original capture of log `id`; undefined when it has none on disk. */
export async function readImportLogOriginal(
  db: Kysely<DB>,
  files: FileStore,
  id: number,
): Promise<{ bytes: Buffer; mimeType: string } | undefined> {
  const detail = await findImportLogDetail(db, id);
  if (detail?.original === undefined) return undefined;
  try {
    return { bytes: await files.read(detail.original.uid), mimeType: detail.original.mimeType };
  } catch {
    return undefined;
  }
}

/** What a status change did. */
export type ImportLogChange =
  | { readonly kind: 'done' }
  /** The row is no longer failed (someone else changed it meanwhile); nothing was written. */
  | { readonly kind: 'changed'; readonly statusName: string }
  | { readonly kind: 'not_found' };

/**
 * Moves failed row `id` to 5 Manual or 6 Manual Ignore, as a compare-and-set on status 3: a row changed
 * meanwhile by another operator is left as it is.
 */
export async function markImportLog(
  database: Database,
  change: {
    readonly id: number;
    readonly statusId: typeof IMPORT_LOG_STATUS.manual | typeof IMPORT_LOG_STATUS.manualIgnore;
    /** The operator, stamped in the audit column. */
    readonly userId: number;
    readonly now?: Date;
  },
): Promise<ImportLogChange> {
  const { id, statusId } = change;
  // As the insert writes it: the stored time zone (local time on OpenEyes), the date alone in a DATE column.
  const { lastModifiedDate } = await importLogAuditDates(database, formatDateTime(change.now ?? new Date()));
  const updated = await database.writeTransaction(async (trx) => {
    const result = await trx
      .updateTable('signature_import_log')
      .set({
        status_id: statusId,
        last_modified_date: lastModifiedDate,
        last_modified_user_id: change.userId,
      })
      .where('id', '=', id)
      .where('status_id', '=', IMPORT_LOG_STATUS.failed)
      .executeTakeFirst();
    return Number(result.numUpdatedRows);
  });
  if (updated > 0) return { kind: 'done' };
  const row = await database.db
    .selectFrom('signature_import_log')
    .select('status_id')
    .where('id', '=', id)
    .executeTakeFirst();
  return row === undefined
    ? { kind: 'not_found' }
    : { kind: 'changed', statusName: importLogStatusName(row.status_id) };
}
