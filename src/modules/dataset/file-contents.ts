/**
 * Writes a protected file under a uid the dataset gives (the file store itself always draws a new uid),
 * with the store's durable write.
 */
import { readFile, rm } from 'node:fs/promises';
import type { FileStore } from '../../files/file-store.ts';
import { writeFileDurably } from '../../files/durable-file.ts';
import { STORED_FILE } from '../../files/file-store.ts';

export const FILE_UID = /^[0-9a-f]{40}$/;

/** Content of the file of `uid`, or undefined when the store has none. */
export async function readStoredFile(files: FileStore, uid: string): Promise<Buffer | undefined> {
  if (!FILE_UID.test(uid)) return undefined;
  try {
    return await readFile(files.resolve(files.relativePathOf(uid)));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/**
 * Writes `bytes` as the file of `uid` unless it is already there with the same bytes. Returns true when
 * this call created the file, false when it was already there. Refuses to replace different content:
 * a dataset never overwrites a stored file (it could not be restored if the import then failed).
 */
export async function writeStoredFile(files: FileStore, uid: string, bytes: Buffer): Promise<boolean> {
  const existing = await readStoredFile(files, uid);
  if (existing !== undefined) {
    if (Buffer.compare(existing, bytes) === 0) return false;
    throw new Error('the file store already holds different content under this uid');
  }
  await writeFileDurably(files.resolve(files.relativePathOf(uid)), bytes, STORED_FILE);
  return true;
}

export async function removeStoredFile(files: FileStore, uid: string): Promise<void> {
  await rm(files.resolve(files.relativePathOf(uid)), { force: true });
}
