import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { itEnforcesBasicAuth } from '../../../test/auth-cases.ts';
import { countRows, createUser } from '../../../test/factories.ts';
import type { TestUser } from '../../../test/factories.ts';
import {
  JPEG_BYTES,
  PDF_BYTES,
  PNG_BYTES,
  SETTLED_DATE,
  SETTLED_HTTP_DATE,
  createAttachment,
} from '../../../test/factories-attachment.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import { ChangedWhileReadingError, readInChunks } from './attachment-chunks.ts';

const VIEW = '/api/v1/attachmentdisplay/view';
const IMMUTABLE = 'private, max-age=31536000, immutable';

forEachDialect((dialect) => {
  describe(`GET|HEAD ${VIEW} (${dialect})`, () => {
    let app: TestApp;
    let user: TestUser;
    let pngId: number;

    before(async () => {
      app = await startTestApp(dialect);
      user = await createUser(app.db);
      pngId = await createAttachment(app.db);
    });
    after(async () => app.close());

    const get = (query: string, headers: Record<string, string> = {}, method = 'GET') =>
      app.request(`${VIEW}?${query}`, { method, headers: { authorization: user.authorization, ...headers } });

    const digestRows = () => countRows(app.db, 'attachment_data_digest' as never);

    itEnforcesBasicAuth(() => app, { method: 'GET', path: `${VIEW}?id=1` });

    it('sends images and PDF inline and every other type as Content-Disposition: attachment, GET and HEAD', async () => {
      const cases: [string, Buffer, 'inline' | 'attachment'][] = [
        ['image/png', PNG_BYTES, 'inline'],
        ['image/jpeg', JPEG_BYTES, 'inline'],
        ['application/pdf', PDF_BYTES, 'inline'],
        ['application/xhtml+xml', Buffer.from('<html><script>alert(1)</script></html>'), 'attachment'],
        ['application/xml', Buffer.from('<x/>'), 'attachment'],
        ['text/plain', Buffer.from('note'), 'attachment'],
        ['application/octet-stream', Buffer.from([0, 1, 2]), 'attachment'],
      ];
      // A type a site may add to its mime_type list; the seed does not have it.
      await app.db.insertInto('mime_type').values({ mime_type: 'application/xhtml+xml' }).execute();
      for (const [mimeType, bytes, disposition] of cases) {
        const id = await createAttachment(app.db, { mime_type: mimeType, blob_data: bytes });
        for (const method of ['GET', 'HEAD']) {
          const response = await get(`id=${id}`, {}, method);
          assert.equal(response.status, 200, `${mimeType} ${method}`);
          assert.equal(response.headers.get('content-disposition'), disposition, `${mimeType} ${method}`);
          await response.body?.cancel();
        }
      }
      // A type asked for with `mime` is judged the same way as a stored one.
      const asXml = await get(`id=${pngId}&mime=application/xml`);
      assert.equal(asXml.headers.get('content-type'), 'application/xml');
      assert.equal(asXml.headers.get('content-disposition'), 'attachment');
      await asXml.body?.cancel();
    });

    it('sends the stored bytes with the contract headers and a strong ETag', async () => {
      const response = await get(`id=${pngId}`);
      assert.equal(response.status, 200);
      assert.equal(response.headers.get('content-type'), 'image/png');
      assert.equal(response.headers.get('cache-control'), IMMUTABLE);
      assert.equal(response.headers.get('content-transfer-encoding'), 'binary');
      assert.equal(response.headers.get('last-modified'), SETTLED_HTTP_DATE);
      assert.equal(response.headers.get('content-length'), String(PNG_BYTES.length));
      assert.equal(response.headers.get('x-content-type-options'), 'nosniff');
      assert.match(response.headers.get('etag') ?? '', /^"[A-Za-z0-9_-]{43}"$/);
      assert.deepEqual(Buffer.from(await response.arrayBuffer()), PNG_BYTES);
    });

    it('answers HEAD with the same headers as GET and no body', async () => {
      const id = await createAttachment(app.db);
      const head = await get(`id=${id}`, {}, 'HEAD');
      const full = await get(`id=${id}`);
      assert.equal(head.status, 200);
      for (const name of ['content-type', 'cache-control', 'last-modified', 'content-length', 'etag'])
        assert.equal(head.headers.get(name), full.headers.get(name), name);
      assert.equal((await head.arrayBuffer()).byteLength, 0);
    });

    it('is reachable with the original spelling attachmentDisplay', async () => {
      const response = await app.request(`/api/v1/attachmentDisplay/view?id=${pngId}`, {
        headers: { authorization: user.authorization },
      });
      assert.equal(response.status, 200);
    });

    it('answers 405 with Allow: GET, HEAD for other methods', async () => {
      for (const method of ['POST', 'PUT', 'DELETE', 'PATCH']) {
        const response = await get(`id=${pngId}`, {}, method);
        assert.equal(response.status, 405, method);
        assert.equal(response.headers.get('allow'), 'GET, HEAD');
      }
    });

    it('answers 400 "Bad request" for an id that is not a strict positive integer in range', async () => {
      for (const query of [
        'id=',
        'id=-1',
        'id=0',
        'id=10abc',
        'id=1.0',
        'id=%201',
        'id=01',
        'id=99999999999999999999',
        'id=2147483648',
        `id=${pngId}&id=${pngId}`,
        '',
      ]) {
        const response = await get(query);
        assert.equal(response.status, 400, query);
        assert.equal(await response.json(), 'Bad request');
      }
    });

    it('answers 404 "Not Found" for an unknown id, with no-store', async () => {
      const response = await get('id=2147483647');
      assert.equal(response.status, 404);
      assert.equal(response.headers.get('cache-control'), 'no-store');
      assert.equal(await response.json(), 'Not Found');
    });

    it('answers 400 when attachment names any other column, or is repeated', async () => {
      for (const name of [
        'mime_type',
        'request_id',
        'request',
        'hash_code',
        'BLOB_DATA',
        '',
        'blob_data&attachment=text_data',
      ]) {
        const response = await get(`id=${pngId}&attachment=${name}`);
        assert.equal(response.status, 400, name);
        assert.equal(await response.json(), 'Bad request');
      }
    });

    it('defaults to blob_data, then text_data, and answers 404 for a null field', async () => {
      const textId = await createAttachment(app.db, {
        blob_data: null,
        text_data: 'héllo',
        mime_type: 'text/plain',
      });
      const text = await get(`id=${textId}`);
      assert.equal(text.status, 200);
      assert.equal(text.headers.get('content-type'), 'text/plain');
      assert.equal(text.headers.get('content-length'), String(Buffer.byteLength('héllo')));
      assert.equal(await text.text(), 'héllo');

      const explicit = await get(`id=${pngId}&attachment=blob_data`);
      assert.deepEqual(Buffer.from(await explicit.arrayBuffer()), PNG_BYTES);
      for (const query of [
        `id=${pngId}&attachment=text_data`,
        `id=${pngId}&attachment=thumbnail_small_blob`,
      ]) {
        const response = await get(query);
        assert.equal(response.status, 404, query);
        assert.equal(await response.json(), 'Not Found');
        assert.equal((await get(query, {}, 'HEAD')).status, 404);
      }
      const empty = await createAttachment(app.db, { blob_data: null, text_data: null });
      assert.equal((await get(`id=${empty}`)).status, 404);
    });

    it('serves thumbnails as the type their bytes show, else application/octet-stream', async () => {
      const id = await createAttachment(app.db, {
        mime_type: 'application/pdf',
        thumbnail_small_blob: JPEG_BYTES,
        thumbnail_medium_blob: PNG_BYTES,
        thumbnail_large_blob: Buffer.from('not an image'),
      });
      const expected = {
        thumbnail_small_blob: 'image/jpeg',
        thumbnail_medium_blob: 'image/png',
        thumbnail_large_blob: 'application/octet-stream',
      };
      for (const [field, type] of Object.entries(expected)) {
        const head = await get(`id=${id}&attachment=${field}`, {}, 'HEAD');
        assert.equal(head.headers.get('content-type'), type, field);
        const response = await get(`id=${id}&attachment=${field}`);
        assert.equal(response.headers.get('content-type'), type, field);
      }
    });

    it('uses mime only when it is a type/subtype listed in mime_type', async () => {
      const ok = await get(`id=${pngId}&mime=IMAGE/JPEG`);
      assert.equal(ok.status, 200);
      assert.equal(ok.headers.get('content-type'), 'image/jpeg');
      const pngEtag = (await get(`id=${pngId}`)).headers.get('etag');
      assert.notEqual(ok.headers.get('etag'), pngEtag, 'the ETag depends on the Content-Type');
      for (const mime of [
        'text/html',
        'image/svg+xml',
        'image',
        'image/png;charset=utf-8',
        'image/png%0d%0aSet-Cookie:%20a=b',
        'image/png%0aX-Injected:%201',
        '',
        'image/png&mime=image/png',
      ]) {
        const response = await get(`id=${pngId}&mime=${mime}`);
        assert.equal(response.status, 400, mime);
        assert.equal(response.headers.get('set-cookie'), null);
        assert.equal(response.headers.get('x-injected'), null);
        assert.equal(await response.json(), 'Bad request');
      }
    });

    it('sends the stored bytes exactly, even when they look like base64', async () => {
      const id = await createAttachment(app.db, { blob_data: Buffer.from('test'), mime_type: 'text/plain' });
      assert.equal(await (await get(`id=${id}`)).text(), 'test');
    });

    it('sends a multi-megabyte attachment exactly, for GET and HEAD, with and without a stored digest', async () => {
      const bytes = randomBytes(app.database.dialect.blobSliceBytes * 2 + 12345);
      const id = await createAttachment(app.db, { blob_data: bytes, mime_type: 'application/octet-stream' });
      const head = await get(`id=${id}`, {}, 'HEAD');
      assert.equal(head.headers.get('content-length'), String(bytes.length));
      for (let round = 0; round < 2; round++) {
        const response = await get(`id=${id}`);
        assert.equal(response.status, 200);
        assert.equal(response.headers.get('content-length'), String(bytes.length));
        assert.equal(response.headers.get('etag'), head.headers.get('etag'));
        assert.ok(Buffer.from(await response.arrayBuffer()).equals(bytes));
      }
      await app.db
        .updateTable('attachment_data')
        .set({ blob_data: bytes.subarray(1) })
        .where('id', '=', id)
        .execute();
      const changed = await get(`id=${id}`);
      assert.ok(Buffer.from(await changed.arrayBuffer()).equals(bytes.subarray(1)));
      assert.notEqual(changed.headers.get('etag'), head.headers.get('etag'));
    });

    it('sends every byte value exactly, at the sizes where a read changes from inline to chunked', async () => {
      const inline = app.database.dialect.maxInlineBlobBytes;
      const chunk = app.database.dialect.blobSliceBytes;
      const sizes = [inline, inline + 1, chunk, chunk + 1];
      for (const size of sizes) {
        // Every byte value, NUL and bytes that are never valid UTF-8 included, in a varying order.
        const bytes = randomBytes(size);
        for (let i = 0; i < 256 && i < size; i++) bytes[i] = i;
        const id = await createAttachment(app.db, {
          blob_data: bytes,
          mime_type: 'application/octet-stream',
        });
        for (let round = 0; round < 2; round++) {
          const response = await get(`id=${id}`);
          assert.equal(response.status, 200);
          assert.equal(response.headers.get('content-length'), String(size));
          assert.ok(Buffer.from(await response.arrayBuffer()).equals(bytes), `${size} bytes, round ${round}`);
        }
      }
    });

    it('reads a chunk as bytes, null for a null field, nothing for a deleted row', async () => {
      const readAttachmentChunk = async (
        database: TestApp['database'],
        id: number,
        column: 'blob_data' | 'thumbnail_small_blob',
        offset: number,
        lengthBytes: number,
      ) => {
        const slice = await database.dialect.readBlobSlice({
          table: 'attachment_data',
          idColumn: 'id',
          id,
          column,
          offset,
          lengthBytes,
          versionColumn: 'last_modified_date',
        });
        return slice === undefined ? undefined : { lastModifiedDate: slice.version, bytes: slice.bytes };
      };
      const bytes = randomBytes(1000);
      const id = await createAttachment(app.db, { blob_data: bytes });
      const modified = await lastModifiedOf(app, id);
      const chunk = await readAttachmentChunk(app.database, id, 'blob_data', 100, 300);
      assert.equal(chunk?.lastModifiedDate, modified);
      assert.ok(chunk?.bytes?.equals(bytes.subarray(100, 400)));
      const past = await readAttachmentChunk(app.database, id, 'blob_data', 990, 20);
      assert.ok(past?.bytes?.equals(bytes.subarray(990)));
      const empty = await readAttachmentChunk(app.database, id, 'thumbnail_small_blob', 0, 10);
      assert.deepEqual(empty, { lastModifiedDate: modified, bytes: null });
      await app.db.deleteFrom('attachment_data').where('id', '=', id).execute();
      assert.equal(await readAttachmentChunk(app.database, id, 'blob_data', 0, 10), undefined);
    });

    it('detects a write between two chunks of one read', async () => {
      const chunkBytes = app.database.dialect.blobSliceBytes;
      const bytes = randomBytes(chunkBytes * 2 + 1);
      const id = await createAttachment(app.db, { blob_data: bytes });
      const modified = await lastModifiedOf(app, id);
      const chunks = readInChunks(app.database, id, 'blob_data', modified, bytes.length);
      const first = await chunks.next();
      assert.ok(Buffer.isBuffer(first.value) && first.value.equals(bytes.subarray(0, chunkBytes)));
      await app.db
        .updateTable('attachment_data')
        .set({ attachment_type: 'NONE' })
        .where('id', '=', id)
        .execute();
      await assert.rejects(chunks.next(), ChangedWhileReadingError);
    });

    describe('conditional GET', () => {
      let id: number;
      let etag: string;
      before(async () => {
        id = await createAttachment(app.db);
        etag = (await get(`id=${id}`, {}, 'HEAD')).headers.get('etag')!;
      });

      const assertNotModified = async (response: Response) => {
        assert.equal(response.status, 304);
        assert.equal(response.headers.get('cache-control'), IMMUTABLE);
        assert.equal(response.headers.get('last-modified'), SETTLED_HTTP_DATE);
        assert.equal(response.headers.get('etag'), etag);
        assert.equal(response.headers.get('content-length'), null);
        assert.equal((await response.arrayBuffer()).byteLength, 0);
      };

      it('answers 304 for If-Modified-Since equal to or after Last-Modified, in all three date forms', async () => {
        for (const date of [
          SETTLED_HTTP_DATE,
          'Wednesday, 04-Mar-20 05:06:07 GMT',
          'Wed Mar  4 05:06:07 2020',
          'Thu, 05 Mar 2020 00:00:00 GMT',
        ]) {
          await assertNotModified(await get(`id=${id}`, { 'if-modified-since': date }));
          await assertNotModified(await get(`id=${id}`, { 'if-modified-since': date }, 'HEAD'));
        }
      });

      it('answers 200 for an older or unparseable If-Modified-Since', async () => {
        for (const date of [
          'Wed, 04 Mar 2020 05:06:06 GMT',
          'garbage',
          '',
          'Wed, 31 Feb 2020 05:06:07 GMT',
          '2020-03-04T05:06:07Z',
          'Wed, 04 Mar 2020 05:06:07 UTC',
        ]) {
          const response = await get(`id=${id}`, { 'if-modified-since': date });
          assert.equal(response.status, 200, date);
          assert.deepEqual(Buffer.from(await response.arrayBuffer()), PNG_BYTES);
        }
      });

      it('answers 304 when If-None-Match lists the ETag, weak or not, or is *', async () => {
        for (const value of [etag, `"x", ${etag}`, `W/${etag}`, '*', ` ${etag} ,`]) {
          await assertNotModified(await get(`id=${id}`, { 'if-none-match': value }));
        }
      });

      it('lets If-None-Match decide over If-Modified-Since, and ignores garbage', async () => {
        const mismatch = await get(`id=${id}`, {
          'if-none-match': '"other"',
          'if-modified-since': 'Thu, 05 Mar 2099 00:00:00 GMT',
        });
        assert.equal(mismatch.status, 200);
        for (const value of ['garbage', etag.slice(1, -1), '"unterminated', 'W/', '""']) {
          const response = await get(`id=${id}`, { 'if-none-match': value });
          assert.equal(response.status, 200, value);
        }
      });

      it('checks authentication before any 304', async () => {
        const response = await app.request(`${VIEW}?id=${id}`, { headers: { 'if-none-match': etag } });
        assert.equal(response.status, 401);
      });

      it('never reads the bytes for a HEAD or a 304 once the digest is stored', async () => {
        // Corrupt the stored digest: if the bytes were read, the ETag would be recomputed from them.
        await sql`update attachment_data_digest set blob_data_sha256 = ${'0'.repeat(64)} where attachment_data_id = ${id}`.execute(
          app.db,
        );
        const head = await get(`id=${id}`, {}, 'HEAD');
        assert.notEqual(head.headers.get('etag'), etag);
        assert.equal((await get(`id=${id}`, { 'if-none-match': head.headers.get('etag')! })).status, 304);
        assert.ok((await digestRows()) > 0);
      });
    });

    describe('last_modified_date', () => {
      it('moves forward on every write of the row, even twice in one second, and changes the ETag', async () => {
        const id = await createAttachment(app.db);
        const first = await get(`id=${id}`);
        const etag = first.headers.get('etag')!;
        const dates: string[] = [];
        for (const blob of [JPEG_BYTES, PNG_BYTES]) {
          await app.db.updateTable('attachment_data').set({ blob_data: blob }).where('id', '=', id).execute();
          dates.push(await lastModifiedOf(app, id));
        }
        assert.ok(dates[0]! > SETTLED_DATE, dates[0]);
        assert.ok(dates[1]! > dates[0]!, `${dates[1]} > ${dates[0]}`);
        // Same bytes as at first, newer date: same ETag (content hash), but the old date no longer validates.
        const again = await get(`id=${id}`, { 'if-modified-since': SETTLED_HTTP_DATE });
        assert.equal(again.status, 200);
        assert.equal(again.headers.get('etag'), etag);
        assert.equal(again.headers.get('cache-control'), 'private, no-cache', 'young rows are not immutable');
      });

      it('replaces the 1901 default with the time of the insert', async () => {
        const id = await createAttachment(app.db, { last_modified_date: '1901-01-01 00:00:00' });
        const modified = await lastModifiedOf(app, id);
        assert.ok(modified > '2020-01-01 00:00:00', modified);
      });

      it('serves new content after a write, never the old digest', async () => {
        const id = await createAttachment(app.db);
        const etag = (await get(`id=${id}`, {}, 'HEAD')).headers.get('etag')!;
        await app.db
          .updateTable('attachment_data')
          .set({ blob_data: JPEG_BYTES })
          .where('id', '=', id)
          .execute();
        const conditional = await get(`id=${id}`, { 'if-none-match': etag });
        assert.equal(conditional.status, 200);
        assert.notEqual(conditional.headers.get('etag'), etag);
        assert.deepEqual(Buffer.from(await conditional.arrayBuffer()), JPEG_BYTES);
        const head = await get(`id=${id}`, {}, 'HEAD');
        assert.equal(head.headers.get('content-length'), String(JPEG_BYTES.length));
      });

      it('does not send immutable for REQUEST_ rows, which the processor changes later', async () => {
        const id = await createAttachment(app.db, { attachment_mnemonic: 'REQUEST_BLOB' });
        assert.equal((await get(`id=${id}`)).headers.get('cache-control'), 'private, no-cache');
      });
    });
  });

  describe(`${VIEW} with the switches on (${dialect})`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect, {
        env: { ATTACHMENT_REQUIRE_OPRNAPI: 'on', ATTACHMENT_BASE64_COMPAT: 'on' },
      });
    });
    after(async () => app.close());

    itEnforcesBasicAuth(() => app, { method: 'GET', path: `${VIEW}?id=1`, operation: 'OprnApi' });

    it('decodes strict base64 like the original, and keeps anything else raw', async () => {
      const user = await createUser(app.db);
      const cases: [stored: string, sent: string][] = [
        ['dGVzdA==', 'test'],
        ['dGVz\ndA==', 'test'],
        ['test', '\xb5\xeb-'],
        ['MA==', 'MA=='],
        ['not base64!', 'not base64!'],
        ['dGVzdA=', 'dGVzdA='],
      ];
      for (const [stored, sent] of cases) {
        const id = await createAttachment(app.db, {
          blob_data: Buffer.from(stored, 'latin1'),
          mime_type: 'text/plain',
        });
        const headers = { authorization: user.authorization };
        const response = await app.request(`${VIEW}?id=${id}`, { headers });
        const body = Buffer.from(await response.arrayBuffer());
        assert.equal(body.toString('latin1'), sent, stored);
        assert.equal(response.headers.get('content-length'), String(body.length));
        const head = await app.request(`${VIEW}?id=${id}`, { method: 'HEAD', headers });
        assert.equal(head.headers.get('content-length'), String(body.length));
      }
    });
  });
});

/** The stored `last_modified_date` of attachment `id`. */
async function lastModifiedOf(app: TestApp, id: number): Promise<string> {
  const row = await app.db
    .selectFrom('attachment_data')
    .select('last_modified_date')
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
  return row.last_modified_date;
}
