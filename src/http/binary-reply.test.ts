import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatHttpDate, parseEntityTagList, parseHttpDate } from './binary-reply.ts';

describe('parseHttpDate', () => {
  const expected = Date.UTC(1994, 10, 6, 8, 49, 37);

  it('reads the three forms of RFC 9110 5.6.7', () => {
    assert.equal(parseHttpDate('Sun, 06 Nov 1994 08:49:37 GMT')?.getTime(), expected);
    assert.equal(parseHttpDate('Sunday, 06-Nov-94 08:49:37 GMT')?.getTime(), expected);
    assert.equal(parseHttpDate('Sun Nov  6 08:49:37 1994')?.getTime(), expected);
  });

  it('puts a two-digit year more than 50 years ahead in the past century', () => {
    const thisYear = new Date().getUTCFullYear();
    const ahead = (thisYear + 60) % 100;
    const parsed = parseHttpDate(`Monday, 01-Jan-${String(ahead).padStart(2, '0')} 00:00:00 GMT`);
    assert.equal(parsed?.getUTCFullYear(), thisYear + 60 - 100);
  });

  it('rejects anything else, including impossible dates and other zones', () => {
    for (const value of [
      '',
      'garbage',
      'Sun, 06 Nov 1994 08:49:37 UTC',
      'Sun, 6 Nov 1994 08:49:37 GMT',
      'Sun, 31 Feb 1994 08:49:37 GMT',
      'Sun, 06 Nov 1994 24:00:00 GMT',
      '1994-11-06T08:49:37Z',
      'Sun, 06 Nov 1994 08:49:37 GMT\r\nX: y',
    ])
      assert.equal(parseHttpDate(value), undefined, value);
  });

  it('round-trips with formatHttpDate', () => {
    const date = new Date(expected);
    assert.equal(formatHttpDate(date), 'Sun, 06 Nov 1994 08:49:37 GMT');
    assert.equal(parseHttpDate(formatHttpDate(date))?.getTime(), expected);
  });
});

describe('parseEntityTagList', () => {
  it('reads *, single tags, weak tags and lists with empty elements', () => {
    assert.equal(parseEntityTagList(' * '), '*');
    assert.deepEqual(parseEntityTagList('"a"'), [{ tag: '"a"', isWeak: false }]);
    assert.deepEqual(parseEntityTagList('W/"a", "b" ,, "c"'), [
      { tag: '"a"', isWeak: true },
      { tag: '"b"', isWeak: false },
      { tag: '"c"', isWeak: false },
    ]);
  });

  it('rejects malformed values', () => {
    for (const value of ['', 'a', '"a', 'W/', 'W/a', '"a" "b"', '"a"x', '"a\\"b"', '*, "a"'])
      assert.equal(parseEntityTagList(value), undefined, value);
  });
});
