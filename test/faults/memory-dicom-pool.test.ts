/**
 * The DICOM decoding pool gives its threads back when no DICOM arrives: an idle thread is ended after the
 * pool's idle time (its isolate, WebAssembly memory and the last file it held go with it), and the next
 * file starts a thread again and is read as before.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { loadConfig } from '../../src/config.ts';
import type { DicomPool } from '../../src/modules/dicom/dicom-pool.ts';
import { createDicomPool } from '../../src/modules/dicom/dicom-pool.ts';
import { dicomLimitsOf } from '../../src/modules/dicom/dicom-service.ts';
import { buildInstance, sopInstanceUidOf } from '../dicom-instances.ts';
import { until } from '../until.ts';

describe('DICOM pool idle threads', () => {
  const config = loadConfig({ DATABASE_URL: 'sqlite::memory:' });
  let pool: DicomPool | undefined;
  after(async () => pool?.close());

  it('ends idle threads after its idle time, and the next file starts one again', async () => {
    pool = createDicomPool({
      threads: 2,
      timeoutMs: 30_000,
      memoryMb: config.dicom.decodeMemoryMb,
      limits: dicomLimitsOf(config),
      pageSizePx: 256,
      idleMs: 200,
    });
    const first = buildInstance();
    const second = buildInstance();
    assert.equal(pool.threadCount(), 0, 'no thread before the first file');
    const [a, b] = await Promise.all([pool.read(first), pool.read(second)]);
    assert.equal(a.header.SOPInstanceUID, sopInstanceUidOf(first));
    assert.equal(b.header.SOPInstanceUID, sopInstanceUidOf(second));
    assert.ok(pool.threadCount() >= 1);
    await until(() => pool!.threadCount() === 0, { what: 'the idle threads ended', timeoutMs: 20_000 });
    const third = buildInstance();
    assert.equal((await pool.read(third)).header.SOPInstanceUID, sopInstanceUidOf(third));
    assert.equal(pool.threadCount(), 1, 'one thread started again for one file');
  });
});
