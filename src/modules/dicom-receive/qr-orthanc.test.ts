/**
 * Orthanc as a query/retrieve SCU of the service through its REST API, the service being its DICOM
 * modality `cra`: `/modalities/cra/query` at Study level by Patient ID and a Series level child query
 * (`/queries/{id}/answers/{n}/query-series`), `/queries/{id}/retrieve` and `/modalities/cra/move` as
 * C-MOVEs to Orthanc itself (a remote node and move destination of the service). The answers carry the
 * filed patient's hospital number as Patient ID, the instances Orthanc then holds are the ones stored,
 * data set for data set, an AE title configured only to store is refused, and every answer and retrieve
 * is audited as a read.
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, beforeEach, describe, it } from 'node:test';
import { sql } from 'kysely';
import { runDcmtk } from '../../../test/dcmtk.ts';
import { buildInstance, newUid } from '../../../test/dicom-instances.ts';
import { startDicomTestApp } from '../../../test/dicom-receiving.ts';
import { addIdentifier, createStandardInstitutions } from '../../../test/factories-patient.ts';
import { createPatient } from '../../../test/factories.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect } from '../../../test/harness.ts';
import type { Orthanc } from '../../../test/orthanc.ts';
import { orthancMissing, startOrthanc } from '../../../test/orthanc.ts';
import type { DicomServer } from './index.ts';
import { readPart10Meta } from './qr-retrieve.ts';

const missing = orthancMissing();

/** Orthanc's `?simplify` rendering of a C-FIND answer: keyword to value. */
type SimplifiedAnswer = Record<string, string>;

/** SHA-256 of the data set of a Part 10 file (what follows its file meta information). */
function dataSetHash(file: Buffer): string {
  const meta = readPart10Meta(file);
  assert.ok(meta !== undefined, 'a Part 10 file');
  return createHash('sha256').update(file.subarray(meta.dataSetOffset)).digest('hex');
}

/** The ids of an audit row's `target_ids` (comma-separated). */
function idsOf(targetIds: string): number[] {
  return String(targetIds).split(',').map(Number);
}

forEachDialect((dialect) => {
  describe(
    `Orthanc as a query/retrieve SCU of the service (/modalities/cra/query, /retrieve, /move) [${dialect}]`,
    { skip: missing ?? false },
    () => {
      let app: TestApp;
      let server: DicomServer;
      let orthanc: Orthanc;
      let workDir = '';
      let patientId = 0;
      const study = { filed: newUid(), unfiled: newUid() };
      const series = { fx: newUid(), fy: newUid(), u: newUid() };
      /** What was stored: the data set hash by SOP Instance UID, and the SOP Instance UIDs by series. */
      const hashes = new Map<string, string>();
      const sopsOf = new Map<string, string[]>();

      const get = async (pathname: string): Promise<unknown> => {
        const response = await fetch(`${orthanc.httpUrl}${pathname}`);
        assert.equal(response.status, 200, `GET ${pathname}`);
        return response.json();
      };
      /** The answers of Orthanc's query `queryId`, simplified. */
      const answersOf = async (queryId: string): Promise<SimplifiedAnswer[]> => {
        const indexes = (await get(`/queries/${queryId}/answers`)) as string[];
        return Promise.all(
          indexes.map(
            async (n) => (await get(`/queries/${queryId}/answers/${n}/content?simplify`)) as SimplifiedAnswer,
          ),
        );
      };
      /** The SOP Instance UID and data set hash of each instance Orthanc holds. */
      const heldByOrthanc = async (): Promise<Map<string, string>> => {
        const ids = (await get('/instances')) as string[];
        const held = new Map<string, string>();
        for (const id of ids) {
          const response = await fetch(`${orthanc.httpUrl}/instances/${id}/file`);
          const file = Buffer.from(await response.arrayBuffer());
          const tags = (await get(`/instances/${id}/simplified-tags`)) as { SOPInstanceUID: string };
          held.set(tags.SOPInstanceUID, dataSetHash(file));
        }
        return held;
      };
      const auditRows = async (username: string) =>
        (
          await sql<{
            action: string;
            target_type: string;
            target_ids: string;
            detail: string;
            client_address: string;
          }>`select action, target_type, target_ids, detail, client_address from ${sql.table('audit_event')}
          where username = ${username} order by id`.execute(app.db)
        ).rows;

      before(async () => {
        workDir = await mkdtemp(path.join(tmpdir(), 'cra-qr-orthanc-'));
        // Orthanc first: its DICOM port is the remote node the service moves to.
        orthanc = await startOrthanc({});
        ({ app, server } = await startDicomTestApp(
          dialect,
          'ORTHANC@127.0.0.1,STOREONLY@127.0.0.1,STORE@127.0.0.1',
          {
            DICOM_QR_CALLERS: 'ORTHANC@127.0.0.1',
            DICOM_REMOTE_NODES: `ORTHANC@127.0.0.1:${orthanc.dicomPort}`,
            DICOM_MOVE_DESTINATIONS: 'ORTHANC',
            INSTITUTION_CODE: 'NEW',
          },
        ));
        // The service as Orthanc's modality `cra`; `cra-store` reaches it as STOREONLY, a caller allowed
        // to store but not to query or retrieve.
        for (const [id, localAet] of [
          ['cra', 'ORTHANC'],
          ['cra-store', 'STOREONLY'],
        ] as const) {
          const response = await fetch(`${orthanc.httpUrl}/modalities/${id}`, {
            method: 'PUT',
            body: JSON.stringify({
              AET: 'CRA_TEST',
              Host: '127.0.0.1',
              Port: server.port,
              LocalAet: localAet,
            }),
          });
          assert.equal(response.status, 200, await response.text());
        }

        // The filed study (two series, three instances) and an unfiled one, all sent with the device's
        // Patient ID DEV-ORT.
        const made = [
          { study: study.filed, series: series.fx, number: '1' },
          { study: study.filed, series: series.fx, number: '2' },
          { study: study.filed, series: series.fy, number: '1' },
          { study: study.unfiled, series: series.u, number: '1' },
        ];
        const files: string[] = [];
        for (const [i, m] of made.entries()) {
          const sop = newUid();
          const file = buildInstance({
            sopInstanceUid: sop,
            studyInstanceUid: m.study,
            pixelBytes: 4000 + i,
            tags: {
              PatientID: 'DEV-ORT',
              PatientName: 'Orthanc^Synthetic',
              SeriesInstanceUID: m.series,
              InstanceNumber: m.number,
              StudyDescription: 'Fundus photography',
            },
          });
          hashes.set(sop, dataSetHash(file));
          sopsOf.set(m.series, [...(sopsOf.get(m.series) ?? []), sop]);
          const filePath = path.join(workDir, `i${i}.dcm`);
          await writeFile(filePath, file);
          files.push(filePath);
        }
        const stored = await runDcmtk('storescu', [
          '-aet',
          'STORE',
          '-aec',
          'CRA_TEST',
          '127.0.0.1',
          String(server.port),
          ...files,
        ]);
        assert.equal(stored.code, 0, stored.output);
        // The filed study is in an event of the patient whose hospital number (NEW's LOCAL type) is 2000002.
        const { localTypeId } = await createStandardInstitutions(app.db, 'NEW');
        const patient = await createPatient(app.db, { firstName: 'Synthetic', lastName: 'Orthanc' });
        patientId = patient.patientId;
        await addIdentifier(app.db, patientId, localTypeId, '2000002');
        await sql`insert into ${sql.table('device_event')} (patient_id, study_instance_uid, event_subtype, model, event_id, created_date, last_modified_date)
          values (${patientId}, ${study.filed}, ${'Fundus Images'}, ${'TEST'}, ${1}, ${'2024-01-01 00:00:00'}, ${'2024-01-01 00:00:00'})`.execute(
          app.db,
        );
      });

      beforeEach(async () => {
        for (const id of (await get('/instances')) as string[]) {
          const response = await fetch(`${orthanc.httpUrl}/instances/${id}`, { method: 'DELETE' });
          assert.equal(response.status, 200);
        }
      });

      after(async () => {
        await orthanc?.stop();
        await server?.stop(5000);
        await app?.close();
        if (workDir !== '') await rm(workDir, { recursive: true, force: true });
      });

      it('answers a Study level query by the hospital number with the filed study, Patient ID the hospital number', async () => {
        const query = (await orthanc.post('/modalities/cra/query', {
          Level: 'Study',
          Query: {
            PatientID: '2000002',
            StudyInstanceUID: '',
            PatientName: '',
            StudyDescription: '',
            NumberOfStudyRelatedInstances: '',
            ModalitiesInStudy: '',
          },
        })) as { ID: string };
        const answers = await answersOf(query.ID);
        assert.deepEqual(
          answers.map((a) => a.StudyInstanceUID),
          [study.filed],
        );
        const [answer] = answers;
        assert.equal(answer!.PatientID, '2000002');
        assert.equal(answer!.QueryRetrieveLevel, 'STUDY');
        assert.equal(answer!.PatientName, 'Orthanc^Synthetic');
        assert.equal(answer!.StudyDescription, 'Fundus photography');
        assert.equal(Number(answer!.NumberOfStudyRelatedInstances), 3);

        // What the device sent finds only the study filed to no patient, which answers it as sent.
        const bySent = (await orthanc.post('/modalities/cra/query', {
          Level: 'Study',
          Query: { PatientID: 'DEV-ORT', StudyInstanceUID: '' },
        })) as { ID: string };
        const sent = await answersOf(bySent.ID);
        assert.deepEqual(
          sent.map((a) => [a.StudyInstanceUID, a.PatientID]),
          [[study.unfiled, 'DEV-ORT']],
        );
      });

      it("answers a Series level child query of a study answer with the study's series", async () => {
        const query = (await orthanc.post('/modalities/cra/query', {
          Level: 'Study',
          Query: { PatientID: '2000002', StudyInstanceUID: '' },
        })) as { ID: string };
        const child = (await orthanc.post(`/queries/${query.ID}/answers/0/query-series`, {
          Query: { Modality: '', NumberOfSeriesRelatedInstances: '' },
        })) as { ID: string };
        const answers = await answersOf(child.ID);
        const counts = Object.fromEntries(
          answers.map((a) => [a.SeriesInstanceUID, Number(a.NumberOfSeriesRelatedInstances)]),
        );
        assert.deepEqual(counts, { [series.fx]: 2, [series.fy]: 1 });
        assert.ok(
          answers.every((a) => a.QueryRetrieveLevel === 'SERIES' && a.StudyInstanceUID === study.filed),
        );
        assert.ok(answers.every((a) => a.PatientID === undefined || a.PatientID === '2000002'));
      });

      it('retrieves a study answer with /queries/{id}/retrieve: Orthanc holds its instances as stored', async () => {
        const query = (await orthanc.post('/modalities/cra/query', {
          Level: 'Study',
          Query: { PatientID: '2000002', StudyInstanceUID: '' },
        })) as { ID: string };
        await orthanc.post(`/queries/${query.ID}/retrieve`, { TargetAet: 'ORTHANC', Synchronous: true });
        const held = await heldByOrthanc();
        const expected = [...sopsOf.get(series.fx)!, ...sopsOf.get(series.fy)!];
        assert.deepEqual([...held.keys()].sort(), [...expected].sort());
        for (const sop of expected) assert.equal(held.get(sop), hashes.get(sop), 'the data set as stored');
      });

      it('retrieves a series answer of the child query: only that series', async () => {
        const query = (await orthanc.post('/modalities/cra/query', {
          Level: 'Study',
          Query: { PatientID: '2000002', StudyInstanceUID: '' },
        })) as { ID: string };
        const child = (await orthanc.post(`/queries/${query.ID}/answers/0/query-series`, {
          Query: { SeriesInstanceUID: series.fx },
        })) as { ID: string };
        await orthanc.post(`/queries/${child.ID}/retrieve`, { TargetAet: 'ORTHANC', Synchronous: true });
        const held = await heldByOrthanc();
        assert.deepEqual([...held.keys()].sort(), [...sopsOf.get(series.fx)!].sort());
        for (const [sop, hash] of held) assert.equal(hash, hashes.get(sop));
      });

      it('moves with /modalities/cra/move: a study by its UID, a series by its UIDs', async () => {
        await orthanc.post('/modalities/cra/move', {
          Level: 'Study',
          Resources: [{ StudyInstanceUID: study.unfiled }],
          TargetAet: 'ORTHANC',
          Synchronous: true,
        });
        const unfiled = await heldByOrthanc();
        assert.deepEqual([...unfiled.keys()], sopsOf.get(series.u));
        assert.equal(unfiled.get(sopsOf.get(series.u)![0]!), hashes.get(sopsOf.get(series.u)![0]!));

        await orthanc.post('/modalities/cra/move', {
          Level: 'Series',
          Resources: [{ StudyInstanceUID: study.filed, SeriesInstanceUID: series.fy }],
          TargetAet: 'ORTHANC',
          Synchronous: true,
        });
        const both = await heldByOrthanc();
        const expected = [...sopsOf.get(series.u)!, ...sopsOf.get(series.fy)!];
        assert.deepEqual([...both.keys()].sort(), expected.sort());
        for (const [sop, hash] of both) assert.equal(hash, hashes.get(sop));
      });

      it("refuses Orthanc's Patient level move, which it sends in the Study Root model (A900)", async () => {
        // Orthanc 1.10 proposes only the Study Root MOVE model, also for a Patient level move; Study Root
        // has no PATIENT level (PS3.4 C.6.2), so the service refuses it and sends nothing.
        await assert.rejects(
          orthanc.post('/modalities/cra/move', {
            Level: 'Patient',
            Resources: [{ PatientID: '2000002' }],
            TargetAet: 'ORTHANC',
            Synchronous: true,
          }),
          /0xA900/,
        );
        assert.deepEqual(await get('/instances'), []);
      });

      it('refuses a move to a destination other than DICOM_MOVE_DESTINATIONS, sending nothing', async () => {
        await assert.rejects(
          orthanc.post('/modalities/cra/move', {
            Level: 'Study',
            Resources: [{ StudyInstanceUID: study.filed }],
            TargetAet: 'NOBODY',
            Synchronous: true,
          }),
        );
        assert.deepEqual(await get('/instances'), []);
      });

      it('refuses the queries and retrieves of an AE title configured only to store, auditing nothing', async () => {
        // STOREONLY associates (its echo is answered): only its query/retrieve contexts are rejected.
        await orthanc.post('/modalities/cra-store/echo', {});
        await assert.rejects(
          orthanc.post('/modalities/cra-store/query', {
            Level: 'Study',
            Query: { PatientID: '2000002', StudyInstanceUID: '' },
          }),
          /C-FIND command is not supported by the remote SCP/,
        );
        await assert.rejects(
          orthanc.post('/modalities/cra-store/move', {
            Level: 'Study',
            Resources: [{ StudyInstanceUID: study.filed }],
            TargetAet: 'ORTHANC',
            Synchronous: true,
          }),
          /C-MOVE command is not supported by the remote SCP/,
        );
        assert.deepEqual(await get('/instances'), []);
        assert.deepEqual(await auditRows('STOREONLY'), []);
      });

      it('audits every answer and retrieve as a read: Orthanc, its address, the filed patient', async () => {
        const query = (await orthanc.post('/modalities/cra/query', {
          Level: 'Study',
          Query: { PatientID: '2000002', StudyInstanceUID: '' },
        })) as { ID: string };
        await orthanc.post(`/queries/${query.ID}/retrieve`, { TargetAet: 'ORTHANC', Synchronous: true });
        const rows = await auditRows('ORTHANC');
        assert.ok(rows.length > 0);
        assert.ok(rows.every((r) => r.client_address === '127.0.0.1'));
        const finds = rows.filter((r) => r.action === 'dicom.find' && r.target_type === 'patient');
        assert.ok(
          finds.length > 0 && finds.every((r) => idsOf(r.target_ids).includes(patientId)),
          JSON.stringify(finds),
        );
        const moves = rows.filter((r) => r.action === 'dicom.move');
        assert.ok(
          moves.some((r) => r.target_type === 'patient' && idsOf(r.target_ids).includes(patientId)),
          JSON.stringify(moves),
        );
        assert.ok(
          moves.every((r) => /^(study|patient) root, to ORTHANC$/.test(r.detail)),
          JSON.stringify(moves),
        );
        assert.ok(
          !rows.some((r) => r.detail.includes('NOBODY')),
          'a refused move reads nothing, and is not audited',
        );
      });
    },
  );
});
