/**
 * Applying one patient change from the PAS: the core of PASAPI's `Patient` PUT, apart from HTTP and XML
 * so that the HL7 feed maps an ADT message to the same {@link PatientChange} and calls the same function.
 *
 * One write transaction per change: patient, contact, addresses, identifiers and the `pasapi_assignment`
 * row commit together or not at all (OpenEyes commits the patient before its identifiers, P11), and every
 * refusal (a {@link PasapiError}) is decided before the first write. In openeyes mode each row of a
 * versioned table is copied to its `_version` twin before it is updated or deleted.
 *
 * Identity, in order: the non-deleted identifier of the URL's type with the external id; else, with an
 * NHS number, the patient holding it with the same date of birth and gender; else the patient of the
 * `Patient` assignment of the external id. A patient found by number but never sent by PASAPI is adopted
 * (OpenEyes refuses it with 422, P09). A renumbering (the patient holds another number of the type) and
 * a number held by another patient are refused with 409 and change nothing (P10, P12).
 */
import type { ExpressionBuilder, Insertable, Kysely, Transaction } from 'kysely';
import { sql } from 'kysely';
import type { Database } from '../../db/database.ts';
import { findUnstorableCharacter, unstorableCharacterMessage } from '../../db/schema-profile.ts';
import type { DB } from '../../db/schema.ts';
import { nowDateTime } from '../../db/stored-time.ts';
import { applyPad } from '../patient/index.ts';
import type { PasIdentifierType, PasReferenceCache } from './pas-reference.ts';
import { createPasReferenceCache } from './pas-reference.ts';
import { PasapiError } from './pasapi-values.ts';

/** One `<Address>`: each element absent (undefined) or its text. */
export interface AddressRecord {
  readonly line1?: string;
  readonly line2?: string;
  readonly city?: string;
  readonly county?: string;
  readonly postcode?: string;
  readonly country?: string;
  readonly type?: string;
}

/** A patient as the PAS sends it: each element absent (undefined) or present (text, maybe ""). */
export interface PatientRecord {
  readonly nhsNumber?: string;
  readonly nhsNumberStatus?: string;
  readonly hospitalNumber?: string;
  readonly title?: string;
  readonly firstName?: string;
  readonly surname?: string;
  /** `YYYY-MM-DD`. */
  readonly dateOfBirth?: string;
  readonly primaryInstitution?: string;
  readonly gender?: string;
  readonly addresses?: readonly AddressRecord[];
  readonly telephoneNumber?: string;
  readonly mobilePhoneNumber?: string;
  readonly email?: string;
  readonly ethnicGroup?: string;
  /** `YYYY-MM-DD`. */
  readonly dateOfDeath?: string;
  readonly isDeceased?: boolean;
  readonly practiceCode?: string;
  readonly gpCode?: string;
  readonly languageCode?: string;
  readonly interpreterRequired?: string;
  readonly risks?: string;
}

export interface PatientChange {
  /** The external id of the URL (the hospital number). */
  readonly externalId: string;
  /** `patient_identifier_type.unique_row_string` of the URL. */
  readonly identifierTypeKey: string;
  readonly record: PatientRecord;
  /** `X-OE-Partial-Record`: absent elements keep their stored values. */
  readonly isPartial: boolean;
  /** `X-OE-Update-Only` (or `updateOnly="1"`): a patient not yet known is not created. */
  readonly isUpdateOnly: boolean;
  /** `createOnly="1"`: a known patient is not updated. */
  readonly isCreateOnly: boolean;
}

export interface PatientChangeResult {
  readonly outcome: 'created' | 'updated' | 'not_created';
  /** `patient.id`; undefined when nothing was created. */
  readonly patientId: number | undefined;
  readonly warnings: readonly string[];
}

/** Who makes the change: the audit columns' user. */
export interface ChangeActor {
  readonly userId: number;
}

export type { PasIdentifierType } from './pas-reference.ts';
export { findGlobalType, findIdentifierType, readInstallationSetting } from './pas-reference.ts';

export const PATIENT_RESOURCE = 'Patient';
export const PATIENT_INTERNAL_TYPE = '\\Patient';

/** The longest identifier value PASAPI writes: the hospital number's bound (`pasapi_assignment.resource_id`). */
export const MAX_IDENTIFIER_CHARACTERS = 40;
const ADDRESS_TYPE_HOME = 2;
const ADDRESS_TYPE_CORRESPOND = 3;

/** The identifier-type refusal every resource answers (OpenEyes: 404 for Patient, a PHP TypeError elsewhere). */
export function unknownIdentifierType(key: string): PasapiError {
  return new PasapiError(404, [`PatientIdentifierType cannot be found based on "identifier-type": ${key}`]);
}

/** True when `value` passes the type's pattern after its padding (OpenEyes's `validateTerm`). */
export function isValidForType(value: string, type: PasIdentifierType): boolean {
  if (type.regex === undefined) return true;
  type.regex.lastIndex = 0;
  return type.regex.test(applyPad(value, type.pad));
}

/** The active value of `typeId` a patient holds, if any. */
async function activeValueOf(
  trx: Kysely<DB>,
  patientId: number,
  typeId: number,
): Promise<{ id: number; value: string } | undefined> {
  return trx
    .selectFrom('patient_identifier')
    .select(['id', 'value'])
    .where('patient_id', '=', patientId)
    .where('patient_identifier_type_id', '=', typeId)
    .where('deleted', '=', 0)
    .orderBy('id')
    .executeTakeFirst();
}

/** The live (not deleted) patient holding the active identifier `value` of `typeId`. */
export async function findPatientByIdentifier(
  trx: Kysely<DB>,
  typeId: number,
  value: string,
): Promise<number | undefined> {
  const row = await trx
    .selectFrom('patient_identifier as pi')
    .innerJoin('patient as p', 'p.id', 'pi.patient_id')
    .select('p.id')
    .where('pi.patient_identifier_type_id', '=', typeId)
    .where('pi.value', '=', value)
    .where('pi.deleted', '=', 0)
    .where('p.deleted', '=', 0)
    .orderBy('p.id')
    .executeTakeFirst();
  return row?.id;
}

/** The newest `Patient` assignment of an external id (OpenEyes databases may hold duplicates, P27). */
export async function findPatientAssignment(
  trx: Kysely<DB>,
  externalId: string,
): Promise<{ id: number; internalId: number } | undefined> {
  const row = await trx
    .selectFrom('pasapi_assignment')
    .select(['id', 'internal_id'])
    .where('resource_type', '=', PATIENT_RESOURCE)
    .where('resource_id', '=', externalId)
    .orderBy('id', 'desc')
    .executeTakeFirst();
  return row === undefined ? undefined : { id: row.id, internalId: row.internal_id };
}

/**
 * The live patient a PAS number of `typeId` names: by its active identifier, else by the `Patient`
 * assignment of the number (a patient PASAPI created under a number since replaced).
 */
export async function findPatientByNumber(
  trx: Kysely<DB>,
  typeId: number,
  number: string,
): Promise<number | undefined> {
  const byIdentifier = await findPatientByIdentifier(trx, typeId, number);
  if (byIdentifier !== undefined) return byIdentifier;
  const assignment = await findPatientAssignment(trx, number);
  if (assignment === undefined) return undefined;
  const row = await trx
    .selectFrom('patient')
    .select('id')
    .where('id', '=', assignment.internalId)
    .where('deleted', '=', 0)
    .executeTakeFirst();
  return row?.id;
}

interface ChangeRowKeys {
  readonly typeId: number;
  readonly externalId: string;
  /** -1 without a GLOBAL type. */
  readonly globalTypeId: number;
  readonly nhsNumber: string;
  readonly dateOfBirth: string;
  readonly gender: string;
}

interface ChangeRows {
  /** The live patient holding the active identifier of the URL's type and id. */
  readonly byNumber: number | undefined;
  /** The live patient holding the active NHS number, with the record's date of birth and gender. */
  readonly byNhsNumber: number | undefined;
  /** The newest `Patient` assignment of the external id (OpenEyes databases may hold duplicates, P27). */
  readonly assignmentId: number | undefined;
  /** That assignment's patient, when it is live. */
  readonly assignedPatient: number | undefined;
}

/** Reads a scalar subquery's id (undefined for NULL). */
const idOf = (value: number | string | null | undefined) => (value == null ? undefined : Number(value));

/** The live patient holding the active identifier `value` of `typeId`, as a scalar subquery. */
function liveHolderOf(eb: ExpressionBuilder<DB, never>, typeId: number, value: string) {
  return eb
    .selectFrom('patient_identifier as pi')
    .innerJoin('patient as p', 'p.id', 'pi.patient_id')
    .select('p.id')
    .where('pi.patient_identifier_type_id', '=', typeId)
    .where('pi.value', '=', value)
    .where('pi.deleted', '=', 0)
    .where('p.deleted', '=', 0)
    .orderBy('p.id')
    .limit(1);
}

/**
 * The rows a change's identity is decided on, in one statement of scalar subqueries (one shape whatever
 * the record holds: keys it lacks are ignored by the caller).
 */
async function findIdentityRows(trx: Kysely<DB>, keys: ChangeRowKeys): Promise<ChangeRows> {
  const row = await trx
    .selectNoFrom((eb) => {
      const liveHolder = (typeId: number, value: string) => liveHolderOf(eb, typeId, value);
      const newestAssignment = eb
        .selectFrom('pasapi_assignment as a')
        .where('a.resource_type', '=', PATIENT_RESOURCE)
        .where('a.resource_id', '=', keys.externalId)
        .orderBy('a.id', 'desc')
        .limit(1);
      return [
        liveHolder(keys.typeId, keys.externalId).as('by_number'),
        liveHolder(keys.globalTypeId, keys.nhsNumber)
          .where('p.dob', '=', keys.dateOfBirth)
          .where('p.gender', '=', keys.gender)
          .as('by_nhs_number'),
        newestAssignment.select('a.id').as('assignment_id'),
        newestAssignment
          .innerJoin('patient as ap', 'ap.id', 'a.internal_id')
          .select((inner) =>
            inner.case().when('ap.deleted', '=', 0).then(inner.ref('ap.id')).else(null).end().as('id'),
          )
          .as('assigned_patient'),
      ];
    })
    .executeTakeFirstOrThrow();
  return {
    byNumber: idOf(row.by_number),
    byNhsNumber: idOf(row.by_nhs_number),
    assignmentId: idOf(row.assignment_id),
    assignedPatient: idOf(row.assigned_patient),
  };
}

interface CodeRows {
  /** The live patient holding the active NHS number. */
  readonly nhsNumberHolder: number | undefined;
  /** The lowest `gp.id` of the GP code, `practice.id` of the practice code. */
  readonly gpId: number | undefined;
  readonly practiceId: number | undefined;
}

/**
 * The rows of the record's codes that the feed itself writes (the NHS number's holder, GP, practice), in
 * one statement once the record's values are known to be storable; none for a record without them.
 */
async function findCodeRows(
  trx: Kysely<DB>,
  keys: { globalTypeId: number | undefined; nhsNumber: string; gpCode: string; practiceCode: string },
): Promise<CodeRows> {
  const hasHolder = keys.globalTypeId !== undefined && keys.nhsNumber !== '';
  if (!hasHolder && keys.gpCode === '' && keys.practiceCode === '')
    return { nhsNumberHolder: undefined, gpId: undefined, practiceId: undefined };
  const row = await trx
    .selectNoFrom((eb) => [
      liveHolderOf(eb, keys.globalTypeId ?? -1, keys.nhsNumber).as('nhs_number_holder'),
      eb.selectFrom('gp').select('id').where('nat_id', '=', keys.gpCode).orderBy('id').limit(1).as('gp_id'),
      eb
        .selectFrom('practice')
        .select('id')
        .where('code', '=', keys.practiceCode)
        .orderBy('id')
        .limit(1)
        .as('practice_id'),
    ])
    .executeTakeFirstOrThrow();
  return {
    nhsNumberHolder: hasHolder ? idOf(row.nhs_number_holder) : undefined,
    gpId: keys.gpCode === '' ? undefined : idOf(row.gp_id),
    practiceId: keys.practiceCode === '' ? undefined : idOf(row.practice_id),
  };
}

const stripSpaces = (value: string) => value.replace(/\s+/g, '');

/** Phone numbers as OpenEyes stores them (spaces and hyphens removed), checked as P16 recommends. */
function normalisePhone(
  value: string,
  column: 'primary_phone' | 'mobile_phone',
  isChecked: boolean,
  errors: string[],
): string {
  const stored = value.replace(/[\s-]+/g, '');
  if (stored === '' || !isChecked) return stored;
  const digits = stored.replace(/^(.*?)\((\d+)\)(.*)$/, '$1$2$3');
  if (!/^\+?\d{7,15}$/.test(digits)) {
    errors.push(
      column === 'primary_phone'
        ? 'primary_phone: Phone number must be a valid telephone number.'
        : 'mobile_phone: Mobile number must be a valid telephone number.',
    );
  }
  return stored;
}

function addressTypeId(type: string | undefined): number | null {
  switch ((type ?? '').trim().toUpperCase()) {
    case 'HOME':
    case 'H':
    case 'P':
      return ADDRESS_TYPE_HOME;
    case 'CORR':
    case 'M':
      return ADDRESS_TYPE_CORRESPOND;
    default:
      return null;
  }
}

interface PlannedAddress {
  readonly existingId: number | undefined;
  readonly values: {
    address1: string | null;
    address2: string | null;
    city: string | null;
    county: string | null;
    postcode: string | null;
    country_id: number;
    address_type_id: number | null;
  };
}

/** A column value: the element's, NULL when absent from a full record, or left alone (undefined). */
function chooseValue<T>(present: boolean, value: T, keepsAbsent: boolean): T | null | undefined {
  if (present) return value;
  return keepsAbsent ? undefined : null;
}

export interface PatientChangeOptions {
  /** Where identifier types, settings, countries, ethnic groups and institutions are read (none kept by default). */
  readonly reference?: PasReferenceCache;
}

/** Builds the patient-change function over one database. */
export function createPatientChanges(
  database: Database,
  options: PatientChangeOptions = {},
): {
  applyPatientChange(change: PatientChange, actor: ChangeActor): Promise<PatientChangeResult>;
  /** The same change inside a write transaction of the caller's, which commits it with its own rows. */
  applyPatientChangeIn(
    trx: Transaction<DB>,
    change: PatientChange,
    actor: ChangeActor,
  ): Promise<PatientChangeResult>;
} {
  const { schema } = database;
  const reference = options.reference ?? createPasReferenceCache(0);

  async function plan(trx: Transaction<DB>, change: PatientChange, actor: ChangeActor) {
    const { record, externalId } = change;
    const type = await reference.identifierType(trx, change.identifierTypeKey);
    if (type === undefined) throw unknownIdentifierType(change.identifierTypeKey);
    if (!isValidForType(externalId, type))
      throw new PasapiError(422, [
        `Patient number (format) in request URL is invalid: '${externalId}'. Acceptable: ${type.validateRegex}`,
      ]);
    if (record.hospitalNumber !== undefined && record.hospitalNumber !== externalId)
      throw new PasapiError(422, [
        `HospitalNumber in URL and in XML must match: ${externalId} not equal to ${record.hospitalNumber}`,
      ]);
    const globalType = await reference.globalType(trx);
    const nhsNumber = record.nhsNumber === undefined ? undefined : stripSpaces(record.nhsNumber);
    if (
      nhsNumber !== undefined &&
      nhsNumber !== '' &&
      globalType !== undefined &&
      !isValidForType(nhsNumber, globalType)
    )
      throw new PasapiError(422, [
        `Patient NHSNumber (format) in XML is invalid: '${record.nhsNumber}'. Acceptable: ${globalType.validateRegex}`,
      ]);

    // Identity in one statement of this transaction (the feed's own rows are never kept: other changes,
    // other processes too, create and update them).
    const gender = record.gender === undefined ? undefined : record.gender.trim().toUpperCase();
    const isMatchedByNhs = Boolean(nhsNumber && globalType !== undefined && record.dateOfBirth && gender);
    const found = await findIdentityRows(trx, {
      typeId: type.id,
      externalId,
      globalTypeId: globalType?.id ?? -1,
      nhsNumber: nhsNumber ?? '',
      // A date every engine reads (PostgreSQL refuses ''); unused without the record's own.
      dateOfBirth: record.dateOfBirth ?? '1000-01-01',
      gender: gender ?? '',
    });
    let patientId = found.byNumber;
    const isFoundByNumber = patientId !== undefined;
    if (patientId === undefined && isMatchedByNhs) patientId = found.byNhsNumber;
    const assignment = found.assignmentId === undefined ? undefined : { id: found.assignmentId };
    const assignedPatient = found.assignedPatient;
    if (patientId !== undefined && assignedPatient !== undefined && patientId !== assignedPatient)
      throw new PasapiError(409, ['HospitalNumber belongs to another patient']);
    patientId ??= assignedPatient;
    if (patientId !== undefined && !isFoundByNumber) {
      const held = await activeValueOf(trx, patientId, type.id);
      if (held !== undefined && held.value !== externalId)
        throw new PasapiError(409, [`This patient has a different HospitalNumber (patient ${patientId})`]);
    }

    // The patient's own assignment, whatever its external id, when the URL's id has none for it
    // (OpenEyes adopts it too): one assignment per patient (`internal_key`).
    let assignmentId = assignedPatient === patientId ? assignment?.id : undefined;
    if (patientId !== undefined && assignmentId === undefined) {
      const own = await trx
        .selectFrom('pasapi_assignment')
        .select('id')
        .where('internal_type', '=', PATIENT_INTERNAL_TYPE)
        .where('internal_id', '=', patientId)
        .orderBy('id', 'desc')
        .executeTakeFirst();
      assignmentId = own?.id ?? (assignedPatient === undefined ? assignment?.id : undefined);
    }

    const isNew = patientId === undefined;
    if ((isNew && change.isUpdateOnly) || (!isNew && change.isCreateOnly))
      return { kind: 'skip' as const, isNew };

    // Values, every problem listed.
    const errors: string[] = [];
    const warnings: string[] = [];
    const keepsAbsent = change.isPartial && !isNew;
    const has = (key: keyof PatientRecord) => record[key] !== undefined;
    if (!keepsAbsent) {
      for (const [key, tag] of [
        ['firstName', 'FirstName'],
        ['surname', 'Surname'],
        ['dateOfBirth', 'DateOfBirth'],
      ] as const) {
        if (!has(key)) errors.push(`${tag} is required`);
      }
    }
    if (record.firstName !== undefined && record.firstName.trim() === '')
      errors.push('first_name: First name cannot be blank.');
    if (record.surname !== undefined && record.surname.trim() === '')
      errors.push('last_name: Last name cannot be blank.');
    const lengths: [keyof PatientRecord, string, number][] = [
      ['title', 'title: Title', 20],
      ['firstName', 'first_name: First name', 300],
      ['surname', 'last_name: Last name', 100],
      ['email', 'email: Email', 255],
    ];
    for (const [key, label, max] of lengths) {
      const value = record[key];
      if (typeof value === 'string' && [...value].length > max)
        errors.push(`${label} is too long (maximum is ${max} characters).`);
    }
    // An identifier type may have no pattern: the NHS number gets the hospital number's bound, so that
    // `patient_identifier.value` and the `unique_row_string` of its deleted row (255 each) hold it.
    if (nhsNumber !== undefined && [...nhsNumber].length > MAX_IDENTIFIER_CHARACTERS)
      errors.push(`NHSNumber is too long (maximum is ${MAX_IDENTIFIER_CHARACTERS} characters).`);
    if (gender !== undefined && gender !== '' && !['M', 'F', 'U', 'O'].includes(gender))
      errors.push(`Invalid value '${record.gender}' for 'Gender'`);
    if (record.email !== undefined && record.email !== '' && !/^[^@\s]+@[^@\s]+\.[^@\s]+$/.test(record.email))
      errors.push('email: Email is not a valid email address.');
    const isPhoneChecked = (await reference.setting(trx, 'validate_PASAPI_phone_number')) !== 'off';
    const primaryPhone =
      record.telephoneNumber === undefined
        ? undefined
        : normalisePhone(record.telephoneNumber, 'primary_phone', isPhoneChecked, errors);
    const mobilePhone =
      record.mobilePhoneNumber === undefined
        ? undefined
        : normalisePhone(record.mobilePhoneNumber, 'mobile_phone', isPhoneChecked, errors);
    if (primaryPhone !== undefined && primaryPhone.length > 20)
      errors.push('primary_phone: Phone number is too long (maximum is 20 characters).');
    if (mobilePhone !== undefined && mobilePhone.length > 50)
      errors.push('mobile_phone: Mobile number is too long (maximum is 50 characters).');
    for (const [key, value] of Object.entries(record)) {
      const texts =
        typeof value === 'string'
          ? [value]
          : Array.isArray(value)
            ? (value as readonly AddressRecord[]).flatMap((a): unknown[] => Object.values(a))
            : [];
      for (const text of texts) {
        if (
          typeof text === 'string' &&
          findUnstorableCharacter(text, schema.maxTextCodePoint) !== undefined
        ) {
          errors.push(unstorableCharacterMessage(key));
          break;
        }
      }
    }
    if (errors.length > 0) throw new PasapiError(400, errors);
    const codes = await findCodeRows(trx, {
      globalTypeId: globalType?.id,
      nhsNumber: nhsNumber ?? '',
      gpCode: record.gpCode ?? '',
      practiceCode: record.practiceCode ?? '',
    });

    // A number held by another patient is refused (OpenEyes soft-deletes the other patient's NHS number).
    if (nhsNumber && globalType !== undefined) {
      const holder = codes.nhsNumberHolder;
      if (holder !== undefined && holder !== patientId)
        throw new PasapiError(409, ['NHSNumber belongs to another patient']);
    }

    // Codes to rows; an unknown code is a warning and leaves the stored value.
    const lookup = async (
      code: string | undefined,
      find: (code: string) => Promise<number | undefined>,
      warning: (code: string) => string,
    ): Promise<number | null | undefined> => {
      if (code === undefined) return keepsAbsent ? undefined : null;
      if (code === '') return null;
      const id = await find(code);
      if (id !== undefined) return id;
      warnings.push(warning(code));
      return isNew ? null : undefined;
    };
    const ethnicGroupId = await lookup(
      record.ethnicGroup,
      (code) => reference.ethnicGroupId(trx, code),
      (code) => `Unrecognised ethnic group code ${code}`,
    );
    const gpId = await lookup(
      record.gpCode,
      async () => codes.gpId,
      (code) => `Could not find GP for code ${code}`,
    );
    const practiceId = await lookup(
      record.practiceCode,
      async () => codes.practiceId,
      (code) => `Could not find Practice for code ${code}`,
    );
    const institutionId = await lookup(
      record.primaryInstitution,
      (code) => reference.institutionId(trx, code),
      (code) => `Unrecognised institution code ${code}`,
    );
    for (const [key, label] of [
      ['nhsNumberStatus', 'NHSNumberStatus'],
      ['languageCode', 'LanguageCode'],
      ['interpreterRequired', 'InterpreterRequired'],
      ['risks', 'Risks'],
    ] as const) {
      if (record[key] !== undefined && record[key] !== '')
        warnings.push(`${label} is not stored by this service`);
    }

    // Addresses: the rows of the contact, matched by postcode and type, then postcode.
    let addresses: PlannedAddress[] | undefined;
    if (record.addresses !== undefined || !keepsAbsent) {
      addresses = [];
      const countries = new Map<string, number | undefined>();
      for (const [index, address] of (record.addresses ?? []).entries()) {
        const code = (address.country ?? '').trim().toUpperCase();
        if (!countries.has(code)) countries.set(code, await reference.countryId(trx, code));
        const countryId = countries.get(code);
        const problems: string[] = [];
        if (countryId === undefined)
          problems.push(`Address ${index + 1}: Unrecognised country code ${address.country ?? ''}`);
        if ((address.postcode ?? '').length > 10)
          problems.push(`Address ${index + 1}: postcode: Postcode is too long (maximum is 10 characters).`);
        for (const [field, value] of Object.entries(address))
          if (field !== 'postcode' && typeof value === 'string' && value.length > 255)
            problems.push(`Address ${index + 1}: ${field}: is too long (maximum is 255 characters).`);
        if (problems.length > 0 || countryId === undefined) {
          warnings.push(...problems, `Address ${index + 1} not added`);
          continue;
        }
        addresses.push({
          existingId: undefined,
          values: {
            address1: address.line1 ?? null,
            address2: address.line2 ?? null,
            city: address.city ?? null,
            county: address.county ?? null,
            postcode: address.postcode ?? null,
            country_id: countryId,
            address_type_id: addressTypeId(address.type),
          },
        });
      }
    }
    return {
      kind: 'write' as const,
      type,
      globalType,
      patientId,
      assignmentId: isNew ? assignment?.id : assignmentId,
      nhsNumber,
      gender,
      primaryPhone,
      mobilePhone,
      ethnicGroupId,
      gpId,
      practiceId,
      institutionId,
      addresses,
      keepsAbsent,
      warnings,
      actor,
    };
  }

  async function apply(
    trx: Transaction<DB>,
    change: PatientChange,
    actor: ChangeActor,
  ): Promise<PatientChangeResult> {
    const planned = await plan(trx, change, actor);
    if (planned.kind === 'skip') return { outcome: 'not_created', patientId: undefined, warnings: [] };
    const { record, externalId } = change;
    const { keepsAbsent } = planned;
    const now = nowDateTime();
    const created = {
      created_user_id: actor.userId,
      created_date: now,
      last_modified_user_id: actor.userId,
      last_modified_date: now,
    };
    const modified = { last_modified_user_id: actor.userId, last_modified_date: now };
    const defined = <T extends Record<string, unknown>>(values: T): Partial<T> =>
      Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined)) as Partial<T>;

    const contactValues = defined({
      title: chooseValue(record.title !== undefined, record.title ?? null, keepsAbsent),
      // Required unless the record is partial: absent means left alone.
      first_name: record.firstName,
      last_name: record.surname,
      primary_phone: chooseValue(
        planned.primaryPhone !== undefined,
        planned.primaryPhone ?? null,
        keepsAbsent,
      ),
      mobile_phone: chooseValue(planned.mobilePhone !== undefined, planned.mobilePhone ?? null, keepsAbsent),
      email: chooseValue(record.email !== undefined, record.email ?? null, keepsAbsent),
    });
    const isDeceased = chooseValue(
      record.isDeceased !== undefined,
      record.isDeceased === true ? 1 : 0,
      keepsAbsent,
    );
    const patientValues = defined({
      dob: chooseValue(record.dateOfBirth !== undefined, record.dateOfBirth ?? null, keepsAbsent),
      gender: chooseValue(
        planned.gender !== undefined,
        planned.gender === '' ? null : (planned.gender ?? null),
        keepsAbsent,
      ),
      ethnic_group_id: planned.ethnicGroupId,
      gp_id: planned.gpId,
      practice_id: planned.practiceId,
      primary_institution_id: planned.institutionId,
      // Absent from a full record: the column's default, not deceased.
      is_deceased: isDeceased === null ? 0 : isDeceased,
      date_of_death: chooseValue(record.dateOfDeath !== undefined, record.dateOfDeath ?? null, keepsAbsent),
    });

    let patientId = planned.patientId;
    let contactId: number;
    if (patientId === undefined) {
      const contact = await trx
        .insertInto('contact')
        .values({ ...created, title: null, first_name: '', last_name: '', ...contactValues })
        .returning('id')
        .executeTakeFirstOrThrow();
      contactId = contact.id;
      const patient = await trx
        .insertInto('patient')
        .values({
          ...created,
          contact_id: contactId,
          ...patientValues,
          is_deceased: patientValues.is_deceased ?? 0,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      patientId = patient.id;
    } else {
      const row = await database.dialect
        .lockRows(trx.selectFrom('patient').select(['contact_id', 'is_deceased']).where('id', '=', patientId))
        .executeTakeFirstOrThrow();
      contactId = row.contact_id;
      // Not deceased and no date of death sent: the stored date goes (OpenEyes's "resurrection").
      if (patientValues.date_of_death === undefined && (patientValues.is_deceased ?? row.is_deceased) === 0)
        patientValues.date_of_death = null;
      await schema.keepRowVersions(trx, 'contact', [contactId]);
      await trx
        .updateTable('contact')
        .set({ ...modified, ...contactValues })
        .where('id', '=', contactId)
        .execute();
      await schema.keepRowVersions(trx, 'patient', [patientId]);
      await trx
        .updateTable('patient')
        .set({ ...modified, ...patientValues })
        .where('id', '=', patientId)
        .execute();
    }

    if (planned.addresses !== undefined)
      await writeAddresses(trx, contactId, planned.addresses, created, modified);
    await writeIdentifiers(trx, patientId, planned, change, created, modified);

    if (planned.assignmentId === undefined) {
      await trx
        .insertInto('pasapi_assignment')
        .values({
          ...created,
          resource_type: PATIENT_RESOURCE,
          resource_id: externalId,
          internal_type: PATIENT_INTERNAL_TYPE,
          internal_id: patientId,
        })
        .execute();
    } else {
      await trx
        .updateTable('pasapi_assignment')
        .set({ ...modified, internal_type: PATIENT_INTERNAL_TYPE, internal_id: patientId })
        .where('id', '=', planned.assignmentId)
        .execute();
    }
    return {
      outcome: planned.patientId === undefined ? 'created' : 'updated',
      patientId,
      warnings: planned.warnings,
    };
  }

  async function writeAddresses(
    trx: Transaction<DB>,
    contactId: number,
    addresses: readonly PlannedAddress[],
    created: Record<string, unknown>,
    modified: Record<string, unknown>,
  ): Promise<void> {
    const stored = await trx
      .selectFrom('address')
      .select(['id', 'postcode', 'address_type_id'])
      .where('contact_id', '=', contactId)
      .orderBy('id')
      .execute();
    const key = (postcode: string | null) => stripSpaces(postcode ?? '').toUpperCase();
    const unmatched = new Map(stored.map((row) => [row.id, row]));
    const inserts: Insertable<DB['address']>[] = [];
    for (const address of addresses) {
      const wanted = key(address.values.postcode);
      const candidates = [...unmatched.values()].filter((row) => key(row.postcode) === wanted);
      const match =
        candidates.find((row) => row.address_type_id === address.values.address_type_id) ?? candidates[0];
      if (match === undefined) {
        inserts.push({ ...created, ...address.values, contact_id: contactId });
      } else {
        unmatched.delete(match.id);
        await schema.keepRowVersions(trx, 'address', [match.id]);
        await trx
          .updateTable('address')
          .set({ ...modified, ...address.values })
          .where('id', '=', match.id)
          .execute();
      }
    }
    // New rows in one statement, in the record's order.
    if (inserts.length > 0) await trx.insertInto('address').values(inserts).execute();
    // The PAS is the master: addresses it no longer sends go, their last version kept.
    const gone = [...unmatched.keys()];
    if (gone.length > 0) {
      await schema.keepRowVersions(trx, 'address', gone);
      await trx.deleteFrom('address').where('id', 'in', gone).execute();
    }
  }

  async function writeIdentifiers(
    trx: Transaction<DB>,
    patientId: number,
    planned: Extract<Awaited<ReturnType<typeof plan>>, { kind: 'write' }>,
    change: PatientChange,
    created: Record<string, unknown>,
    modified: Record<string, unknown>,
  ): Promise<void> {
    const { type, globalType, nhsNumber, keepsAbsent } = planned;
    const value = stripSpaces(change.externalId);
    // The patient's identifiers of both types in one read; `is_local` is the database's own comparison
    // of the URL's value (its collation), as a query for that row alone would match.
    const held = await trx
      .selectFrom('patient_identifier')
      .select((eb) => [
        'id',
        'patient_identifier_type_id as typeId',
        'value',
        'deleted',
        eb
          .case()
          .when(eb.and([eb('patient_identifier_type_id', '=', type.id), eb('value', '=', value)]))
          .then(1)
          .else(0)
          .end()
          .as('is_local'),
      ])
      .where('patient_id', '=', patientId)
      .where('patient_identifier_type_id', 'in', [type.id, globalType?.id ?? type.id])
      .orderBy('id')
      .execute();
    const inserts: Insertable<DB['patient_identifier']>[] = [];
    const insertAll = async () => {
      if (inserts.length > 0) await trx.insertInto('patient_identifier').values(inserts).execute();
    };
    if (!held.some((row) => Number(row.is_local) === 1)) {
      inserts.push({
        ...created,
        patient_id: patientId,
        patient_identifier_type_id: type.id,
        value,
        source_info: 'ACTIVE',
        deleted: 0,
        unique_row_string: `${patientId}-${type.id}-ACTIVE`,
      });
    }
    let globals = globalType === undefined ? [] : held.filter((row) => row.typeId === globalType.id);
    if (globalType !== undefined && globalType.id === type.id && inserts.length > 0) {
      // The URL's type is the GLOBAL one: its new row is one of the globals below.
      await insertAll();
      inserts.length = 0;
      globals = await trx
        .selectFrom('patient_identifier')
        .select([
          'id',
          'patient_identifier_type_id as typeId',
          'value',
          'deleted',
          sql<number>`0`.as('is_local'),
        ])
        .where('patient_id', '=', patientId)
        .where('patient_identifier_type_id', '=', type.id)
        .orderBy('id')
        .execute();
    }
    if (globalType === undefined || nhsNumber === undefined || nhsNumber === '') {
      await insertAll();
      if (globalType !== undefined && !keepsAbsent)
        await removeGlobal(trx, patientId, globalType.id, globals, modified);
      return;
    }
    // The live one first, then the newest.
    const existing = [...globals].sort((x, y) => x.deleted - y.deleted || y.id - x.id)[0];
    if (existing === undefined) {
      inserts.push({
        ...created,
        patient_id: patientId,
        patient_identifier_type_id: globalType.id,
        value: nhsNumber,
        source_info: 'ACTIVE',
        deleted: 0,
        unique_row_string: `${patientId}-${globalType.id}-ACTIVE`,
      });
      await insertAll();
      return;
    }
    await insertAll();
    if (existing.value !== nhsNumber || existing.deleted !== 0) {
      await schema.keepRowVersions(trx, 'patient_identifier', [existing.id]);
      await trx
        .updateTable('patient_identifier')
        .set({
          ...modified,
          value: nhsNumber,
          source_info: 'ACTIVE',
          deleted: 0,
          unique_row_string: `${patientId}-${globalType.id}-ACTIVE`,
        })
        .where('id', '=', existing.id)
        .execute();
    }
  }

  /** A full record without an NHS number: this patient's active one is soft-deleted. */
  async function removeGlobal(
    trx: Transaction<DB>,
    patientId: number,
    globalTypeId: number,
    globals: readonly { id: number; value: string; deleted: number }[],
    modified: Record<string, unknown>,
  ): Promise<void> {
    const active = globals.find((row) => row.deleted === 0);
    if (active === undefined) return;
    const sourceInfo = `DEL BY PASAPI[${Math.floor(Date.now() / 1000)}]`;
    await schema.keepRowVersions(trx, 'patient_identifier', [active.id]);
    await trx
      .updateTable('patient_identifier')
      .set({
        ...modified,
        deleted: 1,
        source_info: sourceInfo,
        unique_row_string: `${patientId}-${globalTypeId}-${sourceInfo}-${active.value}`,
      })
      .where('id', '=', active.id)
      .execute();
  }

  return {
    applyPatientChange: (change, actor) => database.writeTransaction((trx) => apply(trx, change, actor)),
    applyPatientChangeIn: apply,
  };
}
