import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { itEnforcesBasicAuth } from '../../../../test/auth-cases.ts';
import type { TestUser } from '../../../../test/factories.ts';
import { createUser } from '../../../../test/factories.ts';
import type { TestRequestType } from '../../../../test/factories-queue.ts';
import { STATUS_PATH, createRequestType, submitToQueue } from '../../../../test/factories-queue.ts';
import type { TestApp } from '../../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../../test/harness.ts';
import type { RoutineStatus } from '../../../db/schema.ts';
import { overallStatus, redactExecutionLog } from './status.ts';

/** A log text as the engine writes one for a failed attempt: worker line, routine lines, error stack. */
function failedAttemptLog(error: Error, lines: readonly string[] = []): string {
  return ['worker host:1', ...lines, error.stack ?? error.message].join('\n');
}

class DatabaseError extends Error {
  override name = 'DatabaseError';
}

describe('redactExecutionLog', () => {
  it('keeps routine lines and the words of plain errors, drops stacks', () => {
    const log = failedAttemptLog(new Error('No patient matches the identifier, date of birth and sex'), [
      'attachment_data 12: thumbnails made',
    ]);
    assert.equal(
      redactExecutionLog(log),
      'worker host:1\nattachment_data 12: thumbnails made\nError: No patient matches the identifier, date of birth and sex',
    );
    assert.equal(
      redactExecutionLog('worker host:1\nFAILED: No date of birth in the request'),
      'worker host:1\nFAILED: No date of birth in the request',
    );
  });

  it('withholds the message of errors that quote their input, one line or several', () => {
    const cases: Error[] = [
      new SyntaxError('Unexpected token \'S\', "Smith, Jane" is not valid JSON'),
      new DatabaseError('invalid input syntax for type date: "1970-01-31 Jane Smith"'),
      new TypeError('bad value\nJane Smith\n0012345'),
    ];
    for (const error of cases) {
      const shown = redactExecutionLog(failedAttemptLog(error, ['matched nothing']));
      assert.equal(
        shown,
        `worker host:1\nmatched nothing\n${error.name} (message withheld; see the execution log)`,
      );
      assert.doesNotMatch(shown, /Smith|0012345|\bat\s/);
    }
  });

  it('masks credentials in URLs and password-like assignments', () => {
    const shown = redactExecutionLog(
      failedAttemptLog(
        new Error('connect to postgres://app:s3cret@db:5432/x failed; password=hunter2 token: abc'),
      ),
    );
    assert.doesNotMatch(shown, /s3cret|hunter2|abc|app:/);
    assert.match(shown, /postgres:\/\/\*\*\*@db:5432\/x/);
  });
});

describe("overallStatus (as OpenEyes's Request::getRequestStatus)", () => {
  it('is FAILED when any routine failed, RUNNING when one is NEW or RETRY, else COMPLETE', () => {
    const cases: Array<[RoutineStatus[], string]> = [
      [[], 'COMPLETE'],
      [['COMPLETE', 'VOID', 'PAUSE'], 'COMPLETE'],
      [['COMPLETE', 'NEW'], 'RUNNING'],
      [['RETRY', 'COMPLETE'], 'RUNNING'],
      [['NEW', 'FAILED'], 'FAILED'],
      [['COMPLETE', 'FAILED', 'VOID'], 'FAILED'],
    ];
    for (const [statuses, expected] of cases)
      assert.equal(overallStatus(statuses), expected, statuses.join());
  });
});

forEachDialect((dialect) => {
  describe(`GET ${STATUS_PATH} (${dialect})`, () => {
    let app: TestApp;
    let user: TestUser;
    let type: TestRequestType;

    before(async () => {
      app = await startTestApp(dialect);
      user = await createUser(app.db);
      type = await createRequestType(app.db);
    });
    after(() => app.close());

    async function queueOne(): Promise<number> {
      const response = await submitToQueue(app, user.authorization, {
        query: `request_type=${type.requestType}`,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ data: { a: 1 } }),
      });
      assert.equal(response.status, 200);
      return ((await response.json()) as { request_id: number }).request_id;
    }

    const status = (query: string) =>
      app.request(`${STATUS_PATH}${query}`, { headers: { authorization: user.authorization } });

    it('reports a new request as RUNNING with its first routine', async () => {
      const id = await queueOne();
      const response = await status(`?request_id=${id}`);
      assert.equal(response.status, 200);
      assert.match(response.headers.get('content-type') ?? '', /^application\/json/);
      assert.equal(response.headers.get('cache-control'), 'no-store');
      assert.deepEqual(await response.json(), {
        request_id: id,
        status: 'RUNNING',
        waiting_for_patient: null,
        routines: [
          {
            routine_name: type.routineName,
            status: 'NEW',
            try_count: 0,
            execute_sequence: 10,
            next_try_date_time: null,
            execution_log: null,
          },
        ],
      });
    });

    it("shows each routine's last execution log, with no patient data or credentials", async () => {
      const id = await queueOne();
      const [routine] = await app.db
        .selectFrom('request_routine')
        .select('id')
        .where('request_id', '=', id)
        .execute();
      const execution = (tryNumber: number, logText: string) =>
        app.db
          .insertInto('request_routine_execution')
          .values({
            request_routine_id: routine!.id,
            log_text: logText,
            execution_date_time: '2030-01-01 00:00:00',
            status: 'RETRY',
            try_number: tryNumber,
          })
          .execute();
      await execution(1, 'worker a:1\nfirst attempt');
      await execution(
        2,
        failedAttemptLog(new DatabaseError('invalid input syntax for type date: "Jane Smith 0012345"'), [
          'reading FORM_DATA of postgres://app:s3cret@db/x',
        ]),
      );
      await app.db
        .updateTable('request_routine')
        .set({ status: 'RETRY', try_count: 2 })
        .where('id', '=', routine!.id)
        .execute();
      const body = (await (await status(`?request_id=${id}`)).json()) as {
        routines: { execution_log: string | null }[];
      };
      assert.equal(
        body.routines[0]!.execution_log,
        'worker host:1\nreading FORM_DATA of postgres://***@db/x\nDatabaseError (message withheld; see the execution log)',
      );
      assert.doesNotMatch(JSON.stringify(body), /Smith|0012345|s3cret|first attempt/);
    });

    it('lists routines in execution order and derives COMPLETE, RUNNING and FAILED from them', async () => {
      const id = await queueOne();
      const add = (status: RoutineStatus, sequence: number, tries = 0, next: string | null = null) =>
        app.db
          .insertInto('request_routine')
          .values({
            request_id: id,
            execute_request_queue: type.queue,
            status,
            routine_name: type.routineName,
            try_count: tries,
            next_try_date_time: next,
            execute_sequence: sequence,
            hash_code: null,
          })
          .execute();
      await app.db
        .updateTable('request_routine')
        .set({ status: 'COMPLETE', try_count: 1 })
        .where('request_id', '=', id)
        .execute();
      await add('VOID', 20);
      let body = (await (await status(`?request_id=${id}`)).json()) as {
        status: string;
        routines: unknown[];
      };
      assert.equal(body.status, 'COMPLETE');

      await add('RETRY', 30, 2, '2030-01-02 03:04:05');
      await add('NEW', 1);
      body = (await (await status(`?request_id=${id}`)).json()) as typeof body;
      assert.equal(body.status, 'RUNNING');
      assert.deepEqual(
        body.routines.map((r) => {
          const routine = r as {
            status: string;
            execute_sequence: number;
            next_try_date_time: string | null;
          };
          return [routine.execute_sequence, routine.status, routine.next_try_date_time];
        }),
        [
          [1, 'NEW', null],
          [10, 'COMPLETE', null],
          [20, 'VOID', null],
          [30, 'RETRY', '2030-01-02 03:04:05'],
        ],
      );

      await app.db
        .updateTable('request_routine')
        .set({ status: 'FAILED' })
        .where('request_id', '=', id)
        .where('execute_sequence', '=', 30)
        .execute();
      body = (await (await status(`?request_id=${id}`)).json()) as typeof body;
      assert.equal(body.status, 'FAILED');
    });

    it('answers 404 for an unknown request id', async () => {
      const response = await status('?request_id=999999');
      assert.equal(response.status, 404);
      assert.deepEqual(await response.json(), { success: 0, message: { system: 'Request not found.' } });
    });

    it("answers another user's request as an unknown one (404), by any login short of request admin", async () => {
      const id = await queueOne();
      const [routine] = await app.db
        .selectFrom('request_routine')
        .select('id')
        .where('request_id', '=', id)
        .execute();
      await app.db
        .insertInto('request_routine_execution')
        .values({
          request_routine_id: routine!.id,
          log_text: 'worker a:1\nmatched patient 7, event 12, eye R',
          execution_date_time: '2030-01-01 00:00:00',
          status: 'COMPLETE',
          try_number: 1,
        })
        .execute();
      const unknown = await status('?request_id=999999');
      const otherClient = await createUser(app.db);
      const clinician = await createUser(app.db, { roles: ['API access', 'TaskViewClinical'] });
      for (const other of [otherClient, clinician]) {
        const response = await app.request(`${STATUS_PATH}?request_id=${id}`, {
          headers: { authorization: other.authorization },
        });
        assert.equal(response.status, 404, other.username);
        assert.equal(response.headers.get('cache-control'), 'no-store');
        const body = await response.text();
        assert.equal(body, await unknown.clone().text());
        assert.doesNotMatch(body, /matched|patient 7/);
      }
    });

    it('shows a request to its submitter and to a request admin', async () => {
      const id = await queueOne();
      const admin = await createUser(app.db, { roles: ['API access', 'Edit Payload Processor'] });
      for (const reader of [user, admin]) {
        const response = await app.request(`${STATUS_PATH}?request_id=${id}`, {
          headers: { authorization: reader.authorization },
        });
        assert.equal(response.status, 200, reader.username);
        const body = (await response.json()) as { request_id: number; routines: unknown[] };
        assert.equal(body.request_id, id);
        assert.equal(body.routines.length, 1);
      }
    });

    it('answers 422 for a missing or non-integer request id', async () => {
      for (const query of [
        '?request_id=abc',
        '?request_id=1.5',
        '?request_id=-1',
        '?request_id=99999999999',
        '?request_id=1&request_id=2',
      ]) {
        const response = await status(query);
        assert.equal(response.status, 422, query);
        assert.deepEqual(await response.json(), {
          success: 0,
          message: { request_id: 'Request Id must be an integer.' },
        });
      }
      for (const query of ['', '?request_id=']) {
        const response = await status(query);
        assert.equal(response.status, 422, query);
        assert.deepEqual(await response.json(), {
          success: 0,
          message: { request_id: 'Request Id cannot be blank.' },
        });
      }
    });

    it('answers 405 for other methods', async () => {
      const response = await app.request(`${STATUS_PATH}?request_id=1`, {
        method: 'POST',
        headers: { authorization: user.authorization },
      });
      assert.equal(response.status, 405);
      assert.equal(response.headers.get('allow'), 'GET, HEAD');
    });

    describe('authentication', () => {
      itEnforcesBasicAuth(() => app, {
        method: 'GET',
        path: `${STATUS_PATH}?request_id=1`,
        operation: 'OprnApi',
      });
    });
  });
});
