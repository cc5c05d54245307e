/** CLI commands of the dataset module: `import`, `export`, `demo-data`. */
import { readFile } from 'node:fs/promises';
import type { CliCommand } from '../../cli/cli-types.ts';
import { UsageError } from '../../cli/cli-types.ts';
import { exportDatasetToFile } from './dataset-export.ts';
import { importDatasetText } from './dataset-import.ts';
import { DEMO_MAX_PATIENTS, generateDemoPopulation } from './demo-population.ts';

const importCommand: CliCommand = {
  words: ['import'],
  arguments: [{ name: 'file' }],
  options: { upsert: { type: 'boolean', description: 'replace rows whose primary key exists' } },
  summary: 'import a dataset file (- for stdin) in one transaction',
  async run(ctx) {
    const file = ctx.args[0]!;
    const started = performance.now();
    const text = file === '-' ? await ctx.readStdin('the dataset') : await readFile(file, 'utf8');
    const summary = await importDatasetText(ctx, text, { upsert: ctx.options.upsert === true });
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
        `${summary.filesWritten} files written (${Math.round(performance.now() - started)} ms)`,
    );
  },
};

const exportCommand: CliCommand = {
  words: ['export'],
  arguments: [{ name: 'file' }],
  options: {
    tables: { type: 'string', valueName: 'a,b', description: 'only these tables (comma-separated)' },
  },
  summary: 'export every table (or --tables) to a dataset file',
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
    let summary;
    try {
      summary = await exportDatasetToFile(ctx, ctx.args[0]!, tables === undefined ? {} : { tables });
    } catch (error) {
      if (error instanceof Error && error.message.startsWith('Unknown table'))
        throw new UsageError(error.message);
      throw error;
    }
    const counts = Object.values(summary.rows);
    const total = counts.reduce((a, b) => a + b, 0);
    ctx.out(
      `Exported ${total} rows from ${counts.length} tables to ${ctx.args[0]!} ` +
        `(${Math.round(performance.now() - started)} ms)`,
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
    let nextReport = 0.1;
    const result = await generateDemoPopulation(ctx.database, {
      patients,
      institutionCode: ctx.config.institutionCode,
      onProgress(done, total) {
        if (total >= 100_000 && done / total >= nextReport) {
          ctx.err(`  ${done} / ${total} patients`);
          nextReport += 0.1;
        }
      },
    });
    const seconds = result.elapsedMs / 1000;
    ctx.out(
      `Added ${result.added} demo patients (demo index ${result.firstIndex} to ${result.firstIndex + result.added - 1}, ` +
        `patient id from ${result.firstPatientId}) on ${ctx.database.dialect} in ${seconds.toFixed(1)} s ` +
        `(${Math.round(result.added / Math.max(seconds, 0.001))} patients/s)`,
    );
  },
};

export const datasetCommands: readonly CliCommand[] = [importCommand, exportCommand, demoDataCommand];
