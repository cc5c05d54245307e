/**
 * The VOI LUT Sequence (0028,3010) of a monochrome image that has no Window Center/Width: PS3.3 C.11.2
 * maps each modality value through the first LUT of the sequence. `dcmjs-imaging` does not read the
 * sequence (it would fall back to a min/max window), so such frames are rendered here from the stored
 * values: native pixel data straight from the file, compressed frames decoded to native first by
 * `dcmjs-codecs` (loaded with {@link loadCodecs} before).
 */
import { createRequire } from 'node:module';
import type * as Codecs from 'dcmjs-codecs';
import type { Part10Scan } from './part10-scan.ts';
import { TAG, readNumber, readText, readUs } from './part10-scan.ts';

const require = createRequire(import.meta.url);
let codecs: typeof Codecs | undefined;
let isCodecsReady: Promise<void> | undefined;

/**
 * `dcmjs-codecs` for transcoding, loaded once per thread on first use (few files need it: its JavaScript
 * and WebAssembly stay out of a thread that never transcodes): `dcmjs-imaging` bundles its own copy of
 * the decoders, whose instance this package cannot use.
 */
export async function loadCodecs(): Promise<typeof Codecs> {
  const loaded = (codecs ??= require('dcmjs-codecs') as typeof Codecs);
  isCodecsReady ??= loaded.NativeCodecs.initializeAsync({ logCodecsInfo: false, logCodecsTrace: false });
  await isCodecsReady;
  return loaded;
}

type Elements = Record<string, unknown>;

interface VoiLut {
  readonly entries: number;
  readonly firstMapped: number;
  readonly bits: number;
  readonly data: ArrayLike<number>;
}

/** The first LUT of the VOI LUT Sequence when the image has one and no window, else undefined. */
export function findVoiLut(scan: Part10Scan, elements: Elements): VoiLut | undefined {
  const photometric = readText(scan, TAG.PhotometricInterpretation);
  if (photometric !== 'MONOCHROME1' && photometric !== 'MONOCHROME2') return undefined;
  if (readText(scan, TAG.WindowCenter) !== undefined || !scan.elements.has(TAG.VOILUTSequence))
    return undefined;
  const item = (elements.VOILUTSequence as Elements[] | undefined)?.[0];
  const descriptor = item?.LUTDescriptor as number[] | undefined;
  const data = lutData(item?.LUTData);
  if (descriptor === undefined || descriptor.length < 3 || data === undefined) return undefined;
  const entries = descriptor[0] === 0 ? 65536 : descriptor[0]!;
  const isSigned = readUs(scan, TAG.PixelRepresentation) === 1;
  const firstMapped = isSigned && descriptor[1]! > 32767 ? descriptor[1]! - 65536 : descriptor[1]!;
  const bits = descriptor[2]!;
  if (data.length < entries || bits < 1 || bits > 16) return undefined;
  return { entries, firstMapped, bits, data };
}

function lutData(value: unknown): ArrayLike<number> | undefined {
  if (Array.isArray(value) && value.every((v) => typeof v === 'number')) return value;
  const buffer = Array.isArray(value) ? (value[0] as unknown) : value;
  if (buffer instanceof ArrayBuffer) return new Uint16Array(buffer, 0, Math.floor(buffer.byteLength / 2));
  return undefined;
}

/** Frame `index` through `lut`, as RGBA (grey in R, G and B), rows top to bottom. */
export function renderWithVoiLut(
  scan: Part10Scan,
  elements: Elements,
  transferSyntaxUid: string,
  index: number,
  lut: VoiLut,
): Uint8Array {
  const rows = readUs(scan, TAG.Rows)!;
  const columns = readUs(scan, TAG.Columns)!;
  const bitsAllocated = readUs(scan, TAG.BitsAllocated)!;
  const bitsStored = readUs(scan, TAG.BitsStored) ?? bitsAllocated;
  const isSigned = readUs(scan, TAG.PixelRepresentation) === 1;
  const slope = readNumber(scan, TAG.RescaleSlope) ?? 1;
  const intercept = readNumber(scan, TAG.RescaleIntercept) ?? 0;
  const isInverted = readText(scan, TAG.PhotometricInterpretation) === 'MONOCHROME1';
  const count = rows * columns;
  const frame = storedFrame(scan, elements, transferSyntaxUid, index, count, bitsAllocated);
  const mask = bitsStored >= 32 ? 0xffffffff : 2 ** bitsStored - 1;
  const signBit = 2 ** (bitsStored - 1);
  const top = 2 ** lut.bits - 1;
  const rgba = new Uint8Array(count * 4);
  for (let i = 0; i < count; i++) {
    let stored = (bitsAllocated === 8 ? frame[i]! : frame.readUInt16LE(i * 2)) & mask;
    if (isSigned && stored >= signBit) stored -= 2 * signBit;
    const position = Math.min(
      lut.entries - 1,
      Math.max(0, Math.trunc(stored * slope + intercept) - lut.firstMapped),
    );
    let grey = Math.round((Math.min(lut.data[position]!, top) * 255) / top);
    if (isInverted) grey = 255 - grey;
    rgba[i * 4] = grey;
    rgba[i * 4 + 1] = grey;
    rgba[i * 4 + 2] = grey;
    rgba[i * 4 + 3] = 255;
  }
  return rgba;
}

/** The stored values of one frame as little-endian bytes. */
function storedFrame(
  scan: Part10Scan,
  elements: Elements,
  transferSyntaxUid: string,
  index: number,
  count: number,
  bitsAllocated: number,
): Buffer {
  if (bitsAllocated !== 8 && bitsAllocated !== 16) {
    throw new Error(`a VOI LUT on ${bitsAllocated}-bit pixels is not supported`);
  }
  const frameBytes = (count * bitsAllocated) / 8;
  const pixelData = scan.pixelData!;
  if (!pixelData.isEncapsulated) {
    const start = pixelData.value.offset + index * frameBytes;
    const frame = Buffer.from(scan.bytes.subarray(start, start + frameBytes));
    if (!scan.isLittleEndian && bitsAllocated === 16) frame.swap16();
    return frame;
  }
  if (codecs === undefined) throw new Error('the codecs are not loaded (loadCodecs)');
  const transcoder = new codecs.Transcoder(elements, transferSyntaxUid);
  transcoder.transcode(codecs.constants.TransferSyntax.ExplicitVRLittleEndian);
  const decoded = transcoder.getElements().PixelData as ArrayBuffer[];
  const frames = decoded.length === 1 ? Buffer.from(decoded[0]!) : Buffer.from(decoded[index]!);
  return decoded.length === 1 ? frames.subarray(index * frameBytes, (index + 1) * frameBytes) : frames;
}
