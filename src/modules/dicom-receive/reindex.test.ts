/**
 * `dicom reindex`: instances received before `dicom_instance_index` existed (their index rows removed
 * here) are indexed again from their stored payloads, in batches, as receipt indexed them; one whose bytes
 * were dropped is left out and counted; a second run indexes nothing more.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { runDcmtk } from '../../../test/dcmtk.ts';
import { buildInstance, newUid } from '../../../test/dicom-instances.ts';
import { startDicomTestApp } from '../../../test/dicom-receiving.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect } from '../../../test/harness.ts';
import { runCli } from '../../../test/run-cli.ts';
import type { DicomServer } from './index.ts';

type IndexRow = Record<string, unknown>;

forEachDialect((dialect) => {
  describe(`dicom reindex (${dialect})`, () => {
    let app: TestApp;
    let server: DicomServer;
    const sops = [newUid(), newUid(), newUid()];
    const rowsOf = async (): Promise<IndexRow[]> =>
      (
        await sql<IndexRow>`select * from ${sql.table('dicom_instance_index')} order by sop_instance_uid`.execute(
          app.db,
        )
      ).rows;

    before(async () => {
      ({ app, server } = await startDicomTestApp(dialect, 'STORE@127.0.0.1'));
      const dir = await mkdtemp(path.join(tmpdir(), 'cra-reindex-'));
      try {
        const files = await Promise.all(
          sops.map(async (sop, i) => {
            const file = path.join(dir, `i${i}.dcm`);
            await writeFile(
              file,
              buildInstance({
                sopInstanceUid: sop,
                tags: { PatientID: `DEV-${i}`, PatientName: 'Zoë^Smith', SpecificCharacterSet: 'ISO_IR 192' },
              }),
            );
            return file;
          }),
        );
        const stored = await runDcmtk('storescu', [
          '-aet',
          'STORE',
          '-aec',
          'CRA_TEST',
          '127.0.0.1',
          String(server.port),
          ...files,
        ]);
        assert.equal(stored.code, 0, stored.output);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });

    after(async () => {
      await server?.stop();
      await app?.close();
    });

    it('indexes the receipts the index lacks from their payloads, leaving out dropped bytes', async () => {
      const before = await rowsOf();
      assert.equal(before.length, 3);
      // As received before the index existed; the third's bytes dropped by the clean-up policy.
      await sql`delete from ${sql.table('dicom_instance_index')}`.execute(app.db);
      await sql`update ${sql.table('attachment_data')} set blob_data = null where attachment_mnemonic = 'REQUEST_BLOB'
        and request_id = (select last_request_id from ${sql.table('dicom_received_instance')} where sop_instance_uid = ${sops[2]!})`.execute(
        app.db,
      );
      const result = await runCli(app.env, ['dicom', 'reindex', '--batch', '2']);
      assert.equal(result.status, 0, result.stderr);
      assert.match(result.stdout, /Indexed 2 instance\(s\); left out 1 whose bytes were dropped and 0/);
      const expected = before.filter((r) => r.sop_instance_uid !== sops[2]);
      assert.deepEqual(await rowsOf(), expected);
      const again = await runCli(app.env, ['dicom', 'reindex']);
      assert.equal(again.status, 0, again.stderr);
      assert.match(again.stdout, /Indexed 0 instance\(s\); left out 1 whose bytes were dropped/);
    });

    it('refuses a batch size that is not a whole number from 1 to 10000', async () => {
      const result = await runCli(app.env, ['dicom', 'reindex', '--batch', '0']);
      assert.equal(result.status, 2);
      assert.match(result.stderr, /--batch must be a whole number/);
    });
  });
});
