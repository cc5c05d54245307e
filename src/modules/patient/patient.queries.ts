/**
 * The SQL of patient search, written once for every dialect. What differs between engines comes from
 * the database's dialect adapter (`database.dialect`): the name keys, on which a prefix is an index range
 * in code-point order whatever the database's default collation is, and the prefix match on them; the
 * case-folded identifier key; the numeric value of an identifier (the original's `value*1`). The
 * statement runs prepared where the engine has named statements (see `run`). Every value from the
 * request is a bound parameter; ORDER BY comes from a closed list.
 *
 * A search is one statement: the page of patients (ordered, limited, using the indexes) as a derived
 * table, joined with the live identifiers of those patients only. The page's sort keys are selected as
 * columns `s0`, `s1` so that the outer query keeps the page's order. The outer query orders patients
 * only, not a patient's identifiers among themselves: SQLite then reads the page in the order it was
 * made and needs no second sort; the caller orders each patient's few identifiers by `identifier_id`.
 */
import type { Compilable, CompiledQuery, Expression, RawBuilder, SqlBool } from 'kysely';
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
  /** The identifier's row id, by which a patient's identifiers are listed. */
  readonly identifier_id: number | null;
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

/** `sort_by` 0-5 of the original, or the default order of each search kind. */
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

  // A stable pick: the smallest numeric value among the patient's live identifiers.
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

  /** The page joined with its patients' live identifiers, in page order (a patient's rows together). */
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
        'own.id as identifier_id',
        'own.patient_identifier_type_id as identifier_type_id',
        'own.value as identifier_value',
        't.long_title',
        't.short_title',
      ]);
    const keys = sortKeys(page, kind);
    query = query.orderBy(sql`pg.s0 ${keys[0]!.direction}`);
    if (keys[1] !== undefined) query = query.orderBy(sql`pg.s1 ${keys[1].direction}`);
    return query.orderBy('pg.id', 'asc');
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

  /** Compiles the shape `key` with the bound values of `named` (see {@link boundValues}). */
  const compileShape = <V, R>(key: string, named: V, build: (slotted: V) => Compilable<R>) =>
    database.shapes.compile(key, boundValues(named), (slots) => build(withSlots(named, slots)));
  const pageKey = (page: PageQuery) =>
    `${page.sortColumn}|${page.isDescending}|${page.restrictTypeId !== undefined}`;
  /** The bound values of a page; its sort column and direction are part of the SQL text instead. */
  const paging = ({ restrictTypeId, limit, offset }: PageQuery) => ({ restrictTypeId, limit, offset });

  return {
    /**
     * One page of live patients whose names start with the prefixes (and born on `dob`), one row per
     * live identifier of theirs (or one row with null identifier columns).
     */
    patientsByName(criteria: NameCriteria, page: PageQuery): CompiledQuery<PatientWithIdentifierRow> {
      const { lastName: last, firstName: first } = criteria;
      const key = `patient:name|${last === undefined ? 0 : last.high === undefined ? 1 : 2}|${first === undefined ? 0 : first.high === undefined ? 1 : 2}|${criteria.dob !== undefined}|${pageKey(page)}`;
      return compileShape(key, { criteria, paging: paging(page) }, (bound) =>
        byName(bound.criteria, { ...page, ...bound.paging }),
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
      return compileShape(key, { pairs, paging: paging(page) }, (bound) =>
        byIdentifier(bound.pairs, { ...page, ...bound.paging }),
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

const isPlainObject = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype;

/**
 * The bound values of a query shape, named: plain objects and arrays are walked in key order, every
 * other value except `undefined` is one bound parameter. `undefined` binds nothing: it leaves its part
 * out of the SQL, which the shape key says.
 */
function boundValues(named: unknown, out: unknown[] = []): unknown[] {
  if (Array.isArray(named)) for (const value of named) boundValues(value, out);
  else if (isPlainObject(named)) for (const key of Object.keys(named)) boundValues(named[key], out);
  else if (named !== undefined) out.push(named);
  return out;
}

/** `named` with each bound value replaced by its placeholder, in the order of {@link boundValues}. */
function withSlots<V>(named: V, slots: readonly unknown[], next = { index: 0 }): V {
  if (Array.isArray(named)) return named.map((value: unknown) => withSlots(value, slots, next)) as V;
  if (isPlainObject(named)) {
    const slotted: Record<string, unknown> = {};
    for (const key of Object.keys(named)) slotted[key] = withSlots(named[key], slots, next);
    return slotted as V;
  }
  return named === undefined ? named : (slots[next.index++] as V);
}
