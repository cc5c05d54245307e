/**
 * `isDatabaseUnavailable` on real driver errors: the ones meaning "the database cannot be used right now"
 * (answered 503 with Retry-After) and the ones that are bugs or bad data (500, or the caller's 4xx).
 */
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { describe, it } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { openDatabase } from '../../src/db/database.ts';
import { AppError, isDatabaseUnavailable } from '../../src/errors.ts';
import { DIALECTS, createTestDatabase } from '../harness.ts';

async function caught(run: () => unknown): Promise<unknown> {
  try {
    await run();
  } catch (error) {
    return error;
  }
  throw new Error('expected an error');
}

async function closedPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe('isDatabaseUnavailable', () => {
  it('is true for SQLite busy past busy_timeout, false for a constraint failure or a plain error', async () => {
    const file = path.join(tmpdir(), `cra-busy-${process.pid}-${Date.now()}.db`);
    const holder = new DatabaseSync(file);
    const other = new DatabaseSync(file);
    try {
      holder.exec('PRAGMA journal_mode = WAL; CREATE TABLE t (x INTEGER PRIMARY KEY)');
      other.exec('PRAGMA busy_timeout = 0');
      holder.exec('BEGIN IMMEDIATE; INSERT INTO t VALUES (1)');
      assert.equal(isDatabaseUnavailable(await caught(() => other.exec('INSERT INTO t VALUES (2)'))), true);
      holder.exec('COMMIT');
      assert.equal(isDatabaseUnavailable(await caught(() => other.exec('INSERT INTO t VALUES (1)'))), false);
      assert.equal(isDatabaseUnavailable(await caught(() => other.exec('SELECT nope FROM t'))), false);
    } finally {
      holder.close();
      other.close();
      for (const suffix of ['', '-wal', '-shm']) rmSync(`${file}${suffix}`, { force: true });
    }
    assert.equal(isDatabaseUnavailable(new Error('boom')), false);
    assert.equal(isDatabaseUnavailable(new AppError('bad_request', 'Bad request')), false);
    assert.equal(isDatabaseUnavailable(undefined), false);
  });

  if (DIALECTS.includes('postgres')) {
    it('is true for a refused PostgreSQL connection, also as the cause of another error', async () => {
      const port = await closedPort();
      const database = await openDatabase({
        kind: 'postgres',
        url: `postgres://postgres:postgres@127.0.0.1:${port}/postgres`,
      });
      try {
        const error = await caught(() => sql`select 1`.execute(database.db));
        assert.equal(isDatabaseUnavailable(error), true);
        assert.equal(isDatabaseUnavailable(new Error('wrapped', { cause: error })), true);
      } finally {
        await database.close();
      }
    });

    it('is true when PostgreSQL terminates the session (57P01), false for SQL and constraint errors', async () => {
      const testDb = await createTestDatabase('postgres');
      const killer = await openDatabase({ kind: 'postgres', url: testDb.url }, { poolSize: 1 });
      try {
        const victimPool = new pg.Pool({ connectionString: testDb.url, max: 1 });
        // The terminated client emits 'error' besides failing its query: only the query's error matters.
        victimPool.on('error', () => {});
        const victim = await victimPool.connect();
        victim.on('error', () => {});
        try {
          const { rows } = await victim.query<{ pid: number }>('select pg_backend_pid() as pid');
          const pending = caught(() => victim.query('select pg_sleep(10)'));
          await sql`select pg_terminate_backend(${rows[0]!.pid})`.execute(killer.db);
          assert.equal(isDatabaseUnavailable(await pending), true);
        } finally {
          victim.release(true);
          await victimPool.end();
        }
        assert.equal(isDatabaseUnavailable(await caught(() => sql`select nope`.execute(testDb.db))), false);
        await sql`create table t (x integer primary key)`.execute(testDb.db);
        await sql`insert into t values (1)`.execute(testDb.db);
        const duplicate = await caught(() => sql`insert into t values (1)`.execute(testDb.db));
        assert.equal((duplicate as { code?: string }).code, '23505');
        assert.equal(isDatabaseUnavailable(duplicate), false);
      } finally {
        await killer.close();
        await testDb.drop();
      }
    });
  }
});
