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

  it('keeps the event loop responsive while several 4 MB images are checked', async () => {
    const decoder = createBodyDecoder();
    const bodies = [1, 2, 3].map(() => bodyWith(makePng(1200, 1100, { isNoisy: true })));
    const inlineStart = performance.now();
    readSignatureBody(bodies[0]!);
    const inlineMs = performance.now() - inlineStart;
    // Start the worker threads first: spawning one is not part of reading a body.
    await Promise.all([decoder.decode(Buffer.from(bodies[0]!)), decoder.decode(Buffer.from(bodies[1]!))]);
    // A 1 ms ticker: the longest gap between its ticks is the longest stall of the event loop.
    let last = performance.now();
    let maxGapMs = 0;
    const ticker = setInterval(() => {
      const now = performance.now();
      maxGapMs = Math.max(maxGapMs, now - last);
      last = now;
    }, 1);
    await new Promise((resolve) => setTimeout(resolve, 20));
    try {
      const inputs = await Promise.all(bodies.map((body) => decoder.decode(body)));
      for (const input of inputs) assert.equal(input?.image.state, 'valid');
      await new Promise((resolve) => setTimeout(resolve, 5));
    } finally {
      clearInterval(ticker);
      await decoder.close();
    }
    // Read inline, the three decode calls would run back to back in one tick: one stall of 3 x inlineMs.
    assert.ok(
      maxGapMs < 2 * inlineMs,
      `longest stall ${maxGapMs.toFixed(1)} ms; one body inline takes ${inlineMs.toFixed(1)} ms`,
    );
  });
});
