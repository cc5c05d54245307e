/**
 * The filing module: every routine the queue worker runs (registered by `routine_name`, names seeded in
 * `routine_library`), the chain that says which follows which (`chain.ts`), and the console's fixes of a
 * request's match data and event date, which run those routines again. The composition roots hand
 * `defaultRoutineCatalog` to the queue engine.
 */
import type { RoutineCatalog } from './catalog.ts';
import { createRoutineCatalog } from './catalog.ts';
import { FILING_CHAIN, patientMatchStep } from './chain.ts';
import type { PatientMatchOptions } from './patient-match.ts';
import { createPatientMatchRoutine } from './patient-match.ts';
import { noopRoutine } from './noop.ts';

/** Every routine of the catalog: the steps of the filing chain, then `NOOP` (no chain). */
export const DEFAULT_ROUTINES = [...FILING_CHAIN.map((step) => step.definition), noopRoutine] as const;

export const defaultRoutineCatalog: RoutineCatalog = createRoutineCatalog(DEFAULT_ROUTINES);

/**
 * The default catalog, its `PATIENT_MATCH` asking `missingPatients` (the PAS query) for a patient no
 * local one matches; the default catalog itself without one.
 */
export function createFilingCatalog(options: PatientMatchOptions): RoutineCatalog {
  if (options.missingPatients === undefined) return defaultRoutineCatalog;
  // A later routine of the same name replaces the earlier one.
  return createRoutineCatalog([
    ...DEFAULT_ROUTINES,
    patientMatchStep(createPatientMatchRoutine(options)).definition,
  ]);
}

export type { ChosenRoutines, FilingStep, NextRoutine } from './chain.ts';
export { FILING_CHAIN, defineStep, findStep } from './chain.ts';
export type { PatientMatchOptions } from './patient-match.ts';
export type {
  FilingRoutine,
  PrepareContext,
  RoutineCatalog,
  RoutineContext,
  RoutineDefinition,
} from './catalog.ts';
export {
  PermanentRoutineError,
  createRoutineCatalog,
  defineFilingRoutine,
  defineRoutine,
} from './catalog.ts';
export type {
  ConsoleEdit,
  EditChange,
  EditOutcome,
  EditRequestInput,
  MatchField,
  RequestMatchData,
} from './edit-request.ts';
export {
  EDITED_ROUTINES,
  checkGivenEventDate,
  checkMatchCriteria,
  editRequestEventDate,
  editRequestMatchData,
  readRequestMatchData,
} from './edit-request.ts';
