/**
 * The query/retrieve C-FIND (PS3.4 C.4.1, C.6.1, C.6.2): the Patient Root and Study Root information
 * models at PATIENT, STUDY, SERIES and IMAGE level, answered from `dicom_instance_index` (what receipt
 * read from each instance it kept), one identifier per matching patient, study, series or instance,
 * then the final status.
 *
 * - Matching is the worklist module's (single value, `*` and `?` wildcards, DA/TM ranges, UID lists,
 *   universal; PN without case or accents). Every key of the query level or above that the index holds
 *   is matched (hierarchical keys above the level are matched as any other key: a lenient reading of
 *   C.4.1.3.1.1); keys the index lacks are answered empty, and the pending status is then FF01.
 * - Patient ID: when filing put the study into a patient's event (`device_event`), the answer's Patient
 *   ID is that patient's identifier for `INSTITUTION_CODE` (a LOCAL type of that institution), and a
 *   query's Patient ID matches it; else the Patient ID the device sent. PATIENT level answers each
 *   Patient ID once (the answers so far are remembered: at most `DICOM_QR_MAX_ANSWERS`).
 * - SQL filters the index by the keys it can express (`sqlKeysOf`: an exact Patient ID through a study
 *   list, other values, wildcards as LIKE, DA ranges, names by their folded form), keeping every group
 *   the matching would keep; the matching then runs exactly on the groups returned.
 * - The index is read in pages of the level's key, so that a universal query reads no more than the
 *   answers it sends: after `DICOM_QR_MAX_ANSWERS` answers, one more match ends the query with A700. A
 *   C-CANCEL-RQ is seen between answers and ends it with FE00.
 * - Each page's answers are audited before they are sent (`dicom.find`: the caller's AE title as user
 *   name, its address, the filed patients' ids; an unfiled group's request ids in a `request` row).
 * - Logs: counts and statuses, never a value of the query or of an answer.
 */
import type { Config } from '../../config.ts';
import type { Database } from '../../db/database.ts';
import type { Logger } from '../../logger.ts';
import type { AuditTrail } from '../audit/index.ts';
import type { AnswerElement, QueryKey, WorklistCharacterSet } from '../worklist/index.ts';
import {
  FIND_STATUS,
  dateRangeOf,
  encodeAnswer,
  foldName,
  isNonAscii,
  matchesValue,
  readIdentifier,
  readQuery,
} from '../worklist/index.ts';
import type { GroupColumn, GroupRow, IndexColumn, IndexKeyFilter } from './qr.queries.ts';
import { findStudiesOfPatientId, readFiledPatients, readGroupPage } from './qr.queries.ts';

/** Patient Root Query/Retrieve Information Model - FIND (PS3.4 C.6.1.1). */
export const PATIENT_ROOT_FIND = '1.2.840.10008.5.1.4.1.2.1.1';
/** Study Root Query/Retrieve Information Model - FIND (PS3.4 C.6.2.1). */
export const STUDY_ROOT_FIND = '1.2.840.10008.5.1.4.1.2.2.1';

const PAGE_ROWS = 200;
const QUERY_RETRIEVE_LEVEL = 0x00080052;
const SPECIFIC_CHARACTER_SET = 0x00080005;

export type Level = 'PATIENT' | 'STUDY' | 'SERIES' | 'IMAGE';
export const LEVEL_RANK: Readonly<Record<Level, number>> = { PATIENT: 0, STUDY: 1, SERIES: 2, IMAGE: 3 };

/** An attribute the index answers: its level, and its column or what it is computed from. */
export interface Attribute {
  readonly level: Level;
  readonly column?: IndexColumn;
  readonly computed?: (row: GroupRow) => string;
}

/** The keys of C.6.1.1 / C.6.2.1 the index answers, by tag. */
export const ATTRIBUTES: ReadonlyMap<number, Attribute> = new Map<number, Attribute>([
  [0x00100010, { level: 'PATIENT', column: 'patient_name' }],
  [0x00100020, { level: 'PATIENT', column: 'patient_id' }],
  [0x00100030, { level: 'PATIENT', column: 'patient_birth_date' }],
  [0x00100040, { level: 'PATIENT', column: 'patient_sex' }],
  [0x00080020, { level: 'STUDY', column: 'study_date' }],
  [0x00080030, { level: 'STUDY', column: 'study_time' }],
  [0x00080050, { level: 'STUDY', column: 'accession_number' }],
  [0x00200010, { level: 'STUDY', column: 'study_id' }],
  [0x0020000d, { level: 'STUDY', column: 'study_instance_uid' }],
  [0x00080090, { level: 'STUDY', column: 'referring_physician_name' }],
  [0x00081030, { level: 'STUDY', column: 'study_description' }],
  [0x00080061, { level: 'STUDY', computed: (row) => row.modalities }],
  [0x00201206, { level: 'STUDY', computed: (row) => String(row.series) }],
  [0x00201208, { level: 'STUDY', computed: (row) => String(row.instances) }],
  [0x00080060, { level: 'SERIES', column: 'modality' }],
  [0x00200011, { level: 'SERIES', column: 'series_number' }],
  [0x0020000e, { level: 'SERIES', column: 'series_instance_uid' }],
  [0x0008103e, { level: 'SERIES', column: 'series_description' }],
  [0x00201209, { level: 'SERIES', computed: (row) => String(row.instances) }],
  [0x00200013, { level: 'IMAGE', column: 'instance_number' }],
  [0x00080018, { level: 'IMAGE', column: 'sop_instance_uid' }],
  [0x00080016, { level: 'IMAGE', column: 'sop_class_uid' }],
]);

export const GROUP_OF: Readonly<Record<Level, GroupColumn>> = {
  PATIENT: 'study_instance_uid',
  STUDY: 'study_instance_uid',
  SERIES: 'series_instance_uid',
  IMAGE: 'sop_instance_uid',
};
export const UID_COLUMNS = new Map<number, 'study_instance_uid' | 'series_instance_uid' | 'sop_instance_uid'>(
  [
    [0x0020000d, 'study_instance_uid'],
    [0x0020000e, 'series_instance_uid'],
    [0x00080018, 'sop_instance_uid'],
  ],
);

const PATIENT_ID = 0x00100020;

/** A matching key of a query (a string value), as C-FIND and QIDO-RS read it. */
export interface MatchingKey {
  readonly tag: number;
  readonly vr: string;
  readonly value: string;
}

/**
 * What SQL filters by for `keys` (in scope of the query level): a filter per key SQL can express, the
 * exact Patient ID (answered by a study list, `findStudiesOfPatientId`). Each filter keeps at least the
 * groups `matchesValue` keeps; the matching then runs on what SQL returned. Not filtered: UIDs (the
 * caller's UID lists), TM and DT ranges (their values are compared normalised), the Referring
 * Physician's Name and computed attributes; a key matching every value.
 */
export function sqlKeysOf(
  keys: readonly MatchingKey[],
  institutionCode: string,
): { readonly filters: IndexKeyFilter[]; readonly patientId: string | undefined } {
  const filters: IndexKeyFilter[] = [];
  let patientId: string | undefined;
  for (const key of keys) {
    const { value, vr } = key;
    const column = ATTRIBUTES.get(key.tag)?.column;
    if (column === undefined || UID_COLUMNS.has(key.tag) || /^\**$/.test(value)) continue;
    const hasWildcard = /[*?]/.test(value);
    if (key.tag === PATIENT_ID) {
      if (hasWildcard) filters.push({ kind: 'patientId', pattern: value, institutionCode });
      else patientId = value;
      continue;
    }
    switch (vr) {
      case 'DA': {
        const range = dateRangeOf(value);
        filters.push(
          range === undefined
            ? { kind: 'range', column, low: '99999999', high: '00000000' }
            : { kind: 'range', column, ...range },
        );
        break;
      }
      case 'TM':
      case 'DT':
        break;
      case 'UI':
        filters.push({ kind: 'equals', column, values: value.split('\\').map((u) => u.trim()) });
        break;
      case 'PN': {
        if (column !== 'patient_name') break;
        const folded = foldName(value.split('=')[0]!);
        filters.push(
          /[*?]/.test(folded)
            ? { kind: 'like', column: 'patient_name_key', pattern: folded, isNullKept: true }
            : { kind: 'equals', column: 'patient_name_key', values: [folded], isNullKept: true },
        );
        break;
      }
      default:
        filters.push(
          hasWildcard
            ? { kind: 'like', column, pattern: value }
            : { kind: 'equals', column, values: [value] },
        );
    }
  }
  return { filters, patientId };
}

export interface QrFindRequest {
  readonly sopClassUid: string;
  readonly identifier: Buffer;
  readonly isExplicitVr: boolean;
  readonly callingAeTitle: string;
  readonly address: string;
  /** Names the association in the audit rows. */
  readonly associationId: string;
}

export interface QrFindSink {
  answer(identifier: Buffer, status: number): Promise<void>;
  isCancelled(): boolean;
}

export interface QrFindOutcome {
  readonly status: number;
  readonly comment?: string;
  readonly answers: number;
}

export interface QrFinder {
  find(request: QrFindRequest, sink: QrFindSink): Promise<QrFindOutcome>;
}

export function createQrFinder(deps: {
  readonly database: Database;
  readonly config: Config;
  readonly logger: Logger;
  readonly audit: AuditTrail;
}): QrFinder {
  const { database, config } = deps;
  const maxAnswers = config.dicomNetwork.qrMaxAnswers;

  return {
    async find(request, sink) {
      const reading = readIdentifier(request.identifier, request.isExplicitVr);
      if (!reading.ok)
        return { status: FIND_STATUS.unableToProcess, comment: 'identifier not readable', answers: 0 };
      const parsed = readQuery(reading.elements);
      if (!parsed.ok) return { status: parsed.status, comment: parsed.comment, answers: 0 };
      const { query } = parsed;
      const levelKey = query.keys.find((k) => k.tag === QUERY_RETRIEVE_LEVEL);
      const level = typeof levelKey?.value === 'string' ? levelKey.value.trim().toUpperCase() : '';
      if (!(level in LEVEL_RANK))
        return {
          status: FIND_STATUS.identifierDoesNotMatch,
          comment: 'Query/Retrieve Level missing or not PATIENT, STUDY, SERIES or IMAGE',
          answers: 0,
        };
      const queryLevel = level as Level;
      if (request.sopClassUid === STUDY_ROOT_FIND && queryLevel === 'PATIENT')
        return {
          status: FIND_STATUS.identifierDoesNotMatch,
          comment: 'the Study Root model has no PATIENT level',
          answers: 0,
        };
      const characterSet: WorklistCharacterSet = query.characterSet ?? config.worklist.characterSet;
      const keys = query.keys.filter(
        (k) => k.tag !== QUERY_RETRIEVE_LEVEL && k.tag !== SPECIFIC_CHARACTER_SET,
      );
      const inScope = (key: QueryKey) => {
        const attribute = ATTRIBUTES.get(key.tag);
        return attribute !== undefined && LEVEL_RANK[attribute.level] <= LEVEL_RANK[queryLevel];
      };
      const isUnsupported = keys.some(
        (k) => typeof k.value === 'string' && k.value !== '' && k.value !== '*' && !inScope(k),
      );
      const uids = new Map<'study_instance_uid' | 'series_instance_uid' | 'sop_instance_uid', string[]>();
      for (const key of keys) {
        const column = UID_COLUMNS.get(key.tag);
        if (column === undefined || !inScope(key) || typeof key.value !== 'string') continue;
        if (key.value === '' || /[*?]/.test(key.value)) continue;
        uids.set(
          column,
          key.value.split('\\').map((u) => u.trim()),
        );
      }
      const matching = keys.flatMap((k) =>
        inScope(k) && typeof k.value === 'string' ? [{ tag: k.tag, vr: k.vr, value: k.value }] : [],
      );
      const sqlKeys = sqlKeysOf(matching, config.institutionCode);
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
      const pendingStatus = isUnsupported ? FIND_STATUS.pendingWithUnsupportedKeys : FIND_STATUS.pending;
      const answeredPatients = new Set<string>();
      let answers = 0;
      let after = '';
      const isEmpty = [...uids.values()].some((list) => list.length === 0);
      for (;;) {
        if (sink.isCancelled()) return { status: FIND_STATUS.cancel, answers };
        const rows = isEmpty
          ? []
          : await readGroupPage(database.db, {
              group: GROUP_OF[queryLevel],
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
        const page: { row: GroupRow; patientId: number | undefined; values: Map<number, string> }[] = [];
        for (const row of rows) {
          const patient = filed.get(row.values.study_instance_uid ?? '');
          const values = valuesOf(row, patient?.identifier);
          if (
            !keys.every(
              (k) =>
                !inScope(k) ||
                typeof k.value !== 'string' ||
                matchesValue(k.vr, k.value, values.get(k.tag) ?? ''),
            )
          )
            continue;
          if (queryLevel === 'PATIENT') {
            const patientKey = values.get(0x00100020) ?? '';
            if (answeredPatients.has(patientKey)) continue;
            answeredPatients.add(patientKey);
          }
          page.push({ row, patientId: patient?.patientId, values });
        }
        const isOverLimit = answers + page.length > maxAnswers;
        const sent = isOverLimit ? page.slice(0, maxAnswers - answers) : page;
        if (sent.length > 0)
          await auditPage(
            request,
            sent.map((p) => ({ patientId: p.patientId, requestId: p.row.requestId })),
          );
        for (const entry of sent) {
          if (sink.isCancelled()) return { status: FIND_STATUS.cancel, answers };
          const answer: AnswerElement[] = [{ tag: QUERY_RETRIEVE_LEVEL, vr: 'CS', value: queryLevel }];
          for (const key of keys) {
            if (typeof key.value !== 'string') {
              answer.push({ tag: key.tag, vr: 'SQ', value: [] });
              continue;
            }
            answer.push({
              tag: key.tag,
              vr: key.vr,
              value: inScope(key) ? (entry.values.get(key.tag) ?? '') : '',
            });
          }
          if (answer.some((e) => typeof e.value === 'string' && isNonAscii(e.value)))
            answer.push({ tag: SPECIFIC_CHARACTER_SET, vr: 'CS', value: characterSet });
          await sink.answer(
            encodeAnswer(answer, { isExplicitVr: request.isExplicitVr, characterSet }),
            pendingStatus,
          );
          answers += 1;
        }
        if (isOverLimit) {
          deps.logger.warn({ answers }, 'query/retrieve C-FIND stopped at DICOM_QR_MAX_ANSWERS');
          return {
            status: FIND_STATUS.outOfResources,
            comment: 'more matches than DICOM_QR_MAX_ANSWERS: narrow the query',
            answers,
          };
        }
        if (rows.length < PAGE_ROWS) break;
      }
      return { status: FIND_STATUS.success, answers };
    },
  };

  /** One `dicom.find` row for the filed patients of a page, one for the requests of its unfiled groups. */
  async function auditPage(
    request: QrFindRequest,
    sent: readonly { patientId: number | undefined; requestId: number }[],
  ): Promise<void> {
    const patients = [...new Set(sent.flatMap((s) => (s.patientId === undefined ? [] : [s.patientId])))];
    const requests = [...new Set(sent.flatMap((s) => (s.patientId === undefined ? [s.requestId] : [])))];
    const base = {
      action: 'dicom.find',
      userId: null,
      outcome: 200,
      clientAddress: request.address,
      requestId: request.associationId,
      username: request.callingAeTitle,
      detail: request.sopClassUid === PATIENT_ROOT_FIND ? 'patient root' : 'study root',
    };
    await Promise.all([
      ...(patients.length > 0
        ? [deps.audit.record({ ...base, targetType: 'patient', targetIds: patients })]
        : []),
      ...(requests.length > 0
        ? [deps.audit.record({ ...base, targetType: 'request', targetIds: requests })]
        : []),
    ]);
  }
}

/** The values of a group by tag. */
export function valuesOf(row: GroupRow, filedPatientId: string | undefined): Map<number, string> {
  const values = new Map<number, string>();
  for (const [tag, attribute] of ATTRIBUTES) {
    if (attribute.computed !== undefined) values.set(tag, attribute.computed(row));
    else if (attribute.column !== undefined) values.set(tag, row.values[attribute.column] ?? '');
  }
  if (filedPatientId !== undefined) values.set(0x00100020, filedPatientId);
  return values;
}
