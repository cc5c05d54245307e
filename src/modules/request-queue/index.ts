/**
 * The request queue module: `intake/` (`POST /api/v1/request/queue/add`, `enqueueRequest`), `status/`
 * (the status endpoint and the overall status rule), `engine/` (the generic engine and worker, which run
 * the routine catalog they are handed) and `admin/` (the console's request list, detail and actions, the
 * queue CLI, the queue gauges). It knows no routine: the routines and their chain are the filing module's
 * (`src/modules/filing`), handed to the engine by the composition roots. Other modules import it only
 * through this file.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { RequestQueueRouteOptions } from './request-queue.routes.ts';
import { registerRequestQueueRoutes } from './request-queue.routes.ts';

export const requestQueueRoutes: FastifyPluginAsync<RequestQueueRouteOptions> = async (app, options) => {
  await registerRequestQueueRoutes(app, options);
};

export { enqueueRequest } from './intake/enqueue.ts';
export type { AlongsideWrite, EnqueueRequestInput, QueuedRequest } from './intake/enqueue.ts';
export { insertUploadRequest } from './intake/intake.queries.ts';
export type { AttachmentRowInput } from './intake/intake.queries.ts';
export { createIntakeService } from './intake/intake.service.ts';
export { findReservedRequestKeys, reservedKeysMessage } from './intake/reserved-keys.ts';
export type { DicomInstanceSubmission, IntakeService } from './intake/intake.service.ts';
export { REQUEST_QUEUE_CHANNEL, onRequestQueued } from './engine/queue-events.ts';
export type { RequestQueuedEvent, RequestQueuedListener } from './engine/queue-events.ts';
export { createQueueWorker } from './engine/worker.ts';
export type { IntakePace } from './engine/intake-pace.ts';
export { createIntakePace } from './engine/intake-pace.ts';
export type { QueueWorker, WorkerOptions } from './engine/worker.ts';
export { createQueueEngine } from './engine/engine.ts';
export type { QueueEngine, StepOutcome } from './engine/engine.ts';
// The routine contract the filing module's routines are written against.
export { PermanentRoutineError, createRoutineCatalog, defineRoutine } from './engine/routine-catalog.ts';
export type {
  PrepareContext,
  RoutineCatalog,
  RoutineContext,
  RoutineDefinition,
} from './engine/routine-catalog.ts';
// What routines and the console's request edits (the filing module) build on: the queue's locks and its
// one checked change of routines (which wakes the workers after it), the mirrored request details and
// the version an operator saw.
export { mirrorRequestDetails } from './engine/request-details.ts';
export { changeRoutines, withRequestLocks } from './admin/request-actions.ts';
export type { ChooseRoutines, RoutineChange, RoutineRow } from './admin/request-actions.ts';
export { requestVersion } from './admin/request-detail.ts';
export type {
  OverallFilter,
  OverallState,
  RequestListFilter,
  RequestListPage,
  RequestListRow,
} from './admin/request-list.ts';
export { listRequests } from './admin/request-list.ts';
// The routine statuses and the pending set, declared with the table they are stored in.
export { PENDING_STATUSES, ROUTINE_STATUSES, isPendingStatus } from '../../db/schema.ts';
export type { PendingStatus, RoutineStatus } from '../../db/schema.ts';
export type { ExecutionDetail, RequestDetail, RoutineDetail } from './admin/request-detail.ts';
export { readRequestDetail } from './admin/request-detail.ts';
export type { AdminOutcome, RetryInput } from './admin/request-actions.ts';
export { RETRYABLE, VOIDABLE, requeueRequest, retryRoutine, voidRoutine } from './admin/request-actions.ts';
export type { QueueChoices, QueueHealth, WorkerHealth } from './admin/queue-health.ts';
export { COUNT_CAP, readQueueChoices, readWorkerHealth } from './admin/queue-health.ts';
export { readQueueGauges, registerQueueGauges } from './admin/queue-gauges.ts';
export type { WaitingForPatient } from './status/waiting.ts';
export { describeWaiting, describeWaitingDetails, maxTriesOf } from './status/waiting.ts';
export { javaStringHash, registerRoutineNames } from './engine/routine-library.ts';
export type { QueueGauges } from './admin/queue-gauges.ts';
export type { RequestSource, RequestSummary } from './admin/request-summary.ts';
export { isRequestThumbnail, readRequestSummaries } from './admin/request-summary.ts';
export { findRoutineRequestId } from './admin/routine-list.queries.ts';
