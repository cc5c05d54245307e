/**
 * The durable writer (`durable-file.ts`) on a real directory: the target holds the whole new content or
 * what it held before, and a write that fails part way (a source stream that errors after some of its
 * chunks reached the disk, a rename that the file system refuses) leaves no temporary file behind.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { writeDurably, writeFileDurably, writeStreamDurably } from './durable-file.ts';

const KiB = 1024;

/** A stream of `count` chunks of `size` bytes (each filled with its index), then an error. */
function failingStream(count: number, size: number): Readable {
  let sent = 0;
  return new Readable({
    read() {
      if (sent < count) this.push(Buffer.alloc(size, sent++));
      else this.destroy(new Error('the source failed'));
    },
  });
}

describe('durable file writer', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'cra-durable-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  /** The names in the directory of `target` (one test per directory, so strays are its own). */
  const namesBeside = async (target: string) => (await readdir(path.dirname(target))).sort();
  const fresh = async (name: string) => {
    const sub = await mkdtemp(path.join(dir, `${name}-`));
    return path.join(sub, 'target.out');
  };

  it('writes the whole content, owner-only unless told, and leaves only the target', async () => {
    const target = await fresh('whole');
    await writeFileDurably(target, 'first line\n');
    assert.equal(await readFile(target, 'utf8'), 'first line\n');
    assert.equal((await stat(target)).mode & 0o777, 0o600);
    assert.deepEqual(await namesBeside(target), ['target.out']);

    const shared = await fresh('mode');
    await writeFileDurably(shared, Buffer.from('x'), { mode: 0o644 });
    assert.equal((await stat(shared)).mode & 0o777, 0o644 & ~process.umask());
  });

  it('replaces an existing file with the new content', async () => {
    const target = await fresh('replace');
    await writeFile(target, 'old content that is longer than the new one');
    await writeFileDurably(target, 'new');
    assert.equal(await readFile(target, 'utf8'), 'new');
    assert.deepEqual(await namesBeside(target), ['target.out']);
  });

  it('creates the directory only when asked', async () => {
    const base = await fresh('directory');
    const nested = path.join(path.dirname(base), 'a', 'b', 'file');
    await assert.rejects(writeFileDurably(nested, 'x'), { code: 'ENOENT' });
    await writeFileDurably(nested, 'x', { createDirectory: true });
    assert.equal(await readFile(nested, 'utf8'), 'x');
  });

  it('streams many small and large chunks in order, and answers what the producer answered', async () => {
    const target = await fresh('stream');
    const lines = Array.from({ length: 5000 }, (_, i) => `line ${i}\n`);
    const large = Buffer.alloc(200 * KiB, 7);
    const reused = Buffer.alloc(10);
    const answer = await writeDurably(target, async (write) => {
      for (const line of lines.slice(0, 2500)) await write(line);
      await write(large);
      // A chunk the producer reuses once each write resolves (as the dataset export does).
      for (let i = 0; i < 3; i += 1) {
        reused.fill(0x61 + i);
        await write(reused);
      }
      for (const line of lines.slice(2500)) await write(line);
      return 'done';
    });
    assert.equal(answer, 'done');
    const expected = Buffer.concat([
      Buffer.from(lines.slice(0, 2500).join('')),
      large,
      Buffer.alloc(10, 0x61),
      Buffer.alloc(10, 0x62),
      Buffer.alloc(10, 0x63),
      Buffer.from(lines.slice(2500).join('')),
    ]);
    assert.ok((await readFile(target)).equals(expected));
  });

  it('leaves no file and no temporary file when the source stream fails part way', async () => {
    const target = await fresh('failing-new');
    // Four chunks of 256 KiB reach the temporary file before the source fails.
    await assert.rejects(writeStreamDurably(target, failingStream(4, 256 * KiB)), /the source failed/);
    assert.deepEqual(await namesBeside(target), []);
  });

  it('keeps the previous content when the source stream fails part way', async () => {
    const target = await fresh('failing-old');
    await writeFile(target, 'the previous export');
    await assert.rejects(writeStreamDurably(target, failingStream(3, 100 * KiB)), /the source failed/);
    assert.equal(await readFile(target, 'utf8'), 'the previous export');
    assert.deepEqual(await namesBeside(target), ['target.out']);
  });

  it('removes its temporary file when the producer throws after writing', async () => {
    const target = await fresh('producer');
    await assert.rejects(
      writeDurably(target, async (write) => {
        await write(Buffer.alloc(300 * KiB, 1));
        await write('and some text');
        throw new Error('the export failed');
      }),
      /the export failed/,
    );
    assert.deepEqual(await namesBeside(target), []);
  });

  it('removes its temporary file when the rename is refused, and leaves what was at the target', async () => {
    const target = await fresh('rename');
    // A directory that is not empty cannot be replaced by a file.
    await mkdir(path.join(target, 'inside'), { recursive: true });
    await assert.rejects(writeFileDurably(target, Buffer.alloc(100 * KiB)), {
      code: /^(EISDIR|ENOTEMPTY|EEXIST)$/,
    });
    assert.deepEqual(await namesBeside(target), ['target.out']);
    assert.ok((await stat(target)).isDirectory());
  });
});
