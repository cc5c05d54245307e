/**
 * C-STORE of instances whose header holds a value longer than its VR allows, sent by dcmtk's storescu:
 * answered with a refusal status (A900 for a value over its VR's maximum, A700 for a long text over
 * DICOM_MAX_TEXT_BYTES), storing nothing; a well-formed instance on the same association is stored.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runDcmtk } from '../../../test/dcmtk.ts';
import { sopInstanceUidOf } from '../../../test/dicom-instances.ts';
import { receiptOf, startDicomTestApp } from '../../../test/dicom-receiving.ts';
import { countRows } from '../../../test/factories.ts';
import { QUEUE_TABLES } from '../../../test/factories-queue.ts';
import { IMPLICIT_VR_LITTLE_ENDIAN, instanceWith, longText } from '../../../test/hostile-dicom.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect } from '../../../test/harness.ts';
import { closeDicomPools } from '../dicom/index.ts';
import type { DicomServer } from './dimse-server.ts';

const MiB = 1024 * 1024;

forEachDialect((dialect) => {
  describe(`C-STORE of header values over their VR's limit [${dialect}]`, () => {
    let app: TestApp;
    let server: DicomServer;
    let dir: string;

    before(async () => {
      ({ app, server } = await startDicomTestApp(dialect, 'MODALITY1@127.0.0.1', {
        RAW_BODY_LIMIT_BYTES: String(12 * MiB),
      }));
      dir = await mkdtemp(path.join(tmpdir(), 'cra-dimse-limits-'));
    });
    after(async () => {
      await server.stop(5000);
      await closeDicomPools();
      await app.close();
      await rm(dir, { recursive: true, force: true });
    });

    it('answers A900 for a 6 MB PatientName and A700 for an 8 MB UT, storing neither, and stores the good one', async () => {
      const name = instanceWith({
        transferSyntaxUid: IMPLICIT_VR_LITTLE_ENDIAN,
        patientName: longText(6 * MiB),
      });
      // Explicit VR: in implicit VR an element the service never reads as text has no VR to limit it by.
      const ut = instanceWith({
        extra: [{ tag: 0x0040a160, vr: 'UT', value: longText(8 * MiB) }],
      });
      const good = instanceWith({ transferSyntaxUid: IMPLICIT_VR_LITTLE_ENDIAN });
      const files = [name, ut, good].map((_, i) => path.join(dir, `${i}.dcm`));
      await Promise.all([name, ut, good].map((bytes, i) => writeFile(files[i]!, bytes)));
      const before = await Promise.all(QUEUE_TABLES.map((t) => countRows(app.db, t)));

      // One association per file: storescu stops at the first refused instance.
      const statuses: string[] = [];
      for (const file of files) {
        const result = await runDcmtk('storescu', [
          '-v',
          '-aet',
          'MODALITY1',
          '-aec',
          'CRA_TEST',
          '127.0.0.1',
          String(server.port),
          file,
        ]);
        statuses.push(/Received Store Response \(([^)]*)\)/.exec(result.output)?.[1] ?? result.output);
      }
      assert.deepEqual(statuses, [
        'Error: DataSetDoesNotMatchSOPClass',
        'Refused: OutOfResources',
        'Success',
      ]);
      assert.equal(await receiptOf(app.db, sopInstanceUidOf(name)), undefined);
      assert.equal(await receiptOf(app.db, sopInstanceUidOf(ut)), undefined);
      assert.ok(await receiptOf(app.db, sopInstanceUidOf(good)), 'the good instance is stored');
      const afterCounts = await Promise.all(QUEUE_TABLES.map((t) => countRows(app.db, t)));
      // One request for the good instance: its request row, four attachment rows (REQUEST_DATA, the
      // payload, HEADER_DATA, DICOM_STUDY), one routine.
      assert.deepEqual(
        afterCounts.map((count, i) => count - before[i]!),
        [1, 4, 1],
      );
    });
  });
});
