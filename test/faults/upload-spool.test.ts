/**
 * Uploads past the in-memory threshold go through a temporary file and are loaded under the upload memory
 * budget: stored byte for byte, the temporary file gone once the request ends (stored, refused, or
 * aborted mid-body), and the budget admitting loads in order, a load larger than the budget alone.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, utimes, writeFile } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { removeStaleSpoolFiles, spoolDirOf, SPOOL_THRESHOLD_BYTES } from '../../src/files/spool.ts';
import { createUploadMemory } from '../../src/http/upload-spool.ts';
import { countRows, createUser } from '../factories.ts';
import type { TestUser } from '../factories.ts';
import type { TestApp } from '../harness.ts';
import { forEachDialect, startTestApp } from '../harness.ts';
import { until } from '../until.ts';

const MiB = 1024 * 1024;
const LIMIT_BYTES = 8 * MiB;

describe('upload memory budget', () => {
  it('admits reservations in order while they fit, and one larger than the budget alone', async () => {
    const memory = createUploadMemory(16);
    const order: string[] = [];
    const first = await memory.reserve(10);
    const second = memory.reserve(10).then((release) => (order.push('second'), release));
    const huge = memory.reserve(40).then((release) => (order.push('huge'), release));
    const small = memory.reserve(1).then((release) => (order.push('small'), release));
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(order, [], 'nothing passes a waiting reservation, not even a small one');
    first();
    (await second)();
    (await huge)();
    (await small)();
    assert.deepEqual(order, ['second', 'huge', 'small']);
    assert.equal(memory.reservedBytes, 0);
  });

  it('removes spool files older than the age given, and keeps newer ones', async () => {
    const dir = path.join(await import('node:os').then((os) => os.tmpdir()), `cra-spool-${process.pid}`);
    await mkdir(dir, { recursive: true });
    await writeFile(path.join(dir, 'old.upload'), 'x');
    await writeFile(path.join(dir, 'new.upload'), 'x');
    await writeFile(path.join(dir, 'other.txt'), 'x');
    const anHourAgo = new Date(Date.now() - 3_600_000);
    await utimes(path.join(dir, 'old.upload'), anHourAgo, anHourAgo);
    assert.equal(await removeStaleSpoolFiles(dir, 600_000), 1);
    assert.deepEqual((await readdir(dir)).sort(), ['new.upload', 'other.txt']);
  });
});

forEachDialect((dialect) => {
  describe(`uploads past ${SPOOL_THRESHOLD_BYTES} bytes (${dialect})`, () => {
    let app: TestApp;
    let user: TestUser;
    before(async () => {
      app = await startTestApp(dialect, {
        env: { RAW_BODY_LIMIT_BYTES: String(LIMIT_BYTES), UPLOAD_MEMORY_BYTES: String(16 * MiB) },
      });
      user = await createUser(app.db);
    });
    after(async () => app.close());

    const spoolFiles = async () =>
      (await readdir(spoolDirOf(app.filesDir)).catch(() => [] as string[])).filter((n) =>
        n.endsWith('.upload'),
      );
    const view = async (id: number) =>
      Buffer.from(
        await (
          await app.request(`/api/v1/attachmentdisplay/view?id=${id}`, {
            headers: { authorization: user.authorization },
          })
        ).arrayBuffer(),
      );

    it('stores a raw attachment byte for byte and removes its temporary file', async () => {
      const bytes = randomBytes(3 * MiB);
      const response = await app.request('/api/v1/attachmentdisplay/create', {
        method: 'POST',
        headers: { authorization: user.authorization, 'content-type': 'application/octet-stream' },
        body: bytes,
      });
      assert.equal(response.status, 200);
      const { id } = (await response.json()) as { id: number };
      assert.ok((await view(id)).equals(bytes));
      await until(async () => (await spoolFiles()).length === 0, { what: 'no spool file left' });
    });

    it('stores a multipart file part and a raw queue payload byte for byte', async () => {
      const bytes = randomBytes(2 * MiB + 17);
      const form = new FormData();
      form.append('file', new Blob([bytes], { type: 'application/octet-stream' }), 'scan.bin');
      const created = await app.request('/api/v1/attachmentdisplay/create', {
        method: 'POST',
        headers: { authorization: user.authorization },
        body: form,
      });
      assert.equal(created.status, 200);
      assert.ok((await view(((await created.json()) as { id: number }).id)).equals(bytes));

      const queued = await app.request('/api/v1/request/queue/add?request_type=noop', {
        method: 'POST',
        headers: { authorization: user.authorization, 'content-type': 'application/octet-stream' },
        body: bytes,
      });
      assert.equal(queued.status, 200);
      const { request_id: requestId } = (await queued.json()) as { request_id: number };
      const stored = await app.db
        .selectFrom('attachment_data')
        .select('blob_data')
        .where('request_id', '=', requestId)
        .where('attachment_mnemonic', '=', 'REQUEST_BLOB')
        .executeTakeFirstOrThrow();
      assert.ok(stored.blob_data?.equals(bytes));
      // A large payload's rows are inserted one statement each: still in the order of a small one's.
      const mnemonics = await app.db
        .selectFrom('attachment_data')
        .select('attachment_mnemonic')
        .where('request_id', '=', requestId)
        .orderBy('id')
        .execute();
      assert.deepEqual(
        mnemonics.map((r) => r.attachment_mnemonic),
        ['REQUEST_DATA', 'REQUEST_BLOB', 'HEADER_DATA'],
      );
      await until(async () => (await spoolFiles()).length === 0, { what: 'no spool file left' });
    });

    it('refuses a body over the limit with 413, writing nothing and leaving no temporary file', async () => {
      const before = [await countRows(app.db, 'attachment_data'), await countRows(app.db, 'request')];
      const response = await app.request('/api/v1/attachmentdisplay/create', {
        method: 'POST',
        headers: { authorization: user.authorization, 'content-type': 'application/octet-stream' },
        body: randomBytes(LIMIT_BYTES + MiB),
      });
      assert.equal(response.status, 413);
      assert.deepEqual(
        [await countRows(app.db, 'attachment_data'), await countRows(app.db, 'request')],
        before,
      );
      await until(async () => (await spoolFiles()).length === 0, { what: 'no spool file left' });
    });

    it('removes the temporary file of an upload whose client hangs up mid-body', async () => {
      const url = new URL(app.baseUrl);
      const socket = net.connect(Number(url.port), '127.0.0.1');
      await new Promise((resolve) => socket.once('connect', resolve));
      socket.write(
        `POST /api/v1/attachmentdisplay/create HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${user.authorization}\r\n` +
          `Content-Type: application/octet-stream\r\nContent-Length: ${6 * MiB}\r\n\r\n`,
      );
      socket.write(randomBytes(2 * MiB));
      await until(async () => (await spoolFiles()).length === 1, { what: 'the body spooled' });
      socket.destroy();
      await until(async () => (await spoolFiles()).length === 0, { what: 'no spool file left' });
    });
  });
});
