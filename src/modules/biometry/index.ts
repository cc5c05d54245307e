/**
 * Biometry filing: reads IOLMaster objects (the Zeiss 99CZM private data) and the standard ophthalmic
 * axial measurements and IOL calculation objects, and files them as OpenEyes's Biometry (OphInBiometry)
 * event of the patient and study, with the IOLMaster's reports attached to it. The only writer of the
 * `ophinbiometry_*` and `et_ophinbiometry_*` tables.
 */
export type { BiometryFile, BiometryStudy } from './biometry-file.ts';
export { BiometryFileError, readBiometryFile } from './biometry-file.ts';
export { readBiometryFileOnThread } from './read-on-thread.ts';
export type { BiometryLimits } from './limits.ts';
export { BIOMETRY_CALCULATION_CEILING, MAX_PAIRS_PER_CALCULATION, biometryLimitRefusal } from './limits.ts';
export type {
  BiometryFiling,
  BiometryFilingDeps,
  BiometryFilingResult,
  BiometryTypes,
} from './biometry-store.ts';
export {
  BIOMETRY_EVENT_CLASS,
  BIOMETRY_REPORT_TYPE,
  fileBiometry,
  readBiometryTypes,
} from './biometry-store.ts';
export type { BiometryReading, EyeMeasurement, IolCalculation, Side } from './reading.ts';
export type { HeldLens } from './lens-review.ts';
export { listHeldLenses } from './lens-review.ts';
