/**
 * The DICOM module: strict reading of DICOM Part 10 files within limits, and extraction of their images
 * (every common transfer syntax, multi-frame) or encapsulated PDF, all on a pool of worker threads.
 * Other modules import it only through this file. docs/DICOM.md lists the supported transfer syntaxes.
 */
export type { DicomErrorCode } from './dicom-error.ts';
export { DicomError } from './dicom-error.ts';
export type { DicomHeader } from './dicom-header.ts';
export type { DicomTask } from './dicom-pool.ts';
export type { DicomFileMeta, DicomInspection, DicomLimits, DicomSummary } from './extract.ts';
export { ENCAPSULATED_PDF_SOP_CLASS } from './extract.ts';
export type { DicomExtraction, ExtractedImage, RawImage } from './dicom-service.ts';
export {
  closeDicomPools,
  dicomLimitsOf,
  extractDicomImages,
  inspectDicomFile,
  readDicomFile,
  runDicomTask,
} from './dicom-service.ts';
export { describeTransferSyntax } from './transfer-syntaxes.ts';
