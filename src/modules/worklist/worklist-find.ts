/**
 * The Modality Worklist C-FIND (PS3.4 K): one query, answered from the bookings of OpenEyes's automatic
 * worklists, one identifier per matching entry, then the final status.
 *
 * - Entries: a `worklist_patient` row of a worklist with a definition, whose patient is not deleted and
 *   has an identifier of the definition's type (that is its Patient ID; a booking without one is skipped,
 *   for the device could not file against it). Its scheduled date and time are `when` (else the
 *   worklist's start) in `TIME_ZONE`. Study Instance UID, accession number, Requested Procedure ID and
 *   step id are handed out once per booking and kept (`mwl_entry`).
 * - Which bookings a caller sees: its station's (`DICOM_WORKLIST_STATIONS_FILE`) worklist definitions
 *   and site, with the station's modality, AE title and name in the step; a caller without a station
 *   sees every worklist, its AE title as the step's Scheduled Station AE Title, and the Modality it asks
 *   for (a booking carries none), so that neither key excludes anything.
 * - The database is read in pages of booking ids, so that a query matching everything reads no more
 *   than the answers it sends: after `DICOM_WORKLIST_MAX_ANSWERS` answers, one more match ends the
 *   query with A700. A cancel (C-CANCEL-RQ) is seen between answers and ends it with FE00.
 * - Logs: counts and statuses, never a value of the query or of an answer.
 */
import type { Config } from '../../config.ts';
import type { Database } from '../../db/database.ts';
import { formatDateTime, parseDateTime, wallClockFormat } from '../../db/stored-time.ts';
import type { Logger } from '../../logger.ts';
import { encodeAnswer } from './answer-encoding.ts';
import { readIdentifier } from './identifier.ts';
import type { WorklistCharacterSet, WorklistStation } from '../../site-files/worklist-stations.ts';
import type { BookingFilter, BookingRow, EntryIds, OtherIdentifierRow } from './worklist.queries.ts';
import { ensureEntryIds, readBookingAttributes, readBookingsPage } from './worklist.queries.ts';
import type { QueryKey, WorklistEntryValues, WorklistQuery } from './worklist-query.ts';
import {
  FIND_STATUS,
  TAG,
  answerNeedsCharacterSet,
  answerOf,
  hasUnsupportedMatchingKey,
  matchesQuery,
  readQuery,
  stepDateRange,
} from './worklist-query.ts';

/** Bookings read per statement. */
const PAGE_ROWS = 200;
const DAY_MS = 86_400_000;
const QUARTER_HOUR_MS = 900_000;

export interface WorklistFindRequest {
  /** The identifier's bytes, as the PDU gate read them. */
  readonly identifier: Buffer;
  readonly isExplicitVr: boolean;
  readonly callingAeTitle: string;
}

/** Where the answers go: each pending answer is sent, and the next waits until the peer can take it. */
export interface WorklistFindSink {
  answer(identifier: Buffer, status: number): Promise<void>;
  isCancelled(): boolean;
}

export interface WorklistFindOutcome {
  readonly status: number;
  readonly comment?: string;
  readonly answers: number;
}

export interface WorklistFinder {
  find(request: WorklistFindRequest, sink: WorklistFindSink): Promise<WorklistFindOutcome>;
}

export interface WorklistFinderDeps {
  readonly database: Database;
  readonly config: Config;
  readonly logger: Logger;
}

export function createWorklistFinder(deps: WorklistFinderDeps): WorklistFinder {
  const { database, config } = deps;
  const stations = new Map(config.worklist.stations.map((s) => [s.aeTitle, s]));
  const localFormat = wallClockFormat(config.timeZone);
  const physicianAttribute = config.worklist.physicianAttribute.toLowerCase();
  const offsets = new Map<number, number>();

  return {
    async find(request, sink) {
      const reading = readIdentifier(request.identifier, request.isExplicitVr);
      if (!reading.ok)
        return { status: FIND_STATUS.unableToProcess, comment: 'identifier not readable', answers: 0 };
      const parsed = readQuery(reading.elements);
      if (!parsed.ok) return { status: parsed.status, comment: parsed.comment, answers: 0 };
      const { query } = parsed;
      const station = stations.get(request.callingAeTitle);
      const characterSet: WorklistCharacterSet =
        query.characterSet ?? station?.characterSet ?? config.worklist.characterSet;
      const dates = stepDateRange(query);
      const filter = {
        ...(dates?.low !== undefined ? { fromStored: storedBound(dates.low, -1.5 * DAY_MS) } : {}),
        ...(dates?.high !== undefined ? { toStored: storedBound(dates.high, 1.5 * DAY_MS) } : {}),
        ...(station?.worklistDefinitionIds !== undefined
          ? { definitionIds: station.worklistDefinitionIds }
          : {}),
        ...(station?.siteId !== undefined ? { siteId: station.siteId } : {}),
        ...sqlKeysOf(query),
      };
      const stepContext = stepValuesOf(query, station, request.callingAeTitle);
      let answers = 0;
      let pendingStatus: number | undefined;
      let afterId = 0;
      for (;;) {
        if (sink.isCancelled()) return { status: FIND_STATUS.cancel, answers };
        const page = await readBookingsPage(database.db, { ...filter, afterId, limit: PAGE_ROWS });
        const { rows } = page;
        afterId = page.lastId;
        const matched = (await entriesOf(rows, page.identifiers)).filter((entry) =>
          matchesQuery(query, entry.values, { isStationless: station === undefined }),
        );
        // Ids are handed out to the entries answered only (one transaction per page).
        const created = await ensureEntryIds(
          database,
          matched.filter((e) => e.studyInstanceUid === undefined).map((e) => e.bookingId),
        );
        for (const entry of matched) {
          if (sink.isCancelled()) return { status: FIND_STATUS.cancel, answers };
          if (answers >= config.worklist.maxAnswers) {
            deps.logger.warn({ answers }, 'worklist C-FIND stopped at DICOM_WORKLIST_MAX_ANSWERS');
            return {
              status: FIND_STATUS.outOfResources,
              comment: 'more matches than DICOM_WORKLIST_MAX_ANSWERS: narrow the query',
              answers,
            };
          }
          const values = withIds(entry, created.get(entry.bookingId));
          pendingStatus ??= hasUnsupportedMatchingKey(query, values)
            ? FIND_STATUS.pendingWithUnsupportedKeys
            : FIND_STATUS.pending;
          const answer = answerOf(query, values);
          if (answerNeedsCharacterSet(answer))
            answer.push({ tag: TAG.specificCharacterSet, vr: 'CS', value: characterSet });
          await sink.answer(
            encodeAnswer(answer, { isExplicitVr: request.isExplicitVr, characterSet }),
            pendingStatus,
          );
          answers += 1;
        }
        if (page.isLast) break;
      }
      return { status: FIND_STATUS.success, answers };

      /**
       * The entries of a page: bookings with a Patient ID and their values. One without ids handed out
       * yet is matched with its accession number to be (the booking's id) and no Study Instance UID (none
       * exists that a query could name).
       */
      async function entriesOf(
        rows: readonly BookingRow[],
        identifiers: readonly OtherIdentifierRow[],
      ): Promise<PageEntry[]> {
        const usable = rows.filter((r) => r.identifier !== null && r.identifier !== '');
        const attributes = await readBookingAttributes(
          database.db,
          usable.map((r) => r.id),
        );
        const identifiersOf = Map.groupBy(identifiers, (i) => i.patientId);
        const physicians = new Map<number, string | null>();
        for (const a of attributes)
          if (a.name.toLowerCase() === physicianAttribute && !physicians.has(a.bookingId))
            physicians.set(a.bookingId, a.value);
        return usable.map((row) => {
          const ids = {
            studyInstanceUid: row.studyInstanceUid ?? '',
            accessionNumber: row.accessionNumber ?? String(row.id),
          };
          const physician = physicians.get(row.id);
          const others = (identifiersOf.get(row.patientId) ?? [])
            .filter((i) => i.typeId !== row.identifierTypeId)
            .map((i) => ({ patientId: i.value, issuer: i.issuer ?? '' }));
          const scheduled = localParts(row.when ?? row.start);
          const physicianName = physician === undefined || physician === null ? '' : asPersonName(physician);
          const description = row.worklistName.slice(0, 64);
          const values: WorklistEntryValues = {
            attributes: new Map<number, string>([
              [TAG.patientName, personName(row.lastName, row.firstName, row.title)],
              [TAG.patientId, row.identifier!],
              [TAG.issuerOfPatientId, row.issuer ?? ''],
              [TAG.patientBirthDate, (row.dob ?? '').replace(/-/g, '').slice(0, 8)],
              [TAG.patientSex, sexOf(row.gender)],
              [TAG.otherPatientIds, others.map((o) => o.patientId).join('\\')],
              [TAG.accessionNumber, ids.accessionNumber],
              [TAG.requestedProcedureId, ids.accessionNumber],
              [TAG.studyInstanceUid, ids.studyInstanceUid],
              [TAG.requestedProcedureDescription, description],
              [TAG.referringPhysicianName, physicianName],
              [TAG.requestingPhysician, physicianName],
              [TAG.requestedProcedurePriority, ''],
              [TAG.admissionId, ''],
            ]),
            step: new Map<number, string>([
              [TAG.modality, stepContext.modality],
              [TAG.scheduledStationAeTitle, stepContext.aeTitle],
              [TAG.stepStartDate, scheduled?.date ?? ''],
              [TAG.stepStartTime, scheduled?.time ?? ''],
              [TAG.scheduledPerformingPhysicianName, ''],
              [TAG.stepDescription, description],
              [TAG.stepId, ids.accessionNumber],
              [TAG.scheduledStationName, stepContext.stationName],
              [TAG.stepLocation, ''],
              [TAG.stepStatus, 'SCHEDULED'],
            ]),
            otherPatientIds: others,
          };
          return {
            bookingId: row.id,
            ...(row.studyInstanceUid !== null ? { studyInstanceUid: row.studyInstanceUid } : {}),
            values,
          };
        });
      }
    },
  };

  /** A stored date-time `marginMs` beyond the start (or end) of a local `YYYYMMDD` day. */
  function storedBound(day: string, marginMs: number): string {
    const base = Date.UTC(Number(day.slice(0, 4)), Number(day.slice(4, 6)) - 1, Number(day.slice(6, 8)));
    const instant = Number.isNaN(base) ? (marginMs < 0 ? 0 : 253_402_300_799_000) : base + marginMs;
    return formatDateTime(new Date(Math.min(Math.max(instant, 0), 253_402_300_799_000)));
  }

  /**
   * `TIME_ZONE`'s offset from UTC (ms) in the quarter hour of UTC holding `instant`. Every zone's
   * offset is a whole number of quarter hours and changes only at a local quarter hour, hence at a UTC
   * quarter hour: one offset holds for the whole quarter. Kept per quarter (at most 10,000, then
   * cleared), for `formatToParts` costs far more than the rest of an answer.
   */
  function offsetAt(instant: Date): number {
    const quarter = Math.floor(instant.getTime() / QUARTER_HOUR_MS);
    let offset = offsets.get(quarter);
    if (offset === undefined) {
      const start = new Date(quarter * QUARTER_HOUR_MS);
      const parts = Object.fromEntries(localFormat.formatToParts(start).map((p) => [p.type, p.value]));
      const wall = Date.UTC(
        Number(parts.year),
        Number(parts.month) - 1,
        Number(parts.day),
        parts.hour === '24' ? 0 : Number(parts.hour),
        Number(parts.minute),
        Number(parts.second),
      );
      offset = wall - start.getTime();
      if (offsets.size >= 10_000) offsets.clear();
      offsets.set(quarter, offset);
    }
    return offset;
  }

  /** The `YYYYMMDD` and `HHMMSS` of a stored date-time in `TIME_ZONE`. */
  function localParts(stored: string | null): { date: string; time: string } | undefined {
    if (stored === null) return undefined;
    const instant = parseDateTime(stored);
    if (instant === undefined) return undefined;
    const local = new Date(instant.getTime() + offsetAt(instant));
    if (Number.isNaN(local.getTime())) return undefined;
    const iso = local.toISOString();
    const year = local.getUTCFullYear();
    if (year < 0 || year > 9999) return undefined;
    return {
      date: `${iso.slice(0, 4)}${iso.slice(5, 7)}${iso.slice(8, 10)}`,
      time: `${iso.slice(11, 13)}${iso.slice(14, 16)}${iso.slice(17, 19)}`,
    };
  }
}

/**
 * What the database can narrow the bookings by before the query's own matching: the Patient ID (a
 * single value, or a wildcard as LIKE) and a list of Study Instance UIDs. Superset of the matches
 * (MariaDB's case-insensitive collations and SQLite's LIKE keep more), never fewer.
 */
function sqlKeysOf(query: WorklistQuery): Pick<BookingFilter, 'patientId' | 'studyInstanceUids'> {
  const valueOf = (tag: number) => {
    const value = query.keys.find((k) => k.tag === tag)?.value;
    return typeof value === 'string' && value !== '' && value !== '*' ? value : undefined;
  };
  const patientId = valueOf(TAG.patientId);
  const uids = valueOf(TAG.studyInstanceUid)
    ?.split('\\')
    .map((u) => u.trim())
    .filter((u) => u !== '');
  return {
    ...(patientId === undefined
      ? {}
      : /[*?]/.test(patientId)
        ? {
            patientId: {
              like: patientId.replace(/[!%_]/g, '!$&').replaceAll('*', '%').replaceAll('?', '_'),
            },
          }
        : { patientId: { exact: patientId } }),
    ...(uids === undefined || uids.length === 0 ? {} : { studyInstanceUids: uids }),
  };
}

/** An entry of a page: its booking, its Study Instance UID if handed out already, its values. */
interface PageEntry {
  readonly bookingId: number;
  readonly studyInstanceUid?: string;
  readonly values: WorklistEntryValues;
}

/** An entry's values with the ids just handed out to it (the accession number is the booking's id). */
function withIds(entry: PageEntry, ids: EntryIds | undefined): WorklistEntryValues {
  if (ids === undefined) return entry.values;
  const attributes = new Map(entry.values.attributes);
  attributes.set(TAG.studyInstanceUid, ids.studyInstanceUid);
  attributes.set(TAG.accessionNumber, ids.accessionNumber);
  attributes.set(TAG.requestedProcedureId, ids.accessionNumber);
  const step = new Map(entry.values.step);
  step.set(TAG.stepId, ids.accessionNumber);
  return { ...entry.values, attributes, step };
}

/** The step's Modality, Scheduled Station AE Title and Station Name for a caller. */
function stepValuesOf(
  query: WorklistQuery,
  station: WorklistStation | undefined,
  callingAeTitle: string,
): { modality: string; aeTitle: string; stationName: string } {
  if (station !== undefined)
    return { modality: station.modality, aeTitle: station.aeTitle, stationName: station.stationName ?? '' };
  const keys: readonly QueryKey[] = query.step === undefined || query.step === 'all' ? [] : query.step;
  const asked = keys.find((k) => k.tag === TAG.modality)?.value;
  const modality = typeof asked === 'string' && !/[*?\\]/.test(asked) ? asked : '';
  return { modality, aeTitle: callingAeTitle, stationName: '' };
}

/**
 * A PN from OpenEyes's contact: `LAST^FIRST^MIDDLE^TITLE`, the first word of the first name as given
 * name and the rest as middle names; `^` and `=` in the data become spaces; each component at most 64
 * characters; trailing empty components dropped.
 */
export function personName(last: string, first: string, title: string | null): string {
  const clean = (text: string) =>
    text
      .replace(/[\^=\\]/g, ' ')
      .replace(/\s+/g, ' ')
      .trim()
      .slice(0, 64);
  const [given = '', ...middle] = clean(first).split(' ');
  return [clean(last), given, middle.join(' '), clean(title ?? '')].join('^').replace(/\^+$/, '');
}

/** A free-text name (a booking's doctor) as a PN: the whole text as the family name. */
function asPersonName(text: string): string {
  return text
    .replace(/[\^=\\]/g, ' ')
    .replace(/\s+/g, ' ')
    .trim()
    .slice(0, 64);
}

/** OpenEyes's gender as DICOM's Patient's Sex: M, F, O (U and O are both "other"), else empty. */
function sexOf(gender: string | null): string {
  const value = (gender ?? '').trim().toUpperCase();
  if (value === 'M' || value === 'F') return value;
  return value === 'U' || value === 'O' ? 'O' : '';
}
