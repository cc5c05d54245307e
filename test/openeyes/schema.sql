-- An OpenEyes-shaped MariaDB/MySQL schema for the tests of DATABASE_SCHEMA=openeyes.
--
-- It follows OpenEyes release v6.8.0 (github.com/AppertaFoundation/openeyes, tag v6.8.0): every table
-- the service reads or writes (reference section 10) in the shape that replaying protected/migrations
-- and protected/modules/*/migrations up to that tag leaves it, plus the few tables their foreign keys
-- need. The migration that gives a column its final shape is named beside it where the shape is a trap
-- (reference 10.5). Written from those migrations; no OpenEyes code or data is copied.
--
-- What makes it OpenEyes-shaped rather than the service's own schema:
-- - InnoDB, charset utf8 (utf8mb3) / utf8_unicode_ci, contact names utf8_general_ci (m200803);
-- - int(10) unsigned ids on tables of the 2013 consolidation (m130913), signed int(11) ids on tables
--   created with createOETable(..., 'pk') and createTable('pk');
-- - audit columns defaulting to 1900-01-01 (consolidation) or 1901-01-01 (createOETable);
-- - moved and dropped columns: no patient.hos_num/nhs_num/nhs_num_status_id/pas_key/mobile_telephone,
--   no event.pas_visit_id, no user.username/password/salt/active, no element_type.parent_element_type_id;
-- - NOT NULL columns without a default (event.event_date, event.institution_id, event.created_user_id,
--   ophcocvi_signature.signatory_*, protected_file.mimetype/size, attachment_data.system_only_managed,
--   attachment_type.dicom_modality_code, display_order.auto_increment_start, site.fax/telephone, ...);
-- - unique_row_string written by the application (m220211), foreign keys, the _version twins;
-- - columns the service never uses.
--
-- Foreign keys to tables outside the service's reach (gp, practice, disorder, worklist_patient, ...)
-- are left out with those tables; their columns stay, nullable as in OpenEyes. Stub tables are kept where
-- a NOT NULL column or a default points at a row (event_group, episode_status, authitem_type, ...).
-- Run with foreign_key_checks off, as the consolidation migration does: the user table and the audit
-- columns of every table reference each other.

SET foreign_key_checks = 0;

-- --- users, contacts, institutions, sites (consolidation, versioned) ------------------------------------

CREATE TABLE `contact_label` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `name` varchar(255) NOT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `is_private` tinyint(1) unsigned NOT NULL DEFAULT '0',
  `active` tinyint(1) NOT NULL DEFAULT '1',
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `contact` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `nick_name` varchar(80) DEFAULT NULL,
  `primary_phone` varchar(20) DEFAULT NULL,
  `mobile_phone` varchar(50) DEFAULT NULL,
  `title` varchar(20) DEFAULT NULL,
  -- m170331 .. m200803: nullable, and utf8_general_ci (so Zoë = Zoe but Ø <> O).
  `first_name` varchar(300) CHARACTER SET utf8 COLLATE utf8_general_ci DEFAULT NULL,
  `last_name` varchar(100) CHARACTER SET utf8 COLLATE utf8_general_ci DEFAULT NULL,
  `maiden_name` varchar(100) CHARACTER SET utf8 COLLATE utf8_general_ci DEFAULT NULL,
  `qualifications` varchar(200) DEFAULT NULL,
  `email` varchar(255) DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `contact_label_id` int(10) unsigned DEFAULT NULL,
  `active` tinyint(1) DEFAULT '1',
  `national_code` varchar(25) DEFAULT NULL,
  `fax` varchar(25) DEFAULT NULL,
  `created_institution_id` int(11) unsigned DEFAULT NULL,
  PRIMARY KEY (`id`),
  KEY `contact_last_modified_user_id_fk` (`last_modified_user_id`),
  KEY `contact_created_user_id_fk` (`created_user_id`),
  KEY `contact_last_name_key` (`last_name`),
  KEY `contact_contact_label_id_fk` (`contact_label_id`),
  KEY `contact_created_institution_id_fk` (`created_institution_id`),
  CONSTRAINT `contact_contact_label_id_fk` FOREIGN KEY (`contact_label_id`) REFERENCES `contact_label` (`id`),
  CONSTRAINT `contact_created_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `contact_last_modified_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `contact_created_institution_id_fk` FOREIGN KEY (`created_institution_id`) REFERENCES `institution` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `user` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `first_name` varchar(40) NOT NULL,
  `last_name` varchar(40) NOT NULL,
  `email` varchar(80) NOT NULL,
  `global_firm_rights` tinyint(1) unsigned NOT NULL DEFAULT '0',
  `title` varchar(40) NOT NULL,
  `role` varchar(255) NOT NULL,
  `code` varchar(255) DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `last_firm_id` int(11) unsigned DEFAULT NULL,
  `contact_id` int(10) unsigned DEFAULT NULL,
  `last_site_id` int(10) unsigned DEFAULT NULL,
  `is_consultant` tinyint(1) unsigned NOT NULL DEFAULT '0',
  `is_surgeon` tinyint(1) unsigned NOT NULL DEFAULT '0',
  `has_selected_firms` tinyint(1) unsigned NOT NULL,
  `doctor_grade_id` int(3) DEFAULT NULL,
  `registration_code` varchar(250) DEFAULT NULL,
  `signature_file_id` int(10) unsigned DEFAULT NULL,
  `correspondence_sign_off_user_id` int(10) unsigned DEFAULT NULL,
  -- username, password, salt, active and the password_* columns moved to user_authentication (m200517).
  PRIMARY KEY (`id`),
  KEY `user_last_modified_user_id_fk` (`last_modified_user_id`),
  KEY `user_created_user_id_fk` (`created_user_id`),
  KEY `user_last_firm_id_fk` (`last_firm_id`),
  KEY `user_contact_id_fk` (`contact_id`),
  KEY `user_last_site_id_fk` (`last_site_id`),
  KEY `signature_file_fk` (`signature_file_id`),
  CONSTRAINT `user_contact_id_fk` FOREIGN KEY (`contact_id`) REFERENCES `contact` (`id`),
  CONSTRAINT `user_created_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `user_last_firm_id_fk` FOREIGN KEY (`last_firm_id`) REFERENCES `firm` (`id`),
  CONSTRAINT `user_last_modified_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `user_last_site_id_fk` FOREIGN KEY (`last_site_id`) REFERENCES `site` (`id`),
  CONSTRAINT `signature_file_fk` FOREIGN KEY (`signature_file_id`) REFERENCES `protected_file` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `institution` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `name` varchar(255) NOT NULL,
  `remote_id` varchar(10) NOT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `short_name` varchar(64) NOT NULL,
  `contact_id` int(10) unsigned NOT NULL,
  `source_id` int(10) unsigned DEFAULT NULL,
  `active` tinyint(1) NOT NULL DEFAULT '1',
  `logo_id` int(11) DEFAULT NULL,
  `any_number_search_allowed` tinyint(1) DEFAULT NULL,
  `first_used_site_id` int(10) unsigned DEFAULT NULL,
  `pas_key` varchar(10) DEFAULT NULL,
  PRIMARY KEY (`id`),
  KEY `institution_last_modified_user_id_fk` (`last_modified_user_id`),
  KEY `institution_created_user_id_fk` (`created_user_id`),
  KEY `institution_contact_id_fk` (`contact_id`),
  KEY `institution_first_used_site_id_fk` (`first_used_site_id`),
  CONSTRAINT `institution_contact_id_fk` FOREIGN KEY (`contact_id`) REFERENCES `contact` (`id`),
  CONSTRAINT `institution_created_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `institution_last_modified_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `institution_first_used_site_id_fk` FOREIGN KEY (`first_used_site_id`) REFERENCES `site` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `site` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `name` varchar(255) NOT NULL,
  `remote_id` varchar(10) NOT NULL,
  `short_name` varchar(255) NOT NULL,
  `location_code` varchar(5) DEFAULT NULL,
  `fax` varchar(255) NOT NULL,
  `telephone` varchar(255) NOT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `institution_id` int(10) unsigned NOT NULL DEFAULT '1',
  `location` varchar(64) DEFAULT NULL,
  `contact_id` int(10) unsigned NOT NULL,
  `replyto_contact_id` int(10) unsigned DEFAULT NULL,
  `source_id` int(10) unsigned DEFAULT NULL,
  `active` tinyint(1) NOT NULL DEFAULT '1',
  `logo_id` int(11) DEFAULT NULL,
  `fp_10_code` varchar(25) DEFAULT NULL,
  PRIMARY KEY (`id`),
  -- m200311: the target of patient_identifier_type (institution_id, site_id).
  UNIQUE KEY `uk_site_institution_index` (`id`,`institution_id`),
  KEY `site_last_modified_user_id_fk` (`last_modified_user_id`),
  KEY `site_created_user_id_fk` (`created_user_id`),
  KEY `site_institution_id_fk` (`institution_id`),
  KEY `site_contact_id_fk` (`contact_id`),
  KEY `site_replyto_contact_id_fk` (`replyto_contact_id`),
  CONSTRAINT `site_contact_id_fk` FOREIGN KEY (`contact_id`) REFERENCES `contact` (`id`),
  CONSTRAINT `site_created_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `site_institution_id_fk` FOREIGN KEY (`institution_id`) REFERENCES `institution` (`id`),
  CONSTRAINT `site_last_modified_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `site_replyto_contact_id_fk` FOREIGN KEY (`replyto_contact_id`) REFERENCES `contact` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `service_subspecialty_assignment` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `service_id` int(10) unsigned NOT NULL,
  `subspecialty_id` int(10) unsigned NOT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  PRIMARY KEY (`id`),
  UNIQUE KEY `service_subspecialty_assignment_service_id_subspecialty_id` (`service_id`, `subspecialty_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `firm` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `service_subspecialty_assignment_id` int(10) unsigned DEFAULT NULL,
  `pas_code` varchar(4) DEFAULT NULL,
  `name` varchar(40) NOT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `consultant_id` int(10) unsigned DEFAULT NULL,
  `active` tinyint(1) NOT NULL DEFAULT '1',
  PRIMARY KEY (`id`),
  KEY `firm_consultant_id_fk` (`consultant_id`),
  CONSTRAINT `firm_consultant_id_fk` FOREIGN KEY (`consultant_id`) REFERENCES `user` (`id`),
  CONSTRAINT `firm_created_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `firm_last_modified_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

-- --- authentication and RBAC (m131104, m200517) ---------------------------------------------------------

CREATE TABLE `user_authentication_method` (
  `code` varchar(64) NOT NULL,
  PRIMARY KEY (`code`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `institution_authentication` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `site_id` int(10) unsigned DEFAULT NULL,
  `institution_id` int(10) unsigned NOT NULL,
  `user_authentication_method` varchar(64) NOT NULL,
  `ldap_config_id` int(11) DEFAULT NULL,
  `description` varchar(255) NOT NULL,
  `order` int(8) NOT NULL DEFAULT '0',
  `ldap_json` text DEFAULT NULL,
  `active` tinyint(1) NOT NULL DEFAULT '1',
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`),
  CONSTRAINT `inst_auth_site_fk` FOREIGN KEY (`site_id`) REFERENCES `site` (`id`),
  CONSTRAINT `inst_auth_inst_fk` FOREIGN KEY (`institution_id`) REFERENCES `institution` (`id`),
  CONSTRAINT `inst_auth_log_code_fk` FOREIGN KEY (`user_authentication_method`) REFERENCES `user_authentication_method` (`code`),
  CONSTRAINT `inst_auth_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `inst_auth_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `user_authentication` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  -- NULL: a "special" account (api, docman_user); the special users of m200517 got password_salt ''.
  `institution_authentication_id` int(11) DEFAULT NULL,
  `user_id` int(10) unsigned NOT NULL,
  `username` varchar(40) NOT NULL,
  `pincode` varchar(255) DEFAULT NULL,
  `password_hash` varchar(255) DEFAULT NULL,
  `password_salt` varchar(10) DEFAULT NULL,
  `password_softlocked_until` datetime DEFAULT '2020-05-17 00:00:00',
  `password_last_changed_date` datetime DEFAULT '2020-05-17 00:00:00',
  `password_failed_tries` int(10) DEFAULT '0',
  `password_status` varchar(10) DEFAULT 'current',
  `last_successful_login_date` datetime DEFAULT NULL,
  `active` tinyint(1) NOT NULL DEFAULT '1',
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`),
  CONSTRAINT `user_auth_user_fk` FOREIGN KEY (`user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `user_auth_inst_auth_fk` FOREIGN KEY (`institution_authentication_id`) REFERENCES `institution_authentication` (`id`),
  CONSTRAINT `user_auth_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `user_auth_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `authitem_type` (
  `id` tinyint(3) unsigned NOT NULL,
  `name` varchar(85) NOT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `name` (`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `authitem` (
  `name` varchar(64) NOT NULL,
  -- m131104: tinyint unsigned with a foreign key to authitem_type.
  `type` tinyint(3) unsigned NOT NULL,
  `description` text DEFAULT NULL,
  `bizrule` text DEFAULT NULL,
  `data` text DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  PRIMARY KEY (`name`),
  KEY `authitem_type_fk` (`type`),
  CONSTRAINT `authitem_type_fk` FOREIGN KEY (`type`) REFERENCES `authitem_type` (`id`),
  CONSTRAINT `authitem_created_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `authitem_last_modified_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `authitemchild` (
  `parent` varchar(64) NOT NULL,
  `child` varchar(64) NOT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  PRIMARY KEY (`parent`,`child`),
  KEY `child` (`child`),
  CONSTRAINT `authitemchild_parent_fk` FOREIGN KEY (`parent`) REFERENCES `authitem` (`name`),
  CONSTRAINT `authitemchild_child_fk` FOREIGN KEY (`child`) REFERENCES `authitem` (`name`),
  CONSTRAINT `authitemchild_created_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `authitemchild_last_modified_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `authassignment` (
  `itemname` varchar(64) NOT NULL DEFAULT '',
  -- m131104: the user id as an integer with a foreign key, not Yii's varchar(64).
  `userid` int(10) unsigned NOT NULL,
  `bizrule` text DEFAULT NULL,
  `data` text DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  PRIMARY KEY (`itemname`,`userid`),
  KEY `authassignment_userid_fk` (`userid`),
  CONSTRAINT `authassignment_itemname_fk` FOREIGN KEY (`itemname`) REFERENCES `authitem` (`name`),
  CONSTRAINT `authassignment_userid_fk` FOREIGN KEY (`userid`) REFERENCES `user` (`id`),
  CONSTRAINT `authassignment_created_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `authassignment_last_modified_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

-- --- settings (consolidation, m140811, m200519, m201216, m221109) ---------------------------------------

CREATE TABLE `setting_field_type` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `name` varchar(64) NOT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `setting_group` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `name` varchar(40) DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`),
  UNIQUE KEY `name` (`name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `setting_metadata` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `element_type_id` int(10) unsigned DEFAULT NULL,
  `display_order` tinyint(3) unsigned DEFAULT '0',
  `field_type_id` int(10) unsigned NOT NULL,
  `key` varchar(64) NOT NULL,
  `name` varchar(100) DEFAULT NULL,
  `description` text NOT NULL,
  `group_id` int(11) NOT NULL,
  `data` varchar(16384) DEFAULT NULL,
  `default_value` text DEFAULT NULL,
  `lowest_setting_level` varchar(15) DEFAULT 'INSTALLATION',
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  PRIMARY KEY (`id`),
  UNIQUE KEY `setting_metadata_key_IDX` (`element_type_id`,`key`),
  KEY `setting_metadata_field_type_id_fk` (`field_type_id`),
  CONSTRAINT `setting_metadata_element_type_id_fk` FOREIGN KEY (`element_type_id`) REFERENCES `element_type` (`id`),
  CONSTRAINT `setting_metadata_field_type_id_fk` FOREIGN KEY (`field_type_id`) REFERENCES `setting_field_type` (`id`),
  CONSTRAINT `fk_setting_group` FOREIGN KEY (`group_id`) REFERENCES `setting_group` (`id`),
  CONSTRAINT `setting_metadata_created_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `setting_metadata_last_modified_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `setting_installation` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `element_type_id` int(10) unsigned DEFAULT NULL,
  `key` varchar(64) NOT NULL,
  `value` text DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  PRIMARY KEY (`id`),
  KEY `setting_installation_element_type_id_fk` (`element_type_id`),
  CONSTRAINT `setting_installation_element_type_id_fk` FOREIGN KEY (`element_type_id`) REFERENCES `element_type` (`id`),
  CONSTRAINT `setting_installation_created_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `setting_installation_last_modified_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `setting_institution` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `institution_id` int(10) unsigned NOT NULL,
  `element_type_id` int(10) unsigned DEFAULT NULL,
  `key` varchar(64) NOT NULL,
  `value` text DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  PRIMARY KEY (`id`),
  KEY `setting_institution_institution_id_fk` (`institution_id`),
  CONSTRAINT `setting_institution_institution_id_fk` FOREIGN KEY (`institution_id`) REFERENCES `institution` (`id`),
  CONSTRAINT `setting_institution_element_type_id_fk` FOREIGN KEY (`element_type_id`) REFERENCES `element_type` (`id`),
  CONSTRAINT `setting_institution_created_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `setting_institution_last_modified_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `setting_site` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `site_id` int(10) unsigned NOT NULL,
  `element_type_id` int(10) unsigned DEFAULT NULL,
  `key` varchar(64) NOT NULL,
  `value` text DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  PRIMARY KEY (`id`),
  KEY `setting_site_site_id_fk` (`site_id`),
  CONSTRAINT `setting_site_site_id_fk` FOREIGN KEY (`site_id`) REFERENCES `site` (`id`),
  CONSTRAINT `setting_site_element_type_id_fk` FOREIGN KEY (`element_type_id`) REFERENCES `element_type` (`id`),
  CONSTRAINT `setting_site_created_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `setting_site_last_modified_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

-- --- patients and identifiers (consolidation, m200311, m200326, m220211, m220724) -----------------------

CREATE TABLE `patient` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `dob` date DEFAULT NULL,
  `gender` varchar(1) DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `gp_id` int(10) unsigned DEFAULT NULL,
  `date_of_death` date DEFAULT NULL,
  `practice_id` int(10) unsigned DEFAULT NULL,
  `ethnic_group_id` int(10) unsigned DEFAULT NULL,
  `contact_id` int(10) unsigned NOT NULL,
  `archive_no_allergies_date` datetime DEFAULT NULL,
  `archive_no_family_history_date` datetime DEFAULT NULL,
  `archive_no_risks_date` datetime DEFAULT NULL,
  `deleted` tinyint(1) unsigned NOT NULL DEFAULT '0',
  `is_deceased` tinyint(4) NOT NULL DEFAULT '0',
  `is_local` tinyint(1) unsigned DEFAULT NULL,
  `patient_source` tinyint(1) unsigned NOT NULL DEFAULT '0',
  `primary_institution_id` int(10) unsigned DEFAULT NULL,
  -- hos_num, nhs_num, nhs_num_status_id (m200914), pas_key (m200501), mobile_telephone (m210526): gone.
  PRIMARY KEY (`id`),
  KEY `patient_last_modified_user_id_fk` (`last_modified_user_id`),
  KEY `patient_created_user_id_fk` (`created_user_id`),
  KEY `patient_gp_id_fk` (`gp_id`),
  KEY `patient_practice_id_fk` (`practice_id`),
  KEY `patient_ethnic_group_id_fk` (`ethnic_group_id`),
  KEY `patient_contact_id_fk` (`contact_id`),
  CONSTRAINT `patient_contact_id_fk` FOREIGN KEY (`contact_id`) REFERENCES `contact` (`id`),
  CONSTRAINT `patient_created_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `patient_last_modified_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `patient_primary_institution_id_fk` FOREIGN KEY (`primary_institution_id`) REFERENCES `institution` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `patient_identifier_type` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `usage_type` varchar(255) DEFAULT NULL,
  `short_title` varchar(255) NOT NULL,
  `long_title` varchar(255) DEFAULT NULL,
  `institution_id` int(10) unsigned NOT NULL,
  `site_id` int(10) unsigned DEFAULT NULL,
  `validate_regex` varchar(255) NOT NULL,
  `value_display_prefix` varchar(255) DEFAULT NULL,
  `value_display_suffix` varchar(255) DEFAULT NULL,
  `pad` varchar(255) DEFAULT NULL,
  `validation_example` varchar(255) DEFAULT NULL,
  `pas_api` text DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `spacing_rule` varchar(255) DEFAULT NULL,
  -- m220211: written by beforeSave() as <usage_type>-<institution_id>-<site_id or 0>.
  `unique_row_string` varchar(255) NOT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uk_unique_row_str` (`unique_row_string`),
  KEY `fk_patient_identifier_type_institution` (`institution_id`),
  KEY `fk_patient_identifier_type_site` (`institution_id`,`site_id`),
  CONSTRAINT `fk_patient_identifier_type_institution` FOREIGN KEY (`institution_id`) REFERENCES `institution` (`id`),
  CONSTRAINT `fk_patient_identifier_type_site` FOREIGN KEY (`institution_id`, `site_id`) REFERENCES `site` (`institution_id`, `id`),
  CONSTRAINT `patient_identifier_type_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `patient_identifier_type_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `patient_identifier_status` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `description` varchar(255) DEFAULT NULL,
  `patient_identifier_type_id` int(11) NOT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uk_patient_status_patient_identifier_type` (`id`,`patient_identifier_type_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `patient_identifier` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `patient_id` int(10) unsigned NOT NULL,
  `patient_identifier_type_id` int(11) NOT NULL,
  `value` varchar(255) NOT NULL,
  `source_info` varchar(255) NOT NULL DEFAULT 'ACTIVE',
  `deleted` tinyint(1) unsigned NOT NULL DEFAULT '0',
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `patient_identifier_status_id` int(11) DEFAULT NULL,
  -- m220211: <patient_id>-<type_id>-ACTIVE, or <patient_id>-<type_id>-<source_info>-<value> once deleted.
  `unique_row_string` varchar(255) NOT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `uk_patient_value_patient_type_id` (`patient_identifier_type_id`,`value`,`source_info`),
  UNIQUE KEY `uk_patient_id_type_value` (`patient_id`,`patient_identifier_type_id`,`value`),
  UNIQUE KEY `uk_patient_identifier_unique_row_str` (`unique_row_string`),
  CONSTRAINT `fk_patient_identifier_patient` FOREIGN KEY (`patient_id`) REFERENCES `patient` (`id`),
  CONSTRAINT `fk_patient_identifier_patient_identifier_type` FOREIGN KEY (`patient_identifier_type_id`) REFERENCES `patient_identifier_type` (`id`),
  CONSTRAINT `patient_identifier_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `patient_identifier_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `patient_identifier_type_display_order` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `institution_id` int(10) unsigned NOT NULL,
  -- Created after m200223 gave display_order columns a default, so this one has none.
  `display_order` int(10) unsigned NOT NULL,
  `patient_identifier_type_id` int(11) NOT NULL,
  `site_id` int(10) unsigned DEFAULT NULL,
  `search_protocol_prefix` varchar(100) DEFAULT NULL,
  `searchable` tinyint(1) NOT NULL DEFAULT '1',
  `necessity` varchar(20) NOT NULL DEFAULT 'hidden',
  `status_necessity` varchar(20) NOT NULL DEFAULT 'hidden',
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  -- m220211: <patient_identifier_type_id>-<institution_id>-<site_id or 0>.
  `unique_row_string` varchar(255) NOT NULL,
  `auto_increment` tinyint(1) DEFAULT '0',
  `auto_increment_start` int(10) unsigned NOT NULL,
  `only_editable_by_admin` tinyint(1) DEFAULT '0',
  PRIMARY KEY (`id`),
  UNIQUE KEY `uk_unique_row_str` (`unique_row_string`),
  CONSTRAINT `fk_patient_identifier_display_order_institution` FOREIGN KEY (`institution_id`) REFERENCES `institution` (`id`),
  CONSTRAINT `fk_patient_identifier_display_order_site` FOREIGN KEY (`site_id`) REFERENCES `site` (`id`),
  CONSTRAINT `fk_patient_identifier_display_order_patient_ID_type` FOREIGN KEY (`patient_identifier_type_id`) REFERENCES `patient_identifier_type` (`id`),
  CONSTRAINT `patient_identifier_type_display_order_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `patient_identifier_type_display_order_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

-- --- events and elements (consolidation, m140523, m190321, m200430, m210728) ----------------------------

CREATE TABLE `event_group` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `name` varchar(64) NOT NULL,
  `code` varchar(2) NOT NULL,
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `event_type` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `name` varchar(40) NOT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `event_group_id` int(10) unsigned NOT NULL,
  `class_name` varchar(200) NOT NULL,
  `support_services` tinyint(1) unsigned NOT NULL DEFAULT '0',
  `parent_event_type_id` int(10) unsigned DEFAULT NULL,
  `parent_id` int(10) unsigned DEFAULT NULL,
  `rbac_operation_suffix` varchar(100) CHARACTER SET utf8 COLLATE utf8_bin DEFAULT NULL,
  `is_printable` tinyint(1) NOT NULL DEFAULT '1',
  `show_attachments` tinyint(1) DEFAULT '0',
  `can_be_created_manually` tinyint(1) NOT NULL DEFAULT '1',
  `custom_hint_text` text DEFAULT NULL,
  `hint_position` varchar(10) DEFAULT 'BOTTOM',
  `template_class_name` varchar(255) DEFAULT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `name` (`name`),
  KEY `event_type_event_group_id_fk` (`event_group_id`),
  KEY `event_type_parent_id_fk` (`parent_id`),
  CONSTRAINT `event_type_event_group_id_fk` FOREIGN KEY (`event_group_id`) REFERENCES `event_group` (`id`),
  CONSTRAINT `event_type_parent_id_fk` FOREIGN KEY (`parent_id`) REFERENCES `event_type` (`id`),
  CONSTRAINT `event_type_created_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `event_type_last_modified_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `element_type` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `name` varchar(255) NOT NULL,
  `class_name` varchar(255) NOT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `event_type_id` int(10) unsigned NOT NULL DEFAULT '1',
  `display_order` int(10) unsigned NOT NULL DEFAULT '1',
  `default` tinyint(1) unsigned NOT NULL DEFAULT '1',
  `required` tinyint(1) DEFAULT NULL,
  `tile_size` int(2) unsigned DEFAULT NULL,
  `element_group_id` int(11) DEFAULT NULL,
  `custom_hint_text` text DEFAULT NULL,
  -- parent_element_type_id dropped (m180626); no table name column: class names map to tables in code.
  PRIMARY KEY (`id`),
  KEY `element_type_event_type_id_fk` (`event_type_id`),
  CONSTRAINT `element_type_event_type_id_fk` FOREIGN KEY (`event_type_id`) REFERENCES `event_type` (`id`),
  CONSTRAINT `element_type_created_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `element_type_last_modified_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `episode_status` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `name` varchar(64) NOT NULL DEFAULT '',
  `key` varchar(25) DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `order` int(10) unsigned NOT NULL DEFAULT '0',
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `episode` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `patient_id` int(10) unsigned NOT NULL,
  `firm_id` int(10) unsigned DEFAULT NULL,
  `start_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `end_date` datetime DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  -- Defaults to status 1: a new episode needs that episode_status row.
  `episode_status_id` int(10) unsigned NOT NULL DEFAULT '1',
  `legacy` tinyint(1) unsigned DEFAULT '0',
  `deleted` int(10) unsigned NOT NULL DEFAULT '0',
  `eye_id` int(10) unsigned DEFAULT NULL,
  `disorder_id` bigint(20) unsigned DEFAULT NULL,
  `support_services` tinyint(1) unsigned NOT NULL DEFAULT '0',
  `change_tracker` tinyint(1) DEFAULT NULL,
  `disorder_date` varchar(10) DEFAULT NULL,
  `disorder_time` varchar(10) DEFAULT NULL,
  PRIMARY KEY (`id`),
  KEY `episode_1` (`patient_id`),
  KEY `episode_2` (`firm_id`),
  KEY `episode_episode_status_id_fk` (`episode_status_id`),
  CONSTRAINT `episode_1` FOREIGN KEY (`patient_id`) REFERENCES `patient` (`id`),
  CONSTRAINT `episode_2` FOREIGN KEY (`firm_id`) REFERENCES `firm` (`id`),
  CONSTRAINT `episode_episode_status_id_fk` FOREIGN KEY (`episode_status_id`) REFERENCES `episode_status` (`id`),
  CONSTRAINT `episode_created_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `episode_last_modified_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `event` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `episode_id` int(10) unsigned DEFAULT NULL,
  -- NOT NULL without a default: the spec's user_id of an event.
  `created_user_id` int(10) unsigned NOT NULL,
  `event_type_id` int(10) unsigned NOT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  -- m140523: NOT NULL without a default.
  `event_date` datetime NOT NULL,
  `info` varchar(1024) DEFAULT NULL,
  `deleted` tinyint(1) unsigned NOT NULL DEFAULT '0',
  `delete_reason` varchar(4096) DEFAULT NULL,
  `delete_pending` tinyint(1) unsigned NOT NULL DEFAULT '0',
  `parent_id` int(10) unsigned DEFAULT NULL,
  `is_automated` tinyint(1) DEFAULT NULL,
  `automated_source` text DEFAULT NULL,
  `sub_type` int(11) DEFAULT NULL,
  `firm_id` int(10) unsigned DEFAULT NULL,
  `worklist_patient_id` int(11) DEFAULT NULL,
  -- m200430: NOT NULL without a default.
  `institution_id` int(10) unsigned NOT NULL,
  `site_id` int(10) unsigned DEFAULT NULL,
  `step_id` int(11) DEFAULT NULL,
  `template_id` int(11) DEFAULT NULL,
  -- pas_visit_id dropped (m190321).
  PRIMARY KEY (`id`),
  KEY `event_1` (`episode_id`),
  KEY `event_2` (`created_user_id`),
  KEY `event_3` (`event_type_id`),
  KEY `event_parent_id_fk` (`parent_id`),
  KEY `event_is_automated` (`is_automated`),
  KEY `event_ibfk_worklist_patient` (`worklist_patient_id`),
  CONSTRAINT `event_1` FOREIGN KEY (`episode_id`) REFERENCES `episode` (`id`),
  CONSTRAINT `event_3` FOREIGN KEY (`event_type_id`) REFERENCES `event_type` (`id`),
  CONSTRAINT `event_created_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `event_last_modified_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `event_parent_id_fk` FOREIGN KEY (`parent_id`) REFERENCES `event` (`id`),
  CONSTRAINT `event_firm_fk` FOREIGN KEY (`firm_id`) REFERENCES `firm` (`id`),
  CONSTRAINT `fk_event_institution` FOREIGN KEY (`institution_id`) REFERENCES `institution` (`id`),
  CONSTRAINT `fk_event_site` FOREIGN KEY (`site_id`) REFERENCES `site` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `unique_codes` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `code` varchar(6) NOT NULL,
  `active` int(1) unsigned NOT NULL DEFAULT '1',
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`),
  CONSTRAINT `unique_codes_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `unique_codes_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `unique_codes_mapping` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `event_id` int(10) unsigned DEFAULT NULL,
  `unique_code_id` int(11) NOT NULL,
  `user_id` int(10) unsigned DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`),
  -- m160711: a code maps to one event and back.
  UNIQUE KEY `unique_code_mapping_event_id_unique` (`event_id`),
  UNIQUE KEY `unique_code_mapping_unique_code_id_unique` (`unique_code_id`),
  CONSTRAINT `unique_code_mapping_event_id_fk` FOREIGN KEY (`event_id`) REFERENCES `event` (`id`),
  CONSTRAINT `unique_code_mapping_uniquecode_id_fk` FOREIGN KEY (`unique_code_id`) REFERENCES `unique_codes` (`id`),
  CONSTRAINT `unique_codes_mapping_user_id_fk` FOREIGN KEY (`user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `unique_codes_mapping_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `unique_codes_mapping_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `et_ophcocvi_esign` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `event_id` int(10) unsigned NOT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`),
  CONSTRAINT `fk_et_ophcocvi_esign_event_id` FOREIGN KEY (`event_id`) REFERENCES `event` (`id`),
  CONSTRAINT `et_ophcocvi_esign_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `et_ophcocvi_esign_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `protected_file` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `uid` varchar(64) NOT NULL,
  `name` varchar(255) NOT NULL,
  `title` varchar(255) DEFAULT NULL,
  `description` varchar(64) NOT NULL DEFAULT '',
  -- NOT NULL without a default.
  `mimetype` varchar(64) NOT NULL,
  `size` varchar(64) NOT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `rotate` int(3) DEFAULT NULL,
  PRIMARY KEY (`id`),
  UNIQUE KEY `asset_uid` (`uid`),
  CONSTRAINT `asset_created_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `asset_last_modified_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `ophcocvi_signature` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `element_id` int(11) NOT NULL,
  `type` tinyint(3) unsigned DEFAULT NULL,
  `signature_file_id` int(10) unsigned DEFAULT NULL,
  `signed_user_id` int(10) unsigned DEFAULT NULL,
  -- NOT NULL without a default; timestamp is unix seconds.
  `signatory_role` varchar(64) NOT NULL,
  `signatory_name` varchar(64) NOT NULL,
  `timestamp` int(11) NOT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `status` tinyint(1) NOT NULL DEFAULT '1',
  `delete_reason` varchar(200) DEFAULT NULL,
  PRIMARY KEY (`id`),
  CONSTRAINT `fk_ophcocvi_signature_etid` FOREIGN KEY (`element_id`) REFERENCES `et_ophcocvi_esign` (`id`),
  CONSTRAINT `fk_ophcocvi_signature_sfile_id` FOREIGN KEY (`signature_file_id`) REFERENCES `protected_file` (`id`),
  CONSTRAINT `fk_ophcocvi_signature_suser_id` FOREIGN KEY (`signed_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `ophcocvi_signature_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `ophcocvi_signature_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

-- m210526 created it with createOETable (datetime audit columns); m230606 added cropped_file_id.
CREATE TABLE `signature_import_log` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `filename` varchar(255) NOT NULL,
  `import_datetime` datetime DEFAULT NULL,
  `status_id` int(1) unsigned NOT NULL,
  `return_message` text DEFAULT NULL,
  `event_id` int(10) unsigned DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `cropped_file_id` int(10) unsigned DEFAULT NULL,
  PRIMARY KEY (`id`),
  CONSTRAINT `signature_import_log_event_id_pk` FOREIGN KEY (`event_id`) REFERENCES `event` (`id`),
  CONSTRAINT `signature_import_log_protected_file_fk` FOREIGN KEY (`cropped_file_id`) REFERENCES `protected_file` (`id`),
  CONSTRAINT `signature_import_log_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `signature_import_log_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

-- --- request queue and attachments (Api m181219, m191206, m210427; OphGeneric m190513, m191205, m200204)

CREATE TABLE `request_queue` (
  `request_queue` varchar(45) NOT NULL,
  `maximum_active_threads` int(2) NOT NULL,
  `total_active_thread_count` int(10) DEFAULT '0',
  `total_execute_count` int(10) NOT NULL DEFAULT '0',
  `total_success_count` int(10) NOT NULL DEFAULT '0',
  `total_fail_count` int(10) NOT NULL DEFAULT '0',
  `busy_yield_ms` int(6) NOT NULL,
  `idle_yield_ms` int(6) NOT NULL,
  `last_poll_date` datetime DEFAULT NULL,
  `last_thread_spawn_date` datetime DEFAULT NULL,
  `last_thread_spawn_request_id` int(10) DEFAULT NULL,
  PRIMARY KEY (`request_queue`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `request_queue_lock` (
  `request_queue` varchar(45) NOT NULL,
  PRIMARY KEY (`request_queue`),
  CONSTRAINT `request_queue_lock_fk_request_queue` FOREIGN KEY (`request_queue`) REFERENCES `request_queue` (`request_queue`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `routine_library` (
  `routine_name` varchar(45) NOT NULL,
  `hash_code` bigint(100) DEFAULT NULL,
  PRIMARY KEY (`routine_name`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `request_type` (
  `request_type` varchar(45) NOT NULL,
  `title_full` varchar(45) NOT NULL,
  `title_short` varchar(45) NOT NULL,
  `default_routine_name` varchar(50) NOT NULL,
  `default_request_queue` varchar(45) NOT NULL,
  PRIMARY KEY (`request_type`),
  CONSTRAINT `request_type_fk_routine_library` FOREIGN KEY (`default_routine_name`) REFERENCES `routine_library` (`routine_name`),
  CONSTRAINT `request_queue_fk_request_type` FOREIGN KEY (`default_request_queue`) REFERENCES `request_queue` (`request_queue`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `request` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `request_type` varchar(45) NOT NULL,
  `system_message` varchar(255) NOT NULL,
  `request_override_default_queue` varchar(45) DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`),
  CONSTRAINT `request_fk_request_type` FOREIGN KEY (`request_type`) REFERENCES `request_type` (`request_type`),
  CONSTRAINT `request_override_default_queue_fk_request_queue` FOREIGN KEY (`request_override_default_queue`) REFERENCES `request_queue` (`request_queue`),
  CONSTRAINT `request_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `request_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `request_routine` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `request_id` int(11) NOT NULL,
  `execute_request_queue` varchar(45) NOT NULL,
  `status` varchar(45) NOT NULL,
  `routine_name` varchar(45) NOT NULL,
  `try_count` int(11) NOT NULL DEFAULT '0',
  `next_try_date_time` datetime DEFAULT NULL,
  `execute_sequence` int(11) NOT NULL,
  `hash_code` bigint(100) DEFAULT NULL,
  PRIMARY KEY (`id`),
  CONSTRAINT `request_routine_fk_routine_library` FOREIGN KEY (`routine_name`) REFERENCES `routine_library` (`routine_name`),
  CONSTRAINT `request_routine_fk_request` FOREIGN KEY (`request_id`) REFERENCES `request` (`id`),
  CONSTRAINT `execute_request_queue_fk_request_routine` FOREIGN KEY (`execute_request_queue`) REFERENCES `request_queue` (`request_queue`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `request_routine_execution` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `log_text` text DEFAULT NULL,
  `request_routine_id` int(11) NOT NULL,
  `execution_date_time` datetime NOT NULL,
  `status` text NOT NULL,
  `try_number` int(11) NOT NULL,
  PRIMARY KEY (`id`),
  CONSTRAINT `request_routine_execution_fk_request_routine` FOREIGN KEY (`request_routine_id`) REFERENCES `request_routine` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `request_routine_lock` (
  `routine_lock` varchar(200) NOT NULL,
  PRIMARY KEY (`routine_lock`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `request_details` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `request_id` int(10) NOT NULL,
  `name` varchar(100) DEFAULT NULL,
  `value` text DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`),
  CONSTRAINT `request_fk_request_details` FOREIGN KEY (`request_id`) REFERENCES `request` (`id`),
  CONSTRAINT `request_details_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `request_details_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `mime_type` (
  `mime_type` varchar(45) NOT NULL,
  PRIMARY KEY (`mime_type`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `attachment_type` (
  `attachment_type` varchar(45) NOT NULL,
  `title_full` varchar(45) DEFAULT NULL,
  `title_short` varchar(45) DEFAULT NULL,
  `title_abbreviated` varchar(45) DEFAULT NULL,
  -- OphGeneric m190513: NOT NULL without a default.
  `dicom_modality_code` varchar(45) NOT NULL,
  PRIMARY KEY (`attachment_type`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `body_site_type` (
  `body_site_snomed_type` varchar(45) NOT NULL,
  `title_full` varchar(45) DEFAULT NULL,
  `title_short` varchar(45) DEFAULT NULL,
  `title_abbreviated` varchar(45) DEFAULT NULL,
  PRIMARY KEY (`body_site_snomed_type`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `attachment_data` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `request_id` int(11) NOT NULL,
  `attachment_mnemonic` varchar(45) NOT NULL,
  `body_site_snomed_type` varchar(45) DEFAULT NULL,
  -- NOT NULL without a default.
  `system_only_managed` int(1) NOT NULL,
  `attachment_type` varchar(45) NOT NULL,
  -- 100 wide, while the mime_type key it references is 45.
  `mime_type` varchar(100) NOT NULL,
  `blob_data` longblob DEFAULT NULL,
  `text_data` longtext DEFAULT NULL,
  `upload_file_name` varchar(200) DEFAULT NULL,
  `thumbnail_small_blob` mediumblob DEFAULT NULL,
  `thumbnail_medium_blob` mediumblob DEFAULT NULL,
  `thumbnail_large_blob` mediumblob DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `hash_code` bigint(100) DEFAULT NULL,
  PRIMARY KEY (`id`),
  -- Ineffective while body_site_snomed_type is NULL (NULLs never collide).
  UNIQUE KEY `unique_attachment_data_attachment_mnemonic_idx` (`request_id`,`attachment_mnemonic`,`body_site_snomed_type`),
  KEY `index_hash_code` (`hash_code`),
  CONSTRAINT `request_fk_attachment_data` FOREIGN KEY (`request_id`) REFERENCES `request` (`id`),
  CONSTRAINT `attachment_data_fk_attachment_type` FOREIGN KEY (`attachment_type`) REFERENCES `attachment_type` (`attachment_type`),
  CONSTRAINT `attachment_data_fk_mime_type` FOREIGN KEY (`mime_type`) REFERENCES `mime_type` (`mime_type`),
  CONSTRAINT `attachment_data_fk_body_site_type` FOREIGN KEY (`body_site_snomed_type`) REFERENCES `body_site_type` (`body_site_snomed_type`),
  CONSTRAINT `attachment_data_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `attachment_data_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

-- Created with createOETable(..., 'engine=...'): the truthy third argument made it versioned.
CREATE TABLE `event_attachment_group` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `event_id` int(10) unsigned NOT NULL,
  `element_type_id` int(10) unsigned NOT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`),
  CONSTRAINT `event_attachment_group_fk_event` FOREIGN KEY (`event_id`) REFERENCES `event` (`id`),
  CONSTRAINT `event_attachment_group_fk_element_type` FOREIGN KEY (`element_type_id`) REFERENCES `element_type` (`id`),
  CONSTRAINT `event_attachment_group_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `event_attachment_group_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `event_attachment_item` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `event_attachment_group_id` int(11) NOT NULL,
  `attachment_data_id` int(11) NOT NULL,
  `system_only_managed` int(1) NOT NULL,
  `event_document_view_set` varchar(45) DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`),
  CONSTRAINT `event_attachment_item_fk_event_attachment_group` FOREIGN KEY (`event_attachment_group_id`) REFERENCES `event_attachment_group` (`id`),
  CONSTRAINT `event_attachment_item_fk_attachment_data` FOREIGN KEY (`attachment_data_id`) REFERENCES `attachment_data` (`id`),
  CONSTRAINT `event_attachment_item_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `event_attachment_item_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

-- OphGeneric's attachment element: an OphGeneric event shows its attachments through this row.
CREATE TABLE `et_ophgeneric_attachment` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `event_id` int(10) unsigned NOT NULL DEFAULT '0',
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`),
  UNIQUE KEY `generic_attachment_element_unique_index` (`event_id`),
  CONSTRAINT `et_ophgeneric_attach_ev_fk` FOREIGN KEY (`event_id`) REFERENCES `event` (`id`),
  CONSTRAINT `et_ophgeneric_attachment_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `et_ophgeneric_attachment_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

-- --- device filing: OphGeneric's device elements and subtypes ---------------------------

-- The consolidation's eye lookup (user ids without a default, audit dates of type date), shared with
-- biometry below.
CREATE TABLE IF NOT EXISTS `eye` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `name` varchar(10) NOT NULL,
  `display_order` int(10) unsigned NOT NULL DEFAULT '0',
  `last_modified_user_id` int(10) unsigned NOT NULL,
  `last_modified_date` date NOT NULL DEFAULT '1900-01-01',
  `created_user_id` int(10) unsigned NOT NULL,
  `created_date` date NOT NULL DEFAULT '1900-01-01',
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;
INSERT IGNORE INTO `eye` (`id`, `name`, `display_order`, `last_modified_user_id`, `created_user_id`) VALUES
  (1, 'Left', 2, 1, 1), (2, 'Right', 1, 1, 1), (3, 'Both', 3, 1, 1);

-- m190510_151314 (versioned), manual_entry from m221212_233141.
CREATE TABLE `event_subtype` (
  `event_subtype` varchar(100) NOT NULL,
  `dicom_modality_code` varchar(45) NOT NULL,
  `icon_name` varchar(45) NOT NULL,
  `display_name` varchar(100) NOT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `manual_entry` tinyint(1) unsigned NOT NULL DEFAULT '0',
  PRIMARY KEY (`event_subtype`),
  CONSTRAINT `event_subtype_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `event_subtype_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

-- display_order: m200223_184911 replaced an unsigned NOT NULL column without a default.
CREATE TABLE `event_subtype_item` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `event_id` int(10) unsigned NOT NULL,
  `event_subtype` varchar(100) NOT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `display_order` int(8) NOT NULL DEFAULT '0',
  PRIMARY KEY (`id`),
  UNIQUE KEY `event_subtype_item_event_subtype_unique` (`event_id`,`event_subtype`),
  CONSTRAINT `event_subtype_item_event_fk` FOREIGN KEY (`event_id`) REFERENCES `event` (`id`),
  CONSTRAINT `event_subtype_item_subtype_fk` FOREIGN KEY (`event_subtype`) REFERENCES `event_subtype` (`event_subtype`),
  CONSTRAINT `event_subtype_item_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `event_subtype_item_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

-- OphGeneric m185653_149632: 32 columns, none indexed but the keys.
CREATE TABLE `et_ophgeneric_device_information` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `event_id` int(10) unsigned NOT NULL,
  `last_request_id` int(11) DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `manufacturer` text DEFAULT NULL,
  `manufacturer_model_name` text DEFAULT NULL,
  `modality` text DEFAULT NULL,
  `series_description` text DEFAULT NULL,
  `laterality` text DEFAULT NULL,
  `image_laterality` text DEFAULT NULL,
  `study_description` text DEFAULT NULL,
  `document_title` text DEFAULT NULL,
  `acquisition_date_time` text DEFAULT NULL,
  `study_date` text DEFAULT NULL,
  `study_time` text DEFAULT NULL,
  `content_date` text DEFAULT NULL,
  `content_time` text DEFAULT NULL,
  `station_name` text DEFAULT NULL,
  `operators_name` text DEFAULT NULL,
  `software_version` text DEFAULT NULL,
  `study_instance_uid` text DEFAULT NULL,
  `series_instance_uid` text DEFAULT NULL,
  `study_id` text DEFAULT NULL,
  `series_number` text DEFAULT NULL,
  `instance_number` text DEFAULT NULL,
  `modifying_system` text DEFAULT NULL,
  `operator_identification_sequence` text DEFAULT NULL,
  `model_version` text DEFAULT NULL,
  `sop_instance_uid` text DEFAULT NULL,
  PRIMARY KEY (`id`),
  CONSTRAINT `et_ophgeneric_device_information_ev_fk` FOREIGN KEY (`event_id`) REFERENCES `event` (`id`),
  CONSTRAINT `et_ophgeneric_device_information_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `et_ophgeneric_device_information_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

-- OphGeneric m185401_134847.
CREATE TABLE `et_ophgeneric_comments` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `event_id` int(10) unsigned NOT NULL,
  `comment` text DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`),
  CONSTRAINT `et_ophgeneric_comments_ev_fk` FOREIGN KEY (`event_id`) REFERENCES `event` (`id`),
  CONSTRAINT `et_ophgeneric_comments_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `et_ophgeneric_comments_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

-- OphGeneric m201007_222257.
CREATE TABLE `et_ophgeneric_hfa` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `event_id` int(10) unsigned NOT NULL DEFAULT '0',
  `eye_id` int(10) unsigned DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`),
  CONSTRAINT `et_ophgeneric_hfa_eye_fk` FOREIGN KEY (`eye_id`) REFERENCES `eye` (`id`),
  CONSTRAINT `et_ophgeneric_hfa_event_fk` FOREIGN KEY (`event_id`) REFERENCES `event` (`id`),
  CONSTRAINT `et_ophgeneric_hfa_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `et_ophgeneric_hfa_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `ophgeneric_hfa_entry` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `element_id` int(11) NOT NULL,
  `eye_id` int(10) unsigned DEFAULT NULL,
  `mean_deviation` text DEFAULT NULL,
  `visual_field_index` text DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`),
  CONSTRAINT `ophgeneric_hfa_entry_eye_fk` FOREIGN KEY (`eye_id`) REFERENCES `eye` (`id`),
  CONSTRAINT `ophgeneric_hfa_entry_element_fk` FOREIGN KEY (`element_id`) REFERENCES `et_ophgeneric_hfa` (`id`),
  CONSTRAINT `ophgeneric_hfa_entry_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `ophgeneric_hfa_entry_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

-- OphInVisualfields m200602_050757: the visual-field statistics that OphGeneric's trigger on
-- ophgeneric_hfa_entry fills (m201027_005751). Only the insert trigger is here: the service never updates
-- an entry. Under strict sql_mode the entry's insert fails when the event has no episode, the patient no
-- date of birth, the entry no eye, or a value is not numeric text.
CREATE TABLE `patient_statistic_type` (
  `mnem` varchar(10) NOT NULL,
  `title` varchar(50) NOT NULL,
  PRIMARY KEY (`mnem`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `patient_statistic` (
  `patient_id` int(11) unsigned NOT NULL,
  `stat_type_mnem` varchar(10) NOT NULL,
  `eye_id` int(11) unsigned NOT NULL,
  `process_datapoints` tinyint(1) NOT NULL DEFAULT '0',
  `min_adjusted` float DEFAULT NULL,
  `max_adjusted` float DEFAULT NULL,
  `gradient` float DEFAULT NULL,
  `y_intercept` float DEFAULT NULL,
  PRIMARY KEY (`patient_id`,`stat_type_mnem`,`eye_id`),
  CONSTRAINT `patient_statistic_type_fk` FOREIGN KEY (`stat_type_mnem`) REFERENCES `patient_statistic_type` (`mnem`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `patient_statistic_datapoint` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `patient_id` int(11) unsigned NOT NULL,
  `stat_type_mnem` varchar(10) NOT NULL,
  `eye_id` int(11) unsigned NOT NULL,
  `x_value` float NOT NULL,
  `y_value` float NOT NULL,
  `event_id` int(10) unsigned DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`),
  CONSTRAINT `patient_statistic_datapoint_stat_fk` FOREIGN KEY (`patient_id`, `stat_type_mnem`, `eye_id`) REFERENCES `patient_statistic` (`patient_id`, `stat_type_mnem`, `eye_id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

-- After each entry: the patient (through element, event, episode) and the age in whole years at the event
-- date (or at death); the md and vfi statistics of that patient and eye created when missing, one data point
-- each (x = age, y = the entry's text as a number, the event), and the statistics marked for processing.
CREATE TRIGGER `ins_stats` AFTER INSERT ON `ophgeneric_hfa_entry` FOR EACH ROW
BEGIN
  DECLARE v_patient_id, v_age, v_event_id INT;
  SELECT p.id, TIMESTAMPDIFF(YEAR, p.dob, IFNULL(p.date_of_death, e.event_date)), e.id
    INTO v_patient_id, v_age, v_event_id
    FROM et_ophgeneric_hfa h
    JOIN event e ON e.id = h.event_id
    JOIN episode ep ON ep.id = e.episode_id
    JOIN patient p ON p.id = ep.patient_id
    WHERE h.id = NEW.element_id;
  INSERT IGNORE INTO patient_statistic (patient_id, stat_type_mnem, eye_id) VALUES
    (v_patient_id, 'md', NEW.eye_id), (v_patient_id, 'vfi', NEW.eye_id);
  INSERT INTO patient_statistic_datapoint (patient_id, stat_type_mnem, eye_id, x_value, y_value, event_id) VALUES
    (v_patient_id, 'md', NEW.eye_id, v_age, NEW.mean_deviation, v_event_id),
    (v_patient_id, 'vfi', NEW.eye_id, v_age, NEW.visual_field_index, v_event_id);
  UPDATE patient_statistic SET process_datapoints = 1
    WHERE patient_id = v_patient_id AND stat_type_mnem IN ('md', 'vfi') AND eye_id = NEW.eye_id;
END;

-- --- _version twins -------------------------------------------------------------------------------------
-- The twin of a table has its columns without keys to other tables, its id without AUTO_INCREMENT or
-- uniqueness, and version_date + version_id (m140220 versionExistingTable, createOETable(..., true)).
-- OpenEyes copies the previous row into it before every update or delete of a versioned model.

CREATE TABLE `user_version` LIKE `user`;
ALTER TABLE `user_version` MODIFY `id` int(10) unsigned NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `contact_version` LIKE `contact`;
ALTER TABLE `contact_version` MODIFY `id` int(10) unsigned NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `institution_version` LIKE `institution`;
ALTER TABLE `institution_version` MODIFY `id` int(10) unsigned NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `site_version` LIKE `site`;
ALTER TABLE `site_version` MODIFY `id` int(10) unsigned NOT NULL, DROP PRIMARY KEY, DROP INDEX `uk_site_institution_index`,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `user_authentication_version` LIKE `user_authentication`;
ALTER TABLE `user_authentication_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `institution_authentication_version` LIKE `institution_authentication`;
ALTER TABLE `institution_authentication_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `setting_metadata_version` LIKE `setting_metadata`;
ALTER TABLE `setting_metadata_version` MODIFY `id` int(10) unsigned NOT NULL, DROP PRIMARY KEY, DROP INDEX `setting_metadata_key_IDX`,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `setting_installation_version` LIKE `setting_installation`;
ALTER TABLE `setting_installation_version` MODIFY `id` int(10) unsigned NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `setting_institution_version` LIKE `setting_institution`;
ALTER TABLE `setting_institution_version` MODIFY `id` int(10) unsigned NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `setting_site_version` LIKE `setting_site`;
ALTER TABLE `setting_site_version` MODIFY `id` int(10) unsigned NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `patient_version` LIKE `patient`;
ALTER TABLE `patient_version` MODIFY `id` int(10) unsigned NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `patient_identifier_type_version` LIKE `patient_identifier_type`;
ALTER TABLE `patient_identifier_type_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY, DROP INDEX `uk_unique_row_str`,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `patient_identifier_version` LIKE `patient_identifier`;
ALTER TABLE `patient_identifier_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  DROP INDEX `uk_patient_value_patient_type_id`, DROP INDEX `uk_patient_id_type_value`,
  DROP INDEX `uk_patient_identifier_unique_row_str`,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `patient_identifier_type_display_order_version` LIKE `patient_identifier_type_display_order`;
ALTER TABLE `patient_identifier_type_display_order_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  DROP INDEX `uk_unique_row_str`,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `event_type_version` LIKE `event_type`;
ALTER TABLE `event_type_version` MODIFY `id` int(10) unsigned NOT NULL, DROP PRIMARY KEY, DROP INDEX `name`,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `element_type_version` LIKE `element_type`;
ALTER TABLE `element_type_version` MODIFY `id` int(10) unsigned NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `episode_version` LIKE `episode`;
ALTER TABLE `episode_version` MODIFY `id` int(10) unsigned NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `event_version` LIKE `event`;
ALTER TABLE `event_version` MODIFY `id` int(10) unsigned NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `unique_codes_version` LIKE `unique_codes`;
ALTER TABLE `unique_codes_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `unique_codes_mapping_version` LIKE `unique_codes_mapping`;
ALTER TABLE `unique_codes_mapping_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  DROP INDEX `unique_code_mapping_event_id_unique`, DROP INDEX `unique_code_mapping_unique_code_id_unique`,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `et_ophcocvi_esign_version` LIKE `et_ophcocvi_esign`;
ALTER TABLE `et_ophcocvi_esign_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `protected_file_version` LIKE `protected_file`;
ALTER TABLE `protected_file_version` MODIFY `id` int(10) unsigned NOT NULL, DROP PRIMARY KEY, DROP INDEX `asset_uid`,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `ophcocvi_signature_version` LIKE `ophcocvi_signature`;
ALTER TABLE `ophcocvi_signature_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `request_details_version` LIKE `request_details`;
ALTER TABLE `request_details_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `event_attachment_group_version` LIKE `event_attachment_group`;
ALTER TABLE `event_attachment_group_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `et_ophgeneric_attachment_version` LIKE `et_ophgeneric_attachment`;
ALTER TABLE `et_ophgeneric_attachment_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  DROP INDEX `generic_attachment_element_unique_index`,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY;

-- device filing's twins
CREATE TABLE `event_subtype_version` LIKE `event_subtype`;
ALTER TABLE `event_subtype_version` MODIFY `event_subtype` varchar(100) NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `event_subtype_item_version` LIKE `event_subtype_item`;
ALTER TABLE `event_subtype_item_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY, DROP INDEX `event_subtype_item_event_subtype_unique`,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `et_ophgeneric_device_information_version` LIKE `et_ophgeneric_device_information`;
ALTER TABLE `et_ophgeneric_device_information_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `et_ophgeneric_comments_version` LIKE `et_ophgeneric_comments`;
ALTER TABLE `et_ophgeneric_comments_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `et_ophgeneric_hfa_version` LIKE `et_ophgeneric_hfa`;
ALTER TABLE `et_ophgeneric_hfa_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `ophgeneric_hfa_entry_version` LIKE `ophgeneric_hfa_entry`;
ALTER TABLE `ophgeneric_hfa_entry_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY;

SET foreign_key_checks = 1;

-- --- biometry (OphInBiometry m140203_150454 .. m220526, OphTrOperationnote m200903_035926) -------------
-- The Biometry event type and its element types, the imported-event record, the four elements and their
-- lookups with the rows the migrations seed. `eye` is created only where another block has not.

SET foreign_key_checks = 0;

CREATE TABLE IF NOT EXISTS `eye` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `name` varchar(10) NOT NULL,
  `display_order` int(10) unsigned NOT NULL DEFAULT '0',
  `last_modified_user_id` int(10) unsigned NOT NULL,
  `last_modified_date` date NOT NULL DEFAULT '1900-01-01',
  `created_user_id` int(10) unsigned NOT NULL,
  `created_date` date NOT NULL DEFAULT '1900-01-01',
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;
INSERT IGNORE INTO `eye` (`id`, `name`, `display_order`, `last_modified_user_id`, `created_user_id`) VALUES
  (1, 'Left', 2, 1, 1), (2, 'Right', 1, 1, 1), (3, 'Both', 3, 1, 1);

INSERT IGNORE INTO `event_group` (`id`, `name`, `code`) VALUES (3, 'Investigation events', 'In');
INSERT INTO `event_type` (`id`, `name`, `event_group_id`, `class_name`, `can_be_created_manually`, `show_attachments`) VALUES
  (50, 'Biometry', 3, 'OphInBiometry', 1, 1);
INSERT INTO `element_type` (`id`, `name`, `class_name`, `event_type_id`, `display_order`, `default`, `required`) VALUES
  (50, 'Biometry', 'Element_OphInBiometry_Measurement', 50, 10, 1, NULL),
  (51, '[-Calculation-]', 'Element_OphInBiometry_Calculation', 50, 20, 1, NULL),
  (52, '[-Selection-]', 'Element_OphInBiometry_Selection', 50, 30, 1, NULL),
  -- m191128_142435: OphGeneric's attachment element on the Biometry event type.
  (53, 'Attachment', 'OEModule\\OphGeneric\\models\\Attachment', 50, 1, 1, 0);

-- The IOLMaster's own (771B,1025) codes; the id is signed.
CREATE TABLE `dicom_eye_status` (
  `id` int(10) NOT NULL,
  `name` varchar(128) NOT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;
INSERT INTO `dicom_eye_status` (`id`, `name`) VALUES
  (-1, 'Unknown'), (0, 'Phakic'), (1, 'Aphakic'), (2, 'Silicone filled'), (3, 'Pseudophakic silicone'),
  (6, 'Pseudophakic memory'), (7, 'Pseudophakic PMMA'), (8, 'Pseudophakic acryl'), (9, 'Silicone filled (Aphakic)'),
  (10, 'Silicone filled (Pseudophakic)'), (11, 'Phakic IOL PMMA (0,2mm)'), (12, 'Primary piggy-back silicone (SLM 2)'),
  (13, 'Primary piggy-back hydrophobic acrylate');

CREATE TABLE `ophinbiometry_calculation_formula` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `name` varchar(128) NOT NULL,
  `display_order` int(10) unsigned NOT NULL DEFAULT '1',
  `deleted` tinyint(1) unsigned NOT NULL DEFAULT '0',
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;
INSERT INTO `ophinbiometry_calculation_formula` (`id`, `name`, `display_order`) VALUES (1, 'SRK/T', 1), (2, 'Holladay 1', 2);

CREATE TABLE `ophinbiometry_lens_position` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `name` varchar(40) NOT NULL,
  `display_order` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;
INSERT INTO `ophinbiometry_lens_position` (`id`, `name`, `display_order`) VALUES (1, 'Posterior chamber', 1), (2, 'Anterior chamber', 2);

CREATE TABLE `ophinbiometry_lenstype_lens` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `name` varchar(128) NOT NULL,
  `display_name` varchar(255) NOT NULL,
  `description` varchar(255) NOT NULL,
  `comments` varchar(1024) NOT NULL,
  -- No foreign key: lenses the IOLMaster importer creates have position 0.
  `position_id` int(10) unsigned NOT NULL,
  `acon` decimal(8,4) NOT NULL,
  `sf` float DEFAULT NULL,
  `pACD` float DEFAULT NULL,
  `a0` float DEFAULT NULL,
  `a1` float DEFAULT NULL,
  `a2` float DEFAULT NULL,
  `display_order` int(10) unsigned NOT NULL DEFAULT '1',
  `active` tinyint(1) unsigned NOT NULL DEFAULT '1',
  `deleted` tinyint(1) unsigned NOT NULL DEFAULT '0',
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;
INSERT INTO `ophinbiometry_lenstype_lens` (`id`, `name`, `display_name`, `description`, `comments`, `position_id`, `acon`, `display_order`) VALUES
  (1, 'MA60AC', 'MA60AC', 'Alcon MA60AC', '', 1, 118.9000, 1), (2, 'SN60WF', 'SN60WF', 'Alcon SN60WF', '', 1, 118.7000, 2),
  (3, 'SA60AT', 'SA60AT', 'Alcon SA60AT', '', 1, 118.4000, 3), (4, 'MTA3UO', 'MTA3UO', 'Alcon MTA3UO', '', 1, 115.8000, 4),
  (5, 'None', '-', 'No lens', '', 1, 0.0000, 5);

CREATE TABLE `ophinbiometry_lenstype_lens_institution` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `lenstype_lens_id` int(10) unsigned NOT NULL,
  `institution_id` int(10) unsigned NOT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`),
  CONSTRAINT `ophinbiometry_lenstype_lens_institution_lens_fk` FOREIGN KEY (`lenstype_lens_id`) REFERENCES `ophinbiometry_lenstype_lens` (`id`),
  CONSTRAINT `ophinbiometry_lenstype_lens_institution_institution_fk` FOREIGN KEY (`institution_id`) REFERENCES `institution` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;
-- m210318_233554: the seeded lenses are listed for the installation's institution.
INSERT INTO `ophinbiometry_lenstype_lens_institution` (`lenstype_lens_id`, `institution_id`) VALUES (1, 1), (2, 1), (3, 1), (4, 1), (5, 1);

CREATE TABLE `ophinbiometry_surgeon` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `name` varchar(255) NOT NULL,
  PRIMARY KEY (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

-- Not versioned. study_id holds the StudyInstanceUID.
CREATE TABLE `ophinbiometry_imported_events` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `event_id` int(10) unsigned NOT NULL,
  `patient_id` int(10) unsigned NOT NULL,
  `study_id` varchar(255) DEFAULT NULL,
  `device_id` varchar(255) DEFAULT NULL,
  `device_name` varchar(255) DEFAULT NULL,
  `device_model` varchar(255) DEFAULT NULL,
  `device_manufacturer` varchar(255) DEFAULT NULL,
  `device_software_version` varchar(20) DEFAULT NULL,
  `is_linked` tinyint(1) DEFAULT '0',
  `is_merged` tinyint(1) DEFAULT '0',
  `content_datetime` datetime DEFAULT NULL,
  `surgeon_name` varchar(255) DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `series_id` varchar(255) DEFAULT NULL,
  `device_serial_number` varchar(20) DEFAULT NULL,
  `acquisition_datetime` varchar(25) DEFAULT NULL,
  `sop_uid` varchar(255) DEFAULT NULL,
  PRIMARY KEY (`id`),
  CONSTRAINT `ophinbiometry_imported_events_event_fk` FOREIGN KEY (`event_id`) REFERENCES `event` (`id`),
  CONSTRAINT `ophinbiometry_imported_events_patient_fk` FOREIGN KEY (`patient_id`) REFERENCES `patient` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

-- Created as et_ophinbiometry_lenstype (m140203), renamed by m150731; its keys keep the old names. The axis
-- columns were renamed k1_axis_* by OphTrOperationnote m200903_035926.
CREATE TABLE `et_ophinbiometry_measurement` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `event_id` int(10) unsigned NOT NULL,
  `eye_id` int(10) unsigned NOT NULL DEFAULT '3',
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `deleted` tinyint(1) unsigned NOT NULL DEFAULT '0',
  `k1_left` decimal(6,2) NOT NULL DEFAULT '0.00',
  `k1_right` decimal(6,2) NOT NULL DEFAULT '0.00',
  `k2_left` decimal(6,2) NOT NULL DEFAULT '0.00',
  `k2_right` decimal(6,2) NOT NULL DEFAULT '0.00',
  `k1_axis_left` decimal(5,1) NOT NULL DEFAULT '0.0',
  `k1_axis_right` decimal(5,1) NOT NULL DEFAULT '0.0',
  `axial_length_left` decimal(6,2) NOT NULL DEFAULT '0.00',
  `axial_length_right` decimal(6,2) NOT NULL DEFAULT '0.00',
  `snr_left` decimal(6,1) DEFAULT NULL,
  `snr_right` decimal(6,1) DEFAULT NULL,
  `k2_axis_left` decimal(6,1) NOT NULL DEFAULT '0.0',
  `k2_axis_right` decimal(6,1) NOT NULL DEFAULT '0.0',
  `delta_k_left` decimal(6,2) NOT NULL DEFAULT '0.00',
  `delta_k_right` decimal(6,2) NOT NULL DEFAULT '0.00',
  `delta_k_axis_left` decimal(6,1) NOT NULL DEFAULT '0.0',
  `delta_k_axis_right` decimal(6,1) NOT NULL DEFAULT '0.0',
  `acd_left` decimal(6,2) NOT NULL DEFAULT '0.00',
  `acd_right` decimal(6,2) NOT NULL DEFAULT '0.00',
  `refraction_sphere_left` decimal(6,2) NOT NULL DEFAULT '0.00',
  `refraction_sphere_right` decimal(6,2) NOT NULL DEFAULT '0.00',
  `refraction_delta_left` decimal(6,2) NOT NULL DEFAULT '0.00',
  `refraction_delta_right` decimal(6,2) NOT NULL DEFAULT '0.00',
  `refraction_axis_left` decimal(6,1) NOT NULL DEFAULT '0.0',
  `refraction_axis_right` decimal(6,1) NOT NULL DEFAULT '0.0',
  -- NOT NULL without a default.
  `eye_status_left` int(10) NOT NULL,
  `eye_status_right` int(10) NOT NULL,
  `snr_min_left` decimal(6,1) NOT NULL DEFAULT '0.0',
  `snr_min_right` decimal(6,1) NOT NULL DEFAULT '0.0',
  `al_modified_left` tinyint(1) DEFAULT '0',
  `al_modified_right` tinyint(1) DEFAULT '0',
  `k_modified_left` tinyint(1) DEFAULT '0',
  `k_modified_right` tinyint(1) DEFAULT '0',
  `lvc_left` varchar(30) DEFAULT NULL,
  `lvc_right` varchar(30) DEFAULT NULL,
  `lvc_mode_left` varchar(30) DEFAULT NULL,
  `lvc_mode_right` varchar(30) DEFAULT NULL,
  PRIMARY KEY (`id`),
  KEY `et_ophinbiometry_lenstype_ev_fk` (`event_id`),
  KEY `et_ophinbiometry_lenstype_eye_id_fk` (`eye_id`),
  CONSTRAINT `et_ophinbiometry_lenstype_ev_fk` FOREIGN KEY (`event_id`) REFERENCES `event` (`id`),
  CONSTRAINT `et_ophinbiometry_lenstype_eye_id_fk` FOREIGN KEY (`eye_id`) REFERENCES `eye` (`id`),
  CONSTRAINT `et_ophinbiometry_measurement_eye_status_left_fk` FOREIGN KEY (`eye_status_left`) REFERENCES `dicom_eye_status` (`id`),
  CONSTRAINT `et_ophinbiometry_measurement_eye_status_right_fk` FOREIGN KEY (`eye_status_right`) REFERENCES `dicom_eye_status` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `et_ophinbiometry_calculation` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `event_id` int(10) unsigned NOT NULL,
  `eye_id` int(10) unsigned NOT NULL DEFAULT '3',
  `target_refraction_left` decimal(6,2) DEFAULT NULL,
  `target_refraction_right` decimal(6,2) DEFAULT NULL,
  `formula_id_left` int(10) unsigned NOT NULL DEFAULT '1',
  `formula_id_right` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `deleted` tinyint(1) unsigned NOT NULL DEFAULT '0',
  `comments` text DEFAULT NULL,
  `comments_right` text DEFAULT NULL,
  `comments_left` text DEFAULT NULL,
  PRIMARY KEY (`id`),
  CONSTRAINT `et_ophinbiometry_calculation_ev_fk` FOREIGN KEY (`event_id`) REFERENCES `event` (`id`),
  CONSTRAINT `et_ophinbiometry_calculation_eye_id_fk` FOREIGN KEY (`eye_id`) REFERENCES `eye` (`id`),
  CONSTRAINT `et_ophinbiometry_calculation_formula_l_fk` FOREIGN KEY (`formula_id_left`) REFERENCES `ophinbiometry_calculation_formula` (`id`),
  CONSTRAINT `et_ophinbiometry_calculation_formula_r_fk` FOREIGN KEY (`formula_id_right`) REFERENCES `ophinbiometry_calculation_formula` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `et_ophinbiometry_selection` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `event_id` int(10) unsigned NOT NULL,
  `eye_id` int(10) unsigned NOT NULL DEFAULT '3',
  `iol_power_left` varchar(15) NOT NULL DEFAULT '0.00',
  `iol_power_right` varchar(15) NOT NULL DEFAULT '0.00',
  `predicted_refraction_left` varchar(15) NOT NULL DEFAULT '0.00',
  `predicted_refraction_right` varchar(15) NOT NULL DEFAULT '0.00',
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `deleted` tinyint(1) unsigned NOT NULL DEFAULT '0',
  -- m151015 dropped the foreign keys of the lens ids; their indexes stay.
  `lens_id_left` int(10) unsigned NOT NULL DEFAULT '1',
  `lens_id_right` int(10) unsigned NOT NULL DEFAULT '1',
  `formula_id_left` int(10) unsigned DEFAULT NULL,
  `formula_id_right` int(10) unsigned DEFAULT NULL,
  `manually_overriden_left` tinyint(1) NOT NULL DEFAULT '0',
  `manually_overriden_right` tinyint(1) NOT NULL DEFAULT '0',
  PRIMARY KEY (`id`),
  KEY `et_ophinbiometry_selection_lens_l_fk` (`lens_id_left`),
  KEY `et_ophinbiometry_selection_lens_r_fk` (`lens_id_right`),
  CONSTRAINT `et_ophinbiometry_selection_ev_fk` FOREIGN KEY (`event_id`) REFERENCES `event` (`id`),
  CONSTRAINT `et_ophinbiometry_selection_eye_id_fk` FOREIGN KEY (`eye_id`) REFERENCES `eye` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `et_ophinbiometry_iol_ref_values` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `event_id` int(10) unsigned NOT NULL,
  `eye_id` int(10) unsigned NOT NULL DEFAULT '3',
  `lens_id` int(10) unsigned NOT NULL,
  `formula_id` int(10) unsigned NOT NULL,
  `iol_ref_values_left` text DEFAULT NULL,
  `iol_ref_values_right` text DEFAULT NULL,
  `emmetropia_left` decimal(6,2) DEFAULT NULL,
  `emmetropia_right` decimal(6,2) DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `constant` decimal(7,3) DEFAULT NULL,
  `constant1` decimal(7,3) DEFAULT NULL,
  `constant2` decimal(7,3) DEFAULT NULL,
  `active` tinyint(1) DEFAULT '1',
  `surgeon_id` int(11) DEFAULT NULL,
  PRIMARY KEY (`id`),
  CONSTRAINT `et_ophinbiometry_iol_ref_values_ev_fk` FOREIGN KEY (`event_id`) REFERENCES `event` (`id`),
  CONSTRAINT `et_ophinbiometry_iol_ref_values_eye_id_fk` FOREIGN KEY (`eye_id`) REFERENCES `eye` (`id`),
  CONSTRAINT `et_ophinbiometry_iol_ref_values_lens_fk` FOREIGN KEY (`lens_id`) REFERENCES `ophinbiometry_lenstype_lens` (`id`),
  CONSTRAINT `et_ophinbiometry_iol_ref_values_formula_fk` FOREIGN KEY (`formula_id`) REFERENCES `ophinbiometry_calculation_formula` (`id`),
  CONSTRAINT `et_ophinbiometry_iol_ref_values_surgeon_fk` FOREIGN KEY (`surgeon_id`) REFERENCES `ophinbiometry_surgeon` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

-- The twins. Those of the calculation and selection were written by hand in m140203 and keep a real
-- foreign key from id to the base row (*_aid_fk).
CREATE TABLE `ophinbiometry_lenstype_lens_version` LIKE `ophinbiometry_lenstype_lens`;
ALTER TABLE `ophinbiometry_lenstype_lens_version` MODIFY `id` int(10) unsigned NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `ophinbiometry_lenstype_lens_institution_version` LIKE `ophinbiometry_lenstype_lens_institution`;
ALTER TABLE `ophinbiometry_lenstype_lens_institution_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `et_ophinbiometry_measurement_version` LIKE `et_ophinbiometry_measurement`;
ALTER TABLE `et_ophinbiometry_measurement_version` MODIFY `id` int(10) unsigned NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `et_ophinbiometry_calculation_version` LIKE `et_ophinbiometry_calculation`;
ALTER TABLE `et_ophinbiometry_calculation_version` MODIFY `id` int(10) unsigned NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY,
  ADD CONSTRAINT `et_ophinbiometry_calculation_aid_fk` FOREIGN KEY (`id`) REFERENCES `et_ophinbiometry_calculation` (`id`);
CREATE TABLE `et_ophinbiometry_selection_version` LIKE `et_ophinbiometry_selection`;
ALTER TABLE `et_ophinbiometry_selection_version` MODIFY `id` int(10) unsigned NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY,
  ADD CONSTRAINT `et_ophinbiometry_selection_aid_fk` FOREIGN KEY (`id`) REFERENCES `et_ophinbiometry_selection` (`id`);
CREATE TABLE `et_ophinbiometry_iol_ref_values_version` LIKE `et_ophinbiometry_iol_ref_values`;
ALTER TABLE `et_ophinbiometry_iol_ref_values_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY;

-- Demographics and PASAPI (PAS feed): address, address_type, country, ethnic_group, gp, practice as
-- m130913_000000_consolidation creates them, with m140210 (address.contact_id replaces parent_class /
-- parent_id), m160202 (gp/practice is_active), m221124 (ethnic_group.deleted); contact_practice_associate
-- (m190613, provider_no m190827); pasapi_assignment (m160114, resource_key dropped by m200812),
-- pasapi_xpath_remap / pasapi_remap_value (m160202_131808, institution_id m210408); patient_merge_request
-- (m160425, deleted m160520, renamed columns m200403: in the base table only, so its twin keeps
-- primary_nhsnum, secondary_hos_num and secondary_nhsnum).
CREATE TABLE `address_type` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `name` varchar(64) NOT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  PRIMARY KEY (`id`),
  CONSTRAINT `address_type_created_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `address_type_last_modified_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `country` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `code` varchar(2) DEFAULT NULL,
  `name` varchar(50) DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  PRIMARY KEY (`id`),
  UNIQUE KEY `code` (`code`),
  UNIQUE KEY `name` (`name`),
  CONSTRAINT `country_created_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `country_last_modified_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `ethnic_group` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `name` varchar(64) NOT NULL,
  `code` varchar(1) NOT NULL,
  `display_order` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `deleted` tinyint(1) unsigned NOT NULL DEFAULT '0',
  PRIMARY KEY (`id`),
  CONSTRAINT `ethnic_group_created_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `ethnic_group_last_modified_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `address` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `address1` varchar(255) DEFAULT NULL,
  `address2` varchar(255) DEFAULT NULL,
  `city` varchar(255) DEFAULT NULL,
  `postcode` varchar(10) DEFAULT NULL,
  `county` varchar(255) DEFAULT NULL,
  `country_id` int(10) unsigned NOT NULL,
  `email` varchar(255) DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `contact_id` int(10) unsigned NOT NULL,
  `date_start` datetime DEFAULT NULL,
  `date_end` datetime DEFAULT NULL,
  `address_type_id` int(10) unsigned DEFAULT NULL,
  PRIMARY KEY (`id`),
  KEY `address_country_id_fk` (`country_id`),
  KEY `address_contact_id_fk` (`contact_id`),
  KEY `address_address_type_id_fk` (`address_type_id`),
  CONSTRAINT `address_address_type_id_fk` FOREIGN KEY (`address_type_id`) REFERENCES `address_type` (`id`),
  CONSTRAINT `address_contact_id_fk` FOREIGN KEY (`contact_id`) REFERENCES `contact` (`id`),
  CONSTRAINT `address_country_id_fk` FOREIGN KEY (`country_id`) REFERENCES `country` (`id`),
  CONSTRAINT `address_created_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `address_last_modified_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `gp` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `obj_prof` varchar(20) NOT NULL,
  `nat_id` varchar(20) NOT NULL,
  `is_active` tinyint(1) DEFAULT '1',
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `contact_id` int(10) unsigned NOT NULL,
  PRIMARY KEY (`id`),
  KEY `gp_contact_id_fk` (`contact_id`),
  CONSTRAINT `gp_contact_id_fk` FOREIGN KEY (`contact_id`) REFERENCES `contact` (`id`),
  CONSTRAINT `gp_created_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `gp_last_modified_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `practice` (
  `id` int(10) unsigned NOT NULL AUTO_INCREMENT,
  `code` varchar(64) NOT NULL,
  `phone` varchar(64) NOT NULL,
  `is_active` tinyint(1) DEFAULT '1',
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `contact_id` int(10) unsigned NOT NULL,
  PRIMARY KEY (`id`),
  KEY `practice_contact_id_fk` (`contact_id`),
  CONSTRAINT `practice_contact_id_fk` FOREIGN KEY (`contact_id`) REFERENCES `contact` (`id`),
  CONSTRAINT `practice_created_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `practice_last_modified_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `contact_practice_associate` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `gp_id` int(10) unsigned NOT NULL,
  `practice_id` int(10) unsigned NOT NULL,
  `provider_no` varchar(255) DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  PRIMARY KEY (`id`),
  CONSTRAINT `contact_practice_associate_practice_fk` FOREIGN KEY (`practice_id`) REFERENCES `practice` (`id`),
  CONSTRAINT `contact_practice_associate_gp_fk` FOREIGN KEY (`gp_id`) REFERENCES `gp` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `pasapi_assignment` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `resource_type` varchar(40) DEFAULT NULL,
  `resource_id` varchar(40) DEFAULT NULL,
  `internal_type` varchar(40) DEFAULT NULL,
  `internal_id` int(10) unsigned NOT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  PRIMARY KEY (`id`),
  UNIQUE KEY `internal_key` (`internal_id`,`internal_type`),
  CONSTRAINT `pasapi_assignment_created_user_id_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `pasapi_assignment_last_modified_user_id_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `pasapi_xpath_remap` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `name` varchar(127) NOT NULL,
  `xpath` varchar(511) NOT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `institution_id` int(10) unsigned DEFAULT NULL,
  PRIMARY KEY (`id`),
  CONSTRAINT `pasapi_xpath_remap_institution_fk` FOREIGN KEY (`institution_id`) REFERENCES `institution` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `pasapi_remap_value` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `xpath_id` int(11) NOT NULL,
  `input` varchar(31) NOT NULL,
  `output` varchar(31) DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  PRIMARY KEY (`id`),
  CONSTRAINT `pasapi_remap_value_xpath_id_fk` FOREIGN KEY (`xpath_id`) REFERENCES `pasapi_xpath_remap` (`id`) ON DELETE CASCADE
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `patient_merge_request` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `primary_id` int(10) unsigned NOT NULL,
  `primary_local_identifier_value` varchar(40) DEFAULT NULL,
  `primary_global_identifier_value` varchar(40) DEFAULT NULL,
  `primary_dob` date DEFAULT NULL,
  `primary_gender` varchar(1) DEFAULT NULL,
  `secondary_id` int(10) unsigned NOT NULL,
  `secondary_local_identifier_value` varchar(40) DEFAULT NULL,
  `secondary_global_identifier_value` varchar(40) DEFAULT NULL,
  `secondary_dob` date DEFAULT NULL,
  `secondary_gender` varchar(1) DEFAULT NULL,
  `merge_json` text,
  `comment` text,
  `status` smallint(5) unsigned DEFAULT '0',
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1900-01-01 00:00:00',
  `deleted` tinyint(1) unsigned NOT NULL DEFAULT '0',
  PRIMARY KEY (`id`),
  CONSTRAINT `patient_merge_request_fk1` FOREIGN KEY (`primary_id`) REFERENCES `patient` (`id`),
  CONSTRAINT `patient_merge_request_fk2` FOREIGN KEY (`secondary_id`) REFERENCES `patient` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE `address_type_version` LIKE `address_type`;
ALTER TABLE `address_type_version` MODIFY `id` int(10) unsigned NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `country_version` LIKE `country`;
ALTER TABLE `country_version` MODIFY `id` int(10) unsigned NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `ethnic_group_version` LIKE `ethnic_group`;
ALTER TABLE `ethnic_group_version` MODIFY `id` int(10) unsigned NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `address_version` LIKE `address`;
ALTER TABLE `address_version` MODIFY `id` int(10) unsigned NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `gp_version` LIKE `gp`;
ALTER TABLE `gp_version` MODIFY `id` int(10) unsigned NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `practice_version` LIKE `practice`;
ALTER TABLE `practice_version` MODIFY `id` int(10) unsigned NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `contact_practice_associate_version` LIKE `contact_practice_associate`;
ALTER TABLE `contact_practice_associate_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `pasapi_xpath_remap_version` LIKE `pasapi_xpath_remap`;
ALTER TABLE `pasapi_xpath_remap_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `pasapi_remap_value_version` LIKE `pasapi_remap_value`;
ALTER TABLE `pasapi_remap_value_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `patient_merge_request_version` LIKE `patient_merge_request`;
ALTER TABLE `patient_merge_request_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  CHANGE `secondary_local_identifier_value` `secondary_hos_num` varchar(40) DEFAULT NULL,
  CHANGE `primary_global_identifier_value` `primary_nhsnum` varchar(40) DEFAULT NULL,
  CHANGE `secondary_global_identifier_value` `secondary_nhsnum` varchar(40) DEFAULT NULL,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;


-- The worklist tables PASAPI's bookings write are in the worklists block below.

-- --- Did Not Attend events (OphCiDidNotAttend, m210319_135357 for its settings) ------------------------
CREATE TABLE `et_ophcididnotattend_comments` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `event_id` int(10) unsigned NOT NULL,
  `comment` text DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`),
  CONSTRAINT `et_ophcididnotattend_comments_ev_fk` FOREIGN KEY (`event_id`) REFERENCES `event` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;
CREATE TABLE `et_ophcididnotattend_comments_version` LIKE `et_ophcididnotattend_comments`;
ALTER TABLE `et_ophcididnotattend_comments_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(10) unsigned NOT NULL AUTO_INCREMENT PRIMARY KEY;


SET foreign_key_checks = 1;

-- --- worklists (m160503_142416, m160510_075145, m160714_084347, m200818_130923, m210111_035237,
-- m210829_025416, m221124_154300) ------------------------------------------------------------------------
-- The worklists the Modality Worklist answers from: definitions (with their mappings, accepted values and
-- display contexts), generated instances (worklist, worklist_attribute, worklist_display_context),
-- bookings (worklist_patient) and their attribute values. All are createOETable tables (signed int(11)
-- ids, 1901 audit dates); worklist, worklist_patient, worklist_patient_attribute and worklist_definition
-- are versioned. Foreign keys to pathway_type and subspecialty are left out with those tables, and
-- event.worklist_patient_id keeps no key (see the header). Each table is created only where another block
-- has not.

SET foreign_key_checks = 0;

CREATE TABLE IF NOT EXISTS `worklist_definition` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `name` varchar(255) NOT NULL,
  `description` text DEFAULT NULL,
  `worklist_name` varchar(255) DEFAULT NULL,
  `rrule` text DEFAULT NULL,
  `start_time` time NOT NULL,
  `end_time` time NOT NULL,
  `active_from` datetime NOT NULL,
  `active_until` datetime DEFAULT NULL,
  `scheduled` tinyint(1) NOT NULL DEFAULT '0',
  `display_order` int(8) NOT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  -- m200818: the number space the definition serves (the Patient ID of its worklist answers).
  `patient_identifier_type_id` int(11) NOT NULL,
  -- m210829: `int NOT NULL DEFAULT 1`.
  `pathway_type_id` int(11) NOT NULL DEFAULT '1',
  PRIMARY KEY (`id`),
  CONSTRAINT `worklist_definition_fk_patient_identifier_type` FOREIGN KEY (`patient_identifier_type_id`) REFERENCES `patient_identifier_type` (`id`),
  CONSTRAINT `worklist_definition_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `worklist_definition_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE IF NOT EXISTS `worklist_definition_mapping` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `worklist_definition_id` int(11) NOT NULL,
  `key` varchar(255) NOT NULL,
  `display_order` int(2) DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`),
  CONSTRAINT `worklist_definition_mapping_wl_fk` FOREIGN KEY (`worklist_definition_id`) REFERENCES `worklist_definition` (`id`) ON DELETE CASCADE,
  CONSTRAINT `worklist_definition_mapping_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `worklist_definition_mapping_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE IF NOT EXISTS `worklist_definition_mapping_value` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `worklist_definition_mapping_id` int(11) NOT NULL,
  `mapping_value` varchar(1024) NOT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`),
  CONSTRAINT `worklist_definition_mapping_value_wldm_fk` FOREIGN KEY (`worklist_definition_mapping_id`) REFERENCES `worklist_definition_mapping` (`id`) ON DELETE CASCADE,
  CONSTRAINT `worklist_definition_mapping_value_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `worklist_definition_mapping_value_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE IF NOT EXISTS `worklist_definition_display_context` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `worklist_definition_id` int(11) NOT NULL,
  `firm_id` int(10) unsigned DEFAULT NULL,
  `subspecialty_id` int(10) unsigned DEFAULT NULL,
  `site_id` int(10) unsigned DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  -- m210111 (not versioned).
  `institution_id` int(10) unsigned DEFAULT NULL,
  PRIMARY KEY (`id`),
  CONSTRAINT `worklist_definition_dispctxt_wl_fk` FOREIGN KEY (`worklist_definition_id`) REFERENCES `worklist_definition` (`id`) ON DELETE CASCADE,
  CONSTRAINT `worklist_definition_dispctxt_firm_fk` FOREIGN KEY (`firm_id`) REFERENCES `firm` (`id`) ON DELETE CASCADE,
  CONSTRAINT `worklist_definition_dispctxt_site_fk` FOREIGN KEY (`site_id`) REFERENCES `site` (`id`) ON DELETE CASCADE,
  CONSTRAINT `worklist_definition_display_context_institution_id_fk` FOREIGN KEY (`institution_id`) REFERENCES `institution` (`id`),
  CONSTRAINT `worklist_definition_display_context_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `worklist_definition_display_context_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE IF NOT EXISTS `worklist` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `name` varchar(255) NOT NULL,
  `description` text DEFAULT NULL,
  `start` datetime DEFAULT NULL,
  `end` datetime DEFAULT NULL,
  `scheduled` tinyint(1) NOT NULL DEFAULT '0',
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  -- m160510: NULL for a manual worklist.
  `worklist_definition_id` int(11) DEFAULT NULL,
  PRIMARY KEY (`id`),
  KEY `worklist_start_IDX` (`start`) USING BTREE,
  KEY `worklist_end_IDX` (`end`) USING BTREE,
  CONSTRAINT `worklist_wldfn_fk` FOREIGN KEY (`worklist_definition_id`) REFERENCES `worklist_definition` (`id`) ON DELETE CASCADE,
  CONSTRAINT `worklist_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `worklist_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE IF NOT EXISTS `worklist_attribute` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `worklist_id` int(11) NOT NULL,
  `name` varchar(255) NOT NULL,
  `display_order` int(3) DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`),
  UNIQUE KEY `worklist_attribute_unique_order` (`display_order`,`worklist_id`),
  CONSTRAINT `worklist_attribute_wl_fk` FOREIGN KEY (`worklist_id`) REFERENCES `worklist` (`id`) ON DELETE CASCADE,
  CONSTRAINT `worklist_attribute_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `worklist_attribute_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE IF NOT EXISTS `worklist_display_context` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `worklist_id` int(11) NOT NULL,
  `firm_id` int(10) unsigned DEFAULT NULL,
  `subspecialty_id` int(10) unsigned DEFAULT NULL,
  `site_id` int(10) unsigned DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `institution_id` int(10) unsigned DEFAULT NULL,
  PRIMARY KEY (`id`),
  CONSTRAINT `worklist_dispctxt_wl_fk` FOREIGN KEY (`worklist_id`) REFERENCES `worklist` (`id`) ON DELETE CASCADE,
  CONSTRAINT `worklist_dispctxt_firm_fk` FOREIGN KEY (`firm_id`) REFERENCES `firm` (`id`) ON DELETE CASCADE,
  CONSTRAINT `worklist_dispctxt_site_fk` FOREIGN KEY (`site_id`) REFERENCES `site` (`id`) ON DELETE CASCADE,
  CONSTRAINT `worklist_display_context_institution_id_fk` FOREIGN KEY (`institution_id`) REFERENCES `institution` (`id`),
  CONSTRAINT `worklist_display_context_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `worklist_display_context_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE IF NOT EXISTS `worklist_patient` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `worklist_id` int(11) NOT NULL,
  `patient_id` int(10) unsigned NOT NULL,
  `when` datetime DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`),
  CONSTRAINT `worklist_patient_wl_fk` FOREIGN KEY (`worklist_id`) REFERENCES `worklist` (`id`) ON DELETE CASCADE,
  CONSTRAINT `worklist_patient_p_fk` FOREIGN KEY (`patient_id`) REFERENCES `patient` (`id`) ON DELETE CASCADE,
  CONSTRAINT `worklist_patient_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `worklist_patient_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

CREATE TABLE IF NOT EXISTS `worklist_patient_attribute` (
  `id` int(11) NOT NULL AUTO_INCREMENT,
  `worklist_attribute_id` int(11) NOT NULL,
  `worklist_patient_id` int(11) NOT NULL,
  `attribute_value` varchar(255) DEFAULT NULL,
  `last_modified_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `last_modified_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  `created_user_id` int(10) unsigned NOT NULL DEFAULT '1',
  `created_date` datetime NOT NULL DEFAULT '1901-01-01 00:00:00',
  PRIMARY KEY (`id`),
  -- m160714, on the base table only.
  UNIQUE KEY `worklist_patient_attribute_p_unique` (`worklist_attribute_id`,`worklist_patient_id`),
  CONSTRAINT `worklist_patient_attribute_attr_fk` FOREIGN KEY (`worklist_attribute_id`) REFERENCES `worklist_attribute` (`id`) ON DELETE CASCADE,
  CONSTRAINT `worklist_patient_attribute_pat_fk` FOREIGN KEY (`worklist_patient_id`) REFERENCES `worklist_patient` (`id`) ON DELETE CASCADE,
  CONSTRAINT `worklist_patient_attribute_lmui_fk` FOREIGN KEY (`last_modified_user_id`) REFERENCES `user` (`id`),
  CONSTRAINT `worklist_patient_attribute_cui_fk` FOREIGN KEY (`created_user_id`) REFERENCES `user` (`id`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8 COLLATE=utf8_unicode_ci;

-- The twins (createOETable(..., true); addOEColumn(..., true) for the definition's two later columns).
CREATE TABLE `worklist_definition_version` LIKE `worklist_definition`;
ALTER TABLE `worklist_definition_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `worklist_version` LIKE `worklist`;
ALTER TABLE `worklist_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `worklist_patient_version` LIKE `worklist_patient`;
ALTER TABLE `worklist_patient_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY;
CREATE TABLE `worklist_patient_attribute_version` LIKE `worklist_patient_attribute`;
ALTER TABLE `worklist_patient_attribute_version` MODIFY `id` int(11) NOT NULL, DROP PRIMARY KEY,
  DROP INDEX `worklist_patient_attribute_p_unique`,
  ADD `version_date` datetime NOT NULL, ADD `version_id` int(11) NOT NULL AUTO_INCREMENT PRIMARY KEY;

SET foreign_key_checks = 1;
