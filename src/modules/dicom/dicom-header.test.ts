/**
 * The header's text by the data set's Specific Character Set (0008,0005): each declared set decodes the
 * text VRs, other VRs and undeclared files read a byte as a character.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { buildPart10File, dicomElement } from '../../../test/factories-queue.ts';
import { readDicom } from './inspect.ts';
import type { ScanLimits } from './part10-scan.ts';

const LIMITS: ScanLimits = { maxElements: 100_000, maxDepth: 8, maxBytes: 64 * 1024 * 1024 };

/** A file whose Specific Character Set is `charset` (none when undefined), with these encoded values. */
function fileWith(charset: string | undefined, values: { stationName: Buffer; patientName: Buffer }): Buffer {
  return buildPart10File(
    Buffer.concat([
      ...(charset === undefined ? [] : [dicomElement(0x0008, 0x0005, 'CS', Buffer.from(charset, 'latin1'))]),
      dicomElement(0x0008, 0x0060, 'CS', Buffer.from('OP', 'latin1')),
      dicomElement(0x0008, 0x1010, 'SH', values.stationName),
      dicomElement(0x0010, 0x0010, 'PN', values.patientName),
      dicomElement(0x0010, 0x0020, 'LO', Buffer.from('TEST-1', 'latin1')),
    ]),
  );
}

function headerOf(file: Buffer) {
  return readDicom(file, LIMITS).header;
}

describe('DICOM header text by Specific Character Set', () => {
  it('decodes UTF-8 (ISO_IR 192), 4-byte characters included', () => {
    const header = headerOf(
      fileWith('ISO_IR 192', {
        stationName: Buffer.from('Salle Été 🙂', 'utf8'),
        patientName: Buffer.from('Müller^Jürgen', 'utf8'),
      }),
    );
    assert.equal(header.PatientName, 'Müller^Jürgen');
    assert.equal(header.StationName, 'Salle Été 🙂');
    assert.equal(header.PatientID, 'TEST-1');
  });

  it('decodes Latin-1 (ISO_IR 100) and reads an undeclared set as Latin-1', () => {
    const values = {
      stationName: Buffer.from('Salle Été', 'latin1'),
      patientName: Buffer.from('Müller^Jürgen', 'latin1'),
    };
    for (const charset of ['ISO_IR 100', undefined, 'ISO_IR 6', 'NOT A SET']) {
      const header = headerOf(fileWith(charset, values));
      assert.equal(header.PatientName, 'Müller^Jürgen', String(charset));
      assert.equal(header.StationName, 'Salle Été', String(charset));
    }
  });

  it('decodes single-byte sets other than Latin-1 (Cyrillic ISO_IR 144, Greek ISO_IR 126), with or without ISO 2022', () => {
    // "Иванов^Иван" in ISO 8859-5 and "Παπαδόπουλος" in ISO 8859-7.
    const cyrillic = Buffer.from([0xb8, 0xd2, 0xd0, 0xdd, 0xde, 0xd2, 0x5e, 0xb8, 0xd2, 0xd0, 0xdd]);
    const greek = Buffer.from([0xd0, 0xe1, 0xf0, 0xe1, 0xe4, 0xfc, 0xf0, 0xef, 0xf5, 0xeb, 0xef, 0xf2]);
    assert.equal(
      headerOf(fileWith('ISO_IR 144', { stationName: greek, patientName: cyrillic })).PatientName,
      'Иванов^Иван',
    );
    assert.equal(
      headerOf(fileWith('ISO_IR 126', { stationName: greek, patientName: cyrillic })).StationName,
      'Παπαδόπουλος',
    );
    assert.equal(
      headerOf(fileWith('ISO 2022 IR 144', { stationName: greek, patientName: cyrillic })).PatientName,
      'Иванов^Иван',
    );
  });

  it('reads a UTF-8 value that is not valid UTF-8 without losing the rest of the header', () => {
    const header = headerOf(
      fileWith('ISO_IR 192', {
        stationName: Buffer.from([0x41, 0xff, 0x42, 0x20]),
        patientName: Buffer.from('Doe^J', 'utf8'),
      }),
    );
    assert.equal(header.StationName, 'A\uFFFDB');
    assert.equal(header.PatientName, 'Doe^J');
  });
});
