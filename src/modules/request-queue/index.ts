/**
 * The request queue module: intake (`POST /api/v1/request/queue/add`), status, and the worker. Other
 * modules import it only through this file.
 */
import type { FastifyPluginAsync } from 'fastify';
import type { ModuleOptions } from '../../http/module.ts';
import { registerRequestQueueRoutes } from './request-queue.routes.ts';

export const requestQueueRoutes: FastifyPluginAsync<ModuleOptions> = async (app, options) => {
  await registerRequestQueueRoutes(app, options);
};

export { enqueueRequest } from './intake/intake.service.ts';
export { insertUploadRequest } from './intake/intake.queries.ts';
export { createIntakeService } from './intake/intake.service.ts';
export type {
  AlongsideWrite,
  AttachmentRowInput,
  DicomInstanceSubmission,
  EnqueueRequestInput,
  IntakeService,
  QueuedRequest,
} from './intake/intake.service.ts';
export { REQUEST_QUEUE_CHANNEL, onRequestQueued } from './engine/queue-events.ts';
export type { RequestQueuedEvent, RequestQueuedListener } from './engine/queue-events.ts';
export { createQueueWorker } from './engine/worker.ts';
export type { QueueWorker, WorkerOptions } from './engine/worker.ts';
export { createQueueEngine } from './engine/engine.ts';
export type { QueueEngine, StepOutcome } from './engine/engine.ts';
// The routines of the service: the composition roots (`src/main`) hand them to the engine and register
// their names; the engine itself knows no routine.
export { DEFAULT_ROUTINES, defaultRoutineCatalog } from './routines/index.ts';
export { PermanentRoutineError, createRoutineCatalog, defineRoutine } from './engine/routine-catalog.ts';
export type { RoutineCatalog, RoutineDefinition } from './engine/routine-catalog.ts';
export { queueCommands } from './admin/queue.cli.ts';
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
} from './admin/queue-admin.ts';
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
} from './admin/queue-admin.ts';
export { readQueueGauges, registerQueueGauges } from './admin/queue-gauges.ts';
export { javaStringHash, registerRoutineNames } from './engine/routine-library.ts';
export type { QueueGauges } from './admin/queue-gauges.ts';
