/**
 * What the DICOM worker threads do to extract a file's image frames or its encapsulated PDF. Runs only on
 * a worker thread (`dicom.worker.ts`, which loads this module and its decoders on the first extraction,
 * not for reading headers: `inspect.ts`): parsing and decoding are CPU-bound and a hostile file must
 * never hold the event loop.
 *
 * Pixel data is decoded and rendered by `dcmjs-imaging` (its LUT pipeline: Modality LUT from Rescale
 * Slope/Intercept, the file's first Window Center/Width or else a min/max window, MONOCHROME1 inversion,
 * PALETTE COLOR, RGB and YBR conversion, planar configuration) with the `dcmjs-codecs` WebAssembly
 * decoders (libjpeg-turbo, CharLS, OpenJPEG, OpenJPH, libjxl). A VOI LUT Sequence without a window is
 * applied here (`voi-lut.ts`), since `dcmjs-imaging` does not read it. Every frame is rendered to 8-bit
 * grey (monochrome) or RGB; the main thread encodes it (PNG or JPEG) with `sharp`.
 *
 * Before anything is allocated for pixels, the declared frame size is checked against the pixel limit,
 * native pixel data against the bytes the frames need, and each compressed frame's own header against
 * Rows and Columns (`codestream.ts`).
 */
import { createRequire } from 'node:module';
import type * as Imaging from 'dcmjs-imaging';
import { fileURLToPath } from 'node:url';
import {
  CORRUPT_JPEG_WARNING,
  codestreamFamilyOf,
  jpegColourOf,
  readFrameSize,
  withAdobeRgbMarker,
} from './codestream.ts';
import { DicomError } from './dicom-error.ts';
import type { Part10Scan, ScanLimits } from './part10-scan.ts';
import { TAG, readNumber, readText, readUl, readUs, scanPart10 } from './part10-scan.ts';
import { findVoiLut, loadCodecs, renderWithVoiLut } from './voi-lut.ts';

const require = createRequire(import.meta.url);
const imaging = require('dcmjs-imaging') as typeof Imaging;

export const ENCAPSULATED_PDF_SOP_CLASS = '1.2.840.10008.5.1.4.1.1.104.1';

export interface DicomLimits extends ScanLimits {
  /** Frames extracted from one file at most (evenly spaced when it has more). */
  readonly maxFrames: number;
  /** Pixels extracted from one file at most, over all its frames; one frame over it is refused. */
  readonly maxPixels: number;
}

/** One rendered frame: 8-bit samples, 1 (grey) or 3 (RGB) per pixel, rows top to bottom. */
export interface RenderedFrame {
  /** 1-based, as in the file. */
  readonly frameNumber: number;
  readonly width: number;
  readonly height: number;
  readonly channels: 1 | 3;
  readonly pixels: Uint8Array;
}

/** A baseline JPEG frame kept as the file holds it (see {@link jpegPassThrough}). */
export interface JpegFrame {
  readonly frameNumber: number;
  readonly width: number;
  readonly height: number;
  readonly jpeg: Uint8Array;
}

export type Extraction =
  | {
      readonly kind: 'images';
      readonly transferSyntaxUid: string;
      readonly isLossy: boolean;
      readonly numberOfFrames: number;
      readonly frames: readonly (RenderedFrame | JpegFrame)[];
    }
  | {
      readonly kind: 'pdf';
      readonly transferSyntaxUid: string;
      readonly pdf: Uint8Array;
      /** Page 1 rendered (longest side `pageSizePx`), or undefined when the renderer failed. */
      readonly page?: RenderedFrame;
      readonly pageError?: string;
    }
  | {
      /** A well-formed file that holds no image this module can extract. */
      readonly kind: 'none';
      readonly transferSyntaxUid: string;
      readonly code: 'no-pixel-data' | 'unsupported-transfer-syntax' | 'unsupported-photometric';
      readonly message: string;
    };

let isDecoderReady: Promise<void> | undefined;

/** PDF.js's warning that it left out an image larger than its `maxImageSize`. */
const PDF_IMAGE_REMOVED = /Image exceeded maximum allowed size/;
/** The library warnings extraction acts on: a corrupt JPEG frame, an image left out of a PDF page. */
const ACTED_ON = new RegExp(`${CORRUPT_JPEG_WARNING.source}|${PDF_IMAGE_REMOVED.source}`);
/** Those warnings since the last {@link takeLibraryWarning}. */
const libraryWarnings: string[] = [];

/**
 * Loads the WebAssembly decoders once per thread, with their messages on: they reach JavaScript only
 * through the library's logger, whose lines the thread hands to {@link noteLibraryMessage}.
 */
export function initialiseDecoders(): Promise<void> {
  imaging.log.setLevel('info');
  isDecoderReady ??= imaging.NativePixelDecoder.initializeAsync({ logNativeDecodersMessages: true });
  return isDecoderReady;
}

/** Keeps a library message that extraction acts on; drops every other one. */
export function noteLibraryMessage(text: string): void {
  const warning = ACTED_ON.exec(text)?.[0];
  if (warning !== undefined && libraryWarnings.length < 8) libraryWarnings.push(warning);
}

/** The first warning kept since the last call, if any; clears them. */
function takeLibraryWarning(): string | undefined {
  const warning = libraryWarnings[0];
  libraryWarnings.length = 0;
  return warning;
}

/** How an encapsulated PDF's page 1 is rendered. */
export interface PageOptions {
  /** Longest side, in pixels. */
  readonly pageSizePx: number;
  /** Do not render, for this reason (the extraction's `pageError`). */
  readonly skipPageReason?: string;
  /** Called as rendering starts. */
  readonly onPageRender?: () => void;
}

/** Extracts the frames (at most `limits.maxFrames`) or the encapsulated PDF of `bytes`. */
export async function extractDicom(
  bytes: Uint8Array,
  limits: DicomLimits,
  pageOptions: PageOptions,
): Promise<Extraction> {
  const scan = scanPart10(bytes, limits);
  const transferSyntaxUid = scan.transferSyntax.uid;
  if (readText(scan, TAG.SOPClassUID) === ENCAPSULATED_PDF_SOP_CLASS) {
    return extractPdf(scan, pageOptions, limits.maxPixels);
  }
  if (scan.pixelData === undefined) {
    return {
      kind: 'none',
      transferSyntaxUid,
      code: 'no-pixel-data',
      message: 'The file has no Pixel Data (7FE0,0010)',
    };
  }
  if (!scan.transferSyntax.isDecodable) {
    return {
      kind: 'none',
      transferSyntaxUid,
      code: 'unsupported-transfer-syntax',
      message: `No decoder for the pixel data's transfer syntax (${scan.transferSyntax.name})`,
    };
  }
  const geometry = checkGeometry(scan, limits);
  const frameIndexes = pickFrames(
    geometry.numberOfFrames,
    Math.min(limits.maxFrames, Math.floor(limits.maxPixels / geometry.pixelsPerFrame)),
  );
  const photometric = readText(scan, TAG.PhotometricInterpretation) ?? '';
  const isGrey = photometric === 'MONOCHROME1' || photometric === 'MONOCHROME2';
  if (!isGrey && geometry.bitsAllocated !== 8) {
    return {
      kind: 'none',
      transferSyntaxUid,
      code: 'unsupported-photometric',
      message: `${geometry.bitsAllocated}-bit colour (${photometric}) cannot be rendered`,
    };
  }
  const isLossy = scan.transferSyntax.isLossy || readText(scan, TAG.LossyImageCompression) === '01';
  const jpegs = jpegPassThrough(scan, geometry, photometric, frameIndexes);
  if (jpegs !== undefined) {
    return {
      kind: 'images',
      transferSyntaxUid,
      isLossy,
      numberOfFrames: geometry.numberOfFrames,
      frames: jpegs.map((jpeg, i) => ({
        frameNumber: frameIndexes[i]! + 1,
        width: geometry.columns,
        height: geometry.rows,
        jpeg,
      })),
    };
  }
  await initialiseDecoders();
  swapBigEndianBytePixels(scan, geometry);
  const image = await openImage(bytes, transferSyntaxUid, geometry.samplesPerPixel);
  if (photometric === 'RGB' && /^1\.2\.840\.10008\.1\.2\.4\.5[01]$/.test(transferSyntaxUid))
    markRgbJpegFrames(image);
  const voiLut = isGrey ? findVoiLut(scan, image.getElements()) : undefined;
  if (voiLut !== undefined && scan.pixelData?.isEncapsulated === true) await loadCodecs();
  const frames: RenderedFrame[] = [];
  for (const index of frameIndexes) {
    let rgba: Uint8Array;
    takeLibraryWarning();
    try {
      rgba =
        voiLut === undefined
          ? new Uint8Array(image.render({ frame: index }).pixels)
          : renderWithVoiLut(scan, image.getElements(), image.getTransferSyntaxUid(), index, voiLut);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      if (/^Unsupported LUT pipeline photometric interpretation/.test(message)) {
        return {
          kind: 'none',
          transferSyntaxUid,
          code: 'unsupported-photometric',
          message: `Photometric Interpretation '${photometric}' cannot be rendered`,
        };
      }
      throw new DicomError('decode-failed', `Frame ${index + 1} could not be decoded: ${oneLine(message)}`);
    }
    // A frame decoded around corrupt data would be filed as if it were the image.
    const warning = takeLibraryWarning();
    if (warning !== undefined) {
      throw new DicomError('decode-failed', `Frame ${index + 1} is corrupt: ${oneLine(warning)}`);
    }
    frames.push({
      frameNumber: index + 1,
      width: geometry.columns,
      height: geometry.rows,
      ...compact(rgba, isGrey),
    });
  }
  return { kind: 'images', transferSyntaxUid, isLossy, numberOfFrames: geometry.numberOfFrames, frames };
}

const JPEG_BASELINE = '1.2.840.10008.1.2.4.50';

/**
 * The frames' own JPEG codestreams, when they can be stored as they are: an 8-bit colour baseline JPEG
 * whose every frame is one fragment, a whole JPEG (SOI to EOI) that declares YCbCr as any JPEG reader
 * assumes, with no overlay to burn in. Rendering would decode and re-encode them: slower, and a second
 * lossy step. The main thread decodes each one for its thumbnails, and refuses a corrupt one there.
 */
function jpegPassThrough(
  scan: Part10Scan,
  geometry: Geometry,
  photometric: string,
  frameIndexes: readonly number[],
): Uint8Array[] | undefined {
  const pixelData = scan.pixelData;
  if (scan.transferSyntax.uid !== JPEG_BASELINE || pixelData?.isEncapsulated !== true) return undefined;
  if (geometry.samplesPerPixel !== 3 || geometry.bitsAllocated !== 8 || scan.hasOverlays) return undefined;
  if (!['YBR_FULL_422', 'YBR_FULL', 'RGB'].includes(photometric)) return undefined;
  const fragments = pixelData.fragments.slice(1);
  if (fragments.length !== geometry.numberOfFrames) return undefined;
  const jpegs: Uint8Array[] = [];
  for (const index of frameIndexes) {
    const fragment = fragments[index]!;
    let end = fragment.offset + fragment.length;
    // A fragment is padded to an even length.
    if (scan.bytes[end - 1] === 0) end -= 1;
    const jpeg = scan.bytes.subarray(fragment.offset, end);
    const isWhole = jpeg.length > 4 && jpeg[jpeg.length - 2] === 0xff && jpeg[jpeg.length - 1] === 0xd9;
    if (!isWhole || jpegColourOf(jpeg) !== 'ycbcr') return undefined;
    jpegs.push(jpeg.slice());
  }
  return jpegs;
}

/**
 * 8-bit native Pixel Data stored as OW in Explicit VR Big Endian holds its bytes in 16-bit words, each
 * written most significant byte first (PS3.5 8.1.1 and 8.2): every pair of samples is swapped. The
 * renderer swaps only samples wider than 8 bits, so the pairs are swapped back here and the VR written
 * as OB, in `scan.bytes` (the file itself for big endian, which is never deflated), before it is read.
 * Without this, RGB pixels come out with their samples moved between neighbours (red and blue mixed).
 */
function swapBigEndianBytePixels(scan: Part10Scan, geometry: Geometry): void {
  const pixelData = scan.pixelData;
  if (scan.isLittleEndian || pixelData?.isEncapsulated !== false || pixelData.vr !== 'OW') return;
  if (geometry.bitsAllocated !== 8) return;
  const { offset, length } = pixelData.value;
  const bytes = scan.bytes;
  for (let i = offset; i + 1 < offset + length; i += 2) {
    const first = bytes[i]!;
    bytes[i] = bytes[i + 1]!;
    bytes[i + 1] = first;
  }
  // The VR sits 8 bytes before the value: VR (2), reserved (2), 32-bit length (4).
  bytes[offset - 8] = 0x4f; // 'O'
  bytes[offset - 7] = 0x42; // 'B'
}

const RLE_LOSSLESS = '1.2.840.10008.1.2.5';
const EXPLICIT_VR_LITTLE_ENDIAN = '1.2.840.10008.1.2.1';

/**
 * The image `dcmjs-imaging` renders. RLE colour frames are decoded by `dcmjs-codecs` first:
 * `dcmjs-imaging` hands its RLE decoder the opposite planar configuration and renders the colour planes
 * as interleaved samples.
 */
async function openImage(bytes: Uint8Array, transferSyntaxUid: string, samplesPerPixel: number) {
  if (transferSyntaxUid !== RLE_LOSSLESS || samplesPerPixel === 1) {
    return new imaging.DicomImage(copyToArrayBuffer(bytes));
  }
  const codecs = await loadCodecs();
  const transcoder = new codecs.Transcoder(copyToArrayBuffer(bytes));
  transcoder.transcode(EXPLICIT_VR_LITTLE_ENDIAN);
  return new imaging.DicomImage(transcoder.getElements(), EXPLICIT_VR_LITTLE_ENDIAN);
}

/**
 * Marks the baseline JPEG frames whose colour space nothing declares ({@link jpegColourOf} `unknown`) as
 * RGB, as the data set's RGB Photometric Interpretation says, so that the decoder does not convert them
 * from YCbCr (libjpeg's guess).
 */
function markRgbJpegFrames(image: Imaging.DicomImage): void {
  const frames = image.getElement('PixelData') as unknown;
  if (!Array.isArray(frames)) return;
  image.setElement(
    'PixelData',
    frames.map((frame: unknown) => {
      if (!(frame instanceof ArrayBuffer) || jpegColourOf(new Uint8Array(frame)) !== 'unknown') return frame;
      return copyToArrayBuffer(withAdobeRgbMarker(new Uint8Array(frame)));
    }) as never,
  );
}

interface Geometry {
  readonly rows: number;
  readonly columns: number;
  readonly samplesPerPixel: number;
  readonly bitsAllocated: number;
  readonly numberOfFrames: number;
  readonly pixelsPerFrame: number;
}

/** Checks the declared image attributes against the limits and the pixel data, before any allocation. */
function checkGeometry(scan: Part10Scan, limits: DicomLimits): Geometry {
  const rows = readUs(scan, TAG.Rows);
  const columns = readUs(scan, TAG.Columns);
  const samples = readUs(scan, TAG.SamplesPerPixel) ?? 1;
  const bitsAllocated = readUs(scan, TAG.BitsAllocated);
  const frames = Math.trunc(readNumber(scan, TAG.NumberOfFrames) ?? 1);
  if (rows === undefined || columns === undefined || rows === 0 || columns === 0) {
    throw new DicomError(
      'bad-image-attributes',
      'Rows (0028,0010) or Columns (0028,0011) is missing or zero',
    );
  }
  if (bitsAllocated === undefined || ![1, 8, 16, 32].includes(bitsAllocated)) {
    throw new DicomError(
      'bad-image-attributes',
      `Bits Allocated (0028,0100) is ${bitsAllocated ?? 'missing'}, not 1, 8, 16 or 32`,
    );
  }
  if (![1, 3].includes(samples)) {
    throw new DicomError('bad-image-attributes', `Samples per Pixel (0028,0002) is ${samples}, not 1 or 3`);
  }
  if (frames < 1) {
    throw new DicomError('bad-image-attributes', `Number of Frames (0028,0008) is ${frames}`);
  }
  const pixelsPerFrame = rows * columns * samples;
  if (pixelsPerFrame > limits.maxPixels) {
    throw new DicomError(
      'too-many-pixels',
      `One frame declares ${rows} x ${columns} x ${samples} samples (${pixelsPerFrame}), over the limit of ${limits.maxPixels} (DICOM_MAX_PIXELS)`,
    );
  }
  const pixelData = scan.pixelData!;
  if (!pixelData.isEncapsulated) {
    const photometric = readText(scan, TAG.PhotometricInterpretation);
    // YBR_FULL_422 stores two samples per pixel (PS3.3 C.7.6.3.1.2).
    const samplesStored = photometric === 'YBR_FULL_422' ? 2 : samples;
    const frameBits = rows * columns * samplesStored * bitsAllocated;
    const neededBytes = Math.ceil((frameBits * frames) / 8);
    if (pixelData.value.length < neededBytes) {
      throw new DicomError(
        'pixel-data-short',
        `Pixel Data (7FE0,0010) holds ${pixelData.value.length} bytes; ${frames} frame(s) of ${rows} x ${columns} need ${neededBytes}`,
      );
    }
  } else {
    if (pixelData.fragments.length < 2) {
      throw new DicomError(
        'pixel-data-short',
        'The encapsulated Pixel Data (7FE0,0010) has no fragment after the offset table',
      );
    }
    const family = codestreamFamilyOf(scan.transferSyntax.uid);
    if (family !== undefined) {
      for (const fragment of pixelData.fragments.slice(1)) {
        const size = readFrameSize(
          scan.bytes.subarray(fragment.offset, fragment.offset + fragment.length),
          family,
        );
        if (size !== undefined && (size.width !== columns || size.height !== rows)) {
          throw new DicomError(
            'codestream-mismatch',
            `A compressed frame declares ${size.width} x ${size.height} pixels, but Columns x Rows is ${columns} x ${rows}`,
          );
        }
      }
    }
  }
  return {
    rows,
    columns,
    samplesPerPixel: samples,
    bitsAllocated,
    numberOfFrames: frames,
    pixelsPerFrame,
  };
}

/** `count` frame indexes spread evenly over `total` frames (all of them when `count >= total`). */
export function pickFrames(total: number, count: number): number[] {
  const n = Math.max(1, Math.min(total, count));
  if (n === total) return Array.from({ length: total }, (_, i) => i);
  if (n === 1) return [Math.floor((total - 1) / 2)];
  return Array.from({ length: n }, (_, i) => Math.round((i * (total - 1)) / (n - 1)));
}

/** RGBA from the renderer to grey (one sample) or RGB (three). */
function compact(rgba: Uint8Array, isGrey: boolean): { channels: 1 | 3; pixels: Uint8Array } {
  const count = rgba.length / 4;
  const channels = isGrey ? 1 : 3;
  const pixels = new Uint8Array(count * channels);
  if (isGrey) {
    for (let i = 0; i < count; i++) pixels[i] = rgba[i * 4]!;
  } else {
    for (let i = 0, o = 0; i < count; i++, o += 3) {
      pixels[o] = rgba[i * 4]!;
      pixels[o + 1] = rgba[i * 4 + 1]!;
      pixels[o + 2] = rgba[i * 4 + 2]!;
    }
  }
  return { channels, pixels };
}

function copyToArrayBuffer(bytes: Uint8Array): ArrayBuffer {
  return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
}

function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim().slice(0, 300);
}

// --- Encapsulated PDF --------------------------------------------------------------------------------

const PDFJS_DIR = fileURLToPath(new URL('./', import.meta.resolve('pdfjs-dist/package.json')));

async function extractPdf(scan: Part10Scan, page: PageOptions, maxPixels: number): Promise<Extraction> {
  const transferSyntaxUid = scan.transferSyntax.uid;
  const ref = scan.elements.get(TAG.EncapsulatedDocument);
  const mime = readText(scan, TAG.MIMETypeOfEncapsulatedDocument);
  if (ref === undefined || ref.length === 0) {
    throw new DicomError(
      'bad-encapsulated-document',
      'The Encapsulated PDF has no Encapsulated Document (0042,0011)',
    );
  }
  if (mime !== undefined && mime.toLowerCase() !== 'application/pdf') {
    throw new DicomError(
      'bad-encapsulated-document',
      `The encapsulated document is declared as '${mime}', not application/pdf`,
    );
  }
  // The value is padded to an even length with a NUL; Encapsulated Document Length, when given, is exact.
  const declared = readUl(scan, TAG.EncapsulatedDocumentLength);
  let end = ref.offset + ref.length;
  if (declared !== undefined && declared <= ref.length) end = ref.offset + declared;
  else if (scan.bytes[end - 1] === 0) end -= 1;
  const pdf = scan.bytes.slice(ref.offset, end);
  if (Buffer.from(pdf.buffer, pdf.byteOffset, Math.min(5, pdf.length)).toString('latin1') !== '%PDF-') {
    throw new DicomError('bad-encapsulated-document', 'The Encapsulated Document (0042,0011) is not a PDF');
  }
  if (page.skipPageReason !== undefined) {
    return { kind: 'pdf', transferSyntaxUid, pdf, pageError: page.skipPageReason };
  }
  try {
    page.onPageRender?.();
    return {
      kind: 'pdf',
      transferSyntaxUid,
      pdf,
      page: await renderPdfPage(pdf, page.pageSizePx, maxPixels),
    };
  } catch (error) {
    return {
      kind: 'pdf',
      transferSyntaxUid,
      pdf,
      pageError: oneLine(error instanceof Error ? error.message : String(error)),
    };
  }
}

/**
 * Page 1 of `pdf` rendered by PDF.js (`pdfjs-dist`, drawing on `@napi-rs/canvas`) with its longest side
 * `sizePx`, on white. XFA and system fonts are off; fonts, CMaps and image decoders come from the package.
 *
 * An image of more than `maxPixels` (DICOM_MAX_PIXELS) is never decoded: PDF.js decodes images into array
 * buffers and draws them through canvases of their full size, memory outside the thread's heap cap, so a
 * small PDF holding a 16000 x 16000 image would take gigabytes. PDF.js leaves such an image out with a
 * warning; the render then fails (no thumbnail, the reason logged) rather than give a thumbnail that
 * looks like the page without it.
 */
async function renderPdfPage(pdf: Uint8Array, sizePx: number, maxPixels: number): Promise<RenderedFrame> {
  const pdfjs = await import('pdfjs-dist/legacy/build/pdf.mjs');
  const { createCanvas } = await import('@napi-rs/canvas');
  const task = pdfjs.getDocument({
    // PDF.js takes ownership of (and detaches) the array it is given.
    data: pdf.slice(),
    enableXfa: false,
    useSystemFonts: false,
    disableFontFace: true,
    // Warnings on: the one saying an image was left out is read (the thread never prints them).
    verbosity: 1,
    maxImageSize: maxPixels,
    standardFontDataUrl: `${PDFJS_DIR}standard_fonts/`,
    cMapUrl: `${PDFJS_DIR}cmaps/`,
    cMapPacked: true,
    wasmUrl: `${PDFJS_DIR}wasm/`,
    iccUrl: `${PDFJS_DIR}iccs/`,
  });
  try {
    const document = await task.promise;
    const page = await document.getPage(1);
    const natural = page.getViewport({ scale: 1 });
    const viewport = page.getViewport({ scale: sizePx / Math.max(natural.width, natural.height, 1) });
    const width = Math.max(1, Math.round(viewport.width));
    const height = Math.max(1, Math.round(viewport.height));
    const canvas = createCanvas(width, height);
    const context = canvas.getContext('2d');
    context.fillStyle = '#ffffff';
    context.fillRect(0, 0, width, height);
    takeLibraryWarning();
    await page.render({ canvas: canvas as never, canvasContext: context as never, viewport }).promise;
    if (PDF_IMAGE_REMOVED.test(takeLibraryWarning() ?? '')) {
      throw new Error(
        `page 1 holds an image of more than ${maxPixels} pixels (DICOM_MAX_PIXELS), left unrendered`,
      );
    }
    const rgba = new Uint8Array(context.getImageData(0, 0, width, height).data.buffer);
    return { frameNumber: 1, width, height, ...compact(rgba, false) };
  } finally {
    await task.destroy();
  }
}
