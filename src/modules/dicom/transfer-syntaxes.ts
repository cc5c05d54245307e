/**
 * The transfer syntaxes the DICOM module knows: how each one encodes the data set (for the structural
 * scan) and whether its pixel data can be decoded (by `dcmjs-imaging` with the `dcmjs-codecs`
 * WebAssembly decoders) and is lossy (the extracted image is then stored as JPEG, else as PNG).
 * docs/DICOM.md lists them for operators.
 */

export interface TransferSyntax {
  readonly uid: string;
  readonly name: string;
  /** How the data set after the file meta information is encoded. */
  readonly encoding: 'implicit-le' | 'explicit-le' | 'explicit-be' | 'deflated-le';
  /** Pixel data in fragments (compressed), not native. */
  readonly isEncapsulated: boolean;
  /** The pixel data can be decoded into an image. */
  readonly isDecodable: boolean;
  /** The compression may have lost information: the extracted image is a JPEG. */
  readonly isLossy: boolean;
}

const syntax = (
  uid: string,
  name: string,
  options: Partial<Omit<TransferSyntax, 'uid' | 'name'>> = {},
): TransferSyntax => ({
  uid,
  name,
  encoding: options.encoding ?? 'explicit-le',
  isEncapsulated: options.isEncapsulated ?? true,
  isDecodable: options.isDecodable ?? true,
  isLossy: options.isLossy ?? false,
});

/** Every transfer syntax of DICOM PS3.5 / PS3.6 that a Part 10 file may carry. */
export const TRANSFER_SYNTAXES: readonly TransferSyntax[] = [
  syntax('1.2.840.10008.1.2', 'Implicit VR Little Endian', {
    encoding: 'implicit-le',
    isEncapsulated: false,
  }),
  syntax('1.2.840.10008.1.2.1', 'Explicit VR Little Endian', { isEncapsulated: false }),
  syntax('1.2.840.10008.1.2.1.99', 'Deflated Explicit VR Little Endian', {
    encoding: 'deflated-le',
    isEncapsulated: false,
  }),
  syntax('1.2.840.10008.1.2.2', 'Explicit VR Big Endian', { encoding: 'explicit-be', isEncapsulated: false }),
  syntax('1.2.840.10008.1.2.5', 'RLE Lossless'),
  syntax('1.2.840.10008.1.2.4.50', 'JPEG Baseline (Process 1)', { isLossy: true }),
  syntax('1.2.840.10008.1.2.4.51', 'JPEG Extended (Process 2 & 4)', { isLossy: true }),
  syntax('1.2.840.10008.1.2.4.57', 'JPEG Lossless (Process 14)'),
  syntax('1.2.840.10008.1.2.4.70', 'JPEG Lossless (Process 14, SV1)'),
  syntax('1.2.840.10008.1.2.4.80', 'JPEG-LS Lossless'),
  syntax('1.2.840.10008.1.2.4.81', 'JPEG-LS Near-Lossless', { isLossy: true }),
  syntax('1.2.840.10008.1.2.4.90', 'JPEG 2000 (Lossless Only)'),
  syntax('1.2.840.10008.1.2.4.91', 'JPEG 2000', { isLossy: true }),
  syntax('1.2.840.10008.1.2.4.201', 'High-Throughput JPEG 2000 (Lossless Only)'),
  syntax('1.2.840.10008.1.2.4.202', 'High-Throughput JPEG 2000 with RPCL (Lossless Only)'),
  syntax('1.2.840.10008.1.2.4.203', 'High-Throughput JPEG 2000', { isLossy: true }),
  syntax('1.2.840.10008.1.2.4.110', 'JPEG XL Lossless'),
  syntax('1.2.840.10008.1.2.4.111', 'JPEG XL JPEG Recompression', { isLossy: true }),
  syntax('1.2.840.10008.1.2.4.112', 'JPEG XL', { isLossy: true }),
  // Recognised (the file is read and kept) but not decoded into an image.
  syntax('1.2.840.10008.1.2.4.52', 'JPEG Extended (Process 3 & 5, retired)', {
    isDecodable: false,
    isLossy: true,
  }),
  syntax('1.2.840.10008.1.2.4.53', 'JPEG Spectral Selection (retired)', {
    isDecodable: false,
    isLossy: true,
  }),
  syntax('1.2.840.10008.1.2.4.55', 'JPEG Full Progression (retired)', { isDecodable: false, isLossy: true }),
  syntax('1.2.840.10008.1.2.4.58', 'JPEG Lossless (Process 15, retired)', { isDecodable: false }),
  syntax('1.2.840.10008.1.2.4.92', 'JPEG 2000 Part 2 Multi-component (Lossless Only)', {
    isDecodable: false,
  }),
  syntax('1.2.840.10008.1.2.4.93', 'JPEG 2000 Part 2 Multi-component', { isDecodable: false, isLossy: true }),
  syntax('1.2.840.10008.1.2.4.94', 'JPIP Referenced', { isDecodable: false }),
  syntax('1.2.840.10008.1.2.4.95', 'JPIP Referenced Deflate', { isDecodable: false }),
  syntax('1.2.840.10008.1.2.4.100', 'MPEG2 Main Profile / Main Level', { isDecodable: false, isLossy: true }),
  syntax('1.2.840.10008.1.2.4.101', 'MPEG2 Main Profile / High Level', { isDecodable: false, isLossy: true }),
  syntax('1.2.840.10008.1.2.4.102', 'MPEG-4 AVC/H.264 High Profile', { isDecodable: false, isLossy: true }),
  syntax('1.2.840.10008.1.2.4.103', 'MPEG-4 AVC/H.264 BD-compatible', { isDecodable: false, isLossy: true }),
  syntax('1.2.840.10008.1.2.4.104', 'MPEG-4 AVC/H.264 2D video', { isDecodable: false, isLossy: true }),
  syntax('1.2.840.10008.1.2.4.105', 'MPEG-4 AVC/H.264 3D video', { isDecodable: false, isLossy: true }),
  syntax('1.2.840.10008.1.2.4.106', 'MPEG-4 AVC/H.264 Stereo', { isDecodable: false, isLossy: true }),
  syntax('1.2.840.10008.1.2.4.107', 'HEVC/H.265 Main Profile', { isDecodable: false, isLossy: true }),
  syntax('1.2.840.10008.1.2.4.108', 'HEVC/H.265 Main 10 Profile', { isDecodable: false, isLossy: true }),
  syntax('1.2.840.10008.1.2.6.1', 'RFC 2557 MIME Encapsulation (retired)', { isDecodable: false }),
  syntax('1.2.840.10008.1.2.6.2', 'XML Encoding (retired)', { isDecodable: false }),
];

const BY_UID = new Map(TRANSFER_SYNTAXES.map((s) => [s.uid, s]));

/** The transfer syntax of `uid`, or undefined for a UID this module does not know (private or invalid). */
export function findTransferSyntax(uid: string): TransferSyntax | undefined {
  return BY_UID.get(uid);
}

/** `1.2.840.10008.1.2.4.50 (JPEG Baseline (Process 1))`, for log lines. */
export function describeTransferSyntax(uid: string | undefined): string {
  if (uid === undefined) return 'no transfer syntax';
  const known = BY_UID.get(uid);
  return known === undefined ? `${uid} (unknown)` : `${uid} (${known.name})`;
}
