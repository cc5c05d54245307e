/**
 * Whether the service can serve this OpenEyes database with this configuration: the schema check
 * (schema-check.ts), the upload limit the server's `max_allowed_packet` allows (upload-limit.ts), and the rows the configuration
 * names that the service never adds itself: the request type of `DEFAULT_REQUEST_TYPE` (queue add without
 * a type, attachment uploads) and the institution of `INSTITUTION_CODE` (the events the worker creates).
 */
import type { Config } from '../../config.ts';
import type { Database } from '../database.ts';
import type { UploadLimit } from '../upload-limit.ts';
import { resolveUploadLimit } from '../upload-limit.ts';
import type { SchemaCheckReport } from './schema-check.ts';
import { checkOpenEyesSchema, formatSchemaReport } from './schema-check.ts';

export interface ServingReport extends SchemaCheckReport {
  /** The upload limit in force on this database, and why it is lower than configured. */
  readonly uploadLimit: UploadLimit;
}

/** Every problem, the schema's first; an empty list when the database can be served. */
export async function findServingProblems(database: Database, config: Config): Promise<ServingReport> {
  const report = await checkOpenEyesSchema(database.db);
  const uploadLimit = await resolveUploadLimit(database, config);
  const problems = [...report.problems];
  if (uploadLimit.problem !== undefined) problems.push(uploadLimit.problem);
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
  return { databaseName: report.databaseName, problems, uploadLimit };
}

/**
 * The report of {@link findServingProblems} as one message (undefined when there is no problem), and the
 * upload limit in force.
 */
export async function checkServedOpenEyesDatabase(
  database: Database,
  config: Config,
): Promise<{ problems?: string; uploadLimit: UploadLimit }> {
  const report = await findServingProblems(database, config);
  const { uploadLimit } = report;
  return report.problems.length === 0
    ? { uploadLimit }
    : { problems: formatSchemaReport(report), uploadLimit };
}
