/**
 * Hot queries compiled once and run as prepared statements. Kysely's builder and compiler cost more than
 * an indexed lookup, and PostgreSQL plans an unnamed statement on every call; a query that a request
 * runs every time is therefore built once per shape (`createShapeCache`) and run by name
 * (`runCompiled`). The SQL is still Kysely's, and every value is still a bound parameter.
 */
import type { Compilable, CompiledQuery } from 'kysely';
import { createHash } from 'node:crypto';
import type { QueryResultRow } from 'pg';
import type { Database } from './database.ts';

const SLOT = Symbol('slot');
interface Slot {
  readonly [SLOT]: number;
}
const isSlot = (value: unknown): value is Slot =>
  typeof value === 'object' && value !== null && SLOT in value;

export interface ShapeCache {
  /**
   * The compiled query of the shape `key` with `values` bound. The first call of a key builds it with
   * placeholder objects in place of the values (`build` must put each `slots[i]` where `values[i]` goes,
   * and nothing else from `values`); every later call reuses its SQL and puts the real values where the
   * placeholders were. The key must name everything that changes the SQL text (which criteria are
   * present, counts, order).
   */
  compile<R>(
    key: string,
    values: readonly unknown[],
    build: (slots: readonly unknown[]) => Compilable<R>,
  ): CompiledQuery<R>;
}

/** At most `maxShapes` shapes are kept (the oldest goes first). */
export function createShapeCache(maxShapes = 500): ShapeCache {
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

const statementNames = new Map<string, string>();

/**
 * Runs a compiled query. PostgreSQL: as a named prepared statement on the pool (autocommit), planned
 * once per connection instead of on every call; the name is the hash of the SQL, and the row parsers
 * are the same pg ones. SQLite: through Kysely, whose executor keeps its prepared statements by SQL.
 * Never inside a transaction: use it for single statements only.
 */
export async function runCompiled<R>(database: Database, query: CompiledQuery<R>): Promise<R[]> {
  const pool = database.pool;
  if (pool === undefined) return (await database.db.executeQuery(query)).rows;
  let name = statementNames.get(query.sql);
  if (name === undefined) {
    name = `cra_${createHash('sha1').update(query.sql).digest('hex').slice(0, 24)}`;
    if (statementNames.size >= 1000) statementNames.delete(statementNames.keys().next().value!);
    statementNames.set(query.sql, name);
  }
  const result = await pool.query<R & QueryResultRow>({
    name,
    text: query.sql,
    values: [...query.parameters],
  });
  return result.rows;
}
