/**
 * Row types of OpenEyes's biometry tables (OphInBiometry), which only this module reads and writes. The
 * module's queries see them beside the shared tables through `withTables`. Decimal columns come back as
 * numbers on SQLite and as text on PostgreSQL and MariaDB/MySQL.
 */
import type { Generated } from 'kysely';

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

export type BiometryTables = {
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
