/**
 * OpenEyes's biometry module (OphInBiometry) in the own schema, with the table and column names of an
 * OpenEyes v6.8 database: the Biometry event type and its element types, the imported-event record, the
 * measurement, calculation, selection and IOL table elements, and their lookups with the rows OpenEyes's
 * migrations seed (eye status codes of the IOLMaster, formulas, lenses, lens positions). `eye` comes from
 * migration 0015, which the device filing shares. The `FILE_BIOMETRY` routine's name.
 */
import { sql } from 'kysely';
import type { AnyDb, AnyTable, DialectAdapter } from './helpers.ts';
import { auditColumns, flag, idColumn } from './helpers.ts';

const DICOM_EYE_STATUSES: readonly [number, string][] = [
  [-1, 'Unknown'],
  [0, 'Phakic'],
  [1, 'Aphakic'],
  [2, 'Silicone filled'],
  [3, 'Pseudophakic silicone'],
  [6, 'Pseudophakic memory'],
  [7, 'Pseudophakic PMMA'],
  [8, 'Pseudophakic acryl'],
  [9, 'Silicone filled (Aphakic)'],
  [10, 'Silicone filled (Pseudophakic)'],
  [11, 'Phakic IOL PMMA (0,2mm)'],
  [12, 'Primary piggy-back silicone (SLM 2)'],
  [13, 'Primary piggy-back hydrophobic acrylate'],
];

/** The seeded lenses, in id order: name, display name, A-constant. */
const LENSES: readonly [string, string, number][] = [
  ['MA60AC', 'MA60AC', 118.9],
  ['SN60WF', 'SN60WF', 118.7],
  ['SA60AT', 'SA60AT', 118.4],
  ['MTA3UO', 'MTA3UO', 115.8],
  ['None', '-', 0],
];

const decimal = (precision: number, scale: number) => sql.raw(`decimal(${precision},${scale})`);

/** `<name>_left` and `<name>_right`, added in that order. */
function bothSides(table: AnyTable, name: string, add: (t: AnyTable, column: string) => AnyTable): AnyTable {
  return add(add(table, `${name}_left`), `${name}_right`);
}

export async function up(db: AnyDb, dialect: DialectAdapter): Promise<void> {
  const t = dialect.columnTypes;
  const s = db.schema;

  // `eye` (1 Left, 2 Right, 3 Both) comes from migration 0015.
  await s
    .createTable('dicom_eye_status')
    .addColumn('id', 'integer', (c) => c.primaryKey())
    .addColumn('name', 'varchar(128)', (c) => c.notNull())
    .$call((b) => auditColumns(b, t))
    .execute();
  await db
    .insertInto('dicom_eye_status')
    .values(DICOM_EYE_STATUSES.map(([id, name]) => ({ id, name })))
    .execute();

  await idColumn(s.createTable('ophinbiometry_calculation_formula'), t)
    .addColumn('name', 'varchar(128)', (c) => c.notNull())
    .addColumn('display_order', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('deleted', 'integer', (c) => flag(c, 0))
    .$call((b) => auditColumns(b, t))
    .execute();
  for (const [name, order] of [
    ['SRK/T', 1],
    ['Holladay 1', 2],
  ] as const) {
    await db.insertInto('ophinbiometry_calculation_formula').values({ name, display_order: order }).execute();
  }

  await idColumn(s.createTable('ophinbiometry_lens_position'), t)
    .addColumn('name', 'varchar(40)', (c) => c.notNull())
    .addColumn('display_order', 'integer', (c) => c.notNull().defaultTo(1))
    .$call((b) => auditColumns(b, t))
    .execute();
  for (const [name, order] of [
    ['Posterior chamber', 1],
    ['Anterior chamber', 2],
  ] as const) {
    await db.insertInto('ophinbiometry_lens_position').values({ name, display_order: order }).execute();
  }

  await idColumn(s.createTable('ophinbiometry_lenstype_lens'), t)
    .addColumn('name', 'varchar(128)', (c) => c.notNull())
    .addColumn('display_name', 'varchar(255)', (c) => c.notNull())
    .addColumn('description', 'varchar(255)', (c) => c.notNull())
    .addColumn('comments', 'varchar(1024)', (c) => c.notNull())
    // No foreign key in OpenEyes either: lenses the IOLMaster import creates have position 0.
    .addColumn('position_id', 'integer', (c) => c.notNull())
    .addColumn('acon', decimal(8, 4), (c) => c.notNull())
    .addColumn('sf', 'double precision')
    .addColumn('pACD', 'double precision')
    .addColumn('a0', 'double precision')
    .addColumn('a1', 'double precision')
    .addColumn('a2', 'double precision')
    .addColumn('display_order', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('active', 'integer', (c) => flag(c, 1))
    .addColumn('deleted', 'integer', (c) => flag(c, 0))
    .$call((b) => auditColumns(b, t))
    .execute();
  let order = 1;
  for (const [name, displayName, acon] of LENSES) {
    await db
      .insertInto('ophinbiometry_lenstype_lens')
      .values({
        name,
        display_name: displayName,
        description: name === 'None' ? 'No lens' : `Alcon ${name}`,
        comments: '',
        position_id: 1,
        acon,
        display_order: order++,
      })
      .execute();
  }

  await idColumn(s.createTable('ophinbiometry_lenstype_lens_institution'), t)
    .addColumn('lenstype_lens_id', 'integer', (c) => c.notNull().references('ophinbiometry_lenstype_lens.id'))
    .addColumn('institution_id', 'integer', (c) => c.notNull().references('institution.id'))
    .$call((b) => auditColumns(b, t))
    .execute();
  // OpenEyes lists a lens only for the institutions mapped to it: the seeded lenses are mapped to the
  // institutions of the installation.
  const lenses = await db.selectFrom('ophinbiometry_lenstype_lens').select('id').orderBy('id').execute();
  const institutions = await db.selectFrom('institution').select('id').orderBy('id').execute();
  for (const institution of institutions) {
    for (const lens of lenses) {
      await db
        .insertInto('ophinbiometry_lenstype_lens_institution')
        .values({ lenstype_lens_id: lens.id, institution_id: institution.id })
        .execute();
    }
  }

  await idColumn(s.createTable('ophinbiometry_surgeon'), t)
    .addColumn('name', 'varchar(255)', (c) => c.notNull())
    .execute();

  await idColumn(s.createTable('ophinbiometry_imported_events'), t)
    .addColumn('event_id', 'integer', (c) => c.notNull().references('event.id'))
    .addColumn('patient_id', 'integer', (c) => c.notNull().references('patient.id'))
    .addColumn('study_id', 'varchar(255)')
    .addColumn('device_id', 'varchar(255)')
    .addColumn('device_name', 'varchar(255)')
    .addColumn('device_model', 'varchar(255)')
    .addColumn('device_manufacturer', 'varchar(255)')
    .addColumn('device_software_version', 'varchar(20)')
    .addColumn('is_linked', 'integer', (c) => flag(c, 0))
    .addColumn('is_merged', 'integer', (c) => flag(c, 0))
    .addColumn('content_datetime', t.dateTime)
    .addColumn('surgeon_name', 'varchar(255)')
    .$call((b) => auditColumns(b, t))
    .addColumn('series_id', 'varchar(255)')
    .addColumn('device_serial_number', 'varchar(20)')
    .addColumn('acquisition_datetime', 'varchar(25)')
    .addColumn('sop_uid', 'varchar(255)')
    .execute();
  await s
    .createIndex('ophinbiometry_imported_events_patient_study')
    .on('ophinbiometry_imported_events')
    .columns(['patient_id', 'study_id'])
    .execute();

  const element = (name: string) =>
    idColumn(s.createTable(name), t)
      .addColumn('event_id', 'integer', (c) => c.notNull().references('event.id'))
      .addColumn('eye_id', 'integer', (c) => c.notNull().defaultTo(3).references('eye.id'));
  const measure =
    (scale: 1 | 2, precision = 6) =>
    (table: AnyTable, column: string) =>
      table.addColumn(column, decimal(precision, scale), (c) => c.notNull().defaultTo(0));

  let measurement = element('et_ophinbiometry_measurement').$call((b) => auditColumns(b, t));
  measurement = measurement.addColumn('deleted', 'integer', (c) => flag(c, 0));
  for (const name of [
    'k1',
    'k2',
    'axial_length',
    'acd',
    'delta_k',
    'refraction_sphere',
    'refraction_delta',
  ]) {
    measurement = bothSides(measurement, name, measure(2));
  }
  measurement = bothSides(measurement, 'k1_axis', measure(1, 5));
  for (const name of ['k2_axis', 'delta_k_axis', 'refraction_axis', 'snr_min']) {
    measurement = bothSides(measurement, name, measure(1));
  }
  measurement = bothSides(measurement, 'snr', (table, column) => table.addColumn(column, decimal(6, 1)));
  measurement = bothSides(measurement, 'eye_status', (table, column) =>
    table.addColumn(column, 'integer', (c) => c.notNull().references('dicom_eye_status.id')),
  );
  for (const name of ['al_modified', 'k_modified']) {
    measurement = bothSides(measurement, name, (table, column) =>
      table.addColumn(column, 'integer', (c) => c.defaultTo(0)),
    );
  }
  for (const name of ['lvc', 'lvc_mode']) {
    measurement = bothSides(measurement, name, (table, column) => table.addColumn(column, 'varchar(30)'));
  }
  await measurement.execute();

  let calculation = element('et_ophinbiometry_calculation');
  calculation = bothSides(calculation, 'target_refraction', (table, column) =>
    table.addColumn(column, decimal(6, 2)),
  );
  calculation = bothSides(calculation, 'formula_id', (table, column) =>
    table.addColumn(column, 'integer', (c) =>
      c.notNull().defaultTo(1).references('ophinbiometry_calculation_formula.id'),
    ),
  );
  await calculation
    .$call((b) => auditColumns(b, t))
    .addColumn('deleted', 'integer', (c) => flag(c, 0))
    .addColumn('comments', t.text)
    .addColumn('comments_right', t.text)
    .addColumn('comments_left', t.text)
    .execute();

  let selection = element('et_ophinbiometry_selection');
  for (const name of ['iol_power', 'predicted_refraction']) {
    selection = bothSides(selection, name, (table, column) =>
      table.addColumn(column, 'varchar(15)', (c) => c.notNull().defaultTo('0.00')),
    );
  }
  selection = selection.$call((b) => auditColumns(b, t)).addColumn('deleted', 'integer', (c) => flag(c, 0));
  selection = bothSides(selection, 'lens_id', (table, column) =>
    table.addColumn(column, 'integer', (c) => c.notNull().defaultTo(1)),
  );
  selection = bothSides(selection, 'formula_id', (table, column) => table.addColumn(column, 'integer'));
  selection = bothSides(selection, 'manually_overriden', (table, column) =>
    table.addColumn(column, 'integer', (c) => flag(c, 0)),
  );
  await selection.execute();

  let values = element('et_ophinbiometry_iol_ref_values')
    .addColumn('lens_id', 'integer', (c) => c.notNull().references('ophinbiometry_lenstype_lens.id'))
    .addColumn('formula_id', 'integer', (c) =>
      c.notNull().references('ophinbiometry_calculation_formula.id'),
    );
  values = bothSides(values, 'iol_ref_values', (table, column) => table.addColumn(column, t.text));
  values = bothSides(values, 'emmetropia', (table, column) => table.addColumn(column, decimal(6, 2)));
  await values
    .$call((b) => auditColumns(b, t))
    .addColumn('constant', decimal(7, 3))
    .addColumn('constant1', decimal(7, 3))
    .addColumn('constant2', decimal(7, 3))
    .addColumn('active', 'integer', (c) => c.defaultTo(1))
    .addColumn('surgeon_id', 'integer', (c) => c.references('ophinbiometry_surgeon.id'))
    .execute();
  for (const table of [
    'et_ophinbiometry_measurement',
    'et_ophinbiometry_calculation',
    'et_ophinbiometry_selection',
    'et_ophinbiometry_iol_ref_values',
  ]) {
    await s.createIndex(`${table}_event_id`).on(table).column('event_id').execute();
  }

  // The routine that files biometry, which `request_routine.routine_name` refers to.
  const routine = await db
    .selectFrom('routine_library')
    .select('routine_name')
    .where('routine_name', '=', 'FILE_BIOMETRY')
    .executeTakeFirst();
  if (routine === undefined) {
    await db
      .insertInto('routine_library')
      .values({ routine_name: 'FILE_BIOMETRY', hash_code: null })
      .execute();
  }

  // The Biometry event type and its elements; its attachment element is OphGeneric's, as in OpenEyes.
  let eventType = await db
    .selectFrom('event_type')
    .select('id')
    .where('class_name', '=', 'OphInBiometry')
    .executeTakeFirst();
  eventType ??= await db
    .insertInto('event_type')
    .values({
      name: 'Biometry',
      class_name: 'OphInBiometry',
      event_group_id: null,
      parent_id: null,
      rbac_operation_suffix: null,
      show_attachments: 1,
      can_be_created_manually: 1,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  const elementTypes = [
    ['Biometry', 'Element_OphInBiometry_Measurement', 10, 'et_ophinbiometry_measurement'],
    ['Calculation', 'Element_OphInBiometry_Calculation', 20, 'et_ophinbiometry_calculation'],
    ['Selection', 'Element_OphInBiometry_Selection', 30, 'et_ophinbiometry_selection'],
    ['Attachment', 'OEModule\\OphGeneric\\models\\Attachment', 1, 'event_attachment_group'],
  ] as const;
  for (const [name, className, displayOrder, tableName] of elementTypes) {
    await db
      .insertInto('element_type')
      .values({
        name,
        class_name: className,
        event_type_id: eventType.id,
        display_order: displayOrder,
        required: 0,
        parent_element_type_id: null,
        table_name: tableName,
      })
      .execute();
  }
}
