/**
 * The DICOM module: strict reading of DICOM Part 10 files within limits, and extraction of their images
 * (every common transfer syntax, multi-frame) or encapsulated PDF, all on a pool of worker threads.
 * Other modules import it only through this file. docs/DICOM.md lists the supported transfer syntaxes.
 *
 * The service (`dicom-service.ts`) is loaded on the first file read, `sharp` and libvips on the first
 * extraction, and the decoders (dcmjs-imaging, its WebAssembly codecs, PDF.js) only in the worker
 * threads that extract: a process that never sees a DICOM file does not hold them, and one that only
 * checks received instances holds none of them.
 */
import type { Config } from '../../config.ts';
import type { DicomTask } from './dicom-pool.ts';
import type { DicomInspection, DicomSummary } from './inspect.ts';
import type * as DicomService from './dicom-service.ts';
import { countDicomParse } from './dicom-parses.ts';
import { findOverlongValueError } from './part10-scan.ts';
import type { DicomExtraction, ExtractOptions } from './dicom-service.ts';

export type { DicomErrorCode } from './dicom-error.ts';
export { DicomError } from './dicom-error.ts';
export type { DicomHeader } from './dicom-header.ts';
export type { Eye, FoundEventDate, KeywordValues, LateralityFinding } from './dicom-rules.ts';
export {
  dicomWallClock,
  eventDateOf,
  eyeOfLaterality,
  findEventDate,
  headerLateralityOf,
  headerText,
} from './dicom-rules.ts';
export type { DicomTask } from './dicom-pool.ts';
export type { DicomLimits } from './extract.ts';
export type { DicomFileMeta, DicomInspection, DicomSummary } from './inspect.ts';
export type { DicomExtraction, ExtractOptions, ExtractedImage, RawImage } from './dicom-service.ts';
export { describeTransferSyntax } from './transfer-syntaxes.ts';
export { loadSharp } from './sharp.ts';
export { readDicomParseCounts, registerDicomParseMetrics } from './dicom-parses.ts';
export type { DicomStudyRecord } from './study-record.ts';
export {
  DICOM_STUDY_MNEMONIC,
  DICOM_STUDY_RECORD_VERSION,
  parseStudyRecord,
  storableStudyRecord,
  studyRecordOf,
} from './study-record.ts';

let service: Promise<typeof DicomService> | undefined;

/**
 * Elements of a body that queue add checks on its own thread for an overlong value
 * ({@link findOverlongDicomValue}): the pass over their headers takes well under a millisecond.
 */
const PRECHECK_ELEMENTS = 20_000;

/**
 * Why `bytes`, a DICOM body queue add received, is refused for a string value over its limit (PS3.5's
 * maximum for its VR, or DICOM_MAX_TEXT_BYTES), when one is among its first elements; undefined
 * otherwise, anything else being left to the queue's full check of the file (`DICOM_SEED`). The message
 * names the element and the limit, never the value.
 */
export function findOverlongDicomValue(bytes: Uint8Array, config: Config): string | undefined {
  return findOverlongValueError(bytes, {
    maxElements: Math.min(config.dicom.maxElements, PRECHECK_ELEMENTS),
    maxDepth: config.dicom.maxDepth,
    maxBytes: bytes.length,
    maxTextBytes: config.dicom.maxTextBytes,
  })?.message;
}

/** The service (which loads `sharp` on its first extraction, through `loadSharp`). */
function loadService(): Promise<typeof DicomService> {
  return (service ??= import('./dicom-service.ts'));
}

/**
 * Checks `bytes` as a DICOM Part 10 file within the configured limits and reads its identifying header;
 * throws a `DicomError` naming the cause. With `isHandedOver`, the caller gives `bytes` up: their buffer
 * may be moved to the decoding thread instead of copied (then it is left detached, of length 0).
 */
export async function readDicomFile(
  bytes: Uint8Array,
  config: Config,
  options: { readonly isHandedOver?: boolean } = {},
): Promise<DicomSummary> {
  countDicomParse('record');
  return (await loadService()).readDicomFile(bytes, config, options);
}

/**
 * Reads the file meta information of a received instance and checks the file as {@link readDicomFile}
 * does, on a thread: a scan's refusal comes back with the meta information rather than thrown. Throws a
 * `DicomError` only for a thread past its limits (`timeout`, `out-of-memory`, `worker-failed`).
 */
export async function inspectDicomFile(bytes: Uint8Array, config: Config): Promise<DicomInspection> {
  countDicomParse('receipt');
  return (await loadService()).inspectDicomFile(bytes, config);
}

/**
 * Runs another module's file reader on a decoding thread (see {@link DicomTask}), under the pool's time
 * and memory limits; throws a `DicomError` for those limits or for what the reader throws.
 */
export async function runDicomTask(task: DicomTask, bytes: Uint8Array, config: Config): Promise<unknown> {
  countDicomParse(task.purpose);
  return (await loadService()).runDicomTask(task, bytes, config);
}

/** The images (or the encapsulated PDF) of `bytes`; throws a `DicomError` for a file that cannot be used. */
export async function extractDicomImages(
  bytes: Uint8Array,
  config: Config,
  options: ExtractOptions = {},
): Promise<DicomExtraction> {
  countDicomParse('extraction');
  return (await loadService()).extractDicomImages(bytes, config, options);
}

/** Stops every decoding thread of this process (shutdown, tests). */
export async function closeDicomPools(): Promise<void> {
  if (service !== undefined) await (await service).closeDicomPools();
}
