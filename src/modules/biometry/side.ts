/**
 * The eye of one measurement, read by the DICOM module's rule of laterality. Apart from `reading.ts`,
 * which `config.ts` reaches through `limits.ts` and so must not import the DICOM module.
 */
import { eyeOfLaterality } from '../dicom/index.ts';
import type { Side } from './reading.ts';

/**
 * The one eye a laterality value names (R, L, OD, OS, in any case), by the DICOM module's reading of
 * laterality; undefined for both eyes (B, OU), U or anything else: a measurement is of one eye.
 */
export function sideOf(value: string | undefined): Side | undefined {
  const eye = eyeOfLaterality(value);
  return eye === 'B' ? undefined : eye;
}
