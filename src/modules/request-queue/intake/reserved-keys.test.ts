/**
 * The `REQUEST_DATA` names the routines write (device profile and event date, matched patient, event,
 * console edit history) cannot come from a client: queue add and STOW-RS refuse a query string naming one
 * with a 400 that lists them, and store nothing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { buildInstance, multipartRelated, stowContentType } from '../../../../test/dicom-instances.ts';
import type { TestUser } from '../../../../test/factories.ts';
import { countRows, createUser } from '../../../../test/factories.ts';
import { QUEUE_TABLES, submitToQueue } from '../../../../test/factories-queue.ts';
import type { TestApp } from '../../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../../test/harness.ts';
import { findReservedRequestKeys, isReservedRequestKey } from './reserved-keys.ts';

describe('reserved REQUEST_DATA names', () => {
  it('covers every name a routine merges into REQUEST_DATA, and no plain criterion', () => {
    for (const name of [
      'matched_patient_id',
      'event_id',
      'dicom_patient_id',
      'dicom_extracted_frames',
      'device_profile',
      'device_event_date',
      'device_hfa',
      'console_edits',
      'console_event_date',
      'Device_Profile',
    ])
      assert.equal(isReservedRequestKey(name), true, name);
    for (const name of ['hos_num', 'dob', 'sex', 'request_type', 'system_message', 'source', 'eventid'])
      assert.equal(isReservedRequestKey(name), false, name);
    assert.deepEqual(findReservedRequestKeys({ hos_num: '1', device_subtype: 'x', event_id: '3' }), [
      'device_subtype',
      'event_id',
    ]);
  });
});

forEachDialect((dialect) => {
  describe(`queue add and STOW-RS refuse the names routines write [${dialect}]`, () => {
    let app: TestApp;
    let user: TestUser;

    before(async () => {
      app = await startTestApp(dialect);
      user = await createUser(app.db);
    });
    after(() => app.close());

    const counts = () => Promise.all(QUEUE_TABLES.map((t) => countRows(app.db, t)));

    async function assertRefused(response: Response, names: readonly string[]) {
      assert.equal(response.status, 400, await response.clone().text());
      const text = await response.text();
      // Queue add answers in its envelope, STOW-RS with the message alone.
      const message = text.startsWith('{')
        ? (JSON.parse(text) as { success: number; message: { system: string } }).message.system
        : text;
      for (const name of names) assert.match(message, new RegExp(`\\b${name}\\b`));
      assert.match(message, /matched_patient_id, event_id and every name starting with dicom_/);
    }

    it('refuses a form request that names a device profile and event date, storing nothing', async () => {
      const before = await counts();
      const form = new URLSearchParams({ hos_num: '1234567', dob: '1970-03-15' });
      for (const date of ['garbage', '0001-01-01', '9999-12-31']) {
        const response = await submitToQueue(app, user.authorization, {
          query: `request_type=dicom_request&device_profile=zeiss-humphrey&device_subtype=Visual+Field&device_event_date=${date}`,
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: form.toString(),
        });
        await assertRefused(response, ['device_profile', 'device_subtype', 'device_event_date']);
      }
      assert.deepEqual(await counts(), before);
    });

    it('refuses repeated console_edits, a matched patient and an event id in the query string', async () => {
      const before = await counts();
      await assertRefused(
        await submitToQueue(app, user.authorization, {
          query:
            'console_edits=%7B%22userId%22%3A1%7D&console_edits=x&matched_patient_id=1&event_id=2&DICOM_Patient_ID=3',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ hos_num: '1234567' }),
        }),
        ['console_edits', 'matched_patient_id', 'event_id', 'DICOM_Patient_ID'],
      );
      assert.deepEqual(await counts(), before);
    });

    it('refuses a STOW-RS query string naming a routine key, and still takes plain parameters', async () => {
      const before = await counts();
      const refused = await app.request('/api/v1/dicomweb/studies?device_event_date=9999-12-31', {
        method: 'POST',
        headers: { authorization: user.authorization, 'content-type': stowContentType() },
        body: multipartRelated([buildInstance()]),
      });
      await assertRefused(refused, ['device_event_date']);
      assert.deepEqual(await counts(), before);

      const accepted = await submitToQueue(app, user.authorization, {
        query: 'hos_num=1234567&source=Mirth&eventid=4',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ data: { dob: '1970-03-15' } }),
      });
      assert.equal(accepted.status, 200, await accepted.clone().text());
    });
  });
});
