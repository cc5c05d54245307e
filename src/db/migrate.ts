/**
 * Migrates a database to the latest schema. Every entry point calls this first. On PostgreSQL, Kysely's
 * migrator holds a transaction-scoped advisory lock (on MySQL a named lock), so concurrent starts never
 * run a migration twice.
 *
 * Two sets of migrations: the own schema's (`migrations/`), and on an OpenEyes database those of the
 * service's own `cra_` tables only (`openeyes/migrations/`), recorded in `cra_migration`, so that nothing
 * of OpenEyes's schema is ever created, altered or dropped.
 */
import { readdir } from 'node:fs/promises';
import type { Migration, MigrationProvider } from 'kysely/migration';
import { Migrator } from 'kysely/migration';
import type { Database } from './database.ts';
import type { AnyKysely, DialectAdapter } from './dialect.ts';

interface MigrationSet {
  readonly dir: URL;
  /** Kysely's bookkeeping tables (its defaults in the own schema). */
  readonly tableNames?: { readonly migrationTableName: string; readonly migrationLockTableName: string };
}

const OWN_MIGRATIONS: MigrationSet = { dir: new URL('./migrations/', import.meta.url) };
const OPENEYES_MIGRATIONS: MigrationSet = {
  dir: new URL('./openeyes/migrations/', import.meta.url),
  tableNames: { migrationTableName: 'cra_migration', migrationLockTableName: 'cra_migration_lock' },
};

/** A migration file: its `up` gets the dialect adapter for the DDL that differs between engines. */
interface MigrationModule {
  up(db: AnyKysely, dialect: DialectAdapter): Promise<void>;
}

/** Migrations are the files `NNNN-name.ts` of a set's folder, applied in name order. */
class DirectoryMigrationProvider implements MigrationProvider {
  private readonly dialect: DialectAdapter;
  private readonly dir: URL;

  constructor(dialect: DialectAdapter, dir: URL) {
    this.dialect = dialect;
    this.dir = dir;
  }

  async getMigrations(): Promise<Record<string, Migration>> {
    const names = (await readdir(this.dir)).filter((n) => /^\d{4}-[\w-]+\.ts$/.test(n)).sort();
    const migrations: Record<string, Migration> = {};
    for (const name of names) {
      const module = (await import(new URL(name, this.dir).href)) as MigrationModule;
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
  const set = database.schema.name === 'openeyes' ? OPENEYES_MIGRATIONS : OWN_MIGRATIONS;
  const migrator = new Migrator({
    db: database.db,
    provider: new DirectoryMigrationProvider(database.dialect, set.dir),
    ...set.tableNames,
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
