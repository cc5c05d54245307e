/**
 * `PATIENT_MATCH`: finds the one patient the request is about, from the identifier, date of birth and sex
 * in the request (DICOM tags merged by `DICOM_SEED`, else JSON body or form fields), stores its id as
 * `matched_patient_id` in `REQUEST_DATA`, and returns what the chain (`chain.ts`) chooses the rest of
 * the request's processing by: the device profile's filer and whether an image still lacks thumbnails.
 *
 * Matching, in the spirit of the patient search's identifier rule: the identifier is de-spaced (spaces and
 * hyphens removed); for every identifier type whose `validate_regex` matches it after the type's `pad`,
 * the (type, normalised value) pair is searched; in addition a plain case-insensitive match of the
 * de-spaced value on any type is accepted. Deleted identifiers and patients are ignored. The date of birth
 * must be equal; the sex must be equal when the request gives M or F. None or several patients: a
 * retryable error (the patient may be registered later). Missing identifier or date of birth: FAILED at
 * once, since retrying cannot help. The identifier types are read by every batch of the worker (its first
 * match reads them for the others), never from the engine's longer-lived cache: a type missing from a
 * stale list could hide a second patient and let the match choose the wrong one.
 *
 * **A study made for a worklist entry** (`worklistMatch`): a DICOM request whose Study Instance UID,
 * AccessionNumber or Requested Procedure ID is one the Modality Worklist handed out (`findStudyEntry`)
 * is the entry's patient, without the identifier or date of birth (a device may send an empty or
 * differently keyed PatientID). The demographics still count against it: when they match exactly one
 * other patient, or the study's keys name two entries, the request fails with the contradiction and is
 * filed to neither. The entry's firm and subspecialty (its worklist definition's one display context)
 * go into `REQUEST_DATA` for the filers' episode choice. Once the desk has fixed the request's details in
 * the console (`console_edits`), its choice is the one the match follows, by demographics alone.
 *
 * **A patient the PAS knows** (`missingPatients`, the PAS query of `PAS_QUERY_HOST`): when no local
 * patient matches, `prepare` asks the PAS for the identifier, outside any transaction (no lock is held while
 * the PAS answers; the patient is stored in a transaction of its own). A
 * patient the PAS supplies is committed before `run` matches, so the request is matched in the same
 * attempt; a PAS that is down, slow or knows no such patient leaves the request waiting as without a
 * PAS, the reason saying so.
 */
import type { Kysely } from 'kysely';
import type { DialectAdapter } from '../../db/dialect.ts';
import type { DB } from '../../db/schema.ts';
import type { PrepareContext, RoutineContext } from './catalog.ts';
import { PermanentRoutineError, defineFilingRoutine } from './catalog.ts';
import { CONSOLE_EVENT_DATE_KEY, readDeviceDecision } from './device-profile.ts';
import { isImageMime } from '../attachment-data/index.ts';
import { DICOM_STUDY_MNEMONIC, parseStudyRecord } from '../dicom/index.ts';
import type { MissingPatientAnswer, MissingPatientSource } from '../patient/index.ts';
import { matchIdentifier, translatePcre } from '../patient/index.ts';
import type { StudyEntry } from '../worklist/index.ts';
import { findStudyEntry } from '../worklist/index.ts';

export interface PatientCriteria {
  readonly identifier: string;
  readonly dob: string;
  readonly sex: 'M' | 'F' | null;
}

/** The keys each criterion is read from, in order of precedence (each key across every source first). */
export const IDENTIFIER_KEYS = ['dicom_patient_id', 'patient_identifier', 'identifier', 'hos_num', 'nhs_num'];
export const DOB_KEYS = ['dicom_patient_birth_date', 'dob', 'date_of_birth', 'birth_date'];
export const SEX_KEYS = ['dicom_patient_sex', 'sex', 'gender'];

export function firstString(
  sources: readonly Record<string, unknown>[],
  keys: readonly string[],
): string | undefined {
  for (const key of keys) {
    for (const source of sources) {
      const value = source[key];
      if ((typeof value === 'string' && value.trim() !== '') || typeof value === 'number') {
        return String(value).trim();
      }
    }
  }
  return undefined;
}

/** `YYYY-MM-DD` from `YYYY-MM-DD` or DICOM `YYYYMMDD`, or undefined. */
export function normaliseDob(value: string): string | undefined {
  const match = /^(\d{4})-?(\d{2})-?(\d{2})$/.exec(value);
  if (match === null) return undefined;
  const [, y, m, d] = match;
  const date = new Date(`${y}-${m}-${d}T00:00:00Z`);
  return Number.isNaN(date.getTime()) || date.toISOString().slice(0, 10) !== `${y}-${m}-${d}`
    ? undefined
    : `${y}-${m}-${d}`;
}

function normaliseSex(value: string | undefined): 'M' | 'F' | null {
  const letter = value?.trim().charAt(0).toUpperCase();
  return letter === 'M' || letter === 'F' ? letter : null;
}

export interface CriteriaRows {
  readonly REQUEST_DATA?: Record<string, unknown>;
  readonly FORM_DATA?: Record<string, unknown>;
  readonly REQUEST_BLOB?: Record<string, unknown>;
}

/** The objects the criteria are read from, in order of precedence (`REQUEST_DATA` first). */
export function criteriaSources(rows: CriteriaRows): Record<string, unknown>[] {
  const { REQUEST_DATA: requestData = {}, FORM_DATA: form = {}, REQUEST_BLOB: body = {} } = rows;
  const nested = (o: Record<string, unknown>) =>
    o.data !== null && typeof o.data === 'object' && !Array.isArray(o.data)
      ? (o.data as Record<string, unknown>)
      : {};
  return [requestData, nested(body), body, nested(form), form];
}

/** The criteria in the request's JSON rows; throws a permanent error when they are unusable. */
export function criteriaOf(rows: CriteriaRows): PatientCriteria {
  const sources = criteriaSources(rows);
  const identifier = firstString(sources, IDENTIFIER_KEYS);
  const rawDob = firstString(sources, DOB_KEYS);
  if (identifier === undefined) throw new PermanentRoutineError('No patient identifier in the request');
  if (rawDob === undefined) throw new PermanentRoutineError('No date of birth in the request');
  const dob = normaliseDob(rawDob);
  if (dob === undefined) throw new PermanentRoutineError('Unreadable date of birth in the request');
  return { identifier, dob, sex: normaliseSex(firstString(sources, SEX_KEYS)) };
}

export interface IdentifierTypeRule {
  readonly id: number;
  readonly validate_regex: string;
  readonly pad: string | null;
}

/** Every identifier type's validation regex and pad (reference data). */
export async function readIdentifierTypeRules(db: Kysely<DB>): Promise<IdentifierTypeRule[]> {
  return db.selectFrom('patient_identifier_type').select(['id', 'validate_regex', 'pad']).execute();
}

/**
 * The ids of the patients matching `criteria` (at most a few; the caller wants exactly one), given the
 * identifier types' rules (read in the same transaction: a type added meanwhile must not hide a second
 * patient). The statement runs prepared.
 */
export async function findMatchingPatients(
  db: Kysely<DB>,
  dialect: DialectAdapter,
  criteria: PatientCriteria,
  types: readonly IdentifierTypeRule[],
): Promise<number[]> {
  // Patient search's rules: the type's PCRE pattern and pad (search-term.ts), values compared as the
  // database folds case, against the (type, folded value) index.
  const despaced = criteria.identifier.replace(/[\s-]+/g, '');
  const pairs: { typeId: number; value: string }[] = [];
  for (const type of types) {
    const found = matchIdentifier(despaced, { regex: translatePcre(type.validate_regex), pad: type.pad });
    if (found !== undefined) pairs.push({ typeId: type.id, value: dialect.foldCase(found) });
  }
  let query = db
    .selectFrom('patient_identifier as pi')
    .innerJoin('patient as p', 'p.id', 'pi.patient_id')
    .select('p.id')
    .distinct()
    .where('pi.deleted', '=', 0)
    .where('p.deleted', '=', 0)
    .where('p.dob', '=', criteria.dob)
    .where((eb) =>
      eb.or([
        eb(dialect.foldedKey('pi.value'), '=', dialect.foldCase(despaced)),
        ...pairs.map((pair) =>
          eb.and([
            eb('pi.patient_identifier_type_id', '=', pair.typeId),
            eb(dialect.foldedKey('pi.value'), '=', pair.value),
          ]),
        ),
      ]),
    )
    .limit(5);
  if (criteria.sex !== null) query = query.where('p.gender', '=', criteria.sex);
  return (await dialect.runPreparedOn(db, query.compile())).rows.map((r) => r.id);
}

/** What `PATIENT_MATCH` found beside the patient: what the chain runs next depends on it. */
export interface PatientMatchOutcome {
  /** The device profile's filer (`readDeviceDecision`), `generic` when none was chosen. */
  readonly filer: 'biometry' | 'generic';
  readonly hasImagesWithoutThumbnails: boolean;
}

export interface PatientMatchOptions {
  /** Asked for an identifier no local patient matches (the PAS); without it, the database alone. */
  readonly missingPatients?: MissingPatientSource;
}

/** Why no patient matched, after the PAS was asked (words only, never the criteria's values). */
function pasNote(answer: MissingPatientAnswer | undefined): string {
  switch (answer?.kind) {
    case undefined:
      return '';
    case 'not-found':
      return ' (the PAS knows no patient of this identifier)';
    case 'unavailable':
      return ` (the PAS gave no answer: ${answer.reason})`;
    case 'found':
      return " (the PAS's patient of this identifier has another date of birth or sex)";
  }
}

/** `PATIENT_MATCH`, asking `options.missingPatients` for a patient no local one matches. */
export function createPatientMatchRoutine(options: PatientMatchOptions = {}) {
  const { missingPatients } = options;
  return defineFilingRoutine<MissingPatientAnswer | undefined, PatientMatchOutcome>({
    name: 'PATIENT_MATCH',
    timeoutMs: 30_000,
    retry: 'backoff',
    ...(missingPatients === undefined
      ? {}
      : { prepare: (ctx: PrepareContext) => askForMissingPatient(ctx, missingPatients) }),
    run: (ctx, asked) => matchPatient(ctx, asked),
  });
}

/**
 * The PAS's answer for the request's identifier when it names no worklist entry, has usable criteria
 * and no local patient matches them; undefined when the PAS was not asked. Reads only.
 */
async function askForMissingPatient(
  ctx: PrepareContext,
  source: MissingPatientSource,
): Promise<MissingPatientAnswer | undefined> {
  // One after the other: where the engine has row locks, `ctx.db` is the claim's one connection.
  const rows = {
    REQUEST_DATA: await ctx.readText('REQUEST_DATA'),
    FORM_DATA: await ctx.readText('FORM_DATA'),
    REQUEST_BLOB: await ctx.readText('REQUEST_BLOB'),
  };
  const studyRow = await ctx.readText(DICOM_STUDY_MNEMONIC);
  const criteria = optionalCriteriaOf(rows);
  if (criteria === undefined) return undefined;
  try {
    // A study made for a worklist entry is its patient's; a contradiction fails in `run`.
    if ((await worklistEntryOf(ctx.db, rows.REQUEST_DATA, studyRow)) !== undefined) return undefined;
  } catch (error) {
    if (error instanceof PermanentRoutineError) return undefined;
    throw error;
  }
  const ids = await findMatchingPatients(
    ctx.db,
    ctx.dialect,
    criteria,
    await readIdentifierTypeRules(ctx.db),
  );
  if (ids.length > 0) return undefined;
  const answer = await source.findMissingPatient(criteria.identifier);
  ctx.log(
    answer.kind === 'found'
      ? `the PAS supplied patient ${answer.patientId}`
      : `asked the PAS: ${answer.kind}`,
  );
  return answer;
}

/** `run`: the worklist entry's patient, else the one patient the criteria match. */
async function matchPatient(
  ctx: RoutineContext,
  asked: MissingPatientAnswer | undefined,
): Promise<PatientMatchOutcome> {
  const { texts, payloads } = await ctx.readRequest([
    'REQUEST_DATA',
    'FORM_DATA',
    'REQUEST_BLOB',
    DICOM_STUDY_MNEMONIC,
  ]);
  const requestData = texts.REQUEST_DATA ?? {};
  const outcome: PatientMatchOutcome = {
    filer: readDeviceDecision(requestData)?.filer === 'biometry' ? 'biometry' : 'generic',
    hasImagesWithoutThumbnails: payloads.some((p) => isImageMime(p.mime_type) && !p.hasThumbnails),
  };
  const entry = await worklistEntryOf(ctx.trx, requestData, texts[DICOM_STUDY_MNEMONIC]);
  if (entry !== undefined) {
    const types = await ctx.batchReference('identifier type rules', readIdentifierTypeRules);
    const criteria = optionalCriteriaOf(texts);
    const ids =
      criteria === undefined ? [] : await findMatchingPatients(ctx.trx, ctx.dialect, criteria, types);
    if (ids.length === 1 && ids[0] !== entry.patientId)
      throw new PermanentRoutineError(
        `The study names worklist entry ${entry.bookingId} (by ${entry.namedBy.join(', ')}), whose patient ` +
          `is not the one patient the study's identifier and date of birth match: filed to neither; ` +
          `choose the patient in the console`,
      );
    await ctx.mergeRequestData({
      matched_patient_id: entry.patientId,
      device_worklist_booking_id: entry.bookingId,
      device_worklist_firm_id: entry.firmId,
      device_worklist_subspecialty_id: entry.subspecialtyId,
    });
    ctx.log(
      `matched patient ${entry.patientId} through worklist entry ${entry.bookingId} (by ${entry.namedBy.join(', ')})`,
    );
    return outcome;
  }
  const criteria = criteriaOf(texts);
  const types = await ctx.batchReference('identifier type rules', readIdentifierTypeRules);
  const ids = await findMatchingPatients(ctx.trx, ctx.dialect, criteria, types);
  // The reason a person reads on the waiting request ("Waiting for a patient: no patient matches ..."):
  // the criteria by name only, never their values.
  const criteriaNames =
    criteria.sex === null ? 'the identifier and date of birth' : 'the identifier, date of birth and sex';
  if (ids.length === 0) throw new Error(`No patient matches ${criteriaNames}${pasNote(asked)}`);
  if (ids.length > 1)
    throw new Error(`${ids.length} patients match ${criteriaNames}; choose the patient in the console`);
  await ctx.mergeRequestData({ matched_patient_id: ids[0] });
  ctx.log(`matched patient ${ids[0]}`);
  return outcome;
}

/** `PATIENT_MATCH` from the database alone. */
export const patientMatchRoutine = createPatientMatchRoutine();

/** The criteria when the request has usable ones, else undefined (a worklist entry needs none). */
function optionalCriteriaOf(rows: CriteriaRows): PatientCriteria | undefined {
  try {
    return criteriaOf(rows);
  } catch (error) {
    if (error instanceof PermanentRoutineError) return undefined;
    throw error;
  }
}

/**
 * Whether the console's edit history (`console_edits`) holds a chosen patient or a changed criterion: a
 * study date given alone (`console_event_date`) leaves the worklist entry in force.
 */
function hasDeskCriteria(edits: unknown): boolean {
  if (!Array.isArray(edits)) return false;
  return edits.some((edit: unknown) => {
    if (edit === null || typeof edit !== 'object') return false;
    const { patientId, changes } = edit as { patientId?: unknown; changes?: unknown };
    if (typeof patientId === 'number') return true;
    return (
      changes !== null &&
      typeof changes === 'object' &&
      Object.keys(changes).some((key) => key !== CONSOLE_EVENT_DATE_KEY)
    );
  });
}

/**
 * The keys that name a study's worklist entry: its study record's (`DICOM_STUDY`, what receipt or
 * `DICOM_SEED` read). A request whose `DICOM_SEED` ran before records were stored has none: its keys
 * are the ones that `DICOM_SEED` put into `REQUEST_DATA`. A request of another kind has neither.
 */
function worklistKeysOf(
  requestData: Record<string, unknown>,
  studyRow: Record<string, unknown> | undefined,
): { studyInstanceUid?: string; accessionNumber?: string; requestedProcedureId?: string } {
  const usable = (value: unknown) => (typeof value === 'string' && value.trim() !== '' ? value : undefined);
  const record = parseStudyRecord(studyRow);
  if (record !== undefined) {
    const { header } = record;
    return {
      studyInstanceUid: usable(header.StudyInstanceUID),
      accessionNumber: usable(header.AccessionNumber),
      requestedProcedureId: usable(header.RequestedProcedureID),
    };
  }
  return {
    studyInstanceUid: usable(requestData.dicom_study_instance_uid),
    accessionNumber: usable(requestData.dicom_accession_number),
    requestedProcedureId: usable(requestData.dicom_requested_procedure_id),
  };
}

/**
 * The worklist entry a DICOM request's study names (see the file comment); undefined when it names none
 * or the desk has fixed the request's details. Keys that name two entries, or an entry whose patient
 * was deleted, fail the request permanently: retrying cannot resolve either.
 */
async function worklistEntryOf(
  db: Kysely<DB>,
  requestData: Record<string, unknown>,
  studyRow: Record<string, unknown> | undefined,
): Promise<StudyEntry | undefined> {
  if (hasDeskCriteria(requestData.console_edits)) return undefined;
  const keys = worklistKeysOf(requestData, studyRow);
  const finding = await findStudyEntry(db, {
    studyInstanceUid: keys.studyInstanceUid,
    accessionNumber: keys.accessionNumber,
    requestedProcedureIds: keys.requestedProcedureId === undefined ? [] : [keys.requestedProcedureId],
  });
  if (finding.kind === 'none') return undefined;
  if (finding.kind === 'contradiction')
    throw new PermanentRoutineError(
      `The study's worklist keys name ${finding.bookingIds.length} different worklist entries ` +
        `(${finding.bookingIds.join(', ')}): filed to none; choose the patient in the console`,
    );
  if (finding.entry.patientDeleted)
    throw new PermanentRoutineError(
      `The study names worklist entry ${finding.entry.bookingId}, whose patient is deleted: choose the patient in the console`,
    );
  return finding.entry;
}
