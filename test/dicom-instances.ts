/**
 * DICOM instances and STOW-RS bodies for the DICOM receiving tests: Part 10 files written by dcmjs (an
 * image of the size asked for), fresh UIDs, and `multipart/related` bodies.
 */
import { randomBytes } from 'node:crypto';
import dcmjs from 'dcmjs';
import dicomParser from 'dicom-parser';
import { buildPart10 } from '../src/modules/dicom-receive/instance.ts';

export const SECONDARY_CAPTURE = '1.2.840.10008.5.1.4.1.1.7';
export const OPHTHALMIC_PHOTOGRAPHY_8_BIT = '1.2.840.10008.5.1.4.1.1.77.1.5.1';
export const EXPLICIT_VR_LITTLE_ENDIAN = '1.2.840.10008.1.2.1';
/** MPEG2 Main Profile / Main Level: a transfer syntax the service refuses. */
export const MPEG2 = '1.2.840.10008.1.2.4.100';

/** A new UID under `2.25` (a UUID as a decimal integer, PS3.5 B.2). */
export function newUid(): string {
  return `2.25.${BigInt(`0x${randomBytes(16).toString('hex')}`).toString()}`;
}

export interface InstanceOptions {
  readonly sopClassUid?: string;
  readonly sopInstanceUid?: string;
  readonly studyInstanceUid?: string;
  /** Approximate size of the pixel data, in bytes (an RGB image of about that many bytes). */
  readonly pixelBytes?: number;
  /** Patient and study tags by keyword (PatientID, PatientBirthDate, ...). */
  readonly tags?: Readonly<Record<string, string>>;
}

/** A Part 10 file (Explicit VR Little Endian) of an RGB image with the given UIDs and tags. */
export function buildInstance(options: InstanceOptions = {}): Buffer {
  const sopClassUid = options.sopClassUid ?? SECONDARY_CAPTURE;
  const sopInstanceUid = options.sopInstanceUid ?? newUid();
  const side = Math.max(1, Math.round(Math.sqrt((options.pixelBytes ?? 768) / 3)));
  const pixels = randomBytes(side * side * 3);
  const { DicomDict, DicomMetaDictionary } = dcmjs.data;
  const dict = new DicomDict(
    DicomMetaDictionary.denaturalizeDataset({
      FileMetaInformationVersion: new Uint8Array([0, 1]).buffer,
      MediaStorageSOPClassUID: sopClassUid,
      MediaStorageSOPInstanceUID: sopInstanceUid,
      TransferSyntaxUID: EXPLICIT_VR_LITTLE_ENDIAN,
      ImplementationClassUID: '2.25.1',
    }),
  );
  dict.dict = DicomMetaDictionary.denaturalizeDataset({
    SOPClassUID: sopClassUid,
    SOPInstanceUID: sopInstanceUid,
    StudyInstanceUID: options.studyInstanceUid ?? newUid(),
    SeriesInstanceUID: newUid(),
    Modality: 'OP',
    PatientID: 'TEST-1',
    // Device filing refuses a file without any date.
    StudyDate: '20240101',
    ...options.tags,
    Rows: side,
    Columns: side,
    SamplesPerPixel: 3,
    PhotometricInterpretation: 'RGB',
    PlanarConfiguration: 0,
    BitsAllocated: 8,
    BitsStored: 8,
    HighBit: 7,
    PixelRepresentation: 0,
    PixelData: [pixels.buffer.slice(pixels.byteOffset, pixels.byteOffset + pixels.length)],
    _vrMap: { PixelData: 'OB' },
  });
  return Buffer.from(dict.write());
}

/** The same file with its transfer syntax UID replaced in the meta information (the data set as it is). */
export function withTransferSyntax(file: Buffer, transferSyntaxUid: string): Buffer {
  // readPart10Header's data set also says where the meta information ends.
  const meta = dicomParser.readPart10Header(file) as ReturnType<typeof dicomParser.readPart10Header> & {
    position: number;
  };
  return buildPart10(
    {
      sopClassUid: meta.string('x00020002')!.replace(/\0+$/, ''),
      sopInstanceUid: meta.string('x00020003')!.replace(/\0+$/, ''),
      transferSyntaxUid,
      sourceAeTitle: 'TEST',
    },
    file.subarray(meta.position),
  );
}

/** The SOP Instance UID of a Part 10 file. */
export function sopInstanceUidOf(file: Buffer): string {
  return dicomParser.readPart10Header(file).string('x00020003')!.replace(/\0+$/, '');
}

/** A `multipart/related` body of `parts` (each `application/dicom` unless a type is given). */
export function multipartRelated(
  parts: readonly (Buffer | { readonly bytes: Buffer; readonly contentType?: string })[],
  boundary = 'DICOMwebBoundary1234',
): Buffer {
  const chunks: Buffer[] = [];
  for (const part of parts) {
    const { bytes, contentType } = Buffer.isBuffer(part)
      ? { bytes: part, contentType: 'application/dicom' }
      : part;
    const head = contentType === undefined ? '' : `Content-Type: ${contentType}\r\n`;
    chunks.push(Buffer.from(`--${boundary}\r\n${head}\r\n`), bytes, Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return Buffer.concat(chunks);
}

/** The Content-Type of {@link multipartRelated} bodies. */
export function stowContentType(boundary = 'DICOMwebBoundary1234'): string {
  return `multipart/related; type="application/dicom"; boundary=${boundary}`;
}
