/**
 * Preloaded into a server under test (`NODE_OPTIONS=--import=<this file>`) by benches that report what its
 * memory is: on SIGUSR2 it appends one JSON line to `BENCH_MEMORY_PROBE_FILE` with
 * `process.memoryUsage()`, V8's heap statistics (malloced memory, code, each heap space) and the npm packages whose
 * CommonJS modules are loaded (with their module counts). It adds a signal handler and nothing else, so
 * the process measured is the server as `npm start` runs it. Plain JavaScript, and inert in worker
 * threads (which inherit `NODE_OPTIONS`): a `.ts` preload would start a type stripper in every thread.
 */
import { appendFileSync } from 'node:fs';
import process from 'node:process';
import { createRequire } from 'node:module';
import { isMainThread } from 'node:worker_threads';
import { getHeapCodeStatistics, getHeapSpaceStatistics, getHeapStatistics } from 'node:v8';

const file = process.env.BENCH_MEMORY_PROBE_FILE;
const require = createRequire(import.meta.url);

/** Loaded CommonJS modules per npm package (`pg`, `@img/sharp-linux-x64`, ...). */
/** @returns {Record<string, number>} */
function loadedPackages() {
  /** @type {Record<string, number>} */
  const counts = {};
  for (const key of Object.keys(require.cache)) {
    const match = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(key.slice(key.lastIndexOf('node_modules/')));
    if (match !== null) counts[match[1]] = (counts[match[1]] ?? 0) + 1;
  }
  return counts;
}

if (isMainThread && file !== undefined && file !== '') {
  process.on('SIGUSR2', () => {
    // Diagnosis only: with BENCH_MEMORY_PROBE_GC=1 (and --expose-gc), a full collection before the reading.
    if (process.env.BENCH_MEMORY_PROBE_GC === '1' && typeof globalThis.gc === 'function') globalThis.gc();
    const heap = getHeapStatistics();
    const code = getHeapCodeStatistics();
    const sample = {
      at: Date.now(),
      memory: process.memoryUsage(),
      mallocedBytes: heap.malloced_memory,
      bytecodeAndMetadataBytes: code.bytecode_and_metadata_size,
      /** Size and use of each V8 heap space (new_space is the young generation), in bytes. */
      spaces: Object.fromEntries(
        getHeapSpaceStatistics().map((s) => [s.space_name, { size: s.space_size, used: s.space_used_size }]),
      ),
      packages: loadedPackages(),
    };
    appendFileSync(file, `${JSON.stringify(sample)}\n`);
  });
}
