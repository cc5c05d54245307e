import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import sharp from 'sharp';
import { JPEG_BYTES, PDF_BYTES, PNG_BYTES } from '../../test/factories-attachment.ts';
import { sniffContentType } from './content-sniffer.ts';

describe('sniffContentType', () => {
  it('identifies PNG, JPEG, PDF, DICOM, GIF and WebP by their magic numbers', async () => {
    const dicom = Buffer.alloc(200);
    dicom.write('DICM', 128, 'latin1');
    const gif = await sharp({ create: { width: 2, height: 2, channels: 3, background: '#000' } })
      .gif()
      .toBuffer();
    const webp = await sharp({ create: { width: 2, height: 2, channels: 3, background: '#000' } })
      .webp()
      .toBuffer();
    assert.equal(await sniffContentType(PNG_BYTES), 'image/png');
    assert.equal(await sniffContentType(JPEG_BYTES), 'image/jpeg');
    assert.equal(await sniffContentType(PDF_BYTES), 'application/pdf');
    assert.equal(await sniffContentType(dicom), 'application/dicom');
    assert.equal(await sniffContentType(gif), 'image/gif');
    assert.equal(await sniffContentType(webp), 'image/webp');
  });

  it('finds a PDF header anywhere in the first 1024 bytes, not after', async () => {
    const at = (offset: number) => Buffer.concat([Buffer.alloc(offset, 0x20), PDF_BYTES]);
    assert.equal(await sniffContentType(at(1000)), 'application/pdf');
    assert.equal(await sniffContentType(at(1024)), undefined);
  });

  it('identifies a prefix of a large file the same as the whole', async () => {
    const big = Buffer.concat([PNG_BYTES, Buffer.alloc(5 * 1024 * 1024)]);
    assert.equal(await sniffContentType(big), 'image/png');
  });

  it('proves nothing for text, markup, empty or truncated input', async () => {
    for (const bytes of [
      Buffer.from('hello'),
      Buffer.from('<html><body>x</body></html>'),
      Buffer.from('{"a":1}'),
      Buffer.alloc(0),
      Buffer.from([0x89, 0x50, 0x4e]),
    ])
      assert.equal(await sniffContentType(bytes), undefined, bytes.toString('latin1'));
  });
});
