import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import { createInstitution, createPatient, createUser } from '../../../test/factories.ts';
import type { TestUser } from '../../../test/factories.ts';
import { addIdentifier, createIdentifierType } from '../../../test/factories-patient.ts';
import {
  STATUS_PATH,
  attachmentsByMnemonic,
  buildPart10File,
  dicomElement,
  executionsOf,
  routinesOf,
  submitToQueue,
} from '../../../test/factories-queue.ts';
import { CORPUS_SKIP_MESSAGE, corpusTestFiles } from '../../../test/dicom-corpus.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import { closeDicomPools } from '../dicom/index.ts';
import type { QueueEngine } from '../request-queue/index.ts';
import { createQueueEngine } from '../request-queue/index.ts';
import { defaultRoutineCatalog } from './index.ts';

const corpus = corpusTestFiles();
const JPEG_BASELINE = '1.2.840.10008.1.2.4.50';

/** `count` tiny private elements (8 bytes each), then a small image: a file that is all element headers. */
function manyElementsFile(count: number): Buffer {
  const elements = Buffer.alloc(count * 8);
  for (let i = 0; i < count; i++) {
    const at = i * 8;
    elements.writeUInt16LE(0x0009 + 2 * Math.floor(i / 0xff00), at);
    elements.writeUInt16LE(0x0100 + (i % 0xff00), at + 2);
    elements.write('LO', at + 4, 'latin1');
    elements.writeUInt16LE(0, at + 6);
  }
  return buildPart10File(elements);
}

/** A well-formed file whose compressed frames declare 65535 x 65535 RGB pixels, 1000 of them. */
function hugeFrameFile(): Buffer {
  const us = (value: number) => {
    const b = Buffer.alloc(2);
    b.writeUInt16LE(value, 0);
    return b;
  };
  const item = (bytes: Buffer) => {
    const head = Buffer.alloc(8);
    head.writeUInt16LE(0xfffe, 0);
    head.writeUInt16LE(0xe000, 2);
    head.writeUInt32LE(bytes.length, 4);
    return Buffer.concat([head, bytes]);
  };
  const sequenceEnd = Buffer.from([0xfe, 0xff, 0xdd, 0xe0, 0, 0, 0, 0]);
  const text = (s: string) => Buffer.from(s, 'latin1');
  const dataset = Buffer.concat([
    dicomElement(0x0008, 0x0016, 'UI', text('1.2.840.10008.5.1.4.1.1.7')),
    // A device file without a date is refused before extraction: this one has one.
    dicomElement(0x0008, 0x0020, 'DA', text('20240115')),
    dicomElement(0x0010, 0x0020, 'LO', text('HUGE1')),
    dicomElement(0x0028, 0x0002, 'US', us(3)),
    dicomElement(0x0028, 0x0004, 'CS', text('YBR_FULL_422')),
    dicomElement(0x0028, 0x0008, 'IS', text('1000')),
    dicomElement(0x0028, 0x0010, 'US', us(65535)),
    dicomElement(0x0028, 0x0011, 'US', us(65535)),
    dicomElement(0x0028, 0x0100, 'US', us(8)),
    dicomElement(0x0028, 0x0101, 'US', us(8)),
    dicomElement(0x7fe0, 0x0010, 'OB', Buffer.alloc(0), 0xffffffff),
    item(Buffer.alloc(0)),
    item(Buffer.from([0xff, 0xd8, 0xff, 0xd9])),
    sequenceEnd,
  ]);
  return buildPart10File(dataset, { transferSyntaxUid: JPEG_BASELINE });
}

forEachDialect((dialect) => {
  describe(`DICOM payloads through the queue (${dialect})`, () => {
    let app: TestApp;
    let user: TestUser;
    let engine: QueueEngine;

    before(async () => {
      app = await startTestApp(dialect);
      user = await createUser(app.db);
      engine = createQueueEngine({
        database: app.database,
        config: app.config,
        catalog: defaultRoutineCatalog,
      });
    });
    after(async () => {
      await closeDicomPools();
      await app.close();
    });

    async function addDicom(bytes: Buffer, fields: Record<string, string> = {}): Promise<number> {
      const form = new FormData();
      for (const [name, value] of Object.entries(fields)) form.append(name, value);
      form.append('scan', new Blob([new Uint8Array(bytes)], { type: 'application/dicom' }), 'scan.dcm');
      const response = await submitToQueue(app, user.authorization, {
        query: 'request_type=dicom_request',
        body: form,
      });
      assert.equal(response.status, 200, await response.clone().text());
      return ((await response.json()) as { request_id: number }).request_id;
    }

    async function drain(): Promise<string[]> {
      const ran: string[] = [];
      for (let i = 0; i < 20; i++) {
        const outcome = await engine.step();
        if (outcome.kind !== 'ran') return ran;
        ran.push(`${outcome.routineName}:${outcome.status}`);
      }
      throw new Error(`the queue did not drain: ${ran.join(', ')}`);
    }

    async function lastLog(requestId: number, routineName: string): Promise<string> {
      const routine = (await routinesOf(app.db, requestId)).find((r) => r.routine_name === routineName);
      assert.ok(routine, `${routineName} ran`);
      const executions = await executionsOf(app.db, routine.id);
      return executions.at(-1)?.log_text ?? '';
    }

    async function statusOf(
      requestId: number,
    ): Promise<{ status: string; routines: { routine_name: string; execution_log: string | null }[] }> {
      const response = await app.request(`${STATUS_PATH}?request_id=${requestId}`, {
        headers: { authorization: user.authorization },
      });
      assert.equal(response.status, 200);
      return (await response.json()) as Awaited<ReturnType<typeof statusOf>>;
    }

    it(
      'extracts a decodable image as a PNG attachment with thumbnails and attaches it with the original',
      {
        skip: corpus === undefined ? CORPUS_SKIP_MESSAGE : false,
      },
      async () => {
        const institutionId = await createInstitution(app.db);
        const typeId = await createIdentifierType(app.db, { institution_id: institutionId });
        const patient = await createPatient(app.db, { patient: { dob: '1970-03-15', gender: 'F' } });
        await addIdentifier(app.db, patient.patientId, typeId, '4MR1');
        const bytes = await readFile(path.join(corpus!, 'MR_small.dcm'));
        const requestId = await addDicom(bytes, { dob: '1970-03-15' });

        assert.deepEqual(await drain(), [
          'DICOM_SEED:COMPLETE',
          'EXTRACT_IMAGE:COMPLETE',
          'PATIENT_MATCH:COMPLETE',
          'ATTACH_TO_EVENT:COMPLETE',
          'CLEAN_UP:COMPLETE',
        ]);
        assert.equal((await statusOf(requestId)).status, 'COMPLETE');
        const rows = await attachmentsByMnemonic(app.db, requestId);
        const image = rows.get('DICOM_IMAGE_1');
        assert.ok(image, 'the extracted frame is stored');
        assert.equal(image.mime_type, 'image/png');
        assert.equal(image.system_only_managed, 0);
        const meta = await sharp(image.blob_data!).metadata();
        assert.deepEqual([meta.format, meta.width, meta.height, meta.channels], ['png', 64, 64, 1]);
        for (const thumbnail of [
          image.thumbnail_small_blob,
          image.thumbnail_medium_blob,
          image.thumbnail_large_blob,
        ]) {
          assert.ok(thumbnail);
          assert.equal((await sharp(thumbnail).metadata()).format, 'jpeg');
        }
        const original = rows.get('scan');
        assert.ok(original, 'the DICOM payload row is there');
        assert.ok(original.blob_data?.equals(bytes), 'the DICOM file is kept as it was sent');
        assert.equal(original.mime_type, 'application/dicom');
        const linked = await app.db
          .selectFrom('event_attachment_item')
          .select('attachment_data_id')
          .where('attachment_data_id', 'in', [image.id, original.id])
          .execute();
        assert.equal(linked.length, 2, 'the image and the original are both attached to the event');
        assert.match(
          await lastLog(requestId, 'EXTRACT_IMAGE'),
          /1 of 1 frame\(s\) extracted; transfer syntax 1\.2\.840\.10008\.1\.2\.1 /,
        );
      },
    );

    it(
      'keeps a colour baseline JPEG frame as the file holds it, with thumbnails',
      { skip: corpus === undefined ? CORPUS_SKIP_MESSAGE : false },
      async () => {
        const bytes = await readFile(path.join(corpus!, 'SC_rgb_jpeg_dcmtk.dcm'));
        const requestId = await addDicom(bytes);
        // The file names no date of birth: the chain stops at the patient match, the image is stored.
        assert.deepEqual(await drain(), [
          'DICOM_SEED:COMPLETE',
          'EXTRACT_IMAGE:COMPLETE',
          'PATIENT_MATCH:FAILED',
        ]);
        const image = (await attachmentsByMnemonic(app.db, requestId)).get('DICOM_IMAGE_1');
        assert.ok(image?.blob_data);
        assert.equal(image.mime_type, 'image/jpeg');
        assert.ok(bytes.includes(image.blob_data), 'the JPEG is the frame from the file, not re-encoded');
        const meta = await sharp(image.blob_data).metadata();
        assert.deepEqual([meta.format, meta.width, meta.height], ['jpeg', 100, 100]);
        assert.ok(image.thumbnail_small_blob && image.thumbnail_medium_blob && image.thumbnail_large_blob);
      },
    );

    it('reads a payload of several blob slices whole, in order', async () => {
      // 8-bit grey, each row its own value: a slice missing, repeated or out of order shows in the rows.
      const [rows, columns] = [2200, 2048];
      const pixels = Buffer.alloc(rows * columns);
      for (let row = 0; row < rows; row++) pixels.fill((row * 7) % 251, row * columns, (row + 1) * columns);
      const us = (value: number) => {
        const b = Buffer.alloc(2);
        b.writeUInt16LE(value, 0);
        return b;
      };
      const text = (s: string) => Buffer.from(s, 'latin1');
      const bytes = buildPart10File(
        Buffer.concat([
          dicomElement(0x0008, 0x0020, 'DA', text('20240115')),
          dicomElement(0x0028, 0x0002, 'US', us(1)),
          dicomElement(0x0028, 0x0004, 'CS', text('MONOCHROME2')),
          dicomElement(0x0028, 0x0010, 'US', us(rows)),
          dicomElement(0x0028, 0x0011, 'US', us(columns)),
          dicomElement(0x0028, 0x0100, 'US', us(8)),
          dicomElement(0x0028, 0x0101, 'US', us(8)),
          dicomElement(0x0028, 0x0102, 'US', us(7)),
          dicomElement(0x0028, 0x0103, 'US', us(0)),
          dicomElement(0x0028, 0x1050, 'DS', text('127.5 ')),
          dicomElement(0x0028, 0x1051, 'DS', text('256 ')),
          dicomElement(0x7fe0, 0x0010, 'OB', pixels),
        ]),
      );
      assert.ok(bytes.length > 2 * app.database.dialect.blobSliceBytes || bytes.length > 4 * 1024 * 1024);
      const requestId = await addDicom(bytes);
      const ran = await drain();
      assert.deepEqual(ran.slice(0, 2), ['DICOM_SEED:COMPLETE', 'EXTRACT_IMAGE:COMPLETE']);
      const image = (await attachmentsByMnemonic(app.db, requestId)).get('DICOM_IMAGE_1');
      assert.ok(image?.blob_data);
      const meta = await sharp(image.blob_data).metadata();
      assert.deepEqual([meta.format, meta.width, meta.height, meta.channels], ['png', columns, rows, 1]);
      const data = await sharp(image.blob_data).extractChannel(0).raw().toBuffer();
      for (let row = 0; row < rows; row++) {
        const value = (row * 7) % 251;
        // A window of 256 centred on 127.5 shows every stored value as it is.
        assert.ok(
          data[row * columns] === value && data[(row + 1) * columns - 1] === value,
          `row ${row}: ${data[row * columns]}, expected ${value}`,
        );
      }
    });

    it(
      "fails a truncated file permanently with the reader's cause in the log and the status",
      {
        skip: corpus === undefined ? CORPUS_SKIP_MESSAGE : false,
      },
      async () => {
        const requestId = await addDicom(await readFile(path.join(corpus!, 'MR_truncated.dcm')));
        assert.deepEqual(await drain(), ['DICOM_SEED:FAILED']);
        const [seed] = await routinesOf(app.db, requestId);
        assert.equal(seed!.try_count, 1);
        const status = await statusOf(requestId);
        assert.equal(status.status, 'FAILED');
        assert.match(
          status.routines[0]!.execution_log ?? '',
          /Not a readable DICOM file \(element-past-end\)/,
        );
        const log = await lastLog(requestId, 'DICOM_SEED');
        assert.match(log, /FAILED: Not a readable DICOM file \(element-past-end\)/);
        assert.match(log, /\(7FE0,0010\) at byte \d+ declares 8192 bytes, but only \d+ remain/);
      },
    );

    it('refuses a file of millions of tiny elements and one declaring huge frames, while /healthz answers', async () => {
      const flood = await addDicom(manyElementsFile(3_000_000));
      const bomb = await addDicom(hugeFrameFile());
      const draining = drain();
      for (let i = 0; i < 3; i++) {
        const health = await app.request('/healthz', { signal: AbortSignal.timeout(10_000) });
        assert.equal(health.status, 200);
      }
      const outcomes = await draining;
      assert.ok(outcomes.includes('DICOM_SEED:FAILED'), outcomes.join());
      assert.ok(outcomes.includes('EXTRACT_IMAGE:FAILED'), outcomes.join());

      assert.equal((await statusOf(flood)).status, 'FAILED');
      assert.match(
        await lastLog(flood, 'DICOM_SEED'),
        /\(too-many-elements\): The file has more than 200000 elements/,
      );

      assert.equal((await statusOf(bomb)).status, 'FAILED');
      assert.deepEqual(
        (await routinesOf(app.db, bomb)).map((r) => [r.routine_name, r.status, r.try_count]),
        [
          ['DICOM_SEED', 'COMPLETE', 1],
          ['EXTRACT_IMAGE', 'FAILED', 1],
        ],
      );
      const log = await lastLog(bomb, 'EXTRACT_IMAGE');
      assert.match(log, /\(too-many-pixels\): One frame declares 65535 x 65535 x 3 samples/);
      assert.match(log, /transfer syntax 1\.2\.840\.10008\.1\.2\.4\.50 \(JPEG Baseline/);
      assert.equal((await attachmentsByMnemonic(app.db, bomb)).has('DICOM_IMAGE_1'), false);
    });
  });
});
