/** Patient search (spec 4.1): the module's routes. */
export { patientRoutes } from './patient.routes.ts';
export { findPatientIdsByIdentifier } from './patient-lookup.ts';
