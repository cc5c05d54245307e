/**
 * The filing module: every routine the queue worker runs (registered by `routine_name`, names seeded in
 * `routine_library`) and the console's fixes of a request's match data and event date, which run those
 * routines again. The composition roots hand `defaultRoutineCatalog` to the queue engine.
 */
import { attachToEventRoutine } from './attach-to-event.ts';
import type { RoutineCatalog } from './catalog.ts';
import { createRoutineCatalog } from './catalog.ts';
import { cleanUpRoutine } from './clean-up.ts';
import { deviceProfileRoutine } from './device-profile.ts';
import { dicomSeedRoutine } from './dicom-seed.ts';
import { extractImageRoutine } from './extract-image.ts';
import { fileBiometryRoutine } from './file-biometry.ts';
import { makeThumbnailsRoutine } from './make-thumbnails.ts';
import { noopRoutine } from './noop.ts';
import { patientMatchRoutine } from './patient-match.ts';

export const DEFAULT_ROUTINES = [
  dicomSeedRoutine,
  deviceProfileRoutine,
  extractImageRoutine,
  patientMatchRoutine,
  makeThumbnailsRoutine,
  attachToEventRoutine,
  fileBiometryRoutine,
  cleanUpRoutine,
  noopRoutine,
] as const;

export const defaultRoutineCatalog: RoutineCatalog = createRoutineCatalog(DEFAULT_ROUTINES);

export type { PrepareContext, RoutineCatalog, RoutineContext, RoutineDefinition } from './catalog.ts';
export { PermanentRoutineError, createRoutineCatalog, defineRoutine } from './catalog.ts';
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
