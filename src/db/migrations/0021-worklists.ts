/**
 * OpenEyes's worklist tables in the own schema, with the names and shapes of an OpenEyes v6.8 database
 * (`m160503_142416_initial_worklist_models`, `m160510_075145_add_automatic_worklists`,
 * `m160714_084347_constrain_worklist_attributes`, `m200818_130923`, `m210111_035237`, `m210829_025416`):
 * the definitions that generate instances (with their attribute mappings, accepted values and display
 * contexts), the instances (`worklist`) with the attribute names they accept, the bookings
 * (`worklist_patient`) and their attribute values. The `pathway_type`, `firm` and `subspecialty` tables
 * are not in the own schema: their id columns are kept, without a foreign key.
 *
 * `mwl_entry` is the service's own table (`cra_mwl_entry` on OpenEyes): the Study Instance UID and the
 * accession number the Modality Worklist handed out for a booking, generated once and kept after the
 * booking is deleted, so that the same entry always answers the same and a returning study can be
 * traced to it.
 */
import type { AnyDb, DialectAdapter } from './helpers.ts';
import { auditColumns, flag, idColumn } from './helpers.ts';

export async function up(db: AnyDb, dialect: DialectAdapter): Promise<void> {
  const t = dialect.columnTypes;
  const s = db.schema;
  const time = dialect.name === 'sqlite' ? 'text' : 'time';

  await idColumn(s.createTable('worklist_definition'), t)
    .addColumn('name', 'varchar(255)', (c) => c.notNull())
    .addColumn('description', t.text)
    .addColumn('worklist_name', 'varchar(255)')
    .addColumn('rrule', t.text)
    .addColumn('start_time', time, (c) => c.notNull())
    .addColumn('end_time', time, (c) => c.notNull())
    .addColumn('active_from', t.dateTime, (c) => c.notNull())
    .addColumn('active_until', t.dateTime)
    .addColumn('scheduled', 'integer', (c) => flag(c, 0))
    .addColumn('display_order', 'integer', (c) => c.notNull())
    .addColumn('patient_identifier_type_id', 'integer', (c) =>
      c.notNull().references('patient_identifier_type.id'),
    )
    .addColumn('pathway_type_id', 'integer', (c) => c.notNull().defaultTo(1))
    .$call((b) => auditColumns(b, t))
    .execute();

  await idColumn(s.createTable('worklist_definition_mapping'), t)
    .addColumn('worklist_definition_id', 'integer', (c) =>
      c.notNull().references('worklist_definition.id').onDelete('cascade'),
    )
    .addColumn('key', 'varchar(255)', (c) => c.notNull())
    .addColumn('display_order', 'integer')
    .$call((b) => auditColumns(b, t))
    .execute();

  await idColumn(s.createTable('worklist_definition_mapping_value'), t)
    .addColumn('worklist_definition_mapping_id', 'integer', (c) =>
      c.notNull().references('worklist_definition_mapping.id').onDelete('cascade'),
    )
    .addColumn('mapping_value', 'varchar(1024)', (c) => c.notNull())
    .$call((b) => auditColumns(b, t))
    .execute();

  await idColumn(s.createTable('worklist_definition_display_context'), t)
    .addColumn('worklist_definition_id', 'integer', (c) =>
      c.notNull().references('worklist_definition.id').onDelete('cascade'),
    )
    .addColumn('firm_id', 'integer')
    .addColumn('subspecialty_id', 'integer')
    .addColumn('site_id', 'integer', (c) => c.references('site.id').onDelete('cascade'))
    .addColumn('institution_id', 'integer', (c) => c.references('institution.id').onDelete('cascade'))
    .$call((b) => auditColumns(b, t))
    .execute();

  await idColumn(s.createTable('worklist'), t)
    .addColumn('name', 'varchar(255)', (c) => c.notNull())
    .addColumn('description', t.text)
    .addColumn('start', t.dateTime)
    .addColumn('end', t.dateTime)
    .addColumn('scheduled', 'integer', (c) => flag(c, 0))
    .addColumn('worklist_definition_id', 'integer', (c) =>
      c.references('worklist_definition.id').onDelete('cascade'),
    )
    .$call((b) => auditColumns(b, t))
    .execute();
  await s.createIndex('worklist_start_IDX').on('worklist').column('start').execute();
  await s.createIndex('worklist_end_IDX').on('worklist').column('end').execute();

  await idColumn(s.createTable('worklist_attribute'), t)
    .addColumn('worklist_id', 'integer', (c) => c.notNull().references('worklist.id').onDelete('cascade'))
    .addColumn('name', 'varchar(255)', (c) => c.notNull())
    .addColumn('display_order', 'integer')
    .$call((b) => auditColumns(b, t))
    .addUniqueConstraint('worklist_attribute_order_unique', ['display_order', 'worklist_id'])
    .execute();

  await idColumn(s.createTable('worklist_patient'), t)
    .addColumn('worklist_id', 'integer', (c) => c.notNull().references('worklist.id').onDelete('cascade'))
    .addColumn('patient_id', 'integer', (c) => c.notNull().references('patient.id').onDelete('cascade'))
    .addColumn('when', t.dateTime)
    .$call((b) => auditColumns(b, t))
    .execute();
  await s.createIndex('worklist_patient_worklist_IDX').on('worklist_patient').column('worklist_id').execute();
  await s.createIndex('worklist_patient_patient_IDX').on('worklist_patient').column('patient_id').execute();

  await idColumn(s.createTable('worklist_patient_attribute'), t)
    .addColumn('worklist_attribute_id', 'integer', (c) =>
      c.notNull().references('worklist_attribute.id').onDelete('cascade'),
    )
    .addColumn('worklist_patient_id', 'integer', (c) =>
      c.notNull().references('worklist_patient.id').onDelete('cascade'),
    )
    .addColumn('attribute_value', 'varchar(255)')
    .$call((b) => auditColumns(b, t))
    .addUniqueConstraint('worklist_patient_attribute_unique', [
      'worklist_attribute_id',
      'worklist_patient_id',
    ])
    .execute();

  await s
    .createTable('mwl_entry')
    .addColumn('worklist_patient_id', 'integer', (c) => c.primaryKey())
    .addColumn('study_instance_uid', 'varchar(64)', (c) => c.notNull().unique())
    .addColumn('accession_number', 'varchar(16)', (c) => c.notNull().unique())
    .addColumn('created_date', t.dateTime, (c) => c.notNull())
    .execute();
}
