/**
 * The files of an embedded SQLite database, which hold patient data and password hashes: the folder is
 * created owner-only (0700) and the database file owner-only (0600) before SQLite opens it. SQLite gives
 * the `-wal` and `-shm` files it creates the permissions of the database file, so they are 0600 too.
 * Existing files keep the permissions they have (docs/OPERATIONS.md says how to tighten them).
 *
 * And the queue worker lock: SQLite serves one queue worker (the server's in-process one or one
 * `npm run worker`), so the process that runs it takes an exclusive SQLite lock on a file beside the
 * database and holds it while it lives. The kernel releases the lock when the process ends, however it
 * ends, so a crash never leaves a stale lock behind. On PostgreSQL several workers are safe and nothing
 * is locked: this function is the one place that decides by the database kind.
 */
import { closeSync, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import type { DatabaseTarget } from '../config.ts';

/** Creates the folder (0700) and an empty database file (0600) when they do not exist. */
export function createPrivateSqliteFile(file: string): void {
  mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  try {
    closeSync(openSync(file, 'wx', 0o600));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
}

export interface QueueWorkerLock {
  release(): void;
}

/** Another process runs the queue worker of this SQLite database. */
export class QueueWorkerLockedError extends Error {
  constructor(databaseFile: string, lockFile: string) {
    super(
      `Another queue worker already runs on the SQLite database ${databaseFile} (a process holds ` +
        `${lockFile}; "fuser ${lockFile}" names it). SQLite supports one queue worker: stop the other ` +
        'one, or run the servers with WORKER=off beside a single "npm run worker". Several workers need ' +
        'PostgreSQL.',
    );
    this.name = 'QueueWorkerLockedError';
  }
}

/**
 * Takes the queue worker lock of `target` for this process, or throws {@link QueueWorkerLockedError}
 * at once when another process holds it. A no-op on PostgreSQL.
 */
export function lockQueueWorker(target: DatabaseTarget): QueueWorkerLock {
  if (target.kind !== 'sqlite' || target.file === ':memory:') return { release() {} };
  const lockFile = `${target.file}-queue-worker.lock`;
  createPrivateSqliteFile(lockFile);
  const lock = new DatabaseSync(lockFile);
  try {
    // No busy timeout: a held lock is an answer, not something to wait for.
    lock.exec('PRAGMA busy_timeout = 0');
    lock.exec('BEGIN EXCLUSIVE');
  } catch (error) {
    lock.close();
    if (/locked|busy/i.test((error as Error).message))
      throw new QueueWorkerLockedError(target.file, lockFile);
    throw error;
  }
  return {
    release() {
      if (lock.isOpen) lock.close();
    },
  };
}
