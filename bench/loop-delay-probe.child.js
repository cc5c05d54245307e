/**
 * Preloaded into a server under test (`NODE_OPTIONS=--import=<this file>`) by benches that report how long
 * its event loop stalls: `monitorEventLoopDelay` samples the main thread's loop every
 * `BENCH_LOOP_RESOLUTION_MS` (default 5); on SIGUSR2 it appends one JSON line to `BENCH_LOOP_PROBE_FILE`
 * with the delay since the previous signal (p50, p99, max, mean in ms, the resolution already taken off,
 * and the sample count) and the garbage collections of that time (count, total and longest pause in ms,
 * all and major (mark-compact) ones, from `PerformanceObserver` `gc` entries), then starts over. A bench sends one signal before a measured run and
 * one after it. It adds a timer and a signal handler and nothing else (it may share SIGUSR2 with
 * `memory-probe.child.js`: each writes its own file). Plain JavaScript, inert in worker threads.
 */
import { appendFileSync } from 'node:fs';
import process from 'node:process';
import { PerformanceObserver, constants, monitorEventLoopDelay } from 'node:perf_hooks';
import { isMainThread } from 'node:worker_threads';

const file = process.env.BENCH_LOOP_PROBE_FILE;
const resolutionMs = Number(process.env.BENCH_LOOP_RESOLUTION_MS ?? 5);

if (isMainThread && file !== undefined && file !== '') {
  const histogram = monitorEventLoopDelay({ resolution: resolutionMs });
  histogram.enable();
  // The histogram holds the time between two samples, which is the resolution when nothing stalls.
  const ms = (/** @type {number} */ ns) => Math.max(0, ns / 1e6 - resolutionMs);
  const gc = { count: 0, totalMs: 0, maxMs: 0, majorCount: 0, majorTotalMs: 0, majorMaxMs: 0 };
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      gc.count += 1;
      gc.totalMs += entry.duration;
      gc.maxMs = Math.max(gc.maxMs, entry.duration);
      const detail = /** @type {{ kind?: number } | undefined} */ (entry.detail);
      if (detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) {
        gc.majorCount += 1;
        gc.majorTotalMs += entry.duration;
        gc.majorMaxMs = Math.max(gc.majorMaxMs, entry.duration);
      }
    }
  }).observe({ entryTypes: ['gc'] });
  process.on('SIGUSR2', () => {
    const sample = {
      at: Date.now(),
      resolutionMs,
      count: histogram.count,
      p50Ms: histogram.count === 0 ? 0 : ms(histogram.percentile(50)),
      p99Ms: histogram.count === 0 ? 0 : ms(histogram.percentile(99)),
      maxMs: histogram.count === 0 ? 0 : ms(histogram.max),
      meanMs: histogram.count === 0 ? 0 : ms(histogram.mean),
      gcCount: gc.count,
      gcTotalMs: gc.totalMs,
      gcMaxMs: gc.maxMs,
      gcMajorCount: gc.majorCount,
      gcMajorTotalMs: gc.majorTotalMs,
      gcMajorMaxMs: gc.majorMaxMs,
    };
    histogram.reset();
    Object.assign(gc, { count: 0, totalMs: 0, maxMs: 0, majorCount: 0, majorTotalMs: 0, majorMaxMs: 0 });
    appendFileSync(file, `${JSON.stringify(sample)}\n`);
  });
}
