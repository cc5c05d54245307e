/**
 * The orphan sweep removes stored files that no protected_file row names and leftover temporary files,
 * only past the grace period, and never a file that has its row or a name it does not recognise.
 */
import assert from 'node:assert/strict';
import { mkdir, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { sweepOrphanFiles } from '../../src/files/orphan-sweep.ts';
import type { TestDatabase } from '../harness.ts';
import { createTestDatabase, forEachDialect } from '../harness.ts';
import { filesOnDisk } from './consistency.ts';

const HOUR_MS = 3_600_000;

forEachDialect((dialect) => {
  describe(`sweepOrphanFiles [${dialect}]`, () => {
    let testDb: TestDatabase;
    before(async () => {
      testDb = await createTestDatabase(dialect);
    });
    after(() => testDb.drop());

    /** A stored file with its protected_file row. */
    async function storedWithRow(): Promise<string> {
      const stored = await testDb.files.write(Buffer.from('kept'));
      await testDb.db.insertInto('protected_file').values({ uid: stored.uid, name: 'kept.png' }).execute();
      return stored.relativePath;
    }

    async function plant(relativePath: string, ageMs: number): Promise<void> {
      const full = path.join(testDb.filesDir, relativePath);
      await mkdir(path.dirname(full), { recursive: true });
      await writeFile(full, 'x');
      const at = new Date(Date.now() - ageMs);
      await utimes(full, at, at);
    }

    it('removes old orphans and temporary files in batches, keeping files with rows, young files and foreign names', async () => {
      const kept = await Promise.all(Array.from({ length: 5 }, storedWithRow));
      const orphans = Array.from({ length: 7 }, (_, i) => {
        const uid = `${'ab'}${i}${'0'.repeat(36)}${i}`;
        return path.join(uid[0]!, uid[1]!, uid[2]!, uid);
      });
      for (const orphan of orphans) await plant(orphan, 2 * HOUR_MS);
      const uidTemp = 'c'.repeat(40);
      const temp = path.join('c', 'c', 'c', `${uidTemp}.0123456789ab.tmp`);
      await plant(temp, 2 * HOUR_MS);
      const young = path.join('d', 'd', 'd', 'd'.repeat(40));
      await plant(young, 0);
      const foreign = [path.join('e', 'e', 'e', 'README'), path.join('backup', 'x', 'y', 'e'.repeat(40))];
      for (const file of foreign) await plant(file, 2 * HOUR_MS);
      // An upload body spooled by a request a crash ended, and one of a request still running.
      await plant(path.join('.incoming', `${'f'.repeat(32)}.upload`), 2 * HOUR_MS);
      const receiving = path.join('.incoming', `${'a'.repeat(32)}.upload`);
      await plant(receiving, 0);

      const result = await sweepOrphanFiles(testDb.database, testDb.files, {
        olderThanMs: HOUR_MS,
        batchSize: 3,
      });
      assert.deepEqual(result, {
        scannedFiles: 5 + 7 + 1 + 1,
        removedOrphans: 7,
        removedTemps: 1,
        removedSpools: 1,
      });
      assert.deepEqual(await filesOnDisk(testDb.filesDir), [...kept, young, ...foreign, receiving].sort());

      const second = await sweepOrphanFiles(testDb.database, testDb.files, { olderThanMs: 0 });
      assert.deepEqual(
        [second.removedOrphans, second.removedTemps],
        [1, 0],
        'with no grace the young orphan goes',
      );
      assert.equal(second.removedSpools, 1);
      assert.deepEqual(await filesOnDisk(testDb.filesDir), [...kept, ...foreign].sort());
    });
  });
});
