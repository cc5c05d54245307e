/**
 * The value-length limits of the structural scan (`value-limits.ts`): which values each VR limits and
 * how (value by value, the element read as text in whole, the site's text limit), and what it leaves
 * alone (binary VRs, private long text, multi-valued numbers). Refusals name the element, never the value.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildPart10File, dicomElement } from '../../../test/factories-queue.ts';
import { DicomError } from './dicom-error.ts';
import type { DicomErrorCode } from './dicom-error.ts';
import { readDicom } from './inspect.ts';
import type { ScanLimits } from './part10-scan.ts';
import { findOverlongValueError, scanPart10 } from './part10-scan.ts';

const LIMITS: ScanLimits = { maxElements: 100_000, maxDepth: 8, maxBytes: 64 * 1024 * 1024 };
const IMPLICIT = '1.2.840.10008.1.2';
const text = (s: string) => Buffer.from(s, 'latin1');
const filled = (bytes: number) => Buffer.alloc(bytes, 0x41);

/** An implicit VR little endian element. */
function implicit(group: number, element: number, value: Buffer): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt16LE(group, 0);
  head.writeUInt16LE(element, 2);
  head.writeUInt32LE(value.length, 4);
  return Buffer.concat([head, value]);
}

function refusalOf(
  file: Buffer,
  limits: ScanLimits = LIMITS,
): { code: DicomErrorCode; message: string } | undefined {
  try {
    scanPart10(file, limits);
    return undefined;
  } catch (error) {
    assert.ok(error instanceof DicomError);
    return { code: error.code, message: error.message };
  }
}

describe('DICOM value-length limits', () => {
  it('refuses a single value over its VR maximum, naming the element and both lengths', () => {
    const file = buildPart10File(dicomElement(0x0008, 0x0060, 'CS', filled(70)));
    const refusal = refusalOf(file);
    assert.equal(refusal?.code, 'value-too-long');
    assert.match(
      refusal.message,
      /^A value of element \(0008,0060\) \(VR CS\) at byte \d+ has 70 bytes, over the 65/,
    );
    assert.ok(!refusal.message.includes('AAAA'));
    // Within 4 bytes a character of the maximum: a PN of 64 characters in UTF-8's widest, or a DS too precise.
    assert.equal(refusalOf(buildPart10File(dicomElement(0x0010, 0x0010, 'PN', filled(776)))), undefined);
    assert.equal(
      refusalOf(buildPart10File(dicomElement(0x0028, 0x0030, 'DS', text('0.390625000000000000\\0.5')))),
      undefined,
    );
  });

  it('checks a multi-valued element value by value, and an element read as text in whole', () => {
    // ImageType (not read as text): 2,000 values of 10 bytes is 22 KB, each value within CS's 16.
    const codes = text(Array.from({ length: 2000 }, () => 'ORIGINAL10').join('\\'));
    assert.equal(refusalOf(buildPart10File(dicomElement(0x0008, 0x0008, 'CS', codes))), undefined);
    // OperatorsName is read as text: 600 names of 60 bytes are each fine, but 36 KB in all is not.
    const names = text(Array.from({ length: 600 }, () => 'A'.repeat(60)).join('\\'));
    const refusal = refusalOf(buildPart10File(dicomElement(0x0008, 0x1070, 'PN', names)));
    assert.equal(refusal?.code, 'text-too-long');
    assert.match(
      refusal.message,
      /\(0008,1070\) \(VR PN\).*over the limit of 16384 \(DICOM_MAX_TEXT_BYTES\)/,
    );
  });

  it("limits a standard long text by the site's limit, and a private one only by its VR", () => {
    const lt = buildPart10File(dicomElement(0x0020, 0x4000, 'LT', filled(10_000)));
    assert.equal(refusalOf(lt), undefined);
    assert.equal(refusalOf(lt, { ...LIMITS, maxTextBytes: 4096 })?.code, 'text-too-long');
    const ut = buildPart10File(dicomElement(0x0040, 0xa160, 'UT', filled(17_000)));
    assert.equal(refusalOf(ut)?.code, 'text-too-long');
    const privateUt = buildPart10File(
      Buffer.concat([
        dicomElement(0x0009, 0x0010, 'LO', text('VENDOR')),
        dicomElement(0x0009, 0x1010, 'UT', filled(2_000_000)),
      ]),
    );
    assert.equal(refusalOf(privateUt), undefined);
    // A private creator is LO wherever it is, and is read as text.
    const creator = buildPart10File(dicomElement(0x7717, 0x0010, 'LO', filled(300)));
    assert.equal(refusalOf(creator)?.code, 'value-too-long');
  });

  it('leaves binary values alone: pixel data, an encapsulated document, a UN blob', () => {
    const file = buildPart10File(
      Buffer.concat([
        dicomElement(0x0009, 0x1001, 'UN', filled(300_000)),
        dicomElement(0x0042, 0x0011, 'OB', filled(3_000_000)),
        dicomElement(0x7fe0, 0x0010, 'OW', filled(4_000_000)),
      ]),
    );
    assert.equal(refusalOf(file), undefined);
  });

  it('reads the VR of a tag read as text from its own table in implicit VR and for an explicit OB or UN', () => {
    const name = buildPart10File(implicit(0x0010, 0x0010, filled(1_000_000)), {
      transferSyntaxUid: IMPLICIT,
    });
    assert.equal(refusalOf(name)?.code, 'value-too-long');
    // Nested: a code value in a sequence item.
    const item = Buffer.concat([implicit(0xfffe, 0xe000, implicit(0x0008, 0x0100, filled(5000)))]);
    const nested = buildPart10File(implicit(0x0040, 0xa043, item), { transferSyntaxUid: IMPLICIT });
    assert.match(refusalOf(nested)?.message ?? '', /\(0008,0100\) \(VR SH\)/);
    // An element the service does not read has no VR in implicit VR: not limited.
    const unknown = buildPart10File(implicit(0x0040, 0xa160, filled(1_000_000)), {
      transferSyntaxUid: IMPLICIT,
    });
    assert.equal(refusalOf(unknown), undefined);
    for (const vr of ['OB', 'UN']) {
      const disguised = buildPart10File(dicomElement(0x0010, 0x0010, vr, filled(100_000)));
      assert.equal(refusalOf(disguised)?.code, 'value-too-long', vr);
    }
  });

  it('reads the header values as dicom-parser did: up to the first NUL, trimmed', () => {
    const file = buildPart10File(
      Buffer.concat([
        dicomElement(0x0008, 0x0060, 'CS', text(' OP ')),
        dicomElement(0x0010, 0x0010, 'PN', Buffer.from('DOE^JANE \0\0XX', 'latin1')),
        dicomElement(0x0010, 0x0020, 'LO', Buffer.from([0x4d, 0xfc, 0x6c, 0x6c, 0x65, 0x72])),
      ]),
    );
    const { header } = readDicom(file, LIMITS);
    assert.deepEqual([header.Modality, header.PatientName, header.PatientID], ['OP', 'DOE^JANE', 'Müller']);
  });

  it("finds an overlong value among a body's first elements for queue add, and nothing in what it cannot read", () => {
    const name = buildPart10File(implicit(0x0010, 0x0010, filled(100_000)), { transferSyntaxUid: IMPLICIT });
    assert.equal(findOverlongValueError(name, LIMITS)?.code, 'value-too-long');
    // Past the elements it looks at, or a file cut short: left to the full scan.
    const padding = Buffer.concat(
      Array.from({ length: 50 }, (_, i) => implicit(0x0009, 0x1000 + i, text('XY'))),
    );
    const late = buildPart10File(Buffer.concat([padding, implicit(0x0010, 0x0010, filled(100_000))]), {
      transferSyntaxUid: IMPLICIT,
    });
    assert.equal(findOverlongValueError(late, { ...LIMITS, maxElements: 20 }), undefined);
    assert.equal(findOverlongValueError(late, LIMITS)?.code, 'value-too-long');
    assert.equal(findOverlongValueError(Buffer.from('not a DICOM file'), LIMITS), undefined);
    assert.equal(findOverlongValueError(late.subarray(0, 400), LIMITS), undefined);
  });
});
