/**
 * `npm run cli -- openeyes check`, `openeyes grants` and `openeyes suggest-indexes`
 * (DATABASE_SCHEMA=openeyes): the report of what the service needs of an OpenEyes database, the GRANT
 * statements of its account, and the DDL of the indexes its queries use that the database lacks, for the
 * site's database administrator (the service never creates one itself).
 */
import type { CliCommand, CliContext } from '../cli/cli-types.ts';
import { EXIT_OK, EXIT_USAGE, UsageError } from '../cli/cli-types.ts';
import { openEyesGrants } from '../db/openeyes/grants.ts';
import { findMissingIndexes, formatIndexSuggestions } from '../db/openeyes/index-advice.ts';
import { formatSchemaReport } from '../db/openeyes/schema-check.ts';
import { findServingProblems } from '../db/openeyes/serving-check.ts';
import { describeUploadLimit } from '../db/upload-limit.ts';
import { writeFileDurably } from '../files/durable-file.ts';

function refuseOwnSchema(ctx: CliContext): boolean {
  if (ctx.database.schema.name === 'openeyes') return false;
  ctx.err(
    'The openeyes commands need DATABASE_SCHEMA=openeyes and the mysql:// URL of an OpenEyes database.',
  );
  return true;
}

/** The name of the connection's database. */
async function currentDatabase(ctx: CliContext): Promise<string> {
  const current = await ctx.database.db
    .selectNoFrom((eb) => eb.fn<string>('database', []).as('name'))
    .executeTakeFirst();
  return current?.name ?? '';
}

export const openEyesCommands: readonly CliCommand[] = [
  {
    words: ['openeyes', 'check'],
    summary:
      'check that the OpenEyes database has every table and column the service uses (exit 2 with every problem)',
    isDatabaseReport: true,
    async run(ctx) {
      if (refuseOwnSchema(ctx)) return EXIT_USAGE;
      const report = await findServingProblems(ctx.database, ctx.config);
      ctx.out(formatSchemaReport(report));
      const { uploadLimit } = report;
      if (uploadLimit.problem === undefined)
        ctx.out(`Largest upload accepted: ${describeUploadLimit(uploadLimit.config)}`);
      if (uploadLimit.warning !== undefined) ctx.out(`Note: ${uploadLimit.warning}`);
      return report.problems.length === 0 ? EXIT_OK : EXIT_USAGE;
    },
  },
  {
    words: ['openeyes', 'grants'],
    arguments: [{ name: 'account' }],
    options: {
      output: {
        type: 'string',
        valueName: 'FILE',
        description:
          'write the statements to FILE, a script the mariadb/mysql client runs as it is (npm prints its own lines on stdout unless run with -s)',
      },
    },
    summary:
      "print the GRANT statements of the privileges the service's account needs (account as 'name'@'host')",
    isDatabaseReport: true,
    async run(ctx) {
      if (refuseOwnSchema(ctx)) return EXIT_USAGE;
      const account = ctx.args[0]!;
      if (!/^'[^']+'@'[^']+'$/.test(account))
        throw new UsageError("give the account as MySQL names it, for example 'cra'@'10.0.0.%'");
      const script = `${openEyesGrants(account, await currentDatabase(ctx)).join('\n')}\n`;
      const output = ctx.options.output;
      if (typeof output === 'string') {
        // A script for the database's administrator (no secrets): readable by others, as a plain write makes it.
        await writeFileDurably(output, script, { mode: 0o644 });
        ctx.err(`Wrote the grants of ${account} to ${output}`);
      } else {
        ctx.stdout.write(script);
      }
      return EXIT_OK;
    },
  },
  {
    words: ['openeyes', 'suggest-indexes'],
    summary: "print the DDL of the indexes the service's queries use that the OpenEyes database lacks",
    isDatabaseReport: true,
    async run(ctx) {
      if (refuseOwnSchema(ctx)) return EXIT_USAGE;
      ctx.out(formatIndexSuggestions(await currentDatabase(ctx), await findMissingIndexes(ctx.database.db)));
      return EXIT_OK;
    },
  },
];
