/**
 * What every DICOM worker thread can do without the decoders (`extract.ts`): check a file and read its
 * identifying header, and inspect a received instance. Only `dicom-parser` and the module's own scan are
 * loaded for these, so that a thread that only checks received instances stays small.
 */
import dicomParser from 'dicom-parser';
import type { DicomHeader } from './dicom-header.ts';
import { readDicomHeader } from './dicom-header.ts';
import type { DicomErrorData } from './dicom-error.ts';
import { DicomError } from './dicom-error.ts';
import type { Part10Scan, ScanLimits } from './part10-scan.ts';
import { TAG, readNumber, readText, scanPart10 } from './part10-scan.ts';

/** What reading a file gives (`DICOM_SEED`). */
export interface DicomSummary {
  readonly transferSyntaxUid: string;
  readonly sopClassUid: string | null;
  readonly elementCount: number;
  readonly hasPixelData: boolean;
  readonly numberOfFrames: number;
  readonly header: DicomHeader;
}

/**
 * Heap `dicom-parser` takes per element it parses, with room for its element table growing (an object
 * and a table slot per element: about 190 bytes measured with Node 24).
 */
const PARSED_ELEMENT_BYTES = 256;
const MiB = 1024 * 1024;

/** Scans and reads the identifying header of `bytes`. */
export function readDicom(bytes: Uint8Array, limits: ScanLimits): DicomSummary {
  const scan = scanPart10(bytes, limits);
  return summaryOf(scan, limits);
}

/**
 * The summary of a scanned file. A file with more elements than the thread's heap can parse is refused
 * first (`out-of-memory`; the heap cap is DICOM_DECODE_MEMORY_MB, as `limits.maxBytes`): parsing it would
 * end in one allocation larger than the heap has left, which V8 does not always turn into the thread's
 * out-of-memory exit but may abort the whole process with.
 */
function summaryOf(scan: Part10Scan, limits: ScanLimits): DicomSummary {
  if (scan.elementCount * PARSED_ELEMENT_BYTES > limits.maxBytes) {
    throw new DicomError(
      'out-of-memory',
      `Reading its ${scan.elementCount} elements would need more than ${Math.round(limits.maxBytes / MiB)} MiB (DICOM_DECODE_MEMORY_MB)`,
    );
  }
  return {
    transferSyntaxUid: scan.transferSyntax.uid,
    sopClassUid: readText(scan, TAG.SOPClassUID) ?? null,
    elementCount: scan.elementCount,
    hasPixelData: scan.pixelData !== undefined,
    numberOfFrames: Math.max(1, Math.trunc(readNumber(scan, TAG.NumberOfFrames) ?? 1)),
    header: readDicomHeader(scan),
  };
}

/** The identity of a file's meta information (group 0002), each value as the file gives it. */
export interface DicomFileMeta {
  readonly sopClassUid: string | undefined;
  readonly sopInstanceUid: string | undefined;
  readonly transferSyntaxUid: string | undefined;
}

/**
 * What checking a received instance needs: its file meta information (undefined when the file has none
 * readable), then either the scan's summary or why the scan refused the file.
 */
export interface DicomInspection {
  readonly meta: DicomFileMeta | undefined;
  readonly summary?: DicomSummary;
  /** The data set has an Encapsulated Document (0042,0011) at the top level. */
  readonly hasEncapsulatedDocument?: boolean;
  readonly error?: DicomErrorData;
}

/**
 * Reads the file meta information of `bytes` with `dicom-parser`, then scans the file and reads its
 * header as {@link readDicom} does. A refusal by the scan is returned with the meta information, so that
 * the caller can still name the instance and weigh its own checks of the meta information first.
 */
export function inspectDicom(bytes: Uint8Array, limits: ScanLimits): DicomInspection {
  let meta: DicomFileMeta;
  try {
    const group = dicomParser.readPart10Header(bytes);
    meta = {
      sopClassUid: group.string('x00020002'),
      sopInstanceUid: group.string('x00020003'),
      transferSyntaxUid: group.string('x00020010'),
    };
  } catch {
    return { meta: undefined };
  }
  try {
    const scan = scanPart10(bytes, limits);
    return {
      meta,
      summary: summaryOf(scan, limits),
      hasEncapsulatedDocument: scan.elements.has(TAG.EncapsulatedDocument),
    };
  } catch (error) {
    if (!(error instanceof DicomError)) throw error;
    return { meta, error: { code: error.code, message: error.message } };
  }
}
