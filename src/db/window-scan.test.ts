import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ScanWindow } from './window-scan.ts';
import { scanPage } from './window-scan.ts';

/** Keys 100 down to 1 in windows of `size`, matching the multiples of `every`. */
function source(size: number, every: number) {
  const reads: (number | undefined)[] = [];
  const readWindow = async (
    after: number | undefined,
    limit: number,
  ): Promise<ScanWindow<number, number>> => {
    reads.push(after);
    const start = after === undefined ? 100 : after - 1;
    const keys = [];
    for (let k = start; k >= 1 && keys.length < size; k -= 1) keys.push(k);
    return {
      rows: keys.filter((k) => k % every === 0).slice(0, limit),
      lastKey: keys.at(-1),
      isExhausted: keys.length < size,
    };
  };
  return { reads, readWindow };
}

describe('scanPage (keyset pages in windows)', () => {
  it('fills a page across windows and continues below its last row', async () => {
    const { readWindow } = source(10, 7);
    const page = await scanPage({ pageSize: 3, budgetMs: 0, start: undefined, readWindow, keyOf: (k) => k });
    assert.deepEqual(page, { rows: [98, 91, 84], next: 84, isPartial: false });
    const next = await scanPage({ pageSize: 3, budgetMs: 0, start: page.next, readWindow, keyOf: (k) => k });
    assert.deepEqual(next.rows, [77, 70, 63]);
  });

  it('ends without a next key when the candidates run out', async () => {
    const { readWindow } = source(10, 40);
    assert.deepEqual(
      await scanPage({ pageSize: 5, budgetMs: 0, start: undefined, readWindow, keyOf: (k) => k }),
      {
        rows: [80, 40],
        next: undefined,
        isPartial: false,
      },
    );
  });

  it('stops at the time budget with the key it reached, and goes on from there', async () => {
    const { readWindow, reads } = source(10, 1000);
    let clock = 0;
    const now = () => {
      clock += 40;
      return clock;
    };
    const page = await scanPage({
      pageSize: 5,
      budgetMs: 100,
      start: undefined,
      readWindow,
      keyOf: (k) => k,
      now,
    });
    assert.deepEqual(page, { rows: [], next: 71, isPartial: true });
    assert.deepEqual(reads, [undefined, 91, 81]);
  });
});
