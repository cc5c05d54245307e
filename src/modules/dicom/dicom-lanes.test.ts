/**
 * The decoding threads' two lanes (`dicom-service.ts`): receipt checks (STOW-RS, C-STORE) run on
 * threads of their own, so that one is answered while every filing thread is busy and filing jobs wait.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, describe, it } from 'node:test';
import { loadConfig } from '../../config.ts';
import { buildInstance, sopInstanceUidOf } from '../../../test/dicom-instances.ts';
import { until } from '../../../test/until.ts';
import type { DicomTask } from './index.ts';
import { closeDicomPools, inspectDicomFile, readDicomFile, runDicomTask } from './index.ts';

const HOLD: DicomTask = {
  moduleUrl: new URL('../../../test/dicom-thread-gate.ts', import.meta.url),
  exportName: 'holdUntilGateOpens',
  purpose: 'test',
};

describe('DICOM decoding lanes', () => {
  let dir: string | undefined;
  after(async () => {
    await closeDicomPools();
    if (dir !== undefined) await rm(dir, { recursive: true, force: true });
  });

  it('inspects a received instance while the filing thread is busy and a filing job waits', async () => {
    const config = loadConfig({
      DATABASE_URL: 'sqlite::memory:',
      DICOM_WORKER_THREADS: '1',
      DICOM_RECEIPT_THREADS: '1',
    });
    dir = await mkdtemp(path.join(tmpdir(), 'cra-lanes-'));
    const gate = path.join(dir, 'gate');
    const instance = buildInstance();
    const settled: string[] = [];

    // The one filing thread is held by another module's reader; a header read waits behind it.
    const held = runDicomTask(HOLD, Buffer.from(gate), config).then((result) => {
      settled.push('held task');
      return result;
    });
    await until(() => existsSync(`${gate}.started`), { what: 'the held task started' });
    const read = readDicomFile(instance, config).then(() => settled.push('filing read'));
    const inspection = inspectDicomFile(instance, config).then((result) => {
      settled.push('receipt check');
      return result;
    });

    // Bounded only so that a failing run ends: the gate opens once the check is answered, or after 20 s.
    await until(() => settled.includes('receipt check'), { what: 'the receipt check' }).catch(() => {});
    await writeFile(gate, '');
    const [result, inspected] = await Promise.all([held, inspection, read]);
    assert.equal(result, 'released');
    assert.equal(inspected.summary?.header.SOPInstanceUID, sopInstanceUidOf(instance));
    assert.deepEqual(settled, ['receipt check', 'held task', 'filing read']);
  });
});
