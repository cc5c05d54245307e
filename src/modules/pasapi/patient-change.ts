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
import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../../db/database.ts';
import { findUnstorableCharacter, unstorableCharacterMessage } from '../../db/schema-profile.ts';
import type { DB } from '../../db/schema.ts';
import { nowDateTime } from '../../db/stored-time.ts';
import { applyPad, translatePcre } from '../patient/index.ts';
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

export const PATIENT_RESOURCE = 'Patient';
export const PATIENT_INTERNAL_TYPE = '\\Patient';

/** The longest identifier value PASAPI writes: the hospital number's bound (`pasapi_assignment.resource_id`). */
export const MAX_IDENTIFIER_CHARACTERS = 40;
const ADDRESS_TYPE_HOME = 2;
const ADDRESS_TYPE_CORRESPOND = 3;

/** The identifier type of a `unique_row_string`, with its compiled pattern. */
export interface PasIdentifierType {
  readonly id: number;
  readonly usageType: string;
  readonly institutionId: number;
  readonly siteId: number | null;
  readonly validateRegex: string;
  readonly regex: RegExp | undefined;
  readonly pad: string | null;
}

export async function findIdentifierType(
  db: Kysely<DB>,
  key: string,
): Promise<PasIdentifierType | undefined> {
  const row = await db
    .selectFrom('patient_identifier_type')
    .select(['id', 'usage_type', 'institution_id', 'site_id', 'validate_regex', 'pad'])
    .where('unique_row_string', '=', key)
    .executeTakeFirst();
  if (row === undefined) return undefined;
  return {
    id: row.id,
    usageType: row.usage_type,
    institutionId: row.institution_id,
    siteId: row.site_id,
    validateRegex: row.validate_regex,
    regex: translatePcre(row.validate_regex),
    pad: row.pad,
  };
}

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

/** A setting at installation level, else its metadata default. */
export async function readInstallationSetting(db: Kysely<DB>, key: string): Promise<string | undefined> {
  const installed = await db
    .selectFrom('setting_installation')
    .select('value')
    .where('key', '=', key)
    .executeTakeFirst();
  if (installed !== undefined && installed.value !== null) return installed.value;
  const metadata = await db
    .selectFrom('setting_metadata')
    .select('default_value')
    .where('key', '=', key)
    .executeTakeFirst();
  return metadata?.default_value ?? undefined;
}

/** The current GLOBAL identifier type (the institution of `global_institution_remote_id`, default NHS). */
export async function findGlobalType(db: Kysely<DB>): Promise<PasIdentifierType | undefined> {
  const remoteId = (await readInstallationSetting(db, 'global_institution_remote_id')) ?? 'NHS';
  const row = await db
    .selectFrom('patient_identifier_type as t')
    .innerJoin('institution as i', 'i.id', 't.institution_id')
    .select('t.unique_row_string')
    .where('t.usage_type', '=', 'GLOBAL')
    .where('i.remote_id', '=', remoteId)
    .orderBy('t.id')
    .executeTakeFirst();
  return row?.unique_row_string == null ? undefined : findIdentifierType(db, row.unique_row_string);
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

/** Builds the patient-change function over one database. */
export function createPatientChanges(database: Database): {
  applyPatientChange(change: PatientChange, actor: ChangeActor): Promise<PatientChangeResult>;
  /** The same change inside a write transaction of the caller's, which commits it with its own rows. */
  applyPatientChangeIn(
    trx: Transaction<DB>,
    change: PatientChange,
    actor: ChangeActor,
  ): Promise<PatientChangeResult>;
} {
  const { schema } = database;

  async function plan(trx: Transaction<DB>, change: PatientChange, actor: ChangeActor) {
    const { record, externalId } = change;
    const type = await findIdentifierType(trx, change.identifierTypeKey);
    if (type === undefined) throw unknownIdentifierType(change.identifierTypeKey);
    if (!isValidForType(externalId, type))
      throw new PasapiError(422, [
        `Patient number (format) in request URL is invalid: '${externalId}'. Acceptable: ${type.validateRegex}`,
      ]);
    if (record.hospitalNumber !== undefined && record.hospitalNumber !== externalId)
      throw new PasapiError(422, [
        `HospitalNumber in URL and in XML must match: ${externalId} not equal to ${record.hospitalNumber}`,
      ]);
    const globalType = await findGlobalType(trx);
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

    // Identity.
    let patientId = await findPatientByIdentifier(trx, type.id, externalId);
    const isFoundByNumber = patientId !== undefined;
    const gender = record.gender === undefined ? undefined : record.gender.trim().toUpperCase();
    if (patientId === undefined && nhsNumber && globalType !== undefined && record.dateOfBirth && gender) {
      const match = await trx
        .selectFrom('patient_identifier as pi')
        .innerJoin('patient as p', 'p.id', 'pi.patient_id')
        .select('p.id')
        .where('pi.patient_identifier_type_id', '=', globalType.id)
        .where('pi.value', '=', nhsNumber)
        .where('pi.deleted', '=', 0)
        .where('p.deleted', '=', 0)
        .where('p.dob', '=', record.dateOfBirth)
        .where('p.gender', '=', gender)
        .orderBy('p.id')
        .executeTakeFirst();
      patientId = match?.id;
    }
    const assignment = await findPatientAssignment(trx, externalId);
    let assignedPatient: number | undefined;
    if (assignment !== undefined) {
      const live = await trx
        .selectFrom('patient')
        .select('id')
        .where('id', '=', assignment.internalId)
        .where('deleted', '=', 0)
        .executeTakeFirst();
      assignedPatient = live?.id;
    }
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
    const isPhoneChecked = (await readInstallationSetting(trx, 'validate_PASAPI_phone_number')) !== 'off';
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

    // A number held by another patient is refused (OpenEyes soft-deletes the other patient's NHS number).
    if (nhsNumber && globalType !== undefined) {
      const holder = await findPatientByIdentifier(trx, globalType.id, nhsNumber);
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
      async (code) =>
        (
          await trx
            .selectFrom('ethnic_group')
            .select('id')
            .where('code', '=', code)
            .where('deleted', '=', 0)
            .executeTakeFirst()
        )?.id,
      (code) => `Unrecognised ethnic group code ${code}`,
    );
    const gpId = await lookup(
      record.gpCode,
      async (code) =>
        (await trx.selectFrom('gp').select('id').where('nat_id', '=', code).orderBy('id').executeTakeFirst())
          ?.id,
      (code) => `Could not find GP for code ${code}`,
    );
    const practiceId = await lookup(
      record.practiceCode,
      async (code) =>
        (
          await trx
            .selectFrom('practice')
            .select('id')
            .where('code', '=', code)
            .orderBy('id')
            .executeTakeFirst()
        )?.id,
      (code) => `Could not find Practice for code ${code}`,
    );
    const institutionId = await lookup(
      record.primaryInstitution,
      async (code) =>
        (
          await trx
            .selectFrom('institution')
            .select('id')
            .where('remote_id', '=', code)
            .orderBy('id')
            .executeTakeFirst()
        )?.id,
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
        if (!countries.has(code))
          countries.set(
            code,
            (await trx.selectFrom('country').select('id').where('code', '=', code).executeTakeFirst())?.id,
          );
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
    for (const address of addresses) {
      const wanted = key(address.values.postcode);
      const candidates = [...unmatched.values()].filter((row) => key(row.postcode) === wanted);
      const match =
        candidates.find((row) => row.address_type_id === address.values.address_type_id) ?? candidates[0];
      if (match === undefined) {
        await trx
          .insertInto('address')
          .values({ ...created, ...address.values, contact_id: contactId })
          .execute();
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
    const local = await trx
      .selectFrom('patient_identifier')
      .select('id')
      .where('patient_id', '=', patientId)
      .where('patient_identifier_type_id', '=', type.id)
      .where('value', '=', value)
      .executeTakeFirst();
    if (local === undefined) {
      await trx
        .insertInto('patient_identifier')
        .values({
          ...created,
          patient_id: patientId,
          patient_identifier_type_id: type.id,
          value,
          source_info: 'ACTIVE',
          deleted: 0,
          unique_row_string: `${patientId}-${type.id}-ACTIVE`,
        })
        .execute();
    }
    if (globalType === undefined || nhsNumber === undefined) {
      if (globalType !== undefined && !keepsAbsent)
        await removeGlobal(trx, patientId, globalType.id, modified);
      return;
    }
    if (nhsNumber === '') {
      if (!keepsAbsent) await removeGlobal(trx, patientId, globalType.id, modified);
      return;
    }
    const existing = await trx
      .selectFrom('patient_identifier')
      .select(['id', 'value', 'deleted'])
      .where('patient_id', '=', patientId)
      .where('patient_identifier_type_id', '=', globalType.id)
      .orderBy('deleted')
      .orderBy('id', 'desc')
      .executeTakeFirst();
    if (existing === undefined) {
      await trx
        .insertInto('patient_identifier')
        .values({
          ...created,
          patient_id: patientId,
          patient_identifier_type_id: globalType.id,
          value: nhsNumber,
          source_info: 'ACTIVE',
          deleted: 0,
          unique_row_string: `${patientId}-${globalType.id}-ACTIVE`,
        })
        .execute();
    } else if (existing.value !== nhsNumber || existing.deleted !== 0) {
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
    modified: Record<string, unknown>,
  ): Promise<void> {
    const active = await activeValueOf(trx, patientId, globalTypeId);
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
