/**
 * A full garbage collection once the process goes idle after heavy work. V8 collects its old generation
 * when the heap grows, not when the process stops working: after a burst of large uploads, DICOM
 * instances or downloads, the Buffers those requests dropped (hundreds of MiB, outside the JavaScript heap)
 * stay allocated until the next busy period. Every {@link IdleCollectorOptions.intervalMs} the collector
 * reads the process's memory (`process.memoryUsage()`) and the event loop's utilization over the
 * interval; when the loop was nearly idle and the heap and external memory have grown by
 * {@link IdleCollectorOptions.growthBytes} since the last collection (or the lowest reading since), it
 * runs one full collection, and the freed memory goes back to the system. A busy process is never
 * paused by it, and an idle process whose memory is live (a cache) is collected once, not again.
 */
import { performance } from 'node:perf_hooks';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

const MiB = 1024 * 1024;

export interface IdleCollectorOptions {
  /** How often the memory and the loop's utilization are read; default 5 s. */
  readonly intervalMs?: number;
  /** Growth of heap plus external memory that makes an idle process collect; default 32 MiB. */
  readonly growthBytes?: number;
  /** Event loop utilization (0-1) over the interval below which the process counts as idle; default 0.05. */
  readonly maxUtilization?: number;
}

export interface IdleCollector {
  /** One check (what the timer runs); true when it collected. */
  tick(): boolean;
  stop(): void;
}

/**
 * V8's full collection: `globalThis.gc` under `--expose-gc`, otherwise the same function taken from a
 * context created after turning the flag on (the flag only adds the function to new contexts).
 */
export function fullCollection(): () => void {
  const exposed = (globalThis as { gc?: unknown }).gc;
  if (typeof exposed === 'function') return exposed as () => void;
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

/** What the collector watches: the V8 heap and the memory of Buffers and other objects outside it. */
function heldBytes(usage: NodeJS.MemoryUsage): number {
  // `arrayBuffers` is part of `external`, except for buffers moved to worker threads, counted in it only.
  return usage.heapTotal + Math.max(usage.external, usage.arrayBuffers);
}

/** Starts the collector on an unref'd timer: it never keeps the process alive. */
export function startIdleCollector(options: IdleCollectorOptions = {}): IdleCollector {
  const collector = createIdleCollector(options);
  const timer = setInterval(() => collector.tick(), options.intervalMs ?? 5000);
  timer.unref();
  return {
    tick: () => collector.tick(),
    stop: () => clearInterval(timer),
  };
}

/** The collector without its timer: each `tick()` measures since the previous one. */
export function createIdleCollector(options: IdleCollectorOptions = {}): IdleCollector {
  const growthBytes = options.growthBytes ?? 32 * MiB;
  const maxUtilization = options.maxUtilization ?? 0.05;
  const collect = fullCollection();
  let lastLoop = performance.eventLoopUtilization();
  let baseline = heldBytes(process.memoryUsage());
  return {
    tick() {
      const loop = performance.eventLoopUtilization();
      const utilization = performance.eventLoopUtilization(loop, lastLoop).utilization;
      lastLoop = loop;
      const held = heldBytes(process.memoryUsage());
      baseline = Math.min(baseline, held);
      if (utilization > maxUtilization || held - baseline < growthBytes) return false;
      collect();
      baseline = heldBytes(process.memoryUsage());
      return true;
    },
    stop() {},
  };
}
