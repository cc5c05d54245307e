/**
 * Runs CLI command lines for the tests. `runCli` runs them in this process, through the same command
 * table and runner as `npm run cli` (no process start, no module loading per call); `spawnCli` starts the
 * real `src/main/cli.ts` as a child process, for the few smoke tests of the entry point itself.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { Readable, Writable } from 'node:stream';
import { CLI_COMMANDS } from '../src/main/cli-commands.ts';
import { runCommandLine } from '../src/main/cli-runner.ts';

const ROOT = path.resolve(import.meta.dirname, '..');

export interface CliResult {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface RunCliOptions {
  /** Pretend stderr is a terminal (progress bars instead of plain lines). */
  readonly isTerminal?: boolean;
  /** Interval of the plain progress lines (default 5 s). */
  readonly progressIntervalMs?: number;
}

/** A stream that keeps what is written to it. */
function collector(isTerminal = false): Writable & { isTTY: boolean; text(): string } {
  const chunks: Buffer[] = [];
  const stream = new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk));
      done();
    },
  });
  return Object.assign(stream, {
    isTTY: isTerminal,
    columns: 120,
    text: () => Buffer.concat(chunks).toString('utf8'),
  });
}

/** `npm run cli -- ...args` in this process, with `env` (a TestDatabase's) and optional stdin. */
export async function runCli(
  env: Record<string, string>,
  args: readonly string[],
  stdin: string | Buffer = '',
  options: RunCliOptions = {},
): Promise<CliResult> {
  const stdout = collector();
  const stderr = collector(options.isTerminal);
  const status = await runCommandLine(CLI_COMMANDS, args, {
    env,
    stdin: Object.assign(Readable.from([Buffer.from(stdin)]), { isTTY: false }),
    stdout,
    stderr,
    ...(options.progressIntervalMs === undefined ? {} : { progressIntervalMs: options.progressIntervalMs }),
  });
  return { status, stdout: stdout.text(), stderr: stderr.text() };
}

/** The real entry point as a child process on this Node, with `env` and optional stdin. */
export function spawnCli(
  env: Record<string, string>,
  args: readonly string[],
  stdin = '',
): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ['--disable-warning=ExperimentalWarning', 'src/main/cli.ts', ...args],
      { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env } },
    );
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
    child.stdin.end(stdin);
  });
}
