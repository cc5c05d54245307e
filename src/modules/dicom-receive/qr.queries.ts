/**
 * SQL of the query/retrieve C-FIND: `dicom_instance_index` grouped at the query's level (study, series
 * or instance) in pages of the level's key, and the patient each study is filed to (`device_event`, the
 * device-filing module's index of the events it filed) with that patient's identifier for the site's
 * institution.
 */
import type { Kysely, RawBuilder, SqlBool } from 'kysely';
import { sql } from 'kysely';
import type { DialectAdapter } from '../../db/dialect.ts';
import type { DB } from '../../db/schema.ts';
import type { DicomInstanceIndexTable } from './received-instance.queries.ts';

type IndexDb = Kysely<
  DB & {
    dicom_instance_index: DicomInstanceIndexTable;
    device_event: { patient_id: number; study_instance_uid: string };
  }
>;

/** The column a level's rows are grouped (and paged) by. */
export type GroupColumn = 'study_instance_uid' | 'series_instance_uid' | 'sop_instance_uid';

/** The text columns of the index an answer may carry. */
export const INDEX_COLUMNS = [
  'sop_class_uid',
  'sop_instance_uid',
  'study_instance_uid',
  'series_instance_uid',
  'character_set',
  'patient_id',
  'patient_name',
  'patient_birth_date',
  'patient_sex',
  'study_date',
  'study_time',
  'accession_number',
  'study_id',
  'study_description',
  'referring_physician_name',
  'modality',
  'series_number',
  'series_description',
  'instance_number',
] as const;
export type IndexColumn = (typeof INDEX_COLUMNS)[number];

export interface GroupRow {
  readonly key: string;
  /** One value per column (the least of the group: within a study or series they agree). */
  readonly values: Readonly<Record<IndexColumn, string | null>>;
  readonly instances: number;
  readonly series: number;
  /** The distinct modalities of the group, `\`-joined (for Modalities in Study). */
  readonly modalities: string;
  /** The requests holding the group's instances (for the audit of an unfiled one). */
  readonly requestId: number;
}

/** A column a key may filter by: an answered column, or the folded name (`patient_name_key`). */
export type FilterColumn = IndexColumn | 'patient_name_key';

/**
 * A query key as SQL filters by it: a group is kept when one of its instances passes, so that SQL keeps
 * every group the matching keeps (the matching runs after it on the group's values, exactly).
 * `like` takes a DICOM pattern (`*`, `?`); `isNullKept` keeps rows whose column is null (a folded name
 * not written). `patientId`: the Patient ID as answered, the sent one or the filed patient's identifier
 * for the institution, by a pattern with wildcards (an exact one is a study list: `findStudiesOfPatientId`).
 */
export type IndexKeyFilter =
  | {
      readonly kind: 'equals';
      readonly column: FilterColumn;
      readonly values: readonly string[];
      readonly isNullKept?: boolean;
    }
  | {
      readonly kind: 'like';
      readonly column: FilterColumn;
      readonly pattern: string;
      readonly isNullKept?: boolean;
    }
  | { readonly kind: 'range'; readonly column: FilterColumn; readonly low?: string; readonly high?: string }
  | { readonly kind: 'patientId'; readonly pattern: string; readonly institutionCode: string };

/**
 * A DICOM wildcard pattern (`*` any run, `?` one character) as a LIKE pattern whose escape character is
 * `!` (a character no engine's string literals treat specially, unlike `\`): `%`, `_` and `!` of the
 * value match themselves.
 */
export function likePatternOf(pattern: string): string {
  let like = '';
  for (const char of pattern) {
    if (char === '*') like += '%';
    else if (char === '?') like += '_';
    else if (char === '%' || char === '_' || char === '!') like += `!${char}`;
    else like += char;
  }
  return like;
}

function likeMatch(column: string, pattern: string): RawBuilder<SqlBool> {
  return sql<SqlBool>`${sql.ref(column)} like ${likePatternOf(pattern)} escape '!'`;
}

/** The condition of `filter` on the index row `alias`. */
function keyCondition(idb: IndexDb, alias: string, filter: IndexKeyFilter): RawBuilder<SqlBool> {
  if (filter.kind === 'patientId') {
    // The sent Patient ID, or the identifier of the patient the study is filed to.
    const filedStudies = idb
      .selectFrom('device_event as d')
      .innerJoin('patient_identifier as pi', 'pi.patient_id', 'd.patient_id')
      .innerJoin('patient_identifier_type as t', 't.id', 'pi.patient_identifier_type_id')
      .innerJoin('institution as i', 'i.id', 't.institution_id')
      .select('d.study_instance_uid')
      .where(likeMatch('pi.value', filter.pattern))
      .where('pi.deleted', '=', 0)
      .where('t.usage_type', '=', 'LOCAL')
      .where('i.remote_id', '=', filter.institutionCode);
    return sql<SqlBool>`(${likeMatch(`${alias}.patient_id`, filter.pattern)} or ${sql.ref(`${alias}.study_instance_uid`)} in (${filedStudies}))`;
  }
  const column = `${alias}.${filter.column}`;
  let condition: RawBuilder<SqlBool>;
  switch (filter.kind) {
    case 'equals':
      condition =
        filter.values.length === 1
          ? sql<SqlBool>`${sql.ref(column)} = ${filter.values[0]}`
          : sql<SqlBool>`${sql.ref(column)} in (${sql.join(filter.values)})`;
      break;
    case 'like':
      condition = likeMatch(column, filter.pattern);
      break;
    case 'range': {
      const parts = [
        ...(filter.low === undefined ? [] : [sql`${sql.ref(column)} >= ${filter.low}`]),
        ...(filter.high === undefined ? [] : [sql`${sql.ref(column)} <= ${filter.high}`]),
      ];
      condition = sql<SqlBool>`${sql.join(parts, sql` and `)}`;
      break;
    }
  }
  return (filter.kind === 'equals' || filter.kind === 'like') && filter.isNullKept === true
    ? sql<SqlBool>`(${condition} or ${sql.ref(column)} is null)`
    : condition;
}

export interface GroupPageFilter {
  readonly group: GroupColumn;
  /** Rows with a larger key only (the page before ended there). */
  readonly after: string;
  readonly limit: number;
  /** UID keys of the query: the column must be one of these. */
  readonly uids: ReadonlyMap<
    'study_instance_uid' | 'series_instance_uid' | 'sop_instance_uid',
    readonly string[]
  >;
  /** The other keys SQL filters by. */
  readonly keys: readonly IndexKeyFilter[];
}

/** One page of groups in key order. */
export async function readGroupPage(db: Kysely<DB>, filter: GroupPageFilter): Promise<GroupRow[]> {
  const idb = db as unknown as IndexDb;
  let query = idb
    .selectFrom('dicom_instance_index as x')
    .select((eb) => [
      eb.ref(`x.${filter.group}`).as('key'),
      ...INDEX_COLUMNS.map((column) => eb.fn.min(`x.${column}`).as(column)),
      eb.fn.countAll<number>().as('instances'),
      eb.fn.count<number>('x.series_instance_uid').distinct().as('series'),
      eb.fn.max('x.request_id').as('request_id'),
    ])
    .where(`x.${filter.group}`, '>', filter.after);
  for (const [column, uids] of filter.uids) query = query.where(`x.${column}`, 'in', [...uids]);
  for (const key of filter.keys) {
    // An instance is a group of its own; a study or series is kept when one of its instances passes, so
    // that its counts and values stay those of every instance.
    query =
      filter.group === 'sop_instance_uid'
        ? query.where(keyCondition(idb, 'x', key))
        : query.where(
            `x.${filter.group}`,
            'in',
            idb
              .selectFrom('dicom_instance_index as y')
              .select(`y.${filter.group}`)
              .where(keyCondition(idb, 'y', key)),
          );
  }
  const rows = await query
    .groupBy(`x.${filter.group}`)
    .orderBy(`x.${filter.group}`)
    .limit(filter.limit)
    .execute();
  if (rows.length === 0) return [];
  // Modalities of each group, read apart (no portable string aggregate in the three dialects).
  const modalityRows = await idb
    .selectFrom('dicom_instance_index as x')
    .select([`x.${filter.group} as key`, 'x.modality as modality'])
    .distinct()
    .where(
      `x.${filter.group}`,
      'in',
      rows.map((r) => String(r.key)),
    )
    .execute();
  return rows.map((row) => {
    const record = row as unknown as Record<string, unknown>;
    const values = Object.fromEntries(
      INDEX_COLUMNS.map((c) => [
        c,
        record[c] === null || record[c] === undefined ? null : String(record[c] as string | number),
      ]),
    ) as Record<IndexColumn, string | null>;
    const modalities = [
      ...new Set(
        modalityRows
          .filter((m) => String(m.key) === String(row.key) && m.modality !== null && m.modality !== '')
          .map((m) => String(m.modality)),
      ),
    ].sort();
    return {
      key: String(row.key),
      values,
      instances: Number(row.instances),
      series: Number(row.series),
      modalities: modalities.join('\\'),
      requestId: Number(row.request_id),
    };
  });
}

export interface FiledPatient {
  readonly patientId: number;
  /** The patient's identifier for the site's institution; undefined when the patient has none. */
  readonly identifier: string | undefined;
}

/**
 * The patient each of `studyUids` is filed to (the lowest patient id when filing named two), not
 * deleted, with its identifier of a LOCAL type of the institution `institutionCode` (the first in the
 * institution's display order, then by type id).
 */
export async function readFiledPatients(
  db: Kysely<DB>,
  studyUids: readonly string[],
  institutionCode: string,
): Promise<Map<string, FiledPatient>> {
  const filed = new Map<string, FiledPatient>();
  if (studyUids.length === 0) return filed;
  const idb = db as unknown as IndexDb;
  const events = await idb
    .selectFrom('device_event as d')
    .innerJoin('patient as p', 'p.id', 'd.patient_id')
    .select(['d.study_instance_uid as studyUid', 'd.patient_id as patientId'])
    .where('d.study_instance_uid', 'in', [...new Set(studyUids)])
    .where('p.deleted', '=', 0)
    .orderBy('d.patient_id')
    .execute();
  if (events.length === 0) return filed;
  const identifiers = await db
    .selectFrom('patient_identifier as pi')
    .innerJoin('patient_identifier_type as t', 't.id', 'pi.patient_identifier_type_id')
    .innerJoin('institution as i', 'i.id', 't.institution_id')
    .leftJoin('patient_identifier_type_display_order as o', (join) =>
      join
        .onRef('o.patient_identifier_type_id', '=', 't.id')
        .onRef('o.institution_id', '=', 'i.id')
        .on('o.site_id', 'is', null),
    )
    .select([
      'pi.patient_id as patientId',
      'pi.value as value',
      'o.display_order as displayOrder',
      't.id as typeId',
    ])
    .where('pi.patient_id', 'in', [...new Set(events.map((e) => e.patientId))])
    .where('pi.deleted', '=', 0)
    .where('t.usage_type', '=', 'LOCAL')
    .where('i.remote_id', '=', institutionCode)
    .execute();
  const rank = (row: (typeof identifiers)[number]) => [
    row.displayOrder ?? Number.MAX_SAFE_INTEGER,
    row.typeId,
  ];
  for (const event of events) {
    if (filed.has(event.studyUid)) continue;
    const held = identifiers
      .filter((i) => i.patientId === event.patientId)
      .sort((a, b) => rank(a)[0]! - rank(b)[0]! || rank(a)[1]! - rank(b)[1]!);
    filed.set(event.studyUid, { patientId: event.patientId, identifier: held[0]?.value });
  }
  return filed;
}

/** UID keys of a retrieve: the column must be one of the values (an empty list matches nothing). */
export type RetrieveUids = ReadonlyMap<
  'study_instance_uid' | 'series_instance_uid' | 'sop_instance_uid',
  readonly string[]
>;

export interface RetrieveRow {
  readonly sopInstanceUid: string;
  readonly sopClassUid: string;
  readonly studyInstanceUid: string;
  readonly requestId: number;
  /** The `attachment_data` row holding the instance's bytes (`REQUEST_BLOB`); undefined when dropped. */
  readonly payloadId: number | undefined;
}

/** The instances a retrieve names, without reading a byte of them. */
export async function countRetrieve(db: Kysely<DB>, uids: RetrieveUids): Promise<number> {
  if ([...uids.values()].some((list) => list.length === 0)) return 0;
  const idb = db as unknown as IndexDb;
  let query = idb.selectFrom('dicom_instance_index as x').select((eb) => eb.fn.countAll<number>().as('n'));
  for (const [column, list] of uids) query = query.where(`x.${column}`, 'in', [...list]);
  const row = await query.executeTakeFirst();
  return Number(row?.n ?? 0);
}

/**
 * One page of the instances a retrieve names, in SOP Instance UID order after `after`, each with the
 * payload row that holds its bytes (none when the clean-up policy dropped them).
 */
export async function readRetrievePage(
  db: Kysely<DB>,
  uids: RetrieveUids,
  after: string,
  limit: number,
): Promise<RetrieveRow[]> {
  if ([...uids.values()].some((list) => list.length === 0)) return [];
  const idb = db as unknown as IndexDb;
  let query = idb
    .selectFrom('dicom_instance_index as x')
    .leftJoin('attachment_data as a', (join) =>
      join
        .onRef('a.request_id', '=', 'x.request_id')
        .on('a.attachment_mnemonic', '=', 'REQUEST_BLOB')
        .on('a.blob_data', 'is not', null),
    )
    .select([
      'x.sop_instance_uid as sopInstanceUid',
      'x.sop_class_uid as sopClassUid',
      'x.study_instance_uid as studyInstanceUid',
      'x.request_id as requestId',
      'a.id as payloadId',
    ])
    .where('x.sop_instance_uid', '>', after);
  for (const [column, list] of uids) query = query.where(`x.${column}`, 'in', [...list]);
  const rows = await query.orderBy('x.sop_instance_uid').limit(limit).execute();
  return rows.map((row) => ({
    sopInstanceUid: row.sopInstanceUid,
    sopClassUid: row.sopClassUid,
    studyInstanceUid: row.studyInstanceUid,
    requestId: Number(row.requestId),
    payloadId: row.payloadId === null ? undefined : Number(row.payloadId),
  }));
}

/**
 * The studies whose answered Patient ID (as C-FIND answers it) is `patientId`: a study filed to a patient
 * answers that patient's identifier for the institution, any other the Patient ID the device sent.
 * Both reads are index lookups: the sent Patient ID on `dicom_instance_index`, the identifier by its
 * type and folded value (`patient_identifier`'s search index) with the exact value compared after.
 */
export async function findStudiesOfPatientId(
  db: Kysely<DB>,
  dialect: DialectAdapter,
  patientId: string,
  institutionCode: string,
): Promise<string[]> {
  const idb = db as unknown as IndexDb;
  const sent = await idb
    .selectFrom('dicom_instance_index as x')
    .select(['x.study_instance_uid as studyUid', 'x.patient_id as patientId'])
    .distinct()
    .where('x.patient_id', '=', patientId)
    .execute();
  const types = await db
    .selectFrom('patient_identifier_type as t')
    .innerJoin('institution as i', 'i.id', 't.institution_id')
    .select('t.id')
    .where('t.usage_type', '=', 'LOCAL')
    .where('i.remote_id', '=', institutionCode)
    .execute();
  const filedTo =
    types.length === 0
      ? []
      : await idb
          .selectFrom('patient_identifier as pi')
          .innerJoin('device_event as d', 'd.patient_id', 'pi.patient_id')
          .select('d.study_instance_uid as studyUid')
          .distinct()
          .where(
            'pi.patient_identifier_type_id',
            'in',
            types.map((t) => t.id),
          )
          .where((eb) => eb(dialect.foldedKey('pi.value'), '=', dialect.foldCase(patientId)))
          .where('pi.value', '=', patientId)
          .where('pi.deleted', '=', 0)
          .execute();
  const candidates = [...new Set([...sent.map((s) => s.studyUid), ...filedTo.map((f) => f.studyUid)])];
  const filed = await readFiledPatients(db, candidates, institutionCode);
  const sentIds = new Map<string, string>();
  for (const row of sent) sentIds.set(row.studyUid, row.patientId ?? '');
  return candidates.filter((study) => {
    const patient = filed.get(study);
    return (patient?.identifier ?? sentIds.get(study)) === patientId;
  });
}

/** The user who submitted each of `requestIds` (`request.created_user_id`), by request id. */
export async function readRequestSubmitters(
  db: Kysely<DB>,
  requestIds: readonly number[],
): Promise<Map<number, number>> {
  const ids = [...new Set(requestIds)];
  if (ids.length === 0) return new Map();
  const rows = await db
    .selectFrom('request')
    .select(['id', 'created_user_id'])
    .where('id', 'in', ids)
    .execute();
  return new Map(rows.map((r) => [Number(r.id), Number(r.created_user_id)]));
}

/** An indexed instance whose request still holds its received bytes (DICOMweb WADO-RS). */
export interface StoredInstanceRow {
  readonly sopInstanceUid: string;
  readonly sopClassUid: string;
  readonly studyInstanceUid: string;
  readonly seriesInstanceUid: string;
  readonly requestId: number;
  /** The user who submitted the request. */
  readonly submitterUserId: number;
  /** The `attachment_data` row of the bytes (`REQUEST_BLOB`), its date and byte length. */
  readonly attachmentId: number;
  readonly modifiedDate: string;
  readonly sizeBytes: number;
  /** The bytes' row is filed under an event (attachment view then shows it to every caller). */
  readonly isFiled: boolean;
}

/**
 * The instances of study `studyUid` (of series `seriesUid`, the instance `sopUid` when given) whose
 * latest request still holds the received bytes, in series then instance order; at most `limit`.
 */
export async function readStoredInstances(
  db: Kysely<DB>,
  filter: {
    readonly studyUid: string;
    readonly seriesUid?: string;
    readonly sopUid?: string;
    readonly limit: number;
  },
): Promise<StoredInstanceRow[]> {
  const idb = db as unknown as IndexDb;
  let query = idb
    .selectFrom('dicom_instance_index as x')
    .innerJoin('request as r', 'r.id', 'x.request_id')
    .innerJoin('attachment_data as a', (join) =>
      join.onRef('a.request_id', '=', 'x.request_id').on('a.attachment_mnemonic', '=', 'REQUEST_BLOB'),
    )
    .select([
      'x.sop_instance_uid as sopInstanceUid',
      'x.sop_class_uid as sopClassUid',
      'x.study_instance_uid as studyInstanceUid',
      'x.series_instance_uid as seriesInstanceUid',
      'x.request_id as requestId',
      'r.created_user_id as submitterUserId',
      'a.id as attachmentId',
      'a.last_modified_date as modifiedDate',
      sql<number | string>`octet_length(a.blob_data)`.as('sizeBytes'),
    ])
    .select((eb) =>
      eb
        .exists(
          eb
            .selectFrom('event_attachment_item as i')
            .select('i.id')
            .whereRef('i.attachment_data_id', '=', 'a.id'),
        )
        .as('isFiled'),
    )
    .where('x.study_instance_uid', '=', filter.studyUid)
    .where('a.blob_data', 'is not', null);
  if (filter.seriesUid !== undefined) query = query.where('x.series_instance_uid', '=', filter.seriesUid);
  if (filter.sopUid !== undefined) query = query.where('x.sop_instance_uid', '=', filter.sopUid);
  const rows = await query
    .orderBy('x.series_instance_uid')
    .orderBy('x.instance_number')
    .orderBy('x.sop_instance_uid')
    .limit(filter.limit)
    .execute();
  return rows.map((row) => ({
    sopInstanceUid: row.sopInstanceUid,
    sopClassUid: row.sopClassUid,
    studyInstanceUid: row.studyInstanceUid,
    seriesInstanceUid: row.seriesInstanceUid,
    requestId: Number(row.requestId),
    submitterUserId: Number(row.submitterUserId),
    attachmentId: Number(row.attachmentId),
    modifiedDate: String(row.modifiedDate),
    sizeBytes: Number(row.sizeBytes),
    isFiled: Number(row.isFiled) === 1 || (row.isFiled as unknown) === true,
  }));
}

/** An image the service extracted from an instance (`DICOM_IMAGE_{frame}` of its request). */
export interface ExtractedImageRow {
  readonly attachmentId: number;
  readonly mimeType: string;
  readonly modifiedDate: string;
  readonly sizeBytes: number;
}

/** The image extracted from frame `frame` of request `requestId`, if any. */
export async function readExtractedImage(
  db: Kysely<DB>,
  requestId: number,
  frame: number,
): Promise<ExtractedImageRow | undefined> {
  const row = await db
    .selectFrom('attachment_data as a')
    .select([
      'a.id as attachmentId',
      'a.mime_type as mimeType',
      'a.last_modified_date as modifiedDate',
      sql<number | string>`octet_length(a.blob_data)`.as('sizeBytes'),
    ])
    .where('a.request_id', '=', requestId)
    .where('a.attachment_mnemonic', '=', `DICOM_IMAGE_${frame}`)
    .where('a.blob_data', 'is not', null)
    .executeTakeFirst();
  return row === undefined
    ? undefined
    : {
        attachmentId: Number(row.attachmentId),
        mimeType: row.mimeType,
        modifiedDate: String(row.modifiedDate),
        sizeBytes: Number(row.sizeBytes),
      };
}

/**
 * Which of `requestIds` hold received bytes (`REQUEST_BLOB`) filed under an event: attachment view shows
 * those to every caller, a request's other rows only to its submitter and request admins.
 */
export async function readFiledRequests(db: Kysely<DB>, requestIds: readonly number[]): Promise<Set<number>> {
  const ids = [...new Set(requestIds)];
  if (ids.length === 0) return new Set();
  const rows = await db
    .selectFrom('attachment_data as a')
    .innerJoin('event_attachment_item as i', 'i.attachment_data_id', 'a.id')
    .select('a.request_id')
    .distinct()
    .where('a.request_id', 'in', ids)
    .where('a.attachment_mnemonic', '=', 'REQUEST_BLOB')
    .execute();
  return new Set(rows.map((r) => Number(r.request_id)));
}
