/**
 * One received DICOM instance: the checks it passes before it is queued, and the Part 10 file a C-STORE
 * data set becomes. Nothing here parses the file: the DICOM module reads it on its worker threads
 * (`inspectDicomFile`: the file meta information, the strict scan of every length against the file, so
 * that a file cut short anywhere is refused, within the configured limits, and the header values), and
 * this file applies its rules to what comes back (accepted class and transfer syntax, meta information
 * and data set agreeing, the content element, the study).
 */
import { createRequire } from 'node:module';
import type Dcmjs from 'dcmjs';
import type { Config } from '../../config.ts';
import type { DicomErrorCode, DicomHeader, DicomInspection, DicomSummary } from '../dicom/index.ts';
import { DicomError, inspectDicomFile } from '../dicom/index.ts';
import { PIXEL_DATA, findStorageClass, isAcceptedTransferSyntax } from './storage-classes.ts';

/**
 * Why an instance was not stored: the Failure Reason (0008,1197) of a STOW-RS answer (PS3.18 I.2.2) and
 * the status of a C-STORE answer (PS3.4 B.2.3, PS3.7 C).
 */
export const FAILURE = {
  processingFailure: 0x0110,
  duplicateSopInstance: 0x0111,
  sopClassNotSupported: 0x0122,
  outOfResources: 0xa700,
  dataSetDoesNotMatchSopClass: 0xa900,
  cannotUnderstand: 0xc000,
  transferSyntaxNotSupported: 0xc122,
} as const;

export type FailureReason = (typeof FAILURE)[keyof typeof FAILURE];

/** The identity of an instance, as far as it could be read. */
export interface InstanceIdentity {
  readonly sopClassUid: string | undefined;
  readonly sopInstanceUid: string | undefined;
}

export type InstanceCheck =
  | {
      readonly ok: true;
      readonly sopClassUid: string;
      readonly sopInstanceUid: string;
      readonly transferSyntaxUid: string;
      readonly studyInstanceUid: string | undefined;
      /** The identifying header the inspection read (for the query/retrieve index). */
      readonly header: DicomHeader;
      /** What the inspection read of the file (the study record the request is queued with). */
      readonly summary: DicomSummary;
    }
  | (InstanceIdentity & {
      readonly ok: false;
      readonly reason: FailureReason;
      /** For the log: what was wrong, never a value read from the file. */
      readonly cause: string;
    });

const UID = /^[0-9.]{1,64}$/;

/**
 * Checks a Part 10 file: readable file meta information naming a SOP class and instance, an accepted
 * transfer syntax and storage class, a sound structure to the end of the file (not truncated), the same
 * SOP class and instance in the data set as in the meta information, and the element that carries the
 * class's content (pixel data, encapsulated document). `expectedStudyUid`, when given, must match.
 */
export async function checkInstance(
  bytes: Uint8Array,
  config: Config,
  expectedStudyUid?: string,
): Promise<InstanceCheck> {
  let inspection: DicomInspection;
  try {
    inspection = await inspectDicomFile(bytes, config);
  } catch (error) {
    if (!(error instanceof DicomError)) throw error;
    return failed(reasonOf(error.code), `structure: ${error.code}`, undefined, undefined);
  }
  const { meta } = inspection;
  if (meta === undefined) {
    return failed(FAILURE.cannotUnderstand, 'not a DICOM Part 10 file', undefined, undefined);
  }
  const sopClassUid = uidOf(meta.sopClassUid);
  const sopInstanceUid = uidOf(meta.sopInstanceUid);
  const transferSyntaxUid = uidOf(meta.transferSyntaxUid);
  if (sopClassUid === undefined || sopInstanceUid === undefined || transferSyntaxUid === undefined)
    return failed(FAILURE.cannotUnderstand, 'file meta information incomplete', sopClassUid, sopInstanceUid);
  if (!isAcceptedTransferSyntax(transferSyntaxUid))
    return failed(
      FAILURE.transferSyntaxNotSupported,
      'transfer syntax not accepted',
      sopClassUid,
      sopInstanceUid,
    );
  const storageClass = findStorageClass(sopClassUid);
  if (storageClass === undefined)
    return failed(FAILURE.sopClassNotSupported, 'SOP class not accepted', sopClassUid, sopInstanceUid);
  const { summary } = inspection;
  if (summary === undefined) {
    const code = inspection.error?.code ?? 'worker-failed';
    const cause = code === 'unreadable-data-set' ? 'data set unreadable' : `structure: ${code}`;
    return failed(reasonOf(code), cause, sopClassUid, sopInstanceUid);
  }
  const { header } = summary;
  if (uidOf(header.SOPClassUID) !== sopClassUid || uidOf(header.SOPInstanceUID) !== sopInstanceUid)
    return failed(
      FAILURE.dataSetDoesNotMatchSopClass,
      'SOP class or instance differs from the file meta information',
      sopClassUid,
      sopInstanceUid,
    );
  const hasContent =
    storageClass.contentTag === undefined ||
    (storageClass.contentTag === PIXEL_DATA
      ? summary.hasPixelData
      : inspection.hasEncapsulatedDocument === true);
  if (!hasContent)
    return failed(
      FAILURE.dataSetDoesNotMatchSopClass,
      'the element carrying the content is missing',
      sopClassUid,
      sopInstanceUid,
    );
  const studyInstanceUid = uidOf(header.StudyInstanceUID);
  if (expectedStudyUid !== undefined && studyInstanceUid !== expectedStudyUid)
    return failed(
      FAILURE.dataSetDoesNotMatchSopClass,
      'Study Instance UID differs from the one in the URL',
      sopClassUid,
      sopInstanceUid,
    );
  return { ok: true, sopClassUid, sopInstanceUid, transferSyntaxUid, studyInstanceUid, header, summary };
}

/** The failure reason of a structural refusal: a limit of this service, or a file it cannot understand. */
function reasonOf(code: DicomErrorCode): FailureReason {
  if (code === 'unsupported-transfer-syntax') return FAILURE.transferSyntaxNotSupported;
  if (OUT_OF_RESOURCES.has(code)) return FAILURE.outOfResources;
  // A value longer than its VR allows: the data set does not conform to its class's attributes.
  if (code === 'value-too-long') return FAILURE.dataSetDoesNotMatchSopClass;
  return code === 'worker-failed' ? FAILURE.processingFailure : FAILURE.cannotUnderstand;
}

/** Refusals by a limit of this service (A700) rather than a file it cannot understand (C000). */
const OUT_OF_RESOURCES: ReadonlySet<DicomErrorCode> = new Set([
  'too-many-elements',
  'nesting-too-deep',
  'too-large',
  'text-too-long',
  'timeout',
  'out-of-memory',
]);

function failed(
  reason: FailureReason,
  cause: string,
  sopClassUid: string | undefined,
  sopInstanceUid: string | undefined,
): InstanceCheck {
  return { ok: false, reason, cause, sopClassUid, sopInstanceUid };
}

/** A UID value (trailing NUL or space padding removed), when it is a well-formed UID. */
function uidOf(value: string | null | undefined): string | undefined {
  const uid = value?.replace(/[\0 ]+$/, '');
  return uid !== undefined && UID.test(uid) ? uid : undefined;
}

/**
 * Frees the memory of an instance's bytes once the caller, which made them and hands them to nothing that
 * keeps them, is done with them (the instance is queued or refused): detaching the buffer frees it at
 * once, rather than when the heap is next collected, which allocates too little per received instance
 * to run before tens of MB of them have piled up. Only a Buffer that is its whole ArrayBuffer is freed
 * (never a slice of Node's shared pool); `bytes` is empty afterwards.
 */
export function releaseInstanceBytes(bytes: Uint8Array): void {
  const buffer = bytes.buffer as ArrayBuffer;
  if (!buffer.detached && bytes.byteOffset === 0 && bytes.byteLength === buffer.byteLength)
    buffer.transfer(0);
}

// --- Part 10 from a C-STORE ---------------------------------------------------------------------------

const require = createRequire(import.meta.url);
let dcmjsModule: typeof Dcmjs | undefined;

/** dcmjs, loaded on the first C-STORE: only the DIMSE receiver writes file meta information with it. */
function loadDcmjs(): typeof Dcmjs {
  return (dcmjsModule ??= require('dcmjs') as typeof Dcmjs);
}

/** Implementation Class UID written into the files the service makes (a UUID-derived `2.25` UID). */
export const IMPLEMENTATION_CLASS_UID = '2.25.163472098447321095262130372838463129874';
export const IMPLEMENTATION_VERSION_NAME = 'CRA_DICOM_1';

export interface Part10Meta {
  readonly sopClassUid: string;
  readonly sopInstanceUid: string;
  readonly transferSyntaxUid: string;
  /** Source Application Entity Title (0002,0016): the calling AE title of the association. */
  readonly sourceAeTitle: string;
}

/**
 * A Part 10 file of a data set received in `meta.transferSyntaxUid` (PS3.10 7.1): preamble, `DICM`, file
 * meta information written by dcmjs, then the data set bytes exactly as they arrived.
 */
export function buildPart10(meta: Part10Meta, dataSet: Buffer): Buffer {
  const dcmjs = loadDcmjs();
  const header = dcmjs.data.DicomMetaDictionary.denaturalizeDataset({
    FileMetaInformationVersion: new Uint8Array([0, 1]).buffer,
    MediaStorageSOPClassUID: meta.sopClassUid,
    MediaStorageSOPInstanceUID: meta.sopInstanceUid,
    TransferSyntaxUID: meta.transferSyntaxUid,
    ImplementationClassUID: IMPLEMENTATION_CLASS_UID,
    ImplementationVersionName: IMPLEMENTATION_VERSION_NAME,
    SourceApplicationEntityTitle: meta.sourceAeTitle,
  });
  const file = Buffer.from(new dcmjs.data.DicomDict(header).write());
  return Buffer.concat([file, dataSet]);
}
