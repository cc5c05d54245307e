/**
 * The idle collector (`src/main/idle-collector.ts`): once the event loop is idle after heavy work, memory
 * that requests dropped (Buffers outside the JavaScript heap) is collected and given back; a busy loop is
 * never paused for it, and memory that stays live is collected once, not at every check. That the
 * collection ran is seen as V8 reports it (a major collection inside the check, `gc` performance
 * entries) and through weak references to the dropped Buffers, cleared by it; not by how much memory
 * the process gave back meanwhile (V8 frees the Buffers' memory on background threads, later on a
 * loaded machine).
 */
// test-isolation: process
import assert from 'node:assert/strict';
import type { PerformanceEntry } from 'node:perf_hooks';
import { PerformanceObserver, constants } from 'node:perf_hooks';
import { describe, it } from 'node:test';
import { createIdleCollector } from '../../src/main/idle-collector.ts';
import { until } from '../until.ts';

const MiB = 1024 * 1024;

/** Allocates `mib` MiB of Buffers (each filled, so that its pages are touched) and keeps them in `into`. */
function allocate(mib: number, into: Buffer[] = []): Buffer[] {
  for (let i = 0; i < mib / 4; i += 1) into.push(Buffer.alloc(4 * MiB, i));
  return into;
}

/** Weak references to each Buffer of `buffers`, which keep none of them alive. */
const weakly = (buffers: Buffer[]): WeakRef<Buffer>[] => buffers.map((buffer) => new WeakRef(buffer));

/** How many of `refs` still reach their Buffer. */
const alive = (refs: WeakRef<Buffer>[]): number => refs.filter((ref) => ref.deref() !== undefined).length;

/**
 * Runs `check` (a collector's tick) and answers what it returned, after asserting that V8 ran a major
 * (full) collection while it ran: the `gc` performance entries are delivered after the fact, so the
 * answer waits for that collection's entry.
 */
async function collectsDuring(check: () => boolean): Promise<boolean> {
  const majors: PerformanceEntry[] = [];
  const observer = new PerformanceObserver((list) => {
    for (const entry of list.getEntries())
      // A `gc` entry's detail names the kind of collection (Node's PerformanceEntry type leaves it out).
      if (
        (entry as { detail?: { kind?: number } | null }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR
      )
        majors.push(entry);
  });
  observer.observe({ entryTypes: ['gc'] });
  try {
    const from = performance.now();
    const result = check();
    const to = performance.now();
    const inCheck = () => majors.filter((entry) => entry.startTime >= from && entry.startTime <= to);
    if (result) await until(() => inCheck().length > 0, { what: 'the major collection of the check' });
    return result;
  } finally {
    observer.disconnect();
  }
}

/**
 * Lets the event loop sit idle for a moment: at least 1.5 s, and three times the work since the previous
 * check (`since`, from `performance.now()`), so that the loop's utilization over both stays under a half
 * however slowly a loaded machine ran that work.
 */
const idle = (since = performance.now()) =>
  new Promise((resolve) => setTimeout(resolve, Math.max(1500, 3 * (performance.now() - since))));

/** Keeps the event loop busy (synchronously) for a moment: a check right after finds it fully used. */
function busy(): void {
  const until = performance.now() + 300;
  while (performance.now() < until);
}

describe('idle collector', () => {
  it('collects dropped Buffers once the loop is idle, and not again while nothing new is dropped', async () => {
    const collector = createIdleCollector({ growthBytes: 32 * MiB, maxUtilization: 0.5 });
    const workStart = performance.now();
    let held: Buffer[] | undefined = allocate(96);
    const refs = weakly(held);
    assert.equal(refs.length, 24);
    held = undefined;
    await idle(workStart);
    assert.equal(await collectsDuring(() => collector.tick()), true, 'collected');
    assert.equal(alive(refs), 0, 'the full collection took every dropped Buffer');
    await idle();
    assert.equal(collector.tick(), false, 'nothing new to collect');
  });

  it('does not collect while the loop is busy, and collects live memory once only', async () => {
    const collector = createIdleCollector({ growthBytes: 32 * MiB, maxUtilization: 0.5 });
    let dropped: Buffer[] | undefined = allocate(64);
    const refs = weakly(dropped);
    dropped = undefined;
    busy();
    assert.equal(collector.tick(), false, 'a busy loop is not paused');
    const workStart = performance.now();
    const live = allocate(64);
    await idle(workStart);
    assert.equal(await collectsDuring(() => collector.tick()), true, 'idle now: collected');
    assert.equal(alive(refs), 0, 'the dropped Buffers went with that collection');
    await idle();
    assert.equal(collector.tick(), false, 'the live 64 MiB are not collected again');
    assert.equal(live.length, 16);
  });
});
