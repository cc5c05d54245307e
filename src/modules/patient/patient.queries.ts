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
import type { Compilable, CompiledQuery, Expression, RawBuilder, SqlBool } from 'kysely';
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

/** A patient row joined with one of its live identifiers (null columns when it has none). */
export interface PatientWithIdentifierRow extends PatientSearchRow {
  readonly identifier_type_id: number | null;
  readonly identifier_value: string | null;
  readonly long_title: string | null;
  readonly short_title: string | null;
}

/** Safety cap on the rows of one identifier search (patients x their identifiers). */
const MAX_IDENTIFIER_ROWS = 10_000;

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

  const byName = (criteria: NameCriteria, page: PageQuery) => {
    let query = basePage(page, 'name');
    if (criteria.lastName !== undefined)
      query = query.where(range(nameKey('c.last_name'), criteria.lastName));
    if (criteria.firstName !== undefined)
      query = query.where(range(nameKey('c.first_name'), criteria.firstName));
    if (criteria.dob !== undefined) query = query.where('p.dob', '=', criteria.dob);
    return query;
  };

  // Identifier search matches a handful of patients at most, so it fetches them with all their live
  // identifiers in one statement and pages in memory (one round trip instead of two).
  const byIdentifier = (pairs: readonly IdentifierPair[], page: PageQuery) => {
    let query = db
      .selectFrom('contact as c')
      .innerJoin('patient as p', 'p.contact_id', 'c.id')
      .leftJoin('patient_identifier as own', (join) =>
        join.onRef('own.patient_id', '=', 'p.id').on('own.deleted', '=', 0),
      )
      .leftJoin('patient_identifier_type as t', 't.id', 'own.patient_identifier_type_id')
      .select([
        ...COLUMNS,
        'own.patient_identifier_type_id as identifier_type_id',
        'own.value as identifier_value',
        't.long_title',
        't.short_title',
      ])
      .where('p.deleted', '=', 0)
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
      );
    for (const term of orderTerms(page, 'identifier')) query = query.orderBy(term);
    return query.orderBy('p.id', 'asc').orderBy('own.id', 'asc').limit(MAX_IDENTIFIER_ROWS);
  };

  const identifiersOf = (patientIds: readonly number[]) =>
    db
      .selectFrom('patient_identifier as pi')
      .innerJoin('patient_identifier_type as t', 't.id', 'pi.patient_identifier_type_id')
      .select(['pi.patient_id', 'pi.patient_identifier_type_id', 'pi.value', 't.long_title', 't.short_title'])
      .where('pi.patient_id', 'in', patientIds)
      .where('pi.deleted', '=', 0)
      .orderBy('pi.id');

  const shapes = createShapeCache();
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
    /** One page of live patients whose names start with the prefixes (and born on `dob`). */
    patientsByName(criteria: NameCriteria, page: PageQuery): CompiledQuery<PatientSearchRow> {
      const { lastName: last, firstName: first } = criteria;
      const key = `name|${last === undefined ? 0 : last.high === undefined ? 1 : 2}|${first === undefined ? 0 : first.high === undefined ? 1 : 2}|${criteria.dob !== undefined}|${pageKey(page)}`;
      const values = [last?.low, last?.high, first?.low, first?.high, criteria.dob, ...pageValues(page)];
      const prefix = (range: PrefixRange | undefined, s: readonly unknown[], at: number) =>
        range === undefined
          ? undefined
          : { low: s[at] as string, high: range.high === undefined ? undefined : (s[at + 1] as string) };
      return shapes.compile(key, values, (s) =>
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
     * Every live patient holding a live identifier equal (case-insensitively) to one of the (type, value)
     * pairs (`value` already lower-cased like the database does; at least one pair), one row per live
     * identifier of theirs (or one row with null identifier columns), in result order then identifier
     * id. The caller pages.
     */
    patientsByIdentifier(
      pairs: readonly IdentifierPair[],
      page: Pick<PageQuery, 'sortColumn' | 'isDescending'>,
    ): CompiledQuery<PatientWithIdentifierRow> {
      const key = `identifier|${pairs.length}|${page.sortColumn}|${page.isDescending}`;
      const values = pairs.flatMap((p) => [p.typeId, p.value]);
      const full: PageQuery = { ...page, limit: 0, offset: 0, restrictTypeId: undefined };
      return shapes.compile(key, values, (s) =>
        byIdentifier(
          pairs.map((_, i) => ({ typeId: s[2 * i] as number, value: s[2 * i + 1] as string })),
          full,
        ),
      );
    },

    /** Every live identifier of the given patients (at least one) with its type's titles, in id order. */
    identifiersOf(patientIds: readonly number[]): CompiledQuery<IdentifierRow> {
      return shapes.compile(`identifiers|${patientIds.length}`, patientIds, (s) =>
        identifiersOf(s as number[]),
      );
    },

    async run<R>(query: CompiledQuery<R>): Promise<R[]> {
      return (await db.executeQuery(query)).rows;
    },
  };
}

const SLOT = Symbol('slot');
interface Slot {
  readonly [SLOT]: number;
}
const isSlot = (value: unknown): value is Slot =>
  typeof value === 'object' && value !== null && SLOT in value;

/**
 * Builds and compiles each query shape once: Kysely's builder and compiler cost more than the indexed
 * lookups themselves. A shape is built with placeholder objects in place of the values; every later call
 * reuses its SQL and puts the real values where the placeholders were. The key must name everything that
 * changes the SQL text (which criteria are present, counts, order).
 */
function createShapeCache(maxShapes = 500) {
  const shapes = new Map<string, { compiled: CompiledQuery; slots: (number | undefined)[] }>();
  return {
    compile<R>(
      key: string,
      values: readonly unknown[],
      build: (slots: readonly unknown[]) => Compilable<R>,
    ): CompiledQuery<R> {
      let shape = shapes.get(key);
      if (shape === undefined) {
        const slots = values.map((_, i): Slot => ({ [SLOT]: i }));
        const compiled = build(slots).compile();
        shape = { compiled, slots: compiled.parameters.map((p) => (isSlot(p) ? p[SLOT] : undefined)) };
        if (shapes.size >= maxShapes) shapes.delete(shapes.keys().next().value!);
        shapes.set(key, shape);
      }
      const { compiled, slots } = shape;
      const parameters = compiled.parameters.map((p, i) => (slots[i] === undefined ? p : values[slots[i]]));
      return { ...compiled, parameters };
    },
  };
}

export type PatientQueries = ReturnType<typeof createPatientQueries>;
