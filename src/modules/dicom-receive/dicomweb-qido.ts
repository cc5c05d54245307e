/**
 * DICOMweb QIDO-RS (PS3.18 10.6): the studies, series and instances searches, answered from
 * `dicom_instance_index` with the query/retrieve C-FIND's attributes, index pages and matching
 * (`qr-find.ts`, `qr.queries.ts`, the worklist module's `matchesValue`): SQL filters by the keys it can
 * express (`sqlKeysOf`), the matching runs exactly on the groups it returns.
 *
 * - Parameters: `{attribute}={value}` by keyword or tag (single value, `*`/`?` wildcards, DA/TM ranges,
 *   UID lists by `,` or `\`, universal); `includefield` (repeated or `,`-separated, `all`); `limit`,
 *   `offset`; `fuzzymatching` accepted and ignored (names are matched without case or accents anyway).
 *   A name that is neither a parameter, a keyword nor a tag, a repeated attribute, a bad number: a
 *   {@link QidoParameterError} (400). A known attribute the index does not hold is not matched (its name
 *   is listed for the Warning header, PS3.18 8.3.4.1); asked for with `includefield`, it is left out.
 * - Patient ID: as the C-FIND, the filed patient's identifier for `INSTITUTION_CODE` (matched and
 *   answered), else what the device sent.
 * - Who sees what (attachment view's rule on the received bytes, the request's `REQUEST_BLOB` row): a
 *   group whose request's bytes are filed under an event is seen by every caller of the route; one not
 *   filed (a request's private rows) only by its submitter and request admins (`mayReadRequest`). A
 *   group is judged by its latest request. Unseen groups are skipped before `offset` and `limit` count.
 * - At most `DICOM_QR_MAX_ANSWERS` answers; more matches set `isTruncated` (the route's Warning).
 */
import type { Config } from '../../config.ts';
import type { Database } from '../../db/database.ts';
import type { RequestReader } from '../user/index.ts';
import { mayReadRequest } from '../user/index.ts';
import { matchesValue } from '../worklist/index.ts';
import type { Level } from './qr-find.ts';
import { ATTRIBUTES, GROUP_OF, LEVEL_RANK, sqlKeysOf, valuesOf } from './qr-find.ts';
import type { GroupRow } from './qr.queries.ts';
import {
  findStudiesOfPatientId,
  readFiledPatients,
  readFiledRequests,
  readGroupPage,
  readRequestSubmitters,
} from './qr.queries.ts';

export type QidoLevel = 'study' | 'series' | 'instance';

/** A value in the DICOM JSON model (PS3.18 F.2). */
export type JsonElement = { vr: string; Value?: unknown[] };
export type JsonDataset = Record<string, JsonElement>;

/** A query parameter the service cannot take (400). */
export class QidoParameterError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'QidoParameterError';
  }
}

export interface QidoRequest {
  readonly level: QidoLevel;
  /** The study and series of the URL path. */
  readonly studyUid?: string;
  readonly seriesUid?: string;
  /** The query string, as parsed (a repeated name: an array). */
  readonly query: Readonly<Record<string, string | string[] | undefined>>;
  readonly reader: RequestReader;
  /** `…/api/v1/dicomweb`, for the RetrieveURL of each answer. */
  readonly baseUrl: string;
}

export interface QidoAnswer {
  readonly datasets: JsonDataset[];
  /** More matches than the answers sent (the cap or `limit`), when no `limit` asked for fewer. */
  readonly isTruncated: boolean;
  /** Matching keys the index does not hold (not matched). */
  readonly unsupported: readonly string[];
  /** For the audit: the filed patients of the answers, and the requests holding every answered group. */
  readonly patientIds: readonly number[];
  readonly requestIds: readonly number[];
}

const LEVEL_OF: Readonly<Record<QidoLevel, Level>> = { study: 'STUDY', series: 'SERIES', instance: 'IMAGE' };
const PAGE_ROWS = 200;
const MAX_VALUE_LENGTH = 1024;
const RETRIEVE_URL = 0x00081190;
const STUDY_UID = 0x0020000d;
const SERIES_UID = 0x0020000e;
const SOP_UID = 0x00080018;

/** PS3.18 Table 10.6.3-3/-4/-5: the attributes every answer of a level carries (those the index holds). */
const DEFAULT_TAGS: Readonly<Record<'STUDY' | 'SERIES' | 'IMAGE', readonly number[]>> = {
  STUDY: [
    0x00080020, 0x00080030, 0x00080050, 0x00080061, 0x00080090, 0x00100010, 0x00100020, 0x00100030,
    0x00100040, 0x0020000d, 0x00200010, 0x00201206, 0x00201208,
  ],
  SERIES: [0x00080060, 0x0008103e, 0x0020000e, 0x00200011, 0x00201209],
  IMAGE: [0x00080016, 0x00080018, 0x00200013],
};

/** Attributes whose numbers are JSON numbers (IS, and the counts' IS). */
const NUMBER_VRS = new Set(['IS', 'DS', 'US', 'UL', 'SS', 'SL', 'FL', 'FD']);

interface DictionaryEntry {
  readonly tag: number;
  readonly vr: string;
}

/** The data dictionary (dcmjs's), loaded on the first search. */
let dictionary: Promise<{ byKeyword: Map<string, DictionaryEntry>; vrOf: Map<number, string> }> | undefined;

async function loadDictionary() {
  return (dictionary ??= import('dcmjs').then(({ default: dcmjs }) => {
    const meta = (
      dcmjs.data as unknown as {
        DicomMetaDictionary: { nameMap: Record<string, { tag: string; vr: string }> };
      }
    ).DicomMetaDictionary;
    const byKeyword = new Map<string, DictionaryEntry>();
    const vrOf = new Map<number, string>();
    for (const [keyword, entry] of Object.entries(meta.nameMap)) {
      const match = /^\(([0-9A-F]{4}),([0-9A-F]{4})\)$/i.exec(entry.tag);
      if (match === null) continue;
      const tag = Number.parseInt(`${match[1]}${match[2]}`, 16);
      byKeyword.set(keyword, { tag, vr: entry.vr });
      vrOf.set(tag, entry.vr);
    }
    return { byKeyword, vrOf };
  }));
}

/** The tag as DICOM JSON names it: eight upper-case hex digits. */
export function tagKey(tag: number): string {
  return tag.toString(16).toUpperCase().padStart(8, '0');
}

interface ParsedQuery {
  readonly keys: { tag: number; vr: string; value: string }[];
  readonly include: Set<number> | 'all';
  readonly limit: number | undefined;
  readonly offset: number;
  readonly unsupported: string[];
}

const CONTROL_PARAMETERS = new Set(['limit', 'offset', 'fuzzymatching', 'includefield']);

/** Reads the query string; throws {@link QidoParameterError} for what cannot be taken. */
export async function parseQidoQuery(query: QidoRequest['query'], level: Level): Promise<ParsedQuery> {
  const { byKeyword, vrOf } = await loadDictionary();
  const resolve = (name: string): DictionaryEntry | undefined => {
    if (/^[0-9A-Fa-f]{8}$/.test(name)) {
      const tag = Number.parseInt(name, 16);
      return { tag, vr: vrOf.get(tag) ?? 'UN' };
    }
    return byKeyword.get(name);
  };
  const single = (name: string, value: string | string[] | undefined): string => {
    if (Array.isArray(value)) throw new QidoParameterError(`The parameter ${name} is repeated.`);
    const text = value ?? '';
    if (text.length > MAX_VALUE_LENGTH)
      throw new QidoParameterError(`The value of ${name} is longer than ${MAX_VALUE_LENGTH} characters.`);
    return text;
  };
  const integer = (name: string, min: number): number | undefined => {
    if (query[name] === undefined) return undefined;
    const text = single(name, query[name]);
    if (!/^[0-9]{1,9}$/.test(text) || Number(text) < min)
      throw new QidoParameterError(`${name} must be an integer of at least ${min}.`);
    return Number(text);
  };
  const fuzzy = query.fuzzymatching;
  if (fuzzy !== undefined && !/^(true|false)$/i.test(single('fuzzymatching', fuzzy)))
    throw new QidoParameterError('fuzzymatching must be true or false.');

  let include: Set<number> | 'all' = new Set();
  const includes = [query.includefield ?? []]
    .flat()
    .flatMap((v) => v.split(','))
    .map((v) => v.trim())
    .filter((v) => v !== '');
  for (const field of includes) {
    if (field.length > MAX_VALUE_LENGTH) throw new QidoParameterError('includefield is too long.');
    if (field === 'all') {
      include = 'all';
      continue;
    }
    // A sequence path (`00081198.00081150`) names an attribute inside a sequence: none is indexed.
    const entry = resolve(field.split('.')[0]!);
    if (entry === undefined) throw new QidoParameterError(`includefield ${field} is not an attribute.`);
    if (include !== 'all') include.add(entry.tag);
  }

  const keys: ParsedQuery['keys'] = [];
  const unsupported: string[] = [];
  const seen = new Set<number>();
  for (const [name, raw] of Object.entries(query)) {
    if (CONTROL_PARAMETERS.has(name) || raw === undefined) continue;
    const path = name.split('.');
    const entry = resolve(path[0]!);
    if (entry === undefined || path.some((p) => resolve(p) === undefined))
      throw new QidoParameterError(`The parameter ${name} is neither a keyword nor a tag.`);
    const value = single(name, raw);
    if (seen.has(entry.tag)) throw new QidoParameterError(`The attribute ${name} is given twice.`);
    seen.add(entry.tag);
    const attribute = ATTRIBUTES.get(entry.tag);
    if (path.length > 1 || attribute === undefined || LEVEL_RANK[attribute.level] > LEVEL_RANK[level]) {
      unsupported.push(name);
      continue;
    }
    const vr = entry.vr;
    // QIDO lists UIDs with commas (PS3.18 8.3.4.1); the C-FIND matching takes backslashes.
    keys.push({ tag: entry.tag, vr, value: vr === 'UI' ? value.replaceAll(',', '\\') : value });
  }
  return {
    keys,
    include,
    limit: integer('limit', 1),
    offset: integer('offset', 0) ?? 0,
    unsupported,
  };
}

export interface QidoSearcher {
  search(request: QidoRequest): Promise<QidoAnswer>;
}

export function createQidoSearcher(deps: {
  readonly database: Database;
  readonly config: Config;
}): QidoSearcher {
  const { database, config } = deps;
  const maxAnswers = config.dicomNetwork.qrMaxAnswers;

  return {
    async search(request) {
      const level = LEVEL_OF[request.level];
      const parsed = await parseQidoQuery(request.query, level);
      const { vrOf } = await loadDictionary();
      const uids = new Map<'study_instance_uid' | 'series_instance_uid' | 'sop_instance_uid', string[]>();
      if (request.studyUid !== undefined) uids.set('study_instance_uid', [request.studyUid]);
      if (request.seriesUid !== undefined) uids.set('series_instance_uid', [request.seriesUid]);
      for (const key of parsed.keys) {
        const column =
          key.tag === STUDY_UID
            ? 'study_instance_uid'
            : key.tag === SERIES_UID
              ? 'series_instance_uid'
              : key.tag === SOP_UID
                ? 'sop_instance_uid'
                : undefined;
        if (column === undefined || key.value === '' || /[*?]/.test(key.value)) continue;
        const listed = key.value.split('\\').map((u) => u.trim());
        const within = uids.get(column);
        uids.set(column, within === undefined ? listed : within.filter((u) => listed.includes(u)));
      }
      const sqlKeys = sqlKeysOf(parsed.keys, config.institutionCode);
      if (sqlKeys.patientId !== undefined) {
        const studies = await findStudiesOfPatientId(
          database.db,
          database.dialect,
          sqlKeys.patientId,
          config.institutionCode,
        );
        const within = uids.get('study_instance_uid');
        uids.set(
          'study_instance_uid',
          within === undefined ? studies : within.filter((u) => studies.includes(u)),
        );
      }
      if ([...uids.values()].some((list) => list.length === 0)) return empty(parsed.unsupported);

      const wanted = parsed.limit === undefined ? maxAnswers : Math.min(parsed.limit, maxAnswers);
      const tags = answerTags(level, request, parsed);
      const datasets: JsonDataset[] = [];
      const patientIds = new Set<number>();
      const requestIds = new Set<number>();
      let skipped = 0;
      let isTruncated = false;
      let after = '';
      for (;;) {
        const rows = await readGroupPage(database.db, {
          group: GROUP_OF[level],
          after,
          limit: PAGE_ROWS,
          uids,
          keys: sqlKeys.filters,
        });
        if (rows.length === 0) break;
        after = rows.at(-1)!.key;
        const filed = await readFiledPatients(
          database.db,
          rows.map((r) => r.values.study_instance_uid ?? ''),
          config.institutionCode,
        );
        const shown = request.reader.isRequestAdmin
          ? undefined
          : await readFiledRequests(
              database.db,
              rows.map((r) => r.requestId),
            );
        const submitters =
          shown === undefined
            ? new Map<number, number>()
            : await readRequestSubmitters(
                database.db,
                rows.filter((r) => !shown.has(r.requestId)).map((r) => r.requestId),
              );
        for (const row of rows) {
          const patient = filed.get(row.values.study_instance_uid ?? '');
          if (
            shown !== undefined &&
            !shown.has(row.requestId) &&
            !mayRead(request.reader, submitters.get(row.requestId))
          )
            continue;
          const values = valuesOf(row, patient?.identifier);
          if (!parsed.keys.every((k) => matchesValue(k.vr, k.value, values.get(k.tag) ?? ''))) continue;
          if (skipped < parsed.offset) {
            skipped += 1;
            continue;
          }
          if (datasets.length >= wanted) {
            isTruncated = true;
            break;
          }
          datasets.push(datasetOf(row, values, tags, vrOf, request.baseUrl, level));
          if (patient !== undefined) patientIds.add(patient.patientId);
          requestIds.add(row.requestId);
        }
        if (isTruncated || rows.length < PAGE_ROWS) break;
      }
      return {
        datasets,
        // A `limit` the caller chose is no truncation: it asked for that page.
        isTruncated: isTruncated && (parsed.limit === undefined || parsed.limit > maxAnswers),
        unsupported: parsed.unsupported,
        patientIds: [...patientIds],
        requestIds: [...requestIds],
      };
    },
  };
}

function empty(unsupported: readonly string[]): QidoAnswer {
  return { datasets: [], isTruncated: false, unsupported, patientIds: [], requestIds: [] };
}

function mayRead(reader: RequestReader, submitter: number | undefined): boolean {
  return reader.isRequestAdmin || (submitter !== undefined && mayReadRequest(reader, submitter));
}

/** The tags an answer carries: the level's defaults (and its parents' above a path scope), the keys, includefield. */
function answerTags(level: Level, request: QidoRequest, parsed: ParsedQuery): number[] {
  const tags = new Set<number>(DEFAULT_TAGS[level as 'STUDY' | 'SERIES' | 'IMAGE']);
  // Every answer names its place in the hierarchy.
  if (level !== 'STUDY') tags.add(STUDY_UID);
  if (level === 'IMAGE') tags.add(SERIES_UID);
  // Searches across studies (or series) carry the attributes of the levels above (PS3.18 10.6.3.3.1).
  if (level !== 'STUDY' && request.studyUid === undefined) for (const t of DEFAULT_TAGS.STUDY) tags.add(t);
  if (level === 'IMAGE' && request.seriesUid === undefined) for (const t of DEFAULT_TAGS.SERIES) tags.add(t);
  for (const key of parsed.keys) tags.add(key.tag);
  const inScope = (tag: number) => {
    const attribute = ATTRIBUTES.get(tag);
    return attribute !== undefined && LEVEL_RANK[attribute.level] <= LEVEL_RANK[level];
  };
  for (const tag of parsed.include === 'all' ? ATTRIBUTES.keys() : parsed.include) tags.add(tag);
  // Counts of a level answer that level only (a series' instance count is not an instance's).
  return [...tags].filter(inScope).sort((a, b) => a - b);
}

function datasetOf(
  row: GroupRow,
  values: ReadonlyMap<number, string>,
  tags: readonly number[],
  vrOf: ReadonlyMap<number, string>,
  baseUrl: string,
  level: Level,
): JsonDataset {
  const dataset: JsonDataset = {};
  for (const tag of tags) {
    const vr = vrOf.get(tag) ?? 'UN';
    dataset[tagKey(tag)] = elementOf(vr, values.get(tag) ?? '');
  }
  const study = row.values.study_instance_uid ?? '';
  const series = row.values.series_instance_uid ?? '';
  let url = `${baseUrl}/studies/${study}`;
  if (level !== 'STUDY') url += `/series/${series}`;
  if (level === 'IMAGE') url += `/instances/${row.values.sop_instance_uid ?? ''}`;
  dataset[tagKey(RETRIEVE_URL)] = { vr: 'UR', Value: [url] };
  return Object.fromEntries(Object.entries(dataset).sort(([a], [b]) => a.localeCompare(b)));
}

/** One value in the JSON model: none for an empty value, PN as its alphabetic group, numbers as numbers. */
function elementOf(vr: string, text: string): JsonElement {
  if (text === '') return { vr };
  const values = text.split('\\');
  if (vr === 'PN')
    return {
      vr,
      Value: values.map((v) => {
        const [alphabetic, ideographic, phonetic] = v.split('=');
        return {
          ...(alphabetic ? { Alphabetic: alphabetic } : {}),
          ...(ideographic ? { Ideographic: ideographic } : {}),
          ...(phonetic ? { Phonetic: phonetic } : {}),
        };
      }),
    };
  if (NUMBER_VRS.has(vr)) {
    const numbers = values.map((v) => Number(v.trim()));
    if (numbers.every((n) => Number.isFinite(n))) return { vr, Value: numbers };
  }
  return { vr, Value: values };
}
