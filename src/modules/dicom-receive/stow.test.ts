import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { itEnforcesBasicAuth } from '../../../test/auth-cases.ts';
import {
  MPEG2,
  buildInstance,
  multipartRelated,
  newUid,
  sopInstanceUidOf,
  stowContentType,
  withTransferSyntax,
} from '../../../test/dicom-instances.ts';
import { readQueuedRequest, receiptOf } from '../../../test/dicom-receiving.ts';
import type { TestUser } from '../../../test/factories.ts';
import { countRows, createUser } from '../../../test/factories.ts';
import { QUEUE_TABLES, submitToQueue } from '../../../test/factories-queue.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import { until } from '../../../test/until.ts';

const STUDIES = '/api/v1/dicomweb/studies';

type DicomJson = Record<string, { vr: string; Value?: unknown[] }>;

/** [class, instance, reason] of each FailedSOPSequence item; [class, instance] of each referenced one. */
function summarise(body: DicomJson) {
  const items = (tag: string) => (body[tag]?.Value ?? []) as DicomJson[];
  const value = (item: DicomJson, tag: string) => item[tag]?.Value?.[0];
  return {
    failed: items('00081198').map((i) => [value(i, '00081150'), value(i, '00081155'), value(i, '00081197')]),
    stored: items('00081199').map((i) => [value(i, '00081150'), value(i, '00081155')]),
  };
}

/** Rows of request, attachment_data (REQUEST_DATA, the payload, HEADER_DATA, DICOM_STUDY per instance), request_routine. */
async function queueCounts(app: TestApp): Promise<number[]> {
  return Promise.all(QUEUE_TABLES.map((t) => countRows(app.db, t)));
}

forEachDialect((dialect) => {
  describe(`POST /api/v1/dicomweb/studies (STOW-RS) [${dialect}]`, () => {
    let app: TestApp;
    let user: TestUser;
    before(async () => {
      app = await startTestApp(dialect, { env: { RAW_BODY_LIMIT_BYTES: '200000' } });
      user = await createUser(app.db);
    });
    after(() => app.close());

    const store = (body: Buffer, options: { path?: string; headers?: Record<string, string> } = {}) =>
      app.request(options.path ?? STUDIES, {
        method: 'POST',
        headers: { authorization: user.authorization, 'content-type': stowContentType(), ...options.headers },
        body,
      });

    describe('auth', () => {
      itEnforcesBasicAuth(() => app, {
        method: 'POST',
        path: STUDIES,
        headers: { 'content-type': stowContentType() },
        body: () => multipartRelated([buildInstance()]),
        operation: 'OprnApi',
        tablesUnchanged: QUEUE_TABLES,
      });
    });

    it('stores and queues each instance as queue add would, answering 200 with ReferencedSOPSequence', async () => {
      const first = buildInstance({ tags: { PatientID: 'P-1' } });
      const second = buildInstance({ sopClassUid: '1.2.840.10008.5.1.4.1.1.77.1.5.1' });
      const response = await store(multipartRelated([first, second]), {
        headers: { cookie: 'session=abc', 'x-site': 'clinic-3' },
      });
      assert.equal(response.status, 200);
      assert.match(response.headers.get('content-type') ?? '', /^application\/dicom\+json/);
      const body = (await response.json()) as DicomJson;
      assert.deepEqual(body['00081190'], { vr: 'UR' });
      assert.equal(body['00081198'], undefined, 'no FailedSOPSequence when all were stored');
      const firstUid = sopInstanceUidOf(first);
      const secondUid = sopInstanceUidOf(second);
      assert.deepEqual(summarise(body).stored, [
        ['1.2.840.10008.5.1.4.1.1.7', firstUid],
        ['1.2.840.10008.5.1.4.1.1.77.1.5.1', secondUid],
      ]);

      const receipt = await receiptOf(app.db, firstUid);
      assert.ok(receipt !== undefined);
      assert.equal(receipt.count, 1);
      const stowed = await readQueuedRequest(app.db, receipt.firstRequestId);
      assert.ok(stowed.payload.equals(first), 'the instance is stored byte for byte');
      assert.equal(
        (
          await readQueuedRequest(app.db, (await receiptOf(app.db, secondUid))!.firstRequestId)
        ).payload.equals(second),
        true,
      );

      // The same bytes through queue add, with the query string a STOW-RS request stands for.
      const added = await submitToQueue(app, user.authorization, {
        query:
          'source=STOW-RS&source_address=127.0.0.1&request_type=dicom_request&system_message=STOW-RS&content_type=application%2Fdicom',
        headers: { 'content-type': 'application/dicom' },
        body: first,
      });
      assert.equal(added.status, 200);
      const viaQueueAdd = await readQueuedRequest(
        app.db,
        ((await added.json()) as { request_id: number }).request_id,
      );
      for (const key of ['requestType', 'systemMessage', 'payloadMime', 'routines'] as const)
        assert.deepEqual(stowed[key], viaQueueAdd[key], key);
      assert.deepEqual(stowed.requestData, viaQueueAdd.requestData);
      assert.deepEqual(stowed.requestData, {
        source: 'STOW-RS',
        source_address: '127.0.0.1',
        request_type: 'dicom_request',
        system_message: 'STOW-RS',
        content_type: 'application/dicom',
      });
      // Receipt queues the header it read as the study record; queue add reads no header.
      assert.deepEqual(stowed.mnemonics, ['REQUEST_DATA', 'REQUEST_BLOB', 'HEADER_DATA', 'DICOM_STUDY']);
      assert.deepEqual(viaQueueAdd.mnemonics, ['REQUEST_DATA', 'REQUEST_BLOB', 'HEADER_DATA']);
      assert.deepEqual(stowed.routines, ['DICOM_SEED@dicom_queue:NEW:10:0']);
      assert.equal(stowed.payloadMime, 'application/dicom');
      // HEADER_DATA: the request's headers without credentials or cookies, and the peer.
      assert.equal(stowed.headerData.authorization, undefined);
      assert.equal(stowed.headerData.cookie, undefined);
      assert.equal(stowed.headerData['x-site'], undefined, 'only the allow-list is stored');
      assert.equal(stowed.headerData['origin-ip-address'], '127.0.0.1');

      const audit = await app.db
        .withTables<{
          audit_event: { action: string; target_ids: string | null; outcome: number; user_id: number | null };
        }>()
        .selectFrom('audit_event')
        .select(['target_ids', 'outcome', 'user_id'])
        .where('action', '=', 'dicomweb.store')
        .where('outcome', '=', 200)
        .execute();
      assert.ok(
        audit.some(
          (a) =>
            a.target_ids === `${receipt.firstRequestId},${receipt.firstRequestId + 1}` &&
            a.user_id === user.userId,
        ),
        JSON.stringify(audit),
      );
    });

    it('answers the Native DICOM Model XML when the client accepts only application/dicom+xml', async () => {
      const instance = buildInstance();
      const response = await store(multipartRelated([instance, Buffer.from('not dicom')]), {
        headers: { accept: 'application/dicom+xml' },
      });
      assert.equal(response.status, 202);
      assert.match(response.headers.get('content-type') ?? '', /^application\/dicom\+xml/);
      const xml = await response.text();
      assert.match(
        xml,
        /^<\?xml version="1.0" encoding="UTF-8"\?>\n<NativeDicomModel xmlns="http:\/\/dicom.nema.org\/PS3.19\/models\/NativeDICOM">/,
      );
      assert.ok(
        xml.includes(
          `<DicomAttribute tag="00081155" vr="UI" keyword="ReferencedSOPInstanceUID"><Value number="1">${sopInstanceUidOf(instance)}</Value></DicomAttribute>`,
        ),
      );
      assert.ok(
        xml.includes(
          '<DicomAttribute tag="00081197" vr="US" keyword="FailureReason"><Value number="1">49152</Value></DicomAttribute>',
        ),
      );
    });

    it('fails a truncated instance alone (C000, its UIDs) and stores nothing for it: 202', async () => {
      const good = buildInstance({ pixelBytes: 20_000 });
      const whole = buildInstance({ pixelBytes: 20_000 });
      const truncated = whole.subarray(0, whole.length - 5000);
      const countsBefore = await queueCounts(app);
      const response = await store(multipartRelated([truncated, good]));
      assert.equal(response.status, 202);
      const { failed, stored } = summarise((await response.json()) as DicomJson);
      assert.deepEqual(failed, [['1.2.840.10008.5.1.4.1.1.7', sopInstanceUidOf(whole), 0xc000]]);
      assert.deepEqual(stored, [['1.2.840.10008.5.1.4.1.1.7', sopInstanceUidOf(good)]]);
      const countsAfter = await queueCounts(app);
      assert.deepEqual(countsAfter, [countsBefore[0]! + 1, countsBefore[1]! + 4, countsBefore[2]! + 1]);
      assert.equal(await receiptOf(app.db, sopInstanceUidOf(whole)), undefined);
    });

    it('refuses, per instance, what the queue cannot use: 409 when none is stored', async () => {
      const mpeg = withTransferSyntax(buildInstance(), MPEG2);
      const rtPlan = buildInstance({ sopClassUid: '1.2.840.10008.5.1.4.1.1.481.5' });
      const noPixels = buildInstance();
      // The pixel data element is the last one: cutting it off leaves a well-formed but empty image.
      const withoutPixels = noPixels.subarray(0, noPixels.indexOf(Buffer.from([0xe0, 0x7f, 0x10, 0x00])));
      const countsBefore = await queueCounts(app);
      const response = await store(
        multipartRelated([
          mpeg,
          rtPlan,
          withoutPixels,
          { bytes: buildInstance(), contentType: 'text/plain' },
        ]),
      );
      assert.equal(response.status, 409);
      const { failed, stored } = summarise((await response.json()) as DicomJson);
      assert.deepEqual(stored, []);
      assert.deepEqual(failed, [
        ['1.2.840.10008.5.1.4.1.1.7', sopInstanceUidOf(mpeg), 0xc122],
        ['1.2.840.10008.5.1.4.1.1.481.5', sopInstanceUidOf(rtPlan), 0x0122],
        ['1.2.840.10008.5.1.4.1.1.7', sopInstanceUidOf(noPixels), 0xa900],
        [undefined, undefined, 0xc000],
      ]);
      assert.deepEqual(await queueCounts(app), countsBefore);
    });

    it('checks the study of POST /studies/{StudyInstanceUID}: another study fails with A900', async () => {
      const study = newUid();
      const inStudy = buildInstance({ studyInstanceUid: study });
      const elsewhere = buildInstance();
      const response = await store(multipartRelated([inStudy, elsewhere]), { path: `${STUDIES}/${study}` });
      assert.equal(response.status, 202);
      const { failed, stored } = summarise((await response.json()) as DicomJson);
      assert.deepEqual(stored, [['1.2.840.10008.5.1.4.1.1.7', sopInstanceUidOf(inStudy)]]);
      assert.deepEqual(failed, [['1.2.840.10008.5.1.4.1.1.7', sopInstanceUidOf(elsewhere), 0xa900]]);
      const bad = await store(multipartRelated([inStudy]), { path: `${STUDIES}/1.2.x` });
      assert.equal(bad.status, 400);
      assert.equal(await bad.json(), 'Invalid Study Instance UID.');
    });

    it('answers 415 for other media types and 400 for a body it cannot frame, storing nothing', async () => {
      const body = multipartRelated([buildInstance()]);
      const countsBefore = await queueCounts(app);
      for (const contentType of [
        'application/dicom',
        'application/json',
        'multipart/form-data; boundary=DICOMwebBoundary1234',
        'multipart/related; type="application/dicom+json"; boundary=DICOMwebBoundary1234',
        'not a media type',
      ]) {
        const response = await store(body, { headers: { 'content-type': contentType } });
        assert.equal(response.status, 415, contentType);
        assert.equal(await response.json(), 'Unsupported Media Type');
      }
      const cases: [string, Buffer, string][] = [
        ['multipart/related; type="application/dicom"', body, 'Malformed multipart body.'],
        [stowContentType('AnotherBoundary'), body, 'Malformed multipart body.'],
        [stowContentType(), Buffer.from('--DICOMwebBoundary1234--\r\n'), 'No DICOM instance in the body.'],
        [stowContentType(), body.subarray(0, body.length - 100), 'Malformed multipart body.'],
      ];
      for (const [contentType, payload, message] of cases) {
        const response = await store(payload, { headers: { 'content-type': contentType } });
        assert.equal(response.status, 400, contentType);
        assert.equal(await response.json(), message);
      }
      assert.deepEqual(await queueCounts(app), countsBefore);
    });

    it('reads a boundary longer than the 70 characters of RFC 2046, as Orthanc sends', async () => {
      const boundary = `${'e5f029f3-a3bd-4f50-95b6-f6b607aa8728'}-${'e5f029f3-a3bd-4f50-95b6-f6b607aa8728'}`;
      assert.equal(boundary.length, 73);
      const instance = buildInstance();
      const response = await store(multipartRelated([instance], boundary), {
        headers: { 'content-type': stowContentType(boundary) },
      });
      assert.equal(response.status, 200);
      assert.ok((await receiptOf(app.db, sopInstanceUidOf(instance))) !== undefined);
    });

    it('answers 413 for an instance above RAW_BODY_LIMIT_BYTES, storing nothing', async () => {
      const countsBefore = await queueCounts(app);
      const response = await store(multipartRelated([buildInstance({ pixelBytes: 300_000 })]));
      assert.equal(response.status, 413);
      assert.match(
        await response.text(),
        /each instance is limited to 200000 bytes \(RAW_BODY_LIMIT_BYTES\)/,
      );
      assert.deepEqual(await queueCounts(app), countsBefore);
    });

    it('keeps the instances completed before the connection drops, and nothing of the one cut off', async () => {
      const complete = buildInstance({ pixelBytes: 20_000 });
      const cut = buildInstance({ pixelBytes: 180_000 });
      const body = multipartRelated([complete, cut]);
      // More than the 64 KiB a heavy request waits for before it starts, and past the first part's end.
      const partial = body.subarray(0, body.length - 60_000);
      const countsBefore = await queueCounts(app);
      const port = new URL(app.baseUrl).port;
      const socket = connect(Number(port), '127.0.0.1');
      await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
      socket.write(
        `POST ${STUDIES} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${user.authorization}\r\n` +
          `Content-Type: ${stowContentType()}\r\nContent-Length: ${body.length}\r\n\r\n`,
      );
      socket.write(partial);
      await until(async () => (await receiptOf(app.db, sopInstanceUidOf(complete))) !== undefined, {
        what: 'the complete instance',
      });
      const receipt = (await receiptOf(app.db, sopInstanceUidOf(complete)))!;
      socket.destroy();
      // The request's audit row is written when its handler has finished with the body.
      await until(
        async () => {
          const rows = await app.db
            .withTables<{ audit_event: { action: string; target_ids: string | null } }>()
            .selectFrom('audit_event')
            .select('target_ids')
            .where('action', '=', 'dicomweb.store')
            .where('target_ids', '=', String(receipt.firstRequestId))
            .execute();
          return rows.length > 0;
        },
        { what: 'the audit row of the cut request' },
      );
      assert.deepEqual(await queueCounts(app), [
        countsBefore[0]! + 1,
        countsBefore[1]! + 4,
        countsBefore[2]! + 1,
      ]);
      assert.equal(await receiptOf(app.db, sopInstanceUidOf(cut)), undefined);
    });

    it('queues a repeated SOP Instance UID as a new request by default, counting it', async () => {
      const instance = buildInstance();
      for (let i = 0; i < 2; i += 1) assert.equal((await store(multipartRelated([instance]))).status, 200);
      const receipt = (await receiptOf(app.db, sopInstanceUidOf(instance)))!;
      assert.equal(receipt.count, 2);
      assert.ok(receipt.lastRequestId > receipt.firstRequestId);
    });
  });

  describe(`STOW-RS with DICOM_DUPLICATES=refuse [${dialect}]`, () => {
    let app: TestApp;
    let user: TestUser;
    before(async () => {
      app = await startTestApp(dialect, { env: { DICOM_DUPLICATES: 'refuse' } });
      user = await createUser(app.db);
    });
    after(() => app.close());

    it('refuses an instance received before with 0111, storing nothing, even within one request', async () => {
      const instance = buildInstance();
      const send = (parts: Buffer[]) =>
        app.request(STUDIES, {
          method: 'POST',
          headers: { authorization: user.authorization, 'content-type': stowContentType() },
          body: multipartRelated(parts),
        });
      assert.equal((await send([instance])).status, 200);
      const countsBefore = await queueCounts(app);
      const again = await send([instance]);
      assert.equal(again.status, 409);
      assert.deepEqual(summarise((await again.json()) as DicomJson).failed, [
        ['1.2.840.10008.5.1.4.1.1.7', sopInstanceUidOf(instance), 0x0111],
      ]);
      const other = buildInstance();
      const twice = await send([other, other]);
      assert.equal(twice.status, 202);
      assert.deepEqual(summarise((await twice.json()) as DicomJson).failed, [
        ['1.2.840.10008.5.1.4.1.1.7', sopInstanceUidOf(other), 0x0111],
      ]);
      assert.deepEqual(await queueCounts(app), [
        countsBefore[0]! + 1,
        countsBefore[1]! + 4,
        countsBefore[2]! + 1,
      ]);
      assert.equal((await receiptOf(app.db, sopInstanceUidOf(instance)))!.count, 1);
    });
  });
});
