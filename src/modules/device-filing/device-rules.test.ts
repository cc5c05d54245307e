/**
 * Device filing's rules of a DICOM header (event date, eye, stored date) on headers read from Part 10
 * files built in memory with dcmjs, through the same reader as `DICOM_SEED`: no dcmtk.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { buildInstance } from '../../../test/dicom-instances.ts';
import { setStoredTimeZone } from '../../db/stored-time.ts';
import { readDicom } from '../dicom/inspect.ts';
import { eventDateOf, lateralityOf, storedEventDate } from './device-header.ts';
import { fallbackProfile } from './profiles.ts';

const LIMITS = { maxElements: 10_000, maxDepth: 8, maxBytes: 16 * 1024 * 1024 };

/** The header `DICOM_SEED` reads from a file with `tags`. */
function headerOf(tags: Record<string, string>) {
  return readDicom(buildInstance({ tags: { StudyDate: '', ...tags } }), LIMITS).header;
}

describe('eventDateOf (headers of files built with dcmjs)', () => {
  it('reads a DT with a negative UTC offset as its wall-clock time, as one with a positive offset', () => {
    for (const sign of ['+', '-']) {
      assert.equal(
        eventDateOf(headerOf({ AcquisitionDateTime: `202403121015${sign}0500` })),
        '2024-03-12 10:15:00',
      );
      assert.equal(
        eventDateOf(headerOf({ AcquisitionDateTime: `2024031210${sign}0500` })),
        '2024-03-12 10:00:00',
      );
      assert.equal(
        eventDateOf(headerOf({ AcquisitionDateTime: `20240312${sign}0500` })),
        '2024-03-12 00:00:00',
      );
      assert.equal(
        eventDateOf(headerOf({ AcquisitionDateTime: `20240312101530.25${sign}0500` })),
        '2024-03-12 10:15:30',
      );
    }
  });

  it('ignores Timezone Offset From UTC of either sign: the time is the device clock', () => {
    for (const offset of ['-0500', '+0530']) {
      assert.equal(
        eventDateOf(headerOf({ StudyDate: '20240312', StudyTime: '101500', TimezoneOffsetFromUTC: offset })),
        '2024-03-12 10:15:00',
      );
    }
  });

  it('passes over an impossible date to the next attribute', () => {
    assert.equal(
      eventDateOf(headerOf({ ContentDate: '20230231', ContentTime: '101500', StudyDate: '20230228' })),
      '2023-02-28 00:00:00',
    );
    assert.equal(eventDateOf(headerOf({ ContentDate: '20230231' })), undefined);
  });
});

describe('lateralityOf (headers of files built with dcmjs)', () => {
  const profile = fallbackProfile('image');
  it('reads R, L, B and OD, OS, OU, Image Laterality first, both eyes when they disagree', () => {
    assert.equal(lateralityOf(headerOf({ ImageLaterality: 'B' }), profile).eye, 'B');
    assert.equal(lateralityOf(headerOf({ Laterality: 'OU' }), profile).eye, 'B');
    assert.equal(lateralityOf(headerOf({ Laterality: 'OD' }), profile).eye, 'R');
    assert.equal(lateralityOf(headerOf({ ImageLaterality: 'L', Laterality: 'R' }), profile).eye, 'B');
    assert.equal(lateralityOf(headerOf({ ImageLaterality: 'U', Laterality: 'OS' }), profile).eye, 'L');
    assert.equal(lateralityOf(headerOf({}), profile).eye, null);
    assert.equal(lateralityOf(headerOf({}), { ...profile, laterality: 'R' }).eye, 'R');
  });
});

describe('storedEventDate across clock changes', () => {
  after(() => setStoredTimeZone('UTC'));

  it('reads a skipped time (spring forward) the gap later, west and east of UTC alike', () => {
    setStoredTimeZone('UTC');
    // 02:30 does not exist: read with the offset before the change, it is 03:30 local time.
    assert.equal(storedEventDate('2023-03-12 02:30:00', 'America/New_York'), '2023-03-12 07:30:00');
    assert.equal(storedEventDate('2023-03-12 02:30:00', 'America/Los_Angeles'), '2023-03-12 10:30:00');
    assert.equal(storedEventDate('2023-03-26 01:30:00', 'Europe/London'), '2023-03-26 01:30:00');
    assert.equal(storedEventDate('2023-03-26 02:30:00', 'Europe/Berlin'), '2023-03-26 01:30:00');
    assert.equal(storedEventDate('2023-10-01 02:30:00', 'Australia/Sydney'), '2023-09-30 16:30:00');
  });

  it('reads a repeated time (fall back) as the earlier instant, west and east of UTC alike', () => {
    setStoredTimeZone('UTC');
    assert.equal(storedEventDate('2023-11-05 01:30:00', 'America/New_York'), '2023-11-05 05:30:00');
    assert.equal(storedEventDate('2023-10-29 01:30:00', 'Europe/London'), '2023-10-29 00:30:00');
    assert.equal(storedEventDate('2023-10-29 02:30:00', 'Europe/Berlin'), '2023-10-29 00:30:00');
    assert.equal(storedEventDate('2023-04-02 02:30:00', 'Australia/Sydney'), '2023-04-01 15:30:00');
  });
});
