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
export {
  createPatientChanges,
  findIdentifierType,
  findPatientByNumber,
  unknownIdentifierType,
} from './patient-change.ts';
export type {
  AppointmentChange,
  AppointmentChangeResult,
  AppointmentDeleteResult,
  AppointmentMapping,
  AppointmentRecord,
} from './patient-appointment.ts';
export { createPatientAppointments } from './patient-appointment.ts';
export type { PatientMergeChange, PatientMergeResult } from './patient-merge.ts';
export { MERGE_STATUS, createPatientMerges } from './patient-merge.ts';
export type { PasReferenceCache } from './pas-reference.ts';
export { createPasReferenceCache } from './pas-reference.ts';
export { PasapiError, parseLooseDate } from './pasapi-values.ts';
