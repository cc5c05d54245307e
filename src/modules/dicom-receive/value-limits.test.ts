/**
 * Header values longer than their VR allows (`src/modules/dicom/value-limits.ts`), sent by every path
 * a DICOM file comes in by: STOW-RS answers the instance's failure reason, queue add answers 422, and
 * `DICOM_SEED` fails with the reason for a file queue add's bounded check could not see into (a
 * deflated data set). Nothing of a refused file is stored: no request, no receipt, no header row, no
 * long value in REQUEST_DATA. Large values the limits do not concern (pixel data, an encapsulated PDF,
 * private text, a long LT within the site's limit) are stored as before.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { multipartRelated, sopInstanceUidOf, stowContentType } from '../../../test/dicom-instances.ts';
import { receiptOf } from '../../../test/dicom-receiving.ts';
import type { TestUser } from '../../../test/factories.ts';
import { countRows, createUser } from '../../../test/factories.ts';
import {
  QUEUE_TABLES,
  attachmentsByMnemonic,
  executionsOf,
  routinesOf,
  submitToQueue,
} from '../../../test/factories-queue.ts';
import {
  DEFLATED_EXPLICIT_VR_LITTLE_ENDIAN,
  IMPLICIT_VR_LITTLE_ENDIAN,
  instanceWith,
  longText,
} from '../../../test/hostile-dicom.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import { closeDicomPools } from '../dicom/index.ts';
import { createQueueEngine } from '../request-queue/engine/engine.ts';
import { defaultRoutineCatalog } from '../filing/index.ts';

const MiB = 1024 * 1024;
const STUDIES = '/api/v1/dicomweb/studies';
const TEXT_VALUE = 0x0040a160;

type DicomJson = Record<string, { vr: string; Value?: unknown[] }>;

function failuresOf(body: DicomJson): unknown[][] {
  const items = (body['00081198']?.Value ?? []) as DicomJson[];
  return items.map((i) => [i['00081155']?.Value?.[0], i['00081197']?.Value?.[0]]);
}

function storedOf(body: DicomJson): unknown[] {
  const items = (body['00081199']?.Value ?? []) as DicomJson[];
  return items.map((i) => i['00081155']?.Value?.[0]);
}

forEachDialect((dialect) => {
  describe(`DICOM header values over their VR's limit [${dialect}]`, () => {
    let app: TestApp;
    let user: TestUser;
    /** The largest raw body this database takes (MariaDB's max_allowed_packet may be below 32 MiB). */
    let rawLimit: number;
    before(async () => {
      app = await startTestApp(dialect);
      user = await createUser(app.db);
      rawLimit = app.config.limits.rawBodyBytes;
    });
    after(async () => {
      await closeDicomPools();
      await app.close();
    });

    const counts = () => Promise.all(QUEUE_TABLES.map((t) => countRows(app.db, t)));
    const stow = (body: Buffer) =>
      app.request(STUDIES, {
        method: 'POST',
        headers: { authorization: user.authorization, 'content-type': stowContentType() },
        body,
      });

    it('STOW-RS: refuses a UT of 8 MB (A700, DICOM_MAX_TEXT_BYTES) and a 6 MB PatientName (A900), storing nothing', async () => {
      const ut = instanceWith({ extra: [{ tag: TEXT_VALUE, vr: 'UT', value: longText(8 * MiB) }] });
      const name = instanceWith({
        transferSyntaxUid: IMPLICIT_VR_LITTLE_ENDIAN,
        patientName: longText(6 * MiB),
      });
      assert.ok(ut.length + name.length < rawLimit, 'the bodies fit the upload limit');
      const before = await counts();
      for (const [file, reason] of [
        [ut, 0xa700],
        [name, 0xa900],
      ] as const) {
        const response = await stow(multipartRelated([file]));
        assert.equal(response.status, 409);
        const body = (await response.json()) as DicomJson;
        assert.deepEqual(failuresOf(body), [[sopInstanceUidOf(file), reason]]);
        assert.deepEqual(storedOf(body), []);
        assert.equal(await receiptOf(app.db, sopInstanceUidOf(file)), undefined, 'no receipt');
      }
      assert.deepEqual(await counts(), before, 'no request, attachment or routine row');
    });

    it('STOW-RS: stores large values the limits do not concern, beside a refused instance', async () => {
      const pixels = instanceWith({ extra: [{ tag: 0x00091010, vr: 'OB', value: longText(MiB) }] });
      const privateText = instanceWith({
        extra: [
          { tag: 0x00090010, vr: 'LO', value: Buffer.from('VENDOR XML') },
          { tag: 0x00091011, vr: 'UT', value: longText(200_000) },
        ],
      });
      // 10,000 characters: an LT within both its VR's maximum and the site's 16 KiB.
      const comments = instanceWith({ extra: [{ tag: 0x00204000, vr: 'LT', value: longText(10_000) }] });
      const hostile = instanceWith({
        transferSyntaxUid: IMPLICIT_VR_LITTLE_ENDIAN,
        patientName: longText(MiB),
      });
      const response = await stow(multipartRelated([pixels, privateText, comments, hostile]));
      assert.equal(response.status, 202, 'stored in part');
      const body = (await response.json()) as DicomJson;
      assert.deepEqual(storedOf(body), [pixels, privateText, comments].map(sopInstanceUidOf));
      assert.deepEqual(failuresOf(body), [[sopInstanceUidOf(hostile), 0xa900]]);
    });

    it('queue add: answers 422 for a 20 MB PatientName and stores nothing', async () => {
      // 20 MB, or as much as this database's upload limit takes.
      const size = Math.min(20 * MiB, rawLimit - 4096);
      const file = instanceWith({
        transferSyntaxUid: IMPLICIT_VR_LITTLE_ENDIAN,
        patientName: longText(size),
      });
      const before = await counts();
      const response = await submitToQueue(app, user.authorization, {
        query: 'request_type=dicom_request',
        headers: { 'content-type': 'application/dicom' },
        body: file,
      });
      assert.equal(response.status, 422);
      const text = await response.text();
      assert.match(text, /The DICOM file is refused: A value of element \(0010,0010\) \(VR PN\)/);
      assert.ok(!text.includes('AAAA'), 'the value is not echoed');
      assert.deepEqual(await counts(), before);
    });

    it('DICOM_SEED: fails a deflated file with a 6 MB PatientName with the reason, storing no header', async () => {
      const file = instanceWith({
        transferSyntaxUid: DEFLATED_EXPLICIT_VR_LITTLE_ENDIAN,
        patientNameVr: 'UT',
        patientName: longText(6 * MiB),
      });
      assert.ok(file.length < 64 * 1024, 'the deflated file is small');
      const added = await submitToQueue(app, user.authorization, {
        query: 'request_type=dicom_request',
        headers: { 'content-type': 'application/dicom' },
        body: file,
      });
      assert.equal(added.status, 200, 'queue add does not inflate the data set');
      const requestId = ((await added.json()) as { request_id: number }).request_id;

      const engine = createQueueEngine({
        database: app.database,
        config: app.config,
        catalog: defaultRoutineCatalog,
      });
      // The queue also holds what the tests before stored: run it all.
      for (let i = 0; i < 50 && (await engine.step()).kind === 'ran'; i++);
      const [seed] = await routinesOf(app.db, requestId);
      assert.ok(seed);
      assert.deepEqual([seed.routine_name, seed.status], ['DICOM_SEED', 'FAILED']);
      const log = (await executionsOf(app.db, seed.id)).at(-1)?.log_text ?? '';
      assert.match(log, /value-too-long/);
      assert.match(log, /\(0010,0010\) \(VR PN\)/);
      assert.ok(!log.includes('AAAA'), 'the value is not logged');

      const rows = await attachmentsByMnemonic(app.db, requestId);
      assert.equal(rows.has('DICOM_HEADER'), false, 'no DICOM_HEADER row');
      const requestData = rows.get('REQUEST_DATA')?.text_data ?? '';
      assert.ok(requestData.length < 1000, 'REQUEST_DATA holds no value of the file');
      assert.equal('dicom_patient_name' in (JSON.parse(requestData) as object), false);
      assert.equal((await routinesOf(app.db, requestId)).length, 1, 'no routine chained');
    });
  });
});
