/**
 * Row types of the tables device filing writes (migration 0015; OpenEyes's own on an OpenEyes database),
 * for `Kysely.withTables`: they are this module's, so they stay out of the service-wide `DB`.
 */
import type { Generated } from 'kysely';
import type { DeviceInformationValues } from './device-header.ts';

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
