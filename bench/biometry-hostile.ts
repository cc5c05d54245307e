/**
 * A short run of the hostile biometry file: an "IOLMaster 700" object with 2,000 lens names (one eye),
 * filed through the queue on SQLite while `/healthz` is polled every 50 ms. Prints how long FILE_BIOMETRY
 * took, its outcome, the slowest `/healthz` answer meanwhile (from its send; a poll asleep when the loop
 * stalls starts late and misses the stall) and the longest event-loop stall (which does not).
 * `node bench/biometry-hostile.ts [lens names, default 2000] [BIOMETRY_MAX_CALCULATIONS_PER_EYE]`
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { closeDicomPools } from '../src/modules/dicom/index.ts';
import { createQueueEngine } from '../src/modules/request-queue/index.ts';
import { defaultRoutineCatalog } from '../src/modules/filing/index.ts';
import { iolMasterCalculations } from '../test/biometry-objects.ts';
import { newUid } from '../test/dicom-instances.ts';
import { createInstitution, createPatient, createUser } from '../test/factories.ts';
import { addIdentifier, createIdentifierType } from '../test/factories-patient.ts';
import { submitToQueue } from '../test/factories-queue.ts';
import { startTestApp } from '../test/harness.ts';

const count = Number(process.argv[2] ?? 2000);
const cap = process.argv[3];
const app = await startTestApp(
  'sqlite',
  cap === undefined
    ? {}
    : { env: { BIOMETRY_MAX_CALCULATIONS_PER_EYE: cap, BIOMETRY_MAX_LENSES_PER_EYE: cap } },
);
try {
  const user = await createUser(app.db);
  const typeId = await createIdentifierType(app.db, { institution_id: await createInstitution(app.db) });
  const { patientId } = await createPatient(app.db, { patient: { dob: '1960-01-02', gender: 'F' } });
  await addIdentifier(app.db, patientId, typeId, '7654321');
  const bytes = await iolMasterCalculations(
    { id: '7654321', dob: '19600102', sex: 'F' },
    { studyUid: newUid(), sopUid: newUid(), acquisition: '20240301103512' },
    { lensNames: Array.from({ length: count }, (_, i) => `Lens ${i}`) },
  );
  const form = new FormData();
  form.append('scan', new Blob([new Uint8Array(bytes)], { type: 'application/dicom' }), 'scan.dcm');
  await submitToQueue(app, user.authorization, { query: 'request_type=dicom_request', body: form });
  const engine = createQueueEngine({
    database: app.database,
    config: app.config,
    catalog: defaultRoutineCatalog,
  });
  const loopDelay = monitorEventLoopDelay({ resolution: 10 });
  loopDelay.enable();
  let slowestHealthzMs = 0;
  let isPolling = true;
  const poll = (async () => {
    while (isPolling) {
      const started = performance.now();
      await (await app.request('/healthz')).text();
      slowestHealthzMs = Math.max(slowestHealthzMs, performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  for (let i = 0; i < 10; i++) {
    const started = performance.now();
    const outcome = await engine.step();
    if (outcome.kind !== 'ran') break;
    if (outcome.routineName === 'FILE_BIOMETRY') {
      console.log(
        `FILE_BIOMETRY ${outcome.status} in ${(performance.now() - started).toFixed(0)} ms (${count} lens names, ${(bytes.length / 1e6).toFixed(2)} MB)`,
      );
    }
  }
  isPolling = false;
  await poll;
  loopDelay.disable();
  console.log(`slowest /healthz during the run: ${slowestHealthzMs.toFixed(0)} ms`);
  console.log(`longest event-loop stall: ${(loopDelay.max / 1e6).toFixed(0)} ms`);
} finally {
  await closeDicomPools();
  await app.close();
}
