/**
 * CLI commands of the dataset module: `import`, `export`, `demo-data` (each shows its progress on stderr,
 * `ctx.progress`, and ends with one summary line: counts and time), and `demo codes`.
 */
import { createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import type { CliCommand, CliContext } from '../../cli/cli-types.ts';
import { UsageError } from '../../cli/cli-types.ts';
import type { ProgressReporter } from '../../cli/progress.ts';
import { formatSeconds } from '../../cli/progress.ts';
import { UnknownTableError, exportDatasetToFile } from './dataset-export.ts';
import type { ImportPhase } from './dataset-import.ts';
import { importDatasetFile } from './dataset-import.ts';
import { DEMO_USERNAME, demoCodeLine, findDemoSignatureCodes } from './demo-data.ts';
import { DEMO_MAX_PATIENTS, generateDemoPopulation } from './demo-population.ts';

/** Why the dataset commands refuse on an OpenEyes database. */
const OPENEYES_DATA =
  "The dataset commands work on the service's own schema only: on an OpenEyes database (DATABASE_SCHEMA=openeyes) OpenEyes owns the patients, users and events.";

const PHASES: Readonly<Record<ImportPhase, { label: string; unit: string }>> = {
  reading: { label: 'Reading', unit: 'bytes' },
  checking: { label: 'Checking', unit: 'bytes' },
  writing: { label: 'Importing', unit: 'rows' },
};

/**
 * Stdin is read twice or more by the import (it is streamed, not held), so it is first copied to a file
 * only this user can read, removed afterwards whatever happens.
 */
async function withStdinFile<T>(ctx: CliContext, work: (file: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(path.join(tmpdir(), 'cra-import-'));
  try {
    const file = path.join(dir, 'dataset.json');
    await pipeline(ctx.stdinStream('the dataset'), createWriteStream(file, { mode: 0o600 }));
    return await work(file);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const importCommand: CliCommand = {
  words: ['import'],
  ownSchemaOnly: OPENEYES_DATA,
  arguments: [{ name: 'file' }],
  options: { upsert: { type: 'boolean', description: 'replace rows whose primary key exists' } },
  summary: 'import a dataset file (- for stdin) in one transaction, streamed',
  async run(ctx) {
    const file = ctx.args[0]!;
    const started = performance.now();
    let phase: ImportPhase | undefined;
    let progress: ProgressReporter | undefined;
    const run = (source: string) =>
      importDatasetFile(ctx, source, {
        upsert: ctx.options.upsert === true,
        passwordPolicy: ctx.config.passwordPolicy,
        onWarning: (message) => ctx.err(`Warning: ${message}`),
        onProgress(next, done, total) {
          if (next !== phase) {
            progress?.stop();
            phase = next;
            progress = ctx.progress({ ...PHASES[next], total });
          }
          progress!.update(done, total);
        },
      });
    let summary;
    try {
      summary = file === '-' ? await withStdinFile(ctx, run) : await run(file);
    } finally {
      progress?.stop();
    }
    let inserted = 0;
    let updated = 0;
    let unchanged = 0;
    for (const [table, count] of Object.entries(summary.tables)) {
      inserted += count.inserted;
      updated += count.updated;
      unchanged += count.unchanged;
      if (count.inserted + count.updated > 0) {
        ctx.out(`  ${table}: ${count.inserted} inserted, ${count.updated} updated`);
      }
    }
    ctx.out(
      `Imported ${inserted} rows, updated ${updated}, ${unchanged} already present; ` +
        `${summary.filesWritten} files written in ${formatSeconds((performance.now() - started) / 1000)}`,
    );
  },
};

const exportCommand: CliCommand = {
  words: ['export'],
  ownSchemaOnly: OPENEYES_DATA,
  arguments: [{ name: 'file' }],
  options: {
    tables: { type: 'string', valueName: 'a,b', description: 'only these tables (comma-separated)' },
  },
  summary: 'export every table (or --tables) to a dataset file, streamed',
  async run(ctx) {
    const tablesOption = ctx.options.tables;
    const tables =
      typeof tablesOption === 'string'
        ? tablesOption
            .split(',')
            .map((t) => t.trim())
            .filter((t) => t !== '')
        : undefined;
    const started = performance.now();
    let progress: ProgressReporter | undefined;
    let summary;
    try {
      summary = await exportDatasetToFile(ctx, ctx.args[0]!, {
        ...(tables === undefined ? {} : { tables }),
        onProgress(done, total) {
          progress ??= ctx.progress({ label: 'Exporting', unit: 'rows', total });
          progress.update(done, total);
        },
      });
    } catch (error) {
      if (error instanceof UnknownTableError) throw new UsageError(error.message);
      throw error;
    } finally {
      progress?.stop();
    }
    const counts = Object.values(summary.rows);
    const total = counts.reduce((a, b) => a + b, 0);
    ctx.out(
      `Exported ${total} rows from ${counts.length} tables to ${ctx.args[0]!} ` +
        `in ${formatSeconds((performance.now() - started) / 1000)}`,
    );
    if (summary.missingFiles > 0) {
      ctx.err(
        `Warning: ${summary.missingFiles} protected files were missing from the store and were exported without content`,
      );
    }
  },
};

const demoDataCommand: CliCommand = {
  words: ['demo-data'],
  ownSchemaOnly: OPENEYES_DATA,
  options: {
    patients: {
      type: 'string',
      valueName: 'N',
      isRequired: true,
      description: `patients to add (1 to ${DEMO_MAX_PATIENTS})`,
    },
  },
  summary: 'add N synthetic patients after any demo patients already there',
  async run(ctx) {
    const raw = ctx.options.patients;
    if (typeof raw !== 'string') throw new UsageError('--patients N is required');
    const patients = /^\d+$/.test(raw) ? Number(raw) : NaN;
    if (!Number.isSafeInteger(patients) || patients < 1 || patients > DEMO_MAX_PATIENTS) {
      throw new UsageError(`--patients must be a whole number from 1 to ${DEMO_MAX_PATIENTS}, got "${raw}"`);
    }
    const progress = ctx.progress({ label: 'Adding demo patients', unit: 'patients', total: patients });
    let result;
    try {
      result = await generateDemoPopulation(ctx.database, {
        patients,
        institutionCode: ctx.config.institutionCode,
        onProgress: (done, total) => progress.update(done, total),
      });
    } finally {
      progress.stop();
    }
    const seconds = result.elapsedMs / 1000;
    ctx.out(
      `Added ${result.added} demo patients (demo index ${result.firstIndex} to ${result.firstIndex + result.added - 1}, ` +
        `patient id from ${result.firstPatientId}) on ${ctx.database.dialect.name} in ${seconds.toFixed(1)} s ` +
        `(${Math.round(result.added / Math.max(seconds, 0.001))} patients/s)`,
    );
  },
};

const demoCodesCommand: CliCommand = {
  words: ['demo', 'codes'],
  ownSchemaOnly: OPENEYES_DATA,
  summary:
    'list the demo unique codes for sign/add (unique_identifier and extra_info), as the first start printed them',
  async run(ctx) {
    const codes = await findDemoSignatureCodes(ctx.database.db);
    if (codes === undefined) {
      ctx.err(
        `This database has no demo data (no demo account "${DEMO_USERNAME}"): demo unique codes exist only on a database DEMO_DATA loaded.`,
      );
      return 2;
    }
    if (codes.length === 0) ctx.err('The demo data has no active unique code left.');
    for (const code of codes) ctx.out(demoCodeLine(code));
  },
};

export const datasetCommands: readonly CliCommand[] = [
  importCommand,
  exportCommand,
  demoDataCommand,
  demoCodesCommand,
];
