/**
 * The DICOM module against real files no one here wrote: every `.dcm` of pydicom's test corpus
 * (`DICOM_CORPUS_DIR`). A decodable file's frames are compared, pixel by pixel, with an independent
 * decoder: dcmtk (`dcm2pnm`, `dcmj2pnm` for JPEG, `dcml2pnm` for JPEG-LS) with the same VOI window, or
 * OpenJPEG's `opj_decompress` for JPEG 2000 (whose stored values this test windows as PS3.3 C.11.2.1.2
 * says), or the values the corpus documents (the SC_rgb colour bars). Every other file must be refused
 * with the cause listed here, or give no image with its reason.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import dicomParser from 'dicom-parser';
import sharp from 'sharp';
import type { Config } from '../../config.ts';
import { loadConfig } from '../../config.ts';
import { CORPUS_SKIP_MESSAGE, corpusTestFiles } from '../../../test/dicom-corpus.ts';
import type { DicomErrorCode, DicomExtraction, RawImage } from './index.ts';
import { DicomError, closeDicomPools, extractDicomImages } from './index.ts';

const corpus = corpusTestFiles();

/** Files that are not usable DICOM, with the cause the reader must give. */
const REFUSED: Readonly<Record<string, DicomErrorCode>> = {
  // Bare data sets, without the Part 10 preamble and file meta information.
  'ExplVR_BigEndNoMeta.dcm': 'no-dicm-prefix',
  'ExplVR_LitEndNoMeta.dcm': 'no-dicm-prefix',
  'no_meta.dcm': 'no-dicm-prefix',
  'rtstruct.dcm': 'no-dicm-prefix',
  // Truncated copies of MR_small and rtplan.
  'MR_truncated.dcm': 'element-past-end',
  'rtplan_truncated.dcm': 'element-past-end',
  'meta_missing_tsyntax.dcm': 'missing-transfer-syntax',
  // Declares JPEG Baseline (explicit VR) but its data set is encoded in implicit VR.
  'SC_rgb_jpeg.dcm': 'bad-vr',
  // Four codestream bytes replaced by a delimiter (pydicom's README: "almost certainly not a valid JPEG
  // anymore"): the SIZ segment declares a width of 3722445056 and a Profile of 0xFEFF. pydicom tests it only
  // for reading the encapsulated fragments; OpenJPEG refuses its header (checked below).
  'JPEG2000-embedded-sequence-delimiter.dcm': 'codestream-mismatch',
  // Private sequences and a Pixel Data of two bytes, without Rows or Columns.
  'nested_priv_SQ.dcm': 'bad-image-attributes',
};

/** Well-formed files without an image this module extracts, with the reason. */
const NO_IMAGE: Readonly<Record<string, string>> = {
  'UN_sequence.dcm': 'no-pixel-data',
  'empty_charset_LEI.dcm': 'no-pixel-data',
  'no_meta_group_length.dcm': 'no-pixel-data',
  'priv_SQ.dcm': 'no-pixel-data',
  'reportsi.dcm': 'no-pixel-data',
  'reportsi_with_empty_number_tags.dcm': 'no-pixel-data',
  'rtplan.dcm': 'no-pixel-data',
  'test-SR.dcm': 'no-pixel-data',
  'waveform_ecg.dcm': 'no-pixel-data',
  // 16- and 32-bit RGB: dcmjs-imaging renders the high bytes as separate samples.
  'SC_rgb_rle_16bit.dcm': 'unsupported-photometric',
  'SC_rgb_rle_16bit_2frame.dcm': 'unsupported-photometric',
  'SC_rgb_rle_32bit.dcm': 'unsupported-photometric',
  'SC_rgb_rle_32bit_2frame.dcm': 'unsupported-photometric',
};

/**
 * The SC_rgb colour bars, ten rows each, as pydicom's own tests check them (row, RGB). Used for the GDCM
 * lossy JPEG copy, whose frames are YCbCr-encoded (component ids 1,2,3) though the data set says RGB:
 * dcmtk decodes it without the colour transform, so its output is no reference there.
 */
const COLOUR_BARS: readonly [number, [number, number, number]][] = [
  [5, [255, 0, 0]],
  [15, [255, 128, 128]],
  [25, [0, 255, 0]],
  [35, [128, 255, 128]],
  [45, [0, 0, 255]],
  [55, [128, 128, 255]],
  [65, [0, 0, 0]],
  [75, [64, 64, 64]],
  [85, [192, 192, 192]],
  [95, [255, 255, 255]],
];
const DOCUMENTED_ONLY = new Set(['SC_rgb_jpeg_lossy_gdcm.dcm']);

const DERIVED: readonly { from: string; tool: string; args: string[]; name: string }[] = [
  {
    from: 'MR_small.dcm',
    tool: 'dcmcjpeg',
    args: ['+el', '+sv', '3'],
    name: 'MR_small_jpeg_process14_sv3.dcm',
  },
  {
    from: 'ExplVR_BigEnd.dcm',
    tool: 'dcmcjpeg',
    args: ['+el', '+sv', '2'],
    name: 'US_rgb_jpeg_process14_sv2.dcm',
  },
  { from: 'CT_small.dcm', tool: 'dcmcjpeg', args: ['+ee'], name: 'CT_small_jpeg_extended_12bit.dcm' },
  { from: 'ExplVR_BigEnd.dcm', tool: 'dcmcjpls', args: ['+en'], name: 'US_rgb_jpeg_ls_near_lossless.dcm' },
  // dcmtk writes 8-bit Pixel Data in Explicit VR Big Endian as OW: bytes swapped in 16-bit words.
  { from: 'SC_rgb_jpeg_dcmd.dcm', tool: 'dcmconv', args: ['+tb'], name: 'SC_rgb_expb.dcm' },
];

const LOSSY = /^1\.2\.840\.10008\.1\.2\.4\.(50|51|81|91)$/;
const JPEG2000 = /^1\.2\.840\.10008\.1\.2\.4\.9[01]$/;

describe(
  'DICOM corpus (pydicom test files)',
  { skip: corpus === undefined ? CORPUS_SKIP_MESSAGE : false },
  () => {
    const config = loadConfig({});
    const work = mkdtempSync(path.join(tmpdir(), 'cra-dicom-corpus-'));
    after(async () => {
      await closeDicomPools();
      rmSync(work, { recursive: true, force: true });
    });
    const files =
      corpus === undefined
        ? []
        : readdirSync(corpus)
            .filter((f) => f.endsWith('.dcm'))
            .sort();

    it('has the files this test knows', () => {
      for (const name of [
        ...Object.keys(REFUSED),
        ...Object.keys(NO_IMAGE),
        'MR_small.dcm',
        'JPEG2000.dcm',
      ]) {
        assert.ok(files.includes(name), `${name} is in the corpus`);
      }
    });

    for (const name of files) {
      it(name, () => checkFile(name, path.join(corpus!, name), config, work));
    }

    // Transfer syntaxes the corpus lacks, made from its files by dcmtk's own encoders.
    for (const { from, tool, args, name } of DERIVED) {
      it(`${name} (${tool} ${args.join(' ')} of ${from})`, async () => {
        const file = path.join(work, name);
        execFileSync(tool, [...args, path.join(corpus!, from), file], { stdio: 'pipe' });
        await checkFile(name, file, config, work);
      });
    }

    it('refuses JPEG2000-embedded-sequence-delimiter.dcm, whose header OpenJPEG refuses too', async () => {
      const file = path.join(corpus!, 'JPEG2000-embedded-sequence-delimiter.dcm');
      await assert.rejects(extractDicomImages(readFileSync(file), config), (error: unknown) => {
        assert.ok(error instanceof DicomError);
        assert.equal(error.code, 'codestream-mismatch');
        assert.match(error.message, /3722445056 x 1024 pixels, but Columns x Rows is 256 x 1024/);
        return true;
      });
      const dataSet = dicomParser.parseDicom(readFileSync(file));
      const element = dataSet.elements.x7fe00010!;
      const codestream = path.join(work, 'embedded-delimiter.j2k');
      writeFileSync(
        codestream,
        dicomParser.readEncapsulatedPixelDataFromFragments(dataSet, element, 0, element.fragments!.length),
      );
      assert.throws(
        () =>
          execFileSync('opj_decompress', ['-i', codestream, '-o', `${codestream}.pgm`], { stdio: 'pipe' }),
        /failed|Invalid/,
      );
    });

    it('decodes 8-bit RGB in Explicit VR Big Endian (OW) as its little endian twin', async () => {
      const twin = path.join(work, 'SC_rgb_twin_expb.dcm');
      execFileSync('dcmconv', ['+tb', path.join(corpus!, 'SC_rgb_jpeg_dcmd.dcm'), twin], { stdio: 'pipe' });
      assert.match(execFileSync('dcmdump', [twin], { encoding: 'utf8' }), /\(7fe0,0010\) OW /);
      const [little, big] = await Promise.all(
        [path.join(corpus!, 'SC_rgb_jpeg_dcmd.dcm'), twin].map(async (file) => {
          const extraction = await extractDicomImages(readFileSync(file), config);
          assert.equal(extraction.kind, 'images');
          return extraction.images[0]!.raw;
        }),
      );
      assert.deepEqual([big!.width, big!.height, big!.channels], [little!.width, little!.height, 3]);
      let differing = 0;
      for (let i = 0; i < little!.pixels.length; i++) if (little!.pixels[i] !== big!.pixels[i]) differing++;
      assert.equal(differing, 0, 'samples that differ from the little endian file');
    });
  },
);

/** Extracts `file` and checks the outcome this test expects for `name`. */
async function checkFile(name: string, file: string, config: Config, work: string): Promise<void> {
  const bytes = readFileSync(file);
  let extraction: DicomExtraction;
  try {
    extraction = await extractDicomImages(bytes, config);
  } catch (error) {
    assert.ok(error instanceof DicomError, `a DicomError, not ${String(error)}`);
    assert.ok(error.message.length > 10, 'the cause is described');
    assert.equal(error.code, REFUSED[name] ?? 'a decodable file', error.message);
    return;
  }
  assert.equal(REFUSED[name], undefined, `${name} is refused`);
  if (extraction.kind === 'none') {
    assert.equal(extraction.code, NO_IMAGE[name] ?? 'a decodable file', extraction.message);
    assert.ok(extraction.message.length > 10);
    return;
  }
  assert.equal(NO_IMAGE[name], undefined, `${name} has no image`);
  assert.equal(extraction.kind, 'images');
  const dataSet = dicomParser.parseDicom(bytes);
  const syntax = dataSet.string('x00020010')!;
  // badVR.dcm's Number of Frames is "1A": read as 1, as by the module.
  const frames = Number.parseInt(dataSet.string('x00280008') ?? '1', 10) || 1;
  assert.equal(extraction.numberOfFrames, frames);
  assert.equal(extraction.images.length, Math.min(frames, config.dicom.maxFrames));
  for (const image of extraction.images) {
    const raw = image.raw;
    const element = dataSet.elements.x7fe00010!;
    if (element.encapsulatedPixelData === true && image.mimeType === 'image/jpeg') {
      const fragment = Buffer.from(
        dicomParser.readEncapsulatedPixelDataFromFragments(dataSet, element, image.frameNumber - 1, 1),
      );
      if (fragment.indexOf(image.bytes) === 0) {
        // A baseline JPEG frame stored as the file holds it: its pixels are sharp's decoding of it.
        const decoded = await sharp(image.bytes).removeAlpha().raw().toBuffer();
        assert.ok(decoded.equals(raw.pixels), 'the pixels are those of the stored JPEG');
      }
    }
    assert.equal(raw.width, dataSet.uint16('x00280011'));
    assert.equal(raw.height, dataSet.uint16('x00280010'));
    const isLossySource = LOSSY.test(syntax) || dataSet.string('x00282110') === '01';
    assert.equal(image.mimeType, isLossySource ? 'image/jpeg' : 'image/png');
    const meta = await sharp(image.bytes).metadata();
    assert.deepEqual([meta.width, meta.height], [raw.width, raw.height]);
    assert.equal(`image/${meta.format === 'jpeg' ? 'jpeg' : meta.format}`, image.mimeType);

    if (DOCUMENTED_ONLY.has(name)) {
      for (const [row, rgb] of COLOUR_BARS) {
        const at = (row * raw.width + 50) * 3;
        const ours = [...raw.pixels.subarray(at, at + 3)];
        assert.ok(
          ours.every((v, i) => Math.abs(v - rgb[i]!) <= 8),
          `row ${row}: ${ours.join()} ~ ${rgb.join()}`,
        );
      }
      continue;
    }
    const expected = JPEG2000.test(syntax)
      ? windowedOpenJpeg(dataSet, bytes, work, raw)
      : await dcmtkFrame(file, syntax, dataSet, image.frameNumber, raw, work);
    const { meanAbs, maxAbs } = difference(raw, expected);
    const isLossy = LOSSY.test(syntax);
    // Lossy: two JPEG decoders may round the inverse DCT differently.
    assert.ok(meanAbs <= (isLossy ? 1.5 : 0.5), `frame ${image.frameNumber}: mean difference ${meanAbs}`);
    assert.ok(maxAbs <= (isLossy ? 16 : 2), `frame ${image.frameNumber}: largest difference ${maxAbs}`);
  }
}

/** The frame as dcmtk renders it, 8-bit, with the file's first window (monochrome) or its min-max. */
async function dcmtkFrame(
  file: string,
  syntax: string,
  dataSet: dicomParser.DataSet,
  frameNumber: number,
  raw: RawImage,
  work: string,
): Promise<Uint8Array> {
  const tool = /^1\.2\.840\.10008\.1\.2\.4\.(5\d|70)$/.test(syntax)
    ? 'dcmj2pnm'
    : /^1\.2\.840\.10008\.1\.2\.4\.8\d$/.test(syntax)
      ? 'dcml2pnm'
      : 'dcm2pnm';
  const out = path.join(work, `${path.basename(file)}.${frameNumber}.png`);
  const isMonochrome = dataSet.string('x00280004')?.startsWith('MONOCHROME') === true;
  const window = dataSet.string('x00281050') === undefined ? ['+Wm'] : ['+Wi', '1'];
  execFileSync(tool, ['+on', '+F', String(frameNumber), ...(isMonochrome ? window : []), file, out], {
    stdio: 'pipe',
  });
  const png = raw.channels === 1 ? sharp(out).toColourspace('b-w') : sharp(out).removeAlpha();
  const { data, info } = await png.raw().toBuffer({ resolveWithObject: true });
  assert.deepEqual([info.width, info.height, info.channels], [raw.width, raw.height, raw.channels]);
  return data;
}

/**
 * The single frame of a JPEG 2000 file decoded by `opj_decompress`: colour as it comes (the decoder
 * undoes RCT/ICT), monochrome through the Modality LUT and the file's first window, else a min/max
 * window, as PS3.3 C.11.2.1.2 defines the linear VOI function.
 */
function windowedOpenJpeg(
  dataSet: dicomParser.DataSet,
  bytes: Buffer,
  work: string,
  raw: RawImage,
): Uint8Array {
  const element = dataSet.elements.x7fe00010!;
  const codestream = Buffer.from(
    dicomParser.readEncapsulatedPixelDataFromFragments(dataSet, element, 0, element.fragments!.length),
  );
  const isJp2 = codestream.subarray(4, 8).toString('latin1') === 'jP  ';
  const input = path.join(work, `frame.${isJp2 ? 'jp2' : 'j2k'}`);
  const output = path.join(work, `frame.${raw.channels === 1 ? 'pgm' : 'ppm'}`);
  writeFileSync(input, codestream);
  try {
    execFileSync('opj_decompress', ['-i', input, '-o', output], { stdio: 'pipe' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new Error('opj_decompress is missing: apt-get install libopenjp2-tools (as .ci/run does)');
    }
    throw error;
  }
  const isSigned = /sgnd=1/.test(execFileSync('opj_dump', ['-i', input], { encoding: 'utf8' }));
  const pnm = readPnm(readFileSync(output));
  assert.deepEqual([pnm.width, pnm.height, pnm.channels], [raw.width, raw.height, raw.channels]);
  if (raw.channels === 3) return Uint8Array.from(pnm.values);
  // opj_decompress writes signed samples shifted up by half their range. Unsigned samples in a data set
  // that says signed (J2K_pixelrep_mismatch) are read as Pixel Representation says, as pydicom does.
  const bitsStored = dataSet.uint16('x00280101')!;
  const isDataSetSigned = dataSet.uint16('x00280103') === 1;
  const precision = Number(
    /prec=(\d+)/.exec(execFileSync('opj_dump', ['-i', input], { encoding: 'utf8' }))![1],
  );
  const stored = pnm.values.map((v) => {
    if (isSigned) return v - 2 ** (precision - 1);
    return isDataSetSigned && v >= 2 ** (bitsStored - 1) ? v - 2 ** bitsStored : v;
  });
  const slope = Number(dataSet.string('x00281053') ?? '1');
  const intercept = Number(dataSet.string('x00281052') ?? '0');
  const toModality = (v: number) => Math.trunc(v * slope + intercept);
  const modality = stored.map(toModality);
  let center = Number(dataSet.string('x00281050')?.split('\\')[0]);
  let width = Number(dataSet.string('x00281051')?.split('\\')[0]);
  if (!Number.isFinite(center) || !Number.isFinite(width)) {
    // No window: the declared Smallest/Largest Image Pixel Value, else the frame's own range.
    const smallest = isDataSetSigned ? dataSet.int16('x00280106') : dataSet.uint16('x00280106');
    const largest = isDataSetSigned ? dataSet.int16('x00280107') : dataSet.uint16('x00280107');
    const hasDeclared = smallest !== undefined && largest !== undefined && smallest < largest;
    const min = hasDeclared ? toModality(smallest) : modality.reduce((a, b) => Math.min(a, b));
    const max = hasDeclared ? toModality(largest) : modality.reduce((a, b) => Math.max(a, b));
    center = (min + max) / 2;
    width = Math.max(1, max - min);
  }
  return Uint8Array.from(modality, (x) => {
    if (x <= center - 0.5 - (width - 1) / 2) return 0;
    if (x > center - 0.5 + (width - 1) / 2) return 255;
    return Math.trunc(((x - (center - 0.5)) / (width - 1) + 0.5) * 255);
  });
}

/** A binary PGM (P5) or PPM (P6), 8 or 16 bits per sample. */
function readPnm(file: Buffer): { width: number; height: number; channels: 1 | 3; values: number[] } {
  const tokens: string[] = [];
  let pos = 0;
  while (tokens.length < 4) {
    while (/\s/.test(String.fromCharCode(file[pos]!))) pos++;
    if (file[pos] === 0x23) {
      while (file[pos] !== 0x0a) pos++;
      continue;
    }
    const start = pos;
    while (!/\s/.test(String.fromCharCode(file[pos]!))) pos++;
    tokens.push(file.subarray(start, pos).toString('latin1'));
  }
  pos++;
  const [magic, width, height, maxValue] = [
    tokens[0],
    Number(tokens[1]),
    Number(tokens[2]),
    Number(tokens[3]),
  ];
  const channels = magic === 'P6' ? 3 : 1;
  const count = width * height * channels;
  const values: number[] = [];
  for (let i = 0; i < count; i++) {
    values.push(maxValue > 255 ? file.readUInt16BE(pos + i * 2) : file[pos + i]!);
  }
  return { width, height, channels, values };
}

function difference(ours: RawImage, expected: Uint8Array): { meanAbs: number; maxAbs: number } {
  assert.equal(ours.pixels.length, expected.length);
  let sum = 0;
  let maxAbs = 0;
  for (let i = 0; i < expected.length; i++) {
    const d = Math.abs(ours.pixels[i]! - expected[i]!);
    sum += d;
    if (d > maxAbs) maxAbs = d;
  }
  return { meanAbs: sum / expected.length, maxAbs };
}
