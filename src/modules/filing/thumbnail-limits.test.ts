import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setImmediate } from 'node:timers/promises';
import sharp from 'sharp';
import { createInstitution, createPatient, createUser } from '../../../test/factories.ts';
import type { TestUser } from '../../../test/factories.ts';
import { addIdentifier, createIdentifierType } from '../../../test/factories-patient.ts';
import {
  attachmentsByMnemonic,
  executionsOf,
  routinesOf,
  submitToQueue,
} from '../../../test/factories-queue.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import type { QueueEngine } from '../request-queue/index.ts';
import { createQueueEngine } from '../request-queue/index.ts';
import { defaultRoutineCatalog } from './index.ts';
import { ThumbnailRefusedError, makeThumbnails, thumbnailDecodeLane } from './make-thumbnails.ts';

const MiB = 1024 * 1024;

/** A flat RGBA image of `size` x `size`, for the variants below. */
function square(size: number) {
  return sharp({
    create: { width: size, height: size, channels: 4, background: { r: 10, g: 200, b: 30, alpha: 0.5 } },
  });
}

let hostile: Promise<Buffer> | undefined;
/**
 * The attack: about 1.2 MB of PNG that is 9999 x 9999 pixels (just under sharp's 100-megapixel limit),
 * 16-bit RGBA, interlaced (libvips decodes Adam7 whole: 763 MiB) and EXIF orientation 6.
 */
function hostilePng(): Promise<Buffer> {
  return (hostile ??= square(9999)
    .toColourspace('rgb16')
    .withMetadata({ orientation: 6 })
    .png({ progressive: true, compressionLevel: 9 })
    .toBuffer());
}

describe('makeThumbnails of an image decoded whole', () => {
  const limit = { maxDecodeBytes: 4 * MiB };

  it('refuses a progressive JPEG whose coefficients exceed the limit, and streams a baseline one of the same size', async () => {
    // 1500 x 1500 x 3 samples x 2 bytes = 12.9 MiB of coefficients held whole.
    const progressive = await square(1500).removeAlpha().jpeg({ progressive: true }).toBuffer();
    await assert.rejects(
      makeThumbnails(progressive, limit),
      (error) =>
        error instanceof ThumbnailRefusedError &&
        error.message ===
          'a progressive JPEG of 1500 x 1500 is decoded whole (13 MiB), over THUMBNAIL_MAX_DECODE_MB (4)',
    );
    const baseline = await square(1500).removeAlpha().jpeg().toBuffer();
    const thumbnails = await makeThumbnails(baseline, limit);
    assert.equal((await sharp(thumbnails.large).metadata()).width, 640);
  });

  it('refuses an interlaced PNG and a GIF over the limit, and makes a non-interlaced PNG of the same size', async () => {
    const interlaced = await square(1200).png({ progressive: true }).toBuffer();
    await assert.rejects(makeThumbnails(interlaced, limit), {
      name: 'ThumbnailRefusedError',
      message:
        'an interlaced PNG of 1200 x 1200, 4 channels of 8 bits is decoded whole (6 MiB), over THUMBNAIL_MAX_DECODE_MB (4)',
    });
    const gif = await square(1200).gif().toBuffer();
    await assert.rejects(makeThumbnails(gif, limit), {
      name: 'ThumbnailRefusedError',
      message: 'a GIF of 1200 x 1200 is decoded whole (6 MiB), over THUMBNAIL_MAX_DECODE_MB (4)',
    });
    const plain = await square(1200).png().toBuffer();
    const thumbnails = await makeThumbnails(plain, limit);
    assert.equal((await sharp(thumbnails.large).metadata()).width, 640);
    // Within the limit, an interlaced PNG gets thumbnails.
    const small = await square(600).png({ progressive: true }).toBuffer();
    assert.equal((await sharp((await makeThumbnails(small, limit)).large).metadata()).width, 600);
  });

  it('refuses a tiled TIFF whose two rows of tiles exceed the limit, and streams the same image in strips', async () => {
    // 2000 x 512 rows x 2 x 3 channels = 5.9 MiB held by the tile cache.
    const tiled = await square(2000)
      .removeAlpha()
      .tiff({ tile: true, tileWidth: 512, tileHeight: 512 })
      .toBuffer();
    await assert.rejects(makeThumbnails(tiled, limit), {
      name: 'ThumbnailRefusedError',
      message:
        'a TIFF of 2000 x 2000, 3 channels of 8 bits is decoded two rows of 512-pixel tiles at a time (6 MiB), over THUMBNAIL_MAX_DECODE_MB (4)',
    });
    const strips = await square(2000).removeAlpha().tiff().toBuffer();
    assert.equal((await sharp((await makeThumbnails(strips, limit)).large).metadata()).width, 640);
  });

  it('refuses a format that thumbnails are not made of, whatever the payload says it is', async () => {
    const svg = Buffer.from(
      '<svg xmlns="http://www.w3.org/2000/svg" width="4000" height="4000"><rect width="10" height="10"/></svg>',
    );
    await assert.rejects(makeThumbnails(svg, limit), {
      name: 'ThumbnailRefusedError',
      message: 'a svg image: not a format thumbnails are made of',
    });
  });

  it('decodes the encoded images of parallel calls one at a time', async () => {
    const jpeg = await square(2000).removeAlpha().jpeg().toBuffer();
    const calls = [1, 2, 3].map(() => makeThumbnails(jpeg, limit));
    let isSeen = false;
    let mostRunning = 0;
    const done = Promise.all(calls).finally(() => (isSeen = true));
    // Watch the lane while the three run: one decodes while the others wait their turn.
    let wasQueued = false;
    while (!isSeen) {
      mostRunning = Math.max(mostRunning, thumbnailDecodeLane.running);
      wasQueued ||= thumbnailDecodeLane.waiting > 0;
      await setImmediate();
    }
    const thumbnails = await done;
    assert.equal(mostRunning, 1);
    assert.ok(wasQueued, 'the others waited for the lane');
    assert.equal(thumbnails.length, 3);
    assert.deepEqual([thumbnailDecodeLane.running, thumbnailDecodeLane.waiting], [0, 0]);
  });
});

forEachDialect((dialect) => {
  describe(`MAKE_THUMBNAILS within THUMBNAIL_MAX_DECODE_MB (${dialect})`, () => {
    let app: TestApp;
    let user: TestUser;
    let engine: QueueEngine;

    before(async () => {
      app = await startTestApp(dialect);
      user = await createUser(app.db);
      engine = createQueueEngine({
        database: app.database,
        config: app.config,
        catalog: defaultRoutineCatalog,
      });
      const institutionId = await createInstitution(app.db);
      const typeId = await createIdentifierType(app.db, { institution_id: institutionId });
      const patient = await createPatient(app.db, {
        firstName: 'Jane',
        lastName: 'Doe',
        patient: { dob: '1970-03-15', gender: 'F' },
      });
      await addIdentifier(app.db, patient.patientId, typeId, '0012345');
    });
    after(async () => {
      await app.close();
    });

    async function drain(): Promise<string[]> {
      const ran: string[] = [];
      for (let i = 0; i < 20; i++) {
        const outcome = await engine.step();
        if (outcome.kind !== 'ran') return ran;
        ran.push(`${outcome.routineName}:${outcome.status}`);
      }
      throw new Error(`the queue did not drain: ${ran.join(', ')}`);
    }

    it('files a 10000-pixel 16-bit interlaced PNG with EXIF orientation without thumbnails, the reason logged, and thumbnails the normal image beside it', async () => {
      const photo = await sharp({
        create: { width: 900, height: 600, channels: 3, background: { r: 200, g: 30, b: 30 } },
      })
        .png()
        .toBuffer();
      const form = new FormData();
      form.append('hos_num', '12345');
      form.append('dob', '1970-03-15');
      form.append('photo', new Blob([new Uint8Array(photo)], { type: 'image/png' }), 'photo.png');
      form.append('scan', new Blob([new Uint8Array(await hostilePng())], { type: 'image/png' }), 'scan.png');
      const response = await submitToQueue(app, user.authorization, {
        query: 'request_type=imaging',
        body: form,
      });
      assert.equal(response.status, 200, await response.clone().text());
      const requestId = ((await response.json()) as { request_id: number }).request_id;

      const ran = await drain();
      assert.ok(ran.includes('MAKE_THUMBNAILS:COMPLETE'), ran.join(', '));
      assert.ok(ran.includes('ATTACH_TO_EVENT:COMPLETE'), ran.join(', '));
      const rows = await attachmentsByMnemonic(app.db, requestId);
      const scan = rows.get('scan')!;
      const normal = rows.get('photo')!;
      assert.deepEqual(
        [scan.thumbnail_small_blob, scan.thumbnail_medium_blob, scan.thumbnail_large_blob],
        [null, null, null],
      );
      assert.ok(scan.blob_data, 'the image itself is kept and filed');
      for (const [blob, sidePx] of [
        [normal.thumbnail_small_blob, 128],
        [normal.thumbnail_medium_blob, 320],
        [normal.thumbnail_large_blob, 640],
      ] as const) {
        assert.ok(blob);
        const meta = await sharp(blob).metadata();
        assert.deepEqual([meta.format, Math.max(meta.width, meta.height)], ['jpeg', sidePx]);
      }
      const routine = (await routinesOf(app.db, requestId)).find(
        (r) => r.routine_name === 'MAKE_THUMBNAILS',
      )!;
      const log = (await executionsOf(app.db, routine.id)).at(-1)?.log_text ?? '';
      assert.match(
        log,
        new RegExp(
          `attachment_data ${scan.id}: no thumbnails: an interlaced PNG of 9999 x 9999, 4 channels of 16 bits is decoded whole \\(763 MiB\\), over THUMBNAIL_MAX_DECODE_MB \\(256\\)`,
        ),
      );
      assert.match(log, new RegExp(`attachment_data ${normal.id}: thumbnails made`));
    });
  });
});
