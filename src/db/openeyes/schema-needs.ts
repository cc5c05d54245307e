/**
 * What the service needs of an OpenEyes database (DATABASE_SCHEMA=openeyes): every OpenEyes table and
 * column it reads or writes, the kind of value it reads or writes there, and which columns each of its
 * INSERTs fills. `checkOpenEyesSchema` compares this list with the database's `information_schema`.
 *
 * The list is of the service's access in openeyes mode, where it differs from its own schema
 * (src/db/schema.ts) in the ways a real, fully migrated OpenEyes v6.8 database differs:
 * - logins read `user_authentication.active` only (`user.active` moved there, m200517);
 * - e-sign and attachment element types are found by class name (OpenEyes has no `table_name`);
 * - `event` rows are inserted with `institution_id` and `created_user_id`, which have no default, and
 *   with a row of the attachment element's table (`et_ophgeneric_attachment`);
 * - `authassignment.userid` is an integer there (compared with the user id, never written);
 * - nothing is written to users, roles or request types; patients, contacts, addresses, identifiers and
 *   merge requests only by the PAS endpoint (PASAPI), with their `_version` copies.
 * A query that reads or writes an OpenEyes column not listed here is a bug of this list.
 */

/** How the service uses a column, which decides the column types it accepts. */
export type ColumnKind =
  /** Ids, counts, unix seconds: `int` or `bigint`. */
  | 'int'
  /** Measures: `decimal`, `float` or `double`. */
  | 'decimal'
  /** 48-bit content hashes: `bigint`. */
  | 'bigint'
  /** 0/1 flags and small codes: any integer type. */
  | 'flag'
  /** Text: char, varchar or a text type, long enough (see `minChars` / `minBytes`). */
  | 'text'
  | 'datetime'
  | 'date'
  /** Audit dates of tables that older OpenEyes releases declared as `date`. */
  | 'date-or-datetime'
  /** Binary: a blob type of at least `minBytes`. */
  | 'blob'
  /** The user id of a role assignment: an integer (OpenEyes) or text (Yii's own RBAC schema). */
  | 'int-or-text';

export interface ColumnNeed {
  readonly kind: ColumnKind;
  /** Every INSERT of the service into the table fills this column. */
  readonly isInserted?: boolean;
  /** The service updates this column. */
  readonly isUpdated?: boolean;
  /** The service writes NULL here (the column must be nullable). */
  readonly isNullWritten?: boolean;
  /** Longest text the service writes, in characters (char/varchar/text). */
  readonly minChars?: number;
  /** Largest value the service writes, in bytes (text and blob types). */
  readonly minBytes?: number;
  /** Compared through the column's collation and expected to match regardless of case. */
  readonly isCaseInsensitive?: boolean;
}

export interface TableNeed {
  readonly columns: Readonly<Record<string, ColumnNeed>>;
  /** The service deletes rows of this table. */
  readonly isDeleted?: boolean;
  /**
   * The service updates or deletes rows of this versioned OpenEyes table, so it copies each row into
   * `<table>_version` first, as OpenEyes's versioning does.
   */
  readonly isVersionedWrite?: boolean;
}

const read = (kind: ColumnKind, more: Omit<ColumnNeed, 'kind'> = {}): ColumnNeed => ({ kind, ...more });
const inserted = (kind: ColumnKind, more: Omit<ColumnNeed, 'kind' | 'isInserted'> = {}): ColumnNeed => ({
  kind,
  isInserted: true,
  ...more,
});
const updated = (kind: ColumnKind, more: Omit<ColumnNeed, 'kind' | 'isUpdated'> = {}): ColumnNeed => ({
  kind,
  isUpdated: true,
  ...more,
});

/**
 * The four OpenEyes audit columns, filled on every insert (OpenEyes defaults them to placeholder 1900/1901
 * dates).
 */
const INSERTED_AUDIT = {
  created_user_id: inserted('int'),
  created_date: inserted('datetime'),
  last_modified_user_id: inserted('int'),
  last_modified_date: inserted('datetime'),
} as const;

/** The audit columns of a table whose rows the service inserts and also updates. */
const WRITTEN_AUDIT = {
  created_user_id: inserted('int'),
  created_date: inserted('datetime'),
  last_modified_user_id: inserted('int', { isUpdated: true }),
  last_modified_date: inserted('datetime', { isUpdated: true }),
} as const;

/** Longest JSON, form or header text of a queued request the service stores (raw bodies up to 100 MiB). */
const REQUEST_TEXT_BYTES = 100 * 1024 * 1024;
/** Largest attachment blob the service stores (raw uploads up to 100 MiB; the config allows 4 GiB). */
const ATTACHMENT_BYTES = 100 * 1024 * 1024;
/** Largest thumbnail the service stores (a 640 px JPEG). */
const THUMBNAIL_BYTES = 1024 * 1024;
/** Longest routine log the service writes per attempt. */
const ROUTINE_LOG_BYTES = 64 * 1024 - 1;

/** `need` for the `_left` and `_right` column of each of `names`. */
function bothSides(names: readonly string[], need: ColumnNeed): Record<string, ColumnNeed> {
  return Object.fromEntries(
    names.flatMap((n) => [
      [`${n}_left`, need],
      [`${n}_right`, need],
    ]),
  );
}

/** An element row of a Biometry event, inserted and merged as later files of its study come. */
const BIOMETRY_ELEMENT = {
  id: read('int'),
  event_id: inserted('int'),
  eye_id: inserted('int', { isUpdated: true }),
  ...WRITTEN_AUDIT,
} as const;

/** What biometry filing reads and writes (the OphInBiometry module's tables and lookups). */
const BIOMETRY_TABLE_NEEDS: Readonly<Record<string, TableNeed>> = {
  dicom_eye_status: { columns: { id: read('int') } },
  ophinbiometry_calculation_formula: {
    columns: {
      id: read('int'),
      name: inserted('text', { minChars: 128 }),
      display_order: inserted('int'),
      ...INSERTED_AUDIT,
    },
  },
  ophinbiometry_lenstype_lens: {
    columns: {
      id: read('int'),
      name: inserted('text', { minChars: 128 }),
      display_name: inserted('text', { minChars: 255 }),
      description: inserted('text', { minChars: 255 }),
      comments: inserted('text', { minChars: 30 }),
      position_id: inserted('int'),
      acon: inserted('decimal'),
      active: inserted('flag'),
      deleted: read('flag'),
      ...INSERTED_AUDIT,
    },
  },
  ophinbiometry_lenstype_lens_institution: {
    columns: {
      id: read('int'),
      lenstype_lens_id: inserted('int'),
      institution_id: inserted('int'),
      ...INSERTED_AUDIT,
    },
  },
  ophinbiometry_surgeon: { columns: { id: read('int'), name: inserted('text', { minChars: 255 }) } },
  ophinbiometry_imported_events: {
    columns: {
      id: read('int'),
      event_id: inserted('int'),
      patient_id: inserted('int'),
      study_id: inserted('text', { isNullWritten: true, minChars: 64 }),
      device_id: inserted('text', { isNullWritten: true }),
      device_name: inserted('text', { isNullWritten: true }),
      device_model: inserted('text', { isNullWritten: true }),
      device_manufacturer: inserted('text', { isNullWritten: true }),
      device_software_version: inserted('text', { isNullWritten: true, minChars: 20 }),
      is_linked: inserted('flag'),
      is_merged: inserted('flag', { isUpdated: true }),
      content_datetime: inserted('datetime', { isUpdated: true, isNullWritten: true }),
      surgeon_name: inserted('text', { isUpdated: true, isNullWritten: true }),
      series_id: inserted('text', { isNullWritten: true, minChars: 64 }),
      device_serial_number: inserted('text', { isNullWritten: true, minChars: 20 }),
      acquisition_datetime: inserted('text', { isNullWritten: true, minChars: 25 }),
      sop_uid: inserted('text', { isUpdated: true, isNullWritten: true, minChars: 64 }),
      ...WRITTEN_AUDIT,
    },
  },
  et_ophinbiometry_measurement: {
    isVersionedWrite: true,
    columns: {
      ...BIOMETRY_ELEMENT,
      deleted: read('flag'),
      ...bothSides(
        ['k1', 'k2', 'axial_length', 'acd', 'delta_k', 'refraction_sphere', 'refraction_delta'],
        inserted('decimal', { isUpdated: true }),
      ),
      ...bothSides(
        ['k1_axis', 'k2_axis', 'delta_k_axis', 'refraction_axis', 'snr_min'],
        inserted('decimal', { isUpdated: true }),
      ),
      ...bothSides(['snr'], inserted('decimal', { isUpdated: true, isNullWritten: true })),
      ...bothSides(['eye_status'], inserted('int', { isUpdated: true })),
      ...bothSides(['al_modified', 'k_modified'], inserted('flag', { isUpdated: true })),
      ...bothSides(['lvc', 'lvc_mode'], inserted('text', { isUpdated: true, isNullWritten: true })),
    },
  },
  et_ophinbiometry_calculation: {
    isVersionedWrite: true,
    columns: {
      ...BIOMETRY_ELEMENT,
      deleted: read('flag'),
      ...bothSides(['target_refraction'], inserted('decimal', { isUpdated: true, isNullWritten: true })),
      ...bothSides(['formula_id'], inserted('int', { isUpdated: true })),
      comments: inserted('text', { isNullWritten: true }),
    },
  },
  et_ophinbiometry_selection: {
    isVersionedWrite: true,
    columns: {
      ...BIOMETRY_ELEMENT,
      deleted: read('flag'),
      ...bothSides(['lens_id'], inserted('int')),
      ...bothSides(['formula_id'], inserted('int', { isUpdated: true })),
    },
  },
  et_ophinbiometry_iol_ref_values: {
    isVersionedWrite: true,
    columns: {
      ...BIOMETRY_ELEMENT,
      lens_id: inserted('int'),
      formula_id: inserted('int'),
      ...bothSides(
        ['iol_ref_values'],
        inserted('text', { isUpdated: true, isNullWritten: true, minChars: 1000 }),
      ),
      ...bothSides(['emmetropia'], inserted('decimal', { isUpdated: true, isNullWritten: true })),
      constant: inserted('decimal', { isNullWritten: true }),
      active: inserted('flag'),
      surgeon_id: inserted('int', { isNullWritten: true }),
    },
  },
};

/** What the PAS endpoint (PASAPI) reads and writes beyond patients, contacts and identifiers. */
const PAS_TABLE_NEEDS: Readonly<Record<string, TableNeed>> = {
  country: { columns: { id: read('int'), code: read('text') } },
  ethnic_group: { columns: { id: read('int'), code: read('text'), deleted: read('flag') } },
  gp: { columns: { id: read('int'), nat_id: read('text') } },
  practice: { columns: { id: read('int'), code: read('text') } },
  address: {
    // The PAS is the master: addresses it no longer sends are deleted, their last version kept.
    isVersionedWrite: true,
    isDeleted: true,
    columns: {
      id: read('int'),
      contact_id: inserted('int'),
      address1: inserted('text', { isUpdated: true, isNullWritten: true, minChars: 255 }),
      address2: inserted('text', { isUpdated: true, isNullWritten: true, minChars: 255 }),
      city: inserted('text', { isUpdated: true, isNullWritten: true, minChars: 255 }),
      county: inserted('text', { isUpdated: true, isNullWritten: true, minChars: 255 }),
      postcode: inserted('text', { isUpdated: true, isNullWritten: true, minChars: 10 }),
      country_id: inserted('int', { isUpdated: true }),
      address_type_id: inserted('int', { isUpdated: true, isNullWritten: true }),
      ...WRITTEN_AUDIT,
    },
  },
  pasapi_assignment: {
    isDeleted: true,
    columns: {
      id: read('int'),
      resource_type: inserted('text', { minChars: 40 }),
      resource_id: inserted('text', { minChars: 40 }),
      internal_type: inserted('text', { isUpdated: true, minChars: 40 }),
      internal_id: inserted('int', { isUpdated: true }),
      ...WRITTEN_AUDIT,
    },
  },
  pasapi_xpath_remap: { columns: { id: read('int'), xpath: read('text'), institution_id: read('int') } },
  pasapi_remap_value: {
    columns: { id: read('int'), xpath_id: read('int'), input: read('text'), output: read('text') },
  },
  patient_merge_request: {
    isVersionedWrite: true,
    columns: {
      id: read('int'),
      primary_id: inserted('int'),
      primary_local_identifier_value: inserted('text', { minChars: 40 }),
      primary_global_identifier_value: inserted('text', { minChars: 40 }),
      primary_dob: inserted('date', { isNullWritten: true }),
      primary_gender: inserted('text', { isNullWritten: true }),
      secondary_id: inserted('int'),
      secondary_local_identifier_value: inserted('text', { minChars: 40 }),
      secondary_global_identifier_value: inserted('text', { minChars: 40 }),
      secondary_dob: inserted('date', { isNullWritten: true }),
      secondary_gender: inserted('text', { isNullWritten: true }),
      merge_json: updated('text', { minBytes: 64 * 1024 - 1 }),
      status: inserted('flag', { isUpdated: true }),
      deleted: read('flag'),
      ...WRITTEN_AUDIT,
    },
  },
  // PatientAppointment: the definitions and generated instances a booking may land on, read; the
  // booking and its attribute values written, updated and deleted.
  worklist_definition: {
    columns: { id: read('int'), display_order: read('int'), patient_identifier_type_id: read('int') },
  },
  worklist_definition_mapping: {
    columns: {
      id: read('int'),
      worklist_definition_id: read('int'),
      key: read('text'),
      display_order: read('int'),
    },
  },
  worklist_definition_mapping_value: {
    columns: { worklist_definition_mapping_id: read('int'), mapping_value: read('text') },
  },
  worklist: {
    columns: {
      id: read('int'),
      name: read('text'),
      start: read('datetime'),
      end: read('datetime'),
      worklist_definition_id: read('int'),
    },
  },
  worklist_attribute: { columns: { id: read('int'), worklist_id: read('int'), name: read('text') } },
  worklist_patient: {
    isVersionedWrite: true,
    isDeleted: true,
    columns: {
      id: read('int'),
      worklist_id: inserted('int', { isUpdated: true }),
      patient_id: inserted('int', { isUpdated: true }),
      when: inserted('datetime', { isUpdated: true }),
      ...WRITTEN_AUDIT,
    },
  },
  worklist_patient_attribute: {
    isVersionedWrite: true,
    isDeleted: true,
    columns: {
      id: read('int'),
      worklist_attribute_id: inserted('int'),
      worklist_patient_id: inserted('int'),
      attribute_value: inserted('text', { isUpdated: true, minChars: 255 }),
      ...WRITTEN_AUDIT,
    },
  },
  // DidNotAttend: the automated event's comments element.
  et_ophcididnotattend_comments: {
    columns: {
      id: read('int'),
      event_id: inserted('int'),
      comment: inserted('text', { minBytes: 64 * 1024 - 1 }),
      ...INSERTED_AUDIT,
    },
  },
};

/**
 * What the Modality Worklist reads: the bookings of automatic worklists (read in place, never written
 * by the worklist SCP), their instances, definitions, display contexts and attribute values.
 */
const WORKLIST_TABLE_NEEDS: Readonly<Record<string, TableNeed>> = {
  worklist_definition: { columns: { id: read('int'), patient_identifier_type_id: read('int') } },
  worklist_definition_display_context: {
    columns: { id: read('int'), worklist_definition_id: read('int'), site_id: read('int') },
  },
  worklist: {
    columns: {
      id: read('int'),
      name: read('text'),
      start: read('datetime'),
      worklist_definition_id: read('int'),
    },
  },
  worklist_attribute: { columns: { id: read('int'), name: read('text') } },
  worklist_patient: {
    columns: { id: read('int'), worklist_id: read('int'), patient_id: read('int'), when: read('datetime') },
  },
  worklist_patient_attribute: {
    columns: {
      worklist_attribute_id: read('int'),
      worklist_patient_id: read('int'),
      attribute_value: read('text'),
    },
  },
};

/**
 * Two groups of needs as one: a table both name gets the columns of both, and a column both name gets
 * the first group's need with the second's flags and sizes added (the larger size wins).
 */
function unionOfNeeds(
  first: Readonly<Record<string, TableNeed>>,
  second: Readonly<Record<string, TableNeed>>,
): Record<string, TableNeed> {
  const union: Record<string, TableNeed> = { ...first };
  for (const [table, need] of Object.entries(second)) {
    const had = union[table];
    if (had === undefined) {
      union[table] = need;
      continue;
    }
    const columns: Record<string, ColumnNeed> = { ...had.columns };
    for (const [name, column] of Object.entries(need.columns)) {
      const was = columns[name];
      columns[name] = was === undefined ? column : unionOfColumn(table, name, was, column);
    }
    union[table] = {
      columns,
      isDeleted: had.isDeleted === true || need.isDeleted === true,
      isVersionedWrite: had.isVersionedWrite === true || need.isVersionedWrite === true,
    };
  }
  return union;
}

function unionOfColumn(table: string, name: string, a: ColumnNeed, b: ColumnNeed): ColumnNeed {
  if (a.kind !== b.kind)
    throw new Error(`schema needs: ${table}.${name} is needed as ${a.kind} and as ${b.kind}`);
  const larger = (x: number | undefined, y: number | undefined) =>
    x === undefined ? y : y === undefined ? x : Math.max(x, y);
  const either = (x: boolean | undefined, y: boolean | undefined) =>
    x === true || y === true ? true : undefined;
  const union: ColumnNeed = {
    kind: a.kind,
    isInserted: either(a.isInserted, b.isInserted),
    isUpdated: either(a.isUpdated, b.isUpdated),
    isNullWritten: either(a.isNullWritten, b.isNullWritten),
    minChars: larger(a.minChars, b.minChars),
    minBytes: larger(a.minBytes, b.minBytes),
    isCaseInsensitive: either(a.isCaseInsensitive, b.isCaseInsensitive),
  };
  return Object.fromEntries(
    Object.entries(union).filter(([, v]) => v !== undefined),
  ) as unknown as ColumnNeed;
}

/** Every OpenEyes table the service reads or writes, by name. */
export const OPENEYES_TABLE_NEEDS: Readonly<Record<string, TableNeed>> = {
  // --- logins and roles: read only ------------------------------------------------------------------------
  user: { columns: { id: read('int') } },
  user_authentication: {
    columns: {
      id: read('int'),
      institution_authentication_id: read('int'),
      user_id: read('int'),
      username: read('text', { isCaseInsensitive: true }),
      password_hash: read('text', { minChars: 60 }),
      password_salt: read('text'),
      password_status: read('text'),
      password_softlocked_until: read('datetime'),
      active: read('flag'),
    },
  },
  authitem: { columns: { name: read('text'), type: read('flag') } },
  authitemchild: { columns: { parent: read('text'), child: read('text') } },
  authassignment: { columns: { itemname: read('text'), userid: read('int-or-text') } },

  // --- patient search: read only -------------------------------------------------------------------------
  institution: {
    columns: { id: read('int'), remote_id: read('text'), any_number_search_allowed: read('flag') },
  },
  site: { columns: { id: read('int'), institution_id: read('int') } },
  setting_metadata: { columns: { key: read('text'), default_value: read('text') } },
  setting_installation: { columns: { key: read('text'), value: read('text') } },
  setting_institution: { columns: { institution_id: read('int'), key: read('text'), value: read('text') } },
  setting_site: { columns: { site_id: read('int'), key: read('text'), value: read('text') } },
  // PASAPI writes patients, their contacts and identifiers (and retires a merged patient).
  patient: {
    isVersionedWrite: true,
    columns: {
      id: read('int'),
      contact_id: inserted('int'),
      dob: inserted('date', { isUpdated: true, isNullWritten: true }),
      date_of_death: inserted('date', { isUpdated: true, isNullWritten: true }),
      is_deceased: inserted('flag', { isUpdated: true }),
      gender: inserted('text', { isUpdated: true, isNullWritten: true, minChars: 1 }),
      deleted: updated('flag'),
      is_local: read('flag'),
      ethnic_group_id: updated('int', { isNullWritten: true }),
      gp_id: updated('int', { isNullWritten: true }),
      practice_id: updated('int', { isNullWritten: true }),
      primary_institution_id: updated('int', { isNullWritten: true }),
      ...WRITTEN_AUDIT,
    },
  },
  contact: {
    isVersionedWrite: true,
    columns: {
      id: read('int'),
      title: inserted('text', { isUpdated: true, isNullWritten: true, minChars: 20 }),
      first_name: inserted('text', { isUpdated: true, isCaseInsensitive: true, minChars: 300 }),
      last_name: inserted('text', { isUpdated: true, isCaseInsensitive: true, minChars: 100 }),
      primary_phone: updated('text', { isNullWritten: true, minChars: 20 }),
      mobile_phone: updated('text', { isNullWritten: true, minChars: 50 }),
      email: updated('text', { isNullWritten: true, minChars: 255 }),
      ...WRITTEN_AUDIT,
    },
  },
  patient_identifier: {
    isVersionedWrite: true,
    columns: {
      id: read('int'),
      patient_id: inserted('int'),
      patient_identifier_type_id: inserted('int'),
      value: inserted('text', { isUpdated: true, isCaseInsensitive: true, minChars: 40 }),
      source_info: inserted('text', { isUpdated: true, minChars: 255 }),
      deleted: inserted('flag', { isUpdated: true }),
      unique_row_string: inserted('text', { isUpdated: true, minChars: 255 }),
      ...WRITTEN_AUDIT,
    },
  },
  patient_identifier_type: {
    columns: {
      id: read('int'),
      usage_type: read('text'),
      short_title: read('text'),
      long_title: read('text'),
      institution_id: read('int'),
      site_id: read('int'),
      validate_regex: read('text'),
      pad: read('text'),
      value_display_prefix: read('text'),
      value_display_suffix: read('text'),
      spacing_rule: read('text'),
      unique_row_string: read('text'),
    },
  },
  patient_identifier_type_display_order: {
    columns: {
      id: read('int'),
      institution_id: read('int'),
      site_id: read('int'),
      patient_identifier_type_id: read('int'),
      display_order: read('int'),
      searchable: read('flag'),
      search_protocol_prefix: read('text'),
    },
  },

  // --- events, elements and sign/add --------------------------------------------------------------------
  event_type: { columns: { id: read('int'), class_name: read('text') } },
  element_type: { columns: { id: read('int'), class_name: read('text'), event_type_id: read('int') } },
  // Device filing: the subspecialty (service assignment) of the configured firm and of episodes' firms.
  firm: { columns: { id: read('int'), service_subspecialty_assignment_id: read('int') } },
  // A worklist entry whose display context names a subspecialty: the episodes of that subspecialty's firms.
  service_subspecialty_assignment: { columns: { id: read('int'), subspecialty_id: read('int') } },
  episode: {
    columns: {
      id: read('int'),
      // A PAS merge moves the retired patient's episodes to the survivor.
      patient_id: inserted('int', { isUpdated: true }),
      start_date: inserted('datetime'),
      end_date: read('datetime'),
      deleted: read('flag'),
      // Device filing chooses the most recent open episode that is not legacy or support services,
      // preferring the configured firm's subspecialty, and opens new ones for that firm.
      firm_id: inserted('int', { isNullWritten: true }),
      legacy: read('flag'),
      support_services: read('flag'),
      change_tracker: read('flag'),
      episode_status_id: read('int'),
      ...INSERTED_AUDIT,
    },
  },
  event: {
    isVersionedWrite: true,
    columns: {
      id: read('int'),
      // NULL for a Biometry event: OpenEyes links it to an episode.
      episode_id: inserted('int', { isNullWritten: true }),
      event_type_id: inserted('int'),
      event_date: inserted('datetime'),
      info: inserted('text', { isUpdated: true, isNullWritten: true, minChars: 1024 }),
      deleted: read('flag'),
      is_automated: inserted('flag'),
      automated_source: inserted('text', { minChars: 64 }),
      institution_id: inserted('int'),
      site_id: inserted('int', { isNullWritten: true }),
      // Device filing: the episode's firm (NULL without one).
      firm_id: read('int', { isNullWritten: true }),
      // A deleted PAS booking: its events keep everything but the link.
      worklist_patient_id: updated('int', { isNullWritten: true }),
      ...WRITTEN_AUDIT,
    },
  },
  unique_codes: {
    columns: { id: read('int'), code: read('text', { isCaseInsensitive: true }), active: read('flag') },
  },
  unique_codes_mapping: { columns: { unique_code_id: read('int'), event_id: read('int') } },
  et_ophcocvi_esign: { columns: { id: read('int'), event_id: read('int') } },
  protected_file: {
    columns: {
      id: read('int'),
      uid: inserted('text', { minChars: 40 }),
      name: inserted('text', { minChars: 64 }),
      title: inserted('text'),
      description: inserted('text'),
      mimetype: inserted('text', { minChars: 64 }),
      size: inserted('text', { minChars: 20 }),
      ...INSERTED_AUDIT,
    },
  },
  ophcocvi_signature: {
    columns: {
      id: read('int'),
      element_id: inserted('int'),
      type: inserted('flag'),
      signature_file_id: inserted('int'),
      signed_user_id: inserted('int', { isNullWritten: true }),
      signatory_role: inserted('text', { minChars: 7 }),
      signatory_name: inserted('text', { minChars: 64 }),
      timestamp: inserted('int'),
      ...INSERTED_AUDIT,
    },
  },
  signature_import_log: {
    columns: {
      id: read('int'),
      filename: inserted('text', { minChars: 255 }),
      import_datetime: inserted('datetime'),
      // Operators move a failed row to Manual or Manual Ignore (the console, manual crop).
      status_id: inserted('flag', { isUpdated: true }),
      return_message: inserted('text', { minChars: 255 }),
      event_id: inserted('int', { isNullWritten: true }),
      cropped_file_id: inserted('int', { isNullWritten: true }),
      created_user_id: inserted('int'),
      created_date: inserted('date-or-datetime'),
      last_modified_user_id: inserted('int', { isUpdated: true }),
      last_modified_date: inserted('date-or-datetime', { isUpdated: true }),
    },
  },

  // --- request queue and attachments ---------------------------------------------------------------------
  mime_type: { columns: { mime_type: read('text') } },
  attachment_type: { columns: { attachment_type: read('text') } },
  request_type: {
    columns: {
      request_type: read('text'),
      default_routine_name: read('text'),
      default_request_queue: read('text'),
    },
  },
  request_queue: {
    columns: {
      request_queue: read('text'),
      maximum_active_threads: read('int'),
      busy_yield_ms: read('int'),
      idle_yield_ms: read('int'),
      total_active_thread_count: updated('int'),
      total_execute_count: updated('int'),
      total_success_count: updated('int'),
      total_fail_count: updated('int'),
      last_thread_spawn_date: updated('datetime'),
      last_thread_spawn_request_id: updated('int'),
    },
  },
  routine_library: {
    columns: { routine_name: inserted('text', { minChars: 20 }), hash_code: inserted('bigint') },
  },
  request: {
    columns: {
      id: read('int'),
      request_type: inserted('text'),
      system_message: inserted('text', { minChars: 255 }),
      request_override_default_queue: inserted('text', { isNullWritten: true }),
      ...INSERTED_AUDIT,
    },
  },
  attachment_data: {
    columns: {
      id: read('int'),
      request_id: inserted('int'),
      attachment_mnemonic: inserted('text', { minChars: 45 }),
      // Device filing sets the eye and the profile's attachment type of the images and PDFs it files.
      body_site_snomed_type: inserted('text', { isNullWritten: true, isUpdated: true }),
      system_only_managed: inserted('flag'),
      // A biometry report is typed `Biometry Report` when it is filed.
      attachment_type: inserted('text', { isUpdated: true }),
      mime_type: inserted('text', { minChars: 45 }),
      blob_data: inserted('blob', { isUpdated: true, isNullWritten: true, minBytes: ATTACHMENT_BYTES }),
      text_data: inserted('text', { isUpdated: true, isNullWritten: true, minBytes: REQUEST_TEXT_BYTES }),
      upload_file_name: inserted('text', { isNullWritten: true, minChars: 100 }),
      thumbnail_small_blob: updated('blob', { minBytes: THUMBNAIL_BYTES }),
      thumbnail_medium_blob: updated('blob', { minBytes: THUMBNAIL_BYTES }),
      thumbnail_large_blob: updated('blob', { minBytes: THUMBNAIL_BYTES }),
      hash_code: inserted('bigint', { isUpdated: true, isNullWritten: true }),
      ...WRITTEN_AUDIT,
    },
  },
  // OpenEyes's attachment element: an event the worker files attachments under gets its row.
  et_ophgeneric_attachment: {
    columns: { id: read('int'), event_id: inserted('int'), ...INSERTED_AUDIT },
  },
  event_attachment_group: {
    columns: {
      id: read('int'),
      event_id: inserted('int'),
      element_type_id: inserted('int'),
      ...INSERTED_AUDIT,
    },
  },
  event_attachment_item: {
    columns: {
      id: read('int'),
      event_attachment_group_id: inserted('int'),
      attachment_data_id: inserted('int'),
      system_only_managed: inserted('flag'),
      event_document_view_set: inserted('text', { isNullWritten: true }),
      ...INSERTED_AUDIT,
    },
  },
  // --- device filing: one OphGeneric event per patient and study ------------------------------------------
  event_subtype: { columns: { event_subtype: read('text') } },
  episode_status: { columns: { id: read('int'), name: read('text') } },
  event_subtype_item: {
    columns: {
      id: read('int'),
      event_id: inserted('int'),
      event_subtype: inserted('text', { minChars: 100 }),
      display_order: inserted('int'),
      ...INSERTED_AUDIT,
    },
  },
  et_ophgeneric_comments: {
    columns: {
      id: read('int'),
      event_id: inserted('int'),
      comment: inserted('text', { isNullWritten: true }),
      ...INSERTED_AUDIT,
    },
  },
  et_ophgeneric_device_information: {
    // Both eyes of a study in: laterality and image laterality become B.
    isVersionedWrite: true,
    columns: {
      id: read('int'),
      event_id: inserted('int'),
      last_request_id: inserted('int'),
      // Device-filing's DEVICE_INFORMATION_COLUMNS, which src/db may not import (it sits below the
      // modules); src/modules/device-filing/tables.test.ts holds the two equal.
      ...Object.fromEntries(
        [
          'manufacturer',
          'manufacturer_model_name',
          'modality',
          'series_description',
          'study_description',
          'document_title',
          'acquisition_date_time',
          'study_date',
          'study_time',
          'content_date',
          'content_time',
          'station_name',
          'operators_name',
          'software_version',
          'study_instance_uid',
          'series_instance_uid',
          'study_id',
          'series_number',
          'instance_number',
          'modifying_system',
          'operator_identification_sequence',
          'model_version',
          'sop_instance_uid',
        ].map((column) => [column, inserted('text', { isNullWritten: true, minChars: 64 })]),
      ),
      laterality: inserted('text', { isNullWritten: true, isUpdated: true }),
      image_laterality: inserted('text', { isNullWritten: true, isUpdated: true }),
      ...WRITTEN_AUDIT,
    },
  },
  et_ophgeneric_hfa: {
    // The element's eye widens to both (3) once both eyes have their entry.
    isVersionedWrite: true,
    columns: {
      id: read('int'),
      event_id: inserted('int'),
      eye_id: inserted('int', { isUpdated: true }),
      ...WRITTEN_AUDIT,
    },
  },
  // Inserted only, never updated (OpenEyes's trigger would rewrite the eye's whole field history).
  ophgeneric_hfa_entry: {
    columns: {
      id: read('int'),
      element_id: inserted('int'),
      eye_id: inserted('int'),
      mean_deviation: inserted('text', { minChars: 8 }),
      visual_field_index: inserted('text', { minChars: 3 }),
      ...INSERTED_AUDIT,
    },
  },
  request_routine: {
    columns: {
      id: read('int'),
      request_id: inserted('int'),
      execute_request_queue: inserted('text'),
      status: inserted('text', { isUpdated: true, minChars: 8 }),
      routine_name: inserted('text', { minChars: 20 }),
      try_count: inserted('int', { isUpdated: true }),
      next_try_date_time: inserted('datetime', { isUpdated: true, isNullWritten: true }),
      execute_sequence: inserted('int', { isUpdated: true }),
      hash_code: inserted('bigint', { isUpdated: true, isNullWritten: true }),
    },
  },
  request_routine_execution: {
    columns: {
      id: read('int'),
      request_routine_id: inserted('int'),
      log_text: inserted('text', { minBytes: ROUTINE_LOG_BYTES }),
      execution_date_time: inserted('datetime'),
      status: inserted('text', { minChars: 8 }),
      try_number: inserted('int'),
    },
  },
  // A routine's named lock is an upsert whose update assigns the key to itself (the UPDATE privilege).
  request_routine_lock: { columns: { routine_lock: inserted('text', { minChars: 64, isUpdated: true }) } },
  // Held in share mode by the worker against the Java processor; a missing queue's row is added.
  request_queue_lock: { columns: { request_queue: inserted('text') } },
  request_details: {
    // Routines replace a request's detail rows (REQUEST_DATA shredded again).
    isVersionedWrite: true,
    isDeleted: true,
    columns: {
      id: read('int'),
      request_id: inserted('int'),
      name: inserted('text', { minChars: 100 }),
      value: inserted('text', { minChars: 255 }),
      ...INSERTED_AUDIT,
    },
  },

  // --- biometry (OphInBiometry) --------------------------------------------------------------------------
  ...BIOMETRY_TABLE_NEEDS,

  // --- the PAS endpoint (PASAPI) and the Modality Worklist: both use the worklist tables -------------------
  ...unionOfNeeds(PAS_TABLE_NEEDS, WORKLIST_TABLE_NEEDS),
};
