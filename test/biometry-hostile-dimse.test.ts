/**
 * A hostile biometry file sent over C-STORE with dcmtk's storescu, on every dialect: an "IOLMaster 700"
 * Ophthalmic Axial Measurements object (78.7) carrying 6,000 lens names is received (storescu is told
 * Success: the receipt only queues it), and its filing is refused with the reason, writing nothing.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { closeDicomPools } from '../src/modules/dicom/index.ts';
import type { DicomServer } from '../src/modules/dicom-receive/index.ts';
import { createQueueEngine } from '../src/modules/request-queue/index.ts';
import { defaultRoutineCatalog } from '../src/modules/filing/index.ts';
import { iolMasterCalculations } from './biometry-objects.ts';
import { runDcmtk } from './dcmtk.ts';
import { newUid } from './dicom-instances.ts';
import { receiptOf, startDicomTestApp } from './dicom-receiving.ts';
import { createInstitution, createPatient } from './factories.ts';
import { addIdentifier, createIdentifierType } from './factories-patient.ts';
import { executionsOf, routinesOf } from './factories-queue.ts';
import type { TestApp } from './harness.ts';
import { forEachDialect } from './harness.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

forEachDialect((dialect) => {
  describe(`Hostile biometry over C-STORE (${dialect})`, () => {
    let app: TestApp;
    let server: DicomServer;
    let dir: string;

    before(async () => {
      ({ app, server } = await startDicomTestApp(dialect, 'MODALITY1@*', {
        RAW_BODY_LIMIT_BYTES: String(8 * 1024 * 1024),
      }));
      dir = await mkdtemp(path.join(tmpdir(), 'cra-biometry-dimse-'));
    });
    after(async () => {
      await server.stop(5000);
      await closeDicomPools();
      await app.close();
      await rm(dir, { recursive: true, force: true });
    });

    it('refuses the filing of 6,000 lens names sent by storescu, with its reason, and writes nothing', async () => {
      const db = app.db as AnyDb;
      const institutionId = await createInstitution(app.db);
      const typeId = await createIdentifierType(app.db, { institution_id: institutionId });
      const id = `${Math.floor(Math.random() * 9_000_000) + 1_000_000}`;
      const { patientId } = await createPatient(app.db, { patient: { dob: '1960-01-02', gender: 'F' } });
      await addIdentifier(app.db, patientId, typeId, id);
      const sopUid = newUid();
      const bytes = await iolMasterCalculations(
        { id, dob: '19600102', sex: 'F' },
        { studyUid: newUid(), sopUid, acquisition: '20240301103512' },
        {
          lensNames: Array.from({ length: 6000 }, (_, i) => `Lens ${i}`),
          eyes: ['R', 'L'],
        },
      );
      const file = path.join(dir, 'hostile.dcm');
      await writeFile(file, bytes);
      const lensCount = async () =>
        Number(
          (
            await db
              .selectFrom('ophinbiometry_lenstype_lens')
              .select(({ fn }) => fn.countAll().as('n'))
              .executeTakeFirstOrThrow()
          ).n,
        );
      const lensesBefore = await lensCount();

      const sent = await runDcmtk('storescu', [
        ...['-R', '-aet', 'MODALITY1', '-aec', 'CRA_TEST', '127.0.0.1', String(server.port), file],
      ]);
      assert.equal(sent.code, 0, sent.output);
      const receipt = await receiptOf(app.db, sopUid);
      assert.ok(receipt, 'the instance was received and queued');

      const engine = createQueueEngine({
        database: app.database,
        config: app.config,
        catalog: defaultRoutineCatalog,
      });
      const ran: string[] = [];
      for (let i = 0; i < 20; i++) {
        const outcome = await engine.step();
        if (outcome.kind !== 'ran') break;
        ran.push(`${outcome.routineName}:${outcome.status}`);
      }
      assert.ok(ran.includes('FILE_BIOMETRY:FAILED'), ran.join(', '));
      const routine = (await routinesOf(app.db, receipt.firstRequestId)).find(
        (r) => r.routine_name === 'FILE_BIOMETRY',
      )!;
      assert.equal(routine.status, 'FAILED');
      assert.match(
        (await executionsOf(app.db, routine.id)).at(-1)?.log_text ?? '',
        /Biometry file refused: more than 1000 IOL calculations for the right eye/,
      );
      assert.equal(await lensCount(), lensesBefore);
      const imported = await db
        .selectFrom('ophinbiometry_imported_events')
        .select('id')
        .where('patient_id', '=', patientId)
        .execute();
      assert.deepEqual(imported, []);
    });
  });
});
