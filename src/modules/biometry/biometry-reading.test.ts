/**
 * The biometry readers (no database, no dcmtk: objects built in code with dcmjs, `test/biometry-datasets.ts`):
 * the IOLMaster's private data found through its creator and read by VR in explicit and implicit VR, its
 * detection by model name together with the private data, the standard axial measurements and IOL
 * calculation objects, the event date and the eye of the header, and the per-eye helpers of `reading.ts`.
 * `biometry.test.ts` reads the same objects written by dcmtk.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { StudyTags } from '../../../test/biometry-datasets.ts';
import {
  axialMeasurements,
  commonElements,
  iolCalculation,
  iolMaster500,
  iolMaster700Report,
  part10,
} from '../../../test/biometry-datasets.ts';
import { readBiometryFileTask } from './biometry-file.ts';
import type { BiometryFile } from './index.ts';
import { BiometryFileError, readBiometryFile } from './index.ts';
import { hasData } from './reading.ts';
import { sideOf } from './side.ts';

const PATIENT = { id: '1234567', dob: '19600102', sex: 'F' } as const;
const UIDS = { studyUid: '1.2.826.0.1.3680043.8.498.77', sopUid: '1.2.826.0.1.3680043.8.498.78' };
const STUDY: StudyTags = {
  ...UIDS,
  acquisition: '20240301103512.123456+0100',
  contentDate: '20240301',
  contentTime: '103000',
};

function measurementsOf(file: BiometryFile): Extract<BiometryFile, { kind: 'measurements' }> {
  if (file.kind !== 'measurements') assert.fail(`not measurements: ${JSON.stringify(file)}`);
  return file;
}

describe('readBiometryFile (objects built in code)', () => {
  for (const isImplicitVr of [false, true]) {
    it(`reads the 99CZM values by VR, past another creator's block at 0x10 (${isImplicitVr ? 'implicit' : 'explicit'} VR)`, () => {
      const file = measurementsOf(
        readBiometryFile(iolMaster500(PATIENT, STUDY, { isImplicitVr, hasDecoyBlock: true })),
      );
      assert.equal(file.source, 'IOLMaster 500');
      const { R: right, L: left } = file.reading.eyes;
      assert.equal(right?.axialLengthMm, 23.45);
      assert.equal(left?.axialLengthMm, 24.12);
      assert.equal(right?.snr, 150.3);
      // The lowest single SNR that is not 0.
      assert.equal(right?.snrMin, 98.7);
      assert.equal(left?.snrMin, undefined);
      // Changed by hand: d1/d2, the flat axis (xx13) as K1's and the steep axis (xx14) as K2's, and the
      // device's cylinder dropped with the measured Ks.
      assert.deepEqual([right?.k1, right?.k2, right?.k1Axis, right?.k2Axis], [43.1, 44.2, 12, 102]);
      assert.equal(right?.isKModified, true);
      assert.equal(right?.meanCylinder, undefined);
      assert.deepEqual([left?.k1, left?.k2, left?.k1Axis, left?.k2Axis], [42.75, 43.5, 170, 80]);
      assert.equal(left?.isKModified, false);
      assert.equal(left?.meanCylinder, 1.25);
      assert.deepEqual([right?.acdMm, left?.acdMm], [3.21, 3.05]);
      assert.deepEqual(
        [right?.refractionSphere, right?.refractionDelta, right?.refractionAxis, right?.targetRefraction],
        [-1.5, -0.75, 90, -0.5],
      );
      assert.deepEqual([left?.refractionSphere, left?.targetRefraction], [0.25, 0]);
      assert.equal(right?.eyeStatus, 0);
      assert.equal(left?.eyeStatus, 99);
      assert.equal(right?.formulaName, 'SRK/T');
      assert.deepEqual(
        file.reading.calculations.map((c) => [c.side, c.lensName, c.formulaName, c.constant, c.emmetropia]),
        [
          ['R', 'SN60WF', 'SRK/T', 118.7, 21.5],
          ['L', 'Acme Lens 9', 'SRK/T', 119.1, 20.25],
        ],
      );
      assert.deepEqual(file.reading.calculations[0]?.pairs, [
        { iol: 21.0, ref: 0.31 },
        { iol: 21.5, ref: -0.02 },
      ]);
      assert.deepEqual(file.reading.calculations[1]?.pairs, [{ iol: 20.0, ref: 0.12 }]);
      assert.equal(file.reading.surgeonName, 'Smith John');
    });
  }

  it('reads only the eyes the object holds', () => {
    const file = measurementsOf(readBiometryFile(iolMaster500(PATIENT, STUDY, { eyes: ['L'] })));
    assert.equal(file.reading.eyes.R, undefined);
    assert.equal(file.reading.eyes.L?.axialLengthMm, 24.12);
    assert.deepEqual(
      file.reading.calculations.map((c) => c.side),
      ['L'],
    );
  });

  it("keeps the header's study values", () => {
    const file = measurementsOf(readBiometryFile(iolMaster500(PATIENT, STUDY)));
    assert.deepEqual(file.study, {
      studyInstanceUid: UIDS.studyUid,
      eventDate: '2024-03-01 10:35:12',
      seriesInstanceUid: `${UIDS.studyUid}.2`,
      sopInstanceUid: UIDS.sopUid,
      sopClassUid: '1.2.840.10008.5.1.4.1.1.7.4',
      manufacturer: 'Carl Zeiss Meditec',
      model: 'IOLMaster 500',
      stationName: 'IOLM-STATION',
      institutionName: 'Test Eye Hospital',
      softwareVersion: '7.5.2.0076',
      serialNumber: 'SN-0001',
      acquisitionDateTime: STUDY.acquisition,
      contentDateTime: '2024-03-01 10:30:00',
    });
  });

  describe('the event date: acquisition, else content, else series, else study; local time verbatim', () => {
    const eventDateOf = (study: StudyTags, options: { seriesDate?: string; seriesTime?: string } = {}) =>
      measurementsOf(readBiometryFile(iolMaster500(PATIENT, study, options))).study.eventDate;

    it('takes the acquisition date-time, without its fraction and offset', () => {
      assert.equal(eventDateOf(STUDY), '2024-03-01 10:35:12');
      assert.equal(eventDateOf({ ...UIDS, acquisition: '202403011035' }), '2024-03-01 10:35:00');
      assert.equal(eventDateOf({ ...UIDS, acquisition: '20240301' }), '2024-03-01 00:00:00');
    });

    it('takes the content date and time without an acquisition date-time', () => {
      assert.equal(eventDateOf({ ...STUDY, acquisition: undefined }), '2024-03-01 10:30:00');
      assert.equal(
        eventDateOf({ ...UIDS, contentDate: '20240302', contentTime: '0915' }),
        '2024-03-02 09:15:00',
      );
      assert.equal(eventDateOf({ ...UIDS, contentDate: '20240302' }), '2024-03-02 00:00:00');
    });

    it('takes the series, then the study date and time', () => {
      assert.equal(
        eventDateOf(
          { ...UIDS, studyDate: '20240101', studyTime: '080000' },
          { seriesDate: '20240115', seriesTime: '1430' },
        ),
        '2024-01-15 14:30:00',
      );
      assert.equal(eventDateOf({ ...UIDS, studyDate: '20240229' }), '2024-02-29 00:00:00');
      assert.equal(
        eventDateOf({ ...UIDS, studyDate: '20240229', studyTime: '235959.99' }),
        '2024-02-29 23:59:59',
      );
    });

    it('refuses an object without any date, and names why', () => {
      const bytes = iolMaster500(PATIENT, UIDS);
      assert.throws(
        () => readBiometryFile(bytes),
        (error: unknown) =>
          error instanceof BiometryFileError &&
          /no acquisition, content, series or study date/.test(error.message),
      );
      // On a DICOM thread the refusal comes back as a value (an error's class is lost between threads).
      assert.deepEqual(readBiometryFileTask(bytes), {
        refusal: 'The file has no acquisition, content, series or study date',
      });
    });
  });

  describe('the eye of the header: Image Laterality, else Laterality; both when they disagree', () => {
    const lateralityOf = (options: { laterality?: string; imageLaterality?: string }) =>
      measurementsOf(readBiometryFile(iolMaster500(PATIENT, STUDY, options))).study.laterality;

    it('reads R, L, OD and OS', () => {
      assert.equal(lateralityOf({ imageLaterality: 'R' }), 'R');
      assert.equal(lateralityOf({ laterality: 'L' }), 'L');
      assert.equal(lateralityOf({ laterality: 'OD' }), 'R');
      assert.equal(lateralityOf({ imageLaterality: 'OS' }), 'L');
    });

    it('prefers Image Laterality, gives both eyes when the two disagree, and none without either', () => {
      assert.equal(lateralityOf({ imageLaterality: 'R', laterality: 'R' }), 'R');
      assert.equal(lateralityOf({ imageLaterality: 'R', laterality: 'L' }), 'B');
      assert.equal(lateralityOf({ imageLaterality: 'U', laterality: 'L' }), 'L');
      assert.equal(lateralityOf({}), undefined);
      assert.equal(lateralityOf({ laterality: 'U' }), undefined);
    });
  });

  it('recognises an IOLMaster by its model name with its private data, not by its SOP class', () => {
    assert.deepEqual(readBiometryFile(iolMaster500(PATIENT, STUDY, { model: 'Fundus Camera 3' })), {
      kind: 'other',
      reason: 'not an IOLMaster or standard biometry object',
    });
    const sopClassUid = '1.2.840.10008.5.1.4.1.1.7.4';
    const withoutPrivateData = part10(commonElements(PATIENT, STUDY, sopClassUid, 'IOLMaster 500'), {
      sopClassUid,
      sopInstanceUid: UIDS.sopUid,
    });
    assert.deepEqual(readBiometryFile(withoutPrivateData), {
      kind: 'other',
      reason: 'an IOLMaster object without its 99CZM measurement data',
    });
    const report = readBiometryFile(iolMaster700Report(PATIENT, STUDY));
    assert.equal(report.kind, 'report');
    assert.equal(report.kind === 'report' ? report.study.model : undefined, 'IOLMaster 700');
    assert.equal(report.kind === 'report' ? report.study.eventDate : undefined, '2024-03-01 10:35:12');
  });

  it('reads a standard axial measurements object: the selected axial length of each eye', () => {
    const file = measurementsOf(readBiometryFile(axialMeasurements(PATIENT, STUDY)));
    assert.equal(file.source, 'SOP class 1.2.840.10008.5.1.4.1.1.78.7');
    const { R: right, L: left } = file.reading.eyes;
    assert.ok(Math.abs(right!.axialLengthMm! - 23.9) < 1e-5, `right AL ${right?.axialLengthMm}`);
    assert.equal(right?.snr, 180);
    assert.ok(Math.abs(left!.axialLengthMm! - 24.3) < 1e-5, `left AL ${left?.axialLengthMm}`);
    assert.deepEqual(file.reading.calculations, []);
  });

  it('reads a standard IOL calculation object: measures, formula, lens, constant and pairs', () => {
    const file = measurementsOf(readBiometryFile(iolCalculation(PATIENT, STUDY)));
    const right = file.reading.eyes.R!;
    assert.equal(file.reading.eyes.L, undefined);
    const near = (actual: number | undefined, expected: number) =>
      assert.ok(actual !== undefined && Math.abs(actual - expected) < 1e-5, `${actual} is not ${expected}`);
    near(right.axialLengthMm, 23.1);
    near(right.acdMm, 3.3);
    near(right.targetRefraction, -0.25);
    assert.deepEqual([right.k1, right.k1Axis, right.k2, right.k2Axis], [42.5, 175, 43.75, 85]);
    assert.equal(right.formulaName, 'Haigis');
    assert.equal(file.reading.calculations.length, 1);
    const [calculation] = file.reading.calculations;
    assert.deepEqual(
      [calculation?.side, calculation?.lensName, calculation?.formulaName, calculation?.constant],
      ['R', 'SN60WF', 'Haigis', 119],
    );
    near(calculation?.emmetropia, 21.25);
    assert.deepEqual(
      calculation?.pairs.map((pair) => [pair.iol, Math.round(pair.ref * 100) / 100]),
      [
        [21, 0.18],
        [21.5, -0.15],
      ],
    );
  });
});

describe('sideOf and hasData', () => {
  it('reads R, L, OD and OS in any case and spacing, and nothing else', () => {
    assert.deepEqual(
      ['R', 'l', ' od ', 'Os', 'B', 'OU', 'U', '', undefined].map((value) => sideOf(value)),
      ['R', 'L', 'R', 'L', undefined, undefined, undefined, undefined, undefined],
    );
  });

  it('counts an eye with any value but its status', () => {
    assert.equal(hasData(undefined), false);
    assert.equal(hasData({ eyeStatus: -1 }), false);
    assert.equal(hasData({ eyeStatus: 0, isAlModified: false }), false);
    assert.equal(hasData({ axialLengthMm: 23.1 }), true);
    assert.equal(hasData({ isKModified: true }), true);
  });
});
