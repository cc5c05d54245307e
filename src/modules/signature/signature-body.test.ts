import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import sharp from 'sharp';
import { b64, makeJpeg, makePng } from '../../../test/factories-signature.ts';
import { cviInfoAfterPatientSignature } from './cvi-info.ts';
import {
  capText,
  readPositiveInteger,
  readSignatureBody,
  UNSERIALISABLE_EXTRA_INFO,
} from './signature-body.ts';
import { decodeStrictBase64, detectImageFormat, readImageField } from './signature-image.ts';

describe('strict base64', () => {
  it('decodes canonical base64 and refuses whitespace, URL-safe characters, missing padding and stray bits', () => {
    assert.deepEqual(decodeStrictBase64('aGk='), Buffer.from('hi'));
    for (const bad of ['aGk', 'aG k=', 'aGk=\n', '-_-_', 'aGl=', '', '====', 'a===', 'aGk=aGk=']) {
      assert.equal(decodeStrictBase64(bad), undefined, JSON.stringify(bad));
    }
  });

  it('round-trips any bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 200 }), (bytes) => {
        assert.deepEqual(decodeStrictBase64(Buffer.from(bytes).toString('base64')), Buffer.from(bytes));
      }),
    );
  });
});

describe('image recognition', () => {
  it('recognises PNG and JPEG files written by a real encoder', async () => {
    const base = sharp({ create: { width: 40, height: 20, channels: 3, background: '#336699' } });
    assert.equal(detectImageFormat(await base.clone().png().toBuffer()), 'png');
    assert.equal(detectImageFormat(await base.clone().jpeg().toBuffer()), 'jpeg');
    assert.equal(detectImageFormat(await base.clone().webp().toBuffer()), undefined);
  });

  it('refuses every truncation of a PNG and of a JPEG', async () => {
    const png = makePng(10, 10, { isNoisy: true });
    for (let n = 0; n < png.length; n++)
      assert.equal(detectImageFormat(png.subarray(0, n)), undefined, `png ${n}`);
    const jpeg = await sharp({ create: { width: 16, height: 16, channels: 3, background: '#000' } })
      .jpeg()
      .toBuffer();
    for (let n = 0; n < jpeg.length; n++)
      assert.equal(detectImageFormat(jpeg.subarray(0, n)), undefined, `jpeg ${n}`);
    assert.equal(detectImageFormat(makeJpeg()), 'jpeg');
  });

  it('refuses a PNG with a corrupted chunk (CRC mismatch)', () => {
    const png = makePng(10, 10, { isNoisy: true });
    png[60] = png[60]! ^ 0xff;
    assert.equal(detectImageFormat(png), undefined);
  });

  it('strips a data: URL prefix of any image type, and only one', () => {
    const png = b64(makePng());
    assert.equal(readImageField(`data:image/png;base64,${png}`).state, 'valid');
    assert.equal(readImageField(`data:application/octet-stream;base64,${png}`).state, 'valid');
    assert.equal(readImageField(`data:image/png;base64,data:image/png;base64,${png}`).state, 'invalid');
    assert.equal(readImageField(`data:image/png,${png}`).state, 'invalid');
  });

  it('treats undefined, null and "" as absent and any other non-string as invalid', () => {
    for (const absent of [undefined, null, '']) assert.equal(readImageField(absent).state, 'absent');
    for (const invalid of [0, 1, true, {}, [], [b64(makePng())]])
      assert.equal(readImageField(invalid).state, 'invalid');
  });
});

describe('readSignatureBody', () => {
  const text = (value: unknown) => Buffer.from(JSON.stringify(value));

  it('refuses anything that is not a JSON object', () => {
    for (const body of ['', 'null', '[]', '"x"', '1', '{', '{"a":1}x', '\uFEFF{']) {
      assert.equal(readSignatureBody(Buffer.from(body)), undefined, JSON.stringify(body));
    }
    assert.equal(readSignatureBody(new Uint8Array([0x7b, 0xff, 0x7d])), undefined);
  });

  it('never throws, whatever the bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        readSignatureBody(bytes);
      }),
    );
    fc.assert(
      fc.property(fc.jsonValue(), fc.jsonValue(), fc.jsonValue(), (a, b, c) => {
        readSignatureBody(
          text({ unique_identifier: a, extra_info: b, image: c, origImage: a, original_log_id: b }),
        );
      }),
    );
  });

  it('never reads inherited properties', () => {
    const input = readSignatureBody(Buffer.from('{"__proto__":{"unique_identifier":"ABCDEF"}}'))!;
    assert.equal(input.uniqueIdentifier, undefined);
    const noIds = readSignatureBody(text({ extra_info: '{"constructor":1}' }))!;
    assert.equal(noIds.elementId, undefined);
  });

  it('keeps extra_info text as sent and serialises an object, capped', () => {
    assert.equal(readSignatureBody(text({ extra_info: '{ "e_id" : 1 }' }))!.extraInfoText, '{ "e_id" : 1 }');
    assert.equal(readSignatureBody(text({ extra_info: { e_id: 1 } }))!.extraInfoText, '{"e_id":1}');
    assert.equal(readSignatureBody(text({ extra_info: 'x'.repeat(5000) }))!.extraInfoText.length, 1000);
  });

  it('survives an extra_info nested deeper than JSON.stringify can recurse', () => {
    const depth = 200_000;
    const body = `{"extra_info":{"e_id":1,"e_t_id":2,"x":${'['.repeat(depth)}${']'.repeat(depth)}}}`;
    const input = readSignatureBody(Buffer.from(body))!;
    assert.equal(input.elementId, 1);
    assert.equal(input.extraInfoText, UNSERIALISABLE_EXTRA_INFO);
  });

  it('reads original_log_id as a positive integer or invalid', () => {
    const read = (v: unknown) => readSignatureBody(text({ original_log_id: v }))!.originalLogId;
    assert.equal(read(undefined), undefined);
    assert.equal(read(null), undefined);
    assert.equal(read(12), 12);
    assert.equal(read('12'), 12);
    for (const bad of [0, -3, 1.5, '012', ' 12', 'x', {}, [], true, 2 ** 31])
      assert.equal(read(bad), 'invalid');
  });
});

describe('readPositiveInteger', () => {
  it('accepts positive integers and their plain decimal text only', () => {
    assert.equal(readPositiveInteger(7), 7);
    assert.equal(readPositiveInteger('7'), 7);
    for (const bad of [
      0,
      -1,
      1.5,
      NaN,
      Infinity,
      '07',
      '+7',
      '7.0',
      '1e3',
      ' 7',
      '',
      null,
      true,
      [7],
      { id: 7 },
    ]) {
      assert.equal(readPositiveInteger(bad), undefined, JSON.stringify(bad));
    }
  });
});

describe('capText', () => {
  it('never splits a surrogate pair and replaces NUL', () => {
    assert.equal(capText('ab\u{1F600}', 3), 'ab');
    assert.equal(capText('a\u0000b', 10), 'a\uFFFDb');
  });
});

describe('CVI info after a patient signature', () => {
  const cases: [string | null, string | undefined][] = [
    ['Incomplete/Missing: Clinical, Consent signature', 'Incomplete/Missing: Clinical'],
    ['Incomplete/Missing: Consent signature', 'Complete'],
    ['Incomplete/Missing: Consent signature - Severely sight impaired', 'Complete - Severely sight impaired'],
    ['Incomplete', 'Incomplete/Missing: Clinical, Clerical, Demographics, Consultant signature'],
    ['Incomplete/Missing: Clinical', undefined],
    ['Issued', undefined],
    ['Complete', undefined],
    ['Something else', undefined],
    [null, undefined],
  ];
  for (const [before, after] of cases) {
    it(`${JSON.stringify(before)} -> ${JSON.stringify(after)}`, () => {
      assert.equal(cviInfoAfterPatientSignature(before), after);
    });
  }
});
