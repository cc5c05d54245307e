/**
 * Queue commands of the CLI: `queue list [--status S]`, `queue show <request_id>` (the status answer:
 * every routine with its last execution log, redacted as for the endpoint), `queue retry <request_id>`
 * (the request's FAILED routines back to NEW with try count 0 and no next try, the admin re-queue of
 * OpenEyes's request admin, waking the workers of their queues) and `queue void <request_id>` (its NEW/RETRY routines to VOID). Retry and void
 * are the console's actions (`request-actions.ts`): they take the request's locks as a worker does, so a
 * request a worker is running is refused (exit status 1, nothing changed) rather than changed under it. Retry
 * and void are written to the audit trail, refusals included.
 */
import type { RoutineStatus } from '../../../db/schema.ts';
import { ROUTINE_STATUSES } from '../../../db/schema.ts';
import type { CliCommand, CliContext } from '../../../cli/cli-types.ts';
import { EXIT_FAILURE, UsageError } from '../../../cli/cli-types.ts';
import { AppError } from '../../../errors.ts';
import { runAuditedCliAction } from '../../audit/index.ts';
import type { AdminOutcome } from './request-actions.ts';
import { retryFailedRoutines, voidPendingRoutines } from './request-actions.ts';
import { listRoutines } from './routine-list.queries.ts';
import { createStatusService } from '../status/status.ts';
import { queueNotificationsSent } from '../engine/queue-events.ts';

function requestIdOf(ctx: CliContext): number {
  const raw = ctx.args[0]!;
  if (!/^\d{1,9}$/.test(raw)) throw new UsageError(`request_id must be a positive integer, got "${raw}"`);
  return Number(raw);
}

/** The routines an action changed; a refusal (exit status 1) otherwise. */
function changedIds(outcome: AdminOutcome, requestId: number): readonly number[] {
  switch (outcome.kind) {
    case 'done':
      return outcome.routineIds;
    case 'not_found':
      throw new AppError('not_found', `No request ${requestId}`);
    case 'busy':
      throw new AppError(
        'unavailable',
        `Request ${requestId} is being run by a worker: nothing was changed; try again once its routine has finished`,
      );
    case 'changed':
    case 'refused':
      throw new AppError('bad_request', `Request ${requestId}: nothing was changed`);
  }
}

/**
 * Runs a checked action of `request-actions.ts` on request `requestId`. Where the database has a single
 * writer, a worker's open batch holds the whole database: the action waits for it up to the busy timeout,
 * then is refused like a request a worker holds.
 */
async function runLocked(
  ctx: CliContext,
  requestId: number,
  action: (database: CliContext['database'], requestId: number) => Promise<AdminOutcome>,
): Promise<readonly number[]> {
  let outcome: AdminOutcome;
  try {
    outcome = await action(ctx.database, requestId);
  } catch (error) {
    if (ctx.database.dialect.classifyError(error) !== 'unavailable') throw error;
    throw new AppError(
      'unavailable',
      `Request ${requestId} could not be locked (a worker is running it, or the database is busy): nothing was changed`,
    );
  }
  return changedIds(outcome, requestId);
}

export const queueCommands: readonly CliCommand[] = [
  {
    words: ['queue', 'list'],
    options: {
      status: {
        type: 'string',
        valueName: 'S',
        description: `only routines in this status (${ROUTINE_STATUSES.join(', ')})`,
      },
      limit: {
        type: 'string',
        valueName: 'N',
        description: 'at most N routines, newest requests first (default 100)',
      },
    },
    summary: 'list queued routines: request, routine, status, tries, sequence, next try, queue',
    async run(ctx) {
      const status = ctx.options.status;
      if (status !== undefined && !ROUTINE_STATUSES.includes(String(status).toUpperCase() as RoutineStatus)) {
        throw new UsageError(`--status must be one of ${ROUTINE_STATUSES.join(', ')}`);
      }
      const limitText = ctx.options.limit ?? '100';
      if (typeof limitText !== 'string' || !/^\d{1,6}$/.test(limitText) || Number(limitText) === 0) {
        throw new UsageError('--limit must be a positive integer');
      }
      const rows = await listRoutines(ctx.database.db, {
        ...(status === undefined ? {} : { status: String(status).toUpperCase() as RoutineStatus }),
        limit: Number(limitText),
      });
      ctx.out(
        ['request', 'routine_id', 'routine', 'status', 'tries', 'seq', 'next_try', 'queue', 'type'].join(
          '\t',
        ),
      );
      for (const r of rows) {
        ctx.out(
          [
            r.request_id,
            r.id,
            r.routine_name,
            r.status,
            r.try_count,
            r.execute_sequence,
            r.next_try_date_time ?? '-',
            r.execute_request_queue,
            r.request_type,
          ].join('\t'),
        );
      }
    },
  },
  {
    words: ['queue', 'show'],
    arguments: [{ name: 'request_id' }],
    summary: 'show a request: its status and each routine with its last execution log',
    async run(ctx) {
      const requestId = requestIdOf(ctx);
      const status = createStatusService({
        db: ctx.database.db,
        retryBackoff: ctx.config.queueRetryBackoff,
      });
      let shown;
      try {
        shown = await status.readStatus(String(requestId));
      } catch (error) {
        if (!(error instanceof AppError) || error.code !== 'not_found') throw error;
        ctx.err(`No request ${requestId}`);
        return EXIT_FAILURE;
      }
      ctx.out(`Request ${shown.request_id}: ${shown.status}`);
      if (shown.waiting_for_patient !== null) ctx.out(shown.waiting_for_patient.message);
      for (const r of shown.routines) {
        const next = r.next_try_date_time === null ? '' : `, next try ${r.next_try_date_time}`;
        ctx.out(`\n${r.execute_sequence}\t${r.routine_name}\t${r.status}\t${r.try_count} tries${next}`);
        if (r.execution_log === null) ctx.out('  (not run yet)');
        else for (const line of r.execution_log.split('\n')) ctx.out(`  ${line}`);
      }
    },
  },
  {
    words: ['queue', 'retry'],
    arguments: [{ name: 'request_id' }],
    summary: 'put the FAILED routines of a request back to NEW (try count 0, no next try)',
    async run(ctx) {
      const requestId = requestIdOf(ctx);
      const count = await runAuditedCliAction(ctx, 'queue.retry', async (note) => {
        note({ targetType: 'request', targetIds: [requestId] });
        const retried = (await runLocked(ctx, requestId, retryFailedRoutines)).length;
        note({ detail: `${retried} routine(s) back to NEW` });
        return retried;
      });
      // The retry woke the workers of the routines' queues: the notification is sent before the CLI closes
      // its database.
      await queueNotificationsSent(ctx.database);
      ctx.out(`Request ${requestId}: ${count} routine(s) back to NEW`);
    },
  },
  {
    words: ['queue', 'void'],
    arguments: [{ name: 'request_id' }],
    summary: 'void the NEW/RETRY routines of a request (they will not run)',
    async run(ctx) {
      const requestId = requestIdOf(ctx);
      const count = await runAuditedCliAction(ctx, 'queue.void', async (note) => {
        note({ targetType: 'request', targetIds: [requestId] });
        const voided = (await runLocked(ctx, requestId, voidPendingRoutines)).length;
        note({ detail: `${voided} routine(s) voided` });
        return voided;
      });
      ctx.out(`Request ${requestId}: ${count} routine(s) voided`);
    },
  },
];
