import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { itEnforcesBasicAuth } from '../../../test/auth-cases.ts';
import type { TestUser } from '../../../test/factories.ts';
import { createUser } from '../../../test/factories.ts';
import type { TestRequestType } from '../../../test/factories-queue.ts';
import { STATUS_PATH, createRequestType, submitToQueue } from '../../../test/factories-queue.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import type { RoutineStatus } from '../../db/schema.ts';
import { overallStatus } from './status.ts';

describe('overallStatus (reference 9.7)', () => {
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
        routines: [
          {
            routine_name: type.routineName,
            status: 'NEW',
            try_count: 0,
            execute_sequence: 10,
            next_try_date_time: null,
          },
        ],
      });
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
