/**
 * The study record: an instance sent by dcmtk's storescu is queued with its record (`DICOM_STUDY`), its
 * filing reads the record instead of the file's header, and the file is parsed once at receipt and once
 * for its pixels (`dicom_parses_total{purpose}` on /metrics); a request without a record (queued before
 * receipt stored one) still files, its header read once; an IOLMaster 500 object is read after receipt
 * once for its image and once for its biometry values, no step reading its header again.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { iolMaster500 } from '../../../test/biometry-objects.ts';
import { runDcmtk } from '../../../test/dcmtk.ts';
import { buildInstance, newUid } from '../../../test/dicom-instances.ts';
import { startDicomTestApp } from '../../../test/dicom-receiving.ts';
import { createInstitution, createPatient, unique } from '../../../test/factories.ts';
import { addIdentifier, createIdentifierType } from '../../../test/factories-patient.ts';
import { attachmentsByMnemonic, routinesOf } from '../../../test/factories-queue.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect } from '../../../test/harness.ts';
import { DICOM_STUDY_MNEMONIC, closeDicomPools, parseStudyRecord } from '../dicom/index.ts';
import type { DicomServer } from '../dicom-receive/index.ts';
import type { QueueEngine } from '../request-queue/index.ts';
import { createQueueEngine } from '../request-queue/index.ts';
import { defaultRoutineCatalog } from './index.ts';

// The biometry module's tables are outside the service's shared row types.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

/** `dicom_parses_total` by purpose, as /metrics gives it. */
async function parseCounts(app: TestApp): Promise<Record<string, number>> {
  const response = await app.request('/metrics');
  assert.equal(response.status, 200);
  const text = await response.text();
  assert.match(text, /^# TYPE dicom_parses_total counter$/m);
  const counts: Record<string, number> = {};
  for (const match of text.matchAll(/^dicom_parses_total\{purpose="([^"]+)"\} (\d+)$/gm))
    counts[match[1]!] = Number(match[2]);
  return counts;
}

/** The parses of each purpose between `before` and `after`, the purposes with none left out. */
function parsesBetween(before: Record<string, number>, after: Record<string, number>) {
  const delta: Record<string, number> = {};
  for (const [purpose, count] of Object.entries(after)) {
    const added = count - (before[purpose] ?? 0);
    if (added !== 0) delta[purpose] = added;
  }
  return delta;
}

forEachDialect((dialect) => {
  describe(`the study record of a received instance [${dialect}]`, () => {
    let app: TestApp;
    let server: DicomServer;
    let engine: QueueEngine;
    let dir: string;
    let typeId: number;

    before(async () => {
      ({ app, server } = await startDicomTestApp(dialect, 'MODALITY1@*', {
        METRICS: 'on',
        TIME_ZONE: 'UTC',
        INSTITUTION_CODE: 'RECHOSP',
      }));
      engine = createQueueEngine({
        database: app.database,
        config: app.config,
        catalog: defaultRoutineCatalog,
      });
      dir = await mkdtemp(path.join(tmpdir(), 'cra-study-record-'));
      const institutionId = await createInstitution(app.db, { remote_id: 'RECHOSP' });
      typeId = await createIdentifierType(app.db, { institution_id: institutionId });
    });
    after(async () => {
      await server.stop(5000);
      await closeDicomPools();
      await app.close();
      await rm(dir, { recursive: true, force: true });
    });

    /**
     * A patient and an instance of theirs (by default a generic image; `build` makes another object for
     * the patient's identifier and the study's UID), sent by storescu; the new request's id.
     */
    async function sendInstance(
      build?: (identifier: string, studyUid: string) => Promise<Buffer>,
    ): Promise<{ requestId: number; patientId: number; studyUid: string }> {
      const identifier = unique('R').slice(0, 12);
      const { patientId } = await createPatient(app.db, { patient: { dob: '1961-03-02', gender: 'F' } });
      await addIdentifier(app.db, patientId, typeId, identifier);
      const studyUid = newUid();
      const file = path.join(dir, `${identifier}.dcm`);
      await writeFile(
        file,
        build !== undefined
          ? await build(identifier, studyUid)
          : buildInstance({
              studyInstanceUid: studyUid,
              tags: {
                PatientID: identifier,
                PatientBirthDate: '19610302',
                PatientSex: 'F',
                Manufacturer: 'Nobody',
                AccessionNumber: 'ACC1',
              },
            }),
      );
      const last = await app.db
        .selectFrom('request')
        .select(({ fn }) => fn.max('id').as('id'))
        .executeTakeFirst();
      const sent = await runDcmtk('storescu', [
        '-aet',
        'MODALITY1',
        '-aec',
        'CRA_TEST',
        '127.0.0.1',
        String(server.port),
        file,
      ]);
      assert.equal(sent.code, 0, sent.output);
      const request = await app.db
        .selectFrom('request')
        .select('id')
        .where('id', '>', Number(last?.id ?? 0))
        .executeTakeFirstOrThrow();
      return { requestId: request.id, patientId, studyUid };
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

    async function requestDataOf(requestId: number): Promise<Record<string, unknown>> {
      const rows = await attachmentsByMnemonic(app.db, requestId);
      return JSON.parse(rows.get('REQUEST_DATA')!.text_data!) as Record<string, unknown>;
    }

    it('queues the instance with its record, and files it with one parse at receipt and one for the pixels', async () => {
      const before = await parseCounts(app);
      const { requestId, patientId, studyUid } = await sendInstance();
      const afterReceipt = await parseCounts(app);
      assert.deepEqual(parsesBetween(before, afterReceipt), { receipt: 1 });

      const rows = await attachmentsByMnemonic(app.db, requestId);
      const stored = rows.get(DICOM_STUDY_MNEMONIC);
      assert.ok(stored?.text_data, 'the request is queued with its DICOM_STUDY row');
      assert.equal(stored.blob_data, null);
      const record = parseStudyRecord(JSON.parse(stored.text_data));
      assert.ok(record !== undefined, 'the row is a valid record of this version');
      assert.equal(record.v, 1);
      assert.equal(record.header.StudyInstanceUID, studyUid);
      assert.equal(record.header.AccessionNumber, 'ACC1');
      assert.equal(record.header.PatientBirthDate, '19610302');
      assert.equal(record.transferSyntaxUid, '1.2.840.10008.1.2.1');
      assert.equal(record.hasPixelData, true);
      assert.equal(
        record.sizeBytes,
        (
          await app.db
            .selectFrom('attachment_data')
            .select('blob_data')
            .where('request_id', '=', requestId)
            .where('attachment_mnemonic', '=', 'REQUEST_BLOB')
            .executeTakeFirstOrThrow()
        ).blob_data!.length,
      );

      const ran = await drain();
      assert.deepEqual(ran, [
        'DICOM_SEED:COMPLETE',
        'EXTRACT_IMAGE:COMPLETE',
        'PATIENT_MATCH:COMPLETE',
        'ATTACH_TO_EVENT:COMPLETE',
        'CLEAN_UP:COMPLETE',
      ]);
      // Nothing but the pixels was parsed after receipt: no header read by any step.
      assert.deepEqual(parsesBetween(afterReceipt, await parseCounts(app)), { extraction: 1 });
      const data = await requestDataOf(requestId);
      assert.equal(data.matched_patient_id, patientId);
      assert.equal(typeof data.event_id, 'number');
      // What DICOM_SEED mirrors for the console and the desk comes from the record.
      assert.equal(data.dicom_study_instance_uid, studyUid);
      assert.equal(data.dicom_transfer_syntax_uid, '1.2.840.10008.1.2.1');
    });

    it('files an IOLMaster 500 object with one parse at receipt, one for its image and one for its biometry', async () => {
      const before = await parseCounts(app);
      const { requestId, patientId } = await sendInstance((identifier, studyUid) =>
        iolMaster500(
          { id: identifier, dob: '19610302', sex: 'F' },
          {
            studyUid,
            sopUid: newUid(),
            acquisition: '20240301103512',
            studyDate: '20240301',
            studyTime: '103512',
          },
        ),
      );
      const afterReceipt = await parseCounts(app);
      assert.deepEqual(parsesBetween(before, afterReceipt), { receipt: 1 });
      const ran = await drain();
      assert.deepEqual(ran, [
        'DICOM_SEED:COMPLETE',
        'EXTRACT_IMAGE:COMPLETE',
        'PATIENT_MATCH:COMPLETE',
        'FILE_BIOMETRY:COMPLETE',
        'CLEAN_UP:COMPLETE',
      ]);
      // The payload read once for its image and once for its biometry values, no step reading a header.
      assert.deepEqual(parsesBetween(afterReceipt, await parseCounts(app)), { extraction: 1, biometry: 1 });
      const data = await requestDataOf(requestId);
      assert.equal(data.matched_patient_id, patientId);
      const biometry = await (app.db as AnyDb)
        .selectFrom('ophinbiometry_imported_events')
        .select('event_id')
        .where('patient_id', '=', patientId)
        .execute();
      assert.equal(biometry.length, 1, 'one Biometry event');
    });

    it('files a request queued without a record, reading its header once and storing the record', async () => {
      const { requestId, patientId, studyUid } = await sendInstance();
      // As a request queued before receipt stored records.
      await app.db
        .deleteFrom('attachment_data')
        .where('request_id', '=', requestId)
        .where('attachment_mnemonic', '=', DICOM_STUDY_MNEMONIC)
        .execute();
      const before = await parseCounts(app);
      const ran = await drain();
      assert.ok(
        ran.every((r) => r.endsWith(':COMPLETE')),
        ran.join(', '),
      );
      assert.deepEqual(parsesBetween(before, await parseCounts(app)), { record: 1, extraction: 1 });
      const data = await requestDataOf(requestId);
      assert.equal(data.matched_patient_id, patientId);
      assert.equal(typeof data.event_id, 'number');
      const rebuilt = (await attachmentsByMnemonic(app.db, requestId)).get(DICOM_STUDY_MNEMONIC);
      assert.equal(parseStudyRecord(JSON.parse(rebuilt!.text_data!))?.header.StudyInstanceUID, studyUid);
      const seed = (await routinesOf(app.db, requestId)).find((r) => r.routine_name === 'DICOM_SEED');
      assert.equal(seed?.status, 'COMPLETE');
    });

    it('rebuilds a record that is not one of this version rather than trusting it', async () => {
      const { requestId, studyUid } = await sendInstance();
      await app.db
        .updateTable('attachment_data')
        .set({ text_data: JSON.stringify({ v: 0, header: { StudyInstanceUID: '1.2.3' } }) })
        .where('request_id', '=', requestId)
        .where('attachment_mnemonic', '=', DICOM_STUDY_MNEMONIC)
        .execute();
      const before = await parseCounts(app);
      const ran = await drain();
      assert.ok(
        ran.every((r) => r.endsWith(':COMPLETE')),
        ran.join(', '),
      );
      assert.deepEqual(parsesBetween(before, await parseCounts(app)), { record: 1, extraction: 1 });
      assert.equal((await requestDataOf(requestId)).dicom_study_instance_uid, studyUid);
    });
  });
});
