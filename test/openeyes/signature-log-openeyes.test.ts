/**
 * `signature_import_log`'s audit dates on an OpenEyes database (`DATABASE_SCHEMA=openeyes`, MariaDB/MySQL):
 * OpenEyes's migration creates `created_date` and `last_modified_date` as datetime, so the service writes
 * the local date-time there (sign/add's rows, a failed attempt's row, the status change to Manual Ignore);
 * an older table altered to DATE still takes the date alone. Each start reads the column types once, so the
 * altered table is served by a second start.
 *
 * The stored time zone is Asia/Kolkata (UTC+05:30), so that a time written in UTC cannot pass.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import type { Bootstrapped } from '../../src/main/bootstrap.ts';
import { bootstrap } from '../../src/main/bootstrap.ts';
import { IMPORT_LOG_STATUS, markImportLog } from '../../src/modules/signature/index.ts';
import { createAuthenticator } from '../../src/modules/user/index.ts';
import { b64, makePng } from '../factories-signature.ts';
import type { OpenEyesTestDatabase } from './openeyes-database.ts';
import { connectForScripts, createOpenEyesDatabase, openKysely, testMysqlUrl } from './openeyes-database.ts';

const adminUrl = testMysqlUrl();
const skip = adminUrl === undefined ? 'TEST_MYSQL_URL is not set (no MariaDB/MySQL server)' : false;

/** `YYYY-MM-DD HH:MM:SS` of `date` in Asia/Kolkata (UTC+05:30, no daylight saving). */
function kolkata(date: Date): string {
  return new Date(date.getTime() + 330 * 60_000).toISOString().slice(0, 19).replace('T', ' ');
}

/** True when the stored local date-time `text` is within two minutes of now. */
function isNow(text: string): boolean {
  const now = Date.now();
  return text >= kolkata(new Date(now - 120_000)) && text <= kolkata(new Date(now + 120_000));
}

interface Started {
  readonly booted: Bootstrapped;
  readonly app: FastifyInstance;
  readonly baseUrl: string;
}

describe('signature_import_log audit dates on an OpenEyes database', { skip }, () => {
  let oe: OpenEyesTestDatabase;
  // Reads OpenEyes's tables directly.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  let admin: Kysely<any>;
  let filesDir: string;
  const started: Started[] = [];

  async function start(): Promise<Started> {
    const config = loadConfig({
      DATABASE_URL: oe.url,
      DATABASE_SCHEMA: 'openeyes',
      TIME_ZONE: 'Asia/Kolkata',
      FILES_DIR: filesDir,
      RAW_BODY_LIMIT_BYTES: String(8 * 1024 * 1024),
      SIGN_RATE_LIMIT_PER_MINUTE: '0',
      WORKER: 'off',
      DEMO_DATA: 'off',
      LOG_LEVEL: 'silent',
    });
    const booted = await bootstrap(config);
    const app = await buildApp({
      config: booted.config,
      database: booted.database,
      files: booted.files,
      authenticator: createAuthenticator(booted.database.db, { cacheTtlMs: 0, database: booted.database }),
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    const one = {
      booted,
      app,
      baseUrl: `http://127.0.0.1:${(app.server.address() as { port: number }).port}`,
    };
    started.push(one);
    return one;
  }

  async function stop(one: Started): Promise<void> {
    await one.app.close();
    await one.booted.database.close();
    started.splice(started.indexOf(one), 1);
  }

  const signAdd = (one: Started, body: Record<string, unknown>) =>
    fetch(`${one.baseUrl}/api/v1/sign/add`, { method: 'POST', body: JSON.stringify(body) });

  const logRow = (id: number) =>
    admin
      .selectFrom('signature_import_log')
      .select(['id', 'status_id', 'import_datetime', 'created_date', 'last_modified_date'])
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
  const lastLogId = async () =>
    Number(
      (
        await admin
          .selectFrom('signature_import_log')
          .select('id')
          .orderBy('id', 'desc')
          .limit(1)
          .executeTakeFirstOrThrow()
      ).id,
    );

  before(async () => {
    oe = await createOpenEyesDatabase(adminUrl!);
    admin = openKysely(oe.url);
    filesDir = await mkdtemp(path.join(tmpdir(), 'cra-oe-signlog-'));
  });
  after(async () => {
    for (const one of [...started]) await stop(one);
    await admin?.destroy();
    await oe?.drop();
    if (filesDir !== undefined) await rm(filesDir, { recursive: true, force: true });
  });

  it('writes the local date-time into the datetime columns: a saved row, a refused row, Manual Ignore', async () => {
    const one = await start();
    const saved = await signAdd(one, {
      unique_identifier: 'abc234',
      extra_info: JSON.stringify({ e_id: 1, e_t_id: 1 }),
      image: b64(makePng(6, 4)),
    });
    assert.equal(saved.status, 200);
    assert.equal(await saved.json(), 'Correct signature saved!');
    const savedLog = await logRow(await lastLogId());
    assert.equal(savedLog.status_id, 4);
    assert.ok(isNow(savedLog.created_date), `created_date ${savedLog.created_date} is the local date-time`);
    assert.equal(savedLog.created_date, savedLog.import_datetime);
    assert.equal(savedLog.last_modified_date, savedLog.import_datetime);

    // Refused (no element ids): a status 3 row, which an operator then marks Manual Ignore.
    const refused = await signAdd(one, { unique_identifier: 'abc234', image: b64(makePng(6, 4)) });
    assert.equal(refused.status, 422);
    const refusedId = await lastLogId();
    const refusedLog = await logRow(refusedId);
    assert.equal(refusedLog.status_id, 3);
    assert.ok(
      isNow(refusedLog.created_date),
      `created_date ${refusedLog.created_date} is the local date-time`,
    );
    assert.equal(refusedLog.last_modified_date, refusedLog.import_datetime);

    const later = new Date(Date.now() + 61_000);
    const change = await markImportLog(one.booted.database, {
      id: refusedId,
      statusId: IMPORT_LOG_STATUS.manualIgnore,
      userId: 1,
      now: later,
    });
    assert.equal(change.kind, 'done');
    const ignored = await logRow(refusedId);
    assert.equal(ignored.status_id, 6);
    assert.equal(ignored.last_modified_date, kolkata(later));
    assert.equal(ignored.created_date, refusedLog.created_date);
    await stop(one);
  });

  it('writes the date alone where an older table has DATE columns, and never fails the import', async () => {
    const connection = await connectForScripts(oe.url);
    try {
      await connection.query(`ALTER TABLE signature_import_log
        MODIFY created_date date NOT NULL DEFAULT '1901-01-01',
        MODIFY last_modified_date date NOT NULL DEFAULT '1901-01-01'`);
    } finally {
      await connection.end();
    }
    const one = await start();
    const saved = await signAdd(one, {
      unique_identifier: 'abc234',
      extra_info: JSON.stringify({ e_id: 1, e_t_id: 1 }),
      image: b64(makePng(6, 4)),
    });
    assert.equal(saved.status, 200);
    assert.equal(await saved.json(), 'Correct signature saved!');
    const refused = await signAdd(one, { unique_identifier: 'abc234', image: b64(makePng(6, 4)) });
    assert.equal(refused.status, 422);
    const refusedId = await lastLogId();
    const change = await markImportLog(one.booted.database, {
      id: refusedId,
      statusId: IMPORT_LOG_STATUS.manualIgnore,
      userId: 1,
    });
    assert.equal(change.kind, 'done');
    for (const id of [refusedId - 1, refusedId]) {
      const log = await logRow(id);
      assert.ok(isNow(log.import_datetime));
      assert.equal(log.created_date, String(log.import_datetime).slice(0, 10));
      assert.equal(log.last_modified_date, String(log.import_datetime).slice(0, 10));
    }
    await stop(one);
  });
});
