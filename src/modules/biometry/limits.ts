/**
 * What one biometry file may carry. An IOLMaster sends a handful of lenses and formulas per eye; a file
 * with thousands would make filing write thousands of rows and lens types, so a file beyond the site's
 * caps (`BIOMETRY_MAX_*_PER_EYE`) is refused whole, with its reason, before anything is written. The
 * reader on the decoding thread stops at fixed ceilings above any cap a site may set, so that what it
 * hands back to the event loop stays small whatever the file holds. Loads no database code (the reader's
 * thread imports it).
 */
import { BIOMETRY_CALCULATION_CEILING } from '../../config.ts';
import type { BiometryReading, Side } from './reading.ts';

export { BIOMETRY_CALCULATION_CEILING };

/**
 * IOL/REF pairs of one calculation (an IOLMaster gives about ten): their JSON stays within the 1,000
 * characters the IOL table's text column is relied on to hold.
 */
export const MAX_PAIRS_PER_CALCULATION = 50;

/** The site's caps per eye (config `biometryMax*PerEye`). */
export interface BiometryLimits {
  readonly maxLensesPerEye: number;
  readonly maxFormulasPerEye: number;
  readonly maxCalculationsPerEye: number;
}

const EYE_NAMES: Record<Side, string> = { R: 'right', L: 'left' };

/** Why `reading` is beyond `limits` (the first cap it passes), or undefined when it is within them. */
export function biometryLimitRefusal(reading: BiometryReading, limits: BiometryLimits): string | undefined {
  const perEye = new Map<Side, { calculations: number; lenses: Set<string>; formulas: Set<string> }>();
  for (const calculation of reading.calculations) {
    let eye = perEye.get(calculation.side);
    if (eye === undefined) {
      eye = { calculations: 0, lenses: new Set(), formulas: new Set() };
      perEye.set(calculation.side, eye);
    }
    eye.calculations += 1;
    eye.lenses.add(calculation.lensName);
    eye.formulas.add(calculation.formulaName);
  }
  for (const [side, eye] of perEye) {
    const which = `the ${EYE_NAMES[side]} eye`;
    if (eye.calculations > limits.maxCalculationsPerEye) {
      return `${eye.calculations} IOL calculations for ${which}, more than the ${limits.maxCalculationsPerEye} allowed (BIOMETRY_MAX_CALCULATIONS_PER_EYE)`;
    }
    if (eye.lenses.size > limits.maxLensesPerEye) {
      return `${eye.lenses.size} lenses for ${which}, more than the ${limits.maxLensesPerEye} allowed (BIOMETRY_MAX_LENSES_PER_EYE)`;
    }
    if (eye.formulas.size > limits.maxFormulasPerEye) {
      return `${eye.formulas.size} formulas for ${which}, more than the ${limits.maxFormulasPerEye} allowed (BIOMETRY_MAX_FORMULAS_PER_EYE)`;
    }
  }
  return undefined;
}

/**
 * Counts the reader's calculations per eye and throws `refuse(reason)` past the ceilings: more than
 * {@link BIOMETRY_CALCULATION_CEILING} calculations for one eye, or more than
 * {@link MAX_PAIRS_PER_CALCULATION} IOL/REF pairs in one calculation.
 */
export function createCalculationCounter(refuse: (reason: string) => Error) {
  const counts: Record<Side, number> = { R: 0, L: 0 };
  return {
    /** Call before reading a calculation of `side` with `pairCount` IOL/REF pair items. */
    count(side: Side, pairCount: number): void {
      counts[side] += 1;
      if (counts[side] > BIOMETRY_CALCULATION_CEILING) {
        throw refuse(
          `more than ${BIOMETRY_CALCULATION_CEILING} IOL calculations for the ${EYE_NAMES[side]} eye`,
        );
      }
      if (pairCount > MAX_PAIRS_PER_CALCULATION) {
        throw refuse(
          `an IOL calculation of the ${EYE_NAMES[side]} eye with ${pairCount} IOL/REF pairs, more than ${MAX_PAIRS_PER_CALCULATION}`,
        );
      }
    },
  };
}
