/**
 * The dimensions a compressed frame declares in its own header. The WebAssembly decoders size their
 * output from the codestream (JPEG, JPEG-LS, JPEG 2000), not from the data set's Rows and Columns, so a
 * small file whose codestream claims 60000 x 60000 pixels would make them allocate gigabytes before
 * failing. Extraction compares these dimensions with Rows and Columns and refuses a mismatch before
 * decoding. Only the frame header is read (SOFn / SOF55 / SIZ), nothing is decoded.
 */

/**
 * libjpeg's warnings that a frame's entropy-coded data is corrupt (its JWRN_* texts). libjpeg decodes
 * such a frame to the end, filling what it cannot read with grey, and only warns: a frame with one is
 * refused, not filed as if it were the image.
 */
export const CORRUPT_JPEG_WARNING = /Corrupt JPEG data[^\n]*|Premature end of JPEG file/;

export interface FrameSize {
  readonly width: number;
  readonly height: number;
}

type CodestreamFamily = 'jpeg' | 'jpeg2000';

/** Which header to look for in the frames of a transfer syntax; undefined when there is none to check. */
export function codestreamFamilyOf(transferSyntaxUid: string): CodestreamFamily | undefined {
  if (/^1\.2\.840\.10008\.1\.2\.4\.(50|51|57|70|80|81)$/.test(transferSyntaxUid)) return 'jpeg';
  if (/^1\.2\.840\.10008\.1\.2\.4\.(90|91|201|202|203)$/.test(transferSyntaxUid)) return 'jpeg2000';
  return undefined;
}

/**
 * The size declared by the header at the start of `fragment`, or undefined when the fragment does not
 * start with one (a continuation fragment) or the header has no size (a JPEG height given by DNL).
 */
export function readFrameSize(fragment: Uint8Array, family: CodestreamFamily): FrameSize | undefined {
  return family === 'jpeg' ? readJpegSize(fragment) : readJpeg2000Size(fragment);
}

/** JPEG (ITU T.81) and JPEG-LS (T.87): the first start-of-frame segment, before the first scan. */
function readJpegSize(bytes: Uint8Array): FrameSize | undefined {
  if (bytes.length < 4 || bytes[0] !== 0xff || bytes[1] !== 0xd8) return undefined;
  let pos = 2;
  while (pos + 4 <= bytes.length) {
    if (bytes[pos] !== 0xff) return undefined;
    const marker = bytes[pos + 1]!;
    if (marker === 0xff) {
      pos += 1; // fill byte
      continue;
    }
    const length = (bytes[pos + 2]! << 8) | bytes[pos + 3]!;
    const isStartOfFrame =
      (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) ||
      marker === 0xf7;
    if (isStartOfFrame) {
      if (pos + 9 > bytes.length) return undefined;
      const height = (bytes[pos + 5]! << 8) | bytes[pos + 6]!;
      const width = (bytes[pos + 7]! << 8) | bytes[pos + 8]!;
      return height === 0 ? undefined : { width, height };
    }
    if (marker === 0xda) return undefined;
    pos += 2 + length;
  }
  return undefined;
}

const J2K_START = Buffer.from([0xff, 0x4f, 0xff, 0x51]);

/** JPEG 2000 (ITU T.800): the SIZ segment right after SOC, in a raw codestream or inside a JP2 file. */
function readJpeg2000Size(bytes: Uint8Array): FrameSize | undefined {
  const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.length, 64 * 1024));
  const start = buffer.indexOf(J2K_START);
  if (start < 0 || start + 24 > buffer.length) return undefined;
  const siz = start + 4;
  const xSize = buffer.readUInt32BE(siz + 4);
  const ySize = buffer.readUInt32BE(siz + 8);
  const xOffset = buffer.readUInt32BE(siz + 12);
  const yOffset = buffer.readUInt32BE(siz + 16);
  return { width: xSize - xOffset, height: ySize - yOffset };
}

/**
 * The colour space a baseline JPEG frame declares: an Adobe marker's transform (0 RGB, else YCbCr), a
 * JFIF marker (YCbCr), else its component ids (1,2,3: YCbCr as JFIF; 'R','G','B': RGB). `unknown` when
 * none says, which libjpeg decodes as YCbCr; undefined for what is not a three-component JPEG.
 */
export function jpegColourOf(frame: Uint8Array): 'ycbcr' | 'rgb' | 'unknown' | undefined {
  if (frame.length < 4 || frame[0] !== 0xff || frame[1] !== 0xd8) return undefined;
  let isJfif = false;
  let adobeTransform: number | undefined;
  let pos = 2;
  while (pos + 4 <= frame.length && frame[pos] === 0xff) {
    const marker = frame[pos + 1]!;
    const length = (frame[pos + 2]! << 8) | frame[pos + 3]!;
    const tag = Buffer.from(
      frame.buffer,
      frame.byteOffset + pos + 4,
      Math.min(5, frame.length - pos - 4),
    ).toString('latin1');
    if (marker === 0xe0 && tag.startsWith('JFIF')) isJfif = true;
    if (marker === 0xee && tag === 'Adobe' && pos + 15 < frame.length) adobeTransform = frame[pos + 15];
    if (marker === 0xc0 || marker === 0xc1) {
      if (pos + 10 + 3 * 3 > frame.length || frame[pos + 9] !== 3) return undefined;
      if (adobeTransform !== undefined) return adobeTransform === 0 ? 'rgb' : 'ycbcr';
      if (isJfif) return 'ycbcr';
      const ids = [frame[pos + 10], frame[pos + 13], frame[pos + 16]].join();
      return ids === '1,2,3' ? 'ycbcr' : ids === '82,71,66' ? 'rgb' : 'unknown';
    }
    pos += 2 + length;
  }
  return undefined;
}

/** `frame` with an Adobe APP14 marker (transform 0: RGB, no colour transform) after its SOI. */
export function withAdobeRgbMarker(frame: Uint8Array): Uint8Array {
  const app14 = Buffer.from([
    0xff, 0xee, 0x00, 0x0e, 0x41, 0x64, 0x6f, 0x62, 0x65, 0x00, 0x64, 0, 0, 0, 0, 0,
  ]);
  return Buffer.concat([frame.subarray(0, 2), app14, frame.subarray(2)]);
}
