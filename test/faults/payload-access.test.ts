/**
 * A request's private rows against other logins: a queued request's parts (REQUEST_DATA, the body,
 * HEADER_DATA) and an upload of `attachmentdisplay/create` filed under no event are read through
 * `attachmentdisplay/view` only by request admins (`OprnEditRequestData`) and by the user who submitted
 * them; anyone else, even with `OprnApi`, gets the 404 of an unknown id by GET, HEAD and conditional GET
 * (ids are sequential: a 403 would tell which exist). What HEADER_DATA keeps is an allow-list: a secret in
 * a header of the client's own choosing is not stored.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createUser } from '../factories.ts';
import type { TestUser } from '../factories.ts';
import {
  ConsoleClient,
  createFailedRequest,
  createFiledAttachment,
  createOperator,
} from '../factories-console.ts';
import { PNG_BYTES, createAttachment, createEventWithElementType } from '../factories-attachment.ts';
import { attachmentsByMnemonic, submitToQueue } from '../factories-queue.ts';
import type { TestApp } from '../harness.ts';
import { forEachDialect, startTestApp } from '../harness.ts';

const VIEW = '/api/v1/attachmentdisplay/view';
const API_KEY = 'k3y-0f-the-device-never-to-be-stored';

forEachDialect((dialect) => {
  describe(`queued payload parts through attachmentdisplay/view [${dialect}]`, () => {
    let app: TestApp;
    let client: TestUser;
    let requestId: number;
    /** The request's rows by mnemonic: their ids. */
    let parts: Map<string, number>;
    before(async () => {
      app = await startTestApp(dialect);
      client = await createUser(app.db);
      const response = await submitToQueue(app, client.authorization, {
        headers: {
          'content-type': 'application/json',
          'x-api-key': API_KEY,
          'x-vendor-signature': 'sig-secret',
          cookie: 'session=cookie-secret',
          'user-agent': 'modality/1.0',
        },
        body: JSON.stringify({ data: { note: 'payload of the device' } }),
      });
      assert.equal(response.status, 200, await response.clone().text());
      requestId = ((await response.json()) as { request_id: number }).request_id;
      const rows = await attachmentsByMnemonic(app.db, requestId);
      parts = new Map([...rows].map(([mnemonic, row]) => [mnemonic, row.id]));
      assert.deepEqual([...parts.keys()], ['REQUEST_DATA', 'REQUEST_BLOB', 'HEADER_DATA']);
    });
    after(() => app.close());

    const view = (
      user: TestUser,
      id: number,
      init: { method?: string; headers?: Record<string, string> } = {},
    ) =>
      app.request(`${VIEW}?id=${id}`, {
        method: init.method ?? 'GET',
        headers: { authorization: user.authorization, ...init.headers },
      });

    it('stores in HEADER_DATA only the allow-listed headers: no key, signature, cookie or credentials', async () => {
      const rows = await attachmentsByMnemonic(app.db, requestId);
      const text = rows.get('HEADER_DATA')!.text_data!;
      const headers = JSON.parse(text) as Record<string, string>;
      assert.equal(headers['user-agent'], 'modality/1.0');
      assert.equal(headers['content-type'], 'application/json');
      assert.equal(headers['origin-ip-address'], '127.0.0.1');
      for (const name of ['x-api-key', 'x-vendor-signature', 'cookie', 'authorization'])
        assert.equal(headers[name], undefined, name);
      for (const secret of [API_KEY, 'sig-secret', 'cookie-secret', client.authorization.slice(6)])
        assert.ok(!text.includes(secret), 'a secret was stored');
    });

    /** Asserts that `user` gets the 404 "Not Found" of an unknown id for row `id`, however it asks. */
    const assertHidden = async (user: TestUser, id: number, label: string) => {
      const response = await view(user, id);
      assert.equal(response.status, 404, label);
      assert.equal(await response.json(), 'Not Found');
      assert.equal(response.headers.get('etag'), null);
      assert.equal(response.headers.get('last-modified'), null);
      const head = await view(user, id, { method: 'HEAD' });
      const unknownHead = await view(user, 2_000_000_000, { method: 'HEAD' });
      assert.equal(head.status, 404, `HEAD ${label}`);
      assert.equal(head.headers.get('content-length'), unknownHead.headers.get('content-length'), label);
      const conditional = await view(user, id, { headers: { 'if-none-match': '"x"' } });
      assert.equal(conditional.status, 404, `conditional ${label}`);
      const field = await app.request(`${VIEW}?id=${id}&attachment=blob_data`, {
        headers: { authorization: user.authorization },
      });
      assert.equal(field.status, 404, `blob_data of ${label}`);
    };

    it('answers a login with no role and another API client as for an unknown id (404 "Not Found"), by GET, HEAD and conditional GET', async () => {
      const noRole = await createUser(app.db, { roles: [] });
      const otherClient = await createUser(app.db);
      for (const user of [noRole, otherClient])
        for (const [mnemonic, id] of parts) await assertHidden(user, id, mnemonic);
    });

    it('keeps an upload filed under no event to its uploader and request admins; others get the 404 of an unknown id', async () => {
      const upload = await app.request('/api/v1/attachmentdisplay/create', {
        method: 'POST',
        headers: { authorization: client.authorization, 'content-type': 'image/png' },
        body: PNG_BYTES,
      });
      assert.equal(upload.status, 200);
      const { id } = (await upload.json()) as { id: number };
      const noRole = await createUser(app.db, { roles: [] });
      const otherClient = await createUser(app.db);
      for (const user of [noRole, otherClient]) await assertHidden(user, id, 'upload');
      const admin = await createUser(app.db, { roles: ['Edit Payload Processor'] });
      for (const user of [client, admin]) {
        const response = await view(user, id);
        assert.equal(response.status, 200);
        assert.deepEqual(Buffer.from(await response.arrayBuffer()), PNG_BYTES);
        assert.equal((await view(user, id, { method: 'HEAD' })).status, 200);
      }
    });

    it('serves an upload filed under an event to any login', async () => {
      const { eventId, elementTypeId } = await createEventWithElementType(app.db);
      const upload = await app.request(
        `/api/v1/attachmentdisplay/create?event_id=${eventId}&element_type_id=${elementTypeId}`,
        {
          method: 'POST',
          headers: { authorization: client.authorization, 'content-type': 'image/png' },
          body: PNG_BYTES,
        },
      );
      assert.equal(upload.status, 200);
      const { id } = (await upload.json()) as { id: number };
      const otherClient = await createUser(app.db);
      const response = await view(otherClient, id);
      assert.equal(response.status, 200);
      assert.deepEqual(Buffer.from(await response.arrayBuffer()), PNG_BYTES);
    });

    it('serves the parts to a request admin and to the client that submitted them', async () => {
      const admin = await createUser(app.db, { roles: ['Edit Payload Processor'] });
      for (const user of [admin, client]) {
        const response = await view(user, parts.get('REQUEST_BLOB')!);
        assert.equal(response.status, 200);
        assert.deepEqual(await response.json(), { data: { note: 'payload of the device' } });
      }
      const headers = (await (await view(admin, parts.get('HEADER_DATA')!)).json()) as Record<string, string>;
      assert.equal(headers['x-api-key'], undefined);
    });

    it('serves an attachment filed under an event, and a row of a request no client sent, to any login', async () => {
      const filed = await createFiledAttachment(app.db);
      const noRole = await createUser(app.db, { roles: [] });
      const response = await view(noRole, filed.attachmentId);
      assert.equal(response.status, 200);
      assert.equal(response.headers.get('content-type'), 'image/png');
      // An OpenEyes row's request has no HEADER_DATA and the row is no upload: not a private row.
      assert.equal((await view(noRole, await createAttachment(app.db))).status, 200);
    });

    it('shows a HEADER_DATA row stored before the allow-list on the console with the allow-listed headers only', async () => {
      const failed = await createFailedRequest(app.db);
      const old = await app.db
        .insertInto('attachment_data')
        .values({
          request_id: failed.requestId,
          attachment_mnemonic: 'HEADER_DATA',
          attachment_type: 'NONE',
          mime_type: 'application/json',
          text_data: JSON.stringify({
            'User-Agent': 'device/1',
            'x-api-key': API_KEY,
            'x-auth-token': 'token-secret',
            'origin-ip-address': '192.0.2.1',
          }),
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      const browser = new ConsoleClient(app);
      assert.equal((await browser.signIn(await createOperator(app.db))).status, 303);
      const response = await browser.get(`/console/requests/${failed.requestId}/parts/${old.id}`);
      assert.equal(response.status, 200);
      assert.deepEqual(JSON.parse(await response.text()), {
        'User-Agent': 'device/1',
        'origin-ip-address': '192.0.2.1',
      });
    });

    it('answers 404 for an unknown id, before any rule on parts', async () => {
      const noRole = await createUser(app.db, { roles: [] });
      assert.equal((await view(noRole, 2_000_000_000)).status, 404);
    });
  });
});
