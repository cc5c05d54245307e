import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import sharp from 'sharp';
import { THUMBNAIL_SIZES_PX, makeThumbnails } from './make-thumbnails.ts';

const OPTIONS = { maxDecodeBytes: 256 * 1024 * 1024 };

/** A colour photograph-like image: gradients with fine stripes, `width` x `height`, RGB. */
function pattern(width: number, height: number): Buffer {
  const pixels = Buffer.alloc(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const at = (y * width + x) * 3;
      pixels[at] = (x * 255) / width;
      pixels[at + 1] = (y * 255) / height;
      pixels[at + 2] = ((x >> 3) + (y >> 3)) % 2 === 0 ? 200 : 40;
    }
  }
  return pixels;
}

/**
 * A thumbnail as one pipeline from the full image per size makes it (decode, orient, resize, flatten on
 * white, JPEG): what the thumbnails made from one reduced decoding must look like.
 */
function referenceThumbnail(input: Buffer, sizePx: number, raw?: sharp.CreateRaw): Promise<Buffer> {
  return sharp(input, raw === undefined ? {} : { raw })
    .rotate()
    .resize(sizePx, sizePx, { fit: 'inside', withoutEnlargement: true })
    .flatten({ background: '#ffffff' })
    .jpeg({ quality: 80 })
    .toBuffer();
}

/** Mean absolute difference per sample and the largest difference of the channel means of two JPEGs. */
async function compare(ours: Buffer, reference: Buffer) {
  const a = await sharp(ours).raw().toBuffer({ resolveWithObject: true });
  const b = await sharp(reference).raw().toBuffer({ resolveWithObject: true });
  assert.deepEqual([a.info.width, a.info.height], [b.info.width, b.info.height]);
  assert.equal(a.info.channels, b.info.channels);
  let sum = 0;
  const channels = a.info.channels;
  const means = Array.from({ length: channels }, () => [0, 0]);
  for (let i = 0; i < a.data.length; i++) {
    sum += Math.abs(a.data[i]! - b.data[i]!);
    means[i % channels]![0]! += a.data[i]!;
    means[i % channels]![1]! += b.data[i]!;
  }
  const pixels = a.data.length / channels;
  return {
    meanAbs: sum / a.data.length,
    channelMeanDiff: Math.max(...means.map(([x, y]) => Math.abs(x! - y!) / pixels)),
  };
}

describe('makeThumbnails', () => {
  const cases: [
    string,
    () => Promise<{
      input: Buffer | Parameters<typeof makeThumbnails>[0];
      ref: Buffer;
      raw?: sharp.CreateRaw;
    }>,
  ][] = [
    [
      'a 2000 x 1500 JPEG',
      async () => {
        const jpeg = await sharp(pattern(2000, 1500), { raw: { width: 2000, height: 1500, channels: 3 } })
          .jpeg({ quality: 90 })
          .toBuffer();
        return { input: jpeg, ref: jpeg };
      },
    ],
    [
      'a PNG with alpha and EXIF orientation 6',
      async () => {
        const rgba = Buffer.alloc(900 * 700 * 4);
        const rgb = pattern(900, 700);
        for (let i = 0; i < 900 * 700; i++) {
          rgba.set(rgb.subarray(i * 3, i * 3 + 3), i * 4);
          rgba[i * 4 + 3] = i % 900 < 450 ? 255 : 96;
        }
        const png = await sharp(rgba, { raw: { width: 900, height: 700, channels: 4 } })
          .withMetadata({ orientation: 6 })
          .png()
          .toBuffer();
        return { input: png, ref: png };
      },
    ],
    [
      'raw pixels of 1200 x 900',
      async () => {
        const pixels = pattern(1200, 900);
        const raw = { width: 1200, height: 900, channels: 3 } as const;
        return { input: { pixels, ...raw }, ref: pixels, raw };
      },
    ],
  ];
  for (const [name, build] of cases) {
    it(`makes thumbnails of ${name} that look like a fresh pipeline per size`, async () => {
      const { input, ref, raw } = await build();
      const thumbnails = await makeThumbnails(input, OPTIONS);
      for (const size of ['small', 'medium', 'large'] as const) {
        const reference = await referenceThumbnail(ref, THUMBNAIL_SIZES_PX[size], raw);
        const { meanAbs, channelMeanDiff } = await compare(thumbnails[size], reference);
        // Two JPEG encodings of pixels resized by different steps: close, never equal.
        assert.ok(meanAbs <= 3, `${size}: mean difference ${meanAbs}`);
        assert.ok(channelMeanDiff <= 1, `${size}: channel means differ by ${channelMeanDiff}`);
      }
      // Each is its own buffer.
      assert.notEqual(thumbnails.small.buffer, thumbnails.large.buffer);
    });
  }

  it('makes greyscale JPEGs of one-channel pixels that look like an sRGB pipeline per size', async () => {
    const width = 512;
    const height = 400;
    const pixels = Buffer.alloc(width * height);
    for (let i = 0; i < pixels.length; i++) {
      const [x, y] = [i % width, Math.floor(i / width)];
      pixels[i] = ((x >> 3) + (y >> 3)) % 2 === 0 ? (x * 255) / width : 30 + (y * 200) / height;
    }
    const raw = { width, height, channels: 1 } as const;
    const thumbnails = await makeThumbnails({ pixels, ...raw }, OPTIONS);
    for (const size of ['small', 'medium', 'large'] as const) {
      const meta = await sharp(thumbnails[size]).metadata();
      assert.deepEqual([meta.format, meta.channels, meta.space], ['jpeg', 1, 'b-w'], size);
      const expectedPx = Math.min(THUMBNAIL_SIZES_PX[size], width);
      assert.equal(meta.width, expectedPx, size);
      // The same look as a colour thumbnail of the same pixels, read back as grey.
      const reference = await referenceThumbnail(pixels, THUMBNAIL_SIZES_PX[size], raw);
      const ours = await sharp(thumbnails[size]).toColourspace('b-w').raw().toBuffer();
      const theirs = await sharp(reference).toColourspace('b-w').raw().toBuffer();
      assert.equal(ours.length, theirs.length, size);
      let sum = 0;
      for (let i = 0; i < ours.length; i++) sum += Math.abs(ours[i]! - theirs[i]!);
      assert.ok(sum / ours.length <= 3, `${size}: mean difference ${sum / ours.length}`);
    }
  });

  it('refuses an image that is not one', async () => {
    await assert.rejects(makeThumbnails(Buffer.from('not an image at all'), OPTIONS));
  });
});
