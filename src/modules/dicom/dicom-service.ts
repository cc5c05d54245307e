/**
 * The DICOM module's calls, on the main thread: each hands the file to the decoding threads
 * (`dicom-pool.ts`, one pool per process and settings, created on first use) and, for extraction,
 * encodes the rendered frames with `sharp` (on libuv's thread pool; loaded by the first extraction, so
 * that a process that only checks received instances does not hold libvips): PNG for a lossless source, JPEG for
 * a lossy one (a lossy transfer syntax, or Lossy Image Compression "01"); colour baseline JPEG frames
 * that need no rendering are kept as the file holds them (and decoded here, for thumbnails and to refuse
 * corrupt ones).
 */
import { availableParallelism } from 'node:os';
import type Sharp from 'sharp';
import type { Config } from '../../config.ts';
import type { DicomPool, DicomTask } from './dicom-pool.ts';
import { createDicomPool } from './dicom-pool.ts';
import type { DicomLimits, RenderedFrame } from './extract.ts';
import type { DicomInspection, DicomSummary } from './inspect.ts';
import { CORRUPT_JPEG_WARNING } from './codestream.ts';
import { DicomError, messageOf } from './dicom-error.ts';
import { loadSharp } from './sharp.ts';

/** Raw 8-bit pixels, rows top to bottom: what thumbnails are made from without decoding again. */
export interface RawImage {
  readonly pixels: Uint8Array;
  readonly width: number;
  readonly height: number;
  readonly channels: 1 | 3;
}

export interface ExtractedImage {
  /** 1-based frame number in the file. */
  readonly frameNumber: number;
  readonly mimeType: 'image/png' | 'image/jpeg';
  readonly bytes: Buffer;
  /**
   * The decoded pixels (what thumbnails are made from): the rendered frame; for a JPEG frame stored as the
   * file holds it, its decoding, reduced to `previewSizePx` on its longest side when it is larger (see
   * {@link ExtractOptions}).
   */
  readonly raw: RawImage;
}

/** How {@link extractDicomImages} decodes the frames it keeps as the file holds them. */
export interface ExtractOptions {
  /**
   * Longest side, in pixels, of the decoded pixels of a stored JPEG frame: a larger frame is decoded
   * reduced (libjpeg scales while it decodes), since only thumbnails are made from them. Full size
   * when absent.
   */
  readonly previewSizePx?: number;
}

export type DicomExtraction =
  | {
      readonly kind: 'images';
      readonly transferSyntaxUid: string;
      /** Frames in the file; `images` holds at most `DICOM_MAX_FRAMES` of them. */
      readonly numberOfFrames: number;
      readonly images: readonly ExtractedImage[];
    }
  | {
      readonly kind: 'pdf';
      readonly transferSyntaxUid: string;
      readonly pdf: Buffer;
      /** Page 1 rendered, for thumbnails; absent when the renderer failed (`pageError` says why). */
      readonly page?: RawImage;
      readonly pageError?: string;
    }
  | {
      readonly kind: 'none';
      readonly transferSyntaxUid: string;
      readonly code: 'no-pixel-data' | 'unsupported-transfer-syntax' | 'unsupported-photometric';
      readonly message: string;
    };

/** Longest side a PDF page is rendered at: the largest thumbnail. */
const PDF_PAGE_SIZE_PX = 640;
const JPEG_QUALITY = 90;
/**
 * zlib level of an extracted PNG (lossless: the pixels are the same at every level). On rendered CT
 * slices level 4 takes about a third less CPU than sharp's default 6 for files under 1% larger; levels
 * 1-2 switch zlib to its fast strategy and give files 30-40% larger.
 */
export const PNG_COMPRESSION_LEVEL = 4;

const pools = new Map<string, DicomPool>();

/** The limits of a file, from the configuration. */
export function dicomLimitsOf(config: Config): DicomLimits {
  return {
    maxElements: config.dicom.maxElements,
    maxDepth: config.dicom.maxDepth,
    maxBytes: config.dicom.decodeMemoryMb * 1024 * 1024,
    maxFrames: config.dicom.maxFrames,
    maxPixels: config.dicom.maxPixels,
    maxTextBytes: config.dicom.maxTextBytes,
  };
}

/**
 * The pools' lanes: `receipt` checks received instances (STOW-RS, C-STORE) while the sender waits for
 * its answer; `filing` runs the queue's routines (header reads, extraction, other modules' readers). Each
 * lane has threads of its own, so that a receipt check never waits behind filing work however long that
 * runs (a hostile file near the limits, a burst of extractions).
 */
type Lane = 'receipt' | 'filing';

function poolFor(config: Config, lane: Lane = 'filing'): DicomPool {
  const threads = lane === 'receipt' ? config.dicom.receiptThreads : config.dicom.workerThreads;
  const options = {
    threads: threads === 0 ? availableParallelism() : threads,
    timeoutMs: config.dicom.decodeTimeoutMs,
    memoryMb: config.dicom.decodeMemoryMb,
    limits: dicomLimitsOf(config),
    pageSizePx: PDF_PAGE_SIZE_PX,
  };
  const key = JSON.stringify({ lane, ...options });
  let pool = pools.get(key);
  if (pool === undefined) {
    pool = createDicomPool(options);
    pools.set(key, pool);
  }
  return pool;
}

/**
 * Checks `bytes` as a DICOM Part 10 file within the configured limits and reads its identifying header;
 * throws a `DicomError` naming the cause. With `isHandedOver`, the caller gives `bytes` up: their buffer
 * may be moved to the decoding thread instead of copied (then it is left detached, of length 0).
 */
export function readDicomFile(
  bytes: Uint8Array,
  config: Config,
  options: { readonly isHandedOver?: boolean } = {},
): Promise<DicomSummary> {
  return poolFor(config).read(bytes, options.isHandedOver);
}

/**
 * Reads the file meta information of a received instance and checks the file as {@link readDicomFile}
 * does, on a thread: a scan's refusal comes back with the meta information rather than thrown. Throws a
 * `DicomError` only for a thread past its limits (`timeout`, `out-of-memory`, `worker-failed`).
 */
export function inspectDicomFile(bytes: Uint8Array, config: Config): Promise<DicomInspection> {
  return poolFor(config, 'receipt').inspect(bytes);
}

/**
 * Runs another module's file reader on a decoding thread (see {@link DicomTask}), under the pool's time
 * and memory limits; throws a `DicomError` for those limits or for what the reader throws.
 */
export function runDicomTask(task: DicomTask, bytes: Uint8Array, config: Config): Promise<unknown> {
  return poolFor(config).runTask(task, bytes);
}

/** The images (or the encapsulated PDF) of `bytes`; throws a `DicomError` for a file that cannot be used. */
export async function extractDicomImages(
  bytes: Uint8Array,
  config: Config,
  options: ExtractOptions = {},
): Promise<DicomExtraction> {
  const extraction = await poolFor(config).extract(bytes);
  if (extraction.kind === 'none') return extraction;
  if (extraction.kind === 'pdf') {
    return {
      kind: 'pdf',
      transferSyntaxUid: extraction.transferSyntaxUid,
      pdf: Buffer.from(extraction.pdf.buffer, extraction.pdf.byteOffset, extraction.pdf.byteLength),
      ...(extraction.page === undefined ? {} : { page: rawOf(extraction.page) }),
      ...(extraction.pageError === undefined ? {} : { pageError: extraction.pageError }),
    };
  }
  const sharp = await loadSharp();
  const images: ExtractedImage[] = [];
  for (const frame of extraction.frames) {
    if ('jpeg' in frame) {
      const jpeg = Buffer.from(frame.jpeg.buffer, frame.jpeg.byteOffset, frame.jpeg.byteLength);
      const raw = await decodeStoredJpeg(sharp, jpeg, frame.frameNumber, options.previewSizePx);
      images.push({ frameNumber: frame.frameNumber, mimeType: 'image/jpeg', bytes: jpeg, raw });
      continue;
    }
    const raw = rawOf(frame);
    const input = sharp(raw.pixels, {
      raw: { width: raw.width, height: raw.height, channels: raw.channels },
    });
    // One grey channel stays one channel (sharp would write sRGB).
    const pipeline = raw.channels === 1 ? input.toColourspace('b-w') : input;
    images.push({
      frameNumber: frame.frameNumber,
      mimeType: extraction.isLossy ? 'image/jpeg' : 'image/png',
      bytes: await (
        extraction.isLossy
          ? pipeline.jpeg({ quality: JPEG_QUALITY })
          : pipeline.png({ compressionLevel: PNG_COMPRESSION_LEVEL })
      ).toBuffer(),
      raw,
    });
  }
  return {
    kind: 'images',
    transferSyntaxUid: extraction.transferSyntaxUid,
    numberOfFrames: extraction.numberOfFrames,
    images,
  };
}

/**
 * The pixels of a baseline JPEG frame kept as the file holds it, decoded by `sharp` (libjpeg), and
 * resized to `sizePx` on the longest side when given and larger, in the same pipeline: libvips decodes
 * and resizes in strips, so a large photograph is never held at full size. Decoded once with libjpeg's
 * warnings as errors, so that corrupt entropy-coded data refuses the frame (libjpeg alone would decode
 * it around the damage); a frame whose only warnings are of another kind is decoded again without them.
 *
 * The frame is decoded at full size even when resized: `sharp` would otherwise have libjpeg scale while
 * it decodes (shrink-on-load), and libjpeg's scaled decoding misses most of the corrupt data that the
 * full decoding warns about. Naming the pipeline's colour space (sRGB, which the decoded frame already
 * is) is what turns shrink-on-load off.
 */
async function decodeStoredJpeg(
  sharp: typeof Sharp,
  jpeg: Buffer,
  frameNumber: number,
  sizePx?: number,
): Promise<RawImage> {
  const decode = (failOn: 'warning' | 'error') => {
    const input = sharp(jpeg, { failOn });
    const sized =
      sizePx === undefined
        ? input
        : input
            .pipelineColourspace('srgb')
            .resize(sizePx, sizePx, { fit: 'inside', withoutEnlargement: true });
    return sized.removeAlpha().raw().toBuffer({ resolveWithObject: true });
  };
  let decoded: Awaited<ReturnType<typeof decode>>;
  try {
    decoded = await decode('warning').catch((error: unknown) => {
      const corrupt = CORRUPT_JPEG_WARNING.exec(messageOf(error))?.[0];
      if (corrupt !== undefined)
        throw new DicomError('decode-failed', `Frame ${frameNumber} is corrupt: ${corrupt}`);
      return decode('error');
    });
  } catch (error) {
    if (error instanceof DicomError) throw error;
    throw new DicomError(
      'decode-failed',
      `Frame ${frameNumber} is not a readable JPEG: ${messageOf(error).replace(/\s+/g, ' ').slice(0, 300)}`,
    );
  }
  const { data, info } = decoded;
  return { pixels: data, width: info.width, height: info.height, channels: info.channels === 1 ? 1 : 3 };
}

function rawOf(frame: RenderedFrame): RawImage {
  return { pixels: frame.pixels, width: frame.width, height: frame.height, channels: frame.channels };
}

/** Stops every decoding thread of this process (shutdown, tests). */
export async function closeDicomPools(): Promise<void> {
  const closing = [...pools.values()];
  pools.clear();
  await Promise.all(closing.map((pool) => pool.close()));
}
