/**
 * The Query/Retrieve C-MOVE and C-GET SCP on the DICOM port, asked by dcmtk's `movescu` (with a dcmtk
 * `storescp` started here as the configured destination) and `getscu` about instances stored with
 * `storescu`: the data sets arrive byte for byte as stored, sub-operations are counted, an unconfigured
 * destination and a store-only caller are refused, the cap refuses a larger retrieve, an instance the
 * caller cannot take is failed and listed, C-CANCEL stops a retrieve, and each retrieve is audited.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { sql } from 'kysely';
import type { Storescp } from '../../../test/dcmtk.ts';
import { runDcmtk, startStorescp } from '../../../test/dcmtk.ts';
import { buildInstance, newUid } from '../../../test/dicom-instances.ts';
import { startDicomTestApp } from '../../../test/dicom-receiving.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect } from '../../../test/harness.ts';
import type { DicomServer } from './index.ts';
import { readPart10Meta } from './qr-retrieve.ts';

/** The data set of a Part 10 file (what follows its file meta information). */
function dataSetOf(file: Buffer): Buffer {
  const meta = readPart10Meta(file);
  assert.ok(meta !== undefined, 'a Part 10 file');
  return file.subarray(meta.dataSetOffset);
}

/** The files in `dir`, by name. */
async function filesIn(dir: string): Promise<Buffer[]> {
  const names = (await readdir(dir)).sort();
  return Promise.all(names.map((n) => readFile(path.join(dir, n))));
}

function finalStatus(output: string): string {
  return /Received Final (?:Move|Get) Response[^\n]*/.exec(output)?.[0] ?? output.slice(-1500);
}

const STUDY = { a: newUid(), b: newUid(), big: newUid(), implicit: newUid() };
const SERIES = { ax: newUid(), ay: newUid() };

forEachDialect((dialect) => {
  describe(`Query/Retrieve C-MOVE and C-GET on the DICOM port (${dialect})`, () => {
    let app: TestApp;
    let server: DicomServer;
    let storescp: Storescp | undefined;
    let workDir = '';
    let received = '';
    /** What was stored, by SOP Instance UID. */
    const stored = new Map<string, Buffer>();
    const studyA: string[] = [];
    let implicitSop = '';

    before(async () => {
      workDir = await mkdtemp(path.join(tmpdir(), 'cra-qr-retrieve-'));
      received = path.join(workDir, 'received');
      await mkdir(received);
      storescp = await startStorescp(received);
      const destPort = storescp.port;
      ({ app, server } = await startDicomTestApp(dialect, 'QR@127.0.0.1,STORE@127.0.0.1', {
        DICOM_QR_CALLERS: 'QR@127.0.0.1',
        DICOM_REMOTE_NODES: `DEST@127.0.0.1:${destPort},ELSEWHERE@127.0.0.1:${destPort}`,
        DICOM_MOVE_DESTINATIONS: 'DEST',
        DICOM_QR_MAX_RETRIEVE: '5',
      }));
      const made = [
        { study: STUDY.a, series: SERIES.ax, patient: 'DEV-ANN' },
        { study: STUDY.a, series: SERIES.ax, patient: 'DEV-ANN' },
        { study: STUDY.a, series: SERIES.ay, patient: 'DEV-ANN' },
        { study: STUDY.b, series: newUid(), patient: 'DEV-ANN' },
        ...Array.from({ length: 6 }, () => ({ study: STUDY.big, series: newUid(), patient: 'DEV-BIG' })),
      ];
      const files: string[] = [];
      for (const [i, m] of made.entries()) {
        const sop = newUid();
        const file = buildInstance({
          sopInstanceUid: sop,
          studyInstanceUid: m.study,
          pixelBytes: 3000 + i,
          tags: { SeriesInstanceUID: m.series, PatientID: m.patient },
        });
        stored.set(sop, file);
        if (m.study === STUDY.a) studyA.push(sop);
        const filePath = path.join(workDir, `i${i}.dcm`);
        await writeFile(filePath, file);
        files.push(filePath);
      }
      const result = await runDcmtk('storescu', [
        '-aet',
        'STORE',
        '-aec',
        'CRA_TEST',
        '127.0.0.1',
        String(server.port),
        ...files,
      ]);
      assert.equal(result.code, 0, result.output);
      // One instance sent (and so held) in Implicit VR Little Endian.
      implicitSop = newUid();
      const implicitPath = path.join(workDir, 'implicit.dcm');
      await writeFile(
        implicitPath,
        buildInstance({
          sopInstanceUid: implicitSop,
          studyInstanceUid: STUDY.implicit,
          tags: { PatientID: 'DEV-IMP' },
        }),
      );
      const implicit = await runDcmtk('storescu', [
        '-xi',
        '-aet',
        'STORE',
        '-aec',
        'CRA_TEST',
        '127.0.0.1',
        String(server.port),
        implicitPath,
      ]);
      assert.equal(implicit.code, 0, implicit.output);
    });

    beforeEach(async () => {
      for (const name of await readdir(received)) await rm(path.join(received, name));
    });

    after(async () => {
      storescp?.stop();
      await server?.stop();
      await app?.close();
      await rm(workDir, { recursive: true, force: true });
    });

    const move = (
      model: '-S' | '-P',
      keys: readonly string[],
      options: { callingAe?: string; destination?: string; extra?: readonly string[] } = {},
    ) =>
      runDcmtk(
        'movescu',
        [
          model,
          '-v',
          '-aet',
          options.callingAe ?? 'QR',
          '-aec',
          'CRA_TEST',
          '-aem',
          options.destination ?? 'DEST',
          ...(options.extra ?? []),
          ...keys.flatMap((k) => ['-k', k]),
          '127.0.0.1',
          String(server.port),
        ],
        60_000,
      );

    it('moves a study to storescp: every data set byte for byte as stored, the sub-operations counted', async () => {
      const result = await move('-S', ['QueryRetrieveLevel=STUDY', `StudyInstanceUID=${STUDY.a}`]);
      assert.equal(result.code, 0, result.output);
      assert.match(finalStatus(result.output), /Success/);
      assert.equal((result.output.match(/Received Move Response \d+ \(Pending\)/g) ?? []).length, 2);
      const files = await filesIn(received);
      assert.equal(files.length, 3);
      const expected = studyA.map((sop) => dataSetOf(stored.get(sop)!).toString('hex')).sort();
      assert.deepEqual(files.map((f) => dataSetOf(f).toString('hex')).sort(), expected);
    });

    it('moves a series, and one image, in the Patient Root model', async () => {
      const series = await move('-P', [
        'QueryRetrieveLevel=SERIES',
        'PatientID=DEV-ANN',
        `StudyInstanceUID=${STUDY.a}`,
        `SeriesInstanceUID=${SERIES.ax}`,
      ]);
      assert.match(finalStatus(series.output), /Success/);
      assert.equal((await filesIn(received)).length, 2);
      const image = await move('-P', [
        'QueryRetrieveLevel=IMAGE',
        `StudyInstanceUID=${STUDY.a}`,
        `SeriesInstanceUID=${SERIES.ay}`,
        `SOPInstanceUID=${studyA[2]}`,
      ]);
      assert.match(finalStatus(image.output), /Success/);
      assert.equal((await filesIn(received)).length, 3);
    });

    it('moves a patient (Patient Root PATIENT level) by the Patient ID C-FIND answers', async () => {
      const result = await move('-P', ['QueryRetrieveLevel=PATIENT', 'PatientID=DEV-ANN']);
      assert.match(finalStatus(result.output), /Success/);
      assert.equal((result.output.match(/Received Move Response \d+ \(Pending\)/g) ?? []).length, 3);
      assert.equal((await filesIn(received)).length, 4);
    });

    it('refuses a destination not in DICOM_MOVE_DESTINATIONS (A801), sending nothing', async () => {
      for (const destination of ['ELSEWHERE', 'NOBODY']) {
        const result = await move('-S', ['QueryRetrieveLevel=STUDY', `StudyInstanceUID=${STUDY.a}`], {
          destination,
        });
        assert.match(finalStatus(result.output), /MoveDestinationUnknown/, result.output.slice(-1500));
      }
      assert.equal((await filesIn(received)).length, 0);
    });

    it('refuses a retrieve of more than DICOM_QR_MAX_RETRIEVE instances (A702), sending nothing', async () => {
      const result = await move('-S', ['QueryRetrieveLevel=STUDY', `StudyInstanceUID=${STUDY.big}`]);
      assert.match(finalStatus(result.output), /OutOfResourcesSubOperations/, result.output.slice(-1500));
      assert.equal((await filesIn(received)).length, 0);
    });

    it('refuses a unique key with a wildcard or a missing one (A900)', async () => {
      const wildcard = await move('-S', ['QueryRetrieveLevel=STUDY', 'StudyInstanceUID=1.2*']);
      assert.match(finalStatus(wildcard.output), /DataSetDoesNotMatchSOPClass/, wildcard.output.slice(-1500));
      const missing = await move('-S', ['QueryRetrieveLevel=SERIES', `StudyInstanceUID=${STUDY.a}`]);
      assert.match(finalStatus(missing.output), /DataSetDoesNotMatchSOPClass/);
      assert.equal((await filesIn(received)).length, 0);
    });

    it('rejects the retrieve contexts of a caller not in DICOM_QR_CALLERS', async () => {
      const result = await move('-S', ['QueryRetrieveLevel=STUDY', `StudyInstanceUID=${STUDY.a}`], {
        callingAe: 'STORE',
      });
      assert.notEqual(result.code, 0);
      assert.match(result.output, /No Acceptable Presentation Contexts|rejected/i);
      assert.equal((await filesIn(received)).length, 0);
      const got = await runDcmtk('getscu', [
        '-S',
        '-aet',
        'STORE',
        '-aec',
        'CRA_TEST',
        '-od',
        received,
        '-k',
        'QueryRetrieveLevel=STUDY',
        '-k',
        `StudyInstanceUID=${STUDY.a}`,
        '127.0.0.1',
        String(server.port),
      ]);
      assert.notEqual(got.code, 0);
      assert.equal((await filesIn(received)).length, 0);
    });

    it('stops at a C-CANCEL-RQ with FE00', async () => {
      const result = await move('-S', ['QueryRetrieveLevel=STUDY', `StudyInstanceUID=${STUDY.a}`], {
        extra: ['--cancel', '1'],
      });
      assert.match(finalStatus(result.output), /Cancel/i, result.output.slice(-2000));
      assert.ok((await filesIn(received)).length < 3);
    });

    it('gets a study on the caller association: the data sets as stored', async () => {
      const out = path.join(workDir, 'got');
      await mkdir(out, { recursive: true });
      try {
        const result = await runDcmtk(
          'getscu',
          [
            '-S',
            '-v',
            '-aet',
            'QR',
            '-aec',
            'CRA_TEST',
            '-od',
            out,
            '-k',
            'QueryRetrieveLevel=STUDY',
            '-k',
            `StudyInstanceUID=${STUDY.a}`,
            '127.0.0.1',
            String(server.port),
          ],
          60_000,
        );
        assert.equal(result.code, 0, result.output);
        assert.match(finalStatus(result.output), /Success/, result.output.slice(-2000));
        const files = await filesIn(out);
        assert.equal(files.length, 3);
        const expected = studyA.map((sop) => dataSetOf(stored.get(sop)!).toString('hex')).sort();
        assert.deepEqual(files.map((f) => dataSetOf(f).toString('hex')).sort(), expected);
      } finally {
        await rm(out, { recursive: true, force: true });
      }
    });

    it('fails and lists an instance held in a transfer syntax the C-GET caller has no context for', async () => {
      const out = path.join(workDir, 'got-implicit');
      await mkdir(out, { recursive: true });
      try {
        // Explicit VR Little Endian only: the instance is held in Implicit VR Little Endian.
        const result = await runDcmtk(
          'getscu',
          [
            '-S',
            '-v',
            '-aet',
            'QR',
            '-aec',
            'CRA_TEST',
            '-od',
            out,
            '-k',
            'QueryRetrieveLevel=STUDY',
            '-k',
            `StudyInstanceUID=${STUDY.implicit}`,
            '127.0.0.1',
            String(server.port),
          ],
          60_000,
        );
        assert.match(result.output, /Failed Suboperations\s*: 1/, result.output.slice(-2000));
        // (getscu 3.6.7 does not read the final response's data set, its Failed SOP Instance UID List:
        // the C-MOVE test below reads it with movescu.)
        assert.match(finalStatus(result.output), /Warning/i, result.output.slice(-2000));
        assert.equal((await filesIn(out)).length, 0);
      } finally {
        await rm(out, { recursive: true, force: true });
      }
    });

    it('fails an instance whose bytes the clean-up policy dropped, listing it in the final C-MOVE response', async () => {
      await sql`update ${sql.table('attachment_data')} set blob_data = null where attachment_mnemonic = 'REQUEST_BLOB'
        and request_id = (select request_id from ${sql.table('dicom_instance_index')} where sop_instance_uid = ${studyA[0]!})`.execute(
        app.db,
      );
      const result = await move('-S', ['QueryRetrieveLevel=STUDY', `StudyInstanceUID=${STUDY.a}`], {
        extra: ['-d'],
      });
      assert.match(result.output, /DIMSE Status\s*: 0xb000/i, result.output.slice(-2000));
      assert.match(result.output, /Failed Suboperations\s*: 1/, result.output.slice(-3000));
      assert.ok(
        new RegExp(`\\(0008,0058\\) UI \\[${studyA[0]!.replaceAll('.', '\\.')}\\]`).test(result.output),
        result.output.slice(-3000),
      );
      assert.equal((await filesIn(received)).length, 2);
    });

    it('refuses a C-GET over the cap as a C-MOVE (A702)', async () => {
      const out = path.join(workDir, 'got-big');
      await mkdir(out, { recursive: true });
      try {
        const result = await runDcmtk(
          'getscu',
          [
            '-S',
            '-v',
            '-aet',
            'QR',
            '-aec',
            'CRA_TEST',
            '-od',
            out,
            '-k',
            'QueryRetrieveLevel=STUDY',
            '-k',
            `StudyInstanceUID=${STUDY.big}`,
            '127.0.0.1',
            String(server.port),
          ],
          60_000,
        );
        assert.match(finalStatus(result.output), /OutOfResourcesSubOperations/, result.output.slice(-1500));
        assert.equal((await filesIn(out)).length, 0);
      } finally {
        await rm(out, { recursive: true, force: true });
      }
    });

    it('audits each retrieve as a read: the AE title, the address, the requests of the studies', async () => {
      const { rows } = await sql<{
        action: string;
        username: string;
        client_address: string;
        target_type: string;
        target_ids: string;
        detail: string;
      }>`
        select action, username, client_address, target_type, target_ids, detail from ${sql.table('audit_event')}
        where action in ('dicom.move', 'dicom.get')`.execute(app.db);
      assert.ok(rows.some((r) => r.action === 'dicom.move' && r.detail === 'study root, to DEST'));
      assert.ok(rows.some((r) => r.action === 'dicom.get' && r.detail === 'study root'));
      assert.ok(rows.every((r) => r.username === 'QR' && r.client_address === '127.0.0.1'));
      assert.ok(rows.every((r) => r.target_type === 'request' || r.target_type === 'patient'));
      assert.ok(!rows.some((r) => r.detail.includes('ELSEWHERE')), 'a refused move reads nothing');
    });
  });
});
