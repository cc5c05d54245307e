/**
 * The routines' view of the queue engine's routine contract (`request-queue`'s `engine/routine-catalog.ts`):
 * what a routine definition holds, the contexts it runs with and the error that fails it for good.
 */
export { PermanentRoutineError, createRoutineCatalog, defineRoutine } from '../request-queue/index.ts';
export type {
  PrepareContext,
  RoutineCatalog,
  RoutineContext,
  RoutineDefinition,
} from '../request-queue/index.ts';
