/**
 * An export that fails part way: the dataset export and `audit export --file` write to a directory on a
 * real 128 KiB tmpfs, and their content is larger, so that a write fails with ENOSPC after the first
 * chunks are on disk. Both go through the durable writer: the export fails, the target keeps what it
 * held before (or stays absent), and no partial or temporary file is left beside it.
 *
 * Needs `mount` (root, as in CI's container); where mounting is not permitted the tests are skipped: a
 * read-only directory is no stand-in when running as root, which writes through permissions.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { createAuditTrail } from '../../src/modules/audit/index.ts';
import { DATASET_FORMAT, exportDatasetToFile, importDataset } from '../../src/modules/dataset/index.ts';
import type { TestDatabase } from '../harness.ts';
import { createTestDatabase, forEachDialect } from '../harness.ts';
import { runCli } from '../run-cli.ts';

const TMPFS_BYTES = 128 * 1024;

function tryMountTmpfs(dir: string): boolean {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${TMPFS_BYTES}`, 'tmpfs', dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

forEachDialect((dialect) => {
  describe(`exports that fail part way on a full disk [${dialect}]`, () => {
    let t: TestDatabase;
    let dir: string;
    let isMounted = false;
    before(async () => {
      t = await createTestDatabase(dialect);
      dir = path.join(path.dirname(t.filesDir), 'exports');
      await mkdir(dir, { recursive: true });
      isMounted = tryMountTmpfs(dir);
    });
    after(async () => {
      if (isMounted) execFileSync('umount', [dir]);
      await t.drop();
    });

    it('dataset export: rejects with ENOSPC, keeps the previous export, and leaves no temporary file', async (context) => {
      if (!isMounted) {
        context.skip('mount -t tmpfs is not permitted here');
        return;
      }
      // Four times the disk once in base64: the export fails after its first chunks are written.
      const blob = Buffer.alloc((3 * TMPFS_BYTES) / 4 + 3 * 1024, 0xa7);
      await importDataset(t, {
        format: DATASET_FORMAT,
        tables: {
          request: [{ id: 871, request_type: 'dicom_request' }],
          attachment_data: [
            {
              id: 871,
              request_id: 871,
              attachment_mnemonic: 'large',
              attachment_type: 'NONE',
              mime_type: 'application/octet-stream',
              blob_data: Buffer.concat([blob, blob, blob, blob, blob]).toString('base64'),
            },
          ],
        },
      });
      const file = path.join(dir, 'dataset.json');
      await writeFile(file, '{"previous":true}\n');

      await assert.rejects(
        exportDatasetToFile(t, file, { tables: ['request', 'attachment_data'] }),
        (error: NodeJS.ErrnoException) => error.code === 'ENOSPC',
      );
      assert.deepEqual(await readdir(dir), ['dataset.json'], 'no partial or temporary file is left');
      assert.equal(await readFile(file, 'utf8'), '{"previous":true}\n');

      // Without a previous export the name stays absent.
      await assert.rejects(
        exportDatasetToFile(t, path.join(dir, 'fresh.json'), { tables: ['request', 'attachment_data'] }),
        (error: NodeJS.ErrnoException) => error.code === 'ENOSPC',
      );
      assert.deepEqual(await readdir(dir), ['dataset.json']);
    });

    it('audit export --file: fails, writes no file and leaves no temporary file', async (context) => {
      if (!isMounted) {
        context.skip('mount -t tmpfs is not permitted here');
        return;
      }
      const trail = createAuditTrail(t.database);
      // About 400 bytes a line (the detail is kept to 255 characters): over twice the disk, in one page.
      const detail = 'x'.repeat(255);
      await Promise.all(
        Array.from({ length: 800 }, (_, i) =>
          trail.record({
            action: 'patient.search',
            userId: 1,
            targetType: 'patient',
            targetIds: [i + 1],
            outcome: 200,
            clientAddress: '10.0.0.7',
            requestId: `req-full-${i}`,
            detail,
            at: new Date(Date.UTC(2026, 0, 2, 10, Math.floor(i / 60), i % 60)),
          }),
        ),
      );
      const before = await readdir(dir);
      const file = path.join(dir, 'audit.jsonl');
      const result = await runCli(t.env, ['audit', 'export', '--since', '2026-01-02', '--file', file]);
      assert.notEqual(result.status, 0, result.stdout);
      assert.match(result.stderr, /ENOSPC: no space left on device/);
      assert.doesNotMatch(result.stdout, /Exported/);
      assert.deepEqual(await readdir(dir), before, 'no partial or temporary file is left');
    });
  });
});
