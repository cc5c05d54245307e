/**
 * The one way the service writes a file (stored files, dataset and audit exports, scripts the CLI
 * writes): the content goes to a temporary file beside the target (`<target>.<random>.tmp`, in the same
 * directory so that the rename stays on one file system), which is fsynced, renamed over the target, and
 * the directory fsynced. The target then holds the whole new content or is as it was before, and the new
 * content is on disk when the write resolves. A write that fails (the content's source, the disk, the
 * rename) removes its temporary file. A crash of the process can still leave the temporary file behind:
 * the protected file store's orphan sweep removes those of stored files.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import path from 'node:path';

export interface DurableWriteOptions {
  /** Permission bits of a new file; default 0o600 (owner only: exports hold patient data). */
  readonly mode?: number;
  /** Creates the target's directory (0o770) when it is missing; default false. */
  readonly createDirectory?: boolean;
}

/** Appends a chunk to the file being written; strings are written as UTF-8. */
export type DurableWrite = (chunk: string | Uint8Array) => Promise<void>;

/** Small chunks are gathered up to this size before a write: one system call per line would be slow. */
const GATHER_BYTES = 64 * 1024;

/**
 * Writes what `produce` writes through its `write` at `target`, durably and whole or not at all, and
 * answers what `produce` answered. When `produce` (or a write) rejects, the target is left as it was and
 * the temporary file removed. `write` must be awaited; the chunk may be reused once it resolves.
 */
export async function writeDurably<T>(
  target: string,
  produce: (write: DurableWrite) => Promise<T>,
  options: DurableWriteOptions = {},
): Promise<T> {
  const dir = path.dirname(target);
  if (options.createDirectory === true) await mkdir(dir, { recursive: true, mode: 0o770 });
  const temp = `${target}.${randomBytes(6).toString('hex')}.tmp`;
  const handle = await open(temp, 'wx', options.mode ?? 0o600);
  let isClosed = false;
  try {
    let gathered: Buffer[] = [];
    let gatheredBytes = 0;
    const writeAll = async (bytes: Uint8Array) => {
      for (let at = 0; at < bytes.length; ) {
        at += (await handle.write(bytes, at, bytes.length - at)).bytesWritten;
      }
    };
    const flush = async () => {
      if (gatheredBytes === 0) return;
      const bytes = gathered.length === 1 ? gathered[0]! : Buffer.concat(gathered, gatheredBytes);
      gathered = [];
      gatheredBytes = 0;
      await writeAll(bytes);
    };
    const write: DurableWrite = async (chunk) => {
      const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      if (bytes.length >= GATHER_BYTES) {
        await flush();
        await writeAll(bytes);
        return;
      }
      // A copy: the caller may reuse its chunk once the write resolves.
      gathered.push(typeof chunk === 'string' ? (bytes as Buffer) : Buffer.from(bytes));
      gatheredBytes += bytes.length;
      if (gatheredBytes >= GATHER_BYTES) await flush();
    };
    const result = await produce(write);
    await flush();
    await handle.sync();
    isClosed = true;
    await handle.close();
    await rename(temp, target);
    await syncDirectory(dir).catch(async (error: unknown) => {
      // Renamed but not known to be on disk: no file that looks complete is left behind.
      await rm(target, { force: true });
      throw error;
    });
    return result;
  } catch (error) {
    if (!isClosed) await handle.close().catch(() => {});
    await rm(temp, { force: true });
    throw error;
  }
}

/** Writes `bytes` at `target` durably, whole or not at all (see {@link writeDurably}). */
export async function writeFileDurably(
  target: string,
  bytes: string | Uint8Array,
  options: DurableWriteOptions = {},
): Promise<void> {
  await writeDurably(target, (write) => write(bytes), options);
}

/**
 * Writes every chunk of `source` (a stream, or any async iterable) at `target` durably, whole or not at
 * all: when the source fails part way, the target is left as it was (see {@link writeDurably}).
 */
export async function writeStreamDurably(
  target: string,
  source: AsyncIterable<string | Uint8Array>,
  options: DurableWriteOptions = {},
): Promise<void> {
  await writeDurably(
    target,
    async (write) => {
      for await (const chunk of source) await write(chunk);
    },
    options,
  );
}

async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}
