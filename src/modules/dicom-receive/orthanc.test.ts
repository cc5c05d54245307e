import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { buildInstance, newUid, sopInstanceUidOf } from '../../../test/dicom-instances.ts';
import { readQueuedRequest, receiptOf, startDicomTestApp } from '../../../test/dicom-receiving.ts';
import type { TestUser } from '../../../test/factories.ts';
import { createInstitution, createPatient, createUser } from '../../../test/factories.ts';
import { addIdentifier, createIdentifierType } from '../../../test/factories-patient.ts';
import { routinesOf } from '../../../test/factories-queue.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect } from '../../../test/harness.ts';
import type { Orthanc } from '../../../test/orthanc.ts';
import { orthancMissing, startOrthanc } from '../../../test/orthanc.ts';
import { until } from '../../../test/until.ts';
import { createQueueEngine } from '../request-queue/index.ts';
import { defaultRoutineCatalog } from '../filing/index.ts';
import type { DicomServer } from './dimse-server.ts';

const missing = orthancMissing();

forEachDialect((dialect) => {
  describe(
    `Orthanc as a sender: STOW-RS client and DIMSE modality [${dialect}]`,
    { skip: missing ?? false },
    () => {
      let app: TestApp;
      let server: DicomServer;
      let orthanc: Orthanc;
      let user: TestUser;

      before(async () => {
        ({ app, server } = await startDicomTestApp(dialect, 'ORTHANC@127.0.0.1'));
        user = await createUser(app.db);
        orthanc = await startOrthanc({
          dicomWeb: {
            url: `${app.baseUrl}/api/v1/dicomweb/`,
            username: user.username,
            password: user.password,
          },
          modality: { aeTitle: 'CRA_TEST', port: server.port },
        });
      });
      after(async () => {
        await orthanc?.stop();
        await server?.stop(5000);
        await app?.close();
      });

      it('sends instances uploaded to Orthanc with its /dicom-web/servers/cra/stow: each a queued request', async () => {
        const study = newUid();
        const files = [
          buildInstance({ studyInstanceUid: study, pixelBytes: 50_000 }),
          buildInstance({ studyInstanceUid: study, sopClassUid: '1.2.840.10008.5.1.4.1.1.77.1.5.1' }),
          buildInstance({ sopClassUid: '1.2.840.10008.5.1.4.1.1.77.1.5.4' }),
        ];
        const ids = [];
        for (const file of files) ids.push(await orthanc.upload(file));
        await orthanc.post('/dicom-web/servers/cra/stow', { Resources: ids });
        for (const file of files) {
          await until(async () => (await receiptOf(app.db, sopInstanceUidOf(file))) !== undefined, {
            what: 'the instance sent by STOW-RS',
            timeoutMs: 60_000,
          });
          const receipt = (await receiptOf(app.db, sopInstanceUidOf(file)))!;
          const queued = await readQueuedRequest(app.db, receipt.firstRequestId);
          assert.equal(queued.systemMessage, 'STOW-RS');
          assert.equal(queued.requestData.source, 'STOW-RS');
          assert.deepEqual(queued.routines, ['DICOM_SEED@dicom_queue:NEW:10:0']);
          assert.equal(queued.headerData.authorization, undefined, 'credentials are not stored');
          assert.match(String(queued.headerData['content-type']), /^multipart\/related/);
          // Orthanc keeps the file it was given; what it sends is that file.
          assert.equal(sopInstanceUidOf(queued.payload), sopInstanceUidOf(file));
        }
      });

      it('sends instances with its /modalities/cra/store (C-STORE): each a queued request naming Orthanc', async () => {
        const files = [buildInstance(), buildInstance({ sopClassUid: '1.2.840.10008.5.1.4.1.1.104.1' })];
        // The second is an encapsulated PDF without its document: refused with A900, and Orthanc says so.
        const pdfless = files[1]!;
        const good = files[0]!;
        const goodId = await orthanc.upload(good);
        await orthanc.post('/modalities/cra/store', { Resources: [goodId], Synchronous: true });
        const receipt = (await receiptOf(app.db, sopInstanceUidOf(good)))!;
        assert.ok(receipt !== undefined, 'stored before Orthanc answered');
        const queued = await readQueuedRequest(app.db, receipt.firstRequestId);
        assert.equal(queued.systemMessage, 'ORTHANC');
        assert.equal(queued.requestData.calling_ae_title, 'ORTHANC');
        assert.equal(queued.requestData.source, 'C-STORE');

        const badId = await orthanc.upload(pdfless);
        await assert.rejects(
          orthanc.post('/modalities/cra/store', { Resources: [badId], Synchronous: true }),
        );
        assert.equal(await receiptOf(app.db, sopInstanceUidOf(pdfless)), undefined);
      });

      it('delivers an image sent by C-STORE to the patient: the queue files it under a new event', async () => {
        const institutionId = await createInstitution(app.db);
        const typeId = await createIdentifierType(app.db, { institution_id: institutionId });
        const patient = await createPatient(app.db, {
          firstName: 'Ada',
          lastName: 'Lovelace',
          patient: { dob: '1965-12-10', gender: 'F' },
        });
        await addIdentifier(app.db, patient.patientId, typeId, '0048151');
        const image = buildInstance({
          sopClassUid: '1.2.840.10008.5.1.4.1.1.77.1.5.1',
          tags: {
            PatientID: '48151',
            PatientBirthDate: '19651210',
            PatientSex: 'F',
            PatientName: 'Lovelace^Ada',
          },
        });
        const id = await orthanc.upload(image);
        await orthanc.post('/modalities/cra/store', { Resources: [id], Synchronous: true });
        const { firstRequestId } = (await receiptOf(app.db, sopInstanceUidOf(image)))!;

        // Every eligible routine runs (other tests' requests wait in PATIENT_MATCH for their patients).
        const engine = createQueueEngine({
          database: app.database,
          config: app.config,
          catalog: defaultRoutineCatalog,
        });
        for (let step = 0; step < 50; step += 1) if ((await engine.step()).kind !== 'ran') break;
        // The chain's middle depends on the routines (image extraction, thumbnails); its ends do not.
        const chain = (await routinesOf(app.db, firstRequestId)).map((r) => `${r.routine_name}:${r.status}`);
        assert.equal(chain[0], 'DICOM_SEED:COMPLETE');
        assert.ok(chain.includes('PATIENT_MATCH:COMPLETE'), chain.join(' '));
        assert.ok(chain.includes('ATTACH_TO_EVENT:COMPLETE'), chain.join(' '));
        assert.ok(
          chain.every((r) => r.endsWith(':COMPLETE')),
          chain.join(' '),
        );
        const linked = await app.db
          .selectFrom('event_attachment_item as item')
          .innerJoin('event_attachment_group as g', 'g.id', 'item.event_attachment_group_id')
          .innerJoin('event as e', 'e.id', 'g.event_id')
          .innerJoin('episode as ep', 'ep.id', 'e.episode_id')
          .innerJoin('attachment_data as ad', 'ad.id', 'item.attachment_data_id')
          .select(['ep.patient_id', 'ad.request_id', 'ad.attachment_mnemonic'])
          .where('ad.request_id', '=', firstRequestId)
          .where('ad.attachment_mnemonic', '=', 'REQUEST_BLOB')
          .execute();
        assert.deepEqual(linked, [
          { patient_id: patient.patientId, request_id: firstRequestId, attachment_mnemonic: 'REQUEST_BLOB' },
        ]);
      });
    },
  );
});
