/**
 * A Modality Worklist query (PS3.4 K.6.1) read from its identifier, matched against worklist entries and
 * answered with the requested keys.
 *
 * Matching (PS3.4 C.2.2.2): a key without a value, or of `*` only, matches everything and asks for the
 * value (universal matching); a value with `*` (any run) or `?` (one character) is a wildcard match for
 * the string VRs; DA and TM take single values and ranges (`A-B`, `A-`, `-B`, inclusive); UI takes a list
 * of UIDs (`\`); anything else is single value matching, exact, except PN, which is matched without
 * regard to case or accents (the standard lets an SCP do so, and OpenEyes's own name search does). The
 * Scheduled Procedure Step Sequence's one item holds the step's keys (sequence matching); an empty one
 * asks for every attribute of the step. The date and time of the step are matched apart (combined
 * date-time matching needs extended negotiation, which is not offered).
 *
 * Answers carry exactly the requested keys, the value where the entry has one and empty otherwise, plus
 * Specific Character Set when any text is outside ASCII. The query's values are decoded with its
 * Specific Character Set (none, ISO_IR 6, ISO_IR 100 or ISO_IR 192).
 */
import type { AnswerElement } from './answer-encoding.ts';
import { isNonAscii } from './answer-encoding.ts';
import type { DataElement } from './identifier.ts';
import { implicitVrOf } from './identifier.ts';
import type { WorklistCharacterSet } from '../../site-files/worklist-stations.ts';

export const TAG = {
  specificCharacterSet: 0x00080005,
  accessionNumber: 0x00080050,
  modality: 0x00080060,
  referringPhysicianName: 0x00080090,
  referencedStudySequence: 0x00081110,
  referencedPatientSequence: 0x00081120,
  patientName: 0x00100010,
  patientId: 0x00100020,
  issuerOfPatientId: 0x00100021,
  typeOfPatientId: 0x00100022,
  patientBirthDate: 0x00100030,
  patientSex: 0x00100040,
  otherPatientIds: 0x00101000,
  otherPatientIdsSequence: 0x00101002,
  studyInstanceUid: 0x0020000d,
  requestingPhysician: 0x00321032,
  requestedProcedureDescription: 0x00321060,
  requestedProcedureCodeSequence: 0x00321064,
  admissionId: 0x00380010,
  scheduledStationAeTitle: 0x00400001,
  stepStartDate: 0x00400002,
  stepStartTime: 0x00400003,
  scheduledPerformingPhysicianName: 0x00400006,
  stepDescription: 0x00400007,
  scheduledProtocolCodeSequence: 0x00400008,
  stepId: 0x00400009,
  scheduledStationName: 0x00400010,
  stepLocation: 0x00400011,
  stepStatus: 0x00400020,
  stepSequence: 0x00400100,
  requestedProcedureId: 0x00401001,
  requestedProcedurePriority: 0x00401003,
} as const;

/** The attributes of a Scheduled Procedure Step item the entries carry, in tag order, with their VRs. */
export const STEP_ATTRIBUTES: readonly (readonly [number, string])[] = [
  [TAG.modality, 'CS'],
  [TAG.scheduledStationAeTitle, 'AE'],
  [TAG.stepStartDate, 'DA'],
  [TAG.stepStartTime, 'TM'],
  [TAG.scheduledPerformingPhysicianName, 'PN'],
  [TAG.stepDescription, 'LO'],
  [TAG.stepId, 'SH'],
  [TAG.scheduledStationName, 'SH'],
  [TAG.stepLocation, 'SH'],
  [TAG.stepStatus, 'CS'],
];

/** What one worklist entry answers: its top-level values and its step's values, by tag. */
export interface WorklistEntryValues {
  readonly attributes: ReadonlyMap<number, string>;
  readonly step: ReadonlyMap<number, string>;
  readonly otherPatientIds: readonly { readonly patientId: string; readonly issuer: string }[];
}

export interface QueryKey {
  readonly tag: number;
  readonly vr: string;
  /** The decoded value, trimmed; for a sequence, its items' keys. */
  readonly value: string | readonly (readonly QueryKey[])[];
}

export interface WorklistQuery {
  /** The character set the query named (undefined: none, or the default repertoire). */
  readonly characterSet: WorklistCharacterSet | undefined;
  /** Top-level keys, the step sequence aside. */
  readonly keys: readonly QueryKey[];
  /** The step's keys; `'all'` for an empty sequence; undefined when the sequence is not asked for. */
  readonly step: readonly QueryKey[] | 'all' | undefined;
}

export type QueryReading =
  | { readonly ok: true; readonly query: WorklistQuery }
  | { readonly ok: false; readonly status: number; readonly comment: string };

/** C-FIND statuses of the Basic Worklist Management service (PS3.4 K.4.1.1.4) and C-FIND (C.4.1.1.4). */
export const FIND_STATUS = {
  success: 0x0000,
  pending: 0xff00,
  /** Pending, and one or more optional keys were not supported for matching. */
  pendingWithUnsupportedKeys: 0xff01,
  cancel: 0xfe00,
  outOfResources: 0xa700,
  identifierDoesNotMatch: 0xa900,
  unableToProcess: 0xc000,
} as const;

/** Reads a query from the identifier's elements. */
export function readQuery(elements: readonly DataElement[]): QueryReading {
  const charsetElement = elements.find((e) => e.tag === TAG.specificCharacterSet);
  const declared =
    charsetElement !== undefined && Buffer.isBuffer(charsetElement.value)
      ? charsetElement.value
          .toString('latin1')
          .replace(/[\0 ]+$/, '')
          .trim()
      : '';
  let characterSet: WorklistCharacterSet | undefined;
  if (declared === 'ISO_IR 100' || declared === 'ISO_IR 192') characterSet = declared;
  else if (declared !== '' && declared !== 'ISO_IR 6')
    return {
      ok: false,
      status: FIND_STATUS.unableToProcess,
      comment: 'Specific Character Set not supported (ISO_IR 100 or ISO_IR 192)',
    };
  const decode = (bytes: Buffer) => bytes.toString(characterSet === 'ISO_IR 192' ? 'utf8' : 'latin1');
  const toKeys = (list: readonly DataElement[]): QueryKey[] =>
    list
      .filter((e) => (e.tag & 0xffff) !== 0 && e.tag !== TAG.specificCharacterSet && e.tag >>> 16 !== 0x0002)
      .map((e) => {
        const vr = e.vr === 'UN' ? implicitVrOf(e.tag) : e.vr;
        if (!Buffer.isBuffer(e.value)) return { tag: e.tag, vr: 'SQ', value: e.value.map(toKeys) };
        return { tag: e.tag, vr, value: trimValue(decode(e.value), vr) };
      });
  const all = toKeys(elements);
  const stepKey = all.find((k) => k.tag === TAG.stepSequence);
  let step: WorklistQuery['step'];
  if (stepKey !== undefined) {
    if (typeof stepKey.value === 'string') {
      if (stepKey.value !== '')
        return {
          ok: false,
          status: FIND_STATUS.identifierDoesNotMatch,
          comment: 'Scheduled Procedure Step Sequence is not a sequence',
        };
      step = 'all';
    } else step = stepKey.value.length === 0 || stepKey.value[0]!.length === 0 ? 'all' : stepKey.value[0];
  }
  return { ok: true, query: { characterSet, keys: all.filter((k) => k.tag !== TAG.stepSequence), step } };
}

/** The step's single or range date value of a query, for the database's coarse date filter. */
export function stepDateRange(query: WorklistQuery): { low?: string; high?: string } | undefined {
  if (query.step === undefined || query.step === 'all') return undefined;
  const key = query.step.find((k) => k.tag === TAG.stepStartDate);
  if (key === undefined || typeof key.value !== 'string' || key.value === '' || key.value === '*')
    return undefined;
  const range = rangeOf(key.value, normaliseDate);
  if (range === undefined) return { low: '99999999', high: '00000000' };
  return range;
}

/**
 * The bounds of a DA key's range matching (`YYYYMMDD`, either end open), as {@link matchesValue} reads
 * them; undefined when the key matches no date.
 */
export function dateRangeOf(pattern: string): { low?: string; high?: string } | undefined {
  return rangeOf(pattern, normaliseDate);
}

/** The options of matching that depend on the caller. */
export interface MatchContext {
  /**
   * The caller has no station: the Modality and Scheduled Station AE Title it sends exclude nothing (an
   * OpenEyes booking carries neither).
   */
  readonly isStationless: boolean;
}

/** True when `entry` matches every key of `query`. */
export function matchesQuery(
  query: WorklistQuery,
  entry: WorklistEntryValues,
  context: MatchContext,
): boolean {
  for (const key of query.keys) {
    if (typeof key.value !== 'string') continue;
    if (!matchesValue(key.vr, key.value, entry.attributes.get(key.tag) ?? '')) return false;
  }
  if (query.step !== undefined && query.step !== 'all') {
    for (const key of query.step) {
      if (typeof key.value !== 'string') continue;
      if (context.isStationless && (key.tag === TAG.modality || key.tag === TAG.scheduledStationAeTitle))
        continue;
      if (!matchesValue(key.vr, key.value, entry.step.get(key.tag) ?? '')) return false;
    }
  }
  return true;
}

/** True when a top-level or step key asks to match on an attribute the entries do not carry. */
export function hasUnsupportedMatchingKey(query: WorklistQuery, entry: WorklistEntryValues): boolean {
  const unsupported = (key: QueryKey, known: ReadonlyMap<number, string>) =>
    typeof key.value === 'string' && key.value !== '' && key.value !== '*' && !known.has(key.tag);
  return (
    query.keys.some((k) => unsupported(k, entry.attributes)) ||
    (query.step !== undefined && query.step !== 'all' && query.step.some((k) => unsupported(k, entry.step)))
  );
}

/** The answer identifier of `entry` for `query` (requested keys only). */
export function answerOf(query: WorklistQuery, entry: WorklistEntryValues): AnswerElement[] {
  const answer: AnswerElement[] = [];
  for (const key of query.keys) {
    if (typeof key.value === 'string') {
      answer.push({ tag: key.tag, vr: key.vr, value: entry.attributes.get(key.tag) ?? '' });
    } else if (key.tag === TAG.otherPatientIdsSequence) {
      const asked = key.value[0];
      answer.push({
        tag: key.tag,
        vr: 'SQ',
        value: entry.otherPatientIds.map((id) => {
          const values = new Map<number, string>([
            [TAG.patientId, id.patientId],
            [TAG.issuerOfPatientId, id.issuer],
            [TAG.typeOfPatientId, 'TEXT'],
          ]);
          const tags =
            asked === undefined || asked.length === 0
              ? [...values.keys()].map((tag) => ({ tag, vr: tag === TAG.typeOfPatientId ? 'CS' : 'LO' }))
              : asked;
          return tags.map(({ tag, vr }) => ({ tag, vr, value: values.get(tag) ?? '' }));
        }),
      });
    } else {
      answer.push({ tag: key.tag, vr: 'SQ', value: [] });
    }
  }
  if (query.step !== undefined) {
    const keys =
      query.step === 'all' ? STEP_ATTRIBUTES.map(([tag, vr]) => ({ tag, vr, value: '' })) : query.step;
    answer.push({
      tag: TAG.stepSequence,
      vr: 'SQ',
      value: [
        keys.map((k) =>
          typeof k.value === 'string'
            ? { tag: k.tag, vr: k.vr, value: entry.step.get(k.tag) ?? '' }
            : { tag: k.tag, vr: 'SQ', value: [] },
        ),
      ],
    });
  }
  return answer;
}

/** True when any text of an answer is outside ASCII. */
export function answerNeedsCharacterSet(answer: readonly AnswerElement[]): boolean {
  return answer.some((e) =>
    typeof e.value === 'string' ? isNonAscii(e.value) : e.value.some((item) => answerNeedsCharacterSet(item)),
  );
}

/** Matches one key's value (already trimmed) against an entry's value of that attribute. */
export function matchesValue(vr: string, pattern: string, actual: string): boolean {
  if (pattern === '' || pattern === '*') return true;
  switch (vr) {
    case 'DA':
      return matchesRange(pattern, actual, normaliseDate);
    case 'TM':
      return matchesRange(pattern, actual, normaliseTime);
    case 'DT':
      return matchesRange(pattern, actual, (v) => v);
    case 'UI':
      return pattern.split('\\').some((uid) => uid.trim() === actual);
    case 'PN': {
      const folded = foldName(pattern.split('=')[0]!);
      return hasWildcard(folded) ? wildcard(folded).test(foldName(actual)) : folded === foldName(actual);
    }
    default:
      return hasWildcard(pattern) ? wildcard(pattern).test(actual) : pattern === actual;
  }
}

function matchesRange(pattern: string, actual: string, normalise: (v: string) => string): boolean {
  if (actual === '') return false;
  const value = normalise(actual);
  const range = rangeOf(pattern, normalise);
  if (range === undefined) return false;
  return (range.low === undefined || value >= range.low) && (range.high === undefined || value <= range.high);
}

/** `A-B`, `A-`, `-B` or a single value `A` (= `A-A`); undefined when neither end is a value. */
function rangeOf(
  pattern: string,
  normalise: (v: string) => string,
): { low?: string; high?: string } | undefined {
  const dash = pattern.indexOf('-');
  if (dash === -1) {
    const single = normalise(pattern);
    return { low: single, high: single };
  }
  const low = pattern.slice(0, dash).trim();
  const high = pattern.slice(dash + 1).trim();
  if (low === '' && high === '') return undefined;
  return {
    ...(low !== '' ? { low: normalise(low) } : {}),
    ...(high !== '' ? { high: normalise(high) } : {}),
  };
}

/** `YYYYMMDD` (the ACR-NEMA form `YYYY.MM.DD` too). */
function normaliseDate(value: string): string {
  return value.replace(/\./g, '').slice(0, 8);
}

/** `HHMMSS` from `HH`, `HHMM`, `HHMMSS[.frac]` (and `HH:MM:SS`), padded with zeros. */
function normaliseTime(value: string): string {
  return value.replace(/:/g, '').split('.')[0]!.slice(0, 6).padEnd(6, '0');
}

function hasWildcard(pattern: string): boolean {
  return pattern.includes('*') || pattern.includes('?');
}

function wildcard(pattern: string): RegExp {
  let source = '';
  for (const char of pattern) {
    if (char === '*') source += '.*';
    else if (char === '?') source += '.';
    else source += char.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${source}$`, 'su');
}

/**
 * A person name as PN matching compares it: without case or accents, trailing empty components left
 * out (the query/retrieve index keeps each name in this form too, to match it in SQL).
 */
export function foldName(name: string): string {
  return name.normalize('NFD').replace(/\p{M}/gu, '').toUpperCase().replace(/\^+$/, '');
}

/** A decoded value without its padding (PS3.5 6.2: trailing spaces, and NUL for UI; leading spaces too). */
function trimValue(value: string, vr: string): string {
  const withoutPadding = value.replace(/[\0 ]+$/, '');
  return vr === 'LT' || vr === 'ST' || vr === 'UT' ? withoutPadding : withoutPadding.trimStart();
}
