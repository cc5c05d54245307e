/**
 * A request whose patient matches nobody waits for a patient, and every reader says so, once per dialect:
 * the status answer and `queue show` (the reason, the try of the tries, the next try), the console list's
 * "waiting for a patient" filter, the queue's health line and `/metrics`; the desk's fix (a patient chosen)
 * wakes the worker; "choose patient" is refused once the match has completed.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createPatient } from '../../../test/factories.ts';
import { addIdentifier, createStandardInstitutions } from '../../../test/factories-patient.ts';
import { ConsoleClient, createOperator } from '../../../test/factories-console.ts';
import { addRoutineRow, createRequestType, jsonRow, routinesOf } from '../../../test/factories-queue.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import { runCli } from '../../../test/run-cli.ts';
import { until } from '../../../test/until.ts';
import {
  createQueueEngine,
  onRequestQueued,
  createQueueWorker,
  enqueueRequest,
} from '../request-queue/index.ts';
import type { RequestQueuedEvent } from '../request-queue/index.ts';
import { DEFAULT_ROUTINES, createRoutineCatalog } from './index.ts';
import { createStatusService } from '../request-queue/status/status.ts';
import { editRequestMatchData, readRequestMatchData } from './edit-request.ts';
import { readWorkerHealth } from '../request-queue/admin/queue-health.ts';
import { listRequests } from '../request-queue/admin/request-list.ts';

const CODE = 'WAITING';

function hospitalNumber(): string {
  return String(Math.floor(1_000_000 + Math.random() * 8_999_999));
}

async function requestData(app: TestApp, requestId: number): Promise<Record<string, unknown>> {
  const row = await app.db
    .selectFrom('attachment_data')
    .select('text_data')
    .where('request_id', '=', requestId)
    .where('attachment_mnemonic', '=', 'REQUEST_DATA')
    .executeTakeFirstOrThrow();
  return JSON.parse(row.text_data ?? '{}') as Record<string, unknown>;
}

forEachDialect((dialect) => {
  describe(`a request waiting for a patient [${dialect}]`, () => {
    let app: TestApp;
    let localTypeId: number;
    const engine = () =>
      createQueueEngine({
        database: app.database,
        config: app.config,
        catalog: createRoutineCatalog(DEFAULT_ROUTINES),
      });

    before(async () => {
      app = await startTestApp(dialect, {
        env: { INSTITUTION_CODE: CODE, REFERENCE_CACHE_TTL_MS: '0', METRICS: 'on' },
      });
      ({ localTypeId } = await createStandardInstitutions(app.db, CODE));
    });
    after(() => app.close());

    async function createJane(number: string): Promise<number> {
      const patient = await createPatient(app.db, {
        firstName: 'Jane',
        lastName: `Doe${number}`,
        patient: { dob: '1970-03-15', gender: 'F' },
      });
      await addIdentifier(app.db, patient.patientId, localTypeId, number);
      return patient.patientId;
    }

    /** A PATIENT_MATCH request on a queue of its own for a patient nobody registered, tried once. */
    async function createWaiting() {
      const type = await createRequestType(app.db, { routineName: 'PATIENT_MATCH' });
      const { requestId } = await enqueueRequest(app.database, {
        requestType: type.requestType,
        attachments: [jsonRow('REQUEST_DATA', { hos_num: hospitalNumber(), dob: '1970-03-15' })],
      });
      const outcome = await engine().step(type.queue);
      assert.equal(outcome.kind === 'ran' ? outcome.status : outcome.kind, 'RETRY');
      return { ...type, requestId };
    }

    it('says "Waiting for a patient" with the reason and the tries in the status answer, queue show, the filter, the health line and /metrics', async () => {
      const waiting = await createWaiting();
      // On the same queue and type: a request pending for a worker, and one whose other routine failed.
      const pending = await enqueueRequest(app.database, { requestType: waiting.requestType });
      const failed = await enqueueRequest(app.database, { requestType: waiting.requestType });
      const [failedMatch] = await routinesOf(app.db, failed.requestId);
      await app.db
        .updateTable('request_routine')
        .set({ status: 'RETRY', try_count: 1 })
        .where('id', '=', failedMatch!.id)
        .execute();
      await addRoutineRow(app.db, {
        requestId: failed.requestId,
        name: 'CLEAN_UP',
        queue: waiting.queue,
        sequence: 90,
        status: 'FAILED',
        tryCount: 1,
      });

      const status = createStatusService({ db: app.db, retryBackoff: app.config.queueRetryBackoff });
      const shown = await status.readStatus(String(waiting.requestId));
      assert.equal(shown.status, 'RUNNING');
      const [match] = await routinesOf(app.db, waiting.requestId);
      assert.deepEqual(shown.waiting_for_patient, {
        message: `Waiting for a patient: no patient matches the identifier and date of birth; try 2 of 20, next at ${match!.next_try_date_time} UTC`,
        reason: 'No patient matches the identifier and date of birth',
        try_count: 1,
        max_tries: 20,
        next_try_date_time: match!.next_try_date_time,
      });
      assert.equal((await status.readStatus(String(pending.requestId))).waiting_for_patient, null);
      assert.equal((await status.readStatus(String(failed.requestId))).waiting_for_patient, null);

      const cli = await runCli(app.env, ['queue', 'show', String(waiting.requestId)]);
      assert.equal(cli.status, 0, cli.stderr);
      assert.match(
        cli.stdout,
        /^Request \d+: RUNNING\nWaiting for a patient: no patient matches the identifier and date of birth; try 2 of 20, next at /,
      );

      const listed = await listRequests(
        app.db,
        { overall: 'waiting', requestType: waiting.requestType },
        { budgetMs: 0 },
      );
      assert.deepEqual(
        listed.rows.map((r) => r.id),
        [waiting.requestId],
      );
      assert.equal(listed.rows[0]!.waiting?.tryCount, 1);
      const all = await listRequests(app.db, { requestType: waiting.requestType }, { budgetMs: 0 });
      assert.deepEqual(
        all.rows.map((r) => [r.id, r.waiting !== null]),
        [
          [failed.requestId, false],
          [pending.requestId, false],
          [waiting.requestId, true],
        ],
      );

      const health = await readWorkerHealth(app.db);
      const line = health.queues.find((q) => q.queue === waiting.queue);
      assert.equal(line?.waitingForPatient, 1);
      assert.equal(line?.counts.RETRY, 2);

      const metrics = await (await app.request('/metrics')).text();
      assert.match(metrics, /^# TYPE request_queue_waiting_for_patient gauge$/m);
      assert.match(
        metrics,
        new RegExp(`^request_queue_waiting_for_patient\\{queue="${waiting.queue}"\\} 1$`, 'm'),
      );
    });

    it('runs the match at once when the desk chooses the patient: the worker is woken, not left to its poll', async () => {
      const waiting = await createWaiting();
      const number = hospitalNumber();
      const patientId = await createJane(number);
      // The worker of this queue polls once an hour: only a wake-up runs the request soon.
      await app.db
        .updateTable('request_queue')
        .set({ idle_yield_ms: 3_600_000 })
        .where('request_queue', '=', waiting.queue)
        .execute();
      const events: RequestQueuedEvent[] = [];
      const stopListening = onRequestQueued((event) => events.push(event));
      const worker = createQueueWorker({
        database: app.database,
        config: { ...app.config, workerQueues: [waiting.queue] },
        catalog: createRoutineCatalog(DEFAULT_ROUTINES),
      });
      await worker.start();
      try {
        const operator = await createOperator(app.db);
        const match = await readRequestMatchData(app.db, waiting.requestId);
        const outcome = await editRequestMatchData(app.database, {
          requestId: waiting.requestId,
          expectedVersion: match!.version,
          userId: operator.userId,
          change: { kind: 'patient', patientId },
        });
        assert.equal(outcome.kind, 'done');
        assert.deepEqual(
          events.filter((e) => e.requestId === waiting.requestId),
          [{ requestId: waiting.requestId, queue: waiting.queue }],
        );
        await until(
          async () =>
            (await routinesOf(app.db, waiting.requestId)).find((r) => r.routine_name === 'PATIENT_MATCH')
              ?.status === 'COMPLETE',
          { what: 'the match run after the wake-up' },
        );
        assert.equal((await requestData(app, waiting.requestId)).matched_patient_id, patientId);
      } finally {
        stopListening();
        await worker.stop();
      }
    });

    it('refuses "choose patient" once the match completed (another routine failed): nothing changes', async () => {
      const number = hospitalNumber();
      const matched = await createJane(number);
      const other = await createJane(hospitalNumber());
      const type = await createRequestType(app.db, { routineName: 'PATIENT_MATCH' });
      const { requestId } = await enqueueRequest(app.database, {
        requestType: type.requestType,
        attachments: [
          jsonRow('REQUEST_DATA', { hos_num: number, dob: '1970-03-15', matched_patient_id: matched }),
        ],
      });
      const [match] = await routinesOf(app.db, requestId);
      await app.db
        .updateTable('request_routine')
        .set({ status: 'COMPLETE', try_count: 1 })
        .where('id', '=', match!.id)
        .execute();
      await addRoutineRow(app.db, {
        requestId,
        name: 'ATTACH_TO_EVENT',
        queue: type.queue,
        sequence: 20,
        status: 'FAILED',
        tryCount: 1,
      });
      const before = await requestData(app, requestId);
      const routinesBefore = await routinesOf(app.db, requestId);

      const client = new ConsoleClient(app);
      await client.signIn(await createOperator(app.db));
      const page = `/console/requests/${requestId}`;
      const html = await (await client.get(page)).text();
      assert.doesNotMatch(html, /Fix the data and run on/);
      const csrf = /name="_csrf" value="([^"]+)"/.exec(html)![1]!;
      const version = (await readRequestMatchData(app.db, requestId))!.version;
      const refused = await client.post(`${page}/patient`, {
        _csrf: csrf,
        version,
        patient_id: String(other),
      });
      assert.equal(refused.status, 409);
      assert.match(
        await refused.text(),
        /The patient match of this request is complete: the request goes on with the patient it matched\. Choosing or correcting the patient applies only while the match waits or failed\. Nothing was changed\./,
      );
      assert.deepEqual(await requestData(app, requestId), before);
      assert.deepEqual(await routinesOf(app.db, requestId), routinesBefore);
      const edited = await client.post(`${page}/edit`, {
        _csrf: csrf,
        version,
        identifier: '1234567',
        dob: '1970-03-15',
        sex: 'F',
      });
      assert.equal(edited.status, 409);
      assert.deepEqual(await requestData(app, requestId), before);
      assert.deepEqual(await routinesOf(app.db, requestId), routinesBefore);
    });
  });
});
