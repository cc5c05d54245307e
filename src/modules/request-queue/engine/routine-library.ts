/**
 * The routine names of the service in `routine_library`, registered the way OpenEyes's Java processor
 * registers its scripts: at start, every name of the catalog that has no row is inserted
 * with `hash_code` = Java's `String.hashCode` of a text naming the routine and its implementation; rows
 * are never updated or deleted. `request_type` and `request_routine` rows refer to these names.
 */
import type { Database } from '../../../db/database.ts';

/** Java's `String.hashCode` (a 32-bit int over the UTF-16 code units). */
export function javaStringHash(text: string): number {
  let hash = 0;
  for (let i = 0; i < text.length; i++) hash = (Math.imul(hash, 31) + text.charCodeAt(i)) | 0;
  return hash;
}

/** The text whose hash marks a routine registered by this service. */
export function routineVersionText(name: string): string {
  return `clinical-records-api routine ${name}`;
}

/** Inserts the routine names (a catalog's) that `routine_library` lacks; returns the names inserted. */
export async function registerRoutineNames(database: Database, names: readonly string[]): Promise<string[]> {
  const existing = new Set(
    (await database.db.selectFrom('routine_library').select('routine_name').execute()).map(
      (r) => r.routine_name,
    ),
  );
  const missing = names.filter((name) => !existing.has(name));
  for (const name of missing) {
    // A plain INSERT (another process may have added the name meanwhile: that duplicate is fine), never
    // an upsert, which would need the UPDATE privilege on routine_library.
    await database.db
      .insertInto('routine_library')
      .values({ routine_name: name, hash_code: javaStringHash(routineVersionText(name)) })
      .execute()
      .catch((error: unknown) => {
        if (database.dialect.classifyError(error) !== 'unique') throw error;
      });
  }
  return missing;
}
