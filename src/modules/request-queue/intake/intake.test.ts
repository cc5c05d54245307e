import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pg from 'pg';
import { itEnforcesBasicAuth } from '../../../../test/auth-cases.ts';
import type { TestUser } from '../../../../test/factories.ts';
import { countRows, createUser } from '../../../../test/factories.ts';
import type { TestRequestType } from '../../../../test/factories-queue.ts';
import {
  ADD_PATH,
  QUEUE_TABLES,
  attachmentsByMnemonic,
  createRequestType,
  routinesOf,
  submitToQueue,
} from '../../../../test/factories-queue.ts';
import { PNG_BYTES } from '../../../../test/factories-attachment.ts';
import { addFailingTrigger } from '../../../../test/failing-trigger.ts';
import type { TestApp } from '../../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../../test/harness.ts';
import { until } from '../../../../test/until.ts';
import type { RequestQueuedEvent } from '../engine/queue-events.ts';
import { onRequestQueued } from '../engine/queue-events.ts';

const JSON_LIMIT = 4096;
const RAW_LIMIT = 65536;

/** A small fake DICOM Part 10 file: 128-byte preamble, `DICM`, then bytes. */
function dicomBytes(size = 300): Buffer {
  const bytes = Buffer.alloc(size, 7);
  bytes.fill(0, 0, 128);
  bytes.write('DICM', 128, 'latin1');
  return bytes;
}

/** A hand-built multipart body, for the malformed cases fetch's FormData cannot produce. */
function rawMultipart(boundary: string, parts: readonly string[], isClosed = true): Buffer {
  const body =
    parts.map((p) => `--${boundary}\r\n${p}\r\n`).join('') + (isClosed ? `--${boundary}--\r\n` : '');
  return Buffer.from(body, 'latin1');
}

forEachDialect((dialect) => {
  describe(`POST ${ADD_PATH} (${dialect})`, () => {
    let app: TestApp;
    let user: TestUser;
    let type: TestRequestType;

    before(async () => {
      app = await startTestApp(dialect, {
        env: { JSON_BODY_LIMIT_BYTES: String(JSON_LIMIT), RAW_BODY_LIMIT_BYTES: String(RAW_LIMIT) },
      });
      user = await createUser(app.db);
      type = await createRequestType(app.db);
    });
    after(() => app.close());

    const counts = () => Promise.all(QUEUE_TABLES.map((t) => countRows(app.db, t)));

    /** Sends, asserts the refusal (status + envelope message) and that no queue row was written. */
    async function assertRefused(
      send: () => Promise<Response>,
      status: number,
      message: Record<string, string>,
    ): Promise<Response> {
      const before = await counts();
      const response = await send();
      assert.equal(response.status, status);
      assert.match(response.headers.get('content-type') ?? '', /^application\/json/);
      assert.deepEqual(await response.json(), { success: 0, message });
      assert.deepEqual(await counts(), before, 'a refused submission wrote rows');
      return response;
    }

    async function acceptedId(response: Response): Promise<number> {
      const text = await response.text();
      assert.equal(response.status, 200, text);
      const body = JSON.parse(text) as { request_id: unknown };
      assert.deepEqual(Object.keys(body), ['request_id']);
      assert.equal(typeof body.request_id, 'number');
      assert.ok(Number.isInteger(body.request_id));
      return body.request_id as number;
    }

    const json = (value: unknown, extra: Record<string, string> = {}) => ({
      headers: { 'content-type': 'application/json', ...extra },
      body: JSON.stringify(value),
    });

    describe('accepted submissions', () => {
      it('queues a raw DICOM body with the Mirth query parameters: REQUEST_DATA, REQUEST_BLOB, HEADER_DATA and a NEW DICOM_SEED routine', async () => {
        const bytes = dicomBytes();
        const query =
          'request_type=dicom_request&system_message=AE1&content_type=application/dicom&file_name=a.dcm&institution_id=1&identifier_type=LOCAL-1-0&source_platform=mirth';
        const id = await acceptedId(
          await submitToQueue(app, user.authorization, {
            query,
            headers: { 'content-type': 'application/dicom' },
            body: bytes,
          }),
        );
        const request = await app.db
          .selectFrom('request')
          .selectAll()
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        assert.equal(request.request_type, 'dicom_request');
        assert.equal(request.system_message, 'AE1');
        assert.equal(request.created_user_id, user.userId);
        const rows = await attachmentsByMnemonic(app.db, id);
        assert.deepEqual([...rows.keys()], ['REQUEST_DATA', 'REQUEST_BLOB', 'HEADER_DATA']);
        assert.deepEqual(JSON.parse(rows.get('REQUEST_DATA')!.text_data!), {
          request_type: 'dicom_request',
          system_message: 'AE1',
          content_type: 'application/dicom',
          file_name: 'a.dcm',
          institution_id: '1',
          identifier_type: 'LOCAL-1-0',
          source_platform: 'mirth',
        });
        const blob = rows.get('REQUEST_BLOB')!;
        assert.equal(blob.mime_type, 'application/dicom');
        assert.deepEqual(blob.blob_data, bytes);
        assert.equal(blob.text_data, null);
        assert.equal(typeof blob.hash_code, 'number');
        for (const row of rows.values()) {
          assert.equal(row.attachment_type, 'NONE');
          assert.equal(row.body_site_snomed_type, null);
          assert.equal(row.system_only_managed, 0);
        }
        const routines = await routinesOf(app.db, id);
        assert.equal(routines.length, 1);
        assert.deepEqual(
          {
            status: routines[0]!.status,
            routine: routines[0]!.routine_name,
            queue: routines[0]!.execute_request_queue,
            tries: routines[0]!.try_count,
            sequence: routines[0]!.execute_sequence,
            next: routines[0]!.next_try_date_time,
          },
          { status: 'NEW', routine: 'DICOM_SEED', queue: 'dicom_queue', tries: 0, sequence: 10, next: null },
        );
      });

      it('stores a JSON body as text and reads request_type and system_message from it', async () => {
        const body = JSON.stringify({
          request_type: type.requestType,
          system_message: 'from json',
          data: { x: 1 },
        });
        const id = await acceptedId(
          await submitToQueue(app, user.authorization, {
            headers: { 'content-type': 'application/json' },
            body,
          }),
        );
        const request = await app.db
          .selectFrom('request')
          .selectAll()
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        assert.equal(request.request_type, type.requestType);
        assert.equal(request.system_message, 'from json');
        const rows = await attachmentsByMnemonic(app.db, id);
        assert.equal(rows.get('REQUEST_BLOB')!.text_data, body);
        assert.equal(rows.get('REQUEST_BLOB')!.blob_data, null);
        assert.equal(rows.get('REQUEST_BLOB')!.mime_type, 'application/json');
        assert.deepEqual(JSON.parse(rows.get('REQUEST_DATA')!.text_data!), {});
        const [routine] = await routinesOf(app.db, id);
        assert.equal(routine!.routine_name, type.routineName);
        assert.equal(routine!.execute_request_queue, type.queue);
      });

      it('prefers the query string over the JSON body for request_type and system_message', async () => {
        const id = await acceptedId(
          await submitToQueue(app, user.authorization, {
            query: `request_type=${type.requestType}&system_message=q`,
            ...json({ request_type: 'nope', system_message: 'body', data: {} }),
          }),
        );
        const request = await app.db
          .selectFrom('request')
          .selectAll()
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        assert.deepEqual([request.request_type, request.system_message], [type.requestType, 'q']);
      });

      it('uses the configured default request type and an empty system message when none is given', async () => {
        const id = await acceptedId(await submitToQueue(app, user.authorization, json({ data: { a: 'b' } })));
        const request = await app.db
          .selectFrom('request')
          .selectAll()
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        assert.deepEqual([request.request_type, request.system_message], ['dicom_request', '']);
      });

      it('answers only after the commit and tells in-process listeners which queue has work', async () => {
        const events: RequestQueuedEvent[] = [];
        const unsubscribe = onRequestQueued((event) => events.push(event));
        try {
          const id = await acceptedId(
            await submitToQueue(app, user.authorization, json({ request_type: type.requestType, data: {} })),
          );
          const row = await app.db.selectFrom('request').select('id').where('id', '=', id).executeTakeFirst();
          assert.ok(row !== undefined, 'the request is visible once 200 is answered');
          assert.deepEqual(events, [{ requestId: id, queue: type.queue }]);
        } finally {
          unsubscribe();
        }
      });

      it('writes all or nothing: a failure at the last insert answers 500 with a reference and leaves no row', async () => {
        // A trigger makes the routine insert, the last write of the request, fail.
        const dropTrigger = await addFailingTrigger(app.db, dialect, {
          name: 'fail_routine',
          table: 'request_routine',
          message: 'test failure',
        });
        try {
          const before = await counts();
          const response = await submitToQueue(app, user.authorization, json({ data: { a: 1 } }));
          assert.equal(response.status, 500);
          const body = (await response.json()) as { success: number; message: { system: string } };
          assert.equal(body.success, 0);
          assert.match(body.message.system, /^Internal server error \(ref [\w.:-]+\)$/);
          assert.ok(!JSON.stringify(body).includes('test failure'), 'the driver message leaked');
          assert.deepEqual(await counts(), before);
        } finally {
          await dropTrigger();
        }
      });

      if (dialect === 'postgres') {
        it('sends NOTIFY request_queue with the queue name after the commit', async () => {
          const listener = new pg.Client({ connectionString: app.url });
          await listener.connect();
          try {
            const received: string[] = [];
            listener.on('notification', (n) => received.push(`${n.channel}:${n.payload ?? ''}`));
            await listener.query('LISTEN request_queue');
            await acceptedId(
              await submitToQueue(
                app,
                user.authorization,
                json({ request_type: type.requestType, data: {} }),
              ),
            );
            // The NOTIFY follows the commit without delaying the answer: wait for it (bounded).
            await until(async () => {
              await listener.query('select 1');
              return received.length > 0;
            });
            assert.deepEqual(received, [`request_queue:${type.queue}`]);
          } finally {
            await listener.end();
          }
        });
      }

      it('accepts PUT as an alias of POST', async () => {
        await acceptedId(
          await submitToQueue(app, user.authorization, { method: 'PUT', ...json({ data: { a: 1 } }) }),
        );
      });

      it('normalises the Content-Type header: case, spaces and parameters do not matter', async () => {
        const id = await acceptedId(
          await submitToQueue(app, user.authorization, {
            headers: { 'content-type': ' Application/JSON ; charset=UTF-8' },
            body: JSON.stringify({ data: { a: 1 } }),
          }),
        );
        assert.equal(
          (await attachmentsByMnemonic(app.db, id)).get('REQUEST_BLOB')!.mime_type,
          'application/json',
        );
      });

      it('lets the content_type query parameter override the header for the stored type and the parsing', async () => {
        const pdf = Buffer.from('%PDF-1.4 fake pdf bytes', 'latin1');
        const id = await acceptedId(
          await submitToQueue(app, user.authorization, {
            query: 'content_type=Application/PDF',
            headers: { 'content-type': 'application/octet-stream' },
            body: pdf,
          }),
        );
        const blob = (await attachmentsByMnemonic(app.db, id)).get('REQUEST_BLOB')!;
        assert.equal(blob.mime_type, 'application/pdf');
        assert.deepEqual(blob.blob_data, pdf);

        const jsonId = await acceptedId(
          await submitToQueue(app, user.authorization, {
            query: 'content_type=application/json',
            headers: { 'content-type': 'text/plain' },
            body: JSON.stringify({ data: { b: 2 } }),
          }),
        );
        const jsonRow = (await attachmentsByMnemonic(app.db, jsonId)).get('REQUEST_BLOB')!;
        assert.equal(jsonRow.mime_type, 'application/json');
        assert.equal(jsonRow.text_data, '{"data":{"b":2}}');
      });

      it('stores UTF-8 text/plain and XML bodies as text', async () => {
        const text = 'ünïcode text ✓';
        const id = await acceptedId(
          await submitToQueue(app, user.authorization, {
            headers: { 'content-type': 'text/plain' },
            body: text,
          }),
        );
        const row = (await attachmentsByMnemonic(app.db, id)).get('REQUEST_BLOB')!;
        assert.equal(row.text_data, text);
        assert.equal(row.blob_data, null);
        const xmlId = await acceptedId(
          await submitToQueue(app, user.authorization, {
            headers: { 'content-type': 'application/xml' },
            body: '<a>b</a>',
          }),
        );
        assert.equal((await attachmentsByMnemonic(app.db, xmlId)).get('REQUEST_BLOB')!.text_data, '<a>b</a>');
      });

      it('stores a multipart form: one blob row per file, repeated and array-style names suffixed, FORM_DATA of the fields', async () => {
        const form = new FormData();
        form.append('request_type', type.requestType);
        form.append('system_message', 'multi');
        form.append('data[patient][hos_num]', '0012345');
        form.append('data[tags][]', 'a');
        form.append('data[tags][]', 'b');
        form.append(
          'image',
          new Blob([Buffer.from([0xff, 0xd8, 0xff, 1, 2])], { type: 'image/jpeg' }),
          'one.jpg',
        );
        form.append('image', new Blob([PNG_BYTES]), 'two.png');
        form.append('files[]', new Blob([dicomBytes()], { type: 'application/octet-stream' }), 'scan.dcm');
        form.append('files[]', new Blob(['%PDF-1.7'], { type: 'application/pdf' }), 'doc.pdf');
        const id = await acceptedId(await submitToQueue(app, user.authorization, { body: form }));
        const request = await app.db
          .selectFrom('request')
          .selectAll()
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        assert.deepEqual([request.request_type, request.system_message], [type.requestType, 'multi']);
        const rows = await attachmentsByMnemonic(app.db, id);
        assert.deepEqual(
          [...rows.keys()],
          ['REQUEST_DATA', 'image', 'image_2', 'files', 'files_2', 'FORM_DATA', 'HEADER_DATA'],
        );
        const summary = (m: string) => {
          const r = rows.get(m)!;
          return [r.mime_type, r.upload_file_name, r.blob_data?.length, r.text_data];
        };
        assert.deepEqual(summary('image'), ['image/jpeg', 'one.jpg', 5, null]);
        // No declared type: sniffed from the bytes.
        assert.deepEqual(summary('image_2'), ['image/png', 'two.png', PNG_BYTES.length, null]);
        assert.deepEqual(summary('files'), ['application/dicom', 'scan.dcm', 300, null]);
        assert.deepEqual(summary('files_2'), ['application/pdf', 'doc.pdf', 8, null]);
        const formData = rows.get('FORM_DATA')!;
        assert.equal(formData.mime_type, 'multipart/form-data');
        assert.deepEqual(JSON.parse(formData.text_data!), {
          request_type: type.requestType,
          system_message: 'multi',
          data: { patient: { hos_num: '0012345' }, tags: ['a', 'b'] },
        });
      });

      it('accepts a multipart form with a data field and no file', async () => {
        const form = new FormData();
        form.append('data', 'some text');
        const id = await acceptedId(await submitToQueue(app, user.authorization, { body: form }));
        const rows = await attachmentsByMnemonic(app.db, id);
        assert.deepEqual([...rows.keys()], ['REQUEST_DATA', 'FORM_DATA', 'HEADER_DATA']);
        assert.deepEqual(JSON.parse(rows.get('FORM_DATA')!.text_data!), { data: 'some text' });
      });

      it('stores a URL-encoded form with nested data[...] fields as FORM_DATA, reading request_type from it', async () => {
        const body = `request_type=${type.requestType}&system_message=hello+world&data%5Bpatient%5D%5Bdob%5D=1980-01-02&data[eye]=R&data[ids][]=1&data[ids][]=2`;
        const id = await acceptedId(
          await submitToQueue(app, user.authorization, {
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body,
          }),
        );
        const request = await app.db
          .selectFrom('request')
          .selectAll()
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        assert.deepEqual([request.request_type, request.system_message], [type.requestType, 'hello world']);
        const rows = await attachmentsByMnemonic(app.db, id);
        assert.deepEqual([...rows.keys()], ['REQUEST_DATA', 'FORM_DATA', 'HEADER_DATA']);
        const formData = rows.get('FORM_DATA')!;
        assert.equal(formData.mime_type, 'application/x-www-form-urlencoded');
        assert.deepEqual(JSON.parse(formData.text_data!), {
          request_type: type.requestType,
          system_message: 'hello world',
          data: { patient: { dob: '1980-01-02' }, eye: 'R', ids: ['1', '2'] },
        });
      });

      it('stores HEADER_DATA without credentials or cookies, names lower-case, and the socket address despite X-Forwarded-For', async () => {
        const id = await acceptedId(
          await submitToQueue(app, user.authorization, {
            ...json(
              { data: {} },
              {
                Cookie: 'session=secret',
                'Proxy-Authorization': 'Basic c2VjcmV0',
                'X-Forwarded-For': '203.0.113.9',
                'Client-IP': '203.0.113.10',
                'X-Custom-Header': 'Kept',
              },
            ),
          }),
        );
        const headers = JSON.parse(
          (await attachmentsByMnemonic(app.db, id)).get('HEADER_DATA')!.text_data!,
        ) as Record<string, string>;
        assert.equal(headers.authorization, undefined);
        assert.equal(headers['proxy-authorization'], undefined);
        assert.equal(headers.cookie, undefined);
        assert.equal(headers['x-custom-header'], undefined, 'only the allow-list is stored');
        assert.equal(headers['content-type'], 'application/json');
        assert.equal(headers['origin-ip-address'], '127.0.0.1');
        for (const name of Object.keys(headers)) assert.equal(name, name.toLowerCase());
        const stored = JSON.stringify(headers);
        assert.ok(!stored.includes(user.authorization.slice(6)), 'the Basic credentials were stored');
        assert.ok(!stored.includes('secret'));
      });
    });

    describe('refused submissions (422, nothing stored)', () => {
      it('refuses an unknown request type', async () => {
        await assertRefused(
          () =>
            submitToQueue(app, user.authorization, {
              query: 'request_type=foo&system_message=x',
              ...json({ data: {} }),
            }),
          422,
          { request_type: 'Unknown request type: foo' },
        );
      });

      it('refuses a non-string or too long request_type and system_message, one message per field', async () => {
        await assertRefused(
          () =>
            submitToQueue(app, user.authorization, {
              query: 'request_type=a&request_type=b',
              ...json({ system_message: 5, data: {} }),
            }),
          422,
          {
            request_type: 'Request Type must be a string.',
            system_message: 'System Message must be a string.',
          },
        );
        await assertRefused(
          () => submitToQueue(app, user.authorization, json({ system_message: 'x'.repeat(256), data: {} })),
          422,
          { system_message: 'System Message is too long (maximum is 255 characters).' },
        );
        await assertRefused(
          () => submitToQueue(app, user.authorization, json({ request_type: 'r'.repeat(46), data: {} })),
          422,
          { request_type: 'Request Type is too long (maximum is 45 characters).' },
        );
      });

      it('refuses a NUL character in a text body or text field with 422 naming the field, on every dialect', async () => {
        const valid = `request_type=${type.requestType}`;
        const text = (body: string | Buffer, contentType = 'text/plain') => ({
          headers: { 'content-type': contentType },
          body,
        });
        const nul = 'NUL character';
        const cases: [string, Parameters<typeof submitToQueue>[2], Record<string, string>][] = [
          [
            'system_message in the query',
            { query: `${valid}&system_message=a%00b`, ...text('x') },
            { system_message: `System Message must not contain a ${nul}.` },
          ],
          [
            'request_type in the query',
            { query: 'request_type=a%00b', ...text('x') },
            { request_type: `Request Type must not contain a ${nul}.` },
          ],
          [
            'content_type in the query',
            { query: `${valid}&content_type=text/pl%00ain`, ...text('x') },
            { content_type: `Content Type must not contain a ${nul}.` },
          ],
          [
            'a text/plain body',
            { query: valid, ...text('a\u0000b') },
            { data: `Text data must not contain a ${nul}.` },
          ],
          [
            'an XML body',
            { query: valid, ...text('<a>\u0000</a>', 'application/xml') },
            { data: `Text data must not contain a ${nul}.` },
          ],
          [
            'system_message in a JSON body',
            { query: valid, ...json({ system_message: 'a\u0000b', data: {} }) },
            { system_message: `System Message must not contain a ${nul}.` },
          ],
          [
            'system_message in a form body',
            {
              query: valid,
              headers: { 'content-type': 'application/x-www-form-urlencoded' },
              body: 'system_message=a%00b&data[x]=1',
            },
            { system_message: `System Message must not contain a ${nul}.` },
          ],
        ];
        for (const [name, options, message] of cases) {
          await assertRefused(() => submitToQueue(app, user.authorization, options), 422, message).catch(
            (error: unknown) => {
              throw new Error(`${name}: ${(error as Error).message}`);
            },
          );
        }
        const multipart = (disposition: string, partType: string) => {
          const body = [
            '--b',
            `Content-Disposition: form-data; name="file"; filename="${disposition}"`,
            `Content-Type: ${partType}`,
            '',
            'bytes',
            '--b--',
            '',
          ].join('\r\n');
          return {
            query: valid,
            headers: { 'content-type': 'multipart/form-data; boundary=b' },
            body: Buffer.from(body, 'latin1'),
          };
        };
        await assertRefused(
          () => submitToQueue(app, user.authorization, multipart('a\u0000.txt', 'text/plain')),
          422,
          { upload_file_name: `Upload File Name must not contain a ${nul}.` },
        );
        await assertRefused(
          () => submitToQueue(app, user.authorization, multipart('a.txt', 'text/pl\u0000ain')),
          422,
          { mime_type: `Mime Type must not contain a ${nul}.` },
        );
      });

      it('refuses malformed JSON, also when the content_type override says JSON and the body is not', async () => {
        await assertRefused(
          () =>
            submitToQueue(app, user.authorization, {
              headers: { 'content-type': 'application/json' },
              body: '{"data":',
            }),
          422,
          { data: 'Invalid JSON body.' },
        );
        await assertRefused(
          () =>
            submitToQueue(app, user.authorization, {
              query: 'content_type=application/json',
              headers: { 'content-type': 'application/dicom' },
              body: dicomBytes(),
            }),
          422,
          { data: 'Invalid JSON body.' },
        );
      });

      it('refuses JSON without a data object', async () => {
        for (const body of [{}, { data: null }, [1, 2], 'text']) {
          await assertRefused(() => submitToQueue(app, user.authorization, json(body)), 422, {
            data: 'Data cannot be blank.',
          });
        }
        for (const data of ['x', 3, [1]]) {
          await assertRefused(() => submitToQueue(app, user.authorization, json({ data })), 422, {
            data: 'Data must be a JSON object.',
          });
        }
      });

      it('reports every field at once, the first message of each', async () => {
        await assertRefused(
          () =>
            submitToQueue(app, user.authorization, {
              query: 'request_type=foo',
              headers: { 'content-type': 'application/zip' },
              body: Buffer.alloc(0),
            }),
          422,
          {
            data: 'Data cannot be blank.',
            request_type: 'Unknown request type: foo',
            mime_type: "Uploaded file's mime type is not allowed: application/zip",
          },
        );
      });

      it('refuses a request type deleted after it was last used (no stale cache, no 500)', async () => {
        const gone = await createRequestType(app.db);
        const send = () =>
          submitToQueue(app, user.authorization, json({ request_type: gone.requestType, data: {} }));
        const id = await acceptedId(await send());
        await app.db.deleteFrom('attachment_data').where('request_id', '=', id).execute();
        await app.db.deleteFrom('request_routine').where('request_id', '=', id).execute();
        await app.db.deleteFrom('request').where('id', '=', id).execute();
        await app.db.deleteFrom('request_type').where('request_type', '=', gone.requestType).execute();
        await assertRefused(send, 422, { request_type: `Unknown request type: ${gone.requestType}` });
      });

      it('refuses a type that is not in mime_type', async () => {
        await assertRefused(
          () =>
            submitToQueue(app, user.authorization, {
              headers: { 'content-type': 'application/zip' },
              body: Buffer.from('PK\x03\x04'),
            }),
          422,
          { mime_type: "Uploaded file's mime type is not allowed: application/zip" },
        );
      });

      it('refuses a submission without a content type or body', async () => {
        await assertRefused(() => submitToQueue(app, user.authorization, { query: 'a=1' }), 422, {
          data: 'Data cannot be blank.',
        });
        await assertRefused(
          () =>
            submitToQueue(app, user.authorization, {
              headers: { 'content-type': 'application/dicom' },
              body: '',
            }),
          422,
          { data: 'Data cannot be blank.' },
        );
      });

      it('refuses text bodies that are not UTF-8', async () => {
        for (const type of ['text/plain', 'application/xml', 'application/x-www-form-urlencoded']) {
          await assertRefused(
            () =>
              submitToQueue(app, user.authorization, {
                headers: { 'content-type': type },
                body: Buffer.from([0x64, 0x61, 0x74, 0x61, 0x3d, 0xff, 0xfe]),
              }),
            422,
            { data: 'Invalid text encoding.' },
          );
        }
        await assertRefused(
          () =>
            submitToQueue(app, user.authorization, {
              headers: { 'content-type': 'application/x-www-form-urlencoded' },
              body: 'data=%FF%FE',
            }),
          422,
          { data: 'Invalid text encoding.' },
        );
      });

      it('refuses URL-encoded forms without data, nested too deeply, with unsafe names or conflicting fields', async () => {
        const form = (body: string) => () =>
          submitToQueue(app, user.authorization, {
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body,
          });
        await assertRefused(form('request_type=dicom_request&other=1'), 422, {
          data: 'Data cannot be blank.',
        });
        await assertRefused(form('data='), 422, { data: 'Data cannot be blank.' });
        await assertRefused(form(`data${'[a]'.repeat(9)}=1`), 422, {
          data: 'Form fields are nested too deeply.',
        });
        await assertRefused(form('data[a]=1&da%0D%0Ata=2'), 422, { data: 'Invalid form field name.' });
        await assertRefused(form('data[a]=1&data[a][b]=2'), 422, { data: 'Conflicting form fields.' });
        await assertRefused(form(`data=1${'&a'.repeat(1000)}`), 422, {
          data: 'Too many form fields.',
        });
      });

      it('refuses multipart forms without a file or data', async () => {
        const form = new FormData();
        form.append('note', 'x');
        await assertRefused(() => submitToQueue(app, user.authorization, { body: form }), 422, {
          data: 'Data cannot be blank.',
        });
      });

      it('refuses multipart file names and field names that are too long, unsafe or reserved', async () => {
        const withFile = (field: string, fileName = 'f.pdf') => {
          const form = new FormData();
          form.append(field, new Blob(['%PDF-1'], { type: 'application/pdf' }), fileName);
          return () => submitToQueue(app, user.authorization, { body: form });
        };
        await assertRefused(withFile('f'.repeat(46)), 422, {
          attachment_mnemonic: 'Attachment Mnemonic is too long (maximum is 45 characters).',
        });
        await assertRefused(withFile('file', `${'n'.repeat(101)}.pdf`), 422, {
          upload_file_name: 'Upload File Name is too long (maximum is 100 characters).',
        });
        await assertRefused(withFile('bad name:x'), 422, {
          attachment_mnemonic: 'Attachment Mnemonic may only contain letters, digits, "_", "-" and ".".',
        });
        await assertRefused(withFile('HEADER_DATA'), 422, {
          attachment_mnemonic: 'Attachment Mnemonic is reserved: HEADER_DATA',
        });
        await assertRefused(withFile('files[][x]'), 422, {
          attachment_mnemonic: 'Attachment Mnemonic may only contain letters, digits, "_", "-" and ".".',
        });
      });

      it('refuses header injection attempts in multipart field names', async () => {
        const boundary = 'XyZ123';
        const body = rawMultipart(boundary, [
          'Content-Disposition: form-data; name="data"\r\n\r\nvalue',
          'Content-Disposition: form-data; name="x\\"\r\nX-Injected: 1"\r\n\r\nv',
          'Content-Disposition: form-data; name="a b"; filename="f.pdf"\r\nContent-Type: application/pdf\r\n\r\n%PDF',
        ]);
        await assertRefused(
          () =>
            submitToQueue(app, user.authorization, {
              headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
              body,
            }),
          422,
          {
            data: 'Invalid form field name.',
            attachment_mnemonic: 'Attachment Mnemonic may only contain letters, digits, "_", "-" and ".".',
          },
        );
        const fieldOnly = rawMultipart(boundary, [
          'Content-Disposition: form-data; name="data"\r\n\r\nvalue',
          'Content-Disposition: form-data; name="data<script>"\r\n\r\nv',
        ]);
        await assertRefused(
          () =>
            submitToQueue(app, user.authorization, {
              headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
              body: fieldOnly,
            }),
          422,
          { data: 'Invalid form field name.' },
        );
      });

      it('keeps a multipart field declared as JSON as JSON text, and refuses one that does not parse', async () => {
        const boundary = 'js0nField';
        const send = (value: string) => () =>
          submitToQueue(app, user.authorization, {
            headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
            body: rawMultipart(boundary, [
              `Content-Disposition: form-data; name="data"\r\nContent-Type: application/json\r\n\r\n${value}`,
            ]),
          });
        const id = await acceptedId(await send('{"eye":"R"}')());
        assert.deepEqual(JSON.parse((await attachmentsByMnemonic(app.db, id)).get('FORM_DATA')!.text_data!), {
          data: '{"eye":"R"}',
        });
        await assertRefused(send('{"eye":'), 422, { data: 'Invalid JSON body.' });
      });

      it('refuses multipart field names that would reach Object.prototype', async () => {
        const boundary = 'pr0to';
        await assertRefused(
          () =>
            submitToQueue(app, user.authorization, {
              headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
              body: rawMultipart(boundary, [
                'Content-Disposition: form-data; name="data"\r\n\r\nvalue',
                'Content-Disposition: form-data; name="__proto__"\r\n\r\n{}',
              ]),
            }),
          422,
          { data: 'Invalid form field name.' },
        );
      });

      it('refuses multipart parts without a name', async () => {
        const boundary = 'b0undary';
        const body = rawMultipart(boundary, [
          'Content-Disposition: form-data; filename="f.pdf"\r\nContent-Type: application/pdf\r\n\r\n%PDF',
        ]);
        await assertRefused(
          () =>
            submitToQueue(app, user.authorization, {
              headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
              body,
            }),
          422,
          { data: 'Every multipart part must have a name.' },
        );
      });

      it('refuses truncated multipart bodies', async () => {
        const boundary = 'trunc8';
        const inFile = Buffer.concat([
          Buffer.from(
            `--${boundary}\r\nContent-Disposition: form-data; name="scan"; filename="s.dcm"\r\nContent-Type: application/dicom\r\n\r\n`,
          ),
          dicomBytes(),
        ]);
        await assertRefused(
          () =>
            submitToQueue(app, user.authorization, {
              headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
              body: inFile,
            }),
          422,
          { 'AttachmentData: scan': 'The uploaded file was only partially uploaded' },
        );
        const noEnd = rawMultipart(
          boundary,
          ['Content-Disposition: form-data; name="data"\r\n\r\nvalue'],
          false,
        );
        await assertRefused(
          () =>
            submitToQueue(app, user.authorization, {
              headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
              body: noEnd,
            }),
          422,
          { data: 'Malformed multipart body.' },
        );
      });

      it('refuses a multipart override when the real header has no boundary', async () => {
        await assertRefused(
          () =>
            submitToQueue(app, user.authorization, {
              query: 'content_type=multipart/form-data',
              headers: { 'content-type': 'application/octet-stream' },
              body: dicomBytes(),
            }),
          422,
          { data: 'Malformed multipart body.' },
        );
      });

      it('parses by the override when the real header carries the boundary', async () => {
        const boundary = 'over1de';
        const body = rawMultipart(boundary, [
          'Content-Disposition: form-data; name="doc"; filename="d.pdf"\r\nContent-Type: application/pdf\r\n\r\n%PDF-1',
        ]);
        const response = await submitToQueue(app, user.authorization, {
          query: 'content_type=multipart/form-data',
          headers: { 'content-type': `application/octet-stream; boundary=${boundary}` },
          body,
        });
        const id = await acceptedId(response);
        assert.deepEqual(
          (await attachmentsByMnemonic(app.db, id)).get('doc')!.blob_data,
          Buffer.from('%PDF-1'),
        );
      });
    });

    describe('limits (413, nothing stored)', () => {
      const tooLarge = { data: 'Payload too large.' };

      it('refuses a JSON or form body over the JSON limit', async () => {
        await assertRefused(
          () => submitToQueue(app, user.authorization, json({ data: { big: 'x'.repeat(JSON_LIMIT) } })),
          413,
          tooLarge,
        );
        await assertRefused(
          () =>
            submitToQueue(app, user.authorization, {
              headers: { 'content-type': 'application/x-www-form-urlencoded' },
              body: `data=${'x'.repeat(JSON_LIMIT)}`,
            }),
          413,
          tooLarge,
        );
      });

      it('refuses a raw body over the raw limit, but accepts a raw body over the JSON limit', async () => {
        await assertRefused(
          () =>
            submitToQueue(app, user.authorization, {
              headers: { 'content-type': 'application/dicom' },
              body: dicomBytes(RAW_LIMIT + 1),
            }),
          413,
          tooLarge,
        );
        await acceptedId(
          await submitToQueue(app, user.authorization, {
            headers: { 'content-type': 'application/dicom' },
            body: dicomBytes(JSON_LIMIT * 2),
          }),
        );
      });

      it('refuses a multipart text field over the JSON limit, and multipart fields nested too deeply', async () => {
        const huge = new FormData();
        huge.append('data', 'x'.repeat(JSON_LIMIT + 1));
        await assertRefused(() => submitToQueue(app, user.authorization, { body: huge }), 413, tooLarge);
        const deep = new FormData();
        deep.append(`data${'[a]'.repeat(9)}`, '1');
        await assertRefused(() => submitToQueue(app, user.authorization, { body: deep }), 422, {
          data: 'Form fields are nested too deeply.',
        });
      });

      it('refuses a multipart file over the raw limit', async () => {
        const form = new FormData();
        form.append('scan', new Blob([dicomBytes(RAW_LIMIT + 10)], { type: 'application/dicom' }), 's.dcm');
        await assertRefused(() => submitToQueue(app, user.authorization, { body: form }), 413, tooLarge);
      });

      it('refuses a chunked multipart body whose file grows over the raw limit', async () => {
        const boundary = 'chunky';
        const head = Buffer.from(
          `--${boundary}\r\nContent-Disposition: form-data; name="scan"; filename="s.dcm"\r\nContent-Type: application/dicom\r\n\r\n`,
        );
        const stream = new ReadableStream<Uint8Array>({
          start(controller) {
            controller.enqueue(head);
            controller.enqueue(dicomBytes(RAW_LIMIT + 100));
            controller.enqueue(Buffer.from(`\r\n--${boundary}--\r\n`));
            controller.close();
          },
        });
        await assertRefused(
          () =>
            app.request(ADD_PATH, {
              method: 'POST',
              headers: {
                authorization: user.authorization,
                'content-type': `multipart/form-data; boundary=${boundary}`,
              },
              body: stream,
              duplex: 'half',
            }),
          413,
          tooLarge,
        );
      });
    });

    describe('methods', () => {
      for (const method of ['GET', 'DELETE', 'PATCH']) {
        it(`answers ${method} with 405, Allow: POST, PUT, and creates nothing`, async () => {
          const response = await assertRefused(
            () =>
              submitToQueue(app, user.authorization, {
                method,
                query: 'request_type=dicom_request&system_message=x',
              }),
            405,
            { system: 'Method Not Allowed' },
          );
          assert.equal(response.headers.get('allow'), 'POST, PUT');
        });
      }
    });

    describe('authentication', () => {
      itEnforcesBasicAuth(() => app, {
        method: 'POST',
        path: ADD_PATH,
        headers: { 'content-type': 'application/json' },
        body: () => JSON.stringify({ data: { a: 1 } }),
        operation: 'OprnApi',
        tablesUnchanged: [...QUEUE_TABLES],
      });
    });
  });

  describe(`POST ${ADD_PATH} with large files (${dialect})`, () => {
    let app: TestApp;
    let user: TestUser;
    let type: TestRequestType;
    before(async () => {
      app = await startTestApp(dialect);
      user = await createUser(app.db);
      type = await createRequestType(app.db);
    });
    after(() => app.close());

    it('stores a file of 1 MiB or more beside small ones byte for byte, in form order', async () => {
      const large = Buffer.alloc(1024 * 1024 + 3);
      for (let i = 0; i < large.length; i += 1) large[i] = (i * 7 + (i >> 12)) & 0xff;
      const form = new FormData();
      form.append('request_type', type.requestType);
      form.append('small', new Blob(['%PDF-1.7 a'], { type: 'application/pdf' }), 'a.pdf');
      form.append('large', new Blob([large], { type: 'application/octet-stream' }), 'large.bin');
      form.append('after', new Blob(['%PDF-1.7 b'], { type: 'application/pdf' }), 'b.pdf');
      const response = await submitToQueue(app, user.authorization, { body: form });
      assert.equal(response.status, 200);
      const { request_id: id } = (await response.json()) as { request_id: number };
      const rows = await attachmentsByMnemonic(app.db, id);
      assert.deepEqual(
        [...rows.keys()].filter((m) => ['small', 'large', 'after'].includes(m)),
        ['small', 'large', 'after'],
      );
      assert.ok(Buffer.from(rows.get('large')!.blob_data!).equals(large));
      assert.equal(Buffer.from(rows.get('after')!.blob_data!).toString(), '%PDF-1.7 b');
    });
  });

  describe(`POST ${ADD_PATH} behind a trusted proxy (${dialect})`, () => {
    let app: TestApp;
    let user: TestUser;
    before(async () => {
      app = await startTestApp(dialect, { env: { TRUSTED_PROXIES: '127.0.0.1' } });
      user = await createUser(app.db);
    });
    after(() => app.close());

    it('takes origin-ip-address from X-Forwarded-For when the peer is a trusted proxy', async () => {
      const response = await submitToQueue(app, user.authorization, {
        headers: { 'content-type': 'application/json', 'x-forwarded-for': '198.51.100.7' },
        body: JSON.stringify({ data: {} }),
      });
      assert.equal(response.status, 200);
      const { request_id: id } = (await response.json()) as { request_id: number };
      const headers = JSON.parse(
        (await attachmentsByMnemonic(app.db, id)).get('HEADER_DATA')!.text_data!,
      ) as Record<string, string>;
      assert.equal(headers['origin-ip-address'], '198.51.100.7');
    });
  });
});
