/**
 * Child process of the worker crash test: runs one queue step whose routine (`ROUTINE` on `QUEUE`) writes
 * a `request_details` row, prints `BLOCKED` and then never finishes, so that the parent can SIGKILL the
 * process in the middle of the routine's transaction.
 */
import { loadConfig } from '../src/config.ts';
import { openDatabase } from '../src/db/database.ts';
import { createQueueEngine } from '../src/modules/request-queue/index.ts';
import { createRoutineCatalog, defineRoutine } from '../src/modules/filing/index.ts';

const config = loadConfig(process.env);
const routine = process.env.ROUTINE!;
const database = await openDatabase(config.database, { poolSize: 2 });
const engine = createQueueEngine({
  database,
  config,
  catalog: createRoutineCatalog([
    defineRoutine({
      name: routine,
      timeoutMs: 600_000,
      retry: 'backoff',
      run: async (ctx) => {
        await ctx.trx
          .insertInto('request_details')
          .values({ request_id: ctx.routine.request_id, name: 'partial', value: 'child' })
          .execute();
        process.stdout.write('BLOCKED\n');
        await new Promise(() => {});
      },
    }),
  ]),
});
await engine.step(process.env.QUEUE);
