/**
 * Migrates a database to the latest schema. Every entry point calls this first. On PostgreSQL, Kysely's
 * migrator holds a transaction-scoped advisory lock, so concurrent starts never run a migration twice.
 */
import { readdir } from 'node:fs/promises';
import type { Kysely } from 'kysely';
import type { Migration, MigrationProvider } from 'kysely/migration';
import { Migrator } from 'kysely/migration';

const MIGRATIONS_DIR = new URL('./migrations/', import.meta.url);

/** Migrations are the files `NNNN-name.ts` in `src/db/migrations`, applied in name order. */
class DirectoryMigrationProvider implements MigrationProvider {
  async getMigrations(): Promise<Record<string, Migration>> {
    const names = (await readdir(MIGRATIONS_DIR)).filter((n) => /^\d{4}-[\w-]+\.ts$/.test(n)).sort();
    const migrations: Record<string, Migration> = {};
    for (const name of names) {
      migrations[name.replace(/\.ts$/, '')] = (await import(new URL(name, MIGRATIONS_DIR).href)) as Migration;
    }
    return migrations;
  }
}

export interface MigrationOutcome {
  readonly applied: readonly string[];
}

/** Applies every pending migration; throws with the failing migration's name on error. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function migrateToLatest(db: Kysely<any>): Promise<MigrationOutcome> {
  const migrator = new Migrator({ db, provider: new DirectoryMigrationProvider() });
  const { error, results } = await migrator.migrateToLatest();
  if (error !== undefined) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName ?? 'unknown';
    throw new Error(
      `Migration ${failed} failed: ${error instanceof Error ? error.message : JSON.stringify(error)}`,
      {
        cause: error,
      },
    );
  }
  return { applied: (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName) };
}
