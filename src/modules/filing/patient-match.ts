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
 */
import type { Kysely } from 'kysely';
import type { DialectAdapter } from '../../db/dialect.ts';
import type { DB } from '../../db/schema.ts';
import { PermanentRoutineError, defineFilingRoutine } from './catalog.ts';
import { isImageMime } from '../attachment-data/index.ts';
import { matchIdentifier, translatePcre } from '../patient/index.ts';

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
  /** The device profile's filer (`REQUEST_DATA.device_filer`), `generic` when none was chosen. */
  readonly filer: 'biometry' | 'generic';
  readonly hasImagesWithoutThumbnails: boolean;
}

export const patientMatchRoutine = defineFilingRoutine<unknown, PatientMatchOutcome>({
  name: 'PATIENT_MATCH',
  timeoutMs: 30_000,
  retry: 'backoff',
  run: async (ctx) => {
    const { texts, payloads } = await ctx.readRequest(['REQUEST_DATA', 'FORM_DATA', 'REQUEST_BLOB']);
    const criteria = criteriaOf(texts);
    const types = await ctx.batchReference('identifier type rules', readIdentifierTypeRules);
    const ids = await findMatchingPatients(ctx.trx, ctx.dialect, criteria, types);
    // The reason a person reads on the waiting request ("Waiting for a patient: no patient matches ..."):
    // the criteria by name only, never their values.
    const criteriaNames =
      criteria.sex === null ? 'the identifier and date of birth' : 'the identifier, date of birth and sex';
    if (ids.length === 0) throw new Error(`No patient matches ${criteriaNames}`);
    if (ids.length > 1)
      throw new Error(`${ids.length} patients match ${criteriaNames}; choose the patient in the console`);
    await ctx.mergeRequestData({ matched_patient_id: ids[0] });
    ctx.log(`matched patient ${ids[0]}`);
    return {
      filer: texts.REQUEST_DATA?.device_filer === 'biometry' ? 'biometry' : 'generic',
      hasImagesWithoutThumbnails: payloads.some((p) => isImageMime(p.mime_type) && !p.hasThumbnails),
    };
  },
});
