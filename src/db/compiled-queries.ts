/**
 * Hot queries compiled once and run as prepared statements: the one compile cache of the service. Kysely's
 * builder and compiler cost more than an indexed lookup, and a server database plans an unnamed statement
 * on every call; a query that a request runs every time is therefore built once per shape
 * (`createShapeCache`) and run prepared (`runCompiled`). The SQL is still Kysely's, and every value is
 * still a bound parameter.
 */
import type { Compilable, CompiledQuery } from 'kysely';
import type { DialectAdapter } from './dialect.ts';

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

/**
 * At most `maxShapes` shapes are kept (the oldest goes first). Each `Database` has one (`database.shapes`):
 * the SQL of a shape depends on the database's dialect, so modules key shapes by their own names only.
 */
export function createShapeCache(maxShapes = 1000): ShapeCache {
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

/**
 * Runs a compiled single statement outside any transaction, prepared once per connection where the engine
 * has named statements (`DialectAdapter.runPrepared`). Never inside a transaction.
 */
export async function runCompiled<R>(
  database: { readonly dialect: DialectAdapter },
  query: CompiledQuery<R>,
): Promise<R[]> {
  return database.dialect.runPrepared(query);
}
