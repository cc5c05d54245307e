import assert from 'node:assert/strict';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { loadConfig } from '../config.ts';
import { openDatabase } from './database.ts';
import { migrateToLatest } from './migrate.ts';
import { QueueWorkerLockedError, lockQueueWorker } from './sqlite-files.ts';

const modeOf = async (file: string): Promise<number> => (await stat(file)).mode & 0o777;

describe('SQLite files', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'cra-sqlite-files-'));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('creates the data folder 0700 and the database, -wal and -shm files 0600', async () => {
    const previous = process.umask(0o022);
    try {
      const file = path.join(dir, 'data', 'nested', 'records.db');
      const database = await openDatabase(loadConfig({ DATABASE_URL: `sqlite:${file}` }).database);
      try {
        await migrateToLatest(database);
        await sql`select count(*) from patient`.execute(database.db);
        assert.equal(await modeOf(path.join(dir, 'data')), 0o700);
        assert.equal(await modeOf(path.dirname(file)), 0o700);
        assert.equal(await modeOf(file), 0o600);
        assert.equal(await modeOf(`${file}-wal`), 0o600);
        assert.equal(await modeOf(`${file}-shm`), 0o600);
      } finally {
        await database.close();
      }
    } finally {
      process.umask(previous);
    }
  });

  it('lets one holder take the queue worker lock, refuses a second with a clear message, and frees it on release', () => {
    const target = { kind: 'sqlite', file: path.join(dir, 'locked.db') } as const;
    const first = lockQueueWorker(target);
    assert.throws(
      () => lockQueueWorker(target),
      (error: unknown) =>
        error instanceof QueueWorkerLockedError &&
        /Another queue worker already runs on the SQLite database .*locked\.db/.test(error.message) &&
        /WORKER=off/.test(error.message),
    );
    first.release();
    lockQueueWorker(target).release();
  });

  it('locks nothing on PostgreSQL, where several workers are safe', () => {
    const target = { kind: 'postgres', url: 'postgres://127.0.0.1/none' } as const;
    lockQueueWorker(target);
    lockQueueWorker(target).release();
  });
});
