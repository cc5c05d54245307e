/**
 * The request queue module: intake (`POST /api/v1/request/queue/add`), status, and the worker. Other
 * modules import it only through this file.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { RequestQueueRouteOptions } from './request-queue.routes.ts';
import { registerRequestQueueRoutes } from './request-queue.routes.ts';

export const requestQueueRoutes: FastifyPluginAsync<RequestQueueRouteOptions> = async (app, options) => {
  await registerRequestQueueRoutes(app, options);
};

export { enqueueRequest } from './intake.ts';
export { insertUploadRequest } from './intake.queries.ts';
export { createIntakeService } from './intake.ts';
export type {
  AlongsideWrite,
  AttachmentRowInput,
  DicomInstanceSubmission,
  EnqueueRequestInput,
  IntakeService,
  QueuedRequest,
} from './intake.ts';
export { REQUEST_QUEUE_CHANNEL, onRequestQueued } from './queue-events.ts';
export type { RequestQueuedEvent, RequestQueuedListener } from './queue-events.ts';
export { createQueueWorker } from './worker.ts';
export type {
  AdminOutcome,
  ExecutionDetail,
  OverallFilter,
  OverallState,
  QueueChoices,
  QueueHealth,
  RequestDetail,
  RequestListFilter,
  RequestListPage,
  RequestListRow,
  RetryInput,
  RoutineDetail,
  WorkerHealth,
} from './queue-admin.ts';
export {
  COUNT_CAP,
  RETRYABLE,
  ROUTINE_STATUSES,
  VOIDABLE,
  listRequests,
  readQueueChoices,
  readRequestDetail,
  readWorkerHealth,
  requeueRequest,
  retryRoutine,
  voidRoutine,
} from './queue-admin.ts';
export { readQueueGauges, registerQueueGauges } from './queue-gauges.ts';
export { javaStringHash, registerRoutineNames } from './routine-library.ts';
export type { QueueGauges } from './queue-gauges.ts';
