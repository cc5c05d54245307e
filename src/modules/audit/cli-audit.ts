/**
 * Audit rows of an operator's administrative CLI commands (user create/disable/enable/password, role
 * grant/revoke, queue retry/void), whatever their outcome: done (200) or refused (the status of its
 * error, for example 400 for a refused password or 404 for an unknown user). The actor is the
 * operating-system account that ran the command (`username`, with `user_id` null: no API account acted);
 * the command line's id goes in `request_id`, and `client_address` is null.
 *
 * The row is written after the action and awaited, so that the command reports success only once its
 * row is stored; a row that cannot be written makes the command fail with a message saying so.
 */
import type { CliContext } from '../../cli/cli-types.ts';
import { UsageError } from '../../cli/cli-types.ts';
import { AppError } from '../../errors.ts';
import { createAuditInserter } from './audit.queries.ts';
import type { AuditEntry } from './audit-trail.ts';
import { toAuditRow } from './audit-trail.ts';

export type CliAuditAction =
  | 'user.create'
  | 'user.disable'
  | 'user.enable'
  | 'user.password'
  | 'role.grant'
  | 'role.revoke'
  | 'queue.retry'
  | 'queue.void';

/** What the command tells its audit row once it knows it. */
export interface CliAuditNote {
  readonly targetType?: 'user' | 'request';
  readonly targetIds?: readonly number[];
  readonly detail?: string;
}

function outcomeOf(error: unknown): number {
  if (error instanceof AppError) return error.statusCode;
  if (error instanceof UsageError) return 400;
  return 500;
}

/**
 * Runs `work` as the audited action `action` of the command in `ctx`; `note` (callable any time) sets
 * the target and detail of the row. Returns what `work` returns, or rethrows its error once the refusal
 * is recorded.
 */
export async function runAuditedCliAction<T>(
  ctx: CliContext,
  action: CliAuditAction,
  work: (note: (note: CliAuditNote) => void) => Promise<T>,
): Promise<T> {
  let noted: CliAuditNote = {};
  const note = (more: CliAuditNote): void => {
    noted = { ...noted, ...more };
  };
  let outcome = 200;
  let failure: { readonly error: unknown } | undefined;
  let result: T | undefined;
  try {
    result = await work(note);
  } catch (error) {
    outcome = outcomeOf(error);
    failure = { error };
  }
  const entry: AuditEntry = {
    action,
    userId: null,
    username: ctx.actor.username,
    targetType: noted.targetType ?? null,
    targetIds: noted.targetIds ?? [],
    outcome,
    clientAddress: null,
    requestId: ctx.actor.invocationId,
    detail: noted.detail ?? null,
  };
  try {
    await createAuditInserter(ctx.database)([toAuditRow(entry)]);
  } catch (error) {
    const unwritten = `the audit row of ${action} could not be written (${(error as Error).message})`;
    // A refusal the command explains (a request a worker holds) keeps its own words and exit status;
    // otherwise the database error is the command's outcome (a lost server or privilege: exit 2).
    if (failure?.error instanceof AppError) {
      throw new AppError(failure.error.code, `${failure.error.message}; ${unwritten}`, { cause: error });
    }
    throw new Error(
      `${unwritten}; ` + (failure === undefined ? 'the action itself was done' : 'the action was refused'),
      { cause: error },
    );
  }
  if (failure !== undefined) throw failure.error;
  return result as T;
}
