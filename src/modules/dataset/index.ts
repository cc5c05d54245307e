/**
 * The dataset module: import/export of the dataset format (shared/spec/dataset-format.md), the synthetic
 * demo population, and the demo dataset of a new embedded database. Other modules import it only
 * through this file.
 */
export type { DemoAccount, DemoSignatureCode } from './demo-data.ts';
export {
  DEMO_OPERATOR_PASSWORD,
  DEMO_OPERATOR_USERNAME,
  DEMO_PASSWORD,
  DEMO_USERNAME,
  demoStartupLines,
  loadDemoData,
} from './demo-data.ts';
export type { DemoPatient, DemoReference, GenerateOptions, GenerateResult } from './demo-population.ts';
export {
  DEMO_MAX_PATIENTS,
  demoHospitalNumber,
  demoNhsNumber,
  demoPatientAt,
  ensureDemoReference,
  generateDemoPopulation,
} from './demo-population.ts';
export type { DatasetProblem } from './dataset-errors.ts';
export { DatasetError, formatProblem } from './dataset-errors.ts';
export type { ImportDeps, ImportOptions, ImportPhase, ImportSummary } from './dataset-import.ts';
export { DATASET_FORMAT, importDataset, importDatasetFile } from './dataset-import.ts';
export type { ExportOptions, ExportSummary } from './dataset-export.ts';
export { UnknownTableError, exportDataset, exportDatasetToFile } from './dataset-export.ts';
