/**
 * Received DICOM is never parsed on the main thread: a STOW-RS instance whose data set holds nearly
 * DICOM_MAX_ELEMENTS elements before its pixel data is checked on the DICOM module's worker threads. The
 * app runs in this process, so the test sees the instance's header come back in a message of a worker
 * thread (threads seen through Node's `worker_threads` diagnostics channel): the check that counted its
 * elements ran there. How long a parse on the main thread would stall the event loop is a measurement,
 * not something a test on a shared machine can bound.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import diagnosticsChannel from 'node:diagnostics_channel';
import type { Worker } from 'node:worker_threads';
import dicomParser from 'dicom-parser';
import { buildInstance, multipartRelated, sopInstanceUidOf, stowContentType } from '../dicom-instances.ts';
import { receiptOf } from '../dicom-receiving.ts';
import type { TestUser } from '../factories.ts';
import { createUser } from '../factories.ts';
import type { TestApp } from '../harness.ts';
import { forEachDialect, startTestApp } from '../harness.ts';

const MAX_ELEMENTS = 200_000;
/** Empty private elements written before the patient group: close to the limit, with the others. */
const EXTRA_ELEMENTS = 195_000;

/** Every message that worker threads started from now on post to this thread, until `stop()`. */
function threadMessages(): { readonly messages: unknown[]; stop(): void } {
  const messages: unknown[] = [];
  const subscriber = (created: unknown) => {
    (created as { worker: Worker }).worker.on('message', (message: unknown) => messages.push(message));
  };
  diagnosticsChannel.subscribe('worker_threads', subscriber);
  return { messages, stop: () => diagnosticsChannel.unsubscribe('worker_threads', subscriber) };
}

/** The SOP Instance UID of a DICOM thread's header read or check in `message`, if it is one. */
function headerUidOf(message: unknown): string | undefined {
  const result = message as {
    read?: { header?: { SOPInstanceUID?: string } };
    inspection?: { summary?: { header?: { SOPInstanceUID?: string } } };
  } | null;
  return result?.read?.header?.SOPInstanceUID ?? result?.inspection?.summary?.header?.SOPInstanceUID;
}

/**
 * `file` with `count` empty LO elements in the private groups 0009, 000B, 000D, 000F, inserted in tag
 * order before the patient group (0010): an explicit VR little endian file, as `buildInstance` writes.
 */
function withManyElements(file: Buffer, count: number): Buffer {
  const dataSet = dicomParser.parseDicom(file, { untilTag: 'x00100000' });
  const first = Object.entries(dataSet.elements)
    .filter(([tag]) => tag >= 'x00100000' && tag < 'x7fe00011')
    .map(([, element]) => element.dataOffset - 8)
    .sort((a, b) => a - b)[0]!;
  const inserted = Buffer.alloc(count * 8);
  for (let i = 0; i < count; i++) {
    const group = 0x0009 + 2 * Math.floor(i / 0xf000);
    const element = 0x1000 + (i % 0xf000);
    const at = i * 8;
    inserted.writeUInt16LE(group, at);
    inserted.writeUInt16LE(element, at + 2);
    inserted.write('LO', at + 4, 'latin1');
    inserted.writeUInt16LE(0, at + 6);
  }
  return Buffer.concat([file.subarray(0, first), inserted, file.subarray(first)]);
}

// Watched from before the first app starts: the DICOM threads are the process's, shared by the suites.
const threads = threadMessages();
after(() => threads.stop());

forEachDialect((dialect) => {
  describe(`received DICOM is parsed off the main thread [${dialect}]`, () => {
    let app: TestApp;
    let user: TestUser;
    before(async () => {
      app = await startTestApp(dialect, {
        env: { DICOM_MAX_ELEMENTS: String(MAX_ELEMENTS) },
      });
      user = await createUser(app.db);
    });
    after(() => app.close());

    const store = (body: Buffer) =>
      app.request('/api/v1/dicomweb/studies', {
        method: 'POST',
        headers: { authorization: user.authorization, 'content-type': stowContentType() },
        body,
      });

    it('checks an instance of nearly DICOM_MAX_ELEMENTS elements on a DICOM thread, never on the event loop', async () => {
      // A small instance first (in the first suite it starts the DICOM threads), itself checked on one.
      const small = buildInstance();
      assert.equal((await store(multipartRelated([small]))).status, 200);
      assert.ok(threads.messages.some((m) => headerUidOf(m) === sopInstanceUidOf(small)));

      const instance = withManyElements(buildInstance(), EXTRA_ELEMENTS);
      const body = multipartRelated([instance]);
      const response = await store(body);
      const text = await response.text();
      assert.equal(response.status, 200, text);
      // Stored: the elements were all read and counted, and the instance queued.
      const receipt = await receiptOf(app.db, sopInstanceUidOf(instance));
      assert.ok(receipt !== undefined, 'the instance was queued');
      assert.ok(
        threads.messages.some((m) => headerUidOf(m) === sopInstanceUidOf(instance)),
        'its header was read on a DICOM thread',
      );
    });
  });
});
