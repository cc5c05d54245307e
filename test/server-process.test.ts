// test-needs: processes
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { TestDatabase } from './harness.ts';
import { createTestDatabase, forEachDialect } from './harness.ts';
import { until } from './until.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const SERVER = path.join(ROOT, 'src/main/server.ts');
const WORKER = path.join(ROOT, 'src/main/worker.ts');
const mysqlSkip = process.env.TEST_MYSQL_URL ? false : 'TEST_MYSQL_URL is not set (no MariaDB/MySQL server)';

interface Started {
  readonly child: ChildProcess;
  output(): string;
}

/** Starts `command args` and keeps its stdout and stderr together. */
function start(command: string, args: readonly string[], env: Record<string, string>): Started {
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { ...process.env, ...env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  after(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return { child, output: () => output };
}

/** Waits until the output matches `pattern`; fails with the output if the process ends first. */
async function waitFor(started: Started, pattern: RegExp): Promise<RegExpExecArray> {
  let match: RegExpExecArray | null = null;
  try {
    await until(
      () => {
        match = pattern.exec(started.output());
        if (match === null && started.child.exitCode !== null) throw new Error('the process exited');
        return match !== null;
      },
      { intervalMs: 50, what: String(pattern) },
    );
  } catch (error) {
    throw new Error(
      `no ${String(pattern)} in the output (${(error as Error).message}):\n${started.output()}`,
    );
  }
  return match!;
}

async function exitOf(started: Started): Promise<number | null> {
  if (started.child.exitCode !== null) return started.child.exitCode;
  const [code] = (await once(started.child, 'exit')) as [number | null];
  return code;
}

/** True when `pid` still ran; it is then killed, so that a failing test does not leave it behind. */
function killIfAlive(pid: number): boolean {
  try {
    process.kill(pid, 'SIGKILL');
    return true;
  } catch {
    return false;
  }
}

const UNITS = {
  server: 'docs/systemd/clinical-records-api.service',
  worker: 'docs/systemd/clinical-records-api-worker.service',
} as const;

/** The unit's text with its installation directory replaced by this checkout. */
function unitHere(unit: string): string {
  const text = readFileSync(path.join(ROOT, unit), 'utf8');
  const dir = /^WorkingDirectory=(.+)$/m.exec(text)?.[1];
  assert.ok(dir !== undefined, `${unit} has a WorkingDirectory`);
  return text.replaceAll(dir, ROOT);
}

/** The command of the unit's ExecStart, run from this checkout. */
function documentedCommand(unit: string): { command: string; args: string[] } {
  const exec = /^ExecStart=(.+)$/m.exec(unitHere(unit))?.[1];
  assert.ok(exec !== undefined, `${unit} has an ExecStart`);
  const [command, ...args] = exec.split(' ');
  return { command: command!, args };
}

/** `npm run <script>` with the npm that runs this test suite (or the one on PATH). */
function startNpm(script: string, env: Record<string, string>): Started {
  const npmCli = process.env.npm_execpath;
  return npmCli !== undefined && npmCli.endsWith('.js')
    ? start(process.execPath, [npmCli, 'run', script], env)
    : start('npm', ['run', script], env);
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

describe('the documented service commands', () => {
  it('run the pinned Node (24 or later) on the entry points, and systemd finds nothing to correct in the units', () => {
    for (const [role, unit] of Object.entries(UNITS)) {
      const { command, args } = documentedCommand(unit);
      assert.equal(command, path.join(ROOT, 'node_modules/.bin/node'));
      assert.deepEqual(args, ['--max-semi-space-size=16', `src/main/${role}.ts`]);
      const version = spawnSync(command, ['--version'], { encoding: 'utf8' }).stdout;
      assert.ok(Number(/^v(\d+)\./.exec(version)?.[1]) >= 24, version);
    }
    if (!existsSync('/usr/bin/systemd-analyze')) {
      process.stderr.write('systemd-analyze not installed: the units are not verified by systemd\n');
      return;
    }
    const dir = mkdtempSync(path.join(tmpdir(), 'cra-units-'));
    try {
      for (const unit of Object.values(UNITS)) {
        const file = path.join(dir, path.basename(unit));
        writeFileSync(file, unitHere(unit));
        const verified = spawnSync('/usr/bin/systemd-analyze', ['verify', file], { encoding: 'utf8' });
        assert.equal(verified.status, 0, verified.stderr);
        assert.equal(verified.stderr, '', `${unit}: ${verified.stderr}`);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

forEachDialect((dialect) => {
  describe(`server and worker processes [${dialect}]`, () => {
    let testDb: TestDatabase;
    before(async () => {
      testDb = await createTestDatabase(dialect);
    });
    after(() => testDb.drop());

    it('serves with the documented command, logs no query strings, and stops cleanly on SIGTERM', async () => {
      const { command, args } = documentedCommand(UNITS.server);
      const server = start(command, args, testDb.env);
      const [, port] = await waitFor(server, /Server listening at http:\/\/127\.0\.0\.1:(\d+)[\s\S]*ready/);
      const base = `http://127.0.0.1:${port}`;
      assert.equal((await fetch(`${base}/readyz`)).status, 200);
      const response = await fetch(`${base}/healthz?term=SecretSurname`, {
        headers: { authorization: `Basic ${Buffer.from('nobody:pw').toString('base64')}` },
      });
      assert.equal(response.status, 200);
      server.child.kill('SIGTERM');
      assert.equal(await exitOf(server), 0);
      assert.match(server.output(), /"msg":"stopped"/);
      // A new database without demo data has no login: the start says how to create one.
      assert.match(server.output(), /no user can log in yet: create one with .*user create/);
      assert.doesNotMatch(server.output(), /SecretSurname/);
      assert.doesNotMatch(server.output(), /bm9ib2R5OnB3/);
    });

    it('npm start stopped with SIGTERM stops the Node server too, gracefully, and npm exits 0', async () => {
      const npm = startNpm('start', testDb.env);
      const [, pid, port] = await waitFor(
        npm,
        /"pid":(\d+)[^\n]*"msg":"Server listening at http:\/\/127\.0\.0\.1:(\d+)"/,
      );
      await waitFor(npm, /clinical-records-api ready/);
      assert.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200);
      npm.child.kill('SIGTERM');
      const code = await exitOf(npm);
      assert.equal(killIfAlive(Number(pid)), false, 'the server process is gone, not re-parented');
      assert.equal(code, 0, npm.output());
      assert.match(npm.output(), /"signal":"SIGTERM","msg":"stopping"[\s\S]*"msg":"stopped"/);
      await assert.rejects(fetch(`http://127.0.0.1:${port}/healthz`), 'nothing listens any more');
    });

    it('npm run worker stopped with SIGTERM stops the worker process too, and npm exits 0', async () => {
      const npm = startNpm('worker', testDb.env);
      const [, pid] = await waitFor(npm, /"pid":(\d+)[^\n]*"msg":"queue worker ready"/);
      npm.child.kill('SIGTERM');
      const code = await exitOf(npm);
      assert.equal(killIfAlive(Number(pid)), false, 'the worker process is gone, not re-parented');
      assert.equal(code, 0, npm.output());
      assert.match(npm.output(), /"msg":"stopped"/);
    });

    if (dialect === 'sqlite') {
      it('refuses a second queue worker on the same SQLite database with a clear message, until the first ends', async () => {
        const first = start(process.execPath, [WORKER], testDb.env);
        await waitFor(first, /queue worker ready/);
        const second = start(process.execPath, [WORKER], testDb.env);
        assert.equal(await exitOf(second), 1);
        assert.match(second.output(), /Another queue worker already runs on the SQLite database/);
        assert.doesNotMatch(second.output(), /queue worker ready/);
        // The server's in-process worker counts as the one worker too.
        const server = start(process.execPath, [SERVER], { ...testDb.env, WORKER: 'in-process' });
        assert.equal(await exitOf(server), 1);
        assert.match(server.output(), /Another queue worker already runs/);
        assert.doesNotMatch(server.output(), /Server listening/);
        // A crash releases the lock: no stale lock file to clean up by hand.
        first.child.kill('SIGKILL');
        await exitOf(first);
        const third = start(process.execPath, [WORKER], testDb.env);
        await waitFor(third, /queue worker ready/);
        third.child.kill('SIGTERM');
        assert.equal(await exitOf(third), 0);
      });
    } else {
      it('lets several queue workers serve one PostgreSQL database', async () => {
        const first = start(process.execPath, [WORKER], testDb.env);
        const second = start(process.execPath, [WORKER], testDb.env);
        await waitFor(first, /queue worker ready/);
        await waitFor(second, /queue worker ready/);
        first.child.kill('SIGTERM');
        second.child.kill('SIGTERM');
        assert.deepEqual(await Promise.all([exitOf(first), exitOf(second)]), [0, 0]);
      });
    }
  });
});
