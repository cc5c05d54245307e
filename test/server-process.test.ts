import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import type { TestDatabase } from './harness.ts';
import { createTestDatabase, forEachDialect } from './harness.ts';

const SERVER = new URL('../src/main/server.ts', import.meta.url).pathname;
const mysqlSkip = process.env.TEST_MYSQL_URL ? false : 'TEST_MYSQL_URL is not set (no MariaDB/MySQL server)';

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
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    const match = /Server listening at http:\/\/127\.0\.0\.1:(\d+)/.exec(output);
    if (match !== null && output.includes('clinical-records-api ready'))
      return { child, port: Number(match[1]), output: () => output };
    if (child.exitCode !== null) break;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  child.kill('SIGKILL');
  throw new Error(`server did not start:\n${output}`);
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

  it('stops with one line naming the cause and exit status 2 when the database refuses connections', () => {
    // Port 9 (discard) has no listener on the test machines: the connection is refused.
    for (const url of ['postgres://nobody@127.0.0.1:9/none', 'mysql://nobody@127.0.0.1:9/none']) {
      const result = spawnSync(process.execPath, [SERVER], {
        env: { ...process.env, DATABASE_URL: url, LOG_LEVEL: 'silent' },
        encoding: 'utf8',
      });
      assert.equal(result.status, 2, result.stderr);
      assert.equal(result.stderr, 'Cannot use the database: connect ECONNREFUSED 127.0.0.1:9\n');
    }
  });

  it('names a wrong password or an unknown database in that one line', { skip: mysqlSkip }, () => {
    const url = new URL(process.env.TEST_MYSQL_URL!);
    const wrongPassword = new URL(url);
    wrongPassword.password = 'not-the-password';
    const unknownDatabase = new URL(url);
    unknownDatabase.pathname = '/cra_no_such_database';
    for (const [target, cause] of [
      [wrongPassword, /^Cannot use the database: Access denied for user .*\n$/],
      [unknownDatabase, /^Cannot use the database: Unknown database 'cra_no_such_database'\n$/],
    ] as const) {
      const result = spawnSync(process.execPath, [SERVER], {
        env: { ...process.env, DATABASE_URL: target.toString(), LOG_LEVEL: 'silent' },
        encoding: 'utf8',
      });
      assert.equal(result.status, 2, result.stderr);
      assert.match(result.stderr, cause);
    }
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
