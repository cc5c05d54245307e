/**
 * SQL of `dicom_received_instance` (migration 0014): the record of each SOP Instance UID received, written
 * in the transaction of the request the instance became.
 */
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { DialectAdapter } from '../../db/dialect.ts';
import type { DB } from '../../db/schema.ts';
import { replaceUnstorableCharacters } from '../../db/schema-profile.ts';
import { foldName } from '../worklist/index.ts';

/** `dicom_received_instance`. Not in `DB`: it is not part of the dataset format. */
export interface DicomReceivedInstanceTable {
  sop_instance_uid: string;
  sop_class_uid: string;
  first_request_id: number;
  last_request_id: number;
  received_count: number;
  /** `YYYY-MM-DD HH:MM:SS` UTC. */
  last_received_date: string;
}

type ReceivedDb = Kysely<DB & { dicom_received_instance: DicomReceivedInstanceTable }>;

function receivedDb(db: Kysely<DB>): ReceivedDb {
  return db.withTables<{ dicom_received_instance: DicomReceivedInstanceTable }>();
}

export interface ReceivedInstance {
  readonly sopInstanceUid: string;
  readonly sopClassUid: string;
  readonly requestId: number;
  readonly now: string;
}

/**
 * Records a first receipt of the instance. A repeated SOP Instance UID violates the primary key: the
 * caller's transaction fails with a unique-violation error, so two concurrent copies cannot both pass.
 */
export async function insertFirstReceipt(db: Kysely<DB>, instance: ReceivedInstance): Promise<void> {
  await receivedDb(db).insertInto('dicom_received_instance').values(rowOf(instance)).execute();
}

/** Records a receipt, first or repeated: a repeat moves `last_request_id` and counts one more. */
export async function upsertReceipt(
  db: Kysely<DB>,
  dialect: DialectAdapter,
  instance: ReceivedInstance,
): Promise<void> {
  const insert = receivedDb(db).insertInto('dicom_received_instance').values(rowOf(instance));
  await dialect
    .upsert(insert, ['sop_instance_uid'], {
      last_request_id: dialect.insertedValue('last_request_id'),
      last_received_date: dialect.insertedValue('last_received_date'),
      received_count: sql<number>`${dialect.existingValue<number>('dicom_received_instance', 'received_count')} + 1`,
    })
    .execute();
}

function rowOf(instance: ReceivedInstance): DicomReceivedInstanceTable {
  return {
    sop_instance_uid: instance.sopInstanceUid,
    sop_class_uid: instance.sopClassUid,
    first_request_id: instance.requestId,
    last_request_id: instance.requestId,
    received_count: 1,
    last_received_date: instance.now,
  };
}

/** The receipt of `sopInstanceUid`, if any. */
export async function findReceipt(
  db: Kysely<DB>,
  sopInstanceUid: string,
): Promise<DicomReceivedInstanceTable | undefined> {
  return receivedDb(db)
    .selectFrom('dicom_received_instance')
    .selectAll()
    .where('sop_instance_uid', '=', sopInstanceUid)
    .executeTakeFirst();
}

export interface HeldInstanceRow {
  readonly sopInstanceUid: string;
  readonly sopClassUid: string;
  /** The instance's last request still holds its bytes (`REQUEST_BLOB.blob_data` not dropped). */
  readonly isHeld: boolean;
}

/**
 * The receipts of `sopInstanceUids`, each with whether the request it last became still holds the
 * received bytes. A receipt is written in the transaction of its request, so a row means a committed
 * request; the bytes may since have been dropped by the clean-up policy (`QUEUE_DROP_BLOB_REQUEST_TYPES`).
 */
export async function findHeldInstances(
  db: Kysely<DB>,
  sopInstanceUids: readonly string[],
): Promise<HeldInstanceRow[]> {
  if (sopInstanceUids.length === 0) return [];
  const rows = await receivedDb(db)
    .selectFrom('dicom_received_instance as r')
    .select((eb) => [
      'r.sop_instance_uid as sopInstanceUid',
      'r.sop_class_uid as sopClassUid',
      eb
        .exists(
          eb
            .selectFrom('attachment_data as a')
            .select('a.id')
            .whereRef('a.request_id', '=', 'r.last_request_id')
            .where('a.attachment_mnemonic', '=', 'REQUEST_BLOB')
            .where('a.blob_data', 'is not', null),
        )
        .as('held'),
    ])
    .where('r.sop_instance_uid', 'in', [...sopInstanceUids])
    .execute();
  return rows.map((row) => ({
    sopInstanceUid: row.sopInstanceUid,
    sopClassUid: row.sopClassUid,
    isHeld: Number(row.held) === 1 || (row.held as unknown) === true,
  }));
}

/** `dicom_instance_index` (migration 0023): the query attributes of a received instance. */
export interface DicomInstanceIndexTable {
  sop_instance_uid: string;
  sop_class_uid: string;
  study_instance_uid: string;
  series_instance_uid: string;
  /** The request that holds the instance's bytes (its latest receipt). */
  request_id: number;
  character_set: string | null;
  patient_id: string | null;
  patient_name: string | null;
  /**
   * `patient_name` as PN matching compares it (the worklist module's `foldName`), so that SQL can match
   * a name without case or accents on every engine (migration 0025); '' for no name, null when the
   * folded name is longer than the column (such a row is a candidate of every name query).
   */
  patient_name_key: string | null;
  patient_birth_date: string | null;
  patient_sex: string | null;
  study_date: string | null;
  study_time: string | null;
  accession_number: string | null;
  study_id: string | null;
  study_description: string | null;
  referring_physician_name: string | null;
  modality: string | null;
  series_number: string | null;
  series_description: string | null;
  instance_number: string | null;
  received_date: string;
}

/** The header values the index keeps, as the inspection read them (trimmed). */
export type IndexedHeader = Readonly<
  Record<
    | 'SpecificCharacterSet'
    | 'PatientID'
    | 'PatientName'
    | 'PatientBirthDate'
    | 'PatientSex'
    | 'StudyInstanceUID'
    | 'SeriesInstanceUID'
    | 'StudyDate'
    | 'StudyTime'
    | 'AccessionNumber'
    | 'StudyID'
    | 'StudyDescription'
    | 'ReferringPhysicianName'
    | 'Modality'
    | 'SeriesNumber'
    | 'SeriesDescription'
    | 'InstanceNumber',
    string | null
  >
>;

/** Longest `patient_name_key` (its column's length). */
export const PATIENT_NAME_KEY_LENGTH = 324;

/** The `patient_name_key` of a stored name. */
export function patientNameKey(name: string | null): string | null {
  const key = foldName(name ?? '');
  return Array.from(key).length > PATIENT_NAME_KEY_LENGTH ? null : key;
}

/**
 * A DA value without the dots of the ACR-NEMA form (`YYYY.MM.DD`), as range matching reads it, so that
 * SQL compares dates as the matching does.
 */
function undotDate(value: string | null): string | null {
  return value === null ? null : value.replaceAll('.', '');
}

/**
 * Indexes a received instance for query/retrieve, in its request's transaction; a repeat of the SOP
 * Instance UID replaces the row (the latest receipt is what a query answers). Values are cut to their
 * column (the VR's maximum length, PS3.5 6.2) and characters the schema cannot store replaced, so a
 * device's over-long or 4-byte value cannot fail the store.
 */
export async function upsertInstanceIndex(
  db: Kysely<DB>,
  dialect: DialectAdapter,
  instance: ReceivedInstance & { readonly header: IndexedHeader },
  maxCodePoint: number,
): Promise<void> {
  const h = instance.header;
  // The header is decoded already (by its Specific Character Set); what the schema's text columns cannot
  // hold becomes U+FFFD, and a value is cut by characters, never inside one.
  const cut = (value: string | null, max: number) =>
    value === null
      ? null
      : Array.from(replaceUnstorableCharacters(value, maxCodePoint)).slice(0, max).join('');
  const row: DicomInstanceIndexTable = {
    sop_instance_uid: instance.sopInstanceUid,
    sop_class_uid: instance.sopClassUid,
    study_instance_uid: cut(h.StudyInstanceUID, 64) ?? '',
    series_instance_uid: cut(h.SeriesInstanceUID, 64) ?? '',
    request_id: instance.requestId,
    character_set: cut(h.SpecificCharacterSet, 128),
    patient_id: cut(h.PatientID, 64),
    patient_name: cut(h.PatientName, 324),
    patient_name_key: patientNameKey(cut(h.PatientName, 324)),
    patient_birth_date: cut(undotDate(h.PatientBirthDate), 8),
    patient_sex: cut(h.PatientSex, 16),
    study_date: cut(undotDate(h.StudyDate), 8),
    study_time: cut(h.StudyTime, 16),
    accession_number: cut(h.AccessionNumber, 16),
    study_id: cut(h.StudyID, 16),
    study_description: cut(h.StudyDescription, 64),
    referring_physician_name: cut(h.ReferringPhysicianName, 324),
    modality: cut(h.Modality, 16),
    series_number: cut(h.SeriesNumber, 12),
    series_description: cut(h.SeriesDescription, 64),
    instance_number: cut(h.InstanceNumber, 12),
    received_date: instance.now,
  };
  const { sop_instance_uid: _key, ...update } = row;
  const insert = db
    .withTables<{ dicom_instance_index: DicomInstanceIndexTable }>()
    .insertInto('dicom_instance_index')
    .values(row);
  await dialect.upsert(insert, ['sop_instance_uid'], update).execute();
}
