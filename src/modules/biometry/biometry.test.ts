/**
 * Reading biometry objects (no database): the IOLMaster's private data found through its creator and read
 * by VR in explicit and implicit VR files, detection by model name together with the private data, and
 * the event date rule.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { iolMaster500, iolMaster700Report } from '../../../test/biometry-objects.ts';
import { readBiometryFile } from './index.ts';

const PATIENT = { id: '1234567', dob: '19600102', sex: 'F' } as const;
const STUDY = {
  studyUid: '1.2.826.0.1.3680043.8.498.77',
  sopUid: '1.2.826.0.1.3680043.8.498.78',
  acquisition: '20240301103512.123456+0100',
  contentDate: '20240301',
  contentTime: '103000',
};

describe('readBiometryFile', () => {
  for (const isImplicitVr of [false, true]) {
    it(`reads the 99CZM values by VR, past another creator's block at 0x10 (${isImplicitVr ? 'implicit' : 'explicit'} VR)`, async () => {
      const file = readBiometryFile(
        await iolMaster500(PATIENT, STUDY, { isImplicitVr, hasDecoyBlock: true }),
      );
      assert.equal(file.kind, 'measurements');
      if (file.kind !== 'measurements') return;
      const { R: right, L: left } = file.reading.eyes;
      assert.equal(right?.axialLengthMm, 23.45);
      assert.equal(left?.axialLengthMm, 24.12);
      assert.equal(right?.snrMin, 98.7);
      // Changed by hand: d1/d2, the flat axis (xx13) as K1's and the steep axis (xx14) as K2's.
      assert.deepEqual([right?.k1, right?.k2, right?.k1Axis, right?.k2Axis], [43.1, 44.2, 12, 102]);
      assert.equal(right?.isKModified, true);
      assert.equal(left?.meanCylinder, 1.25);
      assert.equal(right?.eyeStatus, 0);
      assert.equal(left?.eyeStatus, 99);
      assert.equal(right?.formulaName, 'SRK\u00ae/T');
      assert.deepEqual(
        file.reading.calculations.map((c) => [c.side, c.lensName, c.constant, c.pairs.length]),
        [
          ['R', 'SN60WF', 118.7, 2],
          ['L', 'Acme Lens 9', 119.1, 1],
        ],
      );
      assert.equal(file.reading.surgeonName, 'Smith John');
    });
  }

  it('takes the event date from the acquisition date-time, local time verbatim', async () => {
    const file = readBiometryFile(await iolMaster500(PATIENT, STUDY));
    assert.ok(file.kind === 'measurements');
    assert.equal(file.study.eventDate, '2024-03-01 10:35:12');
    const fromContent = readBiometryFile(await iolMaster500(PATIENT, { ...STUDY, acquisition: undefined }));
    assert.ok(fromContent.kind === 'measurements');
    assert.equal(fromContent.study.eventDate, '2024-03-01 10:30:00');
    const fromStudy = readBiometryFile(
      await iolMaster500(PATIENT, { studyUid: STUDY.studyUid, sopUid: STUDY.sopUid, studyDate: '20240229' }),
    );
    assert.ok(fromStudy.kind === 'measurements');
    assert.equal(fromStudy.study.eventDate, '2024-02-29 00:00:00');
  });

  it('recognises an IOLMaster by its model name with its private data, not by its SOP class', async () => {
    const other = readBiometryFile(await iolMaster500(PATIENT, STUDY, { model: 'Fundus Camera 3' }));
    assert.deepEqual(other, { kind: 'other', reason: 'not an IOLMaster or standard biometry object' });
    const report = readBiometryFile(await iolMaster700Report(PATIENT, STUDY));
    assert.equal(report.kind, 'report');
    assert.equal(report.kind === 'report' ? report.study.model : undefined, 'IOLMaster 700');
  });

  it('refuses a biometry object without a date', async () => {
    const bytes = await iolMaster500(PATIENT, { studyUid: STUDY.studyUid, sopUid: STUDY.sopUid });
    assert.throws(() => readBiometryFile(bytes), /no acquisition, content, series or study date/);
  });
});
