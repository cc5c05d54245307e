/**
 * Fixing the data behind a failed request (the original's "Edit Payload Processor"): an operator corrects
 * the details `PATIENT_MATCH` reads (patient identifier, date of birth, sex) or chooses the patient, and
 * the request runs on from its failed or waiting patient match.
 *
 * - The values are written into `REQUEST_DATA` under the key that supplies each criterion now (or, when
 *   none does, the plain `patient_identifier`, `dob`, `sex`), so that the routine reads exactly what the
 *   operator entered: a key in `REQUEST_DATA` wins over the same key anywhere else. A DICOM tag that is
 *   wrong is overwritten in place, so running the whole request again (which reads the tags again)
 *   brings it back.
 * - Choosing a patient writes that patient's own identifier, date of birth and sex the same way: the
 *   routine still does the match, so a choice that is not unique or not the patient fails as any match.
 * - Each edit keeps its old and new values in `REQUEST_DATA.console_edits` (beside the request's other
 *   patient data; the audit trail itself holds only ids and key names).
 * - It applies while the request's `PATIENT_MATCH` is FAILED or RETRY, through the queue's one checked
 *   change of routines (`changeRoutines`: under the request's locks as retry, and only when the request is
 *   still the version the operator saw, its routines and its JSON rows); that routine then goes back to NEW
 *   with no tries and the workers of its queue are woken, so the request runs on at once (the match chains
 *   the filing routines).
 * - A DICOM file refused at `DICOM_SEED` for its date (none at all, or not plausible) is resolved the same
 *   way by giving the study's date and time ({@link editRequestEventDate}): written as
 *   `REQUEST_DATA.console_event_date` (the site's wall clock), kept in the edit history, checked as a
 *   device's date is, and `DICOM_SEED` runs again, dating the event by it.
 *
 * These are the only `REQUEST_DATA` keys the console writes: the criteria's (a `dicom_patient_*` tag in
 * place, by design), `console_event_date` and `console_edits`; clients cannot send the reserved ones
 * (`intake/reserved-keys.ts`).
 */
import { createHash } from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../../db/database.ts';
import { formatDateTime } from '../../db/database.ts';
import type { DB } from '../../db/schema.ts';
import { checkEventDate, normaliseEventDate } from '../device-filing/index.ts';
import { readRequestContent, writeRequestText } from '../attachment-data/index.ts';
import { changeRoutines, mirrorRequestDetails, requestVersion } from '../request-queue/index.ts';
import type { AdminOutcome, RoutineChange, RoutineRow, RoutineStatus } from '../request-queue/index.ts';
import { CONSOLE_EVENT_DATE_KEY } from './device-profile.ts';
import { dicomSeedRoutine } from './dicom-seed.ts';
import type { CriteriaRows } from './patient-match.ts';
import {
  DOB_KEYS,
  IDENTIFIER_KEYS,
  SEX_KEYS,
  criteriaSources,
  firstString,
  normaliseDob,
  patientMatchRoutine,
} from './patient-match.ts';

const CRITERIA_MNEMONICS = ['REQUEST_DATA', 'FORM_DATA', 'REQUEST_BLOB'] as const;

/**
 * The routines the console's edits run again, named by their definitions: `match`, the patient match
 * (an edit of the match data), and `seed`, the DICOM check that dates a device file's event (a study date
 * given).
 */
export const EDITED_ROUTINES = {
  match: patientMatchRoutine.name,
  seed: dicomSeedRoutine.name,
} as const;

const MATCH_ROUTINE = EDITED_ROUTINES.match;
const SEED_ROUTINE = EDITED_ROUTINES.seed;

/** The statuses an edit takes back to NEW (failed, or waiting for a retry). */
const RUN_ON: readonly RoutineStatus[] = ['FAILED', 'RETRY'];

/** What an edit does to the routines it runs on: back to NEW with no tries, due at once. */
const RUN_ON_CHANGE: RoutineChange = {
  allowed: RUN_ON,
  verb: 'run on',
  set: { status: 'NEW', try_count: 0, next_try_date_time: null },
};

/** The request's routines named `name` (the patient match by default) that failed or wait for a retry. */
function routinesToRunOn<R extends { routine_name: string; status: RoutineStatus }>(
  routines: readonly R[],
  name: string = MATCH_ROUTINE,
): R[] {
  return routines.filter((r) => r.routine_name === name && RUN_ON.includes(r.status));
}

/**
 * Why an edit is refused when the request's patient match neither failed nor waits: the data `PATIENT_MATCH`
 * reads is only changed while it can still act on it, so that `REQUEST_DATA` never names one patient while
 * the filing stays on another.
 */
function refusalOf(routines: readonly { routine_name: string; status: string }[]): string {
  const match = routines.find((r) => r.routine_name === MATCH_ROUTINE);
  if (match === undefined) return 'This request has no patient match, so its patient cannot be chosen here.';
  if (match.status === 'COMPLETE')
    return 'The patient match of this request is complete: the request goes on with the patient it matched. Choosing or correcting the patient applies only while the match waits or failed.';
  return `The patient match of this request is ${match.status}: choosing or correcting the patient applies only while the match waits or failed.`;
}

/** The `REQUEST_DATA` key of the edit history. */
export const CONSOLE_EDITS_KEY = 'console_edits';

/** Where each criterion is written, when nothing supplies it yet. */
const DEFAULT_KEYS = { identifier: 'patient_identifier', dob: 'dob', sex: 'sex' } as const;

export interface MatchField {
  /** The `REQUEST_DATA` key an edit writes. */
  readonly key: string;
  /** The value the routine reads now, if any. */
  readonly value: string | undefined;
}

export interface ConsoleEdit {
  readonly at: string;
  readonly userId: number;
  /** Chosen directly, when the operator picked the patient. */
  readonly patientId: number | null;
  /** key -> [old value, new value]. */
  readonly changes: Readonly<Record<string, readonly [string | null, string | null]>>;
}

export interface RequestMatchData {
  readonly requestId: number;
  /** The version an edit compares (the routines and the JSON rows the routine reads). */
  readonly version: string;
  readonly identifier: MatchField;
  readonly dob: MatchField;
  readonly sex: MatchField;
  /** Its PATIENT_MATCH routine is FAILED or RETRY: an edit can run the request on. */
  readonly canRunOn: boolean;
  /** The study date and time the desk gave (`YYYY-MM-DD HH:MM:SS`), if any. */
  readonly eventDate: string | undefined;
  /** Its DICOM_SEED routine is FAILED or RETRY: a study date can be given and the request run on. */
  readonly canGiveEventDate: boolean;
  readonly edits: readonly ConsoleEdit[];
}

type MatchCriteria = { readonly identifier: string; readonly dob: string; readonly sex: string };

export type EditChange =
  ({ readonly kind: 'fields' } & MatchCriteria) | { readonly kind: 'patient'; readonly patientId: number };

export interface EditRequestInput {
  readonly requestId: number;
  readonly expectedVersion: string;
  /** The operator, stamped on the rows and in the edit history. */
  readonly userId: number;
  readonly change: EditChange;
  readonly now?: Date;
}

export type EditOutcome =
  | Exclude<AdminOutcome, { kind: 'done' }>
  | {
      readonly kind: 'done';
      readonly requestId: number;
      readonly routineIds: readonly number[];
      /** The `REQUEST_DATA` keys whose values changed. */
      readonly changedKeys: readonly string[];
      /** The queues of the routines run on (their workers are woken). */
      readonly queues: readonly string[];
    };

/** The edit's outcome from the change's, with the keys the edit changed. */
function editOutcomeOf(outcome: AdminOutcome, changedKeys: readonly string[]): EditOutcome {
  return outcome.kind === 'done' ? { ...outcome, changedKeys } : outcome;
}

/**
 * The key supplying a criterion now, else `fallback`: a key that holds only an empty value (a DICOM tag
 * the file left empty) is not taken, so that a run of the whole request, which writes the tags again,
 * keeps the operator's value.
 */
function keyOf(
  sources: readonly Record<string, unknown>[],
  keys: readonly string[],
  fallback: string,
): string {
  for (const key of keys) {
    if (sources.some((source) => firstString([source], [key]) !== undefined)) return key;
  }
  return fallback;
}

function fieldsOf(rows: CriteriaRows) {
  const sources = criteriaSources(rows);
  const field = (keys: readonly string[], fallback: string): MatchField => ({
    key: keyOf(sources, keys, fallback),
    value: firstString(sources, keys),
  });
  return {
    identifier: field(IDENTIFIER_KEYS, DEFAULT_KEYS.identifier),
    dob: field(DOB_KEYS, DEFAULT_KEYS.dob),
    sex: field(SEX_KEYS, DEFAULT_KEYS.sex),
  };
}

function versionOf(routines: Parameters<typeof requestVersion>[0], rows: CriteriaRows): string {
  const data = createHash('sha256')
    .update(JSON.stringify(CRITERIA_MNEMONICS.map((m) => rows[m] ?? {})))
    .digest('base64url')
    .slice(0, 16);
  return `${requestVersion(routines)}.${data}`;
}

function editsOf(requestData: Record<string, unknown>): ConsoleEdit[] {
  const value = requestData[CONSOLE_EDITS_KEY];
  return Array.isArray(value) ? (value as ConsoleEdit[]) : [];
}

/** The JSON rows the routines read, with the version of the request the operator sees. */
async function readState(db: Kysely<DB>, requestId: number, routines: readonly RoutineRow[]) {
  const content = await readRequestContent(db, requestId, CRITERIA_MNEMONICS);
  const rows = content.texts as CriteriaRows;
  return { rows, version: versionOf(routines, rows) };
}

/** What the edit form shows for request `requestId`; undefined for an unknown request. */
export async function readRequestMatchData(
  db: Kysely<DB>,
  requestId: number,
): Promise<RequestMatchData | undefined> {
  const exists = await db.selectFrom('request').select('id').where('id', '=', requestId).executeTakeFirst();
  if (exists === undefined) return undefined;
  const routines = await db
    .selectFrom('request_routine')
    .selectAll()
    .where('request_id', '=', requestId)
    .orderBy('id')
    .execute();
  const { rows, version } = await readState(db, requestId, routines);
  return {
    requestId,
    version,
    ...fieldsOf(rows),
    canRunOn: routinesToRunOn(routines).length > 0,
    eventDate: givenEventDateOf(rows.REQUEST_DATA ?? {}),
    canGiveEventDate: routinesToRunOn(routines, SEED_ROUTINE).length > 0,
    edits: editsOf(rows.REQUEST_DATA ?? {}),
  };
}

function givenEventDateOf(requestData: Record<string, unknown>): string | undefined {
  const value = requestData[CONSOLE_EVENT_DATE_KEY];
  return typeof value === 'string' ? value : undefined;
}

/** The identifier, date of birth and sex `PATIENT_MATCH` finds patient `patientId` by, or why not. */
async function criteriaOfPatient(db: Kysely<DB>, patientId: number): Promise<MatchCriteria | string> {
  const patient = await db
    .selectFrom('patient')
    .select(['dob', 'gender'])
    .where('id', '=', patientId)
    .where('deleted', '=', 0)
    .executeTakeFirst();
  if (patient === undefined) return 'That patient does not exist (or was deleted).';
  if (patient.dob === null) return 'That patient has no date of birth, so no request can be matched to them.';
  // Their hospital number (a LOCAL type) first, else any live identifier.
  const identifier = await db
    .selectFrom('patient_identifier as pi')
    .innerJoin('patient_identifier_type as t', 't.id', 'pi.patient_identifier_type_id')
    .select('pi.value')
    .where('pi.patient_id', '=', patientId)
    .where('pi.deleted', '=', 0)
    .orderBy((eb) => eb.case().when('t.usage_type', '=', 'LOCAL').then(0).else(1).end())
    .orderBy('pi.id')
    .executeTakeFirst();
  if (identifier === undefined)
    return 'That patient has no identifier, so no request can be matched to them.';
  const sex = patient.gender === 'M' || patient.gender === 'F' ? patient.gender : 'U';
  return { identifier: identifier.value, dob: patient.dob.slice(0, 10), sex };
}

/**
 * Writes an edit's `patch` into `REQUEST_DATA` with the edit appended to its history, and mirrors the
 * changed values into the request's details.
 */
async function writeEdit(
  trx: Transaction<DB>,
  database: Database,
  edit: {
    readonly requestId: number;
    readonly requestData: Record<string, unknown>;
    readonly patch: Record<string, string>;
    readonly edit: ConsoleEdit;
    readonly stamp: { readonly userId: number; readonly now: string };
  },
): Promise<void> {
  const { requestId, requestData, patch, stamp } = edit;
  await writeRequestText(
    trx,
    database.dialect,
    requestId,
    'REQUEST_DATA',
    { ...requestData, ...patch, [CONSOLE_EDITS_KEY]: [...editsOf(requestData), edit.edit] },
    stamp,
  );
  await mirrorRequestDetails(trx, database, requestId, patch, stamp);
}

/** Checks the operator's values: the problems, or none. */
export function checkMatchCriteria(values: MatchCriteria): string[] {
  const problems: string[] = [];
  if (values.identifier.trim() === '' || values.identifier.length > 64)
    problems.push('The patient identifier must be 1 to 64 characters.');
  if (normaliseDob(values.dob.trim()) === undefined)
    problems.push('The date of birth must be a date (YYYY-MM-DD).');
  if (!['M', 'F', 'U'].includes(values.sex)) problems.push('The sex must be M, F or U (unknown).');
  return problems;
}

/**
 * Writes the operator's criteria (or the chosen patient's) into `REQUEST_DATA` and runs the request on,
 * under the request's locks and once it is still the version the operator saw.
 */
export async function editRequestMatchData(
  database: Database,
  input: EditRequestInput,
): Promise<EditOutcome> {
  const { requestId } = input;
  const exists = await database.db
    .selectFrom('request')
    .select('id')
    .where('id', '=', requestId)
    .executeTakeFirst();
  if (exists === undefined) return { kind: 'not_found' };
  const wanted =
    input.change.kind === 'patient'
      ? await criteriaOfPatient(database.db, input.change.patientId)
      : input.change;
  if (typeof wanted === 'string') return { kind: 'refused', requestId, reason: wanted };
  const problems = checkMatchCriteria(wanted);
  if (problems.length > 0) return { kind: 'refused', requestId, reason: problems.join(' ') };
  const now = formatDateTime(input.now ?? new Date());
  const stamp = { userId: input.userId, now };
  let changedKeys: readonly string[] = [];
  let write: ((trx: Transaction<DB>) => Promise<void>) | undefined;
  const outcome = await changeRoutines(
    database,
    requestId,
    async (routines, trx) => {
      const { rows, version } = await readState(trx, requestId, routines);
      if (version !== input.expectedVersion) return { kind: 'changed', requestId, current: 'edited' };
      const runOn = routinesToRunOn(routines);
      if (runOn.length === 0) return { kind: 'refused', requestId, reason: refusalOf(routines) };
      const fields = fieldsOf(rows);
      const requestData = rows.REQUEST_DATA ?? {};
      const patch: Record<string, string> = {};
      const changes: Record<string, [string | null, string | null]> = {};
      for (const name of ['identifier', 'dob', 'sex'] as const) {
        const field = fields[name];
        const value = wanted[name].trim();
        const old = requestData[field.key];
        const oldText =
          typeof old === 'string' || typeof old === 'number'
            ? String(old)
            : old === undefined || old === null
              ? null
              : JSON.stringify(old);
        if (oldText === value) continue;
        patch[field.key] = value;
        changes[field.key] = [oldText, value];
      }
      const edit: ConsoleEdit = {
        at: now,
        userId: input.userId,
        patientId: input.change.kind === 'patient' ? input.change.patientId : null,
        changes,
      };
      changedKeys = Object.keys(patch);
      write = (trx) => writeEdit(trx, database, { requestId, requestData, patch, edit, stamp });
      return runOn;
    },
    RUN_ON_CHANGE,
    (trx) => write!(trx),
  );
  return editOutcomeOf(outcome, changedKeys);
}

export interface EventDateInput {
  readonly requestId: number;
  readonly expectedVersion: string;
  readonly userId: number;
  /** The date and time as typed (`YYYY-MM-DD`, `YYYY-MM-DDTHH:MM[:SS]`), the site's wall clock. */
  readonly eventDate: string;
  readonly now?: Date;
}

/** Checks a study date the desk typed: the date as stored, or the problems. */
export function checkGivenEventDate(text: string, now: Date): { wallClock: string } | { problem: string } {
  const wallClock = normaliseEventDate(text);
  if (wallClock === undefined)
    return { problem: 'The date and time of the study must be a real date and time (YYYY-MM-DD HH:MM).' };
  const problem = checkEventDate(wallClock, { now });
  return problem === undefined ? { wallClock } : { problem: `The date and time of the study ${problem}.` };
}

/**
 * Gives the study date and time of a DICOM request refused at `DICOM_SEED` for its date, and runs that
 * routine on (see the module comment), under the request's locks and once it is still the version the
 * operator saw. The date dates the event only where the file has no plausible date of its own.
 */
export async function editRequestEventDate(database: Database, input: EventDateInput): Promise<EditOutcome> {
  const { requestId } = input;
  const exists = await database.db
    .selectFrom('request')
    .select('id')
    .where('id', '=', requestId)
    .executeTakeFirst();
  if (exists === undefined) return { kind: 'not_found' };
  const nowDate = input.now ?? new Date();
  const checked = checkGivenEventDate(input.eventDate, nowDate);
  if ('problem' in checked) return { kind: 'refused', requestId, reason: checked.problem };
  const now = formatDateTime(nowDate);
  const stamp = { userId: input.userId, now };
  let changedKeys: readonly string[] = [];
  let write: ((trx: Transaction<DB>) => Promise<void>) | undefined;
  const outcome = await changeRoutines(
    database,
    requestId,
    async (routines, trx) => {
      const { rows, version } = await readState(trx, requestId, routines);
      if (version !== input.expectedVersion) return { kind: 'changed', requestId, current: 'edited' };
      const runOn = routinesToRunOn(routines, SEED_ROUTINE);
      if (runOn.length === 0)
        return {
          kind: 'refused',
          requestId,
          reason: `The DICOM check (${SEED_ROUTINE}) of this request neither failed nor waits: a study date is given only for a file refused for its date.`,
        };
      const requestData = rows.REQUEST_DATA ?? {};
      const old = givenEventDateOf(requestData) ?? null;
      const isChanged = old !== checked.wallClock;
      const patch: Record<string, string> = isChanged ? { [CONSOLE_EVENT_DATE_KEY]: checked.wallClock } : {};
      const edit: ConsoleEdit = {
        at: now,
        userId: input.userId,
        patientId: null,
        changes: isChanged ? { [CONSOLE_EVENT_DATE_KEY]: [old, checked.wallClock] } : {},
      };
      changedKeys = Object.keys(patch);
      write = (trx) => writeEdit(trx, database, { requestId, requestData, patch, edit, stamp });
      return runOn;
    },
    RUN_ON_CHANGE,
    (trx) => write!(trx),
  );
  return editOutcomeOf(outcome, changedKeys);
}
