/**
 * A MariaDB server left at its defaults (`max_allowed_packet` 16 MiB, below the 100 MiB default upload
 * limit plus a statement's overhead), as a hospital's shared server is: the service starts anyway with the
 * largest upload that fits in one statement as its limit, says so once, refuses bigger uploads with 413
 * naming the limit, stores one at the limit, and `openeyes check` shows it. A limit the administrator set
 * explicitly that the server cannot hold still refuses the start.
 *
 * The server is private to this file (test/private-mariadb.ts), started and killed here.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { loadConfig } from '../../src/config.ts';
import { bootstrap } from '../../src/main/bootstrap.ts';
import { basicHeader } from '../factories.ts';
import type { PrivateMariaDb } from '../private-mariadb.ts';
import { privateMariaDbUnavailable, startPrivateMariaDb } from '../private-mariadb.ts';
import { runCli } from '../run-cli.ts';
import { until } from '../until.ts';
import type { OpenEyesTestDatabase } from './openeyes-database.ts';
import { createOpenEyesDatabase, openKysely, testMysqlUrl } from './openeyes-database.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const SERVER = path.join(ROOT, 'src/main/server.ts');
// MariaDB tests are configured (TEST_MYSQL_URL) and a server can be started here.
const skip =
  testMysqlUrl() === undefined
    ? 'TEST_MYSQL_URL is not set (no MariaDB/MySQL tests)'
    : (privateMariaDbUnavailable() ?? false);

const STOCK_PACKET_BYTES = 16 * 1024 * 1024;
const STATEMENT_OVERHEAD_BYTES = 64 * 1024;
const LIMIT_BYTES = STOCK_PACKET_BYTES - STATEMENT_OVERHEAD_BYTES;
const API = basicHeader('api', 'api-password');

describe('on a MariaDB server with its default max_allowed_packet (16 MiB)', { skip }, () => {
  let server: PrivateMariaDb;
  let oe: OpenEyesTestDatabase;
  let filesDir: string;
  let settings: Record<string, string>;

  before(async () => {
    server = await startPrivateMariaDb();
    oe = await createOpenEyesDatabase(server.url);
    filesDir = await mkdtemp(path.join(tmpdir(), 'cra-stock-files-'));
    settings = {
      DATABASE_URL: oe.url,
      DATABASE_SCHEMA: 'openeyes',
      TIME_ZONE: 'UTC',
      FILES_DIR: filesDir,
      DEMO_DATA: 'off',
      WORKER: 'off',
    };
  });
  after(async () => {
    await oe?.drop().catch(() => {});
    await server?.stop();
    if (filesDir !== undefined) await rm(filesDir, { recursive: true, force: true });
  });

  it('serves an OpenEyes database with the largest upload that fits as its limit, and says so once', async () => {
    const child: ChildProcess = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', SERVER], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', ...settings, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    try {
      await until(
        () => {
          if (child.exitCode !== null) throw new Error(`the server exited ${child.exitCode}:\n${output}`);
          return /clinical-records-api ready/.test(output);
        },
        { timeoutMs: 60_000, intervalMs: 50, what: 'the server ready' },
      );
      const port = /Server listening at http:\/\/127\.0\.0\.1:(\d+)/.exec(output)![1]!;
      const warnings = output.split('\n').filter((line) => line.includes('max_allowed_packet'));
      assert.equal(warnings.length, 1, output);
      const warning = JSON.parse(warnings[0]!) as { level: number; msg: string };
      assert.equal(warning.level, 40, 'a warning');
      assert.match(
        warning.msg,
        new RegExp(
          `^max_allowed_packet is ${STOCK_PACKET_BYTES} bytes: uploads are limited to ${LIMIT_BYTES} bytes`,
        ),
      );

      const db = openKysely(oe.url);
      try {
        const count = async () =>
          Number(
            (await sql<{ n: number }>`select count(*) as n from attachment_data`.execute(db)).rows[0]!.n,
          );
        const before = await count();
        const upload = (sizeBytes: number, url = '/api/v1/attachmentdisplay/create') =>
          fetch(`http://127.0.0.1:${port}${url}`, {
            method: 'POST',
            headers: { authorization: API, 'content-type': 'application/octet-stream' },
            body: Buffer.alloc(sizeBytes, 0x41),
          });
        for (const url of [
          '/api/v1/attachmentdisplay/create',
          '/api/v1/request/queue/add?request_type=noop',
        ]) {
          const refused = await upload(LIMIT_BYTES + 1, url);
          assert.equal(refused.status, 413, url);
          assert.deepEqual(await refused.json(), {
            success: 0,
            message: {
              data: 'Payload too large.',
              limit: `Uploads are limited to ${LIMIT_BYTES} bytes: the database's max_allowed_packet is ${STOCK_PACKET_BYTES} bytes.`,
            },
          });
        }
        assert.equal(await count(), before, 'nothing written');
        // One at the limit fits in the server's statement.
        const stored = await upload(LIMIT_BYTES);
        assert.equal(stored.status, 200, await stored.clone().text());
        const { id } = (await stored.json()) as { id: number };
        const { rows } = await sql<{
          n: number;
        }>`select length(blob_data) as n from attachment_data where id = ${id}`.execute(db);
        assert.equal(Number(rows[0]!.n), LIMIT_BYTES);
      } finally {
        await db.destroy();
      }
    } finally {
      if (child.exitCode === null) {
        child.kill('SIGTERM');
        await once(child, 'exit');
      }
    }
  });

  it('shows the upload limit in force in openeyes check', async () => {
    const check = await runCli(settings, ['openeyes', 'check']);
    assert.equal(check.status, 0, check.stdout + check.stderr);
    assert.match(
      check.stdout,
      new RegExp(
        `\\nLargest upload accepted: ${LIMIT_BYTES} bytes \\(the database's max_allowed_packet is ${STOCK_PACKET_BYTES} bytes\\)\\n`,
      ),
    );
  });

  it('refuses to start when RAW_BODY_LIMIT_BYTES was set to more than the server holds (exit 2, one message)', () => {
    const result = spawnSync(process.execPath, ['--disable-warning=ExperimentalWarning', SERVER], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        ...settings,
        RAW_BODY_LIMIT_BYTES: String(100 * 1024 * 1024),
        LOG_LEVEL: 'silent',
        PORT: '0',
      },
      encoding: 'utf8',
    });
    assert.equal(result.status, 2, result.stderr);
    assert.match(
      result.stderr,
      /max_allowed_packet is 16777216 bytes, too small for the 104857600-byte uploads the service accepts \(RAW_BODY_LIMIT_BYTES\): raise it to at least 104923136/,
    );
    assert.doesNotMatch(result.stderr, /\n\s+at /, 'no stack trace');
  });

  it("starts on the service's own schema as well, with the same limit", async () => {
    const url = new URL(server.url);
    const booted = await bootstrap(
      loadConfig({ DATABASE_URL: url.toString(), FILES_DIR: filesDir, LOG_LEVEL: 'silent' }),
    );
    try {
      assert.equal(booted.config.limits.rawBodyBytes, LIMIT_BYTES);
      assert.match(booted.uploadLimitWarning ?? '', /max_allowed_packet is 16777216 bytes/);
    } finally {
      await booted.database.close();
    }
    const explicit = loadConfig({
      DATABASE_URL: url.toString(),
      FILES_DIR: filesDir,
      RAW_BODY_LIMIT_BYTES: String(LIMIT_BYTES),
    });
    const honoured = await bootstrap(explicit);
    try {
      assert.equal(honoured.config.limits.rawBodyBytes, LIMIT_BYTES);
      assert.equal(honoured.uploadLimitWarning, undefined);
    } finally {
      await honoured.database.close();
    }
  });
});
