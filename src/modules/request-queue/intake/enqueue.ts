/**
 * The one write of a new request: the request, its attachment rows and its first
 * routine in one transaction, then the workers woken. Used by queue add's intake, by attachment uploads
 * and by tests and benchmarks that queue requests directly.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../../../db/database.ts';
import { nowDateTime } from '../../../db/database.ts';
import type { DB } from '../../../db/schema.ts';
import { AppError } from '../../../errors.ts';
import { emitRequestQueued, notifyQueueAfterCommit } from '../engine/queue-events.ts';
import { insertQueuedRequestInOneStatement } from './intake.queries.postgres.ts';
import type { AttachmentRowInput, QueuedRequestRows, RequestTypeRoute } from './intake.queries.ts';
import { findRequestTypeRoute, insertQueuedRequest } from './intake.queries.ts';

export type AlongsideWrite = (trx: Kysely<DB>, requestId: number) => Promise<void>;

export interface EnqueueRequestInput {
  readonly requestType: string;
  /** The type's routine and queue when the caller already looked them up; read in the transaction if not. */
  readonly route?: RequestTypeRoute;
  readonly systemMessage?: string;
  /** Every attachment_data row of the request (REQUEST_DATA, payload, FORM_DATA, HEADER_DATA). */
  readonly attachments?: readonly AttachmentRowInput[];
  /** Audit user; the system user 1 when omitted. */
  readonly userId?: number;
  /**
   * Writes of the caller's own tables that must commit or roll back with the request (a record of where
   * it came from); run in the same transaction after the request's rows.
   */
  readonly alongside?: AlongsideWrite;
}

export interface QueuedRequest {
  readonly requestId: number;
  readonly routineName: string;
  readonly queue: string;
}

/**
 * Writes one request, its attachment rows and its first routine (NEW, the type's default routine and
 * queue, sequence 10) in one durable write transaction (one statement where the engine has writable
 * CTEs), then, once committed, wakes the workers: {@link emitRequestQueued} in this process and a
 * notification for other processes where the engine has them (see {@link notifyQueueAfterCommit}).
 * Throws a 422 AppError for an unknown request type.
 */
export async function enqueueRequest(database: Database, input: EnqueueRequestInput): Promise<QueuedRequest> {
  const route = input.route ?? (await findRequestTypeRoute(database.db, input.requestType));
  if (route === undefined) {
    throw new AppError('validation_failed', 'Unprocessable Entity', {
      fields: { request_type: `Unknown request type: ${input.requestType}` },
    });
  }
  const rows: QueuedRequestRows = {
    route,
    systemMessage: input.systemMessage ?? '',
    attachments: input.attachments ?? [],
    userId: input.userId ?? 1,
    now: nowDateTime(),
  };
  const { alongside } = input;
  const requestId =
    alongside === undefined && database.dialect.hasWritableCte && rows.attachments.length > 0
      ? await insertQueuedRequestInOneStatement(database, rows)
      : await database.writeTransaction(async (trx) => {
          const id = await insertQueuedRequest(trx, rows);
          await alongside?.(trx, id);
          return id;
        });
  emitRequestQueued({ requestId, queue: route.queue });
  notifyQueueAfterCommit(database, route.queue);
  return { requestId, routineName: route.routineName, queue: route.queue };
}
