import assert from 'node:assert/strict';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import dicomParser from 'dicom-parser';
import { runDcmtk, startCuttingRelay } from '../../../test/dcmtk.ts';
import { CORPUS_SKIP_MESSAGE, corpusTestFiles } from '../../../test/dicom-corpus.ts';
import { buildInstance, sopInstanceUidOf } from '../../../test/dicom-instances.ts';
import { readQueuedRequest, receiptOf, startDicomTestApp } from '../../../test/dicom-receiving.ts';
import { countRows } from '../../../test/factories.ts';
import { QUEUE_TABLES } from '../../../test/factories-queue.ts';
import type { TestApp, TestDatabase } from '../../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../../test/harness.ts';
import { freePort } from '../../../test/ports.ts';
import { until } from '../../../test/until.ts';
import type { DicomServer } from './dimse-server.ts';

/** Corpus files of accepted storage classes, one per transfer syntax family. */
const CORPUS_FILES = [
  'CT_small.dcm', // CT, Explicit VR Little Endian
  'MR_small_implicit.dcm', // MR, Implicit VR Little Endian
  'MR_small_bigendian.dcm', // MR, Explicit VR Big Endian
  'MR_small_RLE.dcm', // MR, RLE Lossless
  'MR_small_jp2klossless.dcm', // MR, JPEG 2000 Lossless
  'MR_small_jpeg_ls_lossless.dcm', // MR, JPEG-LS Lossless
  'JPGExtended.dcm', // SC, JPEG Extended
  'SC_rgb_jpeg_dcmtk.dcm', // SC, JPEG Baseline
  'SC_rgb_jpeg_gdcm.dcm', // SC, JPEG Lossless SV1
  'JPEG2000.dcm', // SC, JPEG 2000
  'image_dfl.dcm', // SC, Deflated Explicit VR Little Endian
  'ExplVR_BigEnd.dcm', // US, Explicit VR Big Endian
];

const corpus = corpusTestFiles();

/**
 * A storescu profile (`-xf file Corpus`) proposing each image class of the corpus once per transfer
 * syntax, so that every file travels in its own encoding.
 */
function storescuProfile(): string {
  const syntaxes = {
    Uncompressed: ['LittleEndianExplicit', 'LittleEndianImplicit', 'BigEndianExplicit'],
    Deflated: ['DeflatedLittleEndianExplicit'],
    JPEGBaseline: ['JPEGBaseline'],
    JPEGExtended: ['JPEGExtended:Process2+4'],
    JPEGLossless: ['JPEGLossless:Non-hierarchical-1stOrderPrediction'],
    JPEGLS: ['JPEGLSLossless'],
    J2KLossless: ['JPEG2000LosslessOnly'],
    J2K: ['JPEG2000'],
    RLE: ['RLELossless'],
  };
  const classes = [
    'CTImageStorage',
    'MRImageStorage',
    'SecondaryCaptureImageStorage',
    'UltrasoundImageStorage',
  ];
  const lines = ['[[TransferSyntaxes]]'];
  for (const [name, list] of Object.entries(syntaxes)) {
    lines.push(`[${name}]`);
    list.forEach((ts, i) => lines.push(`TransferSyntax${i + 1} = ${ts}`));
  }
  lines.push('[[PresentationContexts]]', '[CorpusContexts]');
  let n = 0;
  for (const sopClass of classes)
    for (const name of Object.keys(syntaxes))
      lines.push(`PresentationContext${(n += 1)} = ${sopClass}\\${name}`);
  lines.push('[[Profiles]]', '[Corpus]', 'PresentationContexts = CorpusContexts', '');
  return lines.join('\n');
}

async function queueCounts(app: TestApp): Promise<number[]> {
  return Promise.all(QUEUE_TABLES.map((t) => countRows(app.db, t)));
}

/** The meta information's UIDs and the data set after it, of a Part 10 file. */
function partsOf(file: Uint8Array) {
  const meta = dicomParser.readPart10Header(file) as ReturnType<typeof dicomParser.readPart10Header> & {
    position: number;
  };
  const uid = (tag: string) => meta.string(tag)?.replace(/[\0 ]+$/, '');
  return {
    sopClassUid: uid('x00020002'),
    sopInstanceUid: uid('x00020003'),
    transferSyntaxUid: uid('x00020010'),
    sourceAeTitle: meta.string('x00020016')?.trim(),
    pixels: pixelDataOf(file),
  };
}

/** The pixel data of a Part 10 file: the native value, or the encapsulated fragments in order. */
function pixelDataOf(file: Uint8Array): Buffer {
  // dicom-parser inflates deflated data sets itself (zlib).
  const dataSet = dicomParser.parseDicom(file);
  const element = dataSet.elements.x7fe00010;
  if (element === undefined) return Buffer.alloc(0);
  const bytes = Buffer.from(dataSet.byteArray.buffer, dataSet.byteArray.byteOffset, dataSet.byteArray.length);
  if (element.fragments === undefined)
    return bytes.subarray(element.dataOffset, element.dataOffset + element.length);
  return Buffer.concat(element.fragments.map((f) => bytes.subarray(f.position, f.position + f.length)));
}

forEachDialect((dialect) => {
  describe(`DICOM C-STORE SCP with dcmtk senders [${dialect}]`, () => {
    let app: TestApp;
    let server: DicomServer;
    let dir: string;
    const port = () => String(server.port);

    before(async () => {
      ({ app, server } = await startDicomTestApp(
        dialect,
        'MODALITY1@*, ROUTER@127.0.0.1, FARAWAY@192.0.2.10',
        {
          RAW_BODY_LIMIT_BYTES: String(8 * 1024 * 1024),
        },
      ));
      dir = await mkdtemp(path.join(tmpdir(), 'cra-dimse-'));
    });
    after(async () => {
      await server.stop(5000);
      await app.close();
      await rm(dir, { recursive: true, force: true });
    });

    it('answers C-ECHO to an allowed caller, and refuses unknown callers, addresses and called titles', async () => {
      const echo = (callingAe: string, calledAe = 'CRA_TEST') =>
        runDcmtk('echoscu', ['-aet', callingAe, '-aec', calledAe, '127.0.0.1', port()]);
      const allowed = await echo('MODALITY1');
      assert.equal(allowed.code, 0, allowed.output);
      assert.equal((await echo('ROUTER')).code, 0, 'ROUTER@127.0.0.1 from 127.0.0.1');
      for (const [callingAe, calledAe, reason] of [
        ['STRANGER', 'CRA_TEST', /Calling AE Title Not Recognized/i],
        ['FARAWAY', 'CRA_TEST', /Calling AE Title Not Recognized/i],
        ['modality1', 'CRA_TEST', /Calling AE Title Not Recognized/i],
        ['MODALITY1', 'OTHER', /Called AE Title Not Recognized/i],
      ] as const) {
        const refused = await echo(callingAe, calledAe);
        assert.notEqual(refused.code, 0, `${callingAe} -> ${calledAe}`);
        assert.match(refused.output, /Association Rejected/i);
        assert.match(refused.output, reason);
      }
    });

    it(
      'stores a directory of real DICOM files sent by storescu, each a queued dicom_request naming its AE',
      { skip: corpus === undefined ? CORPUS_SKIP_MESSAGE : false },
      async () => {
        const sendDir = path.join(dir, 'corpus');
        await rm(sendDir, { recursive: true, force: true });
        await mkdir(sendDir);
        for (const name of CORPUS_FILES) await copyFile(path.join(corpus!, name), path.join(sendDir, name));
        const countsBefore = await queueCounts(app);
        // As a router configured for each file's own transfer syntax: one context per class and syntax.
        const profile = path.join(dir, 'storescu.cfg');
        await writeFile(profile, storescuProfile());
        const result = await runDcmtk('storescu', [
          ...['-aet', 'MODALITY1', '-aec', 'CRA_TEST', '-xf', profile, 'Corpus', '+sd'],
          ...['127.0.0.1', port(), sendDir],
        ]);
        assert.equal(result.code, 0, result.output);
        const countsAfter = await queueCounts(app);
        const n = CORPUS_FILES.length;
        // Each request: REQUEST_DATA, the payload, HEADER_DATA and the study record.
        assert.deepEqual(countsAfter, [countsBefore[0]! + n, countsBefore[1]! + 4 * n, countsBefore[2]! + n]);

        const lastBefore = await app.db
          .selectFrom('request')
          .select(({ fn }) => fn.max('id').as('id'))
          .executeTakeFirst();
        const newIds = (
          await app.db
            .selectFrom('request')
            .select('id')
            .where('id', '>', Number(lastBefore?.id ?? 0) - n)
            .orderBy('id')
            .execute()
        ).map((r) => r.id);
        assert.equal(newIds.length, n);
        const queued = await Promise.all(newIds.map((id) => readQueuedRequest(app.db, id)));
        for (const request of queued) {
          assert.equal(request.requestType, 'dicom_request');
          assert.equal(request.systemMessage, 'MODALITY1');
          assert.deepEqual(request.routines, ['DICOM_SEED@dicom_queue:NEW:10:0']);
          assert.deepEqual(request.mnemonics, ['REQUEST_DATA', 'REQUEST_BLOB', 'HEADER_DATA', 'DICOM_STUDY']);
          assert.deepEqual(request.requestData, {
            source: 'C-STORE',
            calling_ae_title: 'MODALITY1',
            called_ae_title: 'CRA_TEST',
            source_address: '127.0.0.1',
            request_type: 'dicom_request',
            system_message: 'MODALITY1',
            content_type: 'application/dicom',
          });
          assert.equal(request.headerData['origin-ip-address'], '127.0.0.1');
          assert.equal(request.headerData['dicom-calling-ae-title'], 'MODALITY1');
          assert.equal(partsOf(request.payload).sourceAeTitle, 'MODALITY1');
          // dcmtk reads every stored file back.
          const storedPath = path.join(dir, `stored-${request.requestId}.dcm`);
          await writeFile(storedPath, request.payload);
          const dump = await runDcmtk('dcmdump', ['-q', storedPath]);
          assert.equal(dump.code, 0, dump.output.slice(0, 300));
        }
        // Each file arrived: the same SOP class and instance, and, when sent in its own transfer syntax,
        // the same pixel data byte for byte (the five MR files are one instance in five encodings).
        const stored = queued.map((q) => partsOf(q.payload));
        for (const name of CORPUS_FILES) {
          const original = partsOf(await readFile(path.join(sendDir, name)));
          const same = stored.filter(
            (s) => s.sopInstanceUid === original.sopInstanceUid && s.sopClassUid === original.sopClassUid,
          );
          assert.ok(same.length > 0, name);
          // Uncompressed files travel in the first syntax storescu proposes for them (Explicit VR Little
          // Endian); compressed ones in their own.
          const uncompressed = ['1.2.840.10008.1.2', '1.2.840.10008.1.2.1', '1.2.840.10008.1.2.2'];
          const expected = uncompressed.includes(original.transferSyntaxUid!)
            ? '1.2.840.10008.1.2.1'
            : original.transferSyntaxUid;
          const arrived = same.filter((s) => s.transferSyntaxUid === expected);
          assert.ok(arrived.length > 0, `${name}: arrived in ${expected}`);
          if (original.transferSyntaxUid !== '1.2.840.10008.1.2.2')
            assert.ok(
              arrived.some((s) => s.pixels.equals(original.pixels)),
              `${name}: pixel data unchanged`,
            );
        }
        const mr = (await receiptOf(app.db, '1.3.6.1.4.1.5962.1.1.4.1.1.20040826185059.5457'))!;
        assert.equal(mr.count, 5);
      },
    );

    it('accepts a transfer syntax it supports and refuses one it does not, storing nothing for it', async () => {
      const instance = buildInstance();
      const file = path.join(dir, 'instance.dcm');
      await writeFile(file, instance);
      const send = (proposal: string) =>
        runDcmtk('storescu', [
          '-aet',
          'MODALITY1',
          '-aec',
          'CRA_TEST',
          proposal,
          '-R',
          '127.0.0.1',
          port(),
          file,
        ]);

      // MPEG2 only: no presentation context can be accepted.
      const countsBefore = await queueCounts(app);
      const refused = await send('-xm');
      assert.notEqual(refused.code, 0);
      assert.match(refused.output, /No presentation context|no acceptable presentation context/i);
      assert.deepEqual(await queueCounts(app), countsBefore);
      assert.equal(await receiptOf(app.db, sopInstanceUidOf(instance)), undefined);

      // Deflated Explicit VR Little Endian (proposed first): accepted, stored as it travelled.
      const accepted = await send('-xd');
      assert.equal(accepted.code, 0, accepted.output);
      const receipt = (await receiptOf(app.db, sopInstanceUidOf(instance)))!;
      const stored = partsOf((await readQueuedRequest(app.db, receipt.firstRequestId)).payload);
      assert.equal(stored.transferSyntaxUid, '1.2.840.10008.1.2.1.99');
      const storedPath = path.join(dir, 'deflated.dcm');
      await writeFile(storedPath, (await readQueuedRequest(app.db, receipt.firstRequestId)).payload);
      const dump = await runDcmtk('dcmdump', ['-q', '+P', '0008,0018', storedPath]);
      assert.equal(dump.code, 0, dump.output);
      assert.ok(dump.output.includes(sopInstanceUidOf(instance)));
      const audit = await app.db
        .withTables<{
          audit_event: {
            action: string;
            target_ids: string | null;
            outcome: number;
            client_address: string | null;
          };
        }>()
        .selectFrom('audit_event')
        .select(['outcome', 'client_address'])
        .where('action', '=', 'dicom.store')
        .where('target_ids', '=', String(receipt.firstRequestId))
        .execute();
      assert.deepEqual(audit, [{ outcome: 200, client_address: '127.0.0.1' }]);
    });

    it('refuses a storescu association from an unknown AE title, storing nothing', async () => {
      const file = path.join(dir, 'stranger.dcm');
      const instance = buildInstance();
      await writeFile(file, instance);
      const countsBefore = await queueCounts(app);
      const result = await runDcmtk('storescu', [
        '-aet',
        'STRANGER',
        '-aec',
        'CRA_TEST',
        '127.0.0.1',
        port(),
        file,
      ]);
      assert.notEqual(result.code, 0);
      assert.match(result.output, /Calling AE Title Not Recognized/i);
      assert.deepEqual(await queueCounts(app), countsBefore);
    });

    it('leaves nothing behind when the connection drops in the middle of a transfer', async () => {
      const file = path.join(dir, 'large.dcm');
      const instance = buildInstance({ pixelBytes: 4 * 1024 * 1024 });
      await writeFile(file, instance);
      const relay = await startCuttingRelay(server.port, 1024 * 1024);
      const countsBefore = await queueCounts(app);
      try {
        const result = await runDcmtk('storescu', [
          '-aet',
          'MODALITY1',
          '-aec',
          'CRA_TEST',
          '127.0.0.1',
          String(relay.port),
          file,
        ]);
        await relay.cut;
        assert.notEqual(result.code, 0, 'the sender saw its connection fail');
      } finally {
        await relay.close();
      }
      // The SCP still serves: a new association stores the same instance, once.
      const again = await runDcmtk('storescu', [
        '-aet',
        'MODALITY1',
        '-aec',
        'CRA_TEST',
        '127.0.0.1',
        port(),
        file,
      ]);
      assert.equal(again.code, 0, again.output);
      assert.deepEqual(await queueCounts(app), [
        countsBefore[0]! + 1,
        countsBefore[1]! + 4,
        countsBefore[2]! + 1,
      ]);
      assert.equal((await receiptOf(app.db, sopInstanceUidOf(instance)))!.count, 1);
    });
  });

  describe(`server process with DICOM_PORT [${dialect}]`, () => {
    let testDb: TestDatabase;
    before(async () => {
      testDb = await createTestDatabase(dialect);
    });
    after(() => testDb.drop());

    it('starts the SCP with the server, stores what storescu sends, and stops both on SIGTERM', async () => {
      const dicomPort = await freePort();
      const child = spawn(process.execPath, [new URL('../../main/server.ts', import.meta.url).pathname], {
        env: {
          ...process.env,
          ...testDb.env,
          PORT: '0',
          HOST: '127.0.0.1',
          LOG_LEVEL: 'info',
          DICOM_PORT: String(dicomPort),
          DICOM_ALLOWED_CALLERS: 'MODALITY1@127.0.0.0/8',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      after(() => child.kill('SIGKILL'));
      let output = '';
      child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
      await until(() => output.includes('clinical-records-api ready'), {
        what: 'the server',
        timeoutMs: 60_000,
      });
      assert.match(output, /"msg":"DICOM C-STORE SCP listening"/);

      const instance = buildInstance();
      const file = path.join(testDb.filesDir, '..', 'instance.dcm');
      await writeFile(file, instance);
      const echo = await runDcmtk('echoscu', [
        '-aet',
        'MODALITY1',
        '-aec',
        'CRA',
        '127.0.0.1',
        String(dicomPort),
      ]);
      assert.equal(echo.code, 0, echo.output);
      const store = await runDcmtk('storescu', [
        '-aet',
        'MODALITY1',
        '-aec',
        'CRA',
        '127.0.0.1',
        String(dicomPort),
        file,
      ]);
      assert.equal(store.code, 0, store.output);
      assert.ok((await receiptOf(testDb.db, sopInstanceUidOf(instance))) !== undefined);

      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      const [code] = (await exited) as [number | null];
      assert.equal(code, 0);
      assert.match(output, /"msg":"DICOM C-STORE SCP stopped"/);
      assert.match(output, /"msg":"DICOM C-STORE stored"/);
      assert.doesNotMatch(output, new RegExp(sopInstanceUidOf(instance).replace(/\./g, '\\.')));
    });
  });
});
