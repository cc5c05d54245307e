/**
 * Readers and waits shared by the DICOM receiving tests (STOW-RS, dcmtk, Orthanc): what a received
 * instance became in the queue, found by its SOP Instance UID.
 */
import assert from 'node:assert/strict';
import type { Kysely } from 'kysely';
import type { Dialect } from '../src/db/database.ts';
import type { DB } from '../src/db/schema.ts';
import { createAppServices } from '../src/app-services.ts';
import { createLogger } from '../src/logger.ts';
import type { DicomServer } from '../src/modules/dicom-receive/index.ts';
import { startDicomServer } from '../src/modules/dicom-receive/index.ts';
import { attachmentsByMnemonic, routinesOf } from './factories-queue.ts';
import type { TestApp } from './harness.ts';
import { startTestApp } from './harness.ts';

/**
 * The app on a fresh database with its C-STORE SCP on a free port of 127.0.0.1: AE title `CRA_TEST`,
 * `callers` allowed (`DICOM_ALLOWED_CALLERS`), `env` on top.
 */
export async function startDicomTestApp(
  dialect: Dialect,
  callers: string,
  env: Record<string, string> = {},
): Promise<{ app: TestApp; server: DicomServer }> {
  const app = await startTestApp(dialect, {
    env: {
      DICOM_PORT: '0',
      HOST: '127.0.0.1',
      DICOM_AE_TITLE: 'CRA_TEST',
      DICOM_ALLOWED_CALLERS: callers,
      ...env,
    },
  });
  const server = await startDicomServer({
    database: app.database,
    config: app.config,
    logger: createLogger('silent'),
    uploadMemory: app.app.uploadMemory,
    // Its own trail and intake: the test app's are built inside buildApp.
    ...createAppServices(app.deps),
  });
  return { app, server };
}

/** What a queued DICOM request holds, in the words the tests compare. */
export interface QueuedDicomRequest {
  readonly requestId: number;
  readonly requestType: string;
  readonly systemMessage: string;
  readonly requestData: Record<string, unknown>;
  readonly headerData: Record<string, unknown>;
  readonly payload: Buffer;
  readonly payloadMime: string;
  readonly mnemonics: readonly string[];
  readonly routines: readonly string[];
}

/** The receipt of `sopInstanceUid` (`dicom_received_instance`), if any. */
export async function receiptOf(
  db: Kysely<DB>,
  sopInstanceUid: string,
): Promise<{ firstRequestId: number; lastRequestId: number; count: number } | undefined> {
  const row = await db
    .withTables<{
      dicom_received_instance: {
        sop_instance_uid: string;
        first_request_id: number;
        last_request_id: number;
        received_count: number;
      };
    }>()
    .selectFrom('dicom_received_instance')
    .select(['first_request_id', 'last_request_id', 'received_count'])
    .where('sop_instance_uid', '=', sopInstanceUid)
    .executeTakeFirst();
  return row === undefined
    ? undefined
    : { firstRequestId: row.first_request_id, lastRequestId: row.last_request_id, count: row.received_count };
}

/** The queued request `requestId`, read back. */
export async function readQueuedRequest(db: Kysely<DB>, requestId: number): Promise<QueuedDicomRequest> {
  const request = await db
    .selectFrom('request')
    .selectAll()
    .where('id', '=', requestId)
    .executeTakeFirstOrThrow();
  const rows = await attachmentsByMnemonic(db, requestId);
  const blob = rows.get('REQUEST_BLOB');
  assert.ok(blob?.blob_data, `request ${requestId} has a REQUEST_BLOB`);
  return {
    requestId,
    requestType: request.request_type,
    systemMessage: request.system_message,
    requestData: JSON.parse(rows.get('REQUEST_DATA')!.text_data!) as Record<string, unknown>,
    headerData: JSON.parse(rows.get('HEADER_DATA')!.text_data!) as Record<string, unknown>,
    payload: blob.blob_data,
    payloadMime: blob.mime_type,
    mnemonics: [...rows.keys()],
    routines: (await routinesOf(db, requestId)).map(
      (r) => `${r.routine_name}@${r.execute_request_queue}:${r.status}:${r.execute_sequence}:${r.try_count}`,
    ),
  };
}
