/**
 * The filing chain, declared in one table: each step's routine and the routines that follow it, on which
 * condition of the outcome its `run` returned. The routines never chain one another: {@link defineStep}
 * turns a step into the engine's routine definition, whose `run` runs the routine and then adds the
 * routines the table names for its outcome (appended after the request's routines, or, for a priority
 * one, before every pending sibling). The queue engine knows none of this; the composition roots hand
 * it the catalog built from this table (`index.ts`).
 *
 * A DICOM request (request type `dicom_request`, whose first routine is `DICOM_SEED`) runs, in order:
 * `DICOM_SEED` (the study record), `EXTRACT_IMAGE`, `PATIENT_MATCH`, then `MAKE_THUMBNAILS` when an
 * image has none, the filer (`FILE_BIOMETRY` for a biometry device's file, else `ATTACH_TO_EVENT`) and
 * `CLEAN_UP`. A file `FILE_BIOMETRY` finds no biometry in is filed by `ATTACH_TO_EVENT` before
 * `CLEAN_UP`. `DEVICE_PROFILE` is the step of requests queued when `DICOM_SEED` chained it.
 */
import { attachToEventRoutine } from './attach-to-event.ts';
import type { FilingRoutine, RoutineContext, RoutineDefinition } from './catalog.ts';
import { cleanUpRoutine } from './clean-up.ts';
import { deviceProfileRoutine } from './device-profile.ts';
import { dicomSeedRoutine } from './dicom-seed.ts';
import { extractImageRoutine } from './extract-image.ts';
import { fileBiometryRoutine } from './file-biometry.ts';
import { makeThumbnailsRoutine } from './make-thumbnails.ts';
import { patientMatchRoutine } from './patient-match.ts';

/** A routine that follows a step: always, or when its condition holds for the step's outcome. */
export interface NextRoutine<O> {
  readonly routine: string;
  /** What must hold of the outcome, in words (for the log and the docs) and as a test; absent: always. */
  readonly when?: { readonly says: string; readonly holds: (outcome: O) => boolean };
  /** Added before every pending sibling (sequence 1) rather than after them. */
  readonly isPriority?: boolean;
}

/** A step of the chain as the table holds it, its outcome type erased. */
export interface FilingStep {
  readonly routine: string;
  readonly next: readonly NextRoutine<never>[];
  /** The engine's definition: the routine's phases, then the chaining of {@link next}. */
  readonly definition: RoutineDefinition;
  /** The routines that follow `outcome`, in the table's order, split by how they are added. */
  nextFor(outcome: unknown): ChosenRoutines;
}

export interface ChosenRoutines {
  readonly appended: readonly string[];
  readonly priority: readonly string[];
}

/** A step of the chain: `routine` and the routines that follow it (see {@link NextRoutine}). */
export function defineStep<P, O>(step: {
  readonly routine: FilingRoutine<P, O>;
  readonly next: readonly NextRoutine<O>[];
}): FilingStep {
  const { routine, next } = step;
  const nextFor = (outcome: O): ChosenRoutines => {
    const chosen = next.filter((n) => n.when === undefined || n.when.holds(outcome));
    return {
      appended: chosen.filter((n) => n.isPriority !== true).map((n) => n.routine),
      priority: chosen.filter((n) => n.isPriority === true).map((n) => n.routine),
    };
  };
  const definition: RoutineDefinition<P> = {
    ...routine,
    run: async (ctx: RoutineContext, prepared: P) => {
      const { appended, priority } = nextFor(await routine.run(ctx, prepared));
      for (const name of priority) await ctx.addPriorityRoutine(name);
      await ctx.addRoutines(appended);
    },
  };
  return {
    routine: routine.name,
    next,
    definition,
    nextFor: (outcome) => nextFor(outcome as O),
  };
}

/**
 * The `PATIENT_MATCH` step with `routine` (the composition roots hand in the one that may ask the PAS):
 * the thumbnails when an image lacks them, the filer, then `CLEAN_UP`.
 */
export function patientMatchStep(routine: typeof patientMatchRoutine): FilingStep {
  return defineStep({
    routine,
    next: [
      {
        routine: 'MAKE_THUMBNAILS',
        when: { says: 'an image payload has no thumbnails', holds: (o) => o.hasImagesWithoutThumbnails },
      },
      {
        routine: 'FILE_BIOMETRY',
        when: { says: "the device profile's filer is biometry", holds: (o) => o.filer === 'biometry' },
      },
      {
        routine: 'ATTACH_TO_EVENT',
        when: { says: 'any other filer', holds: (o) => o.filer !== 'biometry' },
      },
      { routine: 'CLEAN_UP' },
    ],
  });
}

/** The filing chain (see the top of this file). */
export const FILING_CHAIN: readonly FilingStep[] = [
  defineStep({ routine: dicomSeedRoutine, next: [{ routine: 'EXTRACT_IMAGE' }] }),
  defineStep({ routine: deviceProfileRoutine, next: [{ routine: 'EXTRACT_IMAGE' }] }),
  defineStep({ routine: extractImageRoutine, next: [{ routine: 'PATIENT_MATCH' }] }),
  patientMatchStep(patientMatchRoutine),
  defineStep({ routine: makeThumbnailsRoutine, next: [] }),
  defineStep({
    routine: fileBiometryRoutine,
    next: [
      {
        routine: 'ATTACH_TO_EVENT',
        isPriority: true,
        when: { says: 'the file holds no biometry', holds: (o) => o.kind === 'filed-generically' },
      },
    ],
  }),
  defineStep({ routine: attachToEventRoutine, next: [] }),
  defineStep({ routine: cleanUpRoutine, next: [] }),
];

/** The step of routine `name`, if the chain has one. */
export function findStep(name: string): FilingStep | undefined {
  return FILING_CHAIN.find((step) => step.routine === name);
}
