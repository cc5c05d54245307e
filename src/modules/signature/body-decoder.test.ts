import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { b64, makePng } from '../../../test/factories-signature.ts';
import { createBodyDecoder } from './body-decoder.ts';
import { readSignatureBody } from './signature-body.ts';

describe('createBodyDecoder', () => {
  const bodyWith = (image: Buffer) =>
    Buffer.from(
      JSON.stringify({ unique_identifier: 'ABCDEF', extra_info: { e_id: 1, e_t_id: 2 }, image: b64(image) }),
    );

  it('reads a large body on a worker thread exactly as inline', async () => {
    const decoder = createBodyDecoder({ inlineMaxBytes: 1024 });
    try {
      const png = makePng(200, 100, { isNoisy: true });
      const viaWorker = await decoder.decode(bodyWith(png));
      const inline = readSignatureBody(bodyWith(png));
      assert.equal(viaWorker?.image.state, 'valid');
      assert.deepEqual(
        viaWorker?.image.state === 'valid' ? Buffer.from(viaWorker.image.image.bytes) : undefined,
        png,
      );
      assert.deepEqual({ ...viaWorker, image: undefined }, { ...inline, image: undefined });
      assert.equal(await decoder.decode(Buffer.from('x'.repeat(5000))), undefined);
    } finally {
      await decoder.close();
    }
  });

  it('reads large bodies off the event loop: each is moved to a worker thread and reads as valid', async () => {
    const decoder = createBodyDecoder();
    // Bodies that own their whole buffer, as a request body read from the socket does.
    const bodies = [1, 2, 3].map(() => new Uint8Array(bodyWith(makePng(1200, 1100, { isNoisy: true }))));
    try {
      const reading = bodies.map((body) => decoder.decode(body));
      // Moved, not copied: this thread no longer holds the bytes, so it cannot be the one reading them.
      for (const body of bodies) assert.equal(body.byteLength, 0);
      for (const input of await Promise.all(reading)) assert.equal(input?.image.state, 'valid');
    } finally {
      await decoder.close();
    }
  });
});
