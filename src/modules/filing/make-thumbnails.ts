/**
 * `MAKE_THUMBNAILS`: small, medium and large JPEG thumbnails of every image payload of the request, into
 * `thumbnail_small_blob` / `_medium_blob` / `_large_blob`. An image is decoded once, oriented, reduced to
 * the large size and flattened on white; each size is then encoded from those pixels by its own `sharp`
 * pipeline into its own buffer (the original reused one output buffer, so larger thumbnails carried the
 * smaller ones in front). `sharp` works on its own thread pool; the images are made in `prepare`, so
 * on SQLite the write transaction only stores them. An image `sharp` cannot read is skipped with a log
 * line (retrying cannot help); an image that already has thumbnails (one extracted from DICOM by
 * `EXTRACT_IMAGE`) is left as it is.
 *
 * Memory: libvips streams a baseline JPEG, a non-interlaced PNG, WebP and a TIFF in strips row by row
 * while it shrinks them (JPEG and WebP shrink on load), so their decoding holds a few rows whatever the
 * image's size. It decodes an interlaced PNG, a progressive JPEG (its DCT coefficients) and a GIF frame
 * whole first, and reads a tiled TIFF two rows of tiles at a time: the bytes that holds follow from the
 * header (`metadata()`, read before any pixel; a TIFF's tile height from its first directory), and beyond
 * `THUMBNAIL_MAX_DECODE_MB` the image gets no thumbnails, with the reason in the routine's log (it is
 * filed all the same; the same bytes always give the same answer, so nothing is retried). EXIF
 * orientation costs nothing: `sharp` orients after the reduction. A payload whose bytes are another
 * format (SVG, HEIF, ...), whatever its declared type, is refused too. Node's worker `resourceLimits` do
 * not reach libvips's native memory, so the bound is the limit and the process's decodings of encoded
 * images run one at a time ({@link thumbnailDecodeLane}): parallel requests do not multiply it. Raw
 * pixels (a DICOM frame, already decoded within `DICOM_MAX_PIXELS`) do not take the lane.
 */
import type Sharp from 'sharp';
import type { Config } from '../../config.ts';
import type { RawImage } from '../dicom/index.ts';
import { loadSharp } from '../dicom/index.ts';
import { defineFilingRoutine } from './catalog.ts';
import {
  findPayloads,
  isImageMime,
  readPayloadBytes,
  updateAttachmentData,
} from '../attachment-data/index.ts';

/** Longest side of each thumbnail, in pixels (never enlarged). */
export const THUMBNAIL_SIZES_PX = { small: 128, medium: 320, large: 640 } as const;

/** Pixels of an encoded image `sharp` opens at all (its decompression-bomb limit). */
const MAX_INPUT_PIXELS = 100_000_000;

const MiB = 1024 * 1024;

export interface Thumbnails {
  readonly small: Buffer;
  readonly medium: Buffer;
  readonly large: Buffer;
}

export interface ThumbnailOptions {
  /** The most bytes the decoding of an encoded image that is decoded whole may hold. */
  readonly maxDecodeBytes: number;
}

/** The thumbnail options of `config` (`THUMBNAIL_MAX_DECODE_MB`). */
export function thumbnailOptionsOf(config: Pick<Config, 'thumbnailMaxDecodeMb'>): ThumbnailOptions {
  return { maxDecodeBytes: config.thumbnailMaxDecodeMb * MiB };
}

/** An encoded image that gets no thumbnails, and why (sizes and format only: no patient data). */
export class ThumbnailRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ThumbnailRefusedError';
  }
}

/**
 * How libvips decodes an image: row by row as it shrinks it (a few rows held), holding `bytes` at once
 * (`how`), or not at all here.
 */
type DecodePlan =
  | { readonly kind: 'streamed' }
  | { readonly kind: 'held'; readonly bytes: number; readonly what: string; readonly how: string }
  | { readonly kind: 'unsupported'; readonly what: string };

const SAMPLE_BYTES: Readonly<Record<string, number>> = {
  uchar: 1,
  char: 1,
  ushort: 2,
  short: 2,
  uint: 4,
  int: 4,
  float: 4,
  complex: 8,
  double: 8,
  dpcomplex: 16,
};

/**
 * The tile height of the first image of a TIFF file (tag 323, TileLength), 0 when it is in strips, or
 * undefined when its first directory cannot be read here (BigTIFF, a directory past the end).
 */
function tiffTileRowsOf(bytes: Buffer): number | undefined {
  if (bytes.length < 8) return undefined;
  const order = bytes.toString('latin1', 0, 2);
  if (order !== 'II' && order !== 'MM') return undefined;
  const isLittleEndian = order === 'II';
  const u16 = (at: number) => (isLittleEndian ? bytes.readUInt16LE(at) : bytes.readUInt16BE(at));
  const u32 = (at: number) => (isLittleEndian ? bytes.readUInt32LE(at) : bytes.readUInt32BE(at));
  if (u16(2) !== 42) return undefined;
  const directory = u32(4);
  if (directory + 2 > bytes.length) return undefined;
  const count = u16(directory);
  if (directory + 2 + count * 12 > bytes.length) return undefined;
  for (let i = 0; i < count; i++) {
    const at = directory + 2 + i * 12;
    if (u16(at) !== 323) continue;
    const type = u16(at + 2);
    return type === 3 ? u16(at + 8) : type === 4 ? u32(at + 8) : undefined;
  }
  return 0;
}

/**
 * The decode plan of `image` from its header (`sharp().metadata()`, which reads no pixels). Decoded
 * whole, an image holds width x height x channels x bytes per sample; a progressive JPEG holds a 16-bit
 * DCT coefficient per sample (at most: chroma subsampling lowers it); a GIF frame is RGBA; a tiled TIFF
 * is read through a cache of two rows of its tiles.
 */
function planDecode(meta: Sharp.Metadata, image: Buffer): DecodePlan {
  const format = meta.format;
  const pixels = meta.width * meta.height;
  const channels = meta.channels;
  const sampleBytes = SAMPLE_BYTES[meta.depth] ?? 8;
  const size = `${meta.width} x ${meta.height}`;
  const whole = 'decoded whole';
  if (format === 'jpeg') {
    return meta.isProgressive === true
      ? {
          kind: 'held',
          bytes: pixels * channels * 2,
          what: `a progressive JPEG of ${size}`,
          how: whole,
        }
      : { kind: 'streamed' };
  }
  if (format === 'png') {
    return meta.isProgressive === true
      ? {
          kind: 'held',
          bytes: pixels * channels * sampleBytes,
          what: `an interlaced PNG of ${size}, ${channels} channels of ${sampleBytes * 8} bits`,
          how: whole,
        }
      : { kind: 'streamed' };
  }
  if (format === 'webp') return { kind: 'streamed' };
  if (format === 'tiff') {
    const tileRows = tiffTileRowsOf(image);
    if (tileRows === 0) return { kind: 'streamed' };
    const what = `a TIFF of ${size}, ${channels} channels of ${sampleBytes * 8} bits`;
    return tileRows === undefined
      ? { kind: 'held', bytes: pixels * channels * sampleBytes, what, how: whole }
      : {
          kind: 'held',
          bytes: meta.width * Math.min(tileRows, meta.height) * 2 * channels * sampleBytes,
          what,
          how: `decoded two rows of ${tileRows}-pixel tiles at a time`,
        };
  }
  if (format === 'gif') {
    return { kind: 'held', bytes: pixels * 4, what: `a GIF of ${size}`, how: whole };
  }
  return { kind: 'unsupported', what: `a ${format} image` };
}

/**
 * Runs decodings of encoded images one at a time, in arrival order: the memory of a decoding is
 * bounded per image, and this keeps it from being multiplied by the routines running at once.
 */
function createDecodeLane() {
  let tail: Promise<unknown> = Promise.resolve();
  let running = 0;
  let waiting = 0;
  return {
    /** Decodings under way (0 or 1) and waiting for their turn. */
    get running() {
      return running;
    },
    get waiting() {
      return waiting;
    },
    run<T>(work: () => Promise<T>): Promise<T> {
      waiting += 1;
      const start = async () => {
        waiting -= 1;
        running += 1;
        try {
          return await work();
        } finally {
          running -= 1;
        }
      };
      const result = tail.then(start, start);
      tail = result.catch(() => undefined);
      return result;
    },
  };
}

/** The process's lane for decoding encoded images into thumbnails. */
export const thumbnailDecodeLane = createDecodeLane();

/** The first image of a file as `sharp` opens it for thumbnails. */
function openImage(sharp: typeof Sharp, image: Buffer): Sharp.Sharp {
  return sharp(image, { failOn: 'error', limitInputPixels: MAX_INPUT_PIXELS });
}

/**
 * The pixels of an encoded image reduced to the large size, oriented and flattened on white; refused
 * (a {@link ThumbnailRefusedError}) when its format is not one thumbnails are made of or its decoding
 * would hold more than `maxDecodeBytes`.
 */
async function decodeReduced(sharp: typeof Sharp, image: Buffer, options: ThumbnailOptions) {
  const meta = await openImage(sharp, image).metadata();
  const plan = planDecode(meta, image);
  if (plan.kind === 'unsupported') {
    throw new ThumbnailRefusedError(`${plan.what}: not a format thumbnails are made of`);
  }
  if (plan.kind === 'held' && plan.bytes > options.maxDecodeBytes) {
    throw new ThumbnailRefusedError(
      `${plan.what} is ${plan.how} (${Math.ceil(plan.bytes / MiB)} MiB), over THUMBNAIL_MAX_DECODE_MB (${Math.floor(options.maxDecodeBytes / MiB)})`,
    );
  }
  const large = THUMBNAIL_SIZES_PX.large;
  return openImage(sharp, image)
    .rotate()
    .resize(large, large, { fit: 'inside', withoutEnlargement: true })
    .flatten({ background: '#ffffff' })
    .raw()
    .toBuffer({ resolveWithObject: true });
}

/**
 * The three JPEG thumbnails of `image` (an encoded image, or raw pixels with no orientation or alpha),
 * each encoded from the same decoded pixels into a buffer of its own. Huffman tables are the standard
 * ones (`optimiseCoding` off): a few percent more bytes for a third less encoding time. One-channel
 * raw pixels give greyscale JPEGs. An encoded image is decoded in {@link thumbnailDecodeLane}, within
 * `options.maxDecodeBytes` (a {@link ThumbnailRefusedError} beyond it).
 */
export async function makeThumbnails(
  image: Buffer | RawImage,
  options: ThumbnailOptions,
): Promise<Thumbnails> {
  const sharp = await loadSharp();
  let pixels: Uint8Array;
  let raw: { width: number; height: number; channels: 1 | 2 | 3 | 4 };
  if (Buffer.isBuffer(image)) {
    const decoded = await thumbnailDecodeLane.run(() => decodeReduced(sharp, image, options));
    pixels = decoded.data;
    raw = { width: decoded.info.width, height: decoded.info.height, channels: decoded.info.channels };
  } else {
    pixels = image.pixels;
    raw = { width: image.width, height: image.height, channels: image.channels };
  }
  // Grey pixels (a rendered CT or X-ray frame) stay one channel: a greyscale JPEG, where sharp would
  // otherwise convert them to sRGB and encode three components (a quarter more CPU, larger files).
  const isGrey = raw.channels === 1;
  const make = (sizePx: number) => {
    const resized = sharp(pixels, { raw }).resize(sizePx, sizePx, {
      fit: 'inside',
      withoutEnlargement: true,
    });
    return (isGrey ? resized.toColourspace('b-w') : resized)
      .jpeg({ quality: 80, optimiseCoding: false })
      .toBuffer();
  };
  const [small, medium, largeThumbnail] = await Promise.all([
    make(THUMBNAIL_SIZES_PX.small),
    make(THUMBNAIL_SIZES_PX.medium),
    make(THUMBNAIL_SIZES_PX.large),
  ]);
  return { small, medium, large: largeThumbnail };
}

export const makeThumbnailsRoutine = defineFilingRoutine<{ id: number; thumbnails: Thumbnails }[]>({
  name: 'MAKE_THUMBNAILS',
  timeoutMs: 120_000,
  retry: 'backoff',
  prepare: async (ctx) => {
    const images = (await findPayloads(ctx.db, ctx.routine.request_id)).filter(
      (p) => isImageMime(p.mime_type) && !p.hasThumbnails,
    );
    const options = thumbnailOptionsOf(ctx.config);
    const made: { id: number; thumbnails: Thumbnails }[] = [];
    for (const image of images) {
      try {
        made.push({
          id: image.id,
          thumbnails: await makeThumbnails(await readPayloadBytes(ctx.db, image.id), options),
        });
      } catch (error) {
        // Both are permanent (the same bytes give the same answer): the image is filed without thumbnails.
        ctx.log(
          error instanceof ThumbnailRefusedError
            ? `attachment_data ${image.id}: no thumbnails: ${error.message}`
            : `attachment_data ${image.id}: not a readable image, no thumbnails`,
        );
      }
    }
    return made;
  },
  run: async (ctx, made) => {
    for (const { id, thumbnails } of made) {
      await updateAttachmentData(ctx.trx, ctx.dialect, { id }, { thumbnails }, ctx.stamp());
      ctx.log(`attachment_data ${id}: thumbnails made`);
    }
  },
});
