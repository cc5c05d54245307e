/**
 * What the service accepts from DICOM senders (C-STORE presentation contexts and STOW-RS instances alike):
 * the storage SOP classes an ophthalmology department sends, and the transfer syntaxes whose data sets the
 * queue's DICOM routines can read and whose pixel data they can decode. Anything else is refused at
 * association (C-STORE) or per instance (STOW-RS), never stored for a chain that would fail on it.
 */

/** An accepted storage SOP class and the element that carries its content, when it must have one. */
export interface StorageClass {
  readonly uid: string;
  readonly name: string;
  /** dicom-parser tag of the content element (`x7fe00010` Pixel Data); undefined: none required. */
  readonly contentTag: string | undefined;
}

/** dicom-parser's tag of Pixel Data (7FE0,0010). */
export const PIXEL_DATA = 'x7fe00010';
const ENCAPSULATED_DOCUMENT = 'x00420011';

const image = (uid: string, name: string): StorageClass => ({ uid, name, contentTag: PIXEL_DATA });
const other = (uid: string, name: string): StorageClass => ({ uid, name, contentTag: undefined });

export const STORAGE_CLASSES: readonly StorageClass[] = [
  image('1.2.840.10008.5.1.4.1.1.77.1.5.1', 'Ophthalmic Photography 8 Bit Image Storage'),
  image('1.2.840.10008.5.1.4.1.1.77.1.5.2', 'Ophthalmic Photography 16 Bit Image Storage'),
  other('1.2.840.10008.5.1.4.1.1.77.1.5.3', 'Stereometric Relationship Storage'),
  image('1.2.840.10008.5.1.4.1.1.77.1.5.4', 'Ophthalmic Tomography Image Storage'),
  image(
    '1.2.840.10008.5.1.4.1.1.77.1.5.5',
    'Wide Field Ophthalmic Photography Stereographic Projection Image Storage',
  ),
  image('1.2.840.10008.5.1.4.1.1.77.1.5.6', 'Wide Field Ophthalmic Photography 3D Coordinates Image Storage'),
  image('1.2.840.10008.5.1.4.1.1.77.1.5.7', 'Ophthalmic Optical Coherence Tomography En Face Image Storage'),
  other(
    '1.2.840.10008.5.1.4.1.1.77.1.5.8',
    'Ophthalmic Optical Coherence Tomography B-scan Volume Analysis Storage',
  ),
  image('1.2.840.10008.5.1.4.1.1.77.1.4', 'VL Photographic Image Storage'),
  other('1.2.840.10008.5.1.4.1.1.80.1', 'Ophthalmic Visual Field Static Perimetry Measurements Storage'),
  image('1.2.840.10008.5.1.4.1.1.81.1', 'Ophthalmic Thickness Map Storage'),
  image('1.2.840.10008.5.1.4.1.1.82.1', 'Corneal Topography Map Storage'),
  other('1.2.840.10008.5.1.4.1.1.78.1', 'Lensometry Measurements Storage'),
  other('1.2.840.10008.5.1.4.1.1.78.2', 'Autorefraction Measurements Storage'),
  other('1.2.840.10008.5.1.4.1.1.78.3', 'Keratometry Measurements Storage'),
  other('1.2.840.10008.5.1.4.1.1.78.4', 'Subjective Refraction Measurements Storage'),
  other('1.2.840.10008.5.1.4.1.1.78.5', 'Visual Acuity Measurements Storage'),
  other('1.2.840.10008.5.1.4.1.1.78.7', 'Ophthalmic Axial Measurements Storage'),
  other('1.2.840.10008.5.1.4.1.1.78.8', 'Intraocular Lens Calculations Storage'),
  {
    uid: '1.2.840.10008.5.1.4.1.1.104.1',
    name: 'Encapsulated PDF Storage',
    contentTag: ENCAPSULATED_DOCUMENT,
  },
  image('1.2.840.10008.5.1.4.1.1.7', 'Secondary Capture Image Storage'),
  image('1.2.840.10008.5.1.4.1.1.7.1', 'Multi-frame Single Bit Secondary Capture Image Storage'),
  image('1.2.840.10008.5.1.4.1.1.7.2', 'Multi-frame Grayscale Byte Secondary Capture Image Storage'),
  image('1.2.840.10008.5.1.4.1.1.7.3', 'Multi-frame Grayscale Word Secondary Capture Image Storage'),
  image('1.2.840.10008.5.1.4.1.1.7.4', 'Multi-frame True Color Secondary Capture Image Storage'),
  image('1.2.840.10008.5.1.4.1.1.6.1', 'Ultrasound Image Storage'),
  image('1.2.840.10008.5.1.4.1.1.3.1', 'Ultrasound Multi-frame Image Storage'),
  image('1.2.840.10008.5.1.4.1.1.2', 'CT Image Storage'),
  image('1.2.840.10008.5.1.4.1.1.2.1', 'Enhanced CT Image Storage'),
  image('1.2.840.10008.5.1.4.1.1.4', 'MR Image Storage'),
  image('1.2.840.10008.5.1.4.1.1.4.1', 'Enhanced MR Image Storage'),
];

/** Verification (C-ECHO). */
export const VERIFICATION_SOP_CLASS = '1.2.840.10008.1.1';

/** The transfer syntaxes accepted, uncompressed first: the little endian ones are preferred. */
export const TRANSFER_SYNTAXES: ReadonlyMap<string, string> = new Map([
  ['1.2.840.10008.1.2.1', 'Explicit VR Little Endian'],
  ['1.2.840.10008.1.2', 'Implicit VR Little Endian'],
  ['1.2.840.10008.1.2.1.99', 'Deflated Explicit VR Little Endian'],
  ['1.2.840.10008.1.2.2', 'Explicit VR Big Endian'],
  ['1.2.840.10008.1.2.5', 'RLE Lossless'],
  ['1.2.840.10008.1.2.4.50', 'JPEG Baseline (Process 1)'],
  ['1.2.840.10008.1.2.4.51', 'JPEG Extended (Process 2 & 4)'],
  ['1.2.840.10008.1.2.4.57', 'JPEG Lossless (Process 14)'],
  ['1.2.840.10008.1.2.4.70', 'JPEG Lossless (Process 14, SV1)'],
  ['1.2.840.10008.1.2.4.80', 'JPEG-LS Lossless'],
  ['1.2.840.10008.1.2.4.81', 'JPEG-LS Near-Lossless'],
  ['1.2.840.10008.1.2.4.90', 'JPEG 2000 (Lossless Only)'],
  ['1.2.840.10008.1.2.4.91', 'JPEG 2000'],
  ['1.2.840.10008.1.2.4.201', 'High-Throughput JPEG 2000 (Lossless Only)'],
  ['1.2.840.10008.1.2.4.202', 'High-Throughput JPEG 2000 with RPCL (Lossless Only)'],
  ['1.2.840.10008.1.2.4.203', 'High-Throughput JPEG 2000'],
]);

/** Explicit VR Big Endian: retired in DICOM; accepted only when a sender offers nothing better. */
const BIG_ENDIAN = '1.2.840.10008.1.2.2';

const BY_UID = new Map(STORAGE_CLASSES.map((c) => [c.uid, c]));

/** The accepted storage class of `uid`, or undefined. */
export function findStorageClass(uid: string): StorageClass | undefined {
  return BY_UID.get(uid);
}

export function isAcceptedTransferSyntax(uid: string): boolean {
  return TRANSFER_SYNTAXES.has(uid);
}

/**
 * The transfer syntax to accept among those a sender proposes for one presentation context: the first
 * accepted one in the sender's order (a compressed image then travels as the sender holds it), Big Endian
 * only when nothing else is acceptable; undefined when none is.
 */
export function chooseTransferSyntax(proposed: readonly string[]): string | undefined {
  const acceptable = proposed.filter(isAcceptedTransferSyntax);
  return acceptable.find((uid) => uid !== BIG_ENDIAN) ?? acceptable[0];
}
