/**
 * The rules device filing applies to a stored DICOM header (plain objects keyed by DICOM keyword, as
 * `DICOM_SEED` stores them; no database, no dcmtk): the event date and its precedence, the eye and where
 * it came from, the stored date-time of a device's wall-clock time in the site's zone, and the facts and
 * Device Information columns read from the header. `device-filing.test.ts` files real objects end to end.
 */
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { setStoredTimeZone } from '../../db/stored-time.ts';
import {
  bodySiteOf,
  deviceFactsOf,
  deviceInformationOf,
  eventDateOf,
  eyeIdOf,
  lateralityOf,
  mergeEyes,
  storedEventDate,
} from './device-header.ts';
import type { DeviceProfile } from './profiles.ts';
import { BUILT_IN_PROFILES } from './profiles.ts';

const PROFILE: DeviceProfile = { ...BUILT_IN_PROFILES[0]!, name: 'test-profile' };
const { laterality: _none, ...WITHOUT_EYE } = PROFILE;

describe('eventDateOf', () => {
  it('takes Acquisition DateTime as wall-clock time, without its fraction and UTC offset', () => {
    assert.equal(eventDateOf({ AcquisitionDateTime: '20240301103512.123456+0100' }), '2024-03-01 10:35:12');
    assert.equal(eventDateOf({ AcquisitionDateTime: '202403011035' }), '2024-03-01 10:35:00');
    assert.equal(eventDateOf({ AcquisitionDateTime: '20240301' }), '2024-03-01 00:00:00');
  });

  it('takes the first usable of acquisition, content, series and study date with its time', () => {
    const all = {
      AcquisitionDate: '20240305',
      AcquisitionTime: '101500',
      ContentDate: '20240304',
      ContentTime: '091500',
      SeriesDate: '20240303',
      SeriesTime: '081500',
      StudyDate: '20240302',
      StudyTime: '071500',
    };
    assert.equal(eventDateOf({ AcquisitionDateTime: '20240306120000', ...all }), '2024-03-06 12:00:00');
    assert.equal(eventDateOf(all), '2024-03-05 10:15:00');
    const { AcquisitionDate: _a, AcquisitionTime: _at, ...content } = all;
    assert.equal(eventDateOf(content), '2024-03-04 09:15:00');
    const { ContentDate: _c, ContentTime: _ct, ...series } = content;
    assert.equal(eventDateOf(series), '2024-03-03 08:15:00');
    const { SeriesDate: _s, SeriesTime: _st, ...study } = series;
    assert.equal(eventDateOf(study), '2024-03-02 07:15:00');
  });

  it('reads times of hours only or hours and minutes, old-style separators, and a missing time as midnight', () => {
    assert.equal(eventDateOf({ StudyDate: '20240302', StudyTime: '07' }), '2024-03-02 07:00:00');
    assert.equal(eventDateOf({ StudyDate: '20240302', StudyTime: '0715' }), '2024-03-02 07:15:00');
    assert.equal(eventDateOf({ StudyDate: '20240302', StudyTime: '071530.5' }), '2024-03-02 07:15:30');
    assert.equal(eventDateOf({ StudyDate: '2024-03-02', StudyTime: '07:15:30' }), '2024-03-02 07:15:30');
    assert.equal(eventDateOf({ StudyDate: '20240302' }), '2024-03-02 00:00:00');
    // A leap second is filed as the second before it.
    assert.equal(eventDateOf({ StudyDate: '20161231', StudyTime: '235960' }), '2016-12-31 23:59:59');
  });

  it('passes over a date that is no real date, or a time out of range, to the next candidate', () => {
    assert.equal(eventDateOf({ ContentDate: '20240230', StudyDate: '20240229' }), '2024-02-29 00:00:00');
    assert.equal(eventDateOf({ ContentDate: '20230229', StudyDate: '20230228' }), '2023-02-28 00:00:00');
    assert.equal(eventDateOf({ ContentDate: '20241301', StudyDate: '20240101' }), '2024-01-01 00:00:00');
    assert.equal(eventDateOf({ ContentDate: 'not a date', StudyDate: '20240101' }), '2024-01-01 00:00:00');
    assert.equal(
      eventDateOf({ ContentDate: '20240101', ContentTime: '250000', StudyDate: '20231231' }),
      '2023-12-31 00:00:00',
    );
    assert.equal(
      eventDateOf({ AcquisitionDateTime: '20240101246000', StudyDate: '20231231' }),
      '2023-12-31 00:00:00',
    );
  });

  it('is undefined without any usable date; empty and blank values count as none', () => {
    assert.equal(eventDateOf({}), undefined);
    assert.equal(eventDateOf({ StudyDate: '', ContentDate: '   ', SeriesDate: null }), undefined);
    assert.equal(eventDateOf({ StudyDate: '00000000' }), undefined);
    assert.equal(eventDateOf({ StudyTime: '101500' }), undefined);
  });
});

describe('lateralityOf', () => {
  it('reads R, L and B and their OD, OS and OU forms, in any case', () => {
    const eyeOf = (value: string) => lateralityOf({ ImageLaterality: value }, WITHOUT_EYE).eye;
    assert.deepEqual(['R', 'od', 'L', 'OS', 'B', 'ou'].map(eyeOf), ['R', 'R', 'L', 'L', 'B', 'B']);
  });

  it('takes Image Laterality, then Laterality, then the profile, and says which', () => {
    assert.deepEqual(lateralityOf({ ImageLaterality: 'R', Laterality: 'R' }, PROFILE), {
      eye: 'R',
      source: 'Image Laterality (0020,0062)',
    });
    assert.deepEqual(lateralityOf({ Laterality: 'L' }, { ...PROFILE, laterality: 'R' }), {
      eye: 'L',
      source: 'Laterality (0020,0060)',
    });
    assert.deepEqual(
      lateralityOf({ ImageLaterality: 'U', Laterality: ' ' }, { ...PROFILE, laterality: 'R' }),
      {
        eye: 'R',
        source: 'profile test-profile',
      },
    );
  });

  it('gives both eyes when the two header values disagree', () => {
    assert.deepEqual(lateralityOf({ ImageLaterality: 'R', Laterality: 'OS' }, PROFILE), {
      eye: 'B',
      source: 'Image Laterality and Laterality disagree',
    });
  });

  it('gives no eye for U or nothing without a profile rule', () => {
    assert.deepEqual(lateralityOf({ ImageLaterality: 'U' }, WITHOUT_EYE), {
      eye: null,
      source: 'no laterality in the file (none, or U)',
    });
    assert.equal(lateralityOf({}, WITHOUT_EYE).eye, null);
    assert.equal(lateralityOf({ Laterality: 'X' }, WITHOUT_EYE).eye, null);
  });
});

describe('eyes', () => {
  it("gives OpenEyes's eye ids and SNOMED CT body sites", () => {
    assert.deepEqual(
      (['L', 'R', 'B'] as const).map((eye) => [eyeIdOf(eye), bodySiteOf(eye)]),
      [
        [1, '8966001'],
        [2, '18944008'],
        [3, '40638003'],
      ],
    );
  });

  it('merges two eyes: left and right make both, none leaves the other', () => {
    assert.equal(mergeEyes(null, null), null);
    assert.equal(mergeEyes('L', null), 'L');
    assert.equal(mergeEyes(null, 'R'), 'R');
    assert.equal(mergeEyes('R', 'R'), 'R');
    assert.equal(mergeEyes('L', 'R'), 'B');
    assert.equal(mergeEyes('B', 'L'), 'B');
  });
});

describe('storedEventDate', () => {
  after(() => setStoredTimeZone('UTC'));

  it("converts the device's wall-clock time in the site's zone to UTC for the own schema", () => {
    setStoredTimeZone('UTC');
    assert.equal(storedEventDate('2024-03-01 10:35:12', 'UTC'), '2024-03-01 10:35:12');
    // Winter and summer time in London.
    assert.equal(storedEventDate('2024-01-15 10:00:00', 'Europe/London'), '2024-01-15 10:00:00');
    assert.equal(storedEventDate('2024-07-01 10:00:00', 'Europe/London'), '2024-07-01 09:00:00');
    // Across midnight and the end of a month.
    assert.equal(storedEventDate('2024-02-29 22:30:00', 'America/New_York'), '2024-03-01 03:30:00');
    assert.equal(storedEventDate('2024-03-01 08:00:00', 'Asia/Kolkata'), '2024-03-01 02:30:00');
  });

  it('keeps the text where the database stores that zone (OpenEyes), and converts between two others', () => {
    setStoredTimeZone('Europe/London');
    try {
      assert.equal(storedEventDate('2024-07-01 10:00:00', 'Europe/London'), '2024-07-01 10:00:00');
      assert.equal(storedEventDate('2024-07-01 10:00:00', 'America/New_York'), '2024-07-01 15:00:00');
    } finally {
      setStoredTimeZone('UTC');
    }
  });
});

describe('deviceFactsOf and deviceInformationOf', () => {
  it('reads the facts a profile is chosen from, trimmed, and the kind of content', () => {
    const header = {
      Manufacturer: ' Carl Zeiss Meditec ',
      Modality: 'OPT',
      ManufacturerModelName: 'Cirrus HD-OCT 5000',
      SoftwareVersions: '11.5.1\\2.0',
      SeriesDescription: 'Macular Cube',
      SOPClassUID: '1.2.840.10008.5.1.4.1.1.7',
    };
    assert.deepEqual(deviceFactsOf(header, { sopClassUid: null, hasPixelData: true }), {
      manufacturer: 'Carl Zeiss Meditec',
      modality: 'OPT',
      model: 'Cirrus HD-OCT 5000',
      sopClassUid: '1.2.840.10008.5.1.4.1.1.7',
      softwareVersion: '11.5.1',
      seriesDescription: 'Macular Cube',
      content: 'image',
    });
    const pdf = '1.2.840.10008.5.1.4.1.1.104.1';
    assert.equal(deviceFactsOf(header, { sopClassUid: pdf, hasPixelData: false }).content, 'pdf');
    assert.equal(deviceFactsOf(header, { sopClassUid: pdf, hasPixelData: false }).sopClassUid, pdf);
    assert.equal(
      deviceFactsOf(
        { MIMETypeOfEncapsulatedDocument: 'Application/PDF' },
        { sopClassUid: null, hasPixelData: false },
      ).content,
      'pdf',
    );
    assert.deepEqual(deviceFactsOf({}, { sopClassUid: null, hasPixelData: false }), {
      manufacturer: null,
      modality: null,
      model: null,
      sopClassUid: null,
      softwareVersion: null,
      seriesDescription: null,
      content: 'none',
    });
  });

  it('fills every Device Information column from its keyword, null where the header has none', () => {
    const values = deviceInformationOf({
      Manufacturer: 'Heidelberg Engineering',
      ImageLaterality: 'R',
      DeviceSerialNumber: 'SN-42',
      StudyDate: '20240301',
      StationName: '  ',
    });
    assert.equal(values.manufacturer, 'Heidelberg Engineering');
    assert.equal(values.image_laterality, 'R');
    assert.equal(values.model_version, 'SN-42');
    assert.equal(values.study_date, '20240301');
    assert.equal(values.station_name, null);
    assert.equal(values.modifying_system, null);
    assert.equal(values.operator_identification_sequence, null);
    assert.equal(Object.keys(values).length, 25);
  });
});
