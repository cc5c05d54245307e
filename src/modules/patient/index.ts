/** Patient search (spec 4.1): the module's routes. */
export { patientRoutes } from './patient.routes.ts';
export type { MissingPatientAnswer, MissingPatientSource } from './missing-patient.ts';
export type { PatientLabel } from './patient-lookup.ts';
export { describePatients, findPatientIdsByIdentifier } from './patient-lookup.ts';
export type { PatientSearchResult } from './patient.service.ts';
export type { PatientSearchService } from './patient.service.ts';
export { createPatientSearchService } from './patient.service.ts';
export { applyPad, matchIdentifier, translatePcre } from './search-term.ts';
