/**
 * `MAKE_THUMBNAILS`: small, medium and large JPEG thumbnails of every image payload of the request, into
 * `thumbnail_small_blob` / `_medium_blob` / `_large_blob`. An image is decoded once, oriented, reduced to
 * the large size and flattened on white; each size is then encoded from those pixels by its own `sharp`
 * pipeline into its own buffer (the original reused one output buffer, so larger thumbnails carried the
 * smaller ones in front). `sharp` works on its own thread pool; the images are made in `prepare`, so
 * on SQLite the write transaction only stores them. An image `sharp` cannot read is skipped with a log
 * line (retrying cannot help); an image that already has thumbnails (one extracted from DICOM by
 * `EXTRACT_IMAGE`) is left as it is.
 */
import type { RawImage } from '../../dicom/index.ts';
import { loadSharp } from '../../dicom/index.ts';
import { defineRoutine } from './catalog.ts';
import {
  findPayloads,
  isImageMime,
  readPayloadBytes,
  updateAttachmentData,
} from '../../attachment-data/index.ts';

/** Longest side of each thumbnail, in pixels (never enlarged). */
export const THUMBNAIL_SIZES_PX = { small: 128, medium: 320, large: 640 } as const;

export interface Thumbnails {
  readonly small: Buffer;
  readonly medium: Buffer;
  readonly large: Buffer;
}

/**
 * The three JPEG thumbnails of `image` (an encoded image, or raw pixels with no orientation or alpha),
 * each encoded from the same decoded pixels into a buffer of its own. Huffman tables are the standard
 * ones (`optimiseCoding` off): a few percent more bytes for a third less encoding time. One-channel
 * raw pixels give greyscale JPEGs.
 */
export async function makeThumbnails(image: Buffer | RawImage): Promise<Thumbnails> {
  const sharp = await loadSharp();
  const large = THUMBNAIL_SIZES_PX.large;
  let pixels: Uint8Array;
  let raw: { width: number; height: number; channels: 1 | 2 | 3 | 4 };
  if (Buffer.isBuffer(image)) {
    const decoded = await sharp(image, { failOn: 'error', limitInputPixels: 100_000_000 })
      .rotate()
      .resize(large, large, { fit: 'inside', withoutEnlargement: true })
      .flatten({ background: '#ffffff' })
      .raw()
      .toBuffer({ resolveWithObject: true });
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
    make(large),
  ]);
  return { small, medium, large: largeThumbnail };
}

export const makeThumbnailsRoutine = defineRoutine<{ id: number; thumbnails: Thumbnails }[]>({
  name: 'MAKE_THUMBNAILS',
  timeoutMs: 120_000,
  retry: 'backoff',
  prepare: async (ctx) => {
    const images = (await findPayloads(ctx.db, ctx.routine.request_id)).filter(
      (p) => isImageMime(p.mime_type) && !p.hasThumbnails,
    );
    const made: { id: number; thumbnails: Thumbnails }[] = [];
    for (const image of images) {
      try {
        made.push({
          id: image.id,
          thumbnails: await makeThumbnails(await readPayloadBytes(ctx.db, image.id)),
        });
      } catch {
        ctx.log(`attachment_data ${image.id}: not a readable image, no thumbnails`);
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
