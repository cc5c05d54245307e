// test-needs: processes
/**
 * `npm start` with demo data listens on 127.0.0.1 only unless HOST is set, and says so at start: the demo
 * accounts' passwords are printed in the README.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { until } from './until.ts';

const ROOT = path.resolve(import.meta.dirname, '..');
const SERVER = path.join(ROOT, 'src/main/server.ts');
const READY = 'clinical-records-api ready';

/** Starts the server on a new SQLite database (demo data `auto`), with `env`; resolves once it is ready. */
async function startServer(env: Record<string, string>): Promise<{ child: ChildProcess; output: string[] }> {
  const dir = mkdtempSync(path.join(tmpdir(), 'cra-demo-listen-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const { HOST: _host, ...inherited } = process.env;
  const child = spawn(process.execPath, [SERVER], {
    cwd: ROOT,
    env: {
      ...inherited,
      DATABASE_URL: `sqlite:${path.join(dir, 'demo.db')}`,
      FILES_DIR: path.join(dir, 'files'),
      PORT: '0',
      LOG_LEVEL: 'info',
      WORKER: 'off',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  after(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
  });
  const output: string[] = [];
  let buffered = '';
  const collect = (chunk: Buffer) => {
    buffered += chunk.toString();
    const lines = buffered.split('\n');
    buffered = lines.pop()!;
    output.push(...lines);
  };
  child.stdout.on('data', collect);
  child.stderr.on('data', collect);
  await until(
    () => {
      if (child.exitCode !== null) throw new Error(`the server exited:\n${output.join('\n')}`);
      return output.some((line) => line.includes(READY));
    },
    { intervalMs: 50, what: 'the server ready' },
  );
  return { child, output };
}

/** The `host` of the ready log entry. */
function readyHost(output: readonly string[]): unknown {
  const line = output.find((l) => l.includes(READY))!;
  return (JSON.parse(line) as { host?: unknown }).host;
}

describe('npm start with demo data', () => {
  it('listens on 127.0.0.1 when HOST is unset, and says so', async () => {
    const { output } = await startServer({});
    assert.equal(readyHost(output), '127.0.0.1');
    assert.ok(
      output.some((line) =>
        line.includes(
          'demo data: listening on 127.0.0.1 only (the demo passwords are public); set HOST to listen elsewhere',
        ),
      ),
      output.join('\n'),
    );
  });

  it('listens where HOST says when it is set', async () => {
    const { output } = await startServer({ HOST: '127.0.0.2' });
    assert.equal(readyHost(output), '127.0.0.2');
    assert.ok(!output.some((line) => line.includes('listening on 127.0.0.1 only')));
  });
});
