/**
 * The protected file store (OpenEyes `protected_file`): files named by a 40-hex uid from a CSPRNG, fanned out
 * as `<root>/<uid[0]>/<uid[1]>/<uid[2]>/<uid>`. Writes go through the durable writer (`durable-file.ts`): a
 * file either exists whole or not at all, and is durable when `write` resolves.
 */
import { randomBytes } from 'node:crypto';
import { readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { writeFileDurably } from './durable-file.ts';

export interface StoredFile {
  readonly uid: string;
  /** Path relative to the store root, as stored in the database: never an absolute server path. */
  readonly relativePath: string;
  readonly sizeBytes: number;
}

export interface FileStore {
  readonly root: string;
  /** Writes `bytes` durably under a new uid. */
  write(bytes: Uint8Array): Promise<StoredFile>;
  read(uid: string): Promise<Buffer>;
  exists(uid: string): Promise<boolean>;
  /** Removes the file of `uid`; a missing file is not an error. */
  remove(uid: string): Promise<void>;
  /** Relative path of `uid`. */
  relativePathOf(uid: string): string;
  /** Absolute path of a relative path, refusing anything that escapes the root. */
  resolve(relativePath: string): string;
}

const UID = /^[0-9a-f]{40}$/;

/** How a stored file is written: group-readable, in its fan-out directory made on first use. */
export const STORED_FILE = { mode: 0o640, createDirectory: true } as const;

export function createLocalFileStore(root: string): FileStore {
  const absoluteRoot = path.resolve(root);
  const relativePathOf = (uid: string): string => {
    if (!UID.test(uid)) throw new Error('Invalid file uid');
    return path.join(uid[0]!, uid[1]!, uid[2]!, uid);
  };
  const resolve = (relativePath: string): string => {
    const full = path.resolve(absoluteRoot, relativePath);
    if (!full.startsWith(absoluteRoot + path.sep)) throw new Error('Path escapes the file store');
    return full;
  };

  return {
    root: absoluteRoot,
    relativePathOf,
    resolve,
    async write(bytes) {
      const uid = randomBytes(20).toString('hex');
      const relativePath = relativePathOf(uid);
      const target = resolve(relativePath);
      await writeFileDurably(target, bytes, STORED_FILE);
      return { uid, relativePath, sizeBytes: bytes.byteLength };
    },
    read: (uid) => readFile(resolve(relativePathOf(uid))),
    async exists(uid) {
      try {
        await stat(resolve(relativePathOf(uid)));
        return true;
      } catch {
        return false;
      }
    },
    async remove(uid) {
      await rm(resolve(relativePathOf(uid)), { force: true });
    },
  };
}
