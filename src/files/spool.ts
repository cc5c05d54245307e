/**
 * Spooled upload bytes: a body (or a multipart file part) kept in memory up to a threshold and, past it,
 * written to a private temporary file in `<FILES_DIR>/.incoming` as it arrives, so that slow or many
 * concurrent uploads cost disk, not memory. Files left by a crash are removed by
 * {@link removeStaleSpoolFiles} (the orphan sweep): none can outlive the request time limit while its
 * request is alive.
 */
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, readdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { AppError } from '../errors.ts';

/** Where spooled bodies go, below the protected files directory (same file system, private). */
export function spoolDirOf(filesDir: string): string {
  return path.join(filesDir, '.incoming');
}

/** The bytes of one body or file part: in memory when small, else in a temporary file. */
export interface SpooledBytes {
  readonly sizeBytes: number;
  /** The first bytes (up to 64 KiB), for content sniffing without loading the rest. */
  readonly head: Buffer;
  /** Whether the bytes are in a temporary file (then {@link UploadMemory} must be reserved to load them). */
  readonly isOnDisk: boolean;
  /** The whole content. */
  load(): Promise<Buffer>;
  /** Removes the temporary file, if any (idempotent). */
  dispose(): Promise<void>;
}

export interface SpoolOptions {
  readonly dir: string;
  readonly memoryThresholdBytes: number;
  /** Bytes beyond this answer 413. */
  readonly limitBytes: number;
}

const HEAD_BYTES = 64 * 1024;

/** Bodies up to this size stay in memory (most queue submissions); larger ones go to a file. */
export const SPOOL_THRESHOLD_BYTES = 1024 * 1024;

function inMemory(bytes: Buffer): SpooledBytes {
  return {
    sizeBytes: bytes.length,
    head: bytes.subarray(0, HEAD_BYTES),
    isOnDisk: false,
    load: async () => bytes,
    dispose: async () => {},
  };
}

/**
 * Reads `source` to its end into memory or, past the threshold, into a new temporary file. Rejects with a
 * 413 AppError past the limit, and with the stream's error when it fails (an aborted upload): the file is
 * removed in both cases.
 */
export async function spoolStream(source: Readable, options: SpoolOptions): Promise<SpooledBytes> {
  const chunks: Buffer[] = [];
  let sizeBytes = 0;
  let file: SpoolFile | undefined;
  let head = Buffer.alloc(0);
  const removeFile = async () => {
    if (file === undefined) return;
    file.stream.destroy();
    await rm(file.path, { force: true });
  };
  try {
    for await (const chunk of source as AsyncIterable<Buffer>) {
      sizeBytes += chunk.length;
      if (sizeBytes > options.limitBytes) throw new AppError('payload_too_large', 'Payload too large.');
      if (head.length < HEAD_BYTES) head = Buffer.concat([head, chunk.subarray(0, HEAD_BYTES - head.length)]);
      if (file === undefined && sizeBytes <= options.memoryThresholdBytes) {
        chunks.push(chunk);
        continue;
      }
      if (file === undefined) {
        await mkdir(options.dir, { recursive: true, mode: 0o700 });
        const filePath = path.join(options.dir, `${randomBytes(16).toString('hex')}.upload`);
        const opened: SpoolFile = {
          path: filePath,
          stream: createWriteStream(filePath, { mode: 0o600, flags: 'wx' }),
        };
        // Kept for the next write: an error between writes (or after a destroy) is never unhandled.
        opened.stream.on('error', (error) => {
          opened.error ??= error;
        });
        file = opened;
        for (const earlier of chunks.splice(0)) await write(file, earlier);
      }
      await write(file, chunk);
    }
    if (file === undefined) return inMemory(Buffer.concat(chunks, sizeBytes));
    const written = file;
    await new Promise<void>((resolve, reject) => {
      if (written.error !== undefined) reject(written.error);
      written.stream.once('error', reject);
      written.stream.end(resolve);
    });
    let isDisposed = false;
    return {
      sizeBytes,
      head,
      isOnDisk: true,
      load: () => readFile(written.path),
      dispose: async () => {
        if (isDisposed) return;
        isDisposed = true;
        await rm(written.path, { force: true });
      },
    };
  } catch (error) {
    await removeFile();
    // An over-limit body: stop reading it (the answer closes the connection).
    source.destroy();
    throw error;
  }
}

interface SpoolFile {
  readonly path: string;
  readonly stream: ReturnType<typeof createWriteStream>;
  /** The stream's first error, kept for the next write. */
  error?: Error;
}

function write(file: SpoolFile, chunk: Buffer): Promise<void> {
  return new Promise((resolve, reject) => {
    if (file.error !== undefined || file.stream.destroyed) {
      reject(file.error ?? new Error('spool file closed'));
      return;
    }
    const onError = (error: Error) => reject(error);
    file.stream.once('error', onError);
    const done = () => {
      file.stream.off('error', onError);
      resolve();
    };
    if (file.stream.write(chunk)) done();
    else file.stream.once('drain', done);
  });
}

/** Removes spool files older than `maxAgeMs` (left by a crash); resolves to how many were removed. */
export async function removeStaleSpoolFiles(dir: string, maxAgeMs: number): Promise<number> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw error;
  }
  let removed = 0;
  const cutoff = Date.now() - maxAgeMs;
  for (const name of names) {
    if (!name.endsWith('.upload')) continue;
    const full = path.join(dir, name);
    const info = await stat(full).catch(() => undefined);
    if (info === undefined || info.mtimeMs > cutoff) continue;
    await rm(full, { force: true });
    removed += 1;
  }
  return removed;
}
