/**
 * One received DICOM instance: the checks it passes before it is queued, and the Part 10 file a C-STORE
 * data set becomes. The checks read the whole data set with `dicom-parser` (which indexes elements
 * without copying values), so that a file cut short anywhere is refused rather than queued for a chain
 * that would fail on it.
 */
import { inflateRawSync } from 'node:zlib';
import dcmjs from 'dcmjs';
import dicomParser from 'dicom-parser';
import type { DataSet } from 'dicom-parser';
import { findStorageClass, isAcceptedTransferSyntax } from './storage-classes.ts';

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
 * transfer syntax and storage class, a data set that parses to its end (so not truncated), the same SOP
 * class and instance in the data set as in the meta information, and the element that carries the
 * class's content (pixel data, encapsulated document). `expectedStudyUid`, when given, must match.
 */
export function checkInstance(bytes: Uint8Array, expectedStudyUid?: string): InstanceCheck {
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

  let dataSet: DataSet;
  try {
    dataSet = dicomParser.parseDicom(bytes, { inflater });
  } catch {
    return failed(FAILURE.cannotUnderstand, 'data set truncated or malformed', sopClassUid, sopInstanceUid);
  }
  if ((dataSet.warnings ?? []).some((w) => /missing|unexpected|past end/i.test(w)))
    return failed(FAILURE.cannotUnderstand, 'data set truncated or malformed', sopClassUid, sopInstanceUid);
  if (uidOf(dataSet, 'x00080016') !== sopClassUid || uidOf(dataSet, 'x00080018') !== sopInstanceUid)
    return failed(
      FAILURE.dataSetDoesNotMatchSopClass,
      'SOP class or instance differs from the file meta information',
      sopClassUid,
      sopInstanceUid,
    );
  if (storageClass.contentTag !== undefined && dataSet.elements[storageClass.contentTag] === undefined)
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
