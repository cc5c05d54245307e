/**
 * Row types of the tables device filing writes (migration 0015; OpenEyes's own on an OpenEyes database),
 * for `Kysely.withTables`: they are this module's, so they stay out of the service-wide `DB`.
 */
import type { Generated } from 'kysely';

/**
 * The text columns of `et_ophgeneric_device_information`, in the table's order, each with the DICOM
 * keyword of the header attribute its value is read from (null: no attribute fills it, written NULL).
 * The one list of these columns in the module: the header reader (`deviceInformationOf`) and the row
 * type derive from it. Migration 0015 and the OpenEyes schema needs sit below the modules (src/db) and
 * keep their own literal; tables.test.ts holds both equal to this list.
 */
export const DEVICE_INFORMATION_COLUMNS = {
  manufacturer: 'Manufacturer',
  manufacturer_model_name: 'ManufacturerModelName',
  modality: 'Modality',
  series_description: 'SeriesDescription',
  laterality: 'Laterality',
  image_laterality: 'ImageLaterality',
  study_description: 'StudyDescription',
  document_title: 'DocumentTitle',
  acquisition_date_time: 'AcquisitionDateTime',
  study_date: 'StudyDate',
  study_time: 'StudyTime',
  content_date: 'ContentDate',
  content_time: 'ContentTime',
  station_name: 'StationName',
  operators_name: 'OperatorsName',
  software_version: 'SoftwareVersions',
  study_instance_uid: 'StudyInstanceUID',
  series_instance_uid: 'SeriesInstanceUID',
  study_id: 'StudyID',
  series_number: 'SeriesNumber',
  instance_number: 'InstanceNumber',
  modifying_system: null,
  operator_identification_sequence: null,
  // The closest fit for the device's own version: its serial number.
  model_version: 'DeviceSerialNumber',
  sop_instance_uid: 'SOPInstanceUID',
} as const satisfies Readonly<Record<string, string | null>>;

/** A text column of `et_ophgeneric_device_information`. */
export type DeviceInformationColumn = keyof typeof DEVICE_INFORMATION_COLUMNS;

/** The values of the Device Information text columns, one per column. */
export type DeviceInformationValues = Record<DeviceInformationColumn, string | null>;

type Audit = {
  last_modified_user_id: number;
  last_modified_date: string;
  created_user_id: number;
  created_date: string;
};

export type DeviceTables = {
  event_subtype: { event_subtype: string; display_name: string };
  event_subtype_item: Audit & {
    id: Generated<number>;
    event_id: number;
    event_subtype: string;
    display_order: number;
  };
  et_ophgeneric_device_information: Audit &
    DeviceInformationValues & { id: Generated<number>; event_id: number; last_request_id: number | null };
  et_ophgeneric_comments: Audit & { id: Generated<number>; event_id: number; comment: string | null };
  et_ophgeneric_hfa: Audit & { id: Generated<number>; event_id: number; eye_id: number | null };
  ophgeneric_hfa_entry: Audit & {
    id: Generated<number>;
    element_id: number;
    eye_id: number | null;
    mean_deviation: string | null;
    visual_field_index: string | null;
  };
  /** The service's own index (`cra_device_event` on an OpenEyes database). */
  device_event: {
    id: Generated<number>;
    patient_id: number;
    study_instance_uid: string;
    event_subtype: string;
    model: string;
    event_id: number;
    device_information_id: number | null;
    eye_id: number | null;
    created_date: string;
    last_modified_date: string;
  };
};
