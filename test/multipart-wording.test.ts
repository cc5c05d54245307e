import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { countRows, createUser } from './factories.ts';
import type { TestUser } from './factories.ts';
import type { TestApp } from './harness.ts';
import { forEachDialect, startTestApp } from './harness.ts';

const ENDPOINTS = ['/api/v1/request/queue/add', '/api/v1/attachmentdisplay/create'];

forEachDialect((dialect) => {
  describe(`multipart faults read the same on queue add and attachment create (${dialect})`, () => {
    let app: TestApp;
    let user: TestUser;
    before(async () => {
      app = await startTestApp(dialect);
      user = await createUser(app.db);
    });
    after(async () => app.close());

    const bodies: [string, string, string][] = [
      [
        'cut short',
        'multipart/form-data; boundary=x',
        '--x\r\nContent-Disposition: form-data; name="f"; filename="a"\r\n',
      ],
      ['without a boundary', 'multipart/form-data', '--x\r\n'],
    ];
    for (const [name, contentType, body] of bodies) {
      it(`a multipart body ${name}: 422 {"data":"Malformed multipart body."} on both, nothing written`, async () => {
        const before = await Promise.all(
          ['request', 'attachment_data'].map((t) => countRows(app.db, t as never)),
        );
        for (const url of ENDPOINTS) {
          const response = await app.request(url, {
            method: 'POST',
            headers: { authorization: user.authorization, 'content-type': contentType },
            body,
          });
          assert.equal(response.status, 422, url);
          assert.deepEqual(
            await response.json(),
            { success: 0, message: { data: 'Malformed multipart body.' } },
            url,
          );
        }
        const after = await Promise.all(
          ['request', 'attachment_data'].map((t) => countRows(app.db, t as never)),
        );
        assert.deepEqual(after, before);
      });
    }
  });
});
