/**
 * The worklist module's SQL: the bookings of automatic worklists (`worklist_patient` of a `worklist` with
 * a definition) with their patient, names, the identifier of the definition's type and its issuer, in
 * pages of booking ids; the patients' other identifiers and the bookings' attributes of a page; and the
 * owner's writes of `mwl_entry` (`cra_mwl_entry` on OpenEyes), the ids handed out per booking.
 */
import { randomUUID } from 'node:crypto';
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { Database } from '../../db/database.ts';
import type { DB } from '../../db/schema.ts';
import { nowDateTime } from '../../db/stored-time.ts';

/** `mwl_entry`: the service's own table, not in `DB`. */
type EntryTables = {
  mwl_entry: {
    worklist_patient_id: number;
    study_instance_uid: string;
    accession_number: string;
    created_date: string;
  };
};

export interface BookingRow {
  readonly id: number;
  readonly when: string | null;
  readonly start: string | null;
  readonly worklistName: string;
  readonly identifierTypeId: number;
  readonly patientId: number;
  readonly dob: string | null;
  readonly gender: string | null;
  readonly title: string | null;
  readonly firstName: string;
  readonly lastName: string;
  readonly identifier: string | null;
  readonly issuer: string | null;
  readonly studyInstanceUid: string | null;
  readonly accessionNumber: string | null;
}

export interface BookingFilter {
  /** Bookings with a larger id only (the page before ended there). */
  readonly afterId: number;
  readonly limit: number;
  /** Stored date-times bounding the booking's time (`when`, else the worklist's start), inclusive. */
  readonly fromStored?: string;
  readonly toStored?: string;
  readonly definitionIds?: readonly number[];
  /** Definitions without a display context, or with one of this site or of no site. */
  readonly siteId?: number;
  /**
   * The Patient ID asked for: `exact` a value the identifier equals, `like` a LIKE pattern with `!` as
   * escape. A pre-filter: what it keeps is matched again by the query's own rules.
   */
  readonly patientId?: { readonly exact: string } | { readonly like: string };
  /** Study Instance UIDs asked for (a booking has one once it was answered). */
  readonly studyInstanceUids?: readonly string[];
}

/** A page of bookings: those of the page's booking ids that pass every filter, in id order. */
export interface BookingsPage {
  readonly rows: BookingRow[];
  /** Every identifier (not deleted) of the page's patients, as `readPatientIdentifiers` reads them. */
  readonly identifiers: OtherIdentifierRow[];
  /** The largest booking id the page covered (the next page starts after it); 0 when it covered none. */
  readonly lastId: number;
  /** No booking after this page can match. */
  readonly isLast: boolean;
}

/**
 * One page of bookings in id order, in three statements. The first takes the page's booking ids from
 * `worklist_patient` and `worklist` alone (the time window, the definitions, the Patient ID's and Study
 * Instance UIDs' index lookups), in id order under the LIMIT; the second reads those bookings' patients
 * and names and applies the remaining filters; the third reads the patients' identifiers, of which the
 * definition's type gives each booking its Patient ID (and the Patient ID filter is applied to it). With
 * the ids and the details in one statement, MariaDB's planner started from the identifier types and
 * joined every booking of the window before sorting them for the LIMIT, on every page (ten pages of a
 * 2,000-booking day read 11,000 joined rows); the ids first keep each page at its LIMIT on every engine.
 */
export async function readBookingsPage(db: Kysely<DB>, filter: BookingFilter): Promise<BookingsPage> {
  const edb = db.withTables<EntryTables>();
  const bookingTime = sql<string>`coalesce(${sql.ref('wp.when')}, ${sql.ref('w.start')})`;
  let page = edb
    .selectFrom('worklist_patient as wp')
    .innerJoin('worklist as w', 'w.id', 'wp.worklist_id')
    .select('wp.id as id')
    .where('wp.id', '>', filter.afterId);
  if (filter.fromStored !== undefined) page = page.where(bookingTime, '>=', filter.fromStored);
  if (filter.toStored !== undefined) page = page.where(bookingTime, '<=', filter.toStored);
  if (filter.definitionIds !== undefined)
    page = page.where('w.worklist_definition_id', 'in', [...filter.definitionIds]);
  const asked = filter.patientId;
  if (asked !== undefined && 'exact' in asked)
    // The bookings of the patients holding the value, found by the (type, value) index.
    page = page.where(
      'wp.patient_id',
      'in',
      edb
        .selectFrom('patient_identifier as byValue')
        .select('byValue.patient_id')
        .where(
          'byValue.patient_identifier_type_id',
          'in',
          edb.selectFrom('worklist_definition as dt').select('dt.patient_identifier_type_id'),
        )
        .where('byValue.value', '=', asked.exact)
        .where('byValue.deleted', '=', 0),
    );
  if (filter.studyInstanceUids !== undefined)
    page = page.where(
      'wp.id',
      'in',
      // By the unique Study Instance UID.
      edb
        .selectFrom('mwl_entry as byUid')
        .select('byUid.worklist_patient_id')
        .where('byUid.study_instance_uid', 'in', [...filter.studyInstanceUids]),
    );
  const ids = (await page.orderBy('wp.id').limit(filter.limit).execute()).map((r) => r.id);
  const lastId = ids.at(-1) ?? 0;
  const isLast = ids.length < filter.limit;
  if (ids.length === 0) return { rows: [], identifiers: [], lastId, isLast };

  let query = edb
    .selectFrom('worklist_patient as wp')
    .innerJoin('worklist as w', 'w.id', 'wp.worklist_id')
    .innerJoin('worklist_definition as d', 'd.id', 'w.worklist_definition_id')
    .innerJoin('patient as p', 'p.id', 'wp.patient_id')
    .innerJoin('contact as c', 'c.id', 'p.contact_id')
    .innerJoin('patient_identifier_type as t', 't.id', 'd.patient_identifier_type_id')
    .leftJoin('institution as i', 'i.id', 't.institution_id')
    .leftJoin('mwl_entry as e', 'e.worklist_patient_id', 'wp.id')
    .select([
      'wp.id as id',
      'wp.when as when',
      'w.start as start',
      'w.name as worklistName',
      'd.patient_identifier_type_id as identifierTypeId',
      'p.id as patientId',
      'p.dob as dob',
      'p.gender as gender',
      'c.title as title',
      'c.first_name as firstName',
      'c.last_name as lastName',
      'i.remote_id as issuer',
      'e.study_instance_uid as studyInstanceUid',
      'e.accession_number as accessionNumber',
    ])
    .where('wp.id', 'in', ids)
    .where('p.deleted', '=', 0);
  // Study Instance UIDs need no second test: the page's ids were taken by them, and a booking has one entry.
  const { siteId } = filter;
  if (siteId !== undefined)
    query = query.where((eb) =>
      eb.or([
        eb.not(
          eb.exists(
            eb
              .selectFrom('worklist_definition_display_context as x')
              .select('x.id')
              .whereRef('x.worklist_definition_id', '=', 'd.id'),
          ),
        ),
        eb.exists(
          eb
            .selectFrom('worklist_definition_display_context as x')
            .select('x.id')
            .whereRef('x.worklist_definition_id', '=', 'd.id')
            .where((inner) => inner.or([inner('x.site_id', 'is', null), inner('x.site_id', '=', siteId)])),
        ),
      ]),
    );
  const details = await query.orderBy('wp.id').execute();
  // The identifiers of the page's patients in a statement of their own: joined to the bookings, MariaDB
  // (its statistics refreshed by the entries handed out) looked each booking's up by the type alone and
  // read every identifier of that type per booking (401,600 rows for a page of 200).
  const identifiers = await readPatientIdentifiers(
    db,
    details.map((row) => row.patientId),
  );
  const byPatientAndType = new Map<string, string>();
  for (const identifier of identifiers) {
    const key = `${identifier.patientId}:${identifier.typeId}`;
    if (!byPatientAndType.has(key)) byPatientAndType.set(key, identifier.value);
  }
  const keep = patientIdTest(asked);
  const rows = details.flatMap((row): BookingRow[] => {
    const identifier = byPatientAndType.get(`${row.patientId}:${row.identifierTypeId}`) ?? null;
    return asked === undefined || (identifier !== null && keep(identifier)) ? [{ ...row, identifier }] : [];
  });
  return { rows, identifiers, lastId, isLast };
}

/** `text` matched literally in a regular expression. */
function escapeRegExp(text: string): string {
  return text.replace(/[\\^$.*+?()[\]{}|/-]/g, '\\$&');
}

/**
 * The Patient ID pre-filter of a page in code: equal, or LIKE with `!` as escape, both without regard to
 * case (a superset of what every engine's comparison keeps; the query's own matching decides).
 */
function patientIdTest(asked: BookingFilter['patientId']): (value: string) => boolean {
  if (asked === undefined) return () => true;
  if ('exact' in asked) {
    const wanted = asked.exact.toLowerCase();
    return (value) => value.toLowerCase() === wanted;
  }
  let pattern = '';
  for (let i = 0; i < asked.like.length; i += 1) {
    const char = asked.like[i]!;
    if (char === '!' && i + 1 < asked.like.length) pattern += escapeRegExp(asked.like[++i]!);
    else if (char === '%') pattern += '.*';
    else if (char === '_') pattern += '.';
    else pattern += escapeRegExp(char);
  }
  const regex = new RegExp(`^${pattern}$`, 'is');
  return (value) => regex.test(value);
}

export interface OtherIdentifierRow {
  readonly patientId: number;
  readonly typeId: number;
  readonly value: string;
  readonly issuer: string | null;
}

/** The identifiers (not deleted) of `patientIds`, with their type's institution code. */
export async function readPatientIdentifiers(
  db: Kysely<DB>,
  patientIds: readonly number[],
): Promise<OtherIdentifierRow[]> {
  if (patientIds.length === 0) return [];
  return db
    .selectFrom('patient_identifier as pi')
    .innerJoin('patient_identifier_type as t', 't.id', 'pi.patient_identifier_type_id')
    .leftJoin('institution as i', 'i.id', 't.institution_id')
    .select(['pi.patient_id as patientId', 't.id as typeId', 'pi.value as value', 'i.remote_id as issuer'])
    .where('pi.patient_id', 'in', [...new Set(patientIds)])
    .where('pi.deleted', '=', 0)
    .orderBy('pi.id')
    .execute();
}

export interface BookingAttributeRow {
  readonly bookingId: number;
  readonly name: string;
  readonly value: string | null;
}

/** The attribute values of `bookingIds`, by attribute name. */
export async function readBookingAttributes(
  db: Kysely<DB>,
  bookingIds: readonly number[],
): Promise<BookingAttributeRow[]> {
  if (bookingIds.length === 0) return [];
  return db
    .selectFrom('worklist_patient_attribute as a')
    .innerJoin('worklist_attribute as wa', 'wa.id', 'a.worklist_attribute_id')
    .select(['a.worklist_patient_id as bookingId', 'wa.name as name', 'a.attribute_value as value'])
    .where('a.worklist_patient_id', 'in', [...bookingIds])
    .execute();
}

export interface EntryIds {
  readonly studyInstanceUid: string;
  readonly accessionNumber: string;
}

/**
 * The ids handed out for `bookingIds`, created for those that have none yet (a Study Instance UID of
 * the UUID form `2.25.<decimal>`, PS3.5 B.2; the booking's id as accession number and procedure ids).
 * A booking answered by two queries at once gets one row: the second insert is ignored, and both read it.
 */
export async function ensureEntryIds(
  database: Database,
  bookingIds: readonly number[],
): Promise<Map<number, EntryIds>> {
  const ids = new Map<number, EntryIds>();
  if (bookingIds.length === 0) return ids;
  const now = nowDateTime();
  await database.writeTransaction(async (trx) => {
    const edb = trx.withTables<EntryTables>();
    const insert = edb.insertInto('mwl_entry').values(
      bookingIds.map((id) => ({
        worklist_patient_id: id,
        study_instance_uid: `2.25.${BigInt(`0x${randomUUID().replace(/-/g, '')}`).toString()}`,
        accession_number: String(id),
        created_date: now,
      })),
    );
    await database.dialect.insertOrIgnore(insert, ['worklist_patient_id']).execute();
  });
  const rows = await database.db
    .withTables<EntryTables>()
    .selectFrom('mwl_entry')
    .select(['worklist_patient_id', 'study_instance_uid', 'accession_number'])
    .where('worklist_patient_id', 'in', [...bookingIds])
    .execute();
  for (const row of rows)
    ids.set(row.worklist_patient_id, {
      studyInstanceUid: row.study_instance_uid,
      accessionNumber: row.accession_number,
    });
  return ids;
}

/** The keys of a received instance that can name the worklist entry it was made for. */
export interface StudyEntryKeys {
  readonly studyInstanceUid?: string | undefined;
  readonly accessionNumber?: string | undefined;
  /** Requested Procedure ID (0040,1001), of the Request Attributes Sequence. */
  readonly requestedProcedureIds?: readonly string[] | undefined;
}

/** The worklist entry a study names, with its patient and the appointment's context. */
export interface StudyEntry {
  readonly bookingId: number;
  readonly patientId: number;
  readonly patientDeleted: boolean;
  /** The one firm of the definition's display contexts; null when it has none or several. */
  readonly firmId: number | null;
  /** The one subspecialty of the definition's display contexts; null when it has none or several. */
  readonly subspecialtyId: number | null;
  /** Which of the study's keys named it. */
  readonly namedBy: readonly ('StudyInstanceUID' | 'AccessionNumber' | 'RequestedProcedureID')[];
}

export type StudyEntryFinding =
  | { readonly kind: 'none' }
  | { readonly kind: 'entry'; readonly entry: StudyEntry }
  /** The study's keys name different entries: it is filed through neither. */
  | { readonly kind: 'contradiction'; readonly bookingIds: readonly number[] };

/**
 * The worklist entry a received study was made for: the one whose handed-out Study Instance UID, or
 * accession number (which is also its Requested Procedure ID), the study carries. Only ids this service
 * handed out count (`mwl_entry` rows), so an accession number another system assigned names nothing
 * unless it equals one handed out. Keys that name different entries are a contradiction.
 */
export async function findStudyEntry(db: Kysely<DB>, keys: StudyEntryKeys): Promise<StudyEntryFinding> {
  const uid = keys.studyInstanceUid?.trim();
  const numbers = [keys.accessionNumber, ...(keys.requestedProcedureIds ?? [])]
    .map((value) => value?.trim())
    .filter((value): value is string => value !== undefined && value !== '');
  if ((uid === undefined || uid === '') && numbers.length === 0) return { kind: 'none' };
  const edb = db.withTables<EntryTables>();
  const rows = await edb
    .selectFrom('mwl_entry as e')
    .innerJoin('worklist_patient as wp', 'wp.id', 'e.worklist_patient_id')
    .innerJoin('patient as p', 'p.id', 'wp.patient_id')
    .innerJoin('worklist as w', 'w.id', 'wp.worklist_id')
    .select([
      'e.worklist_patient_id as bookingId',
      'e.study_instance_uid as studyInstanceUid',
      'e.accession_number as accessionNumber',
      'wp.patient_id as patientId',
      'p.deleted as deleted',
      'w.worklist_definition_id as definitionId',
    ])
    .where((eb) => {
      const ors = [];
      if (uid !== undefined && uid !== '') ors.push(eb('e.study_instance_uid', '=', uid));
      if (numbers.length > 0) ors.push(eb('e.accession_number', 'in', [...new Set(numbers)]));
      return eb.or(ors);
    })
    .execute();
  if (rows.length === 0) return { kind: 'none' };
  const bookingIds = [...new Set(rows.map((row) => row.bookingId))].sort((a, b) => a - b);
  if (bookingIds.length > 1) return { kind: 'contradiction', bookingIds };
  const row = rows[0]!;
  const namedBy: StudyEntry['namedBy'][number][] = [];
  if (uid !== undefined && uid !== '' && row.studyInstanceUid === uid) namedBy.push('StudyInstanceUID');
  if (keys.accessionNumber?.trim() === row.accessionNumber) namedBy.push('AccessionNumber');
  if ((keys.requestedProcedureIds ?? []).some((id) => id.trim() === row.accessionNumber))
    namedBy.push('RequestedProcedureID');
  const contexts =
    row.definitionId === null
      ? []
      : await db
          .selectFrom('worklist_definition_display_context')
          .select(['firm_id', 'subspecialty_id'])
          .where('worklist_definition_id', '=', row.definitionId)
          .execute();
  const one = (values: readonly (number | null)[]): number | null => {
    const distinct = [...new Set(values.filter((value): value is number => value !== null))];
    return distinct.length === 1 ? distinct[0]! : null;
  };
  return {
    kind: 'entry',
    entry: {
      bookingId: row.bookingId,
      patientId: row.patientId,
      patientDeleted: Number(row.deleted) !== 0,
      firmId: one(contexts.map((context) => context.firm_id)),
      subspecialtyId: one(contexts.map((context) => context.subspecialty_id)),
      namedBy,
    },
  };
}
