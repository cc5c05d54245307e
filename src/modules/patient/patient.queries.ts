/**
 * The SQL of patient search, written once for both dialects. Two spots differ and are chosen here by
 * dialect rather than in a file pair, because they are single expressions:
 * - name keys are `lower(column)` on SQLite (BINARY collation, byte order) and `lower(column) COLLATE "C"`
 *   on PostgreSQL, so that a prefix is an index range in code-point order whatever the database's default
 *   collation is (migration 0003 builds the matching PostgreSQL indexes);
 * - the numeric value of an identifier (the original's `value*1`): SQLite's CAST reads the leading
 *   digits, PostgreSQL needs a regular expression;
 * - on PostgreSQL the statement runs as a named prepared statement (see `run`).
 * Every value from the request is a bound parameter; ORDER BY comes from a closed list.
 *
 * A search is one statement: the page of patients (ordered, limited, using the indexes) as a derived
 * table, joined with the live identifiers of those patients only. The page's sort keys are selected as
 * columns `s0`, `s1` so that the outer query keeps the page's order.
 */
import type { CompiledQuery, Expression, RawBuilder, SqlBool } from 'kysely';
import { sql } from 'kysely';
import { runCompiled } from '../../db/compiled-queries.ts';
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

/** A patient row joined with one of its live identifiers (null columns when it has none). */
export interface PatientWithIdentifierRow extends PatientSearchRow {
  readonly identifier_type_id: number | null;
  readonly identifier_value: string | null;
  readonly long_title: string | null;
  readonly short_title: string | null;
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

export interface IdentifierPair {
  readonly typeId: number;
  readonly value: string;
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

  const nameKey = (column: 'c.last_name' | 'c.first_name'): RawBuilder<string> => dialect.nameKey(column);
  const numericValue = (column: string): RawBuilder<number> => dialect.leadingNumber(column);

  // Reference 4.6 recommendation: the smallest numeric value among the patient's live identifiers.
  const smallestIdentifier = sql<number>`(select min(${numericValue('k.value')}) from patient_identifier as k where k.patient_id = p.id and k.deleted = 0)`;

  interface SortKey {
    readonly expression: RawBuilder<unknown>;
    readonly direction: RawBuilder<unknown>;
  }

  /** The page's sort keys (then `p.id`): 2 for the default name order, 1 otherwise. */
  const sortKeys = (page: PageQuery, kind: 'name' | 'identifier'): SortKey[] => {
    const asc = !page.isDescending;
    // NULLs (no identifier, no dob) sort first in ascending order on every dialect, as on MySQL. Names
    // are NOT NULL: their keys keep the plain direction, which PostgreSQL can read from the index.
    const dir = dialect.orderNullsLowest(page.isDescending);
    const nameDir = asc ? sql`asc` : sql`desc`;
    const ascending = sql`asc`;
    switch (page.sortColumn) {
      case 'default':
        return kind === 'name'
          ? [
              { expression: nameKey('c.last_name'), direction: ascending },
              { expression: nameKey('c.first_name'), direction: ascending },
            ]
          : [{ expression: smallestIdentifier, direction: dialect.orderNullsLowest(false) }];
      case 0:
        return [{ expression: smallestIdentifier, direction: dir }];
      case 1:
        return [{ expression: sql`c.title`, direction: dir }];
      case 2:
        return [{ expression: nameKey('c.first_name'), direction: nameDir }];
      case 3:
        return [{ expression: nameKey('c.last_name'), direction: nameDir }];
      case 4:
        return [{ expression: sql`p.dob`, direction: dir }];
      case 5:
        return [{ expression: sql`p.gender`, direction: dir }];
    }
  };

  /** Live patients, restricted to holders of a type when asked, with their sort keys as s0/s1. */
  const basePage = (page: PageQuery, kind: 'name' | 'identifier') => {
    const keys = sortKeys(page, kind);
    let query = db
      .selectFrom('contact as c')
      .innerJoin('patient as p', 'p.contact_id', 'c.id')
      .select(COLUMNS)
      .select(keys[0]!.expression.as('s0'))
      .select((keys[1]?.expression ?? sql`0`).as('s1'))
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
    // By the output columns, so that a correlated sort key is computed once per row.
    query = query.orderBy(sql`s0 ${keys[0]!.direction}`);
    if (keys[1] !== undefined) query = query.orderBy(sql`s1 ${keys[1].direction}`);
    return query.orderBy('p.id', 'asc').limit(page.limit).offset(page.offset);
  };

  type PageBuilder = ReturnType<typeof basePage>;

  /** The page joined with its patients' live identifiers, in page order then identifier id. */
  const withIdentifiers = (inner: PageBuilder, page: PageQuery, kind: 'name' | 'identifier') => {
    let query = db
      .selectFrom(inner.as('pg'))
      .leftJoin('patient_identifier as own', (join) =>
        join.onRef('own.patient_id', '=', 'pg.id').on('own.deleted', '=', 0),
      )
      .leftJoin('patient_identifier_type as t', 't.id', 'own.patient_identifier_type_id')
      .select([
        'pg.id',
        'pg.first_name',
        'pg.last_name',
        'pg.dob',
        'pg.date_of_death',
        'pg.is_deceased',
        'pg.gender',
        'own.patient_identifier_type_id as identifier_type_id',
        'own.value as identifier_value',
        't.long_title',
        't.short_title',
      ]);
    const keys = sortKeys(page, kind);
    query = query.orderBy(sql`pg.s0 ${keys[0]!.direction}`);
    if (keys[1] !== undefined) query = query.orderBy(sql`pg.s1 ${keys[1].direction}`);
    return query.orderBy('pg.id', 'asc').orderBy('own.id', 'asc');
  };

  const range = (key: RawBuilder<string>, prefix: PrefixRange): Expression<SqlBool> =>
    dialect.namePrefixMatch(key, prefix.low, prefix.high);

  const byName = (criteria: NameCriteria, page: PageQuery) => {
    let query = basePage(page, 'name');
    if (criteria.lastName !== undefined)
      query = query.where(range(nameKey('c.last_name'), criteria.lastName));
    if (criteria.firstName !== undefined)
      query = query.where(range(nameKey('c.first_name'), criteria.firstName));
    if (criteria.dob !== undefined) query = query.where('p.dob', '=', criteria.dob);
    return withIdentifiers(query, page, 'name');
  };

  const byIdentifier = (pairs: readonly IdentifierPair[], page: PageQuery) =>
    withIdentifiers(
      basePage(page, 'identifier').where('p.id', 'in', (eb) =>
        eb
          .selectFrom('patient_identifier as pi')
          .select('pi.patient_id')
          .where('pi.deleted', '=', 0)
          .where((w) =>
            w.or(
              pairs.map((pair) =>
                w.and([
                  w('pi.patient_identifier_type_id', '=', pair.typeId),
                  w(dialect.foldedKey('pi.value'), '=', pair.value),
                ]),
              ),
            ),
          ),
      ),
      page,
      'identifier',
    );

  const pageKey = (page: PageQuery) =>
    `${page.sortColumn}|${page.isDescending}|${page.restrictTypeId !== undefined}`;
  const pageWith = (page: PageQuery, s: readonly unknown[], at: number): PageQuery => ({
    ...page,
    restrictTypeId: page.restrictTypeId === undefined ? undefined : (s[at] as number),
    limit: s[at + 1] as number,
    offset: s[at + 2] as number,
  });
  const pageValues = (page: PageQuery) => [page.restrictTypeId, page.limit, page.offset];

  return {
    /**
     * One page of live patients whose names start with the prefixes (and born on `dob`), one row per
     * live identifier of theirs (or one row with null identifier columns).
     */
    patientsByName(criteria: NameCriteria, page: PageQuery): CompiledQuery<PatientWithIdentifierRow> {
      const { lastName: last, firstName: first } = criteria;
      const key = `patient:name|${last === undefined ? 0 : last.high === undefined ? 1 : 2}|${first === undefined ? 0 : first.high === undefined ? 1 : 2}|${criteria.dob !== undefined}|${pageKey(page)}`;
      const values = [last?.low, last?.high, first?.low, first?.high, criteria.dob, ...pageValues(page)];
      const prefix = (range: PrefixRange | undefined, s: readonly unknown[], at: number) =>
        range === undefined
          ? undefined
          : { low: s[at] as string, high: range.high === undefined ? undefined : (s[at + 1] as string) };
      return database.shapes.compile(key, values, (s) =>
        byName(
          {
            lastName: prefix(last, s, 0),
            firstName: prefix(first, s, 2),
            dob: criteria.dob === undefined ? undefined : (s[4] as string),
          },
          pageWith(page, s, 5),
        ),
      );
    },

    /**
     * One page of live patients holding a live identifier equal (case-insensitively) to one of the
     * (type, value) pairs (`value` already lower-cased like the database does; at least one pair), one
     * row per live identifier of theirs.
     */
    patientsByIdentifier(
      pairs: readonly IdentifierPair[],
      page: PageQuery,
    ): CompiledQuery<PatientWithIdentifierRow> {
      const key = `patient:identifier|${pairs.length}|${pageKey(page)}`;
      const values = [...pageValues(page), ...pairs.flatMap((p) => [p.typeId, p.value])];
      return database.shapes.compile(key, values, (s) =>
        byIdentifier(
          pairs.map((_, i) => ({ typeId: s[3 + 2 * i] as number, value: s[4 + 2 * i] as string })),
          pageWith(page, s, 0),
        ),
      );
    },

    /**
     * Runs a compiled search: on PostgreSQL as a named prepared statement, because planning this
     * statement costs more than executing it.
     */
    run<R>(query: CompiledQuery<R>): Promise<R[]> {
      return runCompiled(database, query);
    },
  };
}

export type PatientQueries = ReturnType<typeof createPatientQueries>;
