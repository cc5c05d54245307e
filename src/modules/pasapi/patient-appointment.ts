/**
 * A booking from the PAS (PASAPI's `PatientAppointment` PUT and DELETE; HL7 SIU S12-S15 and S17 map to
 * the same change, applied inside the listener's transaction): one `worklist_patient` row on exactly one generated worklist instance, its attribute values
 * (`worklist_patient_attribute`), and the `pasapi_assignment` (`PatientAppointment`, external id →
 * `\WorklistPatient`). One write transaction per change; every refusal is decided before the first
 * write. In openeyes mode each row of a versioned table is copied to its `_version` twin before it is
 * updated or deleted.
 *
 * The instance is the one OpenEyes's WorklistManager chooses (pas-and-worklists.md 2.3): a generated
 * `worklist` whose window holds the appointment's `when` (start included, end excluded) and whose
 * definition serves the URL's identifier type, every mapping of the definition satisfied by the request's
 * key/value pairs (the key present, exactly; the value, trimmed, one of the mapping's values ignoring
 * ASCII case, when it has values); exactly one such instance, else 400 `No worklist found for criteria`
 * or `More than worklist matched criteria` with the per-instance reasons.
 *
 * Differences from OpenEyes, each a clear 4xx instead of a 500 (P08): mapping failures, a duplicate
 * booking (409), a partial update that would move the booking. A request key the instance has no
 * attribute for is ignored with a warning (OpenEyes: 500 `Unrecognised attribute`, P19). A DELETE is
 * audited (P22). Not written: pathways (OpenEyes instances one for a `Status` of `Attended`), which the
 * own schema does not hold.
 */
import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../../db/database.ts';
import { findUnstorableCharacter, unstorableCharacterMessage } from '../../db/schema-profile.ts';
import type { DB } from '../../db/schema.ts';
import { formatDateTime, nowDateTime, parseDateTime, wallClockFormat } from '../../db/stored-time.ts';
import { storedEventDate } from '../device-filing/index.ts';
import type { ChangeActor } from './patient-change.ts';
import { findIdentifierType, readInstallationSetting, unknownIdentifierType } from './patient-change.ts';
import { PasapiError, parseLooseBoolean, parseLooseDate } from './pasapi-values.ts';

export const APPOINTMENT_RESOURCE = 'PatientAppointment';
export const APPOINTMENT_INTERNAL_TYPE = '\\WorklistPatient';

/** `<PatientId>`: each tag absent or its trimmed text. Only `Id` (`patient.id`) resolves, as in OpenEyes. */
export interface AppointmentPatientId {
  readonly id?: string;
  readonly pasId?: string;
  readonly nhsNumber?: string;
  readonly hospitalNumber?: string;
}

/** One `<AppointmentMapping>`: its key (trimmed) and value (as sent). */
export interface AppointmentMapping {
  readonly key: string;
  readonly value: string;
}

/** An appointment as the PAS sends it: each element absent (undefined) or present. */
export interface AppointmentRecord {
  readonly patientId?: AppointmentPatientId;
  /** `YYYY-MM-DD`. */
  readonly appointmentDate?: string;
  /** `HH:MM`. */
  readonly appointmentTime?: string;
  readonly mappings?: readonly AppointmentMapping[];
}

export interface AppointmentChange {
  /** The external id of the URL (the PAS's visit id). */
  readonly externalId: string;
  /** `patient_identifier_type.unique_row_string` of the URL: the definitions it may land on. */
  readonly identifierTypeKey: string;
  readonly record: AppointmentRecord;
  /** `X-OE-Partial-Record`: absent elements keep their stored values; no move to another instance. */
  readonly isPartial: boolean;
  /** `X-OE-Update-Only` (or `updateOnly="1"`): an appointment not yet known is not created. */
  readonly isUpdateOnly: boolean;
}

export interface AppointmentChangeResult {
  readonly outcome: 'created' | 'updated' | 'not_created';
  /** `worklist_patient.id`; undefined when nothing was created. */
  readonly worklistPatientId: number | undefined;
  readonly patientId: number | undefined;
  readonly warnings: readonly string[];
}

export interface AppointmentDeleteResult {
  readonly worklistPatientId: number;
  readonly patientId: number;
}

/** A worklist instance a booking can land on. */
interface Candidate {
  readonly id: number;
  readonly name: string;
  readonly definitionId: number;
}

const ATTRIBUTE_VALUE_CHARS = 255;

/** PHP's `strtolower`: ASCII letters only. */
const asciiLower = (text: string) => text.replace(/[A-Z]/g, (c) => c.toLowerCase());

/** The stored `when` of a booking as the site's wall clock, `YYYY-MM-DD HH:MM`. */
function wallClockOf(stored: string, timeZone: string): string | undefined {
  const instant = parseDateTime(stored);
  if (instant === undefined) return undefined;
  const part: Record<string, string> = {};
  for (const { type, value } of wallClockFormat(timeZone).formatToParts(instant)) part[type] = value;
  return `${part.year}-${part.month}-${part.day} ${part.hour}:${part.minute}`;
}

/** The newest `PatientAppointment` assignment of an external id, locked (OpenEyes databases may hold duplicates, P27). */
async function findAssignment(
  database: Database,
  trx: Kysely<DB>,
  externalId: string,
): Promise<{ id: number; internalId: number } | undefined> {
  const row = await database.dialect
    .lockRows(
      trx
        .selectFrom('pasapi_assignment')
        .select(['id', 'internal_id'])
        .where('resource_type', '=', APPOINTMENT_RESOURCE)
        .where('resource_id', '=', externalId)
        .orderBy('id', 'desc'),
    )
    .executeTakeFirst();
  return row === undefined ? undefined : { id: row.id, internalId: row.internal_id };
}

/**
 * `patient.id` of a `<PatientId>`, as OpenEyes v6.8 resolves it: the first present tag of `Id`, `PasId`,
 * `NHSNumber`, `HospitalNumber`, and only `Id` is implemented there. The others are refused here too
 * (400, nothing written): the first error is OpenEyes's own text, the second says what to send instead.
 */
async function resolvePatient(trx: Kysely<DB>, patientId: AppointmentPatientId): Promise<number> {
  if (patientId.id === undefined) {
    const [tag, unsupported] =
      patientId.pasId !== undefined
        ? ['PasId', 'resolvePasId']
        : patientId.nhsNumber !== undefined
          ? ['NHSNumber', 'resolveModelNHSNumber']
          : ['HospitalNumber', 'resolveModelHospitalNumber'];
    throw new PasapiError(400, [
      `PatientId error: ${unsupported} not yet supported.`,
      `PatientId error: a patient is identified by Id (the Id a Patient PUT answers), not by ${tag}`,
    ]);
  }
  const id = /^\d{1,10}$/.test(patientId.id) ? Number(patientId.id) : undefined;
  const row =
    id === undefined || id > 2_147_483_647
      ? undefined
      : await trx
          .selectFrom('patient')
          .select('id')
          .where('id', '=', id)
          .where('deleted', '=', 0)
          .executeTakeFirst();
  if (row === undefined) throw new PasapiError(400, ['PatientId error: Patient not found.']);
  return row.id;
}

/** True when a setting's text reads as on (`on`, `1`, `true`, ...). */
function isSettingOn(value: string | undefined): boolean {
  return value !== undefined && parseLooseBoolean(value) === true;
}

export function createPatientAppointments(
  database: Database,
  options: { readonly timeZone: string },
): {
  applyAppointmentChange(change: AppointmentChange, actor: ChangeActor): Promise<AppointmentChangeResult>;
  /** The same change inside a write transaction of the caller's, which commits it with its own rows. */
  applyAppointmentChangeIn(
    trx: Transaction<DB>,
    change: AppointmentChange,
    actor: ChangeActor,
  ): Promise<AppointmentChangeResult>;
  deleteAppointment(externalId: string, actor: ChangeActor): Promise<AppointmentDeleteResult>;
  /** The same delete inside a write transaction of the caller's. */
  deleteAppointmentIn(
    trx: Transaction<DB>,
    externalId: string,
    actor: ChangeActor,
  ): Promise<AppointmentDeleteResult>;
} {
  const { schema } = database;
  const { timeZone } = options;

  /**
   * The one instance for `storedWhen` and `attributes`, or the reasons there is none (OpenEyes's
   * error list: each candidate's failures, then the verdict).
   */
  async function chooseWorklist(
    trx: Kysely<DB>,
    typeId: number,
    storedWhen: string,
    attributes: ReadonlyMap<string, string>,
  ): Promise<{ worklist: Candidate } | { errors: string[] }> {
    const candidates = await trx
      .selectFrom('worklist as w')
      .innerJoin('worklist_definition as d', 'd.id', 'w.worklist_definition_id')
      .select(['w.id', 'w.name', 'd.id as definitionId'])
      .where('w.start', '<=', storedWhen)
      .where('w.end', '>', storedWhen)
      .where('d.patient_identifier_type_id', '=', typeId)
      .orderBy('w.start')
      .orderBy('d.display_order')
      .orderBy('w.id')
      .execute();
    const definitionIds = [...new Set(candidates.map((c) => c.definitionId))];
    const mappingRows =
      definitionIds.length === 0
        ? []
        : await trx
            .selectFrom('worklist_definition_mapping as m')
            .leftJoin('worklist_definition_mapping_value as v', 'v.worklist_definition_mapping_id', 'm.id')
            .select(['m.id', 'm.worklist_definition_id', 'm.key', 'v.mapping_value'])
            .where('m.worklist_definition_id', 'in', definitionIds)
            .orderBy('m.display_order')
            .orderBy('m.id')
            .execute();
    type Mapping = { key: string; values: Set<string> };
    const mappings = new Map<number, Map<number, Mapping>>();
    for (const row of mappingRows) {
      const ofDefinition = mappings.get(row.worklist_definition_id) ?? new Map<number, Mapping>();
      mappings.set(row.worklist_definition_id, ofDefinition);
      const mapping = ofDefinition.get(row.id) ?? { key: row.key, values: new Set<string>() };
      ofDefinition.set(row.id, mapping);
      if (row.mapping_value !== null) mapping.values.add(asciiLower(row.mapping_value.trim()));
    }
    const errors: string[] = [];
    const matched = candidates.filter((candidate) => {
      let isMatch = true;
      for (const { key, values } of mappings.get(candidate.definitionId)?.values() ?? []) {
        const value = attributes.get(key);
        if (value === undefined) {
          errors.push(`Missing key ${key} for ${candidate.name}`);
          isMatch = false;
        } else if (values.size > 0 && !values.has(asciiLower(value.trim()))) {
          errors.push(`${value} not valid for key '${key}'`);
          isMatch = false;
        }
      }
      return isMatch;
    });
    if (matched.length === 1) return { worklist: matched[0]! };
    errors.push(
      matched.length === 0 ? 'No worklist found for criteria' : 'More than worklist matched criteria',
    );
    return { errors };
  }

  async function apply(
    trx: Transaction<DB>,
    change: AppointmentChange,
    actor: ChangeActor,
  ): Promise<AppointmentChangeResult> {
    const { record, isPartial } = change;
    const type = await findIdentifierType(trx, change.identifierTypeKey);
    if (type === undefined) throw unknownIdentifierType(change.identifierTypeKey);
    const assignment = await findAssignment(database, trx, change.externalId);
    const booking =
      assignment === undefined
        ? undefined
        : await database.dialect
            .lockRows(
              trx
                .selectFrom('worklist_patient')
                .select(['id', 'worklist_id', 'patient_id', 'when'])
                .where('id', '=', assignment.internalId),
            )
            .executeTakeFirst();
    // An assignment whose booking is gone is stale: the appointment is new (OpenEyes's getInternal(true)).
    if (booking === undefined && isPartial)
      throw new PasapiError(400, ['Cannot perform partial update on a new record']);
    if (booking === undefined && change.isUpdateOnly)
      return { outcome: 'not_created', worklistPatientId: undefined, patientId: undefined, warnings: [] };

    const errors: string[] = [];
    if (!isPartial) {
      if (record.patientId === undefined) errors.push('PatientId is required');
      if (record.appointmentDate === undefined) errors.push('Appointment error: AppointmentDate is required');
      if (record.appointmentTime === undefined) errors.push('Appointment error: AppointmentTime is required');
    }
    if (errors.length > 0) throw new PasapiError(400, errors);
    const patientId =
      record.patientId !== undefined ? await resolvePatient(trx, record.patientId) : booking!.patient_id;

    // `when`: the site's wall clock of date and time; a partial update takes the missing part from the
    // stored booking.
    const storedWall = booking?.when == null ? undefined : wallClockOf(booking.when, timeZone);
    const date = record.appointmentDate ?? storedWall?.slice(0, 10);
    const time = record.appointmentTime ?? storedWall?.slice(11, 16);
    if (date === undefined || time === undefined)
      throw new PasapiError(400, ['Appointment error: AppointmentDate and AppointmentTime are required']);
    const storedWhen = storedEventDate(`${date} ${time}:00`, timeZone);

    const attributes = new Map<string, string>();
    if (isPartial && booking !== undefined) {
      const stored = await trx
        .selectFrom('worklist_patient_attribute as a')
        .innerJoin('worklist_attribute as n', 'n.id', 'a.worklist_attribute_id')
        .select(['n.name', 'a.attribute_value'])
        .where('a.worklist_patient_id', '=', booking.id)
        .execute();
      for (const row of stored) attributes.set(row.name, row.attribute_value ?? '');
    }
    for (const { key, value } of record.mappings ?? []) attributes.set(key, value);
    for (const [key, value] of attributes) {
      if ([...value].length > ATTRIBUTE_VALUE_CHARS)
        errors.push(`The value of ${key} is longer than ${ATTRIBUTE_VALUE_CHARS} characters`);
      if (findUnstorableCharacter(value, schema.maxTextCodePoint) !== undefined)
        errors.push(unstorableCharacterMessage(`The value of ${key}`));
    }
    if (errors.length > 0) throw new PasapiError(400, errors);

    const chosen = await chooseWorklist(trx, type.id, storedWhen, attributes);
    if ('errors' in chosen) {
      // `worklist_ignore_date`: appointments before it that land nowhere are skipped, not refused.
      const ignoreDate = parseLooseDate((await readInstallationSetting(trx, 'worklist_ignore_date')) ?? '');
      if (ignoreDate !== undefined && date < ignoreDate)
        return {
          outcome: 'not_created',
          worklistPatientId: undefined,
          patientId: undefined,
          warnings: chosen.errors,
        };
      throw new PasapiError(400, chosen.errors);
    }
    const worklist = chosen.worklist;
    if (booking !== undefined && isPartial && booking.worklist_id !== worklist.id)
      throw new PasapiError(400, ['Worklist mapping change not allowed for partial update.']);

    const allowsDuplicates = isSettingOn(
      await readInstallationSetting(trx, 'worklist_allow_duplicate_patients'),
    );
    if (!allowsDuplicates) {
      let other = trx
        .selectFrom('worklist_patient')
        .select('id')
        .where('worklist_id', '=', worklist.id)
        .where('patient_id', '=', patientId);
      if (booking !== undefined) other = other.where('id', '<>', booking.id);
      if ((await other.executeTakeFirst()) !== undefined)
        throw new PasapiError(409, ['Patient is already on the given worklist.']);
    }

    const instanceAttributes = await trx
      .selectFrom('worklist_attribute')
      .select(['id', 'name'])
      .where('worklist_id', '=', worklist.id)
      .execute();
    const attributeIds = new Map(instanceAttributes.map((a) => [a.name, a.id]));
    const warnings: string[] = [];
    const values = new Map<number, string>();
    for (const [key, value] of attributes) {
      const attributeId = attributeIds.get(key);
      if (attributeId === undefined) warnings.push(`Unrecognised attribute ${key} for ${worklist.name}`);
      else values.set(attributeId, value);
    }

    const now = nowDateTime();
    const modified = { last_modified_user_id: actor.userId, last_modified_date: now };
    const created = { ...modified, created_user_id: actor.userId, created_date: now };
    let worklistPatientId: number;
    if (booking === undefined) {
      const row = await trx
        .insertInto('worklist_patient')
        .values({ ...created, worklist_id: worklist.id, patient_id: patientId, when: storedWhen })
        .returning('id')
        .executeTakeFirstOrThrow();
      worklistPatientId = row.id;
    } else {
      worklistPatientId = booking.id;
      await schema.keepRowVersions(trx, 'worklist_patient', [booking.id]);
      await trx
        .updateTable('worklist_patient')
        .set({ ...modified, worklist_id: worklist.id, patient_id: patientId, when: storedWhen })
        .where('id', '=', booking.id)
        .execute();
    }

    const storedValues =
      booking === undefined
        ? []
        : await trx
            .selectFrom('worklist_patient_attribute as a')
            .innerJoin('worklist_attribute as n', 'n.id', 'a.worklist_attribute_id')
            .select(['a.id', 'a.worklist_attribute_id', 'a.attribute_value', 'n.worklist_id'])
            .where('a.worklist_patient_id', '=', booking.id)
            .execute();
    // Values of the instance the booking moved from go (OpenEyes deletes them too).
    const gone = storedValues.filter((v) => v.worklist_id !== worklist.id).map((v) => v.id);
    if (gone.length > 0) {
      await schema.keepRowVersions(trx, 'worklist_patient_attribute', gone);
      await trx.deleteFrom('worklist_patient_attribute').where('id', 'in', gone).execute();
    }
    const kept = new Map(
      storedValues.filter((v) => v.worklist_id === worklist.id).map((v) => [v.worklist_attribute_id, v]),
    );
    for (const [attributeId, value] of values) {
      const existing = kept.get(attributeId);
      if (existing === undefined) {
        await trx
          .insertInto('worklist_patient_attribute')
          .values({
            ...created,
            worklist_attribute_id: attributeId,
            worklist_patient_id: worklistPatientId,
            attribute_value: value,
          })
          .execute();
      } else if (existing.attribute_value !== value) {
        await schema.keepRowVersions(trx, 'worklist_patient_attribute', [existing.id]);
        await trx
          .updateTable('worklist_patient_attribute')
          .set({ ...modified, attribute_value: value })
          .where('id', '=', existing.id)
          .execute();
      }
    }

    if (assignment === undefined) {
      await trx
        .insertInto('pasapi_assignment')
        .values({
          ...created,
          resource_type: APPOINTMENT_RESOURCE,
          resource_id: change.externalId,
          internal_type: APPOINTMENT_INTERNAL_TYPE,
          internal_id: worklistPatientId,
        })
        .execute();
    } else {
      await trx
        .updateTable('pasapi_assignment')
        .set({ ...modified, internal_type: APPOINTMENT_INTERNAL_TYPE, internal_id: worklistPatientId })
        .where('id', '=', assignment.id)
        .execute();
    }
    return {
      outcome: booking === undefined ? 'created' : 'updated',
      worklistPatientId,
      patientId,
      warnings,
    };
  }

  async function remove(
    trx: Transaction<DB>,
    externalId: string,
    actor: ChangeActor,
  ): Promise<AppointmentDeleteResult> {
    const assignment = await findAssignment(database, trx, externalId);
    const booking =
      assignment === undefined
        ? undefined
        : await database.dialect
            .lockRows(
              trx
                .selectFrom('worklist_patient')
                .select(['id', 'patient_id'])
                .where('id', '=', assignment.internalId),
            )
            .executeTakeFirst();
    if (assignment === undefined || booking === undefined)
      throw new PasapiError(404, ['Could not find resource for external Id']);
    const modified = { last_modified_user_id: actor.userId, last_modified_date: formatDateTime(new Date()) };
    // Events recorded against the booking keep their patient and episode, not the link.
    const events = await trx
      .selectFrom('event')
      .select('id')
      .where('worklist_patient_id', '=', booking.id)
      .execute();
    if (events.length > 0) {
      const ids = events.map((e) => e.id);
      await schema.keepRowVersions(trx, 'event', ids);
      await trx
        .updateTable('event')
        .set({ ...modified, worklist_patient_id: null })
        .where('id', 'in', ids)
        .execute();
    }
    const values = await trx
      .selectFrom('worklist_patient_attribute')
      .select('id')
      .where('worklist_patient_id', '=', booking.id)
      .execute();
    if (values.length > 0) {
      const ids = values.map((v) => v.id);
      await schema.keepRowVersions(trx, 'worklist_patient_attribute', ids);
      await trx.deleteFrom('worklist_patient_attribute').where('id', 'in', ids).execute();
    }
    await schema.keepRowVersions(trx, 'worklist_patient', [booking.id]);
    await trx.deleteFrom('worklist_patient').where('id', '=', booking.id).execute();
    await trx.deleteFrom('pasapi_assignment').where('id', '=', assignment.id).execute();
    return { worklistPatientId: booking.id, patientId: booking.patient_id };
  }

  return {
    applyAppointmentChange: (change, actor) => database.writeTransaction((trx) => apply(trx, change, actor)),
    applyAppointmentChangeIn: apply,
    deleteAppointment: (externalId, actor) =>
      database.writeTransaction((trx) => remove(trx, externalId, actor)),
    deleteAppointmentIn: remove,
  };
}
