/**
 * The idle collector (`src/main/idle-collector.ts`): once the event loop is idle after heavy work, memory
 * that requests dropped (Buffers outside the JavaScript heap) is collected and given back; a busy loop is
 * never paused for it, and memory that stays live is collected once, not at every check.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createIdleCollector } from '../../src/main/idle-collector.ts';

const MiB = 1024 * 1024;

/** Allocates `mib` MiB of Buffers (each filled, so that its pages are touched) and keeps them in `into`. */
function allocate(mib: number, into: Buffer[] = []): Buffer[] {
  for (let i = 0; i < mib / 4; i += 1) into.push(Buffer.alloc(4 * MiB, i));
  return into;
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
    assert.ok(held.length > 0);
    held = undefined;
    const before = process.memoryUsage().arrayBuffers;
    await idle(workStart);
    assert.equal(collector.tick(), true, 'collected');
    const freed = before - process.memoryUsage().arrayBuffers;
    assert.ok(freed >= 80 * MiB, `freed ${Math.round(freed / MiB)} MiB of the 96 dropped`);
    await idle();
    assert.equal(collector.tick(), false, 'nothing new to collect');
  });

  it('does not collect while the loop is busy, and collects live memory once only', async () => {
    const collector = createIdleCollector({ growthBytes: 32 * MiB, maxUtilization: 0.5 });
    let dropped: Buffer[] | undefined = allocate(64);
    assert.ok(dropped.length > 0);
    dropped = undefined;
    busy();
    assert.equal(collector.tick(), false, 'a busy loop is not paused');
    const workStart = performance.now();
    const live = allocate(64);
    await idle(workStart);
    assert.equal(collector.tick(), true, 'idle now: collected');
    await idle();
    assert.equal(collector.tick(), false, 'the live 64 MiB are not collected again');
    assert.equal(live.length, 16);
  });
});
