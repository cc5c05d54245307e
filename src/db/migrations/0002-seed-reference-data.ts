/**
 * Reference data every installation has (the OpenEyes seed data, and the system user 1 that audit columns
 * default to, which can never log in): the RBAC items, mime/attachment/body-site types, the DICOM queue with
 * its routine library and request type, and the settings metadata with their installation values.
 */
import { sql } from 'kysely';
import type { AnyDb, DialectAdapter } from './helpers.ts';

export const SYSTEM_USER_ID = 1;

export async function up(db: AnyDb, dialect: DialectAdapter): Promise<void> {
  // User 1 is the system account: audit columns default to it and it has no user_authentication row,
  // so it can never log in.
  await db
    .insertInto('user')
    .values({ id: SYSTEM_USER_ID, first_name: 'System', last_name: 'User' })
    .execute();
  if (dialect.name === 'postgres') {
    await sql`select setval(pg_get_serial_sequence('"user"', 'id'), (select max(id) from "user"))`.execute(
      db,
    );
  }

  await db
    .insertInto('authitem')
    .values([
      { name: 'OprnApi', type: 0, description: 'API access' },
      { name: 'TaskApi', type: 1, description: 'API access' },
      { name: 'API access', type: 2, description: 'API access' },
      { name: 'OprnLogin', type: 0, description: 'Log in' },
      { name: 'TaskLogin', type: 1, description: 'Log in' },
      { name: 'User', type: 2, description: 'User' },
      { name: 'OprnEditRequestData', type: 0, description: 'Edit payload processor requests' },
      { name: 'TaskEditAPIRequest', type: 1, description: 'Edit payload processor requests' },
      { name: 'Edit Payload Processor', type: 2, description: 'Edit payload processor requests' },
    ])
    .execute();
  await db
    .insertInto('authitemchild')
    .values([
      { parent: 'TaskApi', child: 'OprnApi' },
      { parent: 'API access', child: 'TaskApi' },
      { parent: 'TaskLogin', child: 'OprnLogin' },
      { parent: 'User', child: 'TaskLogin' },
      { parent: 'TaskEditAPIRequest', child: 'OprnEditRequestData' },
      { parent: 'Edit Payload Processor', child: 'TaskEditAPIRequest' },
    ])
    .execute();

  await db
    .insertInto('mime_type')
    .values(
      [
        'application/dicom',
        'application/json',
        'application/octet-stream',
        'application/pdf',
        'application/xml',
        'application/x-www-form-urlencoded',
        'multipart/form-data',
        'text/plain',
        'image/jpg',
        'image/jpeg',
        'image/png',
      ].map((mime_type) => ({ mime_type })),
    )
    .execute();

  const same = (name: string, code: string, titleFull = name) => ({
    attachment_type: name,
    title_full: titleFull,
    title_short: name,
    title_abbreviated: name,
    dicom_modality_code: code,
  });
  // Kysely fills keys missing from one row of a multi-row insert with NULL on SQLite: give every key.
  await db
    .insertInto('attachment_type')
    .values([
      {
        attachment_type: 'NONE',
        title_full: 'No attachment type',
        title_short: 'None',
        title_abbreviated: 'N/A',
        dicom_modality_code: '',
      },
      {
        attachment_type: 'dicom_header',
        title_full: 'dicom header',
        title_short: 'dicom header',
        title_abbreviated: 'dicom header',
        dicom_modality_code: '',
      },
      {
        ...same('3D Disc Report w/ Topography', 'SC'),
        title_short: '3D Disc Report',
        title_abbreviated: 'Disc Report',
      },
      { ...same('3D Macula Report', 'SC'), title_abbreviated: 'Macula Report' },
      same('Radial Report', 'SC'),
      same('Biometry Report', 'BR'),
      same('Anterior Line Report', 'ALR'),
      same('Anterior Radial Report', 'ARR'),
      same('Glaucoma Analysis - Macula', 'GAM'),
      same('3D Wide Report', 'WR'),
      {
        attachment_type: 'OCTAngiography Report',
        title_full: 'OCT Angiography Report',
        title_short: 'OCT Angiography Report',
        title_abbreviated: 'OCT Angiography Report',
        dicom_modality_code: 'AG',
      },
      same('Clinical Photograph Colour', 'CP'),
      same('Clinical Photograph Black/White', 'CP'),
      same('OCT Images', 'OCT Images'),
      same('B SCAN Images', 'B SCAN Images'),
      same('Visual Field Images', 'VF'),
      same('Topography Images', 'TG'),
      same('Fundus Images', 'FD'),
      same('Anterior Segment 5 Line Raster', ''),
      same('HD Cornea', ''),
      same('Optic Disc Cube 200x200', ''),
      same('Macular Cube 512x128', ''),
      same('Angiography 6x6 mm', ''),
      same('5 Line Raster', ''),
      same('HD Cross', ''),
      same('Corneal Endothelial Cell Count', 'Corneal Endothelial Cell Count'),
      same('Anterior Chamber', 'Anterior Chamber'),
      same('Pachymetry', 'Pachymetry'),
    ])
    .execute();

  await db
    .insertInto('body_site_type')
    .values([
      {
        body_site_snomed_type: '18944008',
        title_full: 'Right eye',
        title_short: 'Right',
        title_abbreviated: 'R',
      },
      {
        body_site_snomed_type: '8966001',
        title_full: 'Left eye',
        title_short: 'Left',
        title_abbreviated: 'L',
      },
      {
        body_site_snomed_type: '40638003',
        title_full: 'Both eyes',
        title_short: 'Both',
        title_abbreviated: 'B',
      },
    ])
    .execute();

  await db
    .insertInto('request_queue')
    .values({
      request_queue: 'dicom_queue',
      maximum_active_threads: 5,
      busy_yield_ms: 1000,
      idle_yield_ms: 1000,
    })
    .execute();
  await db
    .insertInto('routine_library')
    .values([
      { routine_name: 'DICOM_SEED' },
      { routine_name: 'PAS_API' },
      { routine_name: 'create_biometry_event' },
    ])
    .execute();
  await db
    .insertInto('request_type')
    .values({
      request_type: 'dicom_request',
      title_full: 'dicom request full',
      title_short: 'dicom request',
      default_routine_name: 'DICOM_SEED',
      default_request_queue: 'dicom_queue',
    })
    .execute();

  const settings = [
    { key: 'display_primary_number_usage_code', name: 'Primary number usage code', default_value: 'LOCAL' },
    {
      key: 'display_secondary_number_usage_code',
      name: 'Secondary number usage code',
      default_value: 'GLOBAL',
    },
    { key: 'global_institution_remote_id', name: 'Global institution remote id', default_value: 'NHS' },
    { key: 'dob_mandatory_in_search', name: 'Date of birth mandatory in search', default_value: 'off' },
  ];
  await db
    .insertInto('setting_metadata')
    .values(settings.map((s) => ({ ...s, lowest_setting_level: 'SITE' })))
    .execute();
  await db
    .insertInto('setting_installation')
    .values(settings.map((s) => ({ key: s.key, value: s.default_value })))
    .execute();
}
