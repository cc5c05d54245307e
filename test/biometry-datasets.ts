/**
 * Biometry objects built in code with dcmjs, for the fast tests of the biometry readers (no dcmtk): the
 * same objects and values as `biometry-objects.ts` writes with dump2dcm (an IOLMaster 500 secondary
 * capture with the Zeiss 99CZM private group, in explicit or implicit VR; an IOLMaster encapsulated PDF
 * report; the standard axial measurements and IOL calculation objects), as Part 10 files.
 */
import dcmjs from 'dcmjs';
import { PDF_BYTES } from './factories-attachment.ts';

/** The patient of an object (as in `biometry-objects.ts`). */
export interface PatientTags {
  readonly id: string;
  readonly dob: string;
  readonly sex: 'M' | 'F';
}

/** The study of an object (as in `biometry-objects.ts`). */
export interface StudyTags {
  readonly studyUid: string;
  readonly sopUid: string;
  /** DICOM DT, or omitted. */
  readonly acquisition?: string;
  readonly contentDate?: string;
  readonly contentTime?: string;
  readonly studyDate?: string;
  readonly studyTime?: string;
}

/** A denaturalized element (dcmjs): its VR and values; items of a sequence are data sets. */
interface Element {
  readonly vr: string;
  readonly Value?: readonly unknown[];
  readonly InlineBinary?: string;
}
type DataSet = Record<string, Element>;

export const EXPLICIT_VR_LITTLE_ENDIAN = '1.2.840.10008.1.2.1';
export const IMPLICIT_VR_LITTLE_ENDIAN = '1.2.840.10008.1.2';
const ENCAPSULATED_PDF = '1.2.840.10008.5.1.4.1.1.104.1';
const MULTIFRAME_TRUE_COLOR_SC = '1.2.840.10008.5.1.4.1.1.7.4';

const el = (vr: string, ...values: unknown[]): Element => ({ vr, Value: values });
const sq = (...items: DataSet[]): Element => ({ vr: 'SQ', Value: items });
const key = (group: number, element: number) =>
  `${group.toString(16).padStart(4, '0')}${element.toString(16).padStart(4, '0')}`.toUpperCase();

/** A Part 10 file of `dataSet` (denaturalized) in `transferSyntaxUid`. */
export function part10(
  dataSet: DataSet,
  options: {
    readonly sopClassUid: string;
    readonly sopInstanceUid: string;
    readonly transferSyntaxUid?: string;
  },
): Buffer {
  const { DicomDict, DicomMetaDictionary } = dcmjs.data;
  const dict = new DicomDict(
    DicomMetaDictionary.denaturalizeDataset({
      FileMetaInformationVersion: new Uint8Array([0, 1]).buffer,
      MediaStorageSOPClassUID: options.sopClassUid,
      MediaStorageSOPInstanceUID: options.sopInstanceUid,
      TransferSyntaxUID: options.transferSyntaxUid ?? EXPLICIT_VR_LITTLE_ENDIAN,
      ImplementationClassUID: '2.25.1',
    }),
  );
  dict.dict = dataSet;
  return Buffer.from(dict.write());
}

/** The header every object here shares (as `biometry-objects.ts`'s `commonTags`). */
export function commonElements(
  patient: PatientTags,
  study: StudyTags,
  sopClassUid: string,
  model: string,
): DataSet {
  const optional = (tag: string, vr: string, value: string | undefined): DataSet =>
    value === undefined ? {} : { [tag]: el(vr, value) };
  return {
    '00080016': el('UI', sopClassUid),
    '00080018': el('UI', study.sopUid),
    ...optional('00080020', 'DA', study.studyDate),
    ...optional('00080023', 'DA', study.contentDate),
    ...optional('0008002A', 'DT', study.acquisition),
    ...optional('00080030', 'TM', study.studyTime),
    ...optional('00080033', 'TM', study.contentTime),
    '00080060': el('CS', 'OT'),
    '00080070': el('LO', 'Carl Zeiss Meditec'),
    '00080080': el('LO', 'Test Eye Hospital'),
    '00081010': el('SH', 'IOLM-STATION'),
    '00081090': el('LO', model),
    '00100010': el('PN', { Alphabetic: 'Biometry^Test' }),
    '00100020': el('LO', patient.id),
    '00100030': el('DA', patient.dob),
    '00100040': el('CS', patient.sex),
    '00181000': el('LO', 'SN-0001'),
    '00181020': el('LO', '7.5.2.0076'),
    '0020000D': el('UI', study.studyUid),
    '0020000E': el('UI', `${study.studyUid}.2`),
  };
}

/** The 99CZM creator's block: 0x11, so that a reader assuming 0x10 fails. */
const BLOCK = 0x11;
const z = (low: number) => key(0x771b, (BLOCK << 8) | low);

export interface IolMasterOptions {
  readonly eyes?: readonly ('R' | 'L')[];
  /** Manufacturer's Model Name (default `IOLMaster 500`). */
  readonly model?: string;
  /** Implicit VR little endian: the private elements' VRs are not in the file. */
  readonly isImplicitVr?: boolean;
  /** Another creator's block at 0x10 holding an axial length sequence with other values. */
  readonly hasDecoyBlock?: boolean;
  /** Laterality (0020,0060) and Image Laterality (0020,0062) of the header. */
  readonly laterality?: string;
  readonly imageLaterality?: string;
  /** Series Date and Time (0008,0021)/(0008,0031). */
  readonly seriesDate?: string;
  readonly seriesTime?: string;
}

/**
 * An IOLMaster 500 object with the values of `biometry-objects.ts`'s `iolMaster500`, except the formula
 * name `SRK/T` (plain ASCII: dcmjs writes text as UTF-8). Right: AL 23.45 (SNR 150.3, single SNRs 120.5,
 * 98.7 and 0), K 43.25@10 / 44.5@100 changed by hand to d1 43.1 / d2 44.2 (flat axis 12, steep 102), ACD
 * 3.21, refraction -1.5 / -0.75 x 90, target -0.5, status 0, lens SN60WF (118.7, emmetropia 21.5, IOL
 * 21.0/0.31 and 21.5/-0.02). Left: AL 24.12 (SNR 210), K 42.75@170 / 43.5@80 with mean cylinder 1.25, ACD
 * 3.05, refraction 0.25, target 0, status 99, lens "Acme Lens 9" (119.1, emmetropia 20.25, IOL 20.0/0.12).
 * Surgeon "Smith John".
 */
export function iolMaster500(patient: PatientTags, study: StudyTags, options: IolMasterOptions = {}): Buffer {
  const eyes = options.eyes ?? ['R', 'L'];
  const has = (side: 'R' | 'L') => eyes.includes(side);
  const items = (...entries: (DataSet | false)[]) => entries.filter((e): e is DataSet => e !== false);
  const al = items(
    has('R') && {
      [z(0x08)]: el('CS', 'R'),
      [z(0x43)]: el('FD', 23.45),
      [z(0x44)]: el('FD', 150.3),
      [z(0x31)]: sq(
        { [z(0x0c)]: el('FD', 120.5) },
        { [z(0x0c)]: el('FD', 98.7) },
        { [z(0x0c)]: el('FD', 0) },
      ),
    },
    has('L') && { [z(0x08)]: el('CS', 'OS'), [z(0x43)]: el('FD', 24.12), [z(0x44)]: el('FD', 210) },
  );
  const k = items(
    has('R') && {
      [z(0x08)]: el('CS', 'R'),
      [z(0x4a)]: el('FD', 43.25),
      [z(0x4b)]: el('FD', 10),
      [z(0x4d)]: el('FD', 44.5),
      [z(0x4e)]: el('FD', 100),
    },
    has('L') && {
      [z(0x08)]: el('CS', 'L'),
      [z(0x4a)]: el('FD', 42.75),
      [z(0x4b)]: el('FD', 170),
      [z(0x4d)]: el('FD', 43.5),
      [z(0x4e)]: el('FD', 80),
      [z(0x4f)]: el('FD', 1.25),
    },
  );
  const acd = items(
    has('R') && { [z(0x08)]: el('CS', 'R'), [z(0x0e)]: el('FD', 3.21) },
    has('L') && { [z(0x08)]: el('CS', 'L'), [z(0x0e)]: el('FD', 3.05) },
  );
  const pairs = (values: readonly [number, number][]) =>
    sq(...values.map(([iol, ref]) => ({ [z(0x2a)]: el('FD', iol), [z(0x28)]: el('FD', ref) })));
  const perEye = items(
    has('R') && {
      [z(0x08)]: el('CS', 'R'),
      [z(0x02)]: sq({
        [z(0x40)]: el('FD', -1.5),
        [z(0x41)]: el('FD', -0.75),
        [z(0x42)]: el('FD', 90),
        [z(0x29)]: el('FD', -0.5),
        [z(0x25)]: el('IS', '0'),
        [z(0x45)]: el('CS', 'NO'),
        [z(0x46)]: el('CS', 'YES'),
        [z(0x11)]: el('FD', 43.1),
        [z(0x12)]: el('FD', 44.2),
        [z(0x13)]: el('FD', 12),
        [z(0x14)]: el('FD', 102),
      }),
      [z(0x03)]: sq({
        [z(0x06)]: el('LO', 'SN60WF'),
        [z(0x07)]: el('FD', 118.7),
        [z(0x2b)]: el('FD', 21.5),
        [z(0x05)]: pairs([
          [21.0, 0.31],
          [21.5, -0.02],
        ]),
      }),
    },
    has('L') && {
      [z(0x08)]: el('CS', 'OS'),
      [z(0x02)]: sq({
        [z(0x40)]: el('FD', 0.25),
        [z(0x29)]: el('FD', 0),
        [z(0x25)]: el('IS', '99'),
        [z(0x45)]: el('CS', 'NO'),
      }),
      [z(0x03)]: sq({
        [z(0x06)]: el('LO', 'Acme Lens 9'),
        [z(0x07)]: el('FD', 119.1),
        [z(0x2b)]: el('FD', 20.25),
        [z(0x05)]: pairs([[20.0, 0.12]]),
      }),
    },
  );
  const decoy: DataSet =
    options.hasDecoyBlock === true
      ? {
          '771B0010': el('LO', 'OTHER'),
          '771B1030': sq(
            { '771B1008': el('CS', 'R'), '771B1043': el('FD', 99.99) },
            { '771B1008': el('CS', 'L'), '771B1043': el('FD', 88.88) },
          ),
        }
      : {};
  const dataSet: DataSet = {
    ...commonElements(patient, study, MULTIFRAME_TRUE_COLOR_SC, options.model ?? 'IOLMaster 500'),
    ...(options.seriesDate === undefined ? {} : { '00080021': el('DA', options.seriesDate) }),
    ...(options.seriesTime === undefined ? {} : { '00080031': el('TM', options.seriesTime) }),
    ...(options.laterality === undefined ? {} : { '00200060': el('CS', options.laterality) }),
    ...(options.imageLaterality === undefined ? {} : { '00200062': el('CS', options.imageLaterality) }),
    '00280002': el('US', 3),
    '00280004': el('CS', 'RGB'),
    '00280006': el('US', 0),
    '00280008': el('IS', '1'),
    '00280010': el('US', 2),
    '00280011': el('US', 2),
    '00280100': el('US', 8),
    '00280101': el('US', 8),
    '00280102': el('US', 7),
    '00280103': el('US', 0),
    ...decoy,
    [key(0x771b, BLOCK)]: el('LO', '99CZM'),
    [z(0x30)]: sq(...al),
    [z(0x32)]: sq(...k),
    [z(0x34)]: sq(...acd),
    [z(0x36)]: sq({
      [z(0x09)]: el('LO', 'SRK/T'),
      [z(0x2c)]: el('PN', { Alphabetic: 'Smith John' }),
      [z(0x01)]: sq(...perEye),
    }),
    '7FE00010': { vr: 'OB', Value: [new Uint8Array(12).fill(0x40).buffer] },
  };
  return part10(dataSet, {
    sopClassUid: MULTIFRAME_TRUE_COLOR_SC,
    sopInstanceUid: study.sopUid,
    transferSyntaxUid: options.isImplicitVr === true ? IMPLICIT_VR_LITTLE_ENDIAN : EXPLICIT_VR_LITTLE_ENDIAN,
  });
}

/** An IOLMaster 700 report: an encapsulated PDF without the private data. */
export function iolMaster700Report(patient: PatientTags, study: StudyTags): Buffer {
  const pdf = PDF_BYTES.length % 2 === 0 ? PDF_BYTES : Buffer.concat([PDF_BYTES, Buffer.from([0])]);
  return part10(
    {
      ...commonElements(patient, study, ENCAPSULATED_PDF, 'IOLMaster 700'),
      '00420010': el('ST', 'IOLMaster 700 report'),
      '00420011': {
        vr: 'OB',
        Value: [pdf.buffer.slice(pdf.byteOffset, pdf.byteOffset + pdf.length)],
      },
      '00420012': el('LO', 'application/pdf'),
    },
    { sopClassUid: ENCAPSULATED_PDF, sopInstanceUid: study.sopUid },
  );
}

/**
 * A standard Ophthalmic Axial Measurements object: right eye 23.9 mm (SNR 180) under the Optical Selected
 * Ophthalmic Axial Length Sequence beside an unselected 23.7, left eye 24.3 mm.
 */
export function axialMeasurements(patient: PatientTags, study: StudyTags): Buffer {
  const sopClassUid = '1.2.840.10008.5.1.4.1.1.78.7';
  return part10(
    {
      ...commonElements(patient, study, sopClassUid, 'Axial Meter 1'),
      '00221007': sq({
        '00221009': el('CS', 'OPTICAL'),
        '00221050': sq({ '00221019': el('FL', 23.7) }),
        '00221255': sq({ '00221019': el('FL', 23.9), '00221155': el('FL', 180) }),
      }),
      '00221008': sq({ '00221009': el('CS', 'OPTICAL'), '00221050': sq({ '00221019': el('FL', 24.3) }) }),
    },
    { sopClassUid, sopInstanceUid: study.sopUid },
  );
}

/**
 * A standard Intraocular Lens Calculations object, right eye only: target refraction -0.25, formula
 * "Haigis" (coded), AL 23.1, ACD 3.3, flat K 42.5 @ 175, steep K 43.75 @ 85, lens SN60WF with constant
 * 119.0, emmetropia 21.25, IOL 21.0 / 0.18 and 21.5 / -0.15.
 */
export function iolCalculation(patient: PatientTags, study: StudyTags): Buffer {
  const sopClassUid = '1.2.840.10008.5.1.4.1.1.78.8';
  return part10(
    {
      ...commonElements(patient, study, sopClassUid, 'Calculator 2'),
      '00221300': sq({
        '00221037': el('FL', -0.25),
        '00221028': sq({
          '00080100': el('SH', 'HAIGIS'),
          '00080102': el('SH', '99TEST'),
          '00080104': el('LO', 'Haigis'),
        }),
        '00221012': sq({ '00221019': el('FL', 23.1) }),
        '00221128': sq({ '00221131': el('FL', 3.3) }),
        '00460080': sq({ '00460076': el('FD', 42.5), '00460077': el('FD', 175) }),
        '00460074': sq({ '00460076': el('FD', 43.75), '00460077': el('FD', 85) }),
        '00221095': el('LO', 'SN60WF'),
        '00221092': sq({ '0040A30A': el('DS', '119.0') }),
        '00221121': el('FL', 21.25),
        '00221090': sq(
          { '00221053': el('FL', 21.0), '00221054': el('FL', 0.18) },
          { '00221053': el('FL', 21.5), '00221054': el('FL', -0.15) },
        ),
      }),
    },
    { sopClassUid, sopInstanceUid: study.sopUid },
  );
}
