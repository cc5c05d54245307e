/**
 * OpenEyes's PASAPI V1 (the PAS's endpoint): the routes, and the core changes they call, which the HL7
 * feed maps its messages to.
 */
export { pasapiRoutes } from './pasapi.routes.ts';
export type {
  AddressRecord,
  ChangeActor,
  PatientChange,
  PatientChangeResult,
  PatientRecord,
} from './patient-change.ts';
export { createPatientChanges } from './patient-change.ts';
export type { PatientMergeChange, PatientMergeResult } from './patient-merge.ts';
export { MERGE_STATUS, createPatientMerges } from './patient-merge.ts';
export { PasapiError, parseLooseDate } from './pasapi-values.ts';
