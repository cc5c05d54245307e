/**
 * Device filing (the device-filing module): OpenEyes's tables of an OphGeneric device event, in their
 * v6.8 shape — the `eye` lookup, `event_subtype` and `event_subtype_item`, the Device
 * Information, Comments and HFA elements with the HFA entries — their reference rows (event subtypes, the
 * OphGeneric element types), and the service's own index of the events it filed per patient and study
 * (`device_event`; `cra_device_event` on an OpenEyes database), and the `DEVICE_PROFILE` routine's name.
 */
import type { AnyDb, DialectAdapter } from './helpers.ts';
import { auditColumns, idColumn } from './helpers.ts';

/** `event_subtype` rows: name, DICOM modality code, icon, display name (the name when absent). */
const EVENT_SUBTYPES: readonly (readonly [string, string, string, string?])[] = [
  ['OCT', 'OAM', 'i-ImOCT'],
  ['3D Disc Report w/ Topography', 'SC', 'i-ImUltraSound'],
  ['3D Macula Report', 'SC', 'i-ImToricIOL'],
  ['Radial Report', 'SC', 'i-InCornealTopography'],
  ['Biometry Report', 'BR', 'i-InBiometry'],
  ['Anterior Line Report', 'ALR', 'i-ImOCT'],
  ['Anterior Radial Report', 'ARR', 'i-ImOCT'],
  ['Glaucoma Analysis - Macula', 'ARR', 'i-ImFFA"'],
  ['3D Wide Report', 'WR', 'i-ImFFA"'],
  ['OCTAngiography Report', 'AG', 'i-ImFFA"', 'OCT Angiography Report'],
  ['Clinical Photograph Colour', 'CP', 'i-ImPhoto'],
  ['Clinical Photograph Black/White', 'CP', 'i-ImPhoto'],
  ['Visual Fields', 'OPV', 'i-InVisualField'],
  ['OCT Images', 'OAM', 'i-ImOCT'],
  ['B SCAN Images', 'BSCAN', 'i-ImUltraSound'],
  ['Visual Field Images', 'VF', 'i-InVisualField'],
  ['Topography Images', 'TG', 'i-InCornealTopography'],
  ['Fundus Images', 'FD', 'i-ImPhoto'],
  ['Anterior Segment 5 Line Raster', '', 'i-ImOCT', 'High Definition Images: Anterior Segment 5 Line Raster'],
  ['HD Cornea', '', 'i-ImOCT', 'HD Cornea Analysis'],
  ['Optic Disc Cube 200x200', '', 'i-ImOCT', 'Optic Disc Cube'],
  ['Macular Cube 512x128', '', 'i-ImOCT', 'Macular Cube'],
  ['Angiography 6x6 mm', '', 'i-ImFFA', 'Angiography Analysis'],
  ['5 Line Raster', '', 'i-ImOCT', 'High Definition Images: 5 Line Raster'],
  ['HD Cross', '', 'i-ImOCT', 'High Definition Images: HD Cross'],
  ['Corneal Endothelial Cell Count', '', 'i-ImPhoto'],
  ['Anterior Chamber', '', 'i-ImOCT'],
  ['Pachymetry', '', 'i-ImOCT'],
];

/** The OphGeneric element types beside the attachment element (migration 0007): name, class, order, required. */
const ELEMENT_TYPES: readonly (readonly [string, string, number, number, string | null])[] = [
  ['Comments', 'OEModule\\OphGeneric\\models\\Comments', 10, 1, 'et_ophgeneric_comments'],
  ['Assessment', 'OEModule\\OphGeneric\\models\\Assessment', 20, 0, null],
  ['HFA', 'OEModule\\OphGeneric\\models\\HFA', 30, 0, 'et_ophgeneric_hfa'],
  [
    'Device Information',
    'OEModule\\OphGeneric\\models\\DeviceInformation',
    700,
    1,
    'et_ophgeneric_device_information',
  ],
];

// A migration's own literal (it must create what it created when it ran); device-filing's
// DEVICE_INFORMATION_COLUMNS is held equal to it by src/modules/device-filing/tables.test.ts.
const DEVICE_INFORMATION_TEXT_COLUMNS = [
  'manufacturer',
  'manufacturer_model_name',
  'modality',
  'series_description',
  'laterality',
  'image_laterality',
  'study_description',
  'document_title',
  'acquisition_date_time',
  'study_date',
  'study_time',
  'content_date',
  'content_time',
  'station_name',
  'operators_name',
  'software_version',
  'study_instance_uid',
  'series_instance_uid',
  'study_id',
  'series_number',
  'instance_number',
  'modifying_system',
  'operator_identification_sequence',
  'model_version',
  'sop_instance_uid',
] as const;

export async function up(db: AnyDb, dialect: DialectAdapter): Promise<void> {
  const t = dialect.columnTypes;
  const s = db.schema;

  // `eye` is shared with biometry (migration 0016).
  await s
    .createTable('eye')
    .ifNotExists()
    .addColumn('id', 'integer', (c) => c.primaryKey())
    .addColumn('name', 'varchar(10)', (c) => c.notNull())
    .addColumn('display_order', 'integer', (c) => c.notNull().defaultTo(0))
    .$call((b) => auditColumns(b, t, 'date'))
    .execute();
  const eyes = await db.selectFrom('eye').select('id').execute();
  if (eyes.length === 0) {
    await db
      .insertInto('eye')
      .values([
        { id: 1, name: 'Left', display_order: 2 },
        { id: 2, name: 'Right', display_order: 1 },
        { id: 3, name: 'Both', display_order: 3 },
      ])
      .execute();
  }

  await s
    .createTable('event_subtype')
    .addColumn('event_subtype', 'varchar(100)', (c) => c.primaryKey())
    .addColumn('dicom_modality_code', 'varchar(45)', (c) => c.notNull())
    .addColumn('icon_name', 'varchar(45)', (c) => c.notNull())
    .addColumn('display_name', 'varchar(100)', (c) => c.notNull())
    .$call((b) => auditColumns(b, t))
    .addColumn('manual_entry', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
  await db
    .insertInto('event_subtype')
    .values(
      EVENT_SUBTYPES.map(([event_subtype, dicom_modality_code, icon_name, display_name]) => ({
        event_subtype,
        dicom_modality_code,
        icon_name,
        display_name: display_name ?? event_subtype,
        manual_entry: event_subtype === 'Visual Fields' ? 1 : 0,
      })),
    )
    .execute();

  await idColumn(s.createTable('event_subtype_item'), t)
    .addColumn('event_id', 'integer', (c) => c.notNull().references('event.id'))
    .addColumn('event_subtype', 'varchar(100)', (c) => c.notNull().references('event_subtype.event_subtype'))
    .addColumn('display_order', 'integer', (c) => c.notNull().defaultTo(0))
    .$call((b) => auditColumns(b, t))
    .addUniqueConstraint('event_subtype_item_event_subtype', ['event_id', 'event_subtype'])
    .execute();

  let deviceInformation = idColumn(s.createTable('et_ophgeneric_device_information'), t)
    .addColumn('event_id', 'integer', (c) => c.notNull().references('event.id'))
    .addColumn('last_request_id', 'integer');
  for (const column of DEVICE_INFORMATION_TEXT_COLUMNS) {
    deviceInformation = deviceInformation.addColumn(column, t.text);
  }
  await deviceInformation.$call((b) => auditColumns(b, t)).execute();
  await s
    .createIndex('et_ophgeneric_device_information_event_id')
    .on('et_ophgeneric_device_information')
    .column('event_id')
    .execute();

  await idColumn(s.createTable('et_ophgeneric_comments'), t)
    .addColumn('event_id', 'integer', (c) => c.notNull().references('event.id'))
    .addColumn('comment', t.text)
    .$call((b) => auditColumns(b, t))
    .execute();
  await s
    .createIndex('et_ophgeneric_comments_event_id')
    .on('et_ophgeneric_comments')
    .column('event_id')
    .execute();

  await idColumn(s.createTable('et_ophgeneric_hfa'), t)
    .addColumn('event_id', 'integer', (c) => c.notNull().references('event.id'))
    .addColumn('eye_id', 'integer', (c) => c.references('eye.id'))
    .$call((b) => auditColumns(b, t))
    .execute();
  await s.createIndex('et_ophgeneric_hfa_event_id').on('et_ophgeneric_hfa').column('event_id').execute();

  await idColumn(s.createTable('ophgeneric_hfa_entry'), t)
    .addColumn('element_id', 'integer', (c) => c.notNull().references('et_ophgeneric_hfa.id'))
    .addColumn('eye_id', 'integer', (c) => c.references('eye.id'))
    .addColumn('mean_deviation', t.text)
    .addColumn('visual_field_index', t.text)
    .$call((b) => auditColumns(b, t))
    .execute();
  await s
    .createIndex('ophgeneric_hfa_entry_element_id')
    .on('ophgeneric_hfa_entry')
    .column('element_id')
    .execute();

  // The service's index of the events it filed: one per patient, study, subtype and (visual fields and
  // OCT) model. OpenEyes's own tables have no index on the study UID, and would not tell patients apart.
  await idColumn(s.createTable('device_event'), t)
    .addColumn('patient_id', 'integer', (c) => c.notNull())
    .addColumn('study_instance_uid', 'varchar(64)', (c) => c.notNull())
    .addColumn('event_subtype', 'varchar(100)', (c) => c.notNull())
    .addColumn('model', 'varchar(64)', (c) => c.notNull())
    .addColumn('event_id', 'integer', (c) => c.notNull())
    .addColumn('device_information_id', 'integer')
    .addColumn('eye_id', 'integer')
    .addColumn('created_date', t.dateTime, (c) => c.notNull())
    .addColumn('last_modified_date', t.dateTime, (c) => c.notNull())
    .addUniqueConstraint('device_event_study_key', [
      'patient_id',
      'study_instance_uid',
      'event_subtype',
      'model',
    ])
    .execute();

  // The routine that chooses the profile (`DICOM_SEED` -> `DEVICE_PROFILE` -> `EXTRACT_IMAGE`).
  const routine = await db
    .selectFrom('routine_library')
    .select('routine_name')
    .where('routine_name', '=', 'DEVICE_PROFILE')
    .executeTakeFirst();
  if (routine === undefined) {
    await db
      .insertInto('routine_library')
      .values({ routine_name: 'DEVICE_PROFILE', hash_code: null })
      .execute();
  }

  const eventType = await db
    .selectFrom('event_type')
    .select('id')
    .where('class_name', '=', 'OphGeneric')
    .executeTakeFirst();
  if (eventType !== undefined) {
    const known = new Set(
      (await db.selectFrom('element_type').select('class_name').execute()).map(
        (r: { class_name: string }) => r.class_name,
      ),
    );
    const missing = ELEMENT_TYPES.filter(([, className]) => !known.has(className));
    if (missing.length > 0) {
      await db
        .insertInto('element_type')
        .values(
          missing.map(([name, class_name, display_order, required, table_name]) => ({
            name,
            class_name,
            event_type_id: Number(eventType.id),
            display_order,
            required,
            parent_element_type_id: null,
            table_name,
          })),
        )
        .execute();
    }
  }
}
