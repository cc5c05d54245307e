/**
 * Biometry reads a DICOM object's date and eye by the same rules as device filing (the DICOM module's
 * `findEventDate` and `headerLateralityOf`): objects built in memory with dcmjs, no dcmtk.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { StudyTags } from '../../../test/biometry-datasets.ts';
import { axialMeasurements, iolMaster500 } from '../../../test/biometry-datasets.ts';
import { eventDateOf, lateralityOf } from '../device-filing/device-header.ts';
import { fallbackProfile } from '../device-filing/profiles.ts';
import { BiometryFileError, readBiometryFile } from './index.ts';
import { sideOf } from './side.ts';

const PATIENT = { id: '7654321', dob: '19600102', sex: 'F' } as const;
const UIDS = { studyUid: '1.2.826.0.1.3680043.8.498.91', sopUid: '1.2.826.0.1.3680043.8.498.92' };

function studyOf(tags: Omit<StudyTags, 'studyUid' | 'sopUid'>) {
  const file = readBiometryFile(axialMeasurements(PATIENT, { ...UIDS, ...tags }));
  if (file.kind === 'other') assert.fail(file.reason);
  return file.study;
}

/** The header of the same tags by keyword, as device filing reads it. */
function headerOf(tags: Omit<StudyTags, 'studyUid' | 'sopUid'>) {
  return {
    AcquisitionDateTime: tags.acquisition,
    ContentDate: tags.contentDate,
    ContentTime: tags.contentTime,
    StudyDate: tags.studyDate,
    StudyTime: tags.studyTime,
  };
}

describe('biometry dates: the rule of device filing', () => {
  const cases: Omit<StudyTags, 'studyUid' | 'sopUid'>[] = [
    { acquisition: '20240301103512.123456+0100' },
    { acquisition: '20240301103512.123456-0500' },
    { acquisition: '202403011035-0500', studyDate: '20240101' },
    { acquisition: '20240301-0500', studyDate: '20240101' },
    { contentDate: '20230231', contentTime: '101500', studyDate: '20230228', studyTime: '090000' },
    { acquisition: '20230231101500', studyDate: '20230301' },
    { contentDate: '20240301', contentTime: '0915', studyDate: '20240101' },
    { studyDate: '20240229', studyTime: '07' },
  ];
  for (const tags of cases) {
    it(`dates ${JSON.stringify(tags)} as device filing does`, () => {
      assert.equal(studyOf(tags).eventDate, eventDateOf(headerOf(tags)));
    });
  }

  it('reads a DT with a negative UTC offset as its own wall-clock time, like a positive one', () => {
    assert.equal(studyOf({ acquisition: '202403011035-0500' }).eventDate, '2024-03-01 10:35:00');
    assert.equal(studyOf({ acquisition: '202403011035+0500' }).eventDate, '2024-03-01 10:35:00');
    assert.equal(studyOf({ acquisition: '20240301-0500' }).eventDate, '2024-03-01 00:00:00');
  });

  it('passes over an impossible date (31 February) to the next attribute', () => {
    assert.equal(
      studyOf({ contentDate: '20230231', studyDate: '20230228', studyTime: '090000' }).eventDate,
      '2023-02-28 09:00:00',
    );
    assert.equal(studyOf({ contentDate: '20230231', studyDate: '20230228' }).contentDateTime, undefined);
  });

  it('refuses an object whose only date is no real date', () => {
    assert.throws(() => studyOf({ studyDate: '20230231' }), BiometryFileError);
  });
});

describe('biometry laterality: the rule of device filing', () => {
  const study = { ...UIDS, acquisition: '20240301103512' };
  const eyeOf = (options: { laterality?: string; imageLaterality?: string }) => {
    const file = readBiometryFile(iolMaster500(PATIENT, study, options));
    if (file.kind === 'other') assert.fail(file.reason);
    return file.study.laterality;
  };
  const cases = [
    { imageLaterality: 'B' },
    { laterality: 'OU' },
    { laterality: 'ou' },
    { imageLaterality: 'R', laterality: 'L' },
    { imageLaterality: 'U', laterality: 'OS' },
    { imageLaterality: 'OD' },
    {},
  ];
  for (const options of cases) {
    it(`reads ${JSON.stringify(options)} as device filing does`, () => {
      const header = { ImageLaterality: options.imageLaterality, Laterality: options.laterality };
      const device = lateralityOf(header, fallbackProfile('image')).eye;
      assert.equal(eyeOf(options), device ?? undefined);
    });
  }

  it('reads B and OU as both eyes', () => {
    assert.equal(eyeOf({ imageLaterality: 'B' }), 'B');
    assert.equal(eyeOf({ laterality: 'OU' }), 'B');
  });

  it('gives one side of a measurement only for one eye: B and OU name none', () => {
    assert.equal(sideOf('OD'), 'R');
    assert.equal(sideOf(' l '), 'L');
    assert.equal(sideOf('B'), undefined);
    assert.equal(sideOf('OU'), undefined);
  });
});
