/**
 * Row types of OpenEyes's biometry tables (OphInBiometry), which only this module reads and writes. The
 * module's queries see them beside the shared tables through `withTables`. Decimal columns come back as
 * numbers on SQLite and as text on PostgreSQL and MariaDB/MySQL.
 */
import type { Generated } from 'kysely';
import type { ColumnWidth } from '../device-filing/index.ts';
import { TEXT_COLUMN_CHARACTERS } from '../device-filing/index.ts';

type Audit = {
  last_modified_user_id: number;
  last_modified_date: string;
  created_user_id: number;
  created_date: string;
};

type Decimal = number | string;

export type ImportedEventTable = Audit & {
  id: Generated<number>;
  event_id: number;
  patient_id: number;
  study_id: string | null;
  device_id: string | null;
  device_name: string | null;
  device_model: string | null;
  device_manufacturer: string | null;
  device_software_version: string | null;
  is_linked: number;
  is_merged: number;
  content_datetime: string | null;
  surgeon_name: string | null;
  series_id: string | null;
  device_serial_number: string | null;
  acquisition_datetime: string | null;
  sop_uid: string | null;
};

/** An element row: its columns by name (the per-eye columns are many and built by name). */
export type ElementTable = Partial<Audit> & {
  id: Generated<number>;
  event_id: number;
  eye_id: number;
} & Record<string, Decimal | string | number | null | undefined>;

export type LensTable = Audit & {
  id: Generated<number>;
  name: string;
  display_name: string;
  description: string;
  comments: string;
  position_id: number;
  acon: Decimal;
  active: Generated<number>;
  deleted: Generated<number>;
};

export type LensInstitutionTable = Audit & {
  id: Generated<number>;
  lenstype_lens_id: number;
  institution_id: number;
};

export type FormulaTable = Audit & {
  id: Generated<number>;
  name: string;
  display_order: number;
  deleted: Generated<number>;
};

export type SurgeonTable = { id: Generated<number>; name: string };

export type EyeStatusTable = { id: number; name: string };

/**
 * The service's own record of the lens types a device file made, held for review (migration 0018;
 * `cra_biometry_lens_review` on an OpenEyes database): such a lens is created inactive and listed for no
 * institution, so OpenEyes does not offer it, until someone reviews it there.
 */
export type LensReviewTable = {
  id: Generated<number>;
  lenstype_lens_id: number;
  request_id: number;
  created_date: string;
};

export type BiometryTables = {
  biometry_lens_review: LensReviewTable;
  ophinbiometry_imported_events: ImportedEventTable;
  et_ophinbiometry_measurement: ElementTable;
  et_ophinbiometry_calculation: ElementTable;
  et_ophinbiometry_selection: ElementTable;
  et_ophinbiometry_iol_ref_values: ElementTable;
  ophinbiometry_lenstype_lens: LensTable;
  ophinbiometry_lenstype_lens_institution: LensInstitutionTable;
  ophinbiometry_calculation_formula: FormulaTable;
  ophinbiometry_surgeon: SurgeonTable;
  dicom_eye_status: EyeStatusTable;
};

export type ElementTableName =
  | 'et_ophinbiometry_measurement'
  | 'et_ophinbiometry_calculation'
  | 'et_ophinbiometry_selection'
  | 'et_ophinbiometry_iol_ref_values';

const cut = (column: string, width: number): ColumnWidth => ({ column, width, onOverflow: 'cut' });
const refuse = (column: string, width: number): ColumnWidth => ({ column, width, onOverflow: 'refuse' });

/**
 * The fixed-width columns biometry filing writes device text to, with their widths in OpenEyes's schema
 * (the own schema declares the same): identifiers are refused beyond their width, the rest cut.
 */
export const BIOMETRY_COLUMNS = {
  studyId: refuse('ophinbiometry_imported_events.study_id', 255),
  seriesId: refuse('ophinbiometry_imported_events.series_id', 255),
  sopUid: refuse('ophinbiometry_imported_events.sop_uid', 255),
  deviceId: cut('ophinbiometry_imported_events.device_id', 255),
  deviceName: cut('ophinbiometry_imported_events.device_name', 255),
  deviceModel: cut('ophinbiometry_imported_events.device_model', 255),
  deviceManufacturer: cut('ophinbiometry_imported_events.device_manufacturer', 255),
  deviceSoftwareVersion: cut('ophinbiometry_imported_events.device_software_version', 20),
  deviceSerialNumber: cut('ophinbiometry_imported_events.device_serial_number', 20),
  acquisitionDatetime: cut('ophinbiometry_imported_events.acquisition_datetime', 25),
  importedSurgeonName: cut('ophinbiometry_imported_events.surgeon_name', 255),
  surgeonName: cut('ophinbiometry_surgeon.name', 255),
  lensName: cut('ophinbiometry_lenstype_lens.name', 128),
  formulaName: cut('ophinbiometry_calculation_formula.name', 128),
  calculationComments: cut('et_ophinbiometry_calculation.comments', TEXT_COLUMN_CHARACTERS),
} as const satisfies Record<string, ColumnWidth>;
