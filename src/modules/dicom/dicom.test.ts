import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { deflateRawSync } from 'node:zlib';
import sharp from 'sharp';
import { loadConfig } from '../../config.ts';
import { CORPUS_SKIP_MESSAGE, corpusTestFiles } from '../../../test/dicom-corpus.ts';
import { buildPart10File, dicomElement } from '../../../test/factories-queue.ts';
import { DicomError } from './dicom-error.ts';
import type { DicomErrorCode } from './dicom-error.ts';
import { closeDicomPools, extractDicomImages, readDicomFile } from './dicom-service.ts';
import { pickFrames } from './extract.ts';
import type { ScanLimits } from './part10-scan.ts';
import { scanPart10 } from './part10-scan.ts';

const LIMITS: ScanLimits = { maxElements: 1000, maxDepth: 8, maxBytes: 1024 * 1024 };
const text = (s: string) => Buffer.from(s, 'latin1');
const us = (value: number) => {
  const b = Buffer.alloc(2);
  b.writeUInt16LE(value, 0);
  return b;
};
const tag = (group: number, element: number, length: number) => {
  const b = Buffer.alloc(8);
  b.writeUInt16LE(group, 0);
  b.writeUInt16LE(element, 2);
  b.writeUInt32LE(length, 4);
  return b;
};
const ITEM_UNDEFINED = tag(0xfffe, 0xe000, 0xffffffff);
const ITEM_END = tag(0xfffe, 0xe00d, 0);
const SEQUENCE_END = tag(0xfffe, 0xe0dd, 0);
const sequenceStart = () => dicomElement(0x0040, 0xa730, 'SQ', Buffer.alloc(0), 0xffffffff);

/** A small native 16-bit monochrome image. */
function nativeImage(rows: number, columns: number, pixelBytes = rows * columns * 2): Buffer {
  return buildPart10File(
    Buffer.concat([
      dicomElement(0x0028, 0x0002, 'US', us(1)),
      dicomElement(0x0028, 0x0004, 'CS', text('MONOCHROME2')),
      dicomElement(0x0028, 0x0010, 'US', us(rows)),
      dicomElement(0x0028, 0x0011, 'US', us(columns)),
      dicomElement(0x0028, 0x0100, 'US', us(16)),
      dicomElement(0x0028, 0x0101, 'US', us(16)),
      dicomElement(0x0028, 0x0103, 'US', us(0)),
      dicomElement(0x7fe0, 0x0010, 'OW', Buffer.alloc(pixelBytes, 7)),
    ]),
  );
}

function assertCause(bytes: Buffer, code: DicomErrorCode, message: RegExp, limits = LIMITS): void {
  assert.throws(
    () => scanPart10(bytes, limits),
    (error) => error instanceof DicomError && error.code === code && message.test(error.message),
  );
}

describe('scanPart10', () => {
  it('accepts a well-formed file and finds its pixel data', () => {
    const scan = scanPart10(nativeImage(4, 4), LIMITS);
    assert.equal(scan.transferSyntax.name, 'Explicit VR Little Endian');
    assert.equal(scan.pixelData?.isEncapsulated, false);
  });

  it('names a missing DICM prefix, a missing or unknown transfer syntax and a bad VR', () => {
    assertCause(Buffer.from('plain text, no DICOM here'), 'no-dicm-prefix', /No DICM prefix at byte 128/);
    const metaWithoutSyntax = Buffer.concat([
      Buffer.alloc(128),
      text('DICM'),
      dicomElement(0x0002, 0x0001, 'OB', Buffer.from([0, 1])),
      dicomElement(0x0008, 0x0060, 'CS', text('OP')),
    ]);
    assertCause(metaWithoutSyntax, 'missing-transfer-syntax', /no Transfer Syntax UID \(0002,0010\)/);
    assertCause(
      buildPart10File(Buffer.alloc(0), { transferSyntaxUid: '1.2.3.4.5' }),
      'unsupported-transfer-syntax',
      /1\.2\.3\.4\.5 \(unknown\)/,
    );
    const badVr = dicomElement(0x0010, 0x0010, 'PN', text('X^Y'));
    badVr.write('xs', 4, 'latin1');
    assertCause(buildPart10File(badVr), 'bad-vr', /Bad VR 'xs' for element \(0010,0010\)/);
  });

  it('fails a file whose pixel data runs past its end', () => {
    const whole = nativeImage(8, 8);
    assertCause(
      whole.subarray(0, whole.length - 10),
      'element-past-end',
      /\(7FE0,0010\) at byte \d+ declares 128 bytes, but only 118 remain/,
    );
  });

  it('fails a sequence that is never closed', () => {
    const open = Buffer.concat([
      sequenceStart(),
      ITEM_UNDEFINED,
      dicomElement(0x0008, 0x0100, 'SH', text('A1')),
    ]);
    assertCause(
      buildPart10File(open),
      'unterminated-sequence',
      /item \(0040,A730\) is not closed before the end of the file/,
    );
  });

  it('refuses more elements or deeper nesting than the limits, and a deflate bomb', () => {
    const many = Buffer.concat(
      Array.from({ length: 1200 }, (_, i) => dicomElement(0x0009, 0x1000 + i, 'LO', Buffer.alloc(0))),
    );
    assertCause(buildPart10File(many), 'too-many-elements', /more than 1000 elements/);
    const depth = 12;
    const nested = Buffer.concat([
      ...Array.from({ length: depth }, () => Buffer.concat([sequenceStart(), ITEM_UNDEFINED])),
      ...Array.from({ length: depth }, () => Buffer.concat([ITEM_END, SEQUENCE_END])),
    ]);
    assertCause(buildPart10File(nested), 'nesting-too-deep', /nested more than 8 deep/);
    assert.doesNotThrow(() => scanPart10(buildPart10File(nested), { ...LIMITS, maxDepth: depth }));
    const bomb = buildPart10File(deflateRawSync(Buffer.alloc(8 * 1024 * 1024)), {
      transferSyntaxUid: '1.2.840.10008.1.2.1.99',
    });
    assertCause(bomb, 'too-large', /inflates to more than 1048576 bytes/);
  });

  it('picks frames evenly, the middle one alone', () => {
    assert.deepEqual(pickFrames(15, 4), [0, 5, 9, 14]);
    assert.deepEqual(pickFrames(15, 1), [7]);
    assert.deepEqual(pickFrames(3, 16), [0, 1, 2]);
  });
});

describe('DICOM decoding threads', () => {
  after(() => closeDicomPools());

  it('stops a decode past its time limit and decodes the next file on a new thread', async () => {
    // A 32-megapixel 16-bit frame takes far longer than the shortest limit to render, whatever the load;
    // a 16 x 16 one is rendered well within the default limit.
    const shortest = loadConfig({ DICOM_DECODE_TIMEOUT_MS: '100', DICOM_WORKER_THREADS: '1' });
    await assert.rejects(
      extractDicomImages(nativeImage(4096, 8192), shortest),
      (error) =>
        error instanceof DicomError && error.code === 'timeout' && /longer than 100 ms/.test(error.message),
    );
    const next = await extractDicomImages(nativeImage(16, 16), loadConfig({ DICOM_WORKER_THREADS: '1' }));
    assert.equal(next.kind, 'images');
  });

  it('stops a read past its memory cap and reads the next file on a new thread', async () => {
    const config = loadConfig({
      DICOM_DECODE_MEMORY_MB: '64',
      DICOM_MAX_ELEMENTS: '5000000',
      DICOM_DECODE_TIMEOUT_MS: '50000',
      DICOM_WORKER_THREADS: '1',
    });
    const count = 4_000_000;
    const elements = Buffer.alloc(count * 8);
    for (let i = 0; i < count; i++) {
      elements.writeUInt16LE(0x0009 + 2 * Math.floor(i / 0xff00), i * 8);
      elements.writeUInt16LE(0x0100 + (i % 0xff00), i * 8 + 2);
      elements.write('LO', i * 8 + 4, 'latin1');
    }
    await assert.rejects(
      readDicomFile(buildPart10File(elements), config),
      (error) =>
        error instanceof DicomError &&
        error.code === 'out-of-memory' &&
        /more than 64 MiB/.test(error.message),
    );
    assert.equal((await readDicomFile(nativeImage(4, 4), config)).hasPixelData, true);
  });

  it('refuses a native frame shorter than it declares, before decoding', async () => {
    await assert.rejects(
      extractDicomImages(nativeImage(64, 64, 100), loadConfig({})),
      (error) => error instanceof DicomError && error.code === 'pixel-data-short',
    );
  });
});

describe('Extracted PNG', () => {
  after(() => closeDicomPools());

  it('holds exactly the rendered pixels, within 2% of the size zlib level 6 gives', async () => {
    // A 256 x 256 slice with smooth regions and noise, like a rendered CT slice.
    const side = 256;
    const stored = Buffer.alloc(side * side * 2);
    let seed = 7;
    for (let i = 0; i < side * side; i++) {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      const [x, y] = [i % side, Math.floor(i / side)];
      const body = ((x - 128) / 110) ** 2 + ((y - 128) / 90) ** 2 <= 1 ? 1200 + y * 2 : 0;
      stored.writeUInt16LE(body + (seed % 40), i * 2);
    }
    const file = buildPart10File(
      Buffer.concat([
        dicomElement(0x0028, 0x0002, 'US', us(1)),
        dicomElement(0x0028, 0x0004, 'CS', text('MONOCHROME2')),
        dicomElement(0x0028, 0x0010, 'US', us(side)),
        dicomElement(0x0028, 0x0011, 'US', us(side)),
        dicomElement(0x0028, 0x0100, 'US', us(16)),
        dicomElement(0x0028, 0x0101, 'US', us(12)),
        dicomElement(0x0028, 0x0102, 'US', us(11)),
        dicomElement(0x0028, 0x0103, 'US', us(0)),
        dicomElement(0x7fe0, 0x0010, 'OW', stored),
      ]),
    );
    const extraction = await extractDicomImages(file, loadConfig({}));
    assert.equal(extraction.kind, 'images');
    const [image] = extraction.images;
    assert.ok(image);
    assert.equal(image.mimeType, 'image/png');
    const decoded = await sharp(image.bytes).toColourspace('b-w').raw().toBuffer({ resolveWithObject: true });
    assert.deepEqual([decoded.info.width, decoded.info.height, decoded.info.channels], [side, side, 1]);
    assert.ok(decoded.data.equals(Buffer.from(image.raw.pixels)), 'the PNG holds the rendered pixels');
    const raw = { width: side, height: side, channels: 1 } as const;
    const level6 = await sharp(Buffer.from(image.raw.pixels), { raw })
      .toColourspace('b-w')
      .png({ compressionLevel: 6 })
      .toBuffer();
    assert.ok(
      image.bytes.length <= level6.length * 1.02,
      `PNG of ${image.bytes.length} bytes against ${level6.length} at zlib level 6`,
    );
  });
});

describe('Encapsulated PDF', () => {
  const hasTools = ['chromium', 'pdf2dcm'].every((tool) => {
    try {
      execFileSync('which', [tool], { stdio: 'pipe' });
      return true;
    } catch {
      return false;
    }
  });
  const work = mkdtempSync(path.join(tmpdir(), 'cra-dicom-pdf-'));
  after(async () => {
    await closeDicomPools();
    rmSync(work, { recursive: true, force: true });
  });

  it(
    'keeps the PDF as it was and renders page 1',
    { skip: hasTools ? false : 'chromium or pdf2dcm (dcmtk) is not installed' },
    async () => {
      const pdfFile = path.join(work, 'report.pdf');
      const dicomFile = path.join(work, 'report.dcm');
      execFileSync(
        'chromium',
        [
          '--headless',
          '--no-sandbox',
          '--disable-gpu',
          '--no-pdf-header-footer',
          `--print-to-pdf=${pdfFile}`,
          'data:text/html,<h1 style="font-size:120px">Visual field</h1>',
        ],
        { stdio: 'pipe', timeout: 60_000 },
      );
      execFileSync('pdf2dcm', [pdfFile, dicomFile], { stdio: 'pipe' });
      const extraction = await extractDicomImages(readFileSync(dicomFile), loadConfig({}));
      assert.equal(extraction.kind, 'pdf');
      assert.ok(extraction.pdf.equals(readFileSync(pdfFile)), 'the PDF bytes are those pdf2dcm wrapped');
      assert.equal(extraction.pageError, undefined);
      const page = extraction.page!;
      assert.equal(Math.max(page.width, page.height), 640);
      assert.ok(page.height > page.width, 'an A4/Letter page is portrait');
      const stats = await sharp(page.pixels, {
        raw: { width: page.width, height: page.height, channels: page.channels },
      }).stats();
      assert.ok(stats.channels[0]!.min < 64, 'the heading is drawn in dark ink');
      assert.ok(stats.channels[0]!.max > 240, 'on a white page');
    },
  );
});

describe('VOI LUT Sequence', () => {
  const corpus = corpusTestFiles();
  const work = mkdtempSync(path.join(tmpdir(), 'cra-dicom-voi-'));
  after(async () => {
    await closeDicomPools();
    rmSync(work, { recursive: true, force: true });
  });

  it(
    'maps a window-less monochrome image through its LUT as dcmtk does',
    { skip: corpus === undefined ? CORPUS_SKIP_MESSAGE : false },
    async () => {
      // MR_small with its window replaced by a square-root LUT (dcmtk writes OW values given in hex).
      const file = path.join(work, 'voi.dcm');
      copyFileSync(path.join(corpus!, 'MR_small.dcm'), file);
      const lut = Array.from({ length: 2048 }, (_, i) =>
        Math.round(255 * Math.sqrt(i / 2047))
          .toString(16)
          .padStart(4, '0'),
      );
      execFileSync('dcmodify', [
      '-nb',
      '-e', '(0028,1050)',
      '-e', '(0028,1051)',
      '-i', '(0028,3010)[0].(0028,3002)=2048\\0\\8',
      '-i', `(0028,3010)[0].(0028,3006)=${lut.join('\\')}`,
      file,
    ]); // prettier-ignore
      const reference = path.join(work, 'voi.png');
      execFileSync('dcm2pnm', ['+on', '+Wl', '1', file, reference], { stdio: 'pipe' });
      const expected = await sharp(reference).toColourspace('b-w').raw().toBuffer();
      const extraction = await extractDicomImages(readFileSync(file), loadConfig({}));
      assert.equal(extraction.kind, 'images');
      assert.ok(Buffer.from(extraction.images[0]!.raw.pixels).equals(expected));
    },
  );

  it(
    'extracts at most DICOM_MAX_FRAMES frames, evenly spaced, and fewer under DICOM_MAX_PIXELS',
    { skip: corpus === undefined ? CORPUS_SKIP_MESSAGE : false },
    async () => {
      const bytes = readFileSync(path.join(corpus!, 'rtdose.dcm'));
      const byFrames = await extractDicomImages(bytes, loadConfig({ DICOM_MAX_FRAMES: '4' }));
      assert.equal(byFrames.kind, 'images');
      assert.equal(byFrames.numberOfFrames, 15);
      assert.deepEqual(
        byFrames.images.map((i) => i.frameNumber),
        [1, 6, 10, 15],
      );
      // 10 x 10 pixels a frame: 250 pixels allow two.
      const byPixels = await extractDicomImages(bytes, loadConfig({ DICOM_MAX_PIXELS: '250' }));
      assert.equal(byPixels.kind, 'images');
      assert.deepEqual(
        byPixels.images.map((i) => i.frameNumber),
        [1, 15],
      );
    },
  );
});

describe('Corrupt JPEG frames', () => {
  const hasTools = ['img2dcm', 'dcmj2pnm'].every((tool) => {
    try {
      execFileSync('which', [tool], { stdio: 'pipe' });
      return true;
    } catch {
      return false;
    }
  });
  const work = mkdtempSync(path.join(tmpdir(), 'cra-dicom-corrupt-'));
  after(async () => {
    await closeDicomPools();
    rmSync(work, { recursive: true, force: true });
  });

  /** A JPEG Baseline DICOM file made by img2dcm from a JPEG that sharp encodes from a colour pattern. */
  async function jpegDicom(name: string, isGrey: boolean): Promise<Buffer> {
    const [width, height] = [256, 192];
    const pixels = Buffer.alloc(width * height * 3);
    for (let y = 0; y < height; y++) {
      for (let x = 0; x < width; x++) {
        pixels.set([x, y, (x * y) & 255], (y * width + x) * 3);
      }
    }
    const image = sharp(pixels, { raw: { width, height, channels: 3 } });
    const jpegFile = path.join(work, `${name}.jpg`);
    await (isGrey ? image.toColourspace('b-w') : image).jpeg({ quality: 90 }).toFile(jpegFile);
    const dicomFile = path.join(work, `${name}.dcm`);
    execFileSync('img2dcm', [jpegFile, dicomFile], { stdio: 'pipe' });
    return readFileSync(dicomFile);
  }

  /**
   * `file` with 600 bytes of its entropy-coded data (after the SOS segment) zeroed: no marker is made, so
   * libjpeg decodes the frame to the end and only warns.
   */
  function corrupted(file: Buffer, name: string): Buffer {
    const bytes = Buffer.from(file);
    const sos = bytes.indexOf(Buffer.from([0xff, 0xda]));
    const dataStart = sos + 2 + bytes.readUInt16BE(sos + 2);
    bytes.fill(0, dataStart + 100, dataStart + 700);
    const out = path.join(work, `${name}-corrupt.dcm`);
    writeFileSync(out, bytes);
    // dcmtk's decoder (libjpeg) warns about the same data.
    const dcmtk = spawnSync('dcmj2pnm', [out, path.join(work, `${name}.pnm`)], { encoding: 'utf8' });
    assert.match(dcmtk.stderr, /Corrupt JPEG data/);
    return bytes;
  }

  for (const [name, isGrey, stored] of [
    ['colour', false, 'kept as the file holds it'],
    ['grey', true, 'rendered'],
  ] as const) {
    it(
      `refuses a ${name} frame (${stored}) whose entropy-coded data is corrupt, naming the decoder's warning`,
      { skip: hasTools ? false : 'img2dcm or dcmj2pnm (dcmtk) is not installed' },
      async () => {
        const config = loadConfig({});
        const file = await jpegDicom(name, isGrey);
        const sound = await extractDicomImages(file, config);
        assert.equal(sound.kind, 'images');
        assert.equal(sound.images.length, 1);
        await assert.rejects(extractDicomImages(corrupted(file, name), config), (error: unknown) => {
          assert.ok(error instanceof DicomError, String(error));
          assert.equal(error.code, 'decode-failed');
          assert.match(error.message, /^Frame 1 is corrupt: (Corrupt JPEG data|Premature end of JPEG file)/);
          return true;
        });
      },
    );
  }

  it(
    'decodes a stored JPEG frame reduced to previewSizePx, with the pixels of the full decoding resized, and still refuses a corrupt one',
    { skip: hasTools ? false : 'img2dcm or dcmj2pnm (dcmtk) is not installed' },
    async () => {
      const config = loadConfig({});
      const file = await jpegDicom('reduced', false);
      const full = await extractDicomImages(file, config);
      const reduced = await extractDicomImages(file, config, { previewSizePx: 64 });
      assert.equal(full.kind, 'images');
      assert.equal(reduced.kind, 'images');
      const [fullImage, reducedImage] = [full.images[0]!, reduced.images[0]!];
      // The stored frame is the same either way; only the decoded pixels are smaller.
      assert.ok(reducedImage.bytes.equals(fullImage.bytes));
      assert.equal(reducedImage.mimeType, 'image/jpeg');
      const raw = reducedImage.raw;
      assert.deepEqual([raw.width, raw.height, raw.channels], [64, 48, 3]);
      assert.deepEqual([fullImage.raw.width, fullImage.raw.height], [256, 192]);
      const expected = await sharp(fullImage.raw.pixels, {
        raw: { width: 256, height: 192, channels: 3 },
      })
        .resize(64, 48)
        .raw()
        .toBuffer();
      let worst = 0;
      for (let i = 0; i < expected.length; i++)
        worst = Math.max(worst, Math.abs(expected[i]! - raw.pixels[i]!));
      assert.ok(worst <= 2, `largest difference ${worst}`);
      // A frame no larger than previewSizePx is decoded at full size.
      const same = await extractDicomImages(file, config, { previewSizePx: 640 });
      assert.equal(same.kind, 'images');
      assert.ok(Buffer.from(same.images[0]!.raw.pixels).equals(Buffer.from(fullImage.raw.pixels)));
      await assert.rejects(
        extractDicomImages(corrupted(file, 'reduced'), config, { previewSizePx: 64 }),
        (error: unknown) => {
          assert.ok(error instanceof DicomError, String(error));
          assert.equal(error.code, 'decode-failed');
          assert.match(error.message, /^Frame 1 is corrupt: (Corrupt JPEG data|Premature end of JPEG file)/);
          return true;
        },
      );
    },
  );
});
