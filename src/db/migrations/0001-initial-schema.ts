/**
 * The OpenEyes data model, with the OpenEyes table and column names: what the four
 * endpoints and the queue worker read and write. Tables are created in foreign-key order.
 */
import { sql } from 'kysely';
import type { AnyDb, DialectAdapter } from './helpers.ts';
import { auditColumns, flag, idColumn, lowerIndex } from './helpers.ts';

export async function up(db: AnyDb, dialect: DialectAdapter): Promise<void> {
  const t = dialect.columnTypes;
  const s = db.schema;

  // --- users and RBAC ------------------------------------------------------------------------------
  await idColumn(s.createTable('user'), t)
    .addColumn('first_name', 'varchar(40)', (c) => c.notNull().defaultTo(''))
    .addColumn('last_name', 'varchar(40)', (c) => c.notNull().defaultTo(''))
    .addColumn('email', 'varchar(80)')
    .addColumn('title', 'varchar(40)')
    .addColumn('qualifications', 'varchar(255)')
    .addColumn('role', 'varchar(255)')
    .addColumn('last_firm_id', 'integer')
    .addColumn('last_site_id', 'integer')
    .addColumn('is_consultant', 'integer', (c) => flag(c, 0))
    .addColumn('is_surgeon', 'integer', (c) => flag(c, 0))
    .addColumn('active', 'integer', (c) => flag(c, 1))
    // The audit columns of `user` reference `user` itself; added without the constraint to allow row 1.
    .addColumn('last_modified_user_id', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('last_modified_date', t.dateTime, (c) => c.notNull().defaultTo('1901-01-01 00:00:00'))
    .addColumn('created_user_id', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('created_date', t.dateTime, (c) => c.notNull().defaultTo('1901-01-01 00:00:00'))
    .execute();

  await idColumn(s.createTable('contact'), t)
    .addColumn('title', 'varchar(20)')
    .addColumn('first_name', 'varchar(300)', (c) => c.notNull().defaultTo(''))
    .addColumn('last_name', 'varchar(100)', (c) => c.notNull().defaultTo(''))
    .addColumn('maiden_name', 'varchar(100)')
    .addColumn('nick_name', 'varchar(80)')
    .addColumn('primary_phone', 'varchar(20)')
    .addColumn('mobile_phone', 'varchar(50)')
    .addColumn('email', 'varchar(255)')
    .addColumn('qualifications', 'varchar(200)')
    .addColumn('contact_label_id', 'integer')
    .addColumn('created_institution_id', 'integer')
    .$call((b) => auditColumns(b, t))
    .execute();

  await idColumn(s.createTable('institution'), t)
    .addColumn('name', 'varchar(255)', (c) => c.notNull().defaultTo(''))
    .addColumn('remote_id', 'varchar(10)', (c) => c.notNull().defaultTo(''))
    .addColumn('short_name', 'varchar(64)', (c) => c.notNull().defaultTo(''))
    .addColumn('contact_id', 'integer', (c) => c.references('contact.id'))
    .addColumn('active', 'integer', (c) => flag(c, 1))
    .addColumn('any_number_search_allowed', 'integer')
    .addColumn('pas_key', 'integer')
    .addColumn('logo_id', 'integer')
    .addColumn('first_used_site_id', 'integer')
    .addColumn('source_id', 'integer')
    .$call((b) => auditColumns(b, t))
    .execute();
  await s.createIndex('institution_remote_id').on('institution').column('remote_id').execute();

  await idColumn(s.createTable('site'), t)
    .addColumn('name', 'varchar(255)', (c) => c.notNull().defaultTo(''))
    .addColumn('short_name', 'varchar(255)', (c) => c.notNull().defaultTo(''))
    .addColumn('remote_id', 'varchar(10)', (c) => c.notNull().defaultTo(''))
    .addColumn('institution_id', 'integer', (c) => c.notNull().references('institution.id'))
    .addColumn('location', 'varchar(64)')
    .addColumn('contact_id', 'integer', (c) => c.references('contact.id'))
    .addColumn('active', 'integer', (c) => flag(c, 1))
    .$call((b) => auditColumns(b, t))
    .execute();
  await s.createIndex('site_institution_id').on('site').column('institution_id').execute();

  await idColumn(s.createTable('institution_authentication'), t)
    .addColumn('institution_id', 'integer', (c) => c.notNull().references('institution.id'))
    .addColumn('site_id', 'integer', (c) => c.references('site.id'))
    .addColumn('user_authentication_method', 'varchar(10)', (c) => c.notNull().defaultTo('LOCAL'))
    .addColumn('ldap_config_id', 'integer')
    .addColumn('description', 'varchar(255)')
    .addColumn('order', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('active', 'integer', (c) => flag(c, 1))
    .$call((b) => auditColumns(b, t))
    .execute();

  await idColumn(s.createTable('user_authentication'), t)
    .addColumn('institution_authentication_id', 'integer', (c) =>
      c.references('institution_authentication.id'),
    )
    .addColumn('user_id', 'integer', (c) => c.notNull().references('user.id'))
    .addColumn('username', 'varchar(40)', (c) => c.notNull())
    .addColumn('password_hash', 'varchar(255)')
    .addColumn('password_salt', 'varchar(10)')
    .addColumn('password_softlocked_until', t.dateTime)
    .addColumn('password_last_changed_date', t.dateTime)
    .addColumn('password_failed_tries', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('password_status', 'varchar(10)', (c) => c.notNull().defaultTo('current'))
    .addColumn('last_successful_login_date', t.dateTime)
    .addColumn('active', 'integer', (c) => flag(c, 1))
    .$call((b) => auditColumns(b, t))
    .execute();
  await lowerIndex(db, dialect, 'user_authentication_username', 'user_authentication', ['username']);
  await s.createIndex('user_authentication_user_id').on('user_authentication').column('user_id').execute();

  await s
    .createTable('authitem')
    .addColumn('name', 'varchar(64)', (c) => c.primaryKey())
    .addColumn('type', 'integer', (c) => c.notNull())
    .addColumn('description', t.text)
    .addColumn('bizrule', t.text)
    .addColumn('data', t.text)
    .execute();
  await s
    .createTable('authitemchild')
    .addColumn('parent', 'varchar(64)', (c) => c.notNull().references('authitem.name').onDelete('cascade'))
    .addColumn('child', 'varchar(64)', (c) => c.notNull().references('authitem.name').onDelete('cascade'))
    .addPrimaryKeyConstraint('authitemchild_pk', ['parent', 'child'])
    .execute();
  await s
    .createTable('authassignment')
    .addColumn('itemname', 'varchar(64)', (c) => c.notNull().references('authitem.name').onDelete('cascade'))
    .addColumn('userid', 'varchar(64)', (c) => c.notNull())
    .addColumn('bizrule', t.text)
    .addColumn('data', t.text)
    .addPrimaryKeyConstraint('authassignment_pk', ['itemname', 'userid'])
    .execute();
  await s.createIndex('authassignment_userid').on('authassignment').column('userid').execute();

  // --- settings ---------------------------------------------------------------------------------------
  await idColumn(s.createTable('setting_metadata'), t)
    .addColumn('element_type_id', 'integer')
    .addColumn('field_type_id', 'integer')
    .addColumn('key', 'varchar(64)', (c) => c.notNull().unique())
    .addColumn('name', 'varchar(64)', (c) => c.notNull().defaultTo(''))
    .addColumn('data', t.text)
    .addColumn('default_value', 'varchar(64)')
    .addColumn('lowest_setting_level', 'varchar(20)', (c) => c.notNull().defaultTo('INSTALLATION'))
    .$call((b) => auditColumns(b, t))
    .execute();
  await idColumn(s.createTable('setting_installation'), t)
    .addColumn('element_type_id', 'integer')
    .addColumn('key', 'varchar(64)', (c) => c.notNull().unique())
    .addColumn('value', t.text)
    .$call((b) => auditColumns(b, t))
    .execute();
  await idColumn(s.createTable('setting_institution'), t)
    .addColumn('institution_id', 'integer', (c) => c.notNull().references('institution.id'))
    .addColumn('element_type_id', 'integer')
    .addColumn('key', 'varchar(64)', (c) => c.notNull())
    .addColumn('value', t.text)
    .addUniqueConstraint('setting_institution_key', ['institution_id', 'key'])
    .$call((b) => auditColumns(b, t))
    .execute();
  await idColumn(s.createTable('setting_site'), t)
    .addColumn('site_id', 'integer', (c) => c.notNull().references('site.id'))
    .addColumn('element_type_id', 'integer')
    .addColumn('key', 'varchar(64)', (c) => c.notNull())
    .addColumn('value', t.text)
    .addUniqueConstraint('setting_site_key', ['site_id', 'key'])
    .$call((b) => auditColumns(b, t))
    .execute();

  // --- patients and identifiers -----------------------------------------------------------------------
  await idColumn(s.createTable('patient'), t)
    .addColumn('contact_id', 'integer', (c) => c.notNull().references('contact.id'))
    .addColumn('dob', t.date)
    .addColumn('date_of_death', t.date)
    .addColumn('is_deceased', 'integer', (c) => flag(c, 0))
    .addColumn('gender', 'varchar(1)')
    .addColumn('deleted', 'integer', (c) => flag(c, 0))
    .addColumn('hos_num', 'varchar(40)')
    .addColumn('nhs_num', 'varchar(40)')
    .addColumn('ethnic_group_id', 'integer')
    .addColumn('gp_id', 'integer')
    .addColumn('practice_id', 'integer')
    .addColumn('patient_source', 'integer', (c) => flag(c, 0))
    .addColumn('primary_institution_id', 'integer', (c) => c.references('institution.id'))
    .addColumn('is_local', 'integer')
    .addColumn('pas_key', 'integer')
    .addColumn('nhs_num_status_id', 'integer')
    .addColumn('no_allergies_date', t.dateTime)
    .addColumn('no_risks_date', t.dateTime)
    .addColumn('no_family_history_date', t.dateTime)
    .addColumn('father_id', 'integer')
    .addColumn('mother_id', 'integer')
    .addColumn('yob', 'integer')
    .addColumn('mobile_telephone', 'varchar(20)')
    .$call((b) => auditColumns(b, t))
    .execute();
  await s.createIndex('patient_contact_id').on('patient').column('contact_id').execute();
  await s.createIndex('patient_dob').on('patient').column('dob').execute();
  // The patient search by name prefix (`LIKE 'x%'`) reads `lower(last_name)` and `lower(first_name)` ranges.
  await lowerIndex(db, dialect, 'contact_last_first_name', 'contact', ['last_name', 'first_name']);
  await lowerIndex(db, dialect, 'contact_first_name', 'contact', ['first_name']);

  await idColumn(s.createTable('patient_identifier_type'), t)
    .addColumn('usage_type', 'varchar(255)', (c) => c.notNull())
    .addColumn('short_title', 'varchar(255)', (c) => c.notNull())
    .addColumn('long_title', 'varchar(255)')
    .addColumn('institution_id', 'integer', (c) => c.notNull().references('institution.id'))
    .addColumn('site_id', 'integer', (c) => c.references('site.id'))
    .addColumn('validate_regex', 'varchar(255)', (c) => c.notNull())
    .addColumn('pad', 'varchar(255)')
    .addColumn('value_display_prefix', 'varchar(255)')
    .addColumn('value_display_suffix', 'varchar(255)')
    .addColumn('spacing_rule', 'varchar(255)')
    .addColumn('validation_example', 'varchar(255)')
    .addColumn('pas_api', t.text)
    .addColumn('unique_row_string', 'varchar(255)', (c) => c.unique())
    .$call((b) => auditColumns(b, t))
    .execute();

  await idColumn(s.createTable('patient_identifier'), t)
    .addColumn('patient_id', 'integer', (c) => c.notNull().references('patient.id'))
    .addColumn('patient_identifier_type_id', 'integer', (c) =>
      c.notNull().references('patient_identifier_type.id'),
    )
    .addColumn('value', 'varchar(255)', (c) => c.notNull())
    .addColumn('source_info', 'varchar(255)', (c) => c.notNull().defaultTo('ACTIVE'))
    .addColumn('deleted', 'integer', (c) => flag(c, 0))
    .addColumn('patient_identifier_status_id', 'integer')
    .addColumn('unique_row_string', 'varchar(255)', (c) => c.unique())
    .addUniqueConstraint('patient_identifier_type_value_source', [
      'patient_identifier_type_id',
      'value',
      'source_info',
    ])
    .addUniqueConstraint('patient_identifier_patient_type_value', [
      'patient_id',
      'patient_identifier_type_id',
      'value',
    ])
    .$call((b) => auditColumns(b, t))
    .execute();
  // Identifier search is `type = ? and lower(value) = ?` (case-insensitive like the MySQL collation).
  await lowerIndex(db, dialect, 'patient_identifier_type_lower_value', 'patient_identifier', ['value'], {
    leadingColumns: ['patient_identifier_type_id'],
  });

  await idColumn(s.createTable('patient_identifier_type_display_order'), t)
    .addColumn('institution_id', 'integer', (c) => c.notNull().references('institution.id'))
    .addColumn('site_id', 'integer', (c) => c.references('site.id'))
    .addColumn('patient_identifier_type_id', 'integer', (c) =>
      c.notNull().references('patient_identifier_type.id'),
    )
    .addColumn('display_order', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('searchable', 'integer', (c) => flag(c, 1))
    .addColumn('search_protocol_prefix', 'varchar(100)')
    .addColumn('necessity', 'varchar(20)', (c) => c.notNull().defaultTo('hidden'))
    .addColumn('status_necessity', 'varchar(20)', (c) => c.notNull().defaultTo('hidden'))
    .addColumn('auto_increment', 'integer', (c) => flag(c, 0))
    .addColumn('auto_increment_start', 'integer')
    .addColumn('only_editable_by_admin', 'integer', (c) => flag(c, 0))
    .addColumn('unique_row_string', 'varchar(255)', (c) => c.unique())
    .$call((b) => auditColumns(b, t))
    .execute();
  await s
    .createIndex('patient_identifier_type_display_order_scope')
    .on('patient_identifier_type_display_order')
    .columns(['institution_id', 'site_id', 'display_order'])
    .execute();

  // --- events and elements ----------------------------------------------------------------------------
  await idColumn(s.createTable('event_type'), t)
    .addColumn('name', 'varchar(40)', (c) => c.notNull())
    .addColumn('class_name', 'varchar(200)', (c) => c.notNull())
    .addColumn('event_group_id', 'integer')
    .addColumn('parent_id', 'integer')
    .addColumn('rbac_operation_suffix', 'varchar(100)')
    .addColumn('support_services', 'integer', (c) => flag(c, 0))
    .addColumn('is_printable', 'integer', (c) => flag(c, 1))
    .addColumn('show_attachments', 'integer', (c) => flag(c, 0))
    .addColumn('can_be_created_manually', 'integer', (c) => flag(c, 1))
    .addColumn('display_order', 'integer', (c) => c.notNull().defaultTo(0))
    .$call((b) => auditColumns(b, t))
    .execute();

  await idColumn(s.createTable('element_type'), t)
    .addColumn('name', 'varchar(255)', (c) => c.notNull())
    .addColumn('class_name', 'varchar(255)', (c) => c.notNull())
    .addColumn('event_type_id', 'integer', (c) => c.notNull().references('event_type.id'))
    .addColumn('display_order', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('default', 'integer', (c) => flag(c, 1))
    .addColumn('required', 'integer', (c) => flag(c, 0))
    .addColumn('parent_element_type_id', 'integer')
    // Not in OpenEyes: TypeScript cannot instantiate PHP classes, so the element table is named here
    // (`element_type.table_name`).
    .addColumn('table_name', 'varchar(64)')
    .$call((b) => auditColumns(b, t))
    .execute();

  await idColumn(s.createTable('episode'), t)
    .addColumn('patient_id', 'integer', (c) => c.notNull().references('patient.id'))
    .addColumn('firm_id', 'integer')
    .addColumn('start_date', t.dateTime)
    .addColumn('end_date', t.dateTime)
    .addColumn('episode_status_id', 'integer')
    .addColumn('legacy', 'integer', (c) => flag(c, 0))
    .addColumn('deleted', 'integer', (c) => flag(c, 0))
    .addColumn('eye_id', 'integer')
    .addColumn('disorder_id', 'integer')
    .addColumn('support_services', 'integer', (c) => flag(c, 0))
    .$call((b) => auditColumns(b, t))
    .execute();
  await s.createIndex('episode_patient_id').on('episode').column('patient_id').execute();

  await idColumn(s.createTable('event'), t)
    .addColumn('episode_id', 'integer', (c) => c.references('episode.id'))
    .addColumn('event_type_id', 'integer', (c) => c.notNull().references('event_type.id'))
    .addColumn('info', 'varchar(1024)')
    .addColumn('deleted', 'integer', (c) => flag(c, 0))
    .addColumn('delete_reason', 'varchar(4096)')
    .addColumn('delete_pending', 'integer', (c) => flag(c, 0))
    .addColumn('is_automated', 'integer')
    .addColumn('automated_source', t.text)
    .addColumn('event_date', t.dateTime, (c) => c.notNull().defaultTo('1901-01-01 00:00:00'))
    .addColumn('firm_id', 'integer')
    .addColumn('parent_id', 'integer', (c) => c.references('event.id'))
    .addColumn('institution_id', 'integer', (c) => c.references('institution.id'))
    .addColumn('site_id', 'integer', (c) => c.references('site.id'))
    .addColumn('worklist_patient_id', 'integer')
    .addColumn('step_id', 'integer')
    .addColumn('template_id', 'integer')
    .addColumn('pas_visit_id', 'varchar(40)')
    .$call((b) => auditColumns(b, t))
    .execute();
  await s.createIndex('event_episode_id').on('event').column('episode_id').execute();

  await idColumn(s.createTable('unique_codes'), t)
    .addColumn('code', 'varchar(6)', (c) => c.notNull())
    .addColumn('active', 'integer', (c) => flag(c, 1))
    .$call((b) => auditColumns(b, t))
    .execute();
  // Codes are matched case-insensitively, like the MySQL collation of the original.
  await lowerIndex(db, dialect, 'unique_codes_code', 'unique_codes', ['code']);

  await idColumn(s.createTable('unique_codes_mapping'), t)
    .addColumn('unique_code_id', 'integer', (c) => c.notNull().unique().references('unique_codes.id'))
    .addColumn('event_id', 'integer', (c) => c.unique().references('event.id'))
    .addColumn('user_id', 'integer', (c) => c.references('user.id'))
    .$call((b) => auditColumns(b, t))
    .execute();

  await idColumn(s.createTable('et_ophcocvi_esign'), t)
    .addColumn('event_id', 'integer', (c) => c.notNull().references('event.id'))
    .$call((b) => auditColumns(b, t))
    .execute();
  await s.createIndex('et_ophcocvi_esign_event_id').on('et_ophcocvi_esign').column('event_id').execute();

  await idColumn(s.createTable('protected_file'), t)
    .addColumn('uid', 'varchar(64)', (c) => c.notNull().unique())
    .addColumn('name', 'varchar(255)', (c) => c.notNull().defaultTo(''))
    .addColumn('title', 'varchar(64)', (c) => c.notNull().defaultTo(''))
    .addColumn('description', 'varchar(64)', (c) => c.notNull().defaultTo(''))
    .addColumn('mimetype', 'varchar(64)', (c) => c.notNull().defaultTo(''))
    .addColumn('size', 'varchar(64)', (c) => c.notNull().defaultTo('0'))
    .addColumn('rotate', 'integer')
    .$call((b) => auditColumns(b, t))
    .execute();

  await idColumn(s.createTable('ophcocvi_signature'), t)
    .addColumn('element_id', 'integer', (c) => c.notNull().references('et_ophcocvi_esign.id'))
    .addColumn('type', 'integer', (c) => c.notNull())
    .addColumn('signature_file_id', 'integer', (c) => c.references('protected_file.id'))
    .addColumn('signed_user_id', 'integer', (c) => c.references('user.id'))
    .addColumn('signatory_role', 'varchar(64)', (c) => c.notNull())
    .addColumn('signatory_name', 'varchar(64)', (c) => c.notNull())
    .addColumn('timestamp', 'integer', (c) => c.notNull())
    .addColumn('status', 'integer', (c) => flag(c, 1))
    .addColumn('delete_reason', 'varchar(200)')
    .$call((b) => auditColumns(b, t))
    .execute();
  await s
    .createIndex('ophcocvi_signature_element_id')
    .on('ophcocvi_signature')
    .column('element_id')
    .execute();

  await idColumn(s.createTable('signature_import_log'), t)
    .addColumn('filename', 'varchar(255)', (c) => c.notNull().defaultTo(''))
    .addColumn('import_datetime', t.dateTime)
    .addColumn('status_id', 'integer', (c) => c.notNull())
    .addColumn('return_message', t.text)
    .addColumn('event_id', 'integer', (c) => c.references('event.id'))
    .addColumn('cropped_file_id', 'integer', (c) => c.references('protected_file.id'))
    // OpenEyes declares these two as DATE (not DATETIME); kept for compatibility.
    .$call((b) => auditColumns(b, t, 'date'))
    .execute();

  // --- request queue and attachments ------------------------------------------------------------------
  await s
    .createTable('mime_type')
    .addColumn('mime_type', 'varchar(100)', (c) => c.primaryKey())
    .execute();
  await s
    .createTable('attachment_type')
    .addColumn('attachment_type', 'varchar(45)', (c) => c.primaryKey())
    .addColumn('title_full', 'varchar(45)', (c) => c.notNull().defaultTo(''))
    .addColumn('title_short', 'varchar(45)', (c) => c.notNull().defaultTo(''))
    .addColumn('title_abbreviated', 'varchar(45)', (c) => c.notNull().defaultTo(''))
    .addColumn('dicom_modality_code', 'varchar(45)', (c) => c.notNull().defaultTo(''))
    .execute();
  await s
    .createTable('body_site_type')
    .addColumn('body_site_snomed_type', 'varchar(45)', (c) => c.primaryKey())
    .addColumn('title_full', 'varchar(45)', (c) => c.notNull().defaultTo(''))
    .addColumn('title_short', 'varchar(45)', (c) => c.notNull().defaultTo(''))
    .addColumn('title_abbreviated', 'varchar(45)', (c) => c.notNull().defaultTo(''))
    .execute();
  await s
    .createTable('request_queue')
    .addColumn('request_queue', 'varchar(45)', (c) => c.primaryKey())
    .addColumn('maximum_active_threads', 'integer', (c) => c.notNull().defaultTo(5))
    .addColumn('total_active_thread_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('total_execute_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('total_success_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('total_fail_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('busy_yield_ms', 'integer', (c) => c.notNull().defaultTo(1000))
    .addColumn('idle_yield_ms', 'integer', (c) => c.notNull().defaultTo(1000))
    .addColumn('last_poll_date', t.dateTime)
    .addColumn('last_thread_spawn_date', t.dateTime)
    .addColumn('last_thread_spawn_request_id', 'integer')
    .execute();
  await s
    .createTable('request_queue_lock')
    .addColumn('request_queue', 'varchar(45)', (c) =>
      c.primaryKey().references('request_queue.request_queue'),
    )
    .execute();
  await s
    .createTable('routine_library')
    .addColumn('routine_name', 'varchar(45)', (c) => c.primaryKey())
    .addColumn('hash_code', 'bigint')
    .execute();
  await s
    .createTable('request_type')
    .addColumn('request_type', 'varchar(45)', (c) => c.primaryKey())
    .addColumn('title_full', 'varchar(45)', (c) => c.notNull())
    .addColumn('title_short', 'varchar(45)', (c) => c.notNull())
    .addColumn('default_routine_name', 'varchar(50)', (c) =>
      c.notNull().references('routine_library.routine_name'),
    )
    .addColumn('default_request_queue', 'varchar(45)', (c) =>
      c.notNull().references('request_queue.request_queue'),
    )
    .execute();
  await idColumn(s.createTable('request'), t)
    .addColumn('request_type', 'varchar(45)', (c) => c.notNull().references('request_type.request_type'))
    .addColumn('system_message', 'varchar(255)', (c) => c.notNull().defaultTo(''))
    .addColumn('request_override_default_queue', 'varchar(45)', (c) =>
      c.references('request_queue.request_queue'),
    )
    .$call((b) => auditColumns(b, t))
    .execute();
  await idColumn(s.createTable('attachment_data'), t)
    .addColumn('request_id', 'integer', (c) => c.notNull().references('request.id'))
    .addColumn('attachment_mnemonic', 'varchar(45)', (c) => c.notNull())
    .addColumn('body_site_snomed_type', 'varchar(45)', (c) =>
      c.references('body_site_type.body_site_snomed_type'),
    )
    .addColumn('system_only_managed', 'integer', (c) => flag(c, 0))
    .addColumn('attachment_type', 'varchar(45)', (c) =>
      c.notNull().references('attachment_type.attachment_type'),
    )
    .addColumn('mime_type', 'varchar(100)', (c) => c.notNull().references('mime_type.mime_type'))
    .addColumn('blob_data', t.blob)
    .addColumn('text_data', t.text)
    .addColumn('upload_file_name', 'varchar(200)')
    .addColumn('thumbnail_small_blob', t.blob)
    .addColumn('thumbnail_medium_blob', t.blob)
    .addColumn('thumbnail_large_blob', t.blob)
    .addColumn('hash_code', 'bigint')
    .$call((b) => auditColumns(b, t))
    .execute();
  // OpenEyes's unique key on (request, mnemonic, body site) is ineffective with NULL body sites (NULLs are
  // distinct); uniqueness of (request, mnemonic) is enforced here with an index on the mnemonic and the body
  // site text. MariaDB cannot index an expression: it indexes an invisible generated column holding it.
  if (dialect.name === 'mysql') {
    await sql`alter table attachment_data add column body_site_key varchar(45)
      as (coalesce(body_site_snomed_type, '')) virtual invisible`.execute(db);
    await sql`create unique index attachment_data_request_mnemonic_site on attachment_data (request_id, attachment_mnemonic, body_site_key)`.execute(
      db,
    );
  } else {
    await sql`create unique index attachment_data_request_mnemonic_site on attachment_data (request_id, attachment_mnemonic, coalesce(body_site_snomed_type, ''))`.execute(
      db,
    );
  }
  await s.createIndex('attachment_data_hash_code').on('attachment_data').column('hash_code').execute();

  await idColumn(s.createTable('event_attachment_group'), t)
    .addColumn('event_id', 'integer', (c) => c.notNull().references('event.id'))
    .addColumn('element_type_id', 'integer', (c) => c.notNull().references('element_type.id'))
    .$call((b) => auditColumns(b, t))
    .execute();
  await s
    .createIndex('event_attachment_group_event_id')
    .on('event_attachment_group')
    .column('event_id')
    .execute();
  await idColumn(s.createTable('event_attachment_item'), t)
    .addColumn('event_attachment_group_id', 'integer', (c) =>
      c.notNull().references('event_attachment_group.id'),
    )
    .addColumn('attachment_data_id', 'integer', (c) => c.notNull().references('attachment_data.id'))
    .addColumn('system_only_managed', 'integer', (c) => flag(c, 0))
    .addColumn('event_document_view_set', 'varchar(45)')
    .$call((b) => auditColumns(b, t))
    .execute();
  await s
    .createIndex('event_attachment_item_group_id')
    .on('event_attachment_item')
    .column('event_attachment_group_id')
    .execute();
  await s
    .createIndex('event_attachment_item_attachment_data_id')
    .on('event_attachment_item')
    .column('attachment_data_id')
    .execute();

  await idColumn(s.createTable('request_routine'), t)
    .addColumn('request_id', 'integer', (c) => c.notNull().references('request.id'))
    .addColumn('execute_request_queue', 'varchar(45)', (c) =>
      c.notNull().references('request_queue.request_queue'),
    )
    .addColumn('status', 'varchar(45)', (c) => c.notNull())
    .addColumn('routine_name', 'varchar(45)', (c) => c.notNull().references('routine_library.routine_name'))
    .addColumn('try_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_try_date_time', t.dateTime)
    .addColumn('execute_sequence', 'integer', (c) => c.notNull())
    .addColumn('hash_code', 'bigint')
    .execute();
  // Claiming: eligible (NEW/RETRY) routines of one queue by status, then per-request ordering.
  await s
    .createIndex('request_routine_queue_status')
    .on('request_routine')
    .columns(['execute_request_queue', 'status', 'id'])
    .execute();
  await s
    .createIndex('request_routine_request_sequence')
    .on('request_routine')
    .columns(['request_id', 'execute_sequence'])
    .execute();

  await idColumn(s.createTable('request_routine_execution'), t)
    .addColumn('log_text', t.text)
    .addColumn('request_routine_id', 'integer', (c) => c.notNull().references('request_routine.id'))
    .addColumn('execution_date_time', t.dateTime, (c) => c.notNull())
    .addColumn('status', t.text, (c) => c.notNull())
    .addColumn('try_number', 'integer', (c) => c.notNull())
    .execute();
  await s
    .createIndex('request_routine_execution_routine_id')
    .on('request_routine_execution')
    .column('request_routine_id')
    .execute();
  await s
    .createTable('request_routine_lock')
    .addColumn('routine_lock', 'varchar(200)', (c) => c.primaryKey())
    .execute();
  await idColumn(s.createTable('request_details'), t)
    .addColumn('request_id', 'integer', (c) => c.notNull().references('request.id'))
    .addColumn('name', 'varchar(100)', (c) => c.notNull())
    .addColumn('value', t.text)
    .$call((b) => auditColumns(b, t))
    .execute();
  await s.createIndex('request_details_request_id').on('request_details').column('request_id').execute();
}
