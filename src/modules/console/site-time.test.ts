import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createSiteTime } from './site-time.ts';

describe('site time (TIME_ZONE)', () => {
  const london = createSiteTime('Europe/London');

  it('shows stored UTC times as the wall-clock time of the zone, with its name', () => {
    assert.equal(london.format('2026-07-01 12:00:00'), '2026-07-01 13:00:00 BST');
    assert.equal(london.format('2026-01-01 12:00:00'), '2026-01-01 12:00:00 GMT');
    assert.equal(
      createSiteTime('Pacific/Auckland').format('2026-07-01 12:00:00'),
      '2026-07-02 00:00:00 GMT+12',
    );
    assert.equal(london.format(null), '');
  });

  it('reads datetime-local values of the zone back as stored UTC text, on both sides of a clock change', () => {
    assert.equal(london.parseLocal('2026-07-01T13:00'), '2026-07-01 12:00:00');
    assert.equal(london.parseLocal('2026-01-01T12:00'), '2026-01-01 12:00:00');
    assert.equal(london.parseLocal('2026-03-29T00:30'), '2026-03-29 00:30:00');
    assert.equal(london.parseLocal('2026-03-29T03:00'), '2026-03-29 02:00:00');
    assert.equal(london.parseLocal('2026-06-15'), '2026-06-14 23:00:00');
    assert.equal(london.toLocalInput('2026-07-01 12:00:00'), '2026-07-01T13:00');
  });

  it('refuses values that are not dates and times', () => {
    for (const text of ['', 'yesterday', '2026-02-30T10:00', '2026-13-01', '2026-01-01T24:00', '2026-1-1']) {
      assert.equal(london.parseLocal(text), undefined, text);
    }
  });
});
