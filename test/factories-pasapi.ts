/**
 * Factories for PASAPI tests: an installation with a LOCAL type (`LOCAL-<institution>-0`) and the NHS's
 * GLOBAL type, a GP and a practice by code, XML bodies in the shape of OpenEyes's PASAPI feature tests,
 * and a PUT helper.
 */
import type { Kysely } from 'kysely';
import type { DB } from '../src/db/schema.ts';
import { createInstitution, unique } from './factories.ts';
import { createIdentifierType } from './factories-patient.ts';
import type { TestApp } from './harness.ts';

export interface PasInstallation {
  readonly institutionId: number;
  readonly localTypeId: number;
  readonly globalTypeId: number;
  /** The LOCAL type's `unique_row_string`. */
  readonly typeKey: string;
}

export async function createPasInstallation(db: Kysely<DB>): Promise<PasInstallation> {
  const institutionId = await createInstitution(db, {
    remote_id: unique('R').slice(0, 10),
    name: 'PAS Hospital',
  });
  const globalInstitution = await db
    .selectFrom('institution')
    .select('id')
    .where('remote_id', '=', 'NHS')
    .executeTakeFirst();
  const globalInstitutionId =
    globalInstitution?.id ??
    (await createInstitution(db, { remote_id: 'NHS', name: 'National Health Service' }));
  const typeKey = `LOCAL-${institutionId}-0`;
  const localTypeId = await createIdentifierType(db, {
    institution_id: institutionId,
    usage_type: 'LOCAL',
    unique_row_string: typeKey,
  });
  const existingGlobal = await db
    .selectFrom('patient_identifier_type')
    .select('id')
    .where('usage_type', '=', 'GLOBAL')
    .where('institution_id', '=', globalInstitutionId)
    .orderBy('id')
    .executeTakeFirst();
  const globalTypeId =
    existingGlobal?.id ??
    (await createIdentifierType(db, {
      institution_id: globalInstitutionId,
      usage_type: 'GLOBAL',
      unique_row_string: `GLOBAL-${globalInstitutionId}-0`,
    }));
  return { institutionId, localTypeId, globalTypeId, typeKey };
}

/** A GP (`nat_id`) and a practice (`code`) with their contacts, unless they exist. */
export async function createGpAndPractice(
  db: Kysely<DB>,
  gpCode: string,
  practiceCode: string,
): Promise<void> {
  if (
    (await db.selectFrom('gp').select('id').where('nat_id', '=', gpCode).executeTakeFirst()) === undefined
  ) {
    const contact = await db
      .insertInto('contact')
      .values({ first_name: 'A', last_name: 'Doctor' })
      .returning('id')
      .executeTakeFirstOrThrow();
    await db.insertInto('gp').values({ obj_prof: gpCode, nat_id: gpCode, contact_id: contact.id }).execute();
  }
  if (
    (await db.selectFrom('practice').select('id').where('code', '=', practiceCode).executeTakeFirst()) ===
    undefined
  ) {
    const contact = await db
      .insertInto('contact')
      .values({ first_name: '', last_name: 'Surgery' })
      .returning('id')
      .executeTakeFirstOrThrow();
    await db
      .insertInto('practice')
      .values({ code: practiceCode, phone: '0100', contact_id: contact.id })
      .execute();
  }
}

/** A unique hospital number the LOCAL pattern accepts (1 to 9 digits). */
let numberCounter = 0;
export function newHospitalNumber(): string {
  numberCounter += 1;
  return String((process.pid % 9000) * 10000 + numberCounter)
    .padStart(8, '1')
    .slice(-8);
}

/** A valid NHS-number-shaped value, unique within the process. */
export function newNhsNumber(): string {
  numberCounter += 1;
  return `9${String(process.pid % 10000).padStart(4, '0')}${String(numberCounter).padStart(5, '0')}`;
}

export interface PatientXmlValues {
  readonly hospitalNumber: string;
  readonly nhsNumber?: string;
  readonly title?: string;
  readonly firstName?: string;
  readonly surname?: string;
  readonly dob?: string;
  readonly gender?: string;
  readonly rootAttributes?: string;
  /** Extra elements, written as given. */
  readonly extra?: string;
}

/** The full record of OpenEyes's `testCreatePatient`, with the given values. */
export function fullPatientXml(values: PatientXmlValues): string {
  return `<Patient${values.rootAttributes ?? ''}>
    <NHSNumber>${values.nhsNumber ?? ''}</NHSNumber>
    <NHSNumberStatus>02</NHSNumberStatus>
    <HospitalNumber>${values.hospitalNumber}</HospitalNumber>
    <Title>${values.title ?? 'MRS'}</Title>
    <FirstName>${values.firstName ?? 'Test'}</FirstName>
    <Surname>${values.surname ?? 'API'}</Surname>
    <DateOfBirth>${values.dob ?? '1978-03-01'}</DateOfBirth>
    <Gender>${values.gender ?? 'F'}</Gender>
    <AddressList>
        <Address>
            <Line1>82 Scarisbrick Lane</Line1>
            <Line2/>
            <City>Bethersden</City>
            <County>West Yorkshire</County>
            <Postcode>QA88 2GC</Postcode>
            <Country>GB</Country>
            <Type>HOME</Type>
        </Address>
    </AddressList>
    <TelephoneNumber>03040 6024378</TelephoneNumber>
    <MobilePhoneNumber>03040 6024378</MobilePhoneNumber>
    <EthnicGroup>A</EthnicGroup>
    <DateOfDeath/>
    <PracticeCode>C82103</PracticeCode>
    <GpCode>G3258868</GpCode>${values.extra ?? ''}
</Patient>`;
}

export function pasapiPut(
  app: Pick<TestApp, 'request'>,
  path: string,
  body: string | undefined,
  headers: Record<string, string>,
): Promise<Response> {
  return app.request(`/PASAPI/V1/${path}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/xml', accept: 'application/xml', ...headers },
    ...(body === undefined ? {} : { body }),
  });
}

/** The text of the first `<tag>` of an answer (the answers are small and flat). */
export function xmlText(xml: string, tag: string): string | undefined {
  const match = new RegExp(`<${tag}>([^<]*)</${tag}>`).exec(xml);
  return match?.[1];
}

/** Every `<tag>` text of an answer. */
export function xmlTexts(xml: string, tag: string): string[] {
  return [...xml.matchAll(new RegExp(`<${tag}>([^<]*)</${tag}>`, 'g'))].map((m) => m[1]!);
}

export interface WorklistDefinitionValues {
  readonly typeId: number;
  readonly name: string;
  /** The generated instance's window as stored (`YYYY-MM-DD HH:MM:SS`), start included, end excluded. */
  readonly start: string;
  readonly end: string;
  /** Mapping key -> accepted values (none: any value). */
  readonly mappings?: Readonly<Record<string, readonly string[]>>;
  readonly displayOrder?: number;
}

/**
 * A worklist definition with its mappings and accepted values, and one generated instance of it with
 * one `worklist_attribute` per mapping, as OpenEyes's generator writes them.
 */
export async function createWorklistDefinition(
  db: Kysely<DB>,
  values: WorklistDefinitionValues,
): Promise<{ definitionId: number; worklistId: number; attributeIds: Map<string, number> }> {
  const definition = await db
    .insertInto('worklist_definition')
    .values({
      name: values.name,
      rrule: 'FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR',
      start_time: values.start.slice(11),
      end_time: values.end.slice(11),
      active_from: '2026-01-01 00:00:00',
      display_order: values.displayOrder ?? 1,
      patient_identifier_type_id: values.typeId,
      scheduled: 1,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  const worklist = await db
    .insertInto('worklist')
    .values({
      name: values.name,
      start: values.start,
      end: values.end,
      scheduled: 1,
      worklist_definition_id: definition.id,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  const attributeIds = new Map<string, number>();
  let order = 1;
  for (const [key, accepted] of Object.entries(values.mappings ?? {})) {
    const mapping = await db
      .insertInto('worklist_definition_mapping')
      .values({ worklist_definition_id: definition.id, key, display_order: order })
      .returning('id')
      .executeTakeFirstOrThrow();
    for (const value of accepted)
      await db
        .insertInto('worklist_definition_mapping_value')
        .values({ worklist_definition_mapping_id: mapping.id, mapping_value: value })
        .execute();
    const attribute = await db
      .insertInto('worklist_attribute')
      .values({ worklist_id: worklist.id, name: key, display_order: order })
      .returning('id')
      .executeTakeFirstOrThrow();
    attributeIds.set(key, attribute.id);
    order += 1;
  }
  return { definitionId: definition.id, worklistId: worklist.id, attributeIds };
}

export interface AppointmentXmlValues {
  /** `<PatientId>` content, written as given (default `<Id>patientId</Id>`). */
  readonly patientId?: number;
  readonly patientIdXml?: string;
  readonly date?: string;
  readonly time?: string;
  readonly mappings?: Readonly<Record<string, string>>;
  readonly rootAttributes?: string;
}

/** A `<PatientAppointment>` body in the shape of OpenEyes's PASAPI_PatientAppointment_Test. */
export function appointmentXml(values: AppointmentXmlValues): string {
  const patient =
    values.patientIdXml ??
    (values.patientId === undefined ? '' : `<PatientId><Id>${values.patientId}</Id></PatientId>`);
  const date = values.date === undefined ? '' : `<AppointmentDate>${values.date}</AppointmentDate>`;
  const time = values.time === undefined ? '' : `<AppointmentTime>${values.time}</AppointmentTime>`;
  const mappings =
    values.mappings === undefined
      ? ''
      : `<AppointmentMappingItems>${Object.entries(values.mappings)
          .map(([k, v]) => `<AppointmentMapping><Key>${k}</Key><Value>${v}</Value></AppointmentMapping>`)
          .join('')}</AppointmentMappingItems>`;
  return `<PatientAppointment${values.rootAttributes ?? ''}>
    ${patient}
    <Appointment>${date}${time}${mappings}</Appointment>
</PatientAppointment>`;
}
