/**
 * FILES_DIR full: the files directory is a real 256 KiB tmpfs, filled up but for a few KiB, so that the
 * signature's files cannot be written (ENOSPC). sign/add answers the contract's save-failed case, 200
 * `"Failed signature save!"`, leaves its status-3 log row and nothing else (no protected_file, no signature,
 * no file, no temporary file), and saves normally once space is freed.
 *
 * Needs `mount` (root, as in CI's container); where mounting is not permitted the test is skipped: a
 * read-only directory is no stand-in when running as root, which writes through permissions.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { countRows } from '../factories.ts';
import type { SignableEvent } from '../factories-signature.ts';
import { b64, createSignableEvent, makePng } from '../factories-signature.ts';
import type { TestApp } from '../harness.ts';
import { forEachDialect, startTestApp } from '../harness.ts';
import { filesOnDisk } from './consistency.ts';

function tryMountTmpfs(dir: string): boolean {
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=256k', 'tmpfs', dir], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

forEachDialect((dialect) => {
  describe(`FILES_DIR full [${dialect}]`, () => {
    let app: TestApp;
    let isMounted = false;
    before(async () => {
      app = await startTestApp(dialect);
      await mkdir(app.filesDir, { recursive: true });
      isMounted = tryMountTmpfs(app.filesDir);
    });
    after(async () => {
      if (isMounted) execFileSync('umount', [app.filesDir]);
      await app.close();
    });

    const sign = (event: SignableEvent, image: Buffer) =>
      app.request('/api/v1/sign/add', {
        method: 'POST',
        body: JSON.stringify({
          unique_identifier: event.code,
          extra_info: JSON.stringify({ e_id: event.elementId, e_t_id: event.esignElementTypeId }),
          image: b64(image),
        }),
      });

    it('answers 200 "Failed signature save!" with a status-3 log and writes nothing else, then saves once space is freed', async (t) => {
      if (!isMounted) {
        t.skip('mount -t tmpfs is not permitted here');
        return;
      }
      const filler = path.join(app.filesDir, 'filler');
      await writeFile(filler, Buffer.alloc(248 * 1024));
      const event = await createSignableEvent(app.db);
      const image = makePng(64, 64, { isNoisy: true }); // about 12 KiB, more than is left
      const logsBefore = await countRows(app.db, 'signature_import_log');

      const response = await sign(event, image);
      assert.equal(response.status, 200);
      assert.equal(await response.json(), 'Failed signature save!');
      const logs = await app.db
        .selectFrom('signature_import_log')
        .selectAll()
        .where('event_id', '=', event.eventId)
        .execute();
      assert.equal(logs.length, 1);
      assert.equal(await countRows(app.db, 'signature_import_log'), logsBefore + 1);
      assert.deepEqual([logs[0]!.status_id, logs[0]!.cropped_file_id], [3, null]);
      assert.match(logs[0]!.return_message ?? '', /^Failed signature save!/);
      assert.equal(await countRows(app.db, 'protected_file'), 0);
      assert.equal(await countRows(app.db, 'ophcocvi_signature'), 0);
      assert.deepEqual(await filesOnDisk(app.filesDir), ['filler'], 'no stored or temporary file is left');

      await rm(filler);
      const retried = await sign(event, image);
      assert.equal(retried.status, 200);
      assert.equal(await retried.json(), 'Correct signature saved!');
      assert.equal(await countRows(app.db, 'ophcocvi_signature'), 1);
      assert.equal((await filesOnDisk(app.filesDir)).length, 2, 'the signature and its original');
    });
  });
});
