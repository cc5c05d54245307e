/**
 * The largest upload the service accepts on a database: `RAW_BODY_LIMIT_BYTES`, lowered to what the
 * server takes in one statement (MySQL's `max_allowed_packet`) when the limit was left at its default.
 *
 * A hospital's shared MariaDB/MySQL server keeps its own defaults (16 MiB on MariaDB, 64 MiB on MySQL 8),
 * which are not the service's to change: the start goes on with the smaller limit and says so. A limit the
 * administrator set explicitly is a promise to the senders, so a server that cannot hold it refuses the
 * start instead.
 */
import type { Config } from '../config.ts';
import type { Database } from './database.ts';
import { largestWriteWithin, statementLimitProblem } from './dialect.ts';

export interface UploadLimit {
  /** The configuration with `limits.rawBodyBytes` the limit in force. */
  readonly config: Config;
  /** The server's statement limit, where it has one. */
  readonly statementLimit?: { readonly bytes: number; readonly setting: string };
  /** One line for the start-up log when the limit in force is below the configured one. */
  readonly warning?: string;
  /** Why the server cannot hold the limit the administrator set (the start is refused). */
  readonly problem?: string;
}

/** The smallest upload limit worth serving; a server taking less is a configuration to fix first. */
const MIN_UPLOAD_BYTES = 1024 * 1024;

/** The upload limit in force on `database` with `config` (see the module comment). */
export async function resolveUploadLimit(database: Database, config: Config): Promise<UploadLimit> {
  const statementLimit = await database.dialect.statementLimit();
  if (statementLimit === undefined) return { config };
  return uploadLimitWithin(statementLimit, config);
}

/** {@link resolveUploadLimit} for a known statement limit. */
export function uploadLimitWithin(
  statementLimit: { bytes: number; setting: string },
  config: Config,
): UploadLimit {
  const configured = config.limits.rawBodyBytes;
  const problem = statementLimitProblem(statementLimit, configured);
  if (problem === undefined) return { config, statementLimit };
  const fitting = largestWriteWithin(statementLimit);
  if (config.limits.isRawBodyBytesSet === true || fitting < MIN_UPLOAD_BYTES)
    return { config, statementLimit, problem };
  const { setting, bytes } = statementLimit;
  const reason = `the database's ${setting} is ${bytes} bytes`;
  return {
    config: {
      ...config,
      limits: { ...config.limits, rawBodyBytes: fitting, rawBodyLimitReason: reason },
    },
    statementLimit,
    warning:
      `${setting} is ${bytes} bytes: uploads are limited to ${fitting} bytes instead of the default ` +
      `${configured} (RAW_BODY_LIMIT_BYTES); set ${setting} to at least ${configured + (bytes - fitting)} ` +
      'on the server for the default, or set RAW_BODY_LIMIT_BYTES to the limit wanted',
  };
}

/** The upload limit in force, for reports: `N bytes` and why when it is below the configured one. */
export function describeUploadLimit(config: Config): string {
  const { rawBodyBytes, rawBodyLimitReason } = config.limits;
  return rawBodyLimitReason === undefined
    ? `${rawBodyBytes} bytes (RAW_BODY_LIMIT_BYTES)`
    : `${rawBodyBytes} bytes (${rawBodyLimitReason})`;
}
