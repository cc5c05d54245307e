/**
 * A private MariaDB server for one test file: a new data directory, 127.0.0.1 on a free port, the
 * server's own defaults (`max_allowed_packet` 16 MiB, as on a stock installation) plus the options the
 * test names, started and killed by the test. Never the shared test server, never the system service.
 * Needs `mariadbd` and `mariadb-install-db` on PATH (`.ci/run` installs them with mariadb-server).
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import mysql from 'mysql2/promise';
import { freePort } from './ports.ts';

export interface PrivateMariaDb {
  /** `mysql://` URL of an account with every privilege, on the database `cra_private`. */
  readonly url: string;
  stop(): Promise<void>;
}

/** Why a private server cannot be started here, or undefined when it can. */
export function privateMariaDbUnavailable(): string | undefined {
  for (const tool of ['mariadbd', 'mariadb-install-db']) {
    const found = spawnSync('sh', ['-c', `command -v ${tool} || test -x /usr/sbin/${tool}`]);
    if (found.status !== 0) return `${tool} is not installed`;
  }
  return undefined;
}

/** Starts a private server with `options` (mariadbd command-line options) added to its defaults. */
export async function startPrivateMariaDb(options: readonly string[] = []): Promise<PrivateMariaDb> {
  const dir = await mkdtemp(path.join(tmpdir(), 'cra-private-mariadb-'));
  const user = userInfo().username;
  const env = { ...process.env, PATH: `${process.env.PATH ?? ''}:/usr/sbin` };
  const install = spawnSync(
    'mariadb-install-db',
    [
      '--no-defaults',
      `--datadir=${dir}/data`,
      '--auth-root-authentication-method=normal',
      '--skip-test-db',
      `--user=${user}`,
    ],
    { env, encoding: 'utf8' },
  );
  if (install.status !== 0) throw new Error(`mariadb-install-db failed: ${install.stderr}`);
  const port = await freePort();
  const server = spawn(
    'mariadbd',
    [
      '--no-defaults',
      `--datadir=${dir}/data`,
      `--socket=${dir}/mariadb.sock`,
      `--port=${port}`,
      '--bind-address=127.0.0.1',
      `--user=${user}`,
      `--log-error=${dir}/error.log`,
      '--innodb-buffer-pool-size=64M',
      ...options,
    ],
    { env, stdio: 'ignore' },
  );
  const stop = async () => {
    if (server.exitCode === null) {
      const exited = new Promise((resolve) => server.once('exit', resolve));
      server.kill('SIGTERM');
      await exited;
    }
    await rm(dir, { recursive: true, force: true });
  };
  try {
    let root: mysql.Connection | undefined;
    for (let attempt = 0; root === undefined; attempt++) {
      try {
        root = await mysql.createConnection({ socketPath: `${dir}/mariadb.sock`, user: 'root' });
      } catch (error) {
        if (attempt > 120 || server.exitCode !== null) throw error;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
    try {
      await root.query("create user 'cra'@'127.0.0.1' identified by 'cra'");
      await root.query("grant all on *.* to 'cra'@'127.0.0.1' with grant option");
      await root.query('create database cra_private character set utf8mb4 collate utf8mb4_unicode_ci');
    } finally {
      await root.end();
    }
  } catch (error) {
    await stop();
    throw error;
  }
  return { url: `mysql://cra:cra@127.0.0.1:${port}/cra_private`, stop };
}
