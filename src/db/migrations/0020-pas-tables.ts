/**
 * OpenEyes's tables of a patient's demographics and of its PASAPI module in the own schema, with the names
 * and shapes of an OpenEyes v6.8 database: `address` (with `address_type` and `country`), `gp`,
 * `practice`, `contact_practice_associate`, `ethnic_group`, `pasapi_assignment`, `pasapi_xpath_remap`,
 * `pasapi_remap_value` and `patient_merge_request` (its v6.8 column names). Seeded as OpenEyes's
 * consolidation migration seeds them (address types, the United Kingdom, the NHS ethnic groups), with the
 * metadata of the PASAPI settings `pasapi_automerge` (default 1) and `validate_PASAPI_phone_number` (on).
 *
 * One deliberate difference: `pasapi_assignment` keeps the unique (`resource_id`, `resource_type`) key that
 * OpenEyes dropped (m200812), so that one external id can never name two records.
 */
import type { AnyDb, DialectAdapter } from './helpers.ts';
import { auditColumns, flag, idColumn } from './helpers.ts';

const ADDRESS_TYPES: readonly [number, string][] = [
  [1, 'Reply to'],
  [2, 'Home'],
  [3, 'Correspondence'],
  [4, 'Transport'],
];

const ETHNIC_GROUPS: readonly [string, string][] = [
  ['A', 'White - British'],
  ['B', 'White - Irish'],
  ['C', 'White - Any other background'],
  ['D', 'Mixed - White/Black Caribbean'],
  ['E', 'Mixed - White/Black African'],
  ['F', 'Mixed - White and Asian'],
  ['G', 'Mixed - Any other'],
  ['H', 'Asian - Indian'],
  ['J', 'Asian - Pakistani'],
  ['K', 'Asian - Bangladeshi'],
  ['L', 'Asian - Any other background'],
  ['M', 'Black - Caribbean'],
  ['N', 'Black - African'],
  ['P', 'Black - Any other background'],
  ['R', 'Other - Chinese'],
  ['S', 'Other - Any other'],
  ['Z', 'Not Stated'],
];

export async function up(db: AnyDb, dialect: DialectAdapter): Promise<void> {
  const t = dialect.columnTypes;
  const s = db.schema;

  await idColumn(s.createTable('address_type'), t)
    .addColumn('name', 'varchar(64)', (c) => c.notNull())
    .$call((b) => auditColumns(b, t))
    .execute();
  // In id order on the empty table, so that the sequences of the server dialects stay right.
  for (const [, name] of ADDRESS_TYPES) await db.insertInto('address_type').values({ name }).execute();

  await idColumn(s.createTable('country'), t)
    .addColumn('code', 'varchar(2)', (c) => c.unique())
    .addColumn('name', 'varchar(50)', (c) => c.unique())
    .$call((b) => auditColumns(b, t))
    .execute();
  await db.insertInto('country').values({ code: 'GB', name: 'United Kingdom' }).execute();

  await idColumn(s.createTable('ethnic_group'), t)
    .addColumn('name', 'varchar(64)', (c) => c.notNull())
    .addColumn('code', 'varchar(1)', (c) => c.notNull())
    .addColumn('display_order', 'integer', (c) => c.notNull().defaultTo(1))
    .$call((b) => auditColumns(b, t))
    .addColumn('deleted', 'integer', (c) => flag(c, 0))
    .execute();
  await db
    .insertInto('ethnic_group')
    .values(ETHNIC_GROUPS.map(([code, name], i) => ({ code, name, display_order: (i + 1) * 10 })))
    .execute();

  await idColumn(s.createTable('address'), t)
    .addColumn('address1', 'varchar(255)')
    .addColumn('address2', 'varchar(255)')
    .addColumn('city', 'varchar(255)')
    .addColumn('postcode', 'varchar(10)')
    .addColumn('county', 'varchar(255)')
    .addColumn('country_id', 'integer', (c) => c.notNull().references('country.id'))
    .addColumn('email', 'varchar(255)')
    .$call((b) => auditColumns(b, t))
    .addColumn('contact_id', 'integer', (c) => c.notNull().references('contact.id'))
    .addColumn('date_start', t.dateTime)
    .addColumn('date_end', t.dateTime)
    .addColumn('address_type_id', 'integer', (c) => c.references('address_type.id'))
    .execute();
  await s.createIndex('address_contact_id_fk').on('address').column('contact_id').execute();

  await idColumn(s.createTable('gp'), t)
    .addColumn('obj_prof', 'varchar(20)', (c) => c.notNull())
    .addColumn('nat_id', 'varchar(20)', (c) => c.notNull())
    .addColumn('is_active', 'integer', (c) => c.defaultTo(1))
    .$call((b) => auditColumns(b, t))
    .addColumn('contact_id', 'integer', (c) => c.notNull().references('contact.id'))
    .execute();
  await s.createIndex('gp_nat_id').on('gp').column('nat_id').execute();

  await idColumn(s.createTable('practice'), t)
    .addColumn('code', 'varchar(64)', (c) => c.notNull())
    .addColumn('phone', 'varchar(64)', (c) => c.notNull())
    .addColumn('is_active', 'integer', (c) => c.defaultTo(1))
    .$call((b) => auditColumns(b, t))
    .addColumn('contact_id', 'integer', (c) => c.notNull().references('contact.id'))
    .execute();
  await s.createIndex('practice_code').on('practice').column('code').execute();

  await idColumn(s.createTable('contact_practice_associate'), t)
    .addColumn('gp_id', 'integer', (c) => c.notNull().references('gp.id'))
    .addColumn('practice_id', 'integer', (c) => c.notNull().references('practice.id'))
    .addColumn('provider_no', 'varchar(255)')
    .$call((b) => auditColumns(b, t))
    .execute();

  await idColumn(s.createTable('pasapi_assignment'), t)
    .addColumn('resource_type', 'varchar(40)')
    .addColumn('resource_id', 'varchar(40)')
    .addColumn('internal_type', 'varchar(40)')
    .addColumn('internal_id', 'integer', (c) => c.notNull())
    .$call((b) => auditColumns(b, t))
    .addUniqueConstraint('internal_key', ['internal_id', 'internal_type'])
    .addUniqueConstraint('resource_key', ['resource_id', 'resource_type'])
    .execute();

  await idColumn(s.createTable('pasapi_xpath_remap'), t)
    .addColumn('name', 'varchar(127)', (c) => c.notNull())
    .addColumn('xpath', 'varchar(511)', (c) => c.notNull())
    .$call((b) => auditColumns(b, t))
    .addColumn('institution_id', 'integer', (c) => c.references('institution.id'))
    .execute();

  await idColumn(s.createTable('pasapi_remap_value'), t)
    .addColumn('xpath_id', 'integer', (c) =>
      c.notNull().references('pasapi_xpath_remap.id').onDelete('cascade'),
    )
    .addColumn('input', 'varchar(31)', (c) => c.notNull())
    .addColumn('output', 'varchar(31)')
    .$call((b) => auditColumns(b, t))
    .execute();

  await idColumn(s.createTable('patient_merge_request'), t)
    .addColumn('primary_id', 'integer', (c) => c.notNull().references('patient.id'))
    .addColumn('primary_local_identifier_value', 'varchar(40)')
    .addColumn('primary_global_identifier_value', 'varchar(40)')
    .addColumn('primary_dob', t.date)
    .addColumn('primary_gender', 'varchar(1)')
    .addColumn('secondary_id', 'integer', (c) => c.notNull().references('patient.id'))
    .addColumn('secondary_local_identifier_value', 'varchar(40)')
    .addColumn('secondary_global_identifier_value', 'varchar(40)')
    .addColumn('secondary_dob', t.date)
    .addColumn('secondary_gender', 'varchar(1)')
    .addColumn('merge_json', t.text)
    .addColumn('comment', t.text)
    .addColumn('status', 'integer', (c) => c.defaultTo(0))
    .$call((b) => auditColumns(b, t))
    .addColumn('deleted', 'integer', (c) => flag(c, 0))
    .execute();
  await s
    .createIndex('patient_merge_request_pair')
    .on('patient_merge_request')
    .columns(['primary_id', 'secondary_id'])
    .execute();

  // Metadata only, as OpenEyes's migrations add them: the default applies until a site sets a value.
  await db
    .insertInto('setting_metadata')
    .values([
      {
        key: 'pasapi_automerge',
        name: 'Automatic patient merge strategy',
        default_value: '1',
        lowest_setting_level: 'INSTALLATION',
      },
      {
        key: 'validate_PASAPI_phone_number',
        name: 'Validate phone numbers received through PASAPI',
        default_value: 'on',
        lowest_setting_level: 'INSTALLATION',
      },
    ])
    .execute();
}
