// test-needs: long
/**
 * Fuzz test of how bodies arrive: the same upload split into random chunks with random pauses, below and
 * above the 64 KiB at which a heavy request takes its slot, raw and multipart. Watching a body's receive
 * rate and waiting for it to flow before taking a slot must never lose, reorder or duplicate a byte, nor
 * refuse a client that keeps up with the minimum rate: every upload is stored byte for byte.
 *
 * Deterministic: `FUZZ_SEED` seeds fast-check; `FUZZ_RUNS_SCALE` scales the number of uploads.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { createUser } from '../factories.ts';
import type { TestUser } from '../factories.ts';
import type { TestApp } from '../harness.ts';
import { forEachDialect, startTestApp } from '../harness.ts';

const SEED = Number(process.env.FUZZ_SEED ?? 20261122);
const SCALE = Number(process.env.FUZZ_RUNS_SCALE ?? 1);
const CREATE = '/api/v1/attachmentdisplay/create';
const BOUNDARY = 'fuzzboundary7MA4YWxkTrZu0gW';

/** `size` bytes from a small deterministic generator (xorshift32) seeded with `seed`. */
function bytesOf(size: number, seed: number): Buffer {
  const bytes = Buffer.alloc(size);
  let x = seed | 1;
  for (let i = 0; i < size; i += 1) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    bytes[i] = x & 0xff;
  }
  return bytes;
}

function multipart(file: Buffer): Buffer {
  return Buffer.concat([
    Buffer.from(
      `--${BOUNDARY}\r\nContent-Disposition: form-data; name="note"\r\n\r\nignored\r\n` +
        `--${BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="scan.bin"\r\n` +
        'Content-Type: application/octet-stream\r\n\r\n',
    ),
    file,
    Buffer.from(`\r\n--${BOUNDARY}--\r\n`),
  ]);
}

/** Sends `head` then `body` cut at `cuts` with `pauses` (ms) between the pieces; resolves with the answer. */
function sendInPieces(
  port: number,
  head: string,
  body: Buffer,
  cuts: number[],
  pauses: number[],
): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: '127.0.0.1', port });
    let answer = '';
    socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
    socket.on('error', reject);
    socket.on('close', () => resolve(answer));
    void (async () => {
      socket.write(head);
      let at = 0;
      for (const [i, cut] of [...cuts, body.length].entries()) {
        const end = Math.min(body.length, Math.max(at, cut));
        if (end > at) socket.write(body.subarray(at, end));
        at = end;
        const pause = pauses[i % Math.max(1, pauses.length)] ?? 0;
        if (pause > 0) await new Promise((wait) => setTimeout(wait, pause));
      }
    })();
  });
}

forEachDialect((dialect) => {
  describe(`uploads arriving in random pieces [${dialect}]`, () => {
    let app: TestApp;
    let port: number;
    let user: TestUser;
    before(async () => {
      // The default slots and receive rate; a roomy body timeout so that a machine under load does not
      // make a test's pauses look slow.
      app = await startTestApp(dialect, { env: { BODY_TIMEOUT_MS: '5000' } });
      port = Number(new URL(app.baseUrl).port);
      user = await createUser(app.db);
    });
    after(() => app.close());

    it('stores every upload byte for byte, however its body is cut and paced', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.record({
            isMultipart: fc.boolean(),
            size: fc.oneof(fc.integer({ min: 1, max: 4096 }), fc.integer({ min: 60_000, max: 300_000 })),
            seed: fc.integer({ min: 1, max: 0x7fffffff }),
            cuts: fc
              .array(fc.integer({ min: 0, max: 310_000 }), { maxLength: 6 })
              .map((c) => c.sort((a, b) => a - b)),
            pauses: fc.array(fc.integer({ min: 0, max: 40 }), { maxLength: 6 }),
          }),
          async ({ isMultipart, size, seed, cuts, pauses }) => {
            const file = bytesOf(size, seed);
            const body = isMultipart ? multipart(file) : file;
            const type = isMultipart
              ? `multipart/form-data; boundary=${BOUNDARY}`
              : 'application/octet-stream';
            const head =
              `POST ${CREATE} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${user.authorization}\r\n` +
              `Content-Type: ${type}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`;
            const answer = await sendInPieces(port, head, body, cuts, pauses);
            assert.match(answer, /^HTTP\/1\.1 200 /, answer.slice(0, 200));
            const id = Number(/\{"id":(\d+)\}$/.exec(answer)?.[1]);
            const row = await app.db
              .selectFrom('attachment_data')
              .select('blob_data')
              .where('id', '=', id)
              .executeTakeFirstOrThrow();
            assert.ok(
              row.blob_data !== null && Buffer.from(row.blob_data).equals(file),
              'stored byte for byte',
            );
          },
        ),
        { seed: SEED, numRuns: Math.max(1, Math.round(24 * SCALE)) },
      );
      assert.equal(app.app.heavyGate?.active, 0, 'every slot is free again');
    });
  });
});
