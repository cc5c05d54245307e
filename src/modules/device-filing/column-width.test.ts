import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ColumnWidthError, fitColumn, fitDecimal } from './column-width.ts';

const UTF8MB3 = 0xffff;
const UTF8MB4 = 0x10ffff;

function fit(value: string, width: number, onOverflow: 'cut' | 'refuse', maxCodePoint = UTF8MB3) {
  const log: string[] = [];
  const fitted = fitColumn(
    value,
    { column: 't.c', width, onOverflow },
    { maxCodePoint, log: (line) => log.push(line) },
  );
  return { fitted, log };
}

describe('fitColumn', () => {
  it('replaces a character beyond utf8mb3 by U+FFFD and logs the column, never the value', () => {
    assert.deepEqual(fit('Room \u{1F441} 7', 64, 'cut'), {
      fitted: 'Room \uFFFD 7',
      log: ['t.c: characters the database cannot store replaced by U+FFFD'],
    });
    assert.deepEqual(fit('Room \u{1F441} 7', 64, 'cut', UTF8MB4), { fitted: 'Room \u{1F441} 7', log: [] });
  });

  it('counts characters, not UTF-16 units, and never cuts a character in two', () => {
    // Four emoji are eight UTF-16 units: within a width of four characters on utf8mb4.
    assert.equal(fit('\u{1F600}'.repeat(4), 4, 'refuse', UTF8MB4).fitted, '\u{1F600}'.repeat(4));
    const cut = fit('\u{1F600}'.repeat(5), 4, 'cut', UTF8MB4);
    assert.equal(cut.fitted, '\u{1F600}'.repeat(4));
    assert.deepEqual(cut.log, ["t.c: 5 characters cut to the column's 4"]);
  });

  it('refuses an identifier longer than its column with the lengths only', () => {
    assert.throws(
      () => fit(`1.2.${'3'.repeat(80)}`, 64, 'refuse'),
      (error: unknown) =>
        error instanceof ColumnWidthError &&
        error.message === "t.c would be 84 characters, longer than the column's 64",
    );
  });
});

describe('fitDecimal', () => {
  const column = { column: 't.d', precision: 6, scale: 2 };

  it("rounds to the column's scale and takes the ends of its range", () => {
    assert.equal(fitDecimal(23.456, column), 23.46);
    assert.equal(fitDecimal(9999.99, column), 9999.99);
    assert.equal(fitDecimal(-9999.994, column), -9999.99);
    assert.equal(fitDecimal(118.4, { column: 't.a', precision: 8, scale: 4 }), 118.4);
  });

  it('refuses a value the column cannot hold (also once rounded), and a value that is not a number', () => {
    for (const value of [10_000, 9999.995, -123456.5, Number.NaN, Number.POSITIVE_INFINITY]) {
      assert.throws(
        () => fitDecimal(value, column),
        (error: unknown) =>
          error instanceof ColumnWidthError &&
          error.message === "t.d would be a value outside the column's range (-9999.99 to 9999.99)",
        String(value),
      );
    }
    assert.throws(
      () => fitDecimal(10_000, { column: 't.k1_axis', precision: 5, scale: 1 }),
      ColumnWidthError,
    );
  });
});
