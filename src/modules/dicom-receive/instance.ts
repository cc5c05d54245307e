/**
 * One received DICOM instance: the checks it passes before it is queued, and the Part 10 file a C-STORE
 * data set becomes. The structure is checked by the DICOM module's strict scan (`readDicomFile`: every
 * length against the file, so a file cut short anywhere is refused, within the configured limits, on its
 * worker threads); the identity and the checks of this file's rules (accepted class and transfer syntax,
 * meta information and data set agreeing, the content element, the study) are read with `dicom-parser`.
 */
import { inflateRawSync } from 'node:zlib';
import { createRequire } from 'node:module';
import type Dcmjs from 'dcmjs';
import dicomParser from 'dicom-parser';
import type { DataSet } from 'dicom-parser';
import type { Config } from '../../config.ts';
import type { DicomErrorCode } from '../dicom/index.ts';
import { DicomError, readDicomFile } from '../dicom/index.ts';
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
  let meta: DataSet;
  try {
    meta = dicomParser.readPart10Header(bytes);
  } catch {
    return failed(FAILURE.cannotUnderstand, 'not a DICOM Part 10 file', undefined, undefined);
  }
  const sopClassUid = uidOf(meta, 'x00020002');
  const sopInstanceUid = uidOf(meta, 'x00020003');
  const transferSyntaxUid = uidOf(meta, 'x00020010');
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

  let hasPixelData: boolean;
  try {
    hasPixelData = (await readDicomFile(bytes, config)).hasPixelData;
  } catch (error) {
    if (!(error instanceof DicomError)) throw error;
    return failed(reasonOf(error.code), `structure: ${error.code}`, sopClassUid, sopInstanceUid);
  }
  let dataSet: DataSet;
  try {
    // The scan has checked the structure: the values before the pixel data are read.
    dataSet = dicomParser.parseDicom(bytes, { untilTag: 'x7fe00010', inflater });
  } catch {
    return failed(FAILURE.cannotUnderstand, 'data set unreadable', sopClassUid, sopInstanceUid);
  }
  if (uidOf(dataSet, 'x00080016') !== sopClassUid || uidOf(dataSet, 'x00080018') !== sopInstanceUid)
    return failed(
      FAILURE.dataSetDoesNotMatchSopClass,
      'SOP class or instance differs from the file meta information',
      sopClassUid,
      sopInstanceUid,
    );
  const hasContent =
    storageClass.contentTag === undefined ||
    (storageClass.contentTag === PIXEL_DATA
      ? hasPixelData
      : dataSet.elements[storageClass.contentTag] !== undefined);
  if (!hasContent)
    return failed(
      FAILURE.dataSetDoesNotMatchSopClass,
      'the element carrying the content is missing',
      sopClassUid,
      sopInstanceUid,
    );
  const studyInstanceUid = uidOf(dataSet, 'x0020000d');
  if (expectedStudyUid !== undefined && studyInstanceUid !== expectedStudyUid)
    return failed(
      FAILURE.dataSetDoesNotMatchSopClass,
      'Study Instance UID differs from the one in the URL',
      sopClassUid,
      sopInstanceUid,
    );
  return { ok: true, sopClassUid, sopInstanceUid, transferSyntaxUid, studyInstanceUid };
}

/** The failure reason of a structural refusal: a limit of this service, or a file it cannot understand. */
function reasonOf(code: DicomErrorCode): FailureReason {
  if (code === 'unsupported-transfer-syntax') return FAILURE.transferSyntaxNotSupported;
  if (OUT_OF_RESOURCES.has(code)) return FAILURE.outOfResources;
  return code === 'worker-failed' ? FAILURE.processingFailure : FAILURE.cannotUnderstand;
}

/** Refusals by a limit of this service (A700) rather than a file it cannot understand (C000). */
const OUT_OF_RESOURCES: ReadonlySet<DicomErrorCode> = new Set([
  'too-many-elements',
  'nesting-too-deep',
  'too-large',
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

/** A UID element's value (trailing NUL or space padding removed), when it is a well-formed UID. */
function uidOf(dataSet: DataSet, tag: string): string | undefined {
  let value: string | undefined;
  try {
    value = dataSet.string(tag)?.replace(/[\0 ]+$/, '');
  } catch {
    return undefined;
  }
  return value !== undefined && UID.test(value) ? value : undefined;
}

/** Inflates a Deflated Explicit VR Little Endian data set behind its (uncompressed) meta information. */
function inflater(bytes: Uint8Array, position: number): Uint8Array {
  const inflated = inflateRawSync(bytes.subarray(position));
  const whole = Buffer.allocUnsafe(position + inflated.length);
  whole.set(bytes.subarray(0, position), 0);
  whole.set(inflated, position);
  return whole;
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
