/**
 * What the dataset importer must know about each table and cannot read from SQLite's schema: the primary
 * key, the foreign keys (to order inserts and to name broken references), and which text columns hold
 * dates or date-times. It mirrors the migrations; `dataset.test.ts` checks it against the live schema on
 * both dialects, and the `satisfies` clause makes a table added to `DB` without a spec a type error.
 */
import type { TableName } from '../../db/schema.ts';

/** Tables a migration creates that `DB` does not type yet; a dataset still carries them. */
type UntypedTable = 'attachment_data_digest';
/** Every table a dataset holds: those of `DB` (enforced below) and the untyped ones. */
export type DatasetTable = TableName | UntypedTable;

export interface Reference {
  readonly table: DatasetTable;
  readonly column: string;
}

export interface TableSpec {
  /** Primary key columns, in key order. */
  readonly primaryKey: readonly string[];
  /** Foreign keys: column -> referenced table and column. */
  readonly references: Readonly<Record<string, Reference>>;
  readonly dates: readonly string[];
  readonly dateTimes: readonly string[];
}

const user: Reference = { table: 'user', column: 'id' };
const ref = (table: DatasetTable, column = 'id'): Reference => ({ table, column });

interface SpecInput {
  readonly primaryKey?: readonly string[];
  readonly references?: Readonly<Record<string, Reference>>;
  readonly dates?: readonly string[];
  readonly dateTimes?: readonly string[];
  /** The OpenEyes audit columns (who/when); `date` for the two DATE ones of signature_import_log. */
  readonly audit?: 'dateTime' | 'date';
}

function spec(input: SpecInput): TableSpec {
  const auditWhen = ['last_modified_date', 'created_date'];
  return {
    primaryKey: input.primaryKey ?? ['id'],
    references: {
      ...(input.audit !== undefined ? { last_modified_user_id: user, created_user_id: user } : {}),
      ...input.references,
    },
    dates: [...(input.dates ?? []), ...(input.audit === 'date' ? auditWhen : [])],
    dateTimes: [...(input.dateTimes ?? []), ...(input.audit === 'dateTime' ? auditWhen : [])],
  };
}

export const TABLE_SPECS = {
  // `user`'s own audit columns carry no constraint (row 1 references itself).
  user: spec({ dateTimes: ['last_modified_date', 'created_date'] }),
  contact: spec({ audit: 'dateTime' }),
  institution: spec({ audit: 'dateTime', references: { contact_id: ref('contact') } }),
  site: spec({
    audit: 'dateTime',
    references: { institution_id: ref('institution'), contact_id: ref('contact') },
  }),
  institution_authentication: spec({
    audit: 'dateTime',
    references: { institution_id: ref('institution'), site_id: ref('site') },
  }),
  user_authentication: spec({
    audit: 'dateTime',
    references: { institution_authentication_id: ref('institution_authentication'), user_id: user },
    dateTimes: ['password_softlocked_until', 'password_last_changed_date', 'last_successful_login_date'],
  }),
  authitem: spec({ primaryKey: ['name'] }),
  authitemchild: spec({
    primaryKey: ['parent', 'child'],
    references: { parent: ref('authitem', 'name'), child: ref('authitem', 'name') },
  }),
  authassignment: spec({
    primaryKey: ['itemname', 'userid'],
    references: { itemname: ref('authitem', 'name') },
  }),
  setting_metadata: spec({ audit: 'dateTime' }),
  setting_installation: spec({ audit: 'dateTime' }),
  setting_institution: spec({ audit: 'dateTime', references: { institution_id: ref('institution') } }),
  setting_site: spec({ audit: 'dateTime', references: { site_id: ref('site') } }),
  patient: spec({
    audit: 'dateTime',
    references: { contact_id: ref('contact'), primary_institution_id: ref('institution') },
    dates: ['dob', 'date_of_death'],
    dateTimes: ['no_allergies_date', 'no_risks_date', 'no_family_history_date'],
  }),
  patient_identifier_type: spec({
    audit: 'dateTime',
    references: { institution_id: ref('institution'), site_id: ref('site') },
  }),
  patient_identifier: spec({
    audit: 'dateTime',
    references: {
      patient_id: ref('patient'),
      patient_identifier_type_id: ref('patient_identifier_type'),
    },
  }),
  patient_identifier_type_display_order: spec({
    audit: 'dateTime',
    references: {
      institution_id: ref('institution'),
      site_id: ref('site'),
      patient_identifier_type_id: ref('patient_identifier_type'),
    },
  }),
  event_type: spec({ audit: 'dateTime' }),
  element_type: spec({ audit: 'dateTime', references: { event_type_id: ref('event_type') } }),
  episode: spec({
    audit: 'dateTime',
    references: { patient_id: ref('patient') },
    dateTimes: ['start_date', 'end_date'],
  }),
  event: spec({
    audit: 'dateTime',
    references: {
      episode_id: ref('episode'),
      event_type_id: ref('event_type'),
      parent_id: ref('event'),
      institution_id: ref('institution'),
      site_id: ref('site'),
    },
    dateTimes: ['event_date'],
  }),
  unique_codes: spec({ audit: 'dateTime' }),
  unique_codes_mapping: spec({
    audit: 'dateTime',
    references: { unique_code_id: ref('unique_codes'), event_id: ref('event'), user_id: user },
  }),
  et_ophcocvi_esign: spec({ audit: 'dateTime', references: { event_id: ref('event') } }),
  protected_file: spec({ audit: 'dateTime' }),
  ophcocvi_signature: spec({
    audit: 'dateTime',
    references: {
      element_id: ref('et_ophcocvi_esign'),
      signature_file_id: ref('protected_file'),
      signed_user_id: user,
    },
  }),
  signature_import_log: spec({
    audit: 'date',
    references: { event_id: ref('event'), cropped_file_id: ref('protected_file') },
    dateTimes: ['import_datetime'],
  }),
  mime_type: spec({ primaryKey: ['mime_type'] }),
  attachment_type: spec({ primaryKey: ['attachment_type'] }),
  body_site_type: spec({ primaryKey: ['body_site_snomed_type'] }),
  request_queue: spec({
    primaryKey: ['request_queue'],
    dateTimes: ['last_poll_date', 'last_thread_spawn_date'],
  }),
  request_queue_lock: spec({
    primaryKey: ['request_queue'],
    references: { request_queue: ref('request_queue', 'request_queue') },
  }),
  routine_library: spec({ primaryKey: ['routine_name'] }),
  request_type: spec({
    primaryKey: ['request_type'],
    references: {
      default_routine_name: ref('routine_library', 'routine_name'),
      default_request_queue: ref('request_queue', 'request_queue'),
    },
  }),
  request: spec({
    audit: 'dateTime',
    references: {
      request_type: ref('request_type', 'request_type'),
      request_override_default_queue: ref('request_queue', 'request_queue'),
    },
  }),
  attachment_data: spec({
    audit: 'dateTime',
    references: {
      request_id: ref('request'),
      body_site_snomed_type: ref('body_site_type', 'body_site_snomed_type'),
      attachment_type: ref('attachment_type', 'attachment_type'),
      mime_type: ref('mime_type', 'mime_type'),
    },
  }),
  event_attachment_group: spec({
    audit: 'dateTime',
    references: { event_id: ref('event'), element_type_id: ref('element_type') },
  }),
  event_attachment_item: spec({
    audit: 'dateTime',
    references: {
      event_attachment_group_id: ref('event_attachment_group'),
      attachment_data_id: ref('attachment_data'),
    },
  }),
  request_routine: spec({
    references: {
      request_id: ref('request'),
      execute_request_queue: ref('request_queue', 'request_queue'),
      routine_name: ref('routine_library', 'routine_name'),
    },
    dateTimes: ['next_try_date_time'],
  }),
  request_routine_execution: spec({
    references: { request_routine_id: ref('request_routine') },
    dateTimes: ['execution_date_time'],
  }),
  request_routine_lock: spec({ primaryKey: ['routine_lock'] }),
  request_details: spec({ audit: 'dateTime', references: { request_id: ref('request') } }),
  address_type: spec({ audit: 'dateTime' }),
  country: spec({ audit: 'dateTime' }),
  ethnic_group: spec({ audit: 'dateTime' }),
  address: spec({
    audit: 'dateTime',
    references: {
      country_id: ref('country'),
      contact_id: ref('contact'),
      address_type_id: ref('address_type'),
    },
    dateTimes: ['date_start', 'date_end'],
  }),
  gp: spec({ audit: 'dateTime', references: { contact_id: ref('contact') } }),
  practice: spec({ audit: 'dateTime', references: { contact_id: ref('contact') } }),
  contact_practice_associate: spec({
    audit: 'dateTime',
    references: { gp_id: ref('gp'), practice_id: ref('practice') },
  }),
  pasapi_assignment: spec({ audit: 'dateTime' }),
  pasapi_xpath_remap: spec({ audit: 'dateTime', references: { institution_id: ref('institution') } }),
  pasapi_remap_value: spec({ audit: 'dateTime', references: { xpath_id: ref('pasapi_xpath_remap') } }),
  patient_merge_request: spec({
    audit: 'dateTime',
    references: { primary_id: ref('patient'), secondary_id: ref('patient') },
    dates: ['primary_dob', 'secondary_dob'],
  }),
  attachment_data_digest: spec({
    primaryKey: ['attachment_data_id'],
    references: { attachment_data_id: ref('attachment_data') },
    dateTimes: ['source_modified_date'],
  }),
  worklist_definition: spec({
    audit: 'dateTime',
    references: { patient_identifier_type_id: ref('patient_identifier_type') },
    dateTimes: ['active_from', 'active_until'],
  }),
  worklist_definition_mapping: spec({
    audit: 'dateTime',
    references: { worklist_definition_id: ref('worklist_definition') },
  }),
  worklist_definition_mapping_value: spec({
    audit: 'dateTime',
    references: { worklist_definition_mapping_id: ref('worklist_definition_mapping') },
  }),
  worklist_definition_display_context: spec({
    audit: 'dateTime',
    references: {
      worklist_definition_id: ref('worklist_definition'),
      site_id: ref('site'),
      institution_id: ref('institution'),
    },
  }),
  worklist: spec({
    audit: 'dateTime',
    references: { worklist_definition_id: ref('worklist_definition') },
    dateTimes: ['start', 'end'],
  }),
  worklist_attribute: spec({ audit: 'dateTime', references: { worklist_id: ref('worklist') } }),
  worklist_patient: spec({
    audit: 'dateTime',
    references: { worklist_id: ref('worklist'), patient_id: ref('patient') },
    dateTimes: ['when'],
  }),
  worklist_patient_attribute: spec({
    audit: 'dateTime',
    references: {
      worklist_attribute_id: ref('worklist_attribute'),
      worklist_patient_id: ref('worklist_patient'),
    },
  }),
} satisfies Record<DatasetTable, TableSpec>;

export const TABLE_NAMES = Object.keys(TABLE_SPECS) as DatasetTable[];

export function isTableName(name: string): name is DatasetTable {
  return Object.hasOwn(TABLE_SPECS, name);
}

/**
 * Every table in foreign-key order: a table comes after every table it references (self references
 * aside). Computed once from {@link TABLE_SPECS}.
 */
export const TABLES_IN_DEPENDENCY_ORDER: readonly DatasetTable[] = (() => {
  const ordered: DatasetTable[] = [];
  const state = new Map<DatasetTable, 'visiting' | 'done'>();
  const visit = (table: DatasetTable): void => {
    const seen = state.get(table);
    if (seen === 'done') return;
    if (seen === 'visiting') throw new Error(`Foreign-key cycle through ${table}`);
    state.set(table, 'visiting');
    const specOf: TableSpec = TABLE_SPECS[table];
    for (const target of Object.values(specOf.references)) {
      if (target.table !== table) visit(target.table);
    }
    state.set(table, 'done');
    ordered.push(table);
  };
  for (const table of TABLE_NAMES) visit(table);
  return ordered;
})();
