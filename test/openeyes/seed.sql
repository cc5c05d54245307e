-- Rows for the tests of DATABASE_SCHEMA=openeyes, on test/openeyes/schema.sql: what an OpenEyes v6.8
-- installation has (the seeds of the Api and core migrations, reference 11) plus a few patients, users
-- and a CVI event, written the way the OpenEyes application writes them (audit columns filled,
-- unique_row_string computed, authassignment.userid an integer).
--
-- Logins (bcrypt $2y$, cost 10):
--   api        / api-password        special account (no institution authentication) with password_salt ''
--                                    as m200517 wrote for special users; role API access
--   clinician  / clinician-password  LOCAL account with password_salt NULL; role User only (no OprnApi)
--   disabled   / disabled-password   user_authentication.active = 0; role API access
--   admin      user 1, no usable password
-- Unique code ABC234 maps to CVI event 1 (patient 1), whose e-sign element is 1 (element type 1).

SET foreign_key_checks = 0;

INSERT INTO `user_authentication_method` (`code`) VALUES ('LDAP'), ('LOCAL'), ('SSO');
INSERT INTO `authitem_type` (`id`, `name`) VALUES (0, 'operation'), (1, 'task'), (2, 'role');

INSERT INTO `contact` (`id`, `title`, `first_name`, `last_name`, `primary_phone`, `last_modified_date`, `created_date`, `active`) VALUES
  (1, NULL, 'Enoch', 'Root', NULL, '2013-09-13 00:00:00', '2013-09-13 00:00:00', 1),
  (2, NULL, 'api', 'user', NULL, '2020-05-17 10:00:00', '2020-05-17 10:00:00', 1),
  (3, 'Dr', 'Clara', 'Clinician', NULL, '2021-02-01 09:00:00', '2021-02-01 09:00:00', 1),
  (4, NULL, 'Dee', 'Sabled', NULL, '2021-02-01 09:00:00', '2021-02-01 09:00:00', 1),
  (5, NULL, NULL, NULL, NULL, '2013-09-13 00:00:00', '2013-09-13 00:00:00', 1),
  (6, NULL, NULL, NULL, NULL, '2020-03-11 00:00:00', '2020-03-11 00:00:00', 1),
  (7, NULL, NULL, NULL, NULL, '2013-09-13 00:00:00', '2013-09-13 00:00:00', 1),
  (10, 'Mrs', 'Jane', 'Smith', '0207 123 4567', '2023-03-01 11:20:00', '2023-03-01 11:20:00', 1),
  (11, 'Ms', 'Zoë', 'O''Brien', NULL, '2023-03-02 11:20:00', '2023-03-02 11:20:00', 1),
  (12, 'Mr', 'John', 'Smith', NULL, '2023-03-03 11:20:00', '2023-03-03 11:20:00', 1),
  (13, 'Mr', 'Removed', 'Smith', NULL, '2023-03-04 11:20:00', '2023-03-04 11:20:00', 1),
  (14, 'Mr', 'Øyvind', 'Olsen', NULL, '2023-03-05 11:20:00', '2023-03-05 11:20:00', 1);

INSERT INTO `user` (`id`, `first_name`, `last_name`, `email`, `global_firm_rights`, `title`, `role`, `contact_id`, `has_selected_firms`, `last_modified_date`, `created_date`) VALUES
  (1, 'Enoch', 'Root', 'admin@example.org', 1, '', 'admin role', 1, 0, '2013-09-13 00:00:00', '2013-09-13 00:00:00'),
  (2, 'api', 'user', 'info@example.org', 1, '', '', 2, 0, '2020-05-17 10:00:00', '2020-05-17 10:00:00'),
  (3, 'Clara', 'Clinician', 'clara@example.org', 0, 'Dr', 'Consultant', 3, 0, '2021-02-01 09:00:00', '2021-02-01 09:00:00'),
  (4, 'Dee', 'Sabled', 'dee@example.org', 0, '', '', 4, 0, '2021-02-01 09:00:00', '2021-02-01 09:00:00');

INSERT INTO `institution` (`id`, `name`, `remote_id`, `short_name`, `contact_id`, `active`, `any_number_search_allowed`, `first_used_site_id`, `last_modified_date`, `created_date`) VALUES
  (1, 'Test Eye Hospital', 'NEW', 'TEH', 5, 1, 1, 1, '2013-09-13 00:00:00', '2013-09-13 00:00:00'),
  (2, 'National Health Service', 'NHS', 'NHS', 6, 1, NULL, NULL, '2020-03-11 00:00:00', '2020-03-11 00:00:00');

INSERT INTO `site` (`id`, `name`, `remote_id`, `short_name`, `fax`, `telephone`, `institution_id`, `location`, `contact_id`, `active`, `last_modified_date`, `created_date`) VALUES
  (1, 'City Road', 'CR', 'City Road', '', '0207 000 0000', 1, 'London', 7, 1, '2013-09-13 00:00:00', '2013-09-13 00:00:00');

INSERT INTO `firm` (`id`, `name`, `active`, `last_modified_date`, `created_date`) VALUES
  (1, 'General Clinic', 1, '2013-09-13 00:00:00', '2013-09-13 00:00:00');

INSERT INTO `institution_authentication` (`id`, `institution_id`, `user_authentication_method`, `description`, `last_modified_date`, `created_date`) VALUES
  (1, 1, 'LOCAL', 'LOCAL authentication for Test Eye Hospital.', '2020-05-17 10:00:00', '2020-05-17 10:00:00');

INSERT INTO `user_authentication` (`id`, `institution_authentication_id`, `user_id`, `username`, `password_hash`, `password_salt`, `password_status`, `active`, `last_modified_date`, `created_date`) VALUES
  (1, 1, 1, 'admin', NULL, NULL, 'current', 1, '2020-05-17 10:00:00', '2020-05-17 10:00:00'),
  (2, NULL, 2, 'api', '$2y$10$dFj67wnEYJUinvnVmgZaI.FO6ND2Qq5NV7/9UG2vB44g0jZIgbydm', '', 'current', 1, '2020-05-17 10:00:00', '2020-05-17 10:00:00'),
  (3, 1, 3, 'clinician', '$2y$10$omSL/Jmpi/4e94isQsB/L.VWEC3jz29h.ATIlwAOmEbZGu6CfoHLq', NULL, 'current', 1, '2021-02-01 09:00:00', '2021-02-01 09:00:00'),
  (4, 1, 4, 'disabled', '$2y$10$9.EkSCf5u9q4QBf4JVDpYuDm8qKCHwS1X7VQ.19fUEA6wUDAlDev6', NULL, 'current', 0, '2021-02-01 09:00:00', '2021-02-01 09:00:00');

-- RBAC: the core login items and the Api module's (m140310_122107_api_authitems, m200211).
INSERT INTO `authitem` (`name`, `type`, `description`) VALUES
  ('OprnLogin', 0, 'Login'), ('TaskLogin', 1, 'Login'), ('User', 2, 'User'),
  ('OprnApi', 0, 'Api access'), ('TaskApi', 1, 'Api access'), ('API access', 2, 'Api access'),
  ('OprnEditRequestData', 0, NULL), ('TaskEditAPIRequest', 1, NULL), ('Edit Payload Processor', 2, NULL);
INSERT INTO `authitemchild` (`parent`, `child`) VALUES
  ('TaskLogin', 'OprnLogin'), ('User', 'TaskLogin'),
  ('TaskApi', 'OprnApi'), ('API access', 'TaskApi'),
  ('TaskEditAPIRequest', 'OprnEditRequestData'), ('Edit Payload Processor', 'TaskEditAPIRequest');
INSERT INTO `authassignment` (`itemname`, `userid`) VALUES
  ('User', 2), ('API access', 2), ('User', 3), ('User', 4), ('API access', 4);

-- Settings read by patient search (reference 10.1).
INSERT INTO `setting_field_type` (`id`, `name`) VALUES (1, 'Checkbox'), (2, 'Dropdown list'), (3, 'Radio buttons'), (4, 'Text Field');
INSERT INTO `setting_group` (`id`, `name`) VALUES (1, 'Patient');
INSERT INTO `setting_metadata` (`element_type_id`, `field_type_id`, `key`, `name`, `description`, `group_id`, `data`, `default_value`) VALUES
  (NULL, 2, 'display_primary_number_usage_code', 'Primary number usage code', '', 1, 'a:2:{s:5:"LOCAL";s:5:"Local";s:6:"GLOBAL";s:6:"Global";}', 'LOCAL'),
  (NULL, 2, 'display_secondary_number_usage_code', 'Secondary number usage code', '', 1, 'a:2:{s:5:"LOCAL";s:5:"Local";s:6:"GLOBAL";s:6:"Global";}', 'GLOBAL'),
  (NULL, 4, 'global_institution_remote_id', 'Global institution remote id', '', 1, '', 'NHS'),
  (NULL, 3, 'dob_mandatory_in_search', 'Date of birth mandatory in search', '', 1, 'a:2:{s:2:"on";s:2:"On";s:3:"off";s:3:"Off";}', 'off'),
  (NULL, 4, 'hos_num_label_short', 'Hospital number label (short)', '', 1, '', 'Hos Num');
INSERT INTO `setting_installation` (`element_type_id`, `key`, `value`) VALUES
  (NULL, 'display_primary_number_usage_code', 'LOCAL'),
  (NULL, 'display_secondary_number_usage_code', 'GLOBAL'),
  (NULL, 'global_institution_remote_id', 'NHS'),
  (NULL, 'dob_mandatory_in_search', 'off');

-- Identifier types as m200311 creates them, and their display order (m200326).
INSERT INTO `patient_identifier_type` (`id`, `usage_type`, `short_title`, `long_title`, `institution_id`, `site_id`, `validate_regex`, `pad`, `spacing_rule`, `unique_row_string`, `last_modified_date`, `created_date`) VALUES
  (1, 'LOCAL', 'Hos Num', 'Hospital Number', 1, NULL, '/^([0-9]{1,9})$/', '%07s', NULL, 'LOCAL-1-0', '2020-03-11 00:00:00', '2020-03-11 00:00:00'),
  (2, 'GLOBAL', 'NHS', 'NHS Number', 2, NULL, '/^([0-9]{3}[- ]?[0-9]{3}[- ]?[0-9]{4})$/i', NULL, '### ### ####', 'GLOBAL-2-0', '2020-03-11 00:00:00', '2020-03-11 00:00:00');
INSERT INTO `patient_identifier_type_display_order` (`id`, `institution_id`, `display_order`, `patient_identifier_type_id`, `site_id`, `search_protocol_prefix`, `searchable`, `necessity`, `unique_row_string`, `auto_increment`, `auto_increment_start`, `last_modified_date`, `created_date`) VALUES
  (1, 1, 1, 1, NULL, NULL, 1, 'mandatory', '1-1-0', 0, 0, '2020-03-26 00:00:00', '2020-03-26 00:00:00'),
  (2, 1, 2, 2, NULL, 'nhs', 1, 'optional', '2-1-0', 0, 0, '2020-03-26 00:00:00', '2020-03-26 00:00:00');

-- Patients (contacts 10-14); patient 4 is deleted, patient 3 deceased.
INSERT INTO `patient` (`id`, `dob`, `gender`, `date_of_death`, `contact_id`, `deleted`, `is_deceased`, `primary_institution_id`, `last_modified_date`, `created_date`) VALUES
  (1, '1970-01-01', 'F', NULL, 10, 0, 0, 1, '2023-03-01 11:20:00', '2023-03-01 11:20:00'),
  (2, '1985-06-15', 'F', NULL, 11, 0, 0, 1, '2023-03-02 11:20:00', '2023-03-02 11:20:00'),
  (3, '1950-03-02', 'M', '2020-01-01', 12, 0, 1, 1, '2023-03-03 11:20:00', '2023-03-03 11:20:00'),
  (4, '1960-07-07', 'M', NULL, 13, 1, 0, 1, '2023-03-04 11:20:00', '2023-03-04 11:20:00'),
  (5, '1990-12-12', 'M', NULL, 14, 0, 0, 1, '2023-03-05 11:20:00', '2023-03-05 11:20:00');
INSERT INTO `patient_identifier` (`patient_id`, `patient_identifier_type_id`, `value`, `source_info`, `deleted`, `unique_row_string`, `last_modified_date`, `created_date`) VALUES
  (1, 1, '0012345', 'ACTIVE', 0, '1-1-ACTIVE', '2023-03-01 11:20:00', '2023-03-01 11:20:00'),
  (1, 2, '4505577104', 'ACTIVE', 0, '1-2-ACTIVE', '2023-03-01 11:20:00', '2023-03-01 11:20:00'),
  (1, 1, '0011111', 'DEL BY PATIENT ID 1[2023-02-28 10:00:00]', 1, '1-1-DEL BY PATIENT ID 1[2023-02-28 10:00:00]-0011111', '2023-03-01 11:20:00', '2023-03-01 11:20:00'),
  (2, 1, '0067890', 'ACTIVE', 0, '2-1-ACTIVE', '2023-03-02 11:20:00', '2023-03-02 11:20:00'),
  (3, 1, '0012346', 'ACTIVE', 0, '3-1-ACTIVE', '2023-03-03 11:20:00', '2023-03-03 11:20:00'),
  (4, 1, '0099999', 'ACTIVE', 0, '4-1-ACTIVE', '2023-03-04 11:20:00', '2023-03-04 11:20:00'),
  (5, 1, '0054321', 'ACTIVE', 0, '5-1-ACTIVE', '2023-03-05 11:20:00', '2023-03-05 11:20:00'),
  (5, 2, '9434765919', 'ACTIVE', 0, '5-2-ACTIVE', '2023-03-05 11:20:00', '2023-03-05 11:20:00');

-- Events: the CVI module and OphGeneric (m185401), with their e-sign and attachment element types.
INSERT INTO `episode_status` (`id`, `name`, `order`) VALUES
  (1, 'New', 1), (2, 'Under investigation', 2), (3, 'Listed/booked', 3), (4, 'Post-op', 4), (5, 'Follow-up', 5), (6, 'Discharged', 6);
INSERT INTO `event_group` (`id`, `name`, `code`) VALUES (1, 'Clinical events', 'Ci'), (2, 'Communication events', 'Co');
INSERT INTO `event_type` (`id`, `name`, `event_group_id`, `class_name`, `can_be_created_manually`, `show_attachments`) VALUES
  (1, 'CVI', 2, 'OphCoCvi', 1, 0),
  (2, 'Device Information', 1, 'OphGeneric', 0, 1);
INSERT INTO `element_type` (`id`, `name`, `class_name`, `event_type_id`, `display_order`, `default`, `required`) VALUES
  (1, 'E-Sign', 'OEModule\\OphCoCvi\\models\\Element_OphCoCvi_Esign', 1, 60, 1, 1),
  (2, 'Attachment', 'OEModule\\OphGeneric\\models\\Attachment', 2, 1, 1, 1),
  (3, 'Comments', 'OEModule\\OphGeneric\\models\\Comments', 2, 10, 1, 1);

INSERT INTO `episode` (`id`, `patient_id`, `firm_id`, `start_date`, `episode_status_id`, `last_modified_user_id`, `created_user_id`, `last_modified_date`, `created_date`) VALUES
  (1, 1, 1, '2024-01-15 09:30:00', 1, 3, 3, '2024-01-15 09:30:00', '2024-01-15 09:30:00');
INSERT INTO `event` (`id`, `episode_id`, `created_user_id`, `event_type_id`, `last_modified_user_id`, `last_modified_date`, `created_date`, `event_date`, `info`, `institution_id`, `site_id`, `firm_id`) VALUES
  (1, 1, 3, 1, 3, '2024-01-15 09:31:00', '2024-01-15 09:31:00', '2024-01-15 00:00:00', 'Incomplete/Missing: Clinical, Consent signature', 1, 1, 1);
INSERT INTO `et_ophcocvi_esign` (`id`, `event_id`, `last_modified_user_id`, `created_user_id`, `last_modified_date`, `created_date`) VALUES
  (1, 1, 3, 3, '2024-01-15 09:31:00', '2024-01-15 09:31:00');
INSERT INTO `unique_codes` (`id`, `code`, `active`, `last_modified_date`, `created_date`) VALUES
  (1, 'ABC234', 1, '2024-01-15 09:31:00', '2024-01-15 09:31:00'),
  (2, 'QRS789', 1, '2024-01-15 09:31:00', '2024-01-15 09:31:00');
INSERT INTO `unique_codes_mapping` (`id`, `event_id`, `unique_code_id`, `user_id`, `last_modified_user_id`, `created_user_id`, `last_modified_date`, `created_date`) VALUES
  (1, 1, 1, NULL, 3, 3, '2024-01-15 09:31:00', '2024-01-15 09:31:00');

-- The Api module's seed (m181219_152028_init_api_migration/*.csv, reference 11).
INSERT INTO `mime_type` (`mime_type`) VALUES
  ('application/dicom'), ('application/json'), ('application/octet-stream'), ('application/pdf'), ('application/xml'),
  ('application/x-www-form-urlencoded'), ('multipart/form-data'), ('text/plain'), ('image/jpg'), ('image/jpeg'), ('image/png');
INSERT INTO `attachment_type` (`attachment_type`, `title_full`, `title_short`, `title_abbreviated`, `dicom_modality_code`) VALUES
  ('NONE', 'No attachment type', 'None', 'N/A', ''),
  ('dicom_header', 'dicom header', 'dicom header', 'dicom header', ''),
  ('Biometry Report', 'Biometry Report', 'Biometry Report', 'Biometry Report', 'BR');
INSERT INTO `body_site_type` (`body_site_snomed_type`, `title_full`, `title_short`, `title_abbreviated`) VALUES
  ('18944008', 'Right eye', 'Right', 'R'), ('8966001', 'Left eye', 'Left', 'L'), ('40638003', 'Both eyes', 'Both', 'B');
INSERT INTO `request_queue` (`request_queue`, `maximum_active_threads`, `busy_yield_ms`, `idle_yield_ms`) VALUES
  ('dicom_queue', 5, 1000, 1000);
INSERT INTO `routine_library` (`routine_name`, `hash_code`) VALUES
  ('DICOM_SEED', NULL), ('PAS_API', NULL), ('create_biometry_event', NULL);
INSERT INTO `request_type` (`request_type`, `title_full`, `title_short`, `default_routine_name`, `default_request_queue`) VALUES
  ('dicom_request', 'dicom request full', 'dicom request', 'DICOM_SEED', 'dicom_queue');

-- Device filing: OphGeneric's element types and subtypes, and their
-- attachment types (OphGeneric m185401, m185653, m190509, m201007, m191021 .. m220817).
INSERT INTO `element_type` (`id`, `name`, `class_name`, `event_type_id`, `display_order`, `default`, `required`) VALUES
  (4, 'Assessment', 'OEModule\\OphGeneric\\models\\Assessment', 2, 20, 1, 0),
  (5, 'HFA', 'OEModule\\OphGeneric\\models\\HFA', 2, 30, 1, 0),
  (6, 'Device Information', 'OEModule\\OphGeneric\\models\\DeviceInformation', 2, 700, 1, 1);
INSERT INTO `event_subtype` (`event_subtype`, `dicom_modality_code`, `icon_name`, `display_name`) VALUES
  ('OCT', 'OAM', 'i-ImOCT', 'OCT'),
  ('OCT Images', 'OAM', 'i-ImOCT', 'OCT Images'),
  ('Visual Field Images', 'VF', 'i-InVisualField', 'Visual Field Images'),
  ('Fundus Images', 'FD', 'i-ImPhoto', 'Fundus Images'),
  ('Topography Images', 'TG', 'i-InCornealTopography', 'Topography Images'),
  ('B SCAN Images', 'BSCAN', 'i-ImUltraSound', 'B SCAN Images'),
  ('Clinical Photograph Colour', 'CP', 'i-ImPhoto', 'Clinical Photograph Colour');
INSERT INTO `attachment_type` (`attachment_type`, `title_full`, `title_short`, `title_abbreviated`, `dicom_modality_code`) VALUES
  ('OCT Images', 'OCT Images', 'OCT Images', 'OCT Images', 'OCT Images'),
  ('Visual Field Images', 'Visual Field Images', 'Visual Field Images', 'Visual Field Images', 'VF'),
  ('Fundus Images', 'Fundus Images', 'Fundus Images', 'Fundus Images', 'FD'),
  ('Topography Images', 'Topography Images', 'Topography Images', 'Topography Images', 'TG'),
  ('B SCAN Images', 'B SCAN Images', 'B SCAN Images', 'B SCAN Images', 'B SCAN Images'),
  ('Clinical Photograph Colour', 'Clinical Photograph Colour', 'Clinical Photograph Colour', 'Clinical Photograph Colour', 'CP');
INSERT INTO `patient_statistic_type` (`mnem`, `title`) VALUES ('md', 'Mean Deviation'), ('mdr', 'Mean Deviation Rate'), ('vfi', 'Visual Field Index');

-- Demographics lookups as m130913_000000_consolidation seeds them (address types, the United Kingdom,
-- the ethnic groups), and the PASAPI settings' metadata (m210705, m230309).
INSERT INTO `address_type` (`id`, `name`) VALUES (1, 'Reply to'), (2, 'Home'), (3, 'Correspondence'), (4, 'Transport');
INSERT INTO `country` (`id`, `code`, `name`) VALUES (1, 'GB', 'United Kingdom');
INSERT INTO `ethnic_group` (`id`, `name`, `code`, `display_order`) VALUES
  (1, 'White - British', 'A', 10), (2, 'White - Irish', 'B', 20), (3, 'White - Any other background', 'C', 30),
  (17, 'Not Stated', 'Z', 170);
INSERT INTO `setting_metadata` (`element_type_id`, `field_type_id`, `key`, `name`, `description`, `group_id`, `data`, `default_value`) VALUES
  (NULL, 2, 'pasapi_automerge', 'Automatic patient merge strategy', '', 1, 'a:3:{i:0;s:11:"Never merge";i:1;s:29:"Merge if DOB and gender match";i:2;s:12:"Always merge";}', '1'),
  (NULL, 3, 'validate_PASAPI_phone_number', 'Validate PASAPI phone numbers', '', 1, 'a:2:{s:2:"on";s:2:"On";s:3:"off";s:3:"Off";}', 'on');

SET foreign_key_checks = 1;
