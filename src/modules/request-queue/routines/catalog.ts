/**
 * The routines' view of the engine's routine contract (`../engine/routine-catalog.ts`): what a routine
 * definition holds, the contexts it runs with and the error that fails it for good.
 */
export * from '../engine/routine-catalog.ts';
