/**
 * The SQL of patient search, written once for both dialects. Two spots differ and are chosen here by
 * dialect rather than in a file pair, because they are single expressions:
 * - name keys are `lower(column)` on SQLite (BINARY collation, byte order) and `lower(column) COLLATE "C"`
 *   on PostgreSQL, so that a prefix is an index range in code-point order whatever the database's default
 *   collation is (migration 0003 builds the matching PostgreSQL indexes);
 * - the numeric value of an identifier (the original's `value*1`): SQLite's CAST reads the leading
 *   digits, PostgreSQL needs a regular expression.
 * Every value from the request is a bound parameter; ORDER BY comes from a closed list.
 */
import type { Expression, RawBuilder, SqlBool } from 'kysely';
import { sql } from 'kysely';
import type { Database } from '../../db/database.ts';

export interface PatientSearchRow {
  readonly id: number;
  readonly first_name: string;
  readonly last_name: string;
  readonly dob: string | null;
  readonly date_of_death: string | null;
  readonly is_deceased: number;
  readonly gender: string | null;
}

export interface IdentifierRow {
  readonly patient_id: number;
  readonly patient_identifier_type_id: number;
  readonly value: string;
  readonly long_title: string | null;
  readonly short_title: string;
}

/** A prefix range on a lower-cased name key: `low <= key < high` (no upper bound when high is undefined). */
export interface PrefixRange {
  readonly low: string;
  readonly high: string | undefined;
}

export interface NameCriteria {
  readonly lastName: PrefixRange | undefined;
  readonly firstName: PrefixRange | undefined;
  readonly dob: string | undefined;
}

/** `sort_by` 0-5 of the original (reference 3.1), or the default order of each search kind. */
export type SortColumn = 'default' | 0 | 1 | 2 | 3 | 4 | 5;

export interface PageQuery {
  readonly sortColumn: SortColumn;
  readonly isDescending: boolean;
  readonly limit: number;
  readonly offset: number;
  /** Only patients holding a non-deleted identifier of this type. */
  readonly restrictTypeId: number | undefined;
}

const COLUMNS = [
  'p.id',
  'c.first_name',
  'c.last_name',
  'p.dob',
  'p.date_of_death',
  'p.is_deceased',
  'p.gender',
] as const;

export function createPatientQueries(database: Database) {
  const { db, dialect } = database;

  const nameKey = (column: 'c.last_name' | 'c.first_name'): RawBuilder<string> =>
    dialect === 'postgres'
      ? sql<string>`lower(${sql.ref(column)}) collate "C"`
      : sql<string>`lower(${sql.ref(column)})`;

  const numericValue = (column: string): RawBuilder<number> =>
    dialect === 'postgres'
      ? sql<number>`coalesce(substring(${sql.ref(column)} from '^[0-9]+')::numeric, 0)`
      : sql<number>`cast(${sql.ref(column)} as integer)`;

  // Reference 4.6 recommendation: the smallest numeric value among the patient's live identifiers.
  const smallestIdentifier = sql<number>`(select min(${numericValue('k.value')}) from patient_identifier as k where k.patient_id = p.id and k.deleted = 0)`;

  const orderTerms = (page: PageQuery, kind: 'name' | 'identifier'): RawBuilder<unknown>[] => {
    const asc = !page.isDescending;
    const dir = asc ? sql`asc` : sql`desc`;
    // NULLs (no identifier, no dob) sort first in ascending order on both dialects, as on MySQL.
    const nulls = asc ? sql`nulls first` : sql`nulls last`;
    switch (page.sortColumn) {
      case 'default':
        return kind === 'name'
          ? [sql`${nameKey('c.last_name')} asc`, sql`${nameKey('c.first_name')} asc`]
          : [sql`${smallestIdentifier} asc nulls first`];
      case 0:
        return [sql`${smallestIdentifier} ${dir} ${nulls}`];
      case 1:
        return [sql`c.title ${dir} ${nulls}`];
      case 2:
        return [sql`${nameKey('c.first_name')} ${dir}`];
      case 3:
        return [sql`${nameKey('c.last_name')} ${dir}`];
      case 4:
        return [sql`p.dob ${dir} ${nulls}`];
      case 5:
        return [sql`p.gender ${dir} ${nulls}`];
    }
  };

  const basePage = (page: PageQuery, kind: 'name' | 'identifier') => {
    let query = db
      .selectFrom('contact as c')
      .innerJoin('patient as p', 'p.contact_id', 'c.id')
      .select(COLUMNS)
      .where('p.deleted', '=', 0);
    if (page.restrictTypeId !== undefined) {
      const typeId = page.restrictTypeId;
      query = query.where((eb) =>
        eb.exists(
          eb
            .selectFrom('patient_identifier as r')
            .select(sql`1`.as('one'))
            .whereRef('r.patient_id', '=', 'p.id')
            .where('r.patient_identifier_type_id', '=', typeId)
            .where('r.deleted', '=', 0),
        ),
      );
    }
    for (const term of orderTerms(page, kind)) query = query.orderBy(term);
    return query.orderBy('p.id', 'asc').limit(page.limit).offset(page.offset);
  };

  const range = (key: RawBuilder<string>, prefix: PrefixRange): Expression<SqlBool> =>
    prefix.high === undefined
      ? sql<SqlBool>`${key} >= ${prefix.low}`
      : sql<SqlBool>`${key} >= ${prefix.low} and ${key} < ${prefix.high}`;

  return {
    /** One page of live patients whose names start with the given prefixes (and born on `dob`). */
    async findPatientsByName(criteria: NameCriteria, page: PageQuery): Promise<PatientSearchRow[]> {
      let query = basePage(page, 'name');
      if (criteria.lastName !== undefined)
        query = query.where(range(nameKey('c.last_name'), criteria.lastName));
      if (criteria.firstName !== undefined)
        query = query.where(range(nameKey('c.first_name'), criteria.firstName));
      if (criteria.dob !== undefined) query = query.where('p.dob', '=', criteria.dob);
      return query.execute();
    },

    /**
     * One page of live patients holding a live identifier equal (case-insensitively) to one of the
     * (type, value) pairs; `value` must already be lower-cased like the database does.
     */
    async findPatientsByIdentifier(
      pairs: readonly { readonly typeId: number; readonly value: string }[],
      page: PageQuery,
    ): Promise<PatientSearchRow[]> {
      if (pairs.length === 0) return [];
      return basePage(page, 'identifier')
        .where('p.id', 'in', (eb) =>
          eb
            .selectFrom('patient_identifier as pi')
            .select('pi.patient_id')
            .where('pi.deleted', '=', 0)
            .where((w) =>
              w.or(
                pairs.map((pair) =>
                  w.and([
                    w('pi.patient_identifier_type_id', '=', pair.typeId),
                    w(sql<string>`lower(${sql.ref('pi.value')})`, '=', pair.value),
                  ]),
                ),
              ),
            ),
        )
        .execute();
    },

    /** Every live identifier of the given patients with its type's titles, in id order. */
    async findIdentifiers(patientIds: readonly number[]): Promise<IdentifierRow[]> {
      if (patientIds.length === 0) return [];
      return db
        .selectFrom('patient_identifier as pi')
        .innerJoin('patient_identifier_type as t', 't.id', 'pi.patient_identifier_type_id')
        .select([
          'pi.patient_id',
          'pi.patient_identifier_type_id',
          'pi.value',
          't.long_title',
          't.short_title',
        ])
        .where('pi.patient_id', 'in', patientIds)
        .where('pi.deleted', '=', 0)
        .orderBy('pi.id')
        .execute();
    },
  };
}

export type PatientQueries = ReturnType<typeof createPatientQueries>;
