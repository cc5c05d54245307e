// test-needs: processes
/**
 * Several server processes (SERVER_PROCESSES, node:cluster): the real server as a child process, its
 * processes told apart by the `pid` of their log lines (nothing public exposes a pid) and checked in /proc.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { ConfigError, loadConfig } from '../src/config.ts';
import type { TestDatabase } from './harness.ts';
import { createTestDatabase, forEachDialect } from './harness.ts';
import { until } from './until.ts';

const SERVER = new URL('../src/main/server.ts', import.meta.url).pathname;

interface LogLine {
  readonly pid: number;
  readonly msg: string;
  readonly [key: string]: unknown;
}

interface Cluster {
  readonly child: ChildProcess;
  readonly port: number;
  lines(): LogLine[];
  /** Resolves with the first log line matching `test`, polling the output until `timeoutMs`. */
  waitFor(test: (line: LogLine) => boolean, timeoutMs?: number): Promise<LogLine>;
}

async function startCluster(env: Record<string, string>): Promise<Cluster> {
  const child = spawn(process.execPath, [SERVER], {
    env: { ...process.env, ...env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const lines = (): LogLine[] =>
    output.split('\n').flatMap((text) => {
      try {
        const line = JSON.parse(text) as LogLine;
        return typeof line === 'object' && line !== null && typeof line.msg === 'string' ? [line] : [];
      } catch {
        return [];
      }
    });
  const waitFor = async (test: (line: LogLine) => boolean, timeoutMs = 90_000): Promise<LogLine> => {
    let found: LogLine | undefined;
    try {
      await until(
        () => {
          found = lines().find(test);
          if (found === undefined && child.exitCode !== null) throw new Error('the server exited');
          return found !== undefined;
        },
        { timeoutMs, intervalMs: 50 },
      );
    } catch {
      throw new Error(`log line not seen; output:\n${output}`);
    }
    return found!;
  };
  try {
    await waitFor((line) => line.pid === child.pid && line.msg === 'clinical-records-api ready');
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  const listening = lines().find((line) => line.msg.startsWith('Server listening at'))!;
  const port = Number(/:(\d+)$/.exec(listening.msg)![1]);
  return { child, port, lines, waitFor };
}

/** A GET on a new connection each time, so that the cluster hands it to the next process. */
function get(port: number, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = http.get({ host: '127.0.0.1', port, path, agent: false }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode ?? 0));
    });
    request.on('error', reject);
  });
}

function parentPid(pid: number): number {
  return Number(/^PPid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]);
}

describe('SERVER_PROCESSES', () => {
  it('defaults to one process, takes a count or auto (one per core), and refuses 0 or words', () => {
    assert.equal(loadConfig({}).serverProcesses, 1);
    assert.equal(loadConfig({ SERVER_PROCESSES: '3' }).serverProcesses, 3);
    assert.equal(loadConfig({ SERVER_PROCESSES: 'auto' }).serverProcesses, availableParallelism());
    assert.throws(() => loadConfig({ SERVER_PROCESSES: '0' }), ConfigError);
    assert.throws(() => loadConfig({ SERVER_PROCESSES: 'many' }), ConfigError);
  });
});

forEachDialect((dialect) => {
  describe(`server processes (SERVER_PROCESSES=2) [${dialect}]`, () => {
    let testDb: TestDatabase;
    let cluster: Cluster;
    before(async () => {
      testDb = await createTestDatabase(dialect);
      // An empty database, so that the server runs the migrations itself.
      const env = { ...testDb.env };
      if (dialect === 'sqlite')
        env.DATABASE_URL = `sqlite:${path.join(path.dirname(testDb.filesDir), 'empty.db')}`;
      else if (dialect === 'mysql') {
        const name = new URL(testDb.url).pathname.slice(1);
        await sql`drop database ${sql.id(name)}`.execute(testDb.db);
        await sql`create database ${sql.id(name)} character set utf8mb4 collate utf8mb4_unicode_ci`.execute(
          testDb.db,
        );
      } else await sql`drop schema public cascade; create schema public`.execute(testDb.db);
      cluster = await startCluster({ ...env, SERVER_PROCESSES: '2', WORKER: 'in-process' });
    });
    after(async () => {
      cluster?.child.kill('SIGKILL');
      await testDb.drop();
    });

    it('forks two server processes that share the port and both answer', async () => {
      const ready = await cluster.waitFor((line) => line.msg === 'clinical-records-api ready');
      const pids = ready.pids as number[];
      assert.equal(pids.length, 2);
      assert.equal(new Set(pids).size, 2);
      for (const pid of pids) assert.equal(parentPid(pid), cluster.child.pid);
      for (let i = 0; i < 8; i += 1) assert.equal(await get(cluster.port, '/readyz'), 200);
      const answering = new Set(
        cluster
          .lines()
          .filter((line) => line.msg === 'request completed')
          .map((line) => line.pid),
      );
      assert.deepEqual([...answering].sort(), [...pids].sort());
    });

    it('runs the migrations once, in the primary, and the in-process queue worker in one process only', () => {
      const migrated = cluster.lines().filter((line) => line.msg === 'database migrated');
      assert.deepEqual(
        migrated.map((line) => line.pid),
        [cluster.child.pid],
      );
      const queuePids = new Set(
        cluster
          .lines()
          .filter((line) => line.msg === 'queue worker serving')
          .map((line) => line.pid),
      );
      assert.equal(queuePids.size, 1);
    });

    it('restarts a crashed process (the queue worker with it) and keeps serving', async () => {
      const queuePid = cluster.lines().find((line) => line.msg === 'queue worker serving')!.pid;
      const knownPids = new Set(cluster.lines().map((line) => line.pid));
      process.kill(queuePid, 'SIGKILL');
      await cluster.waitFor((line) => line.msg === 'server process exited unexpectedly; restarting');
      const restarted = await cluster.waitFor(
        (line) => line.msg === 'server process ready' && !knownPids.has(line.pid),
      );
      assert.equal(parentPid(restarted.pid), cluster.child.pid);
      await cluster.waitFor((line) => line.msg === 'queue worker serving' && line.pid === restarted.pid);
      for (let i = 0; i < 4; i += 1) assert.equal(await get(cluster.port, '/healthz'), 200);
    });

    it('stops every process on SIGTERM and exits 0', async () => {
      const serving = new Set(
        cluster
          .lines()
          .filter((line) => line.msg === 'server process ready')
          .map((line) => line.pid)
          .filter((pid) => existsSync(`/proc/${pid}`)),
      );
      assert.equal(serving.size, 2);
      const exited = once(cluster.child, 'exit');
      cluster.child.kill('SIGTERM');
      const [code] = (await exited) as [number | null];
      assert.equal(code, 0);
      const stoppedPids = cluster
        .lines()
        .filter((line) => line.msg === 'stopped')
        .map((line) => line.pid);
      for (const pid of serving) {
        assert.ok(stoppedPids.includes(pid), `process ${pid} logged "stopped"`);
        assert.equal(existsSync(`/proc/${pid}`), false);
      }
      assert.ok(stoppedPids.includes(cluster.child.pid!));
    });
  });
});
