/**
 * The routines' view of the queue engine's routine contract (`request-queue`'s `engine/routine-catalog.ts`):
 * what a routine definition holds, the contexts it runs with and the error that fails it for good; and
 * the filing module's own form of a routine, which returns what it did for the chain (`chain.ts`) to
 * choose the routine that follows.
 */
import type { RoutineContext, RoutineDefinition } from '../request-queue/index.ts';

export { PermanentRoutineError, createRoutineCatalog, defineRoutine } from '../request-queue/index.ts';
export type {
  PrepareContext,
  RoutineCatalog,
  RoutineContext,
  RoutineDefinition,
} from '../request-queue/index.ts';

/**
 * A routine of the filing chain: an engine routine whose `run` resolves to its outcome (what it found or
 * did), from which `FILING_CHAIN` chooses the next routines. It never chains a routine itself.
 */
export interface FilingRoutine<P, O> extends Omit<RoutineDefinition<P>, 'run'> {
  run(ctx: RoutineContext, prepared: P): Promise<O>;
}

/** A typed helper so that `prepare`'s result flows into `run` and `run`'s outcome into the chain. */
export function defineFilingRoutine<P, O = void>(routine: FilingRoutine<P, O>): FilingRoutine<P, O> {
  return routine;
}
