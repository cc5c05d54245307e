/**
 * Whether the service can serve this OpenEyes database with this configuration: the schema check
 * (schema-check.ts), with the largest upload the configuration accepts, and the rows the configuration
 * names that the service never adds itself: the request type of `DEFAULT_REQUEST_TYPE` (queue add without
 * a type, attachment uploads) and the institution of `INSTITUTION_CODE` (the events the worker creates).
 */
import type { Config } from '../../config.ts';
import type { Database } from '../database.ts';
import type { SchemaCheckReport } from './schema-check.ts';
import { checkOpenEyesSchema, formatSchemaReport } from './schema-check.ts';

/** Every problem, the schema's first; an empty list when the database can be served. */
export async function findServingProblems(database: Database, config: Config): Promise<SchemaCheckReport> {
  const report = await checkOpenEyesSchema(database.db, { largestWriteBytes: config.limits.rawBodyBytes });
  const problems = [...report.problems];
  // A table the schema check found missing or unusable is reported already: its row is not looked for.
  const exists = async (lookup: () => Promise<unknown>): Promise<boolean | undefined> =>
    lookup().then(
      (row) => row !== undefined,
      () => undefined,
    );
  {
    const type = await exists(() =>
      database.db
        .selectFrom('request_type')
        .select('request_type')
        .where('request_type', '=', config.defaultRequestType)
        .executeTakeFirst(),
    );
    if (type === false)
      problems.push(
        `request type ${config.defaultRequestType} (DEFAULT_REQUEST_TYPE) is not in request_type: queue add without a request_type and attachment uploads use it`,
      );
  }
  {
    const institution = await exists(() =>
      database.db
        .selectFrom('institution')
        .select('id')
        .where('remote_id', '=', config.institutionCode)
        .executeTakeFirst(),
    );
    if (institution === false)
      problems.push(
        `no institution has remote_id ${config.institutionCode} (INSTITUTION_CODE): patient search and the events the worker creates need it`,
      );
  }
  return { databaseName: report.databaseName, problems };
}

/** The report of {@link findServingProblems} as one message, or undefined when there is no problem. */
export async function checkServedOpenEyesDatabase(
  database: Database,
  config: Config,
): Promise<string | undefined> {
  const report = await findServingProblems(database, config);
  return report.problems.length === 0 ? undefined : formatSchemaReport(report);
}
