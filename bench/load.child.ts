/**
 * A load generator in a process of its own, as an outside client is: runs autocannon with the options in
 * the JSON file named by its argument ({@link ChildLoadSpec}) through `runLoad` (bench/lib.ts) and prints
 * the result as one JSON line on stdout. Started by `runLoadInChild`, so that the bench process (which
 * polls the database meanwhile) shares no CPU time slice with the client's sockets.
 */
import { readFileSync } from 'node:fs';
import type { ChildLoadSpec } from './lib.ts';
import { runLoad } from './lib.ts';

const spec = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as ChildLoadSpec;
let next = spec.bodyStart ?? 0;
const template = spec.bodyTemplate;
const patients = spec.bodyPatients ?? 1;
const bodyOf = (i: number) =>
  template!.replaceAll('{i}', String(i)).replaceAll('{p}', String((i % patients) + 1).padStart(7, '0'));
const result = await runLoad({
  url: spec.url,
  method: spec.method,
  headers: spec.headers,
  connections: spec.connections,
  durationSeconds: spec.durationSeconds,
  ...(spec.warmupSeconds === undefined ? {} : { warmupSeconds: spec.warmupSeconds }),
  ...(spec.samplePid === undefined ? {} : { samplePid: spec.samplePid }),
  ...(template === undefined
    ? {}
    : {
        // Every request its own body: `{i}` becomes a counter shared by all connections.
        requests: [
          {
            setupRequest: (request: Record<string, unknown>) => ({
              ...request,
              body: bodyOf(next++),
            }),
          },
        ],
      }),
});
process.stdout.write(`${JSON.stringify(result)}\n`);
