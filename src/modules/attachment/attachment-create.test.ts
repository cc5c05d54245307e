import assert from 'node:assert/strict';
import { readdir } from 'node:fs/promises';
import { after, before, describe, it } from 'node:test';
import type { DB } from '../../db/schema.ts';
import { itEnforcesBasicAuth } from '../../../test/auth-cases.ts';
import { countRows, createUser } from '../../../test/factories.ts';
import type { TestUser } from '../../../test/factories.ts';
import {
  JPEG_BYTES,
  PDF_BYTES,
  PNG_BYTES,
  createEventWithElementType,
} from '../../../test/factories-attachment.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';

const CREATE = '/api/v1/attachmentdisplay/create';
const VIEW = '/api/v1/attachmentdisplay/view';
const LIMIT_BYTES = 4096;
const TABLES: (keyof DB)[] = [
  'request',
  'attachment_data',
  'event_attachment_group',
  'event_attachment_item',
  'request_routine',
];

forEachDialect((dialect) => {
  describe(`POST ${CREATE} (${dialect})`, () => {
    let app: TestApp;
    let user: TestUser;

    before(async () => {
      app = await startTestApp(dialect, { env: { RAW_BODY_LIMIT_BYTES: String(LIMIT_BYTES) } });
      user = await createUser(app.db);
    });
    after(async () => app.close());

    const post = (query: string, body: RequestInit['body'], headers: Record<string, string> = {}) =>
      app.request(`${CREATE}${query}`, {
        method: 'POST',
        headers: { authorization: user.authorization, ...headers },
        body,
      });
    const counts = async () => Promise.all(TABLES.map((t) => countRows(app.db, t)));

    /** Sends the request and asserts the 4xx answer, its envelope and that nothing was written. */
    const assertRefused = async (
      send: () => Promise<Response>,
      status: number,
      message?: Record<string, string>,
    ): Promise<Record<string, string>> => {
      const before = await counts();
      const response = await send();
      assert.equal(response.status, status);
      const body = (await response.json()) as { success: number; message: Record<string, string> };
      assert.equal(body.success, 0);
      if (message !== undefined) assert.deepEqual(body.message, message);
      assert.deepEqual(await counts(), before, 'a refused upload wrote rows');
      assert.deepEqual(await readdir(app.filesDir).catch(() => []), []);
      return body.message;
    };

    itEnforcesBasicAuth(() => app, {
      method: 'POST',
      path: CREATE,
      headers: { 'content-type': 'image/png' },
      body: () => PNG_BYTES,
      operation: 'OprnApi',
      tablesUnchanged: TABLES,
    });

    it('stores a raw body with its Content-Type and answers {"id"}; view serves it at once', async () => {
      const response = await post('', PNG_BYTES, { 'content-type': 'image/png' });
      assert.equal(response.status, 200);
      assert.match(response.headers.get('content-type') ?? '', /^application\/json/);
      const { id } = (await response.json()) as { id: number };
      assert.equal(typeof id, 'number');

      const row = await app.db
        .selectFrom('attachment_data')
        .innerJoin('request', 'request.id', 'attachment_data.request_id')
        .select([
          'attachment_data.mime_type',
          'attachment_data.created_user_id',
          'request.request_type',
          'request.id as request_id',
        ])
        .where('attachment_data.id', '=', id)
        .executeTakeFirstOrThrow();
      assert.equal(row.mime_type, 'image/png');
      assert.equal(row.created_user_id, user.userId);
      assert.equal(row.request_type, 'attachment_upload');
      const routines = await app.db
        .selectFrom('request_routine')
        .select('id')
        .where('request_id', '=', row.request_id)
        .execute();
      assert.deepEqual(routines, [], 'no worker ever picks an upload up');

      const view = await app.request(`${VIEW}?id=${id}`, { headers: { authorization: user.authorization } });
      assert.equal(view.status, 200);
      assert.equal(view.headers.get('content-type'), 'image/png');
      assert.equal(view.headers.get('cache-control'), 'private, no-cache', 'a new row is not immutable yet');
      assert.deepEqual(Buffer.from(await view.arrayBuffer()), PNG_BYTES);
    });

    it('stores the one file part of a multipart body with its type and file name', async () => {
      const form = new FormData();
      form.append('note', 'ignored');
      form.append('file', new Blob([PDF_BYTES], { type: 'application/pdf' }), 'C:\\scans\\letter.pdf');
      const response = await post('', form);
      assert.equal(response.status, 200);
      const { id } = (await response.json()) as { id: number };
      const row = await app.db
        .selectFrom('attachment_data')
        .select(['mime_type', 'upload_file_name', 'blob_data'])
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      assert.equal(row.mime_type, 'application/pdf');
      assert.equal(row.upload_file_name, 'letter.pdf');
      assert.deepEqual(row.blob_data, PDF_BYTES);
    });

    it('stores bytes exactly, whatever they are, for a type that cannot be sniffed', async () => {
      const bytes = Buffer.from([0, 255, 1, 254, 0x0d, 0x0a]);
      const response = await post('', bytes, { 'content-type': 'application/octet-stream' });
      assert.equal(response.status, 200);
      const { id } = (await response.json()) as { id: number };
      const view = await app.request(`${VIEW}?id=${id}`, { headers: { authorization: user.authorization } });
      assert.deepEqual(Buffer.from(await view.arrayBuffer()), bytes);
    });

    it('identifies the content from its bytes when the Content-Type is missing or a form type', async () => {
      const cases: [string, Buffer, Record<string, string>, string][] = [
        ['no Content-Type', PNG_BYTES, {}, 'image/png'],
        [
          "curl's default form type",
          JPEG_BYTES,
          { 'content-type': 'application/x-www-form-urlencoded' },
          'image/jpeg',
        ],
      ];
      for (const [name, bytes, headers, stored] of cases) {
        const response = await post('', bytes, headers);
        assert.equal(response.status, 200, name);
        const { id } = (await response.json()) as { id: number };
        const row = await app.db
          .selectFrom('attachment_data')
          .select('mime_type')
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        assert.equal(row.mime_type, stored, name);
        const view = await app.request(`${VIEW}?id=${id}`, {
          headers: { authorization: user.authorization },
        });
        assert.equal(view.headers.get('content-type'), stored, name);
        assert.deepEqual(Buffer.from(await view.arrayBuffer()), bytes, name);
      }
      // A multipart file part declared with a form type is identified the same way.
      const form = new FormData();
      form.append('file', new Blob([PDF_BYTES], { type: 'application/x-www-form-urlencoded' }), 'scan');
      const response = await post('', form);
      assert.equal(response.status, 200);
      const { id } = (await response.json()) as { id: number };
      const row = await app.db
        .selectFrom('attachment_data')
        .select('mime_type')
        .where('id', '=', id)
        .executeTakeFirstOrThrow();
      assert.equal(row.mime_type, 'application/pdf');
    });

    it('answers 415 with a message, writing nothing, when a missing or form type cannot be identified', async () => {
      const text = Buffer.from('just some words, no magic number');
      const expected = {
        system:
          'The file type could not be identified from its content: send the file with its own Content-Type (for example image/png or application/pdf).',
      };
      await assertRefused(() => post('', text), 415, expected);
      await assertRefused(
        () => post('', text, { 'content-type': 'application/x-www-form-urlencoded' }),
        415,
        expected,
      );
      const form = new FormData();
      form.append('file', new Blob([text], { type: 'multipart/form-data' }), 'notes');
      await assertRefused(() => post('', form), 415, expected);
      const formTypes = await app.db
        .selectFrom('attachment_data')
        .select('id')
        .where('mime_type', 'in', ['application/x-www-form-urlencoded', 'multipart/form-data'])
        .execute();
      assert.deepEqual(formTypes, [], 'no file is ever stored with a form type');
    });

    it('links the upload to an event through one group per event and element type', async () => {
      const { eventId, elementTypeId } = await createEventWithElementType(app.db);
      const ids: number[] = [];
      for (const bytes of [JPEG_BYTES, PNG_BYTES]) {
        const type = bytes === JPEG_BYTES ? 'image/jpeg' : 'image/png';
        const response = await post(`?event_id=${eventId}&element_type_id=${elementTypeId}`, bytes, {
          'content-type': type,
        });
        assert.equal(response.status, 200);
        ids.push(((await response.json()) as { id: number }).id);
      }
      const items = await app.db
        .selectFrom('event_attachment_item')
        .innerJoin(
          'event_attachment_group',
          'event_attachment_group.id',
          'event_attachment_item.event_attachment_group_id',
        )
        .select(['event_attachment_item.attachment_data_id', 'event_attachment_group.id as group_id'])
        .where('event_attachment_group.event_id', '=', eventId)
        .where('event_attachment_group.element_type_id', '=', elementTypeId)
        .orderBy('event_attachment_item.attachment_data_id')
        .execute();
      assert.deepEqual(
        items.map((i) => i.attachment_data_id),
        ids,
      );
      assert.equal(new Set(items.map((i) => i.group_id)).size, 1);
    });

    it('refuses a missing, unknown or half link with 422 and writes nothing', async () => {
      const { eventId, elementTypeId } = await createEventWithElementType(app.db);
      const png = { 'content-type': 'image/png' };
      assert.deepEqual(
        await assertRefused(
          () => post(`?event_id=999999&element_type_id=${elementTypeId}`, PNG_BYTES, png),
          422,
        ),
        { event_id: 'Event not found.' },
      );
      assert.deepEqual(
        await assertRefused(() => post(`?event_id=${eventId}&element_type_id=999999`, PNG_BYTES, png), 422),
        { element_type_id: 'Element type not found.' },
      );
      const half = await assertRefused(() => post(`?event_id=${eventId}`, PNG_BYTES, png), 422);
      assert.ok('element_type_id' in half);
      const bad = await assertRefused(() => post(`?event_id=-1&element_type_id=abc`, PNG_BYTES, png), 422);
      assert.deepEqual(Object.keys(bad).sort(), ['element_type_id', 'event_id']);
      await app.db.updateTable('event').set({ deleted: 1 }).where('id', '=', eventId).execute();
      await assertRefused(
        () => post(`?event_id=${eventId}&element_type_id=${elementTypeId}`, PNG_BYTES, png),
        422,
        {
          event_id: 'Event not found.',
        },
      );
    });

    it('refuses an empty body with 422', async () => {
      await assertRefused(() => post('', undefined, { 'content-type': 'image/png' }), 422, {
        data: 'The attachment is empty.',
      });
      await assertRefused(() => post('', Buffer.alloc(0), { 'content-type': 'image/png' }), 422, {
        data: 'The attachment is empty.',
      });
      const message = await assertRefused(() => post('', undefined), 422);
      assert.ok('data' in message && 'mime_type' in message);
    });

    it('refuses a type missing from mime_type, malformed or absent, with 422', async () => {
      for (const type of ['text/html', 'image/svg+xml', 'application/x-sh']) {
        await assertRefused(() => post('', Buffer.from('<b>x</b>'), { 'content-type': type }), 422, {
          mime_type: `Type ${type} is not allowed.`,
        });
      }
      for (const type of ['image', 'not a type', '']) {
        const message = await assertRefused(() => post('', Buffer.from('x'), { 'content-type': type }), 422);
        assert.ok('mime_type' in message, type);
      }
      const form = new FormData();
      form.append('file', new Blob(['<script>'], { type: 'text/html' }), 'x.html');
      await assertRefused(() => post('', form), 422, { mime_type: 'Type text/html is not allowed.' });
    });

    it('refuses a file name with a NUL character with 422, on every dialect', async () => {
      const body = [
        '--b',
        'Content-Disposition: form-data; name="file"; filename="a\u0000.png"',
        'Content-Type: image/png',
        '',
        '',
      ].join('\r\n');
      const multipart = Buffer.concat([Buffer.from(body, 'latin1'), PNG_BYTES, Buffer.from('\r\n--b--\r\n')]);
      await assertRefused(
        () => post('', multipart, { 'content-type': 'multipart/form-data; boundary=b' }),
        422,
        { file_name: 'The file name must not contain a NUL character.' },
      );
    });

    it('refuses a Content-Type that the bytes contradict with 422', async () => {
      const cases: [string, Buffer][] = [
        ['image/png', JPEG_BYTES],
        ['image/jpeg', PNG_BYTES],
        ['image/jpg', Buffer.from('GIF89a')],
        ['application/pdf', Buffer.from('<html>not a pdf</html>')],
      ];
      for (const [type, bytes] of cases) {
        await assertRefused(() => post('', bytes, { 'content-type': type }), 422, {
          data: `The content is not ${type}.`,
        });
      }
      const form = new FormData();
      form.append('file', new Blob([JPEG_BYTES], { type: 'image/png' }), 'photo.png');
      await assertRefused(() => post('', form), 422, { data: 'The content is not image/png.' });
    });

    it('refuses multipart bodies without exactly one file part, or malformed, with 422', async () => {
      const none = new FormData();
      none.append('note', 'no file');
      await assertRefused(() => post('', none), 422, { data: 'Send exactly one file part.' });
      const two = new FormData();
      two.append('a', new Blob([PNG_BYTES], { type: 'image/png' }), 'a.png');
      two.append('b', new Blob([PNG_BYTES], { type: 'image/png' }), 'b.png');
      await assertRefused(() => post('', two), 422, { data: 'Send exactly one file part.' });
      await assertRefused(
        () =>
          post('', '--x\r\nContent-Disposition: form-data; name="f"; filename="a"\r\n', {
            'content-type': 'multipart/form-data; boundary=x',
          }),
        422,
      );
      await assertRefused(() => post('', 'x', { 'content-type': 'multipart/form-data' }), 422);
    });

    it('stores a JSON or text body as raw bytes of its declared type', async () => {
      const json = Buffer.from('{"a":1}');
      const response = await post('', json, { 'content-type': 'application/json; charset=utf-8' });
      assert.equal(response.status, 200);
      const { id } = (await response.json()) as { id: number };
      const view = await app.request(`${VIEW}?id=${id}`, { headers: { authorization: user.authorization } });
      assert.equal(view.headers.get('content-type'), 'application/json');
      assert.deepEqual(Buffer.from(await view.arrayBuffer()), json);
    });

    it('answers 413 over the size limit, raw or multipart, and writes nothing', async () => {
      const big = Buffer.alloc(LIMIT_BYTES + 1, 0x41);
      await assertRefused(() => post('', big, { 'content-type': 'text/plain' }), 413, {
        data: 'Payload too large.',
      });
      const form = new FormData();
      form.append('file', new Blob([big], { type: 'text/plain' }), 'big.txt');
      await assertRefused(() => post('', form), 413, { data: 'Payload too large.' });
      const atLimit = await post('', Buffer.alloc(LIMIT_BYTES, 0x41), { 'content-type': 'text/plain' });
      assert.equal(atLimit.status, 200);
    });

    it('answers 405 with Allow: POST in the envelope for other methods', async () => {
      for (const method of ['GET', 'PUT', 'DELETE']) {
        const response = await app.request(CREATE, {
          method,
          headers: { authorization: user.authorization },
        });
        assert.equal(response.status, 405, method);
        assert.equal(response.headers.get('allow'), 'POST');
        assert.equal(((await response.json()) as { success: number }).success, 0);
      }
    });
  });
});
