import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import type { MultipartSpoolOptions } from './multipart-spool.ts';
import { MultipartFramingError, spoolMultipartParts } from './multipart-spool.ts';

const BOUNDARY = 'b0undary';

/** `body` as a stream of chunks of the given sizes, in turn. */
function chunked(body: Buffer, sizes: readonly number[]): Readable {
  const chunks: Buffer[] = [];
  for (let offset = 0, i = 0; offset < body.length; i += 1) {
    const size = sizes[i % sizes.length]!;
    chunks.push(body.subarray(offset, offset + size));
    offset += size;
  }
  return Readable.from(chunks);
}

describe('spoolMultipartParts', () => {
  let dir: string;
  let options: MultipartSpoolOptions;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'cra-multipart-'));
    options = { boundary: BOUNDARY, maxPartBytes: 4 * 1024 * 1024, maxParts: 10, maxHeaderBytes: 1024, dir };
  });
  after(() => rm(dir, { recursive: true, force: true }));

  async function read(body: Readable, overrides: Partial<MultipartSpoolOptions> = {}) {
    const parts: { headers: Record<string, string>; content: Buffer; isOnDisk: boolean }[] = [];
    for await (const part of spoolMultipartParts(body, { ...options, ...overrides })) {
      parts.push({
        headers: { ...part.headers },
        content: await part.bytes.load(),
        isOnDisk: part.bytes.isOnDisk,
      });
      await part.bytes.dispose();
    }
    return parts;
  }

  it('reads each part whole, whatever the chunk boundaries', async () => {
    // Content that holds the boundary text without the line break before it, and CR LF pairs.
    const tricky = Buffer.from(`--${BOUNDARY} not a delimiter\r\n\r\n--${BOUNDARY.slice(0, 4)}\r\n-`);
    const other = randomBytes(5000);
    const body = Buffer.concat([
      Buffer.from(`preamble\r\n--${BOUNDARY}\r\nContent-Type: application/dicom\r\n\r\n`),
      tricky,
      Buffer.from(`\r\n--${BOUNDARY}  \r\n\r\n`),
      other,
      Buffer.from(`\r\n--${BOUNDARY}\r\nX-One: 1\r\n\r\n\r\n--${BOUNDARY}--\r\nepilogue`),
    ]);
    for (const sizes of [[1], [7, 3], [13, 2, 40], [body.length]]) {
      const parts = await read(chunked(body, sizes));
      assert.equal(parts.length, 3, String(sizes));
      assert.deepEqual(parts[0]!.headers, { 'content-type': 'application/dicom' });
      assert.ok(parts[0]!.content.equals(tricky));
      assert.deepEqual(parts[1]!.headers, {});
      assert.ok(parts[1]!.content.equals(other));
      assert.deepEqual(parts[2]!.headers, { 'x-one': '1' });
      assert.equal(parts[2]!.content.length, 0);
    }
  });

  it('spools a part past 1 MiB to a file, removed once disposed of', async () => {
    const large = randomBytes(1024 * 1024 + 100);
    const body = Buffer.concat([
      Buffer.from(`--${BOUNDARY}\r\n\r\n`),
      large,
      Buffer.from(`\r\n--${BOUNDARY}--\r\n`),
    ]);
    for (const sizes of [[4095, 17], [65_536]]) {
      const parts = await read(chunked(body, sizes));
      assert.equal(parts.length, 1);
      assert.ok(parts[0]!.content.equals(large));
      assert.equal(parts[0]!.isOnDisk, true);
    }
    assert.deepEqual(await readdir(dir), []);
  });

  it('stops at a broken framing or a limit, leaving no spool file', async () => {
    const part = (content: Buffer) => Buffer.concat([Buffer.from(`--${BOUNDARY}\r\n\r\n`), content]);
    const cases: [string, Buffer, Partial<MultipartSpoolOptions>, MultipartFramingError['kind']][] = [
      ['no close delimiter', part(randomBytes(2 * 1024 * 1024)), {}, 'malformed'],
      ['no delimiter at all', Buffer.from('just text'), {}, 'malformed'],
      ['text after a delimiter', Buffer.from(`--${BOUNDARY}x\r\n\r\n`), {}, 'malformed'],
      ['headers too large', Buffer.from(`--${BOUNDARY}\r\nX: ${'a'.repeat(2000)}`), {}, 'malformed'],
      ['a part over the limit', part(randomBytes(3000)), { maxPartBytes: 2000 }, 'too-large'],
      [
        'too many parts',
        Buffer.concat([part(Buffer.from('a\r\n')), part(Buffer.from('b\r\n'))]),
        { maxParts: 1 },
        'too-many-parts',
      ],
    ];
    for (const [name, body, overrides, kind] of cases) {
      await assert.rejects(read(chunked(body, [1000]), overrides), (error: unknown) => {
        assert.ok(error instanceof MultipartFramingError, name);
        assert.equal(error.kind, kind, name);
        return true;
      });
      assert.deepEqual(await readdir(dir), [], name);
    }
  });
});
