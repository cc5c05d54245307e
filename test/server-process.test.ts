import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import type { TestDatabase } from './harness.ts';
import { createTestDatabase, forEachDialect } from './harness.ts';
import { until } from './until.ts';

const SERVER = new URL('../src/main/server.ts', import.meta.url).pathname;

/** Starts the real server process and resolves with its port once it logs that it is ready. */
async function startServer(
  env: Record<string, string>,
): Promise<{ child: ChildProcess; port: number; output: () => string }> {
  const child = spawn(process.execPath, [SERVER], {
    env: { ...process.env, ...env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  let port: number | undefined;
  try {
    await until(
      () => {
        const match = /Server listening at http:\/\/127\.0\.0\.1:(\d+)/.exec(output);
        if (match !== null && output.includes('clinical-records-api ready')) port = Number(match[1]);
        else if (child.exitCode !== null) throw new Error('the server exited');
        return port !== undefined;
      },
      { intervalMs: 50 },
    );
  } catch {
    child.kill('SIGKILL');
    throw new Error(`server did not start:\n${output}`);
  }
  return { child, port: port!, output: () => output };
}

describe('server process configuration', () => {
  it('refuses to start on a bad configuration, listing every problem, with exit status 2', () => {
    const result = spawnSync(process.execPath, [SERVER], {
      env: { ...process.env, PORT: 'x', DATABASE_URL: 'oracle://nope', WORKER: 'sometimes' },
      encoding: 'utf8',
    });
    assert.equal(result.status, 2);
    assert.match(result.stderr, /Invalid configuration/);
    assert.match(result.stderr, /PORT/);
    assert.match(result.stderr, /DATABASE_URL/);
    assert.match(result.stderr, /WORKER/);
  });
});

forEachDialect((dialect) => {
  describe(`server process [${dialect}]`, () => {
    let testDb: TestDatabase;
    before(async () => {
      testDb = await createTestDatabase(dialect);
    });
    after(() => testDb.drop());

    it('serves, logs no query strings, and stops cleanly on SIGTERM', async () => {
      const server = await startServer(testDb.env);
      after(() => server.child.kill('SIGKILL'));
      const base = `http://127.0.0.1:${server.port}`;
      assert.equal((await fetch(`${base}/readyz`)).status, 200);
      const response = await fetch(`${base}/healthz?term=SecretSurname`, {
        headers: { authorization: `Basic ${Buffer.from('nobody:pw').toString('base64')}` },
      });
      assert.equal(response.status, 200);
      const exited = once(server.child, 'exit');
      server.child.kill('SIGTERM');
      const [code] = (await exited) as [number | null];
      assert.equal(code, 0);
      assert.match(server.output(), /"msg":"stopped"/);
      // A new database without demo data has no login: the start says how to create one.
      assert.match(server.output(), /no user can log in yet: create one with .*user create/);
      assert.doesNotMatch(server.output(), /SecretSurname/);
      assert.doesNotMatch(server.output(), /bm9ib2R5OnB3/);
    });
  });
});
