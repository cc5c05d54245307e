import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { after, before, describe, it } from 'node:test';
import {
  addRoutineRow,
  createRequestType,
  createRoutineName,
  routinesOf,
} from '../../../../test/factories-queue.ts';
import type { TestDatabase } from '../../../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../../../test/harness.ts';
import { enqueueRequest } from '../intake/enqueue.ts';
import { runCli } from '../../../../test/run-cli.ts';
import { until } from '../../../../test/until.ts';

const BLOCKING_WORKER = new URL('../../../../test/queue-blocking-worker.ts', import.meta.url).pathname;

forEachDialect((dialect) => {
  describe(`npm run cli -- queue (${dialect})`, () => {
    let t: TestDatabase;
    let requestId: number;
    let queue: string;
    let names: string[];

    before(async () => {
      t = await createTestDatabase(dialect);
      names = [await createRoutineName(t.db), await createRoutineName(t.db), await createRoutineName(t.db)];
      const type = await createRequestType(t.db, { routineName: names[0] });
      queue = type.queue;
      requestId = (await enqueueRequest(t.database, { requestType: type.requestType })).requestId;
      const [first] = await routinesOf(t.db, requestId);
      await t.db
        .updateTable('request_routine')
        .set({ status: 'FAILED', try_count: 20 })
        .where('id', '=', first!.id)
        .execute();
      await addRoutineRow(t.db, {
        requestId,
        name: names[1]!,
        queue,
        sequence: 20,
        status: 'RETRY',
        tryCount: 3,
        nextTry: '2030-01-01 00:00:00',
      });
      await addRoutineRow(t.db, { requestId, name: names[2]!, queue, sequence: 30, status: 'COMPLETE' });
    });
    after(async () => {
      await t.drop();
    });

    it('lists routines, filtered by status', async () => {
      const all = await runCli(t.env, ['queue', 'list']);
      assert.equal(all.status, 0, all.stderr);
      const lines = all.stdout.trim().split('\n');
      assert.match(lines[0]!, /^request\troutine_id\troutine\tstatus/);
      assert.equal(lines.filter((l) => l.startsWith(`${requestId}\t`)).length, 3);
      const failed = await runCli(t.env, ['queue', 'list', '--status', 'failed']);
      assert.equal(failed.status, 0, failed.stderr);
      const rows = failed.stdout.trim().split('\n').slice(1);
      assert.equal(rows.length, 1);
      assert.match(
        rows[0]!,
        new RegExp(`^${requestId}\\t\\d+\\t${names[0]}\\tFAILED\\t20\\t10\\t-\\t${queue}`),
      );
    });

    it('show prints the request status and each routine with its last execution log, redacted', async () => {
      const [first] = await routinesOf(t.db, requestId);
      await t.db
        .insertInto('request_routine_execution')
        .values({
          request_routine_id: first!.id,
          log_text: 'worker w:1\nTypeError: value "Jane Smith" is odd\n    at run (routine.ts:1:1)',
          execution_date_time: '2030-01-01 00:00:00',
          status: 'FAILED',
          try_number: 20,
        })
        .execute();
      const result = await runCli(t.env, ['queue', 'show', String(requestId)]);
      assert.equal(result.status, 0, result.stderr);
      const lines = result.stdout.split('\n').filter((line) => line !== '');
      assert.deepEqual(lines, [
        `Request ${requestId}: FAILED`,
        `10\t${names[0]}\tFAILED\t20 tries`,
        '  worker w:1',
        '  TypeError (message withheld; see the execution log)',
        `20\t${names[1]}\tRETRY\t3 tries, next try 2030-01-01 00:00:00`,
        '  (not run yet)',
        `30\t${names[2]}\tCOMPLETE\t0 tries`,
        '  (not run yet)',
      ]);
      const unknown = await runCli(t.env, ['queue', 'show', '999999']);
      assert.equal(unknown.status, 1);
      assert.match(unknown.stderr, /No request 999999/);
      assert.equal((await runCli(t.env, ['queue', 'show', 'abc'])).status, 2);
    });

    it('refuses a bad status or request id with exit status 2', async () => {
      assert.equal((await runCli(t.env, ['queue', 'list', '--status', 'DONE'])).status, 2);
      assert.equal((await runCli(t.env, ['queue', 'retry', 'abc'])).status, 2);
      const unknown = await runCli(t.env, ['queue', 'void', '999999']);
      assert.equal(unknown.status, 1);
      assert.match(unknown.stderr, /No request 999999/);
    });

    it('retry puts FAILED routines back to NEW with no tries and no next try, and leaves a RETRY routine to its next try', async () => {
      const result = await runCli(t.env, ['queue', 'retry', String(requestId)]);
      assert.equal(result.status, 0, result.stderr);
      assert.match(result.stdout, /1 routine\(s\) back to NEW/);
      assert.deepEqual(
        (await routinesOf(t.db, requestId)).map((r) => [r.status, r.try_count, r.next_try_date_time]),
        [
          ['NEW', 0, null],
          ['RETRY', 3, '2030-01-01 00:00:00'],
          ['COMPLETE', 0, null],
        ],
      );
    });

    it('void sets NEW and RETRY routines to VOID and leaves the others', async () => {
      const result = await runCli(t.env, ['queue', 'void', String(requestId)]);
      assert.equal(result.status, 0, result.stderr);
      assert.match(result.stdout, /2 routine\(s\) voided/);
      assert.deepEqual(
        (await routinesOf(t.db, requestId)).map((r) => r.status),
        ['VOID', 'VOID', 'COMPLETE'],
      );
    });

    it('retry and void refuse a request a worker is running, and change nothing', async () => {
      // The worker runs the request's first routine (NEW) and never finishes it; a later routine FAILED.
      const blocking = await createRoutineName(t.db);
      const type = await createRequestType(t.db, { routineName: blocking });
      const held = (await enqueueRequest(t.database, { requestType: type.requestType })).requestId;
      await addRoutineRow(t.db, {
        requestId: held,
        name: names[0]!,
        queue: type.queue,
        sequence: 20,
        status: 'FAILED',
        tryCount: 5,
      });
      const child = spawn(process.execPath, ['--disable-warning=ExperimentalWarning', BLOCKING_WORKER], {
        env: { ...process.env, ...t.env, QUEUE: type.queue, ROUTINE: blocking },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      try {
        let output = '';
        child.stdout.setEncoding('utf8');
        await new Promise<void>((resolve, reject) => {
          child.stdout.on('data', (chunk: string) => {
            output += chunk;
            if (output.includes('BLOCKED')) resolve();
          });
          child.once('exit', () => reject(new Error(`worker exited early: ${output}`)));
        });
        const before = await routinesOf(t.db, held);
        // With row locks the request's rows are skipped at once ("being run by a worker"); with a single
        // writer the worker's open write transaction holds the database until the busy timeout.
        // (each command then waits that long twice, for its action and for its audit row: void is left
        // to the engines with row locks).
        const hasRowLocks = t.database.dialect.hasRowLocks;
        for (const command of hasRowLocks ? ['retry', 'void'] : ['retry']) {
          const result = await runCli(t.env, ['queue', command, String(held)]);
          assert.equal(result.status, 1, `${command}: ${result.stdout}`);
          assert.match(
            result.stderr,
            hasRowLocks ? /being run by a worker: nothing was changed/ : /could not be (locked|written)/,
          );
        }
        assert.deepEqual(await routinesOf(t.db, held), before);
      } finally {
        child.kill('SIGKILL');
        await once(child, 'exit');
      }
      // Once the worker is gone (PostgreSQL and MariaDB end its session when they see the closed
      // socket), the same retry applies.
      let after = await runCli(t.env, ['queue', 'retry', String(held)]);
      await until(async () => {
        if (after.status !== 0) after = await runCli(t.env, ['queue', 'retry', String(held)]);
        return after.status === 0;
      });
      assert.match(after.stdout, /1 routine\(s\) back to NEW/);
      assert.deepEqual(
        (await routinesOf(t.db, held)).map((r) => [r.status, r.try_count]),
        [
          ['NEW', 0],
          ['NEW', 0],
        ],
      );
    });
  });
});
