import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import type { TestRequestType } from '../../../../test/factories-queue.ts';
import { addRoutineRow, createRequestType } from '../../../../test/factories-queue.ts';
import type { TestDatabase } from '../../../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../../../test/harness.ts';
import type { RoutineStatus } from '../../../db/schema.ts';
import type { OverallFilter } from '../admin/request-list.ts';
import { listRequests } from '../admin/request-list.ts';
import { enqueueRequest } from '../intake/enqueue.ts';
import type { OverallStatus } from './overall-status.ts';
import { overallStateOf, overallStatus } from './overall-status.ts';

const STATUSES: readonly RoutineStatus[] = ['NEW', 'RETRY', 'COMPLETE', 'FAILED', 'VOID', 'PAUSE'];
const FILTERS: Readonly<Record<Exclude<OverallFilter, 'waiting'>, OverallStatus>> = {
  complete: 'COMPLETE',
  incomplete: 'RUNNING',
  failed: 'FAILED',
};

/** A request's routines as generated: a status and a sequence each, in insertion (id) order. */
type GeneratedRoutine = { status: RoutineStatus; sequence: number };

const routinesArbitrary = fc.array(
  fc.record({ status: fc.constantFrom(...STATUSES), sequence: fc.integer({ min: 1, max: 90 }) }),
  { maxLength: 5 },
);

describe('overall status rule', () => {
  it('FAILED beats a pending routine before it; VOID and PAUSE count as done', () => {
    assert.equal(overallStatus(['NEW', 'FAILED']), 'FAILED');
    assert.equal(overallStatus(['COMPLETE', 'RETRY', 'VOID']), 'RUNNING');
    assert.equal(overallStatus(['COMPLETE', 'VOID', 'PAUSE']), 'COMPLETE');
    assert.equal(overallStatus([]), 'COMPLETE');
    assert.deepEqual(
      overallStateOf([
        { status: 'NEW', routine_name: 'A', try_count: 0 },
        { status: 'FAILED', routine_name: 'B', try_count: 5 },
        { status: 'FAILED', routine_name: 'C', try_count: 1 },
      ]),
      { status: 'FAILED', routineName: 'B', tryCount: 5 },
    );
  });
});

forEachDialect((dialect) => {
  describe(`overall status: the request list's filters agree with the rule (${dialect})`, () => {
    let t: TestDatabase;
    let type: TestRequestType;

    before(async () => {
      t = await createTestDatabase(dialect);
      type = await createRequestType(t.db);
    });
    after(async () => {
      await t.drop();
    });

    /** Inserts a request with `routines` (none: its first routine removed); returns its id. */
    async function insertRequest(routines: readonly GeneratedRoutine[]): Promise<number> {
      const { requestId } = await enqueueRequest(t.database, { requestType: type.requestType });
      await t.db.deleteFrom('request_routine').where('request_id', '=', requestId).execute();
      for (const [i, routine] of routines.entries()) {
        await addRoutineRow(t.db, {
          requestId,
          name: type.routineName,
          queue: type.queue,
          sequence: routine.sequence,
          status: routine.status,
          tryCount: i,
        });
      }
      return requestId;
    }

    it('lists under each overall filter exactly the requests the rule gives that status', async () => {
      await fc.assert(
        fc.asyncProperty(fc.array(routinesArbitrary, { minLength: 1, maxLength: 6 }), async (requests) => {
          const expected = new Map<number, OverallStatus>();
          for (const routines of requests)
            expected.set(await insertRequest(routines), overallStatus(routines.map((r) => r.status)));
          for (const [filter, status] of Object.entries(FILTERS) as [OverallFilter, OverallStatus][]) {
            const page = await listRequests(
              t.db,
              { overall: filter, requestType: type.requestType },
              { pageSize: 10_000, budgetMs: 0 },
            );
            const listed = page.rows.filter((row) => expected.has(row.id));
            assert.deepEqual(
              listed.map((row) => row.id).sort((a, b) => a - b),
              [...expected].filter(([, s]) => s === status).map(([id]) => id),
              `filter ${filter}`,
            );
            for (const row of listed) assert.equal(row.overall.status, status);
          }
        }),
        { numRuns: 15 },
      );
    });
  });
});
