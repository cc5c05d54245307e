/**
 * Query/Retrieve C-MOVE and C-GET on an OpenEyes database (`DATABASE_SCHEMA=openeyes`, MariaDB/MySQL), on
 * the account `openeyes grants` prints: instances stored by dcmtk's `storescu` (OpenEyes's `request` and
 * `attachment_data`, the service's `cra_dicom_instance_index`), their study filed to the seed's patient 1
 * (`cra_device_event`), moved by `movescu` to a dcmtk `storescp` (a study by its UID, the patient by
 * its hospital number) and fetched by `getscu`: every data set as stored, and each retrieve audited in
 * `cra_audit_event`.
 */
import assert from 'node:assert/strict';
import { mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { createAppServices } from '../../src/app-services.ts';
import { createLogger } from '../../src/logger.ts';
import type { DicomServer } from '../../src/modules/dicom-receive/index.ts';
import { startDicomServer } from '../../src/modules/dicom-receive/index.ts';
import { readPart10Meta } from '../../src/modules/dicom-receive/qr-retrieve.ts';
import { createAuthenticator } from '../../src/modules/user/index.ts';
import type { Storescp } from '../dcmtk.ts';
import { runDcmtk, startStorescp } from '../dcmtk.ts';
import { buildInstance, newUid } from '../dicom-instances.ts';
import type { OpenEyesService } from './openeyes-app.ts';
import { openOpenEyesService } from './openeyes-app.ts';
import { testMysqlUrl } from './openeyes-database.ts';

const adminUrl = testMysqlUrl();
const skip = adminUrl === undefined ? 'TEST_MYSQL_URL is not set (no MariaDB/MySQL server)' : false;

/** The data set of a Part 10 file (what follows its file meta information), as hex. */
function dataSetOf(file: Buffer): string {
  const meta = readPart10Meta(file);
  assert.ok(meta !== undefined, 'a Part 10 file');
  return file.subarray(meta.dataSetOffset).toString('hex');
}

async function dataSetsIn(dir: string): Promise<string[]> {
  const names = (await readdir(dir)).sort();
  return Promise.all(names.map(async (n) => dataSetOf(await readFile(path.join(dir, n)))));
}

function finalStatus(output: string): string {
  return /Received Final (?:Move|Get) Response[^\n]*/.exec(output)?.[0] ?? output.slice(-1500);
}

describe('Query/Retrieve C-MOVE and C-GET on an OpenEyes v6.8-shaped database', { skip }, () => {
  let service: OpenEyesService | undefined;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  let admin: Kysely<any>;
  let server: DicomServer;
  let storescp: Storescp | undefined;
  let workDir = '';
  let received = '';
  const study = newUid();
  /** The data sets stored, as hex. */
  let stored: string[] = [];

  before(async () => {
    service = await openOpenEyesService(adminUrl!, {
      tempPrefix: 'cra-oe-qr-retrieve-',
      settings: async (dir) => {
        received = path.join(dir, 'received');
        await mkdir(received);
        storescp = await startStorescp(received);
        return {
          DATABASE_SCHEMA: 'openeyes',
          TIME_ZONE: 'Europe/London',
          DICOM_PORT: '0',
          HOST: '127.0.0.1',
          DICOM_AE_TITLE: 'CRA_TEST',
          DICOM_ALLOWED_CALLERS: 'DEV@127.0.0.1,QR@127.0.0.1',
          DICOM_QR_CALLERS: 'QR@127.0.0.1',
          DICOM_REMOTE_NODES: `DEST@127.0.0.1:${storescp.port}`,
          DICOM_MOVE_DESTINATIONS: 'DEST',
          WORKER: 'off',
          DEMO_DATA: 'off',
          LOG_LEVEL: 'silent',
        };
      },
    });
    ({ admin, workDir } = service);
    const { config, database } = service;
    server = await startDicomServer({
      database,
      config,
      logger: createLogger('silent'),
      ...createAppServices({
        config,
        database,
        files: service.booted.files,
        authenticator: createAuthenticator(database.db, { cacheTtlMs: 0, database }),
      }),
    });

    // Three instances of one study, sent with the device's Patient ID, filed to the seed's patient 1
    // (Jane Smith, hospital number 0012345).
    const files = [1, 2, 3].map((n) =>
      buildInstance({
        studyInstanceUid: study,
        pixelBytes: 2000 + n,
        tags: { PatientID: 'DEVICE-9', InstanceNumber: String(n) },
      }),
    );
    stored = files.map(dataSetOf).sort();
    const paths = await Promise.all(
      files.map(async (file, i) => {
        const filePath = path.join(workDir, `i${i}.dcm`);
        await writeFile(filePath, file);
        return filePath;
      }),
    );
    const result = await runDcmtk('storescu', [
      '-aet',
      'DEV',
      '-aec',
      'CRA_TEST',
      '127.0.0.1',
      String(server.port),
      ...paths,
    ]);
    assert.equal(result.code, 0, result.output);
    await sql`insert into cra_device_event (patient_id, study_instance_uid, event_subtype, model, event_id, created_date, last_modified_date)
      values (1, ${study}, 'Fundus Images', 'TEST', 1, '2025-01-02 00:00:00', '2025-01-02 00:00:00')`.execute(
      admin,
    );
  });

  beforeEach(async () => {
    for (const name of await readdir(received)) await rm(path.join(received, name));
  });

  after(async () => {
    storescp?.stop();
    try {
      await server?.stop(1000);
    } finally {
      await service?.close();
    }
  });

  const move = (model: '-S' | '-P', keys: readonly string[]) =>
    runDcmtk(
      'movescu',
      [
        model,
        '-v',
        '-aet',
        'QR',
        '-aec',
        'CRA_TEST',
        '-aem',
        'DEST',
        ...keys.flatMap((k) => ['-k', k]),
        '127.0.0.1',
        String(server.port),
      ],
      60_000,
    );

  it("moves the filed study to storescp: every data set as stored, from OpenEyes's attachment_data", async () => {
    const result = await move('-S', ['QueryRetrieveLevel=STUDY', `StudyInstanceUID=${study}`]);
    assert.equal(result.code, 0, result.output);
    assert.match(finalStatus(result.output), /Success/, result.output.slice(-1500));
    assert.deepEqual(await dataSetsIn(received), stored);
  });

  it("moves the patient by the filed patient's hospital number, not the device's Patient ID", async () => {
    const result = await move('-P', ['QueryRetrieveLevel=PATIENT', 'PatientID=0012345']);
    assert.match(finalStatus(result.output), /Success/, result.output.slice(-1500));
    assert.deepEqual(await dataSetsIn(received), stored);
    const bySent = await move('-P', ['QueryRetrieveLevel=PATIENT', 'PatientID=DEVICE-9']);
    assert.match(finalStatus(bySent.output), /Success/, bySent.output.slice(-1500));
    assert.equal((await readdir(received)).length, 3, 'the device Patient ID of a filed study moves nothing');
  });

  it('gets the study on the caller association with getscu', async () => {
    const out = path.join(workDir, 'got');
    await mkdir(out, { recursive: true });
    const result = await runDcmtk(
      'getscu',
      [
        '-S',
        '-v',
        '-aet',
        'QR',
        '-aec',
        'CRA_TEST',
        '-od',
        out,
        '-k',
        'QueryRetrieveLevel=STUDY',
        '-k',
        `StudyInstanceUID=${study}`,
        '127.0.0.1',
        String(server.port),
      ],
      60_000,
    );
    assert.match(finalStatus(result.output), /Success/, result.output.slice(-1500));
    assert.deepEqual(await dataSetsIn(out), stored);
  });

  it('refuses the retrieve contexts of a caller configured only to store', async () => {
    const result = await runDcmtk('movescu', [
      '-S',
      '-aet',
      'DEV',
      '-aec',
      'CRA_TEST',
      '-aem',
      'DEST',
      '-k',
      'QueryRetrieveLevel=STUDY',
      '-k',
      `StudyInstanceUID=${study}`,
      '127.0.0.1',
      String(server.port),
    ]);
    assert.notEqual(result.code, 0);
    assert.match(result.output, /No Acceptable Presentation Contexts|rejected/i);
    assert.deepEqual(await readdir(received), []);
  });

  it('audits each retrieve in cra_audit_event: the AE title, the address, the filed patient', async () => {
    const { rows } = await sql<{
      action: string;
      username: string;
      client_address: string;
      target_type: string;
      target_ids: string;
      detail: string;
    }>`select action, username, client_address, target_type, target_ids, detail from cra_audit_event
      where action in ('dicom.move', 'dicom.get')`.execute(admin);
    assert.ok(
      rows.some(
        (r) =>
          r.action === 'dicom.move' &&
          r.detail === 'study root, to DEST' &&
          r.target_type === 'patient' &&
          String(r.target_ids).split(',').includes('1'),
      ),
      JSON.stringify(rows),
    );
    assert.ok(rows.some((r) => r.action === 'dicom.move' && r.detail === 'patient root, to DEST'));
    assert.ok(rows.some((r) => r.action === 'dicom.get' && r.detail === 'study root'));
    assert.ok(rows.every((r) => r.username === 'QR' && r.client_address === '127.0.0.1'));
  });
});
