/**
 * SQL of sign/add, written once for both dialects.
 */
import type { Kysely, RawBuilder, Transaction } from 'kysely';
import { sql } from 'kysely';
import { runCompiled } from '../../db/compiled-queries.ts';
import type { Database } from '../../db/database.ts';
import type { DB } from '../../db/schema.ts';
import { MAX_ID } from './signature-body.ts';

type Db = Kysely<DB> | Transaction<DB>;

/**
 * E-signature element types (a signature may only go to one): a type is one when its `table_name` is a
 * signature element table, or, for rows imported without `table_name`, when its class is a known
 * e-sign class. Only `et_ophcocvi_esign` can hold signatures (`ophcocvi_signature.element_id` references
 * it), so the list is a constant rather than a setting.
 */
export const SIGNATURE_ELEMENT_TABLE = 'et_ophcocvi_esign';
export const SIGNATURE_ELEMENT_CLASSES: readonly string[] = [
  'OEModule\\OphCoCvi\\models\\Element_OphCoCvi_Esign',
  'Element_OphCoCvi_Esign',
];

/** The event a unique code maps to, with what the signature needs. */
export interface CodeEvent {
  readonly eventId: number;
  readonly eventTypeId: number;
  readonly eventTypeClass: string;
  readonly isCodeActive: boolean;
  /**
   * The element ids given to {@link findEventByCode} name an e-sign element of this event (OpenEyes ignored
   * `e_id`).
   */
  readonly isElementOfEvent: boolean;
  /** `event.info` when the code was resolved. */
  readonly info: string | null;
  readonly patientFirstName: string | null;
  readonly patientLastName: string | null;
}

// Codes are 6 characters of A-Z and 2-9; anything else cannot match and is not sent to the database.
const PLAUSIBLE_CODE = /^[A-Za-z0-9]{1,16}$/;

/**
 * The non-deleted event that `code` maps to, matched case-insensitively (the index is on the folded
 * code). When the code text exists more than once, an active one wins. With `element`, also
 * whether element `elementId` is an e-sign element of that event, of type `elementTypeId`, and that type
 * belongs to the event's type and is an e-signature type, so that a wrong id never attaches a signature
 * elsewhere.
 */
export interface CodeLookupOptions {
  /** `element_type.table_name` exists (`SchemaProfile.hasElementTableName`). */
  readonly hasElementTableName: boolean;
  /** The code column in its case-insensitive form (`DialectAdapter.foldedKey`). */
  readonly foldedKey: (column: string) => RawBuilder<string>;
}

export async function findEventByCode(
  database: Pick<Database, 'db' | 'dialect' | 'shapes'>,
  code: string,
  element: { elementTypeId: number; elementId: number } | undefined,
  options: CodeLookupOptions,
): Promise<CodeEvent | undefined> {
  if (!PLAUSIBLE_CODE.test(code)) return undefined;
  const elementIds =
    element !== undefined && element.elementId <= MAX_ID && element.elementTypeId <= MAX_ID
      ? element
      : undefined;
  // Run on every import: built and compiled once per shape, then run prepared.
  const values =
    elementIds === undefined
      ? [code.toLowerCase()]
      : [code.toLowerCase(), elementIds.elementId, elementIds.elementTypeId];
  const key = `signature:event-by-code:${elementIds !== undefined}:${options.hasElementTableName}`;
  const query = database.shapes.compile(key, values, (slots) =>
    eventByCodeQuery(
      database.db,
      slots[0] as string,
      elementIds === undefined
        ? undefined
        : { elementId: slots[1] as number, elementTypeId: slots[2] as number },
      options,
    ),
  );
  const [row] = await runCompiled(database, query);
  if (row === undefined) return undefined;
  return {
    eventId: row.eventId,
    eventTypeId: row.eventTypeId,
    eventTypeClass: row.eventTypeClass,
    isCodeActive: row.active === 1,
    isElementOfEvent: (row.isElementOfEvent as unknown) === true || (row.isElementOfEvent as unknown) === 1,
    info: row.info,
    patientFirstName: row.firstName,
    patientLastName: row.lastName,
  };
}

function eventByCodeQuery(
  db: Kysely<DB>,
  foldedCode: string,
  elementIds: { elementTypeId: number; elementId: number } | undefined,
  options: CodeLookupOptions,
) {
  return (
    db
      .selectFrom('unique_codes as uc')
      .innerJoin('unique_codes_mapping as m', 'm.unique_code_id', 'uc.id')
      .innerJoin('event as e', 'e.id', 'm.event_id')
      .innerJoin('event_type as et', 'et.id', 'e.event_type_id')
      .leftJoin('episode as ep', 'ep.id', 'e.episode_id')
      .leftJoin('patient as p', 'p.id', 'ep.patient_id')
      .leftJoin('contact as c', 'c.id', 'p.contact_id')
      .where((eb) => eb(options.foldedKey('uc.code'), '=', foldedCode))
      .where('e.deleted', '=', 0)
      .select([
        'e.id as eventId',
        'e.event_type_id as eventTypeId',
        'et.class_name as eventTypeClass',
        'uc.active as active',
        'e.info as info',
        'c.first_name as firstName',
        'c.last_name as lastName',
      ])
      // The element check rides along, saving a round trip on every import.
      .select((eb) =>
        elementIds === undefined
          ? sql<number>`0`.as('isElementOfEvent')
          : eb
              .exists(
                eb
                  .selectFrom('element_type as t')
                  .innerJoin(`${SIGNATURE_ELEMENT_TABLE} as el`, (join) =>
                    join.on('el.id', '=', elementIds.elementId).onRef('el.event_id', '=', 'e.id'),
                  )
                  .where('t.id', '=', elementIds.elementTypeId)
                  .whereRef('t.event_type_id', '=', 'e.event_type_id')
                  .where((inner) =>
                    options.hasElementTableName
                      ? inner.or([
                          inner('t.table_name', '=', SIGNATURE_ELEMENT_TABLE),
                          inner.and([
                            inner('t.table_name', 'is', null),
                            inner('t.class_name', 'in', SIGNATURE_ELEMENT_CLASSES),
                          ]),
                        ])
                      : inner('t.class_name', 'in', SIGNATURE_ELEMENT_CLASSES),
                  )
                  .select('el.id'),
              )
              .as('isElementOfEvent'),
      )
      .orderBy('uc.active', 'desc')
      .orderBy('uc.id')
      .limit(1)
  );
}

export interface ImportLogRef {
  readonly eventId: number | null;
  readonly filename: string;
}

/** An import log row, for `original_log_id`. */
export async function findImportLog(db: Db, id: number): Promise<ImportLogRef | undefined> {
  if (id > MAX_ID) return undefined;
  return db
    .selectFrom('signature_import_log')
    .where('id', '=', id)
    .select(['event_id as eventId', 'filename'])
    .executeTakeFirst();
}

/** The protected file with `uid`. */
export async function findProtectedFileByUid(
  db: Db,
  uid: string,
): Promise<{ id: number; uid: string } | undefined> {
  return db.selectFrom('protected_file').where('uid', '=', uid).select(['id', 'uid']).executeTakeFirst();
}

export interface NewProtectedFile {
  readonly uid: string;
  readonly name: string;
  readonly mimetype: string;
  readonly sizeBytes: number;
  readonly now: string;
}

/** Inserts protected file rows in one statement; returns their ids by uid. */
export async function insertProtectedFiles(
  db: Db,
  files: readonly NewProtectedFile[],
): Promise<Map<string, number>> {
  const rows = await db
    .insertInto('protected_file')
    .values(files.map(protectedFileRowOf))
    .returning(['id', 'uid'])
    .execute();
  return new Map(rows.map((row) => [row.uid, row.id]));
}

/** The `protected_file` row of `file`. */
export function protectedFileRowOf(file: NewProtectedFile) {
  return {
    uid: file.uid,
    name: file.name,
    title: '',
    description: '',
    mimetype: file.mimetype,
    size: String(file.sizeBytes),
    created_date: file.now,
    last_modified_date: file.now,
  };
}

export interface NewPatientSignature {
  readonly elementId: number;
  readonly signatureFileId: number;
  readonly signatoryName: string;
  readonly timestamp: number;
  readonly now: string;
}

/** A patient signature (type 3) on an e-sign element, its image bytes stored as sent. */
export async function insertPatientSignature(db: Db, signature: NewPatientSignature): Promise<number> {
  const row = await db
    .insertInto('ophcocvi_signature')
    .values(patientSignatureRowOf(signature))
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

/** The `ophcocvi_signature` row of `signature`. */
export function patientSignatureRowOf(signature: NewPatientSignature) {
  return {
    element_id: signature.elementId,
    type: 3,
    signature_file_id: signature.signatureFileId,
    signed_user_id: null,
    signatory_role: 'Patient',
    signatory_name: signature.signatoryName,
    timestamp: signature.timestamp,
    created_date: signature.now,
    last_modified_date: signature.now,
  };
}

export interface NewImportLog {
  readonly filename: string;
  readonly statusId: 3 | 4;
  readonly returnMessage: string;
  readonly eventId: number | null;
  readonly croppedFileId: number | null;
  readonly now: string;
  /** `created_date` and `last_modified_date`, from {@link importLogAuditDates}. */
  readonly auditDates: ImportLogAuditDates;
}

/** The values of an import log row's audit date columns. */
export interface ImportLogAuditDates {
  readonly createdDate: string;
  readonly lastModifiedDate: string;
}

/**
 * The audit dates of an import log row written at `now` (stored date-time text): the date-time where the
 * column holds a time of day, its date where the column is DATE (see `SchemaProfile.importLogTimedDates`).
 */
export async function importLogAuditDates(
  database: Pick<Database, 'db' | 'schema'>,
  now: string,
): Promise<ImportLogAuditDates> {
  const timed = await database.schema.importLogTimedDates(database.db);
  const today = now.slice(0, 10);
  return {
    createdDate: timed.createdDate ? now : today,
    lastModifiedDate: timed.lastModifiedDate ? now : today,
  };
}

export async function insertImportLog(db: Db, log: NewImportLog): Promise<number> {
  const row = await db
    .insertInto('signature_import_log')
    .values(importLogRowOf(log))
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

/** The `signature_import_log` row of `log`. */
export function importLogRowOf(log: NewImportLog) {
  return {
    filename: log.filename,
    import_datetime: log.now,
    status_id: log.statusId,
    return_message: log.returnMessage,
    event_id: log.eventId,
    cropped_file_id: log.croppedFileId,
    created_date: log.auditDates.createdDate,
    last_modified_date: log.auditDates.lastModifiedDate,
  };
}

/**
 * Sets `event.info` when it still holds `previous` (a compare-and-set: concurrent writers never clobber),
 * as the system user 1 (sign/add is anonymous). The row is locked and compared first, so that its
 * previous version is kept (a versioned table on OpenEyes) only when it changes.
 */
export async function updateEventInfo(
  db: Db,
  database: Pick<Database, 'dialect' | 'schema'>,
  change: { eventId: number; previous: string; next: string; now: string },
): Promise<void> {
  const current = await database.dialect
    .lockRows(db.selectFrom('event').select('info').where('id', '=', change.eventId))
    .executeTakeFirst();
  if (current?.info !== change.previous) return;
  await database.schema.keepRowVersions(db, 'event', [change.eventId]);
  await db
    .updateTable('event')
    .set(eventInfoChangeOf(change))
    .where('id', '=', change.eventId)
    .where('info', '=', change.previous)
    .execute();
}

/** The `event` columns a CVI status change sets. */
export function eventInfoChangeOf(change: { next: string; now: string }) {
  return { info: change.next, last_modified_date: change.now, last_modified_user_id: SYSTEM_USER_ID };
}

/** The user of anonymous writes: the system user 1 the migrations create. */
const SYSTEM_USER_ID = 1;
