/**
 * Row types of every table, as Kysely sees them. `Generated<T>` marks columns the database fills
 * (auto-increment ids and defaults) so that inserts may omit them. Date-times are
 * `YYYY-MM-DD HH:MM:SS` strings, dates `YYYY-MM-DD`, flags 0/1 integers, binaries Buffers.
 */
import type { Generated, Insertable, Selectable, Updateable } from 'kysely';

type Audit = {
  last_modified_user_id: Generated<number>;
  last_modified_date: Generated<string>;
  created_user_id: Generated<number>;
  created_date: Generated<string>;
};

export type UserTable = Audit & {
  id: Generated<number>;
  first_name: Generated<string>;
  last_name: Generated<string>;
  email: string | null;
  title: string | null;
  qualifications: string | null;
  role: string | null;
  last_firm_id: number | null;
  last_site_id: number | null;
  is_consultant: Generated<number>;
  is_surgeon: Generated<number>;
  active: Generated<number>;
};

export type ContactTable = Audit & {
  id: Generated<number>;
  title: string | null;
  first_name: Generated<string>;
  last_name: Generated<string>;
  maiden_name: string | null;
  nick_name: string | null;
  primary_phone: string | null;
  mobile_phone: string | null;
  email: string | null;
  qualifications: string | null;
  contact_label_id: number | null;
  created_institution_id: number | null;
};

export type InstitutionTable = Audit & {
  id: Generated<number>;
  name: Generated<string>;
  remote_id: Generated<string>;
  short_name: Generated<string>;
  contact_id: number | null;
  active: Generated<number>;
  any_number_search_allowed: number | null;
  pas_key: number | null;
  logo_id: number | null;
  first_used_site_id: number | null;
  source_id: number | null;
};

export type SiteTable = Audit & {
  id: Generated<number>;
  name: Generated<string>;
  short_name: Generated<string>;
  remote_id: Generated<string>;
  institution_id: number;
  location: string | null;
  contact_id: number | null;
  active: Generated<number>;
};

export type InstitutionAuthenticationTable = Audit & {
  id: Generated<number>;
  institution_id: number;
  site_id: number | null;
  user_authentication_method: Generated<string>;
  ldap_config_id: number | null;
  description: string | null;
  order: Generated<number>;
  active: Generated<number>;
};

export type UserAuthenticationTable = Audit & {
  id: Generated<number>;
  institution_authentication_id: number | null;
  user_id: number;
  username: string;
  password_hash: string | null;
  password_salt: string | null;
  password_softlocked_until: string | null;
  password_last_changed_date: string | null;
  password_failed_tries: Generated<number>;
  password_status: Generated<string>;
  last_successful_login_date: string | null;
  active: Generated<number>;
};

export type AuthItemTable = {
  name: string;
  /** 0 operation, 1 task, 2 role. */
  type: number;
  description: string | null;
  bizrule: string | null;
  data: string | null;
};

export type AuthItemChildTable = { parent: string; child: string };

export type AuthAssignmentTable = {
  itemname: string;
  /** The user id, stored as text (Yii RBAC). */
  userid: string;
  bizrule: string | null;
  data: string | null;
};

export type SettingMetadataTable = Audit & {
  id: Generated<number>;
  element_type_id: number | null;
  field_type_id: number | null;
  key: string;
  name: Generated<string>;
  data: string | null;
  default_value: string | null;
  lowest_setting_level: Generated<string>;
};

export type SettingInstallationTable = Audit & {
  id: Generated<number>;
  element_type_id: number | null;
  key: string;
  value: string | null;
};

export type SettingInstitutionTable = SettingInstallationTable & { institution_id: number };
export type SettingSiteTable = SettingInstallationTable & { site_id: number };

export type PatientTable = Audit & {
  id: Generated<number>;
  contact_id: number;
  dob: string | null;
  date_of_death: string | null;
  is_deceased: Generated<number>;
  gender: string | null;
  deleted: Generated<number>;
  hos_num: string | null;
  nhs_num: string | null;
  ethnic_group_id: number | null;
  gp_id: number | null;
  practice_id: number | null;
  patient_source: Generated<number>;
  primary_institution_id: number | null;
  is_local: number | null;
  pas_key: number | null;
  nhs_num_status_id: number | null;
  no_allergies_date: string | null;
  no_risks_date: string | null;
  no_family_history_date: string | null;
  father_id: number | null;
  mother_id: number | null;
  yob: number | null;
  mobile_telephone: string | null;
};

export type PatientIdentifierTypeTable = Audit & {
  id: Generated<number>;
  usage_type: string;
  short_title: string;
  long_title: string | null;
  institution_id: number;
  site_id: number | null;
  validate_regex: string;
  pad: string | null;
  value_display_prefix: string | null;
  value_display_suffix: string | null;
  spacing_rule: string | null;
  validation_example: string | null;
  pas_api: string | null;
  unique_row_string: string | null;
};

export type PatientIdentifierTable = Audit & {
  id: Generated<number>;
  patient_id: number;
  patient_identifier_type_id: number;
  value: string;
  source_info: Generated<string>;
  deleted: Generated<number>;
  patient_identifier_status_id: number | null;
  unique_row_string: string | null;
};

export type PatientIdentifierTypeDisplayOrderTable = Audit & {
  id: Generated<number>;
  institution_id: number;
  site_id: number | null;
  patient_identifier_type_id: number;
  display_order: Generated<number>;
  searchable: Generated<number>;
  search_protocol_prefix: string | null;
  necessity: Generated<string>;
  status_necessity: Generated<string>;
  auto_increment: Generated<number>;
  auto_increment_start: number | null;
  only_editable_by_admin: Generated<number>;
  unique_row_string: string | null;
};

export type EventTypeTable = Audit & {
  id: Generated<number>;
  name: string;
  class_name: string;
  event_group_id: number | null;
  parent_id: number | null;
  rbac_operation_suffix: string | null;
  support_services: Generated<number>;
  is_printable: Generated<number>;
  show_attachments: Generated<number>;
  can_be_created_manually: Generated<number>;
  display_order: Generated<number>;
};

export type ElementTypeTable = Audit & {
  id: Generated<number>;
  name: string;
  class_name: string;
  event_type_id: number;
  display_order: Generated<number>;
  default: Generated<number>;
  required: Generated<number>;
  parent_element_type_id: number | null;
  table_name: string | null;
};

export type EpisodeTable = Audit & {
  id: Generated<number>;
  patient_id: number;
  firm_id: number | null;
  start_date: string | null;
  end_date: string | null;
  episode_status_id: number | null;
  legacy: Generated<number>;
  deleted: Generated<number>;
  eye_id: number | null;
  disorder_id: number | null;
  support_services: Generated<number>;
};

export type EventTable = Audit & {
  id: Generated<number>;
  episode_id: number | null;
  event_type_id: number;
  info: string | null;
  deleted: Generated<number>;
  delete_reason: string | null;
  delete_pending: Generated<number>;
  is_automated: number | null;
  automated_source: string | null;
  event_date: Generated<string>;
  firm_id: number | null;
  parent_id: number | null;
  institution_id: number | null;
  site_id: number | null;
  worklist_patient_id: number | null;
  step_id: number | null;
  template_id: number | null;
  pas_visit_id: string | null;
};

export type UniqueCodesTable = Audit & { id: Generated<number>; code: string; active: Generated<number> };

export type UniqueCodesMappingTable = Audit & {
  id: Generated<number>;
  unique_code_id: number;
  event_id: number | null;
  user_id: number | null;
};

export type EtOphcocviEsignTable = Audit & { id: Generated<number>; event_id: number };

export type ProtectedFileTable = Audit & {
  id: Generated<number>;
  uid: string;
  name: Generated<string>;
  title: Generated<string>;
  description: Generated<string>;
  mimetype: Generated<string>;
  size: Generated<string>;
  rotate: number | null;
};

export type OphcocviSignatureTable = Audit & {
  id: Generated<number>;
  element_id: number;
  /** 1 logged-in user, 2 other user, 3 patient, 5 logged-in medical user. */
  type: number;
  signature_file_id: number | null;
  signed_user_id: number | null;
  signatory_role: string;
  signatory_name: string;
  timestamp: number;
  status: Generated<number>;
  delete_reason: string | null;
};

export type SignatureImportLogTable = Audit & {
  id: Generated<number>;
  filename: Generated<string>;
  import_datetime: string | null;
  /** 3 Failed, 4 Success, 5 Manual, 6 Manual Ignore. */
  status_id: number;
  return_message: string | null;
  event_id: number | null;
  cropped_file_id: number | null;
};

export type MimeTypeTable = { mime_type: string };

export type AttachmentTypeTable = {
  attachment_type: string;
  title_full: Generated<string>;
  title_short: Generated<string>;
  title_abbreviated: Generated<string>;
  dicom_modality_code: Generated<string>;
};

export type BodySiteTypeTable = {
  body_site_snomed_type: string;
  title_full: Generated<string>;
  title_short: Generated<string>;
  title_abbreviated: Generated<string>;
};

export type RequestQueueTable = {
  request_queue: string;
  maximum_active_threads: Generated<number>;
  total_active_thread_count: Generated<number>;
  total_execute_count: Generated<number>;
  total_success_count: Generated<number>;
  total_fail_count: Generated<number>;
  busy_yield_ms: Generated<number>;
  idle_yield_ms: Generated<number>;
  last_poll_date: string | null;
  last_thread_spawn_date: string | null;
  last_thread_spawn_request_id: number | null;
};

export type RequestQueueLockTable = { request_queue: string };
export type RoutineLibraryTable = { routine_name: string; hash_code: number | null };

export type RequestTypeTable = {
  request_type: string;
  title_full: string;
  title_short: string;
  default_routine_name: string;
  default_request_queue: string;
};

export type RequestTable = Audit & {
  id: Generated<number>;
  request_type: string;
  system_message: Generated<string>;
  request_override_default_queue: string | null;
};

export type AttachmentDataTable = Audit & {
  id: Generated<number>;
  request_id: number;
  attachment_mnemonic: string;
  body_site_snomed_type: string | null;
  system_only_managed: Generated<number>;
  attachment_type: string;
  mime_type: string;
  blob_data: Buffer | null;
  text_data: string | null;
  upload_file_name: string | null;
  thumbnail_small_blob: Buffer | null;
  thumbnail_medium_blob: Buffer | null;
  thumbnail_large_blob: Buffer | null;
  hash_code: number | null;
};

export type EventAttachmentGroupTable = Audit & {
  id: Generated<number>;
  event_id: number;
  element_type_id: number;
};

export type EventAttachmentItemTable = Audit & {
  id: Generated<number>;
  event_attachment_group_id: number;
  attachment_data_id: number;
  system_only_managed: Generated<number>;
  event_document_view_set: string | null;
};

/**
 * The statuses of a queued routine (`request_routine.status`), OpenEyes's: the one list the schema's type,
 * the console's filters, the CLI's `--status` and the OpenAPI document are derived from.
 */
export const ROUTINE_STATUSES = ['NEW', 'RETRY', 'COMPLETE', 'FAILED', 'VOID', 'PAUSE'] as const;

export type RoutineStatus = (typeof ROUTINE_STATUSES)[number];

/** The pending statuses: a routine a worker may still claim and run (a RETRY one once its next try is due). */
export const PENDING_STATUSES = ['NEW', 'RETRY'] as const satisfies readonly RoutineStatus[];

export type PendingStatus = (typeof PENDING_STATUSES)[number];

/** Whether `status` is pending ({@link PENDING_STATUSES}). */
export function isPendingStatus(status: string): status is PendingStatus {
  return (PENDING_STATUSES as readonly string[]).includes(status);
}

export type RequestRoutineTable = {
  id: Generated<number>;
  request_id: number;
  execute_request_queue: string;
  status: RoutineStatus;
  routine_name: string;
  try_count: Generated<number>;
  next_try_date_time: string | null;
  execute_sequence: number;
  hash_code: number | null;
};

export type RequestRoutineExecutionTable = {
  id: Generated<number>;
  log_text: string | null;
  request_routine_id: number;
  execution_date_time: string;
  status: string;
  try_number: number;
};

export type RequestRoutineLockTable = { routine_lock: string };

export type RequestDetailsTable = Audit & {
  id: Generated<number>;
  request_id: number;
  name: string;
  value: string | null;
};

export type AddressTypeTable = Audit & { id: Generated<number>; name: string };

export type CountryTable = Audit & { id: Generated<number>; code: string | null; name: string | null };

export type EthnicGroupTable = Audit & {
  id: Generated<number>;
  name: string;
  code: string;
  display_order: Generated<number>;
  deleted: Generated<number>;
};

export type AddressTable = Audit & {
  id: Generated<number>;
  address1: string | null;
  address2: string | null;
  city: string | null;
  postcode: string | null;
  county: string | null;
  country_id: number;
  email: string | null;
  contact_id: number;
  date_start: string | null;
  date_end: string | null;
  /** 2 Home, 3 Correspondence (OpenEyes's `AddressType` constants). */
  address_type_id: number | null;
};

export type GpTable = Audit & {
  id: Generated<number>;
  obj_prof: string;
  nat_id: string;
  is_active: Generated<number | null>;
  contact_id: number;
};

export type PracticeTable = Audit & {
  id: Generated<number>;
  code: string;
  phone: string;
  is_active: Generated<number | null>;
  contact_id: number;
};

export type ContactPracticeAssociateTable = Audit & {
  id: Generated<number>;
  gp_id: number;
  practice_id: number;
  provider_no: string | null;
};

export type PasapiAssignmentTable = Audit & {
  id: Generated<number>;
  /** `Patient` or `PatientAppointment`. */
  resource_type: string | null;
  /** The external id of the URL. */
  resource_id: string | null;
  /** `\Patient` or `\WorklistPatient`. */
  internal_type: string | null;
  internal_id: number;
};

export type PasapiXpathRemapTable = Audit & {
  id: Generated<number>;
  name: string;
  xpath: string;
  institution_id: number | null;
};

export type PasapiRemapValueTable = Audit & {
  id: Generated<number>;
  xpath_id: number;
  input: string;
  /** NULL removes the element. */
  output: string | null;
};

export type PatientMergeRequestTable = Audit & {
  id: Generated<number>;
  primary_id: number;
  primary_local_identifier_value: string | null;
  primary_global_identifier_value: string | null;
  primary_dob: string | null;
  primary_gender: string | null;
  secondary_id: number;
  secondary_local_identifier_value: string | null;
  secondary_global_identifier_value: string | null;
  secondary_dob: string | null;
  secondary_gender: string | null;
  merge_json: string | null;
  comment: string | null;
  /** 0 Not processed, 10 Conflict, 20 Merged. */
  status: Generated<number | null>;
  deleted: Generated<number>;
};

/** Every table of the service, by its OpenEyes name. */
/** OpenEyes's worklist tables (migration 0021); the worklist module reads them for the Modality Worklist. */
export type WorklistDefinitionTable = Audit & {
  id: Generated<number>;
  name: string;
  description: string | null;
  worklist_name: string | null;
  rrule: string | null;
  /** `HH:MM:SS`. */
  start_time: string;
  end_time: string;
  active_from: string;
  active_until: string | null;
  scheduled: Generated<number>;
  display_order: number;
  patient_identifier_type_id: number;
  pathway_type_id: Generated<number>;
};

export type WorklistDefinitionMappingTable = Audit & {
  id: Generated<number>;
  worklist_definition_id: number;
  key: string;
  display_order: number | null;
};

export type WorklistDefinitionMappingValueTable = Audit & {
  id: Generated<number>;
  worklist_definition_mapping_id: number;
  mapping_value: string;
};

export type WorklistDefinitionDisplayContextTable = Audit & {
  id: Generated<number>;
  worklist_definition_id: number;
  firm_id: number | null;
  subspecialty_id: number | null;
  site_id: number | null;
  institution_id: number | null;
};

export type WorklistTable = Audit & {
  id: Generated<number>;
  name: string;
  description: string | null;
  start: string | null;
  end: string | null;
  scheduled: Generated<number>;
  worklist_definition_id: number | null;
};

export type WorklistAttributeTable = Audit & {
  id: Generated<number>;
  worklist_id: number;
  name: string;
  display_order: number | null;
};

export type WorklistPatientTable = Audit & {
  id: Generated<number>;
  worklist_id: number;
  patient_id: number;
  when: string | null;
};

export type WorklistPatientAttributeTable = Audit & {
  id: Generated<number>;
  worklist_attribute_id: number;
  worklist_patient_id: number;
  attribute_value: string | null;
};

export interface DB {
  user: UserTable;
  contact: ContactTable;
  institution: InstitutionTable;
  site: SiteTable;
  institution_authentication: InstitutionAuthenticationTable;
  user_authentication: UserAuthenticationTable;
  authitem: AuthItemTable;
  authitemchild: AuthItemChildTable;
  authassignment: AuthAssignmentTable;
  setting_metadata: SettingMetadataTable;
  setting_installation: SettingInstallationTable;
  setting_institution: SettingInstitutionTable;
  setting_site: SettingSiteTable;
  patient: PatientTable;
  patient_identifier_type: PatientIdentifierTypeTable;
  patient_identifier: PatientIdentifierTable;
  patient_identifier_type_display_order: PatientIdentifierTypeDisplayOrderTable;
  event_type: EventTypeTable;
  element_type: ElementTypeTable;
  episode: EpisodeTable;
  event: EventTable;
  unique_codes: UniqueCodesTable;
  unique_codes_mapping: UniqueCodesMappingTable;
  et_ophcocvi_esign: EtOphcocviEsignTable;
  protected_file: ProtectedFileTable;
  ophcocvi_signature: OphcocviSignatureTable;
  signature_import_log: SignatureImportLogTable;
  mime_type: MimeTypeTable;
  attachment_type: AttachmentTypeTable;
  body_site_type: BodySiteTypeTable;
  request_queue: RequestQueueTable;
  request_queue_lock: RequestQueueLockTable;
  routine_library: RoutineLibraryTable;
  request_type: RequestTypeTable;
  request: RequestTable;
  attachment_data: AttachmentDataTable;
  event_attachment_group: EventAttachmentGroupTable;
  event_attachment_item: EventAttachmentItemTable;
  request_routine: RequestRoutineTable;
  request_routine_execution: RequestRoutineExecutionTable;
  request_routine_lock: RequestRoutineLockTable;
  request_details: RequestDetailsTable;
  address_type: AddressTypeTable;
  country: CountryTable;
  ethnic_group: EthnicGroupTable;
  address: AddressTable;
  gp: GpTable;
  practice: PracticeTable;
  contact_practice_associate: ContactPracticeAssociateTable;
  pasapi_assignment: PasapiAssignmentTable;
  pasapi_xpath_remap: PasapiXpathRemapTable;
  pasapi_remap_value: PasapiRemapValueTable;
  patient_merge_request: PatientMergeRequestTable;
  worklist_definition: WorklistDefinitionTable;
  worklist_definition_mapping: WorklistDefinitionMappingTable;
  worklist_definition_mapping_value: WorklistDefinitionMappingValueTable;
  worklist_definition_display_context: WorklistDefinitionDisplayContextTable;
  worklist: WorklistTable;
  worklist_attribute: WorklistAttributeTable;
  worklist_patient: WorklistPatientTable;
  worklist_patient_attribute: WorklistPatientAttributeTable;
}

export type TableName = keyof DB;
export type Row<T extends TableName> = Selectable<DB[T]>;
export type NewRow<T extends TableName> = Insertable<DB[T]>;
export type RowUpdate<T extends TableName> = Updateable<DB[T]>;
