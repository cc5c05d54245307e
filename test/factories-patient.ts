/**
 * Factories for patient search tests: sites, identifier types (LOCAL and GLOBAL as OpenEyes ships them),
 * identifiers, display-order rules and settings.
 */
import type { Kysely } from 'kysely';
import type { DB, NewRow } from '../src/db/schema.ts';
import { createInstitution, unique } from './factories.ts';

export const LOCAL_REGEX = '/^([0-9]{1,9})$/';
export const GLOBAL_REGEX = '/^([0-9]{3}[- ]?[0-9]{3}[- ]?[0-9]{4})$/i';

export async function createSite(db: Kysely<DB>, institutionId: number): Promise<number> {
  const row = await db
    .insertInto('site')
    .values({
      name: 'Test Site',
      short_name: 'Site',
      remote_id: unique('S').slice(0, 10),
      institution_id: institutionId,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

export async function createIdentifierType(
  db: Kysely<DB>,
  values: Partial<NewRow<'patient_identifier_type'>> & { institution_id: number },
): Promise<number> {
  const usage = values.usage_type ?? 'LOCAL';
  const row = await db
    .insertInto('patient_identifier_type')
    .values({
      usage_type: usage,
      short_title: usage === 'LOCAL' ? 'Hos Num' : 'NHS',
      long_title: usage === 'LOCAL' ? 'Hospital Number' : 'NHS Number',
      validate_regex: usage === 'LOCAL' ? LOCAL_REGEX : GLOBAL_REGEX,
      pad: usage === 'LOCAL' ? '%07s' : null,
      unique_row_string: unique(`${usage}-`),
      ...values,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

export async function addIdentifier(
  db: Kysely<DB>,
  patientId: number,
  typeId: number,
  value: string,
  options: { deleted?: boolean } = {},
): Promise<number> {
  const isDeleted = options.deleted === true;
  const row = await db
    .insertInto('patient_identifier')
    .values({
      patient_id: patientId,
      patient_identifier_type_id: typeId,
      value,
      deleted: isDeleted ? 1 : 0,
      source_info: isDeleted ? `DEL ${unique()}` : 'ACTIVE',
      unique_row_string: isDeleted
        ? `${patientId}-${typeId}-${unique()}`
        : `${patientId}-${typeId}-ACTIVE-${value}`,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

export async function addDisplayOrder(
  db: Kysely<DB>,
  values: Partial<NewRow<'patient_identifier_type_display_order'>> & {
    institution_id: number;
    patient_identifier_type_id: number;
  },
): Promise<void> {
  await db
    .insertInto('patient_identifier_type_display_order')
    .values({ display_order: 1, searchable: 1, unique_row_string: unique('DO-'), ...values })
    .execute();
}

export async function setSetting(
  db: Kysely<DB>,
  key: string,
  value: string,
  level: { institutionId?: number; siteId?: number } = {},
): Promise<void> {
  if (level.siteId !== undefined) {
    await db.insertInto('setting_site').values({ site_id: level.siteId, key, value }).execute();
  } else if (level.institutionId !== undefined) {
    await db
      .insertInto('setting_institution')
      .values({ institution_id: level.institutionId, key, value })
      .execute();
  } else {
    await db.updateTable('setting_installation').set({ value }).where('key', '=', key).execute();
  }
}

/**
 * The typical OpenEyes install (as its seed data sets it up): the current institution (remote_id = `code`)
 * with a LOCAL type, the global institution `NHS` with a GLOBAL type, and no display-order rules (fallback
 * types).
 */
export async function createStandardInstitutions(
  db: Kysely<DB>,
  code: string,
): Promise<{
  institutionId: number;
  globalInstitutionId: number;
  localTypeId: number;
  globalTypeId: number;
}> {
  const institutionId = await createInstitution(db, { remote_id: code, name: 'Current Hospital' });
  const globalInstitutionId = await createInstitution(db, {
    remote_id: 'NHS',
    name: 'National Health Service',
  });
  const localTypeId = await createIdentifierType(db, { institution_id: institutionId, usage_type: 'LOCAL' });
  const globalTypeId = await createIdentifierType(db, {
    institution_id: globalInstitutionId,
    usage_type: 'GLOBAL',
    spacing_rule: '### ### ####',
  });
  return { institutionId, globalInstitutionId, localTypeId, globalTypeId };
}
