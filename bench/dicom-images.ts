/**
 * The two DICOM images of the `dicom-chain` bench, built by code (no file from outside), written as
 * Part 10 files by `dcmjs`:
 * - a CT slice: 512 x 512, 16 bits allocated (12 stored, unsigned), MONOCHROME2, Rescale Intercept -1024,
 *   Window Center/Width 40/400, explicit VR little endian (uncompressed): a body phantom (soft tissue
 *   with a gradient, fat rim, lungs, a bone disc, air) with noise, so that every slice's pixels differ
 *   and its PNG compresses like a real one;
 * - a colour fundus photograph: 2000 x 2000, 8-bit YBR_FULL_422, JPEG Baseline (one fragment per
 *   frame), the JPEG encoded by `sharp` (quality 90) from a drawn retina (vignetted disc, optic disc,
 *   vessels, noise). Each file gets its own JPEG comment, so that no two files carry the same bytes.
 * Every file names its patient (Patient ID, Birth Date, Sex) and has its own SOP and study UIDs.
 */
import { randomUUID } from 'node:crypto';
import dcmjs from 'dcmjs';
import sharp from 'sharp';

const { DicomDict, DicomMetaDictionary } = dcmjs.data;

export const CT_SIZE = 512;
export const FUNDUS_SIZE = 2000;
export const EXPLICIT_VR_LITTLE_ENDIAN = '1.2.840.10008.1.2.1';
export const JPEG_BASELINE = '1.2.840.10008.1.2.4.50';
const CT_IMAGE_STORAGE = '1.2.840.10008.5.1.4.1.1.2';
const OPHTHALMIC_PHOTOGRAPHY_8_BIT = '1.2.840.10008.5.1.4.1.1.77.1.5.1';
const CT_WINDOW = { center: 40, width: 400 } as const;
const CT_RESCALE_INTERCEPT = -1024;

/** Who the image is about: what `PATIENT_MATCH` reads from the DICOM header. */
export interface ImagePatient {
  readonly patientId: string;
  /** `YYYYMMDD` */
  readonly birthDate: string;
  readonly sex: 'M' | 'F';
}

/** A UID under the UUID root (PS3.5 B.2). */
function newUid(): string {
  return `2.25.${BigInt(`0x${randomUUID().replace(/-/g, '')}`).toString()}`;
}

function part10(dataset: Record<string, unknown>, transferSyntaxUid: string): Buffer {
  const meta = {
    FileMetaInformationVersion: new Uint8Array([0, 1]).buffer,
    MediaStorageSOPClassUID: dataset.SOPClassUID,
    MediaStorageSOPInstanceUID: dataset.SOPInstanceUID,
    TransferSyntaxUID: transferSyntaxUid,
    ImplementationClassUID: '2.25.329800735698586629295641978511506172918',
  };
  const dict = new DicomDict(DicomMetaDictionary.denaturalizeDataset(meta));
  dict.dict = DicomMetaDictionary.denaturalizeDataset(dataset);
  return Buffer.from(dict.write({ fragmentMultiframe: false }));
}

function commonTags(patient: ImagePatient, sopClassUid: string, modality: string): Record<string, unknown> {
  return {
    SOPClassUID: sopClassUid,
    SOPInstanceUID: newUid(),
    StudyInstanceUID: newUid(),
    SeriesInstanceUID: newUid(),
    StudyDate: '20240102',
    Modality: modality,
    Manufacturer: 'Bench',
    PatientName: 'Bench^Patient',
    PatientID: patient.patientId,
    PatientBirthDate: patient.birthDate,
    PatientSex: patient.sex,
  };
}

/** xorshift32: a small seeded generator, so that a slice can be rebuilt to check what was extracted. */
function seeded(seed: number): () => number {
  let state = seed >>> 0 || 0x9e3779b9;
  return () => {
    state ^= state << 13;
    state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    return state / 4294967296;
  };
}

/** The stored values of CT slice `seed`: 12-bit, Hounsfield units + 1024, rows top to bottom. */
export function ctStoredValues(seed: number): Uint16Array {
  const random = seeded(seed);
  const pixels = new Uint16Array(CT_SIZE * CT_SIZE);
  for (let y = 0; y < CT_SIZE; y++) {
    for (let x = 0; x < CT_SIZE; x++) {
      const body = ((x - 256) / 230) ** 2 + ((y - 256) / 180) ** 2;
      let hu = -1000;
      if (body <= 1) {
        hu = body > 0.85 ? -100 : 40 + y / 4 - 64;
        const isLung =
          ((x - 180) / 60) ** 2 + ((y - 240) / 90) ** 2 <= 1 ||
          ((x - 332) / 60) ** 2 + ((y - 240) / 90) ** 2 <= 1;
        if (isLung) hu = -850;
        if ((x - 256) ** 2 + (y - 370) ** 2 <= 30 * 30) hu = 700;
      }
      hu += Math.round((random() + random() - 1) * 30);
      pixels[y * CT_SIZE + x] = Math.max(0, Math.min(4095, hu - CT_RESCALE_INTERCEPT));
    }
  }
  return pixels;
}

/** CT slice `seed` as a Part 10 file. */
export function ctFile(seed: number, patient: ImagePatient): Buffer {
  const pixels = ctStoredValues(seed);
  return part10(
    {
      ...commonTags(patient, CT_IMAGE_STORAGE, 'CT'),
      SamplesPerPixel: 1,
      PhotometricInterpretation: 'MONOCHROME2',
      Rows: CT_SIZE,
      Columns: CT_SIZE,
      BitsAllocated: 16,
      BitsStored: 12,
      HighBit: 11,
      PixelRepresentation: 0,
      RescaleIntercept: String(CT_RESCALE_INTERCEPT),
      RescaleSlope: '1',
      WindowCenter: String(CT_WINDOW.center),
      WindowWidth: String(CT_WINDOW.width),
      PixelData: [pixels.buffer],
      _vrMap: { PixelData: 'OW' },
    },
    EXPLICIT_VR_LITTLE_ENDIAN,
  );
}

/**
 * The 8-bit grey value a viewer shows for `stored` through the slice's window: the linear VOI function
 * of PS3.3 C.11.2.1.2.1 (before rounding).
 */
export function ctDisplayValue(stored: number): number {
  const x = stored + CT_RESCALE_INTERCEPT;
  const { center: c, width: w } = CT_WINDOW;
  if (x <= c - 0.5 - (w - 1) / 2) return 0;
  if (x > c - 0.5 + (w - 1) / 2) return 255;
  return ((x - (c - 0.5)) / (w - 1) + 0.5) * 255;
}

/** A drawn retina, encoded as a baseline JPEG (quality 90, 4:2:0, YCbCr) by `sharp`. */
export async function fundusJpeg(): Promise<Buffer> {
  const n = FUNDUS_SIZE;
  const raw = Buffer.alloc(n * n * 3);
  const random = seeded(7);
  const vessels = Array.from({ length: 6 }, (_, k) =>
    Float64Array.from(
      { length: n },
      (_, x) => 1000 + Math.sin(x / (90 + 17 * k) + k) * (150 + 60 * k) - (k - 3) * 80,
    ),
  );
  for (let y = 0; y < n; y++) {
    for (let x = 0; x < n; x++) {
      const d = Math.hypot(x - 1000, y - 1000) / 950;
      if (d > 1) continue;
      const shade = 1 - 0.55 * d * d;
      let [r, g, b] = [215 * shade, 95 * shade, 35 * shade];
      const disc = Math.hypot(x - 1350, y - 980) / 120;
      if (disc < 1) [r, g, b] = [r + 40 * (1 - disc), g + 120 * (1 - disc), b + 60 * (1 - disc)];
      for (let k = 0; k < vessels.length; k++) {
        if (Math.abs(y - vessels[k]![x]!) < 7 - k / 2) [r, g, b] = [r * 0.6, g * 0.45, b * 0.5];
      }
      const noise = (random() + random() - 1) * 14;
      const at = (y * n + x) * 3;
      raw[at] = Math.max(0, Math.min(255, r + noise));
      raw[at + 1] = Math.max(0, Math.min(255, g + noise * 0.6));
      raw[at + 2] = Math.max(0, Math.min(255, b + noise * 0.4));
    }
  }
  return sharp(raw, { raw: { width: n, height: n, channels: 3 } })
    .jpeg({ quality: 90 })
    .toBuffer();
}

/** `jpeg` with a comment (COM) segment after its SOI (and JFIF header, if any): other bytes, the same image. */
export function withJpegComment(jpeg: Buffer, comment: string): Buffer {
  if (jpeg[0] !== 0xff || jpeg[1] !== 0xd8) throw new Error('expected a JPEG (SOI)');
  const at = jpeg[2] === 0xff && jpeg[3] === 0xe0 ? 4 + jpeg.readUInt16BE(4) : 2;
  const text = Buffer.from(comment, 'latin1');
  const head = Buffer.from([0xff, 0xfe, 0, 0]);
  head.writeUInt16BE(text.length + 2, 2);
  return Buffer.concat([jpeg.subarray(0, at), head, text, jpeg.subarray(at)]);
}

/** A fundus photograph file whose single frame is `jpeg` (a whole baseline JPEG). */
export function fundusFile(jpeg: Buffer, patient: ImagePatient): Buffer {
  return part10(
    {
      ...commonTags(patient, OPHTHALMIC_PHOTOGRAPHY_8_BIT, 'OP'),
      SamplesPerPixel: 3,
      PhotometricInterpretation: 'YBR_FULL_422',
      PlanarConfiguration: 0,
      Rows: FUNDUS_SIZE,
      Columns: FUNDUS_SIZE,
      BitsAllocated: 8,
      BitsStored: 8,
      HighBit: 7,
      PixelRepresentation: 0,
      LossyImageCompression: '01',
      PixelData: [jpeg.buffer.slice(jpeg.byteOffset, jpeg.byteOffset + jpeg.length)],
      _vrMap: { PixelData: 'OB' },
    },
    JPEG_BASELINE,
  );
}
