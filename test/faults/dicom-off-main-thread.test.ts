/**
 * Received DICOM is never parsed on the main thread: a STOW-RS instance whose data set holds nearly
 * DICOM_MAX_ELEMENTS elements before its pixel data is checked on the DICOM module's worker threads. The
 * app runs in this process, so the test watches the server's own event loop (`monitorEventLoopDelay`)
 * while the instance is received: parsing those elements on the main thread would stall it for well over
 * the bound.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { monitorEventLoopDelay } from 'node:perf_hooks';
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
/**
 * Generous for a loaded machine: the rest of a store (the multipart body, the queue write) stalls the
 * loop well under it, a main-thread parse of the elements above several times over it.
 */
const STALL_BOUND_MS = 400;

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

    it('checks an instance of nearly DICOM_MAX_ELEMENTS elements without parsing it on the event loop', async () => {
      // A first store starts the DICOM threads, so that their start-up is not measured.
      assert.equal((await store(multipartRelated([buildInstance()]))).status, 200);

      const instance = withManyElements(buildInstance(), EXTRA_ELEMENTS);
      const body = multipartRelated([instance]);
      const delay = monitorEventLoopDelay({ resolution: 10 });
      delay.enable();
      let response: Response;
      try {
        response = await store(body);
      } finally {
        delay.disable();
      }
      const text = await response.text();
      assert.equal(response.status, 200, text);
      // Stored: the elements were all read and counted (on a thread), and the instance queued.
      const receipt = await receiptOf(app.db, sopInstanceUidOf(instance));
      assert.ok(receipt !== undefined, 'the instance was queued');
      const maxStallMs = delay.max / 1e6;
      assert.ok(maxStallMs < STALL_BOUND_MS, `the event loop stalled ${Math.round(maxStallMs)} ms`);
    });
  });
});
