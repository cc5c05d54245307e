/**
 * Migrates a database to the latest schema. Every entry point calls this first. On PostgreSQL, Kysely's
 * migrator holds a transaction-scoped advisory lock, so concurrent starts never run a migration twice.
 */
import { readdir } from 'node:fs/promises';
import type { Migration, MigrationProvider } from 'kysely/migration';
import { Migrator } from 'kysely/migration';
import type { Database } from './database.ts';
import type { AnyKysely, DialectAdapter } from './dialect.ts';

const MIGRATIONS_DIR = new URL('./migrations/', import.meta.url);

/** A migration file: its `up` gets the dialect adapter for the DDL that differs between engines. */
interface MigrationModule {
  up(db: AnyKysely, dialect: DialectAdapter): Promise<void>;
}

/** Migrations are the files `NNNN-name.ts` in `src/db/migrations`, applied in name order. */
class DirectoryMigrationProvider implements MigrationProvider {
  private readonly dialect: DialectAdapter;

  constructor(dialect: DialectAdapter) {
    this.dialect = dialect;
  }

  async getMigrations(): Promise<Record<string, Migration>> {
    const names = (await readdir(MIGRATIONS_DIR)).filter((n) => /^\d{4}-[\w-]+\.ts$/.test(n)).sort();
    const migrations: Record<string, Migration> = {};
    for (const name of names) {
      const module = (await import(new URL(name, MIGRATIONS_DIR).href)) as MigrationModule;
      migrations[name.replace(/\.ts$/, '')] = { up: (db) => module.up(db, this.dialect) };
    }
    return migrations;
  }
}

export interface MigrationOutcome {
  readonly applied: readonly string[];
}

/** Applies every pending migration; throws with the failing migration's name on error. */
export async function migrateToLatest(database: Database): Promise<MigrationOutcome> {
  const migrator = new Migrator({
    db: database.db,
    provider: new DirectoryMigrationProvider(database.dialect),
  });
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
