/**
 * Biometry objects built the way the devices' conformance statements describe them, with dcmtk at test
 * time: an IOLMaster 500 multi-frame true colour secondary capture with the Zeiss 99CZM private group
 * (text dump -> `dump2dcm`), an IOLMaster 700 encapsulated PDF (`pdf2dcm`, then `dcmodify`), and the
 * standard ophthalmic axial measurements object (`dump2dcm`).
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runDcmtk } from './dcmtk.ts';
import { PDF_BYTES } from './factories-attachment.ts';

export interface PatientTags {
  readonly id: string;
  readonly dob: string;
  readonly sex: 'M' | 'F';
}

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

/** A private creator block other than 0x10: the reader must find it through its creator. */
const BLOCK = '11';
const z = (low: string) => `(771b,${BLOCK}${low})`;

function indent(lines: readonly string[], depth: number): string[] {
  return lines.map((line) => `${'  '.repeat(depth)}${line}`);
}

function sequence(tag: string, items: readonly (readonly string[])[]): string[] {
  return [
    `${tag} SQ (Sequence with undefined length #=${items.length})`,
    ...items.flatMap((item) => [
      `  (fffe,e000) na (Item with undefined length #=${item.length})`,
      ...indent(item, 2),
      '  (fffe,e00d) na (ItemDelimitationItem)',
    ]),
    '(fffe,e0dd) na (SequenceDelimitationItem)',
  ];
}

function commonTags(patient: PatientTags, study: StudyTags, sopClass: string, model: string): string[] {
  return [
    '(0008,0005) CS [ISO_IR 100]',
    `(0008,0016) UI [${sopClass}]`,
    `(0008,0018) UI [${study.sopUid}]`,
    ...(study.studyDate === undefined ? [] : [`(0008,0020) DA [${study.studyDate}]`]),
    ...(study.contentDate === undefined ? [] : [`(0008,0023) DA [${study.contentDate}]`]),
    ...(study.acquisition === undefined ? [] : [`(0008,002a) DT [${study.acquisition}]`]),
    ...(study.studyTime === undefined ? [] : [`(0008,0030) TM [${study.studyTime}]`]),
    ...(study.contentTime === undefined ? [] : [`(0008,0033) TM [${study.contentTime}]`]),
    '(0008,0060) CS [OT]',
    '(0008,0070) LO [Carl Zeiss Meditec]',
    '(0008,0080) LO [Test Eye Hospital]',
    '(0008,1010) SH [IOLM-STATION]',
    `(0008,1090) LO [${model}]`,
    '(0010,0010) PN [Biometry^Test]',
    `(0010,0020) LO [${patient.id}]`,
    `(0010,0030) DA [${patient.dob}]`,
    `(0010,0040) CS [${patient.sex}]`,
    '(0018,1000) LO [SN-0001]',
    '(0018,1020) LO [7.5.2.0076]',
    `(0020,000d) UI [${study.studyUid}]`,
    `(0020,000e) UI [${study.studyUid}.2]`,
  ];
}

const ENCAPSULATED_PDF = '1.2.840.10008.5.1.4.1.1.104.1';

function imagePixelModule(): string[] {
  return [
    '(0028,0002) US 3',
    '(0028,0004) CS [RGB]',
    '(0028,0006) US 0',
    '(0028,0008) IS [1]',
    '(0028,0010) US 2',
    '(0028,0011) US 2',
    '(0028,0100) US 8',
    '(0028,0101) US 8',
    '(0028,0102) US 7',
    '(0028,0103) US 0',
  ];
}

/** The encapsulated document of a small PDF, padded to an even length. */
function pdfDocument(): string[] {
  const bytes = PDF_BYTES.length % 2 === 0 ? PDF_BYTES : Buffer.concat([PDF_BYTES, Buffer.from([0])]);
  const hex = [...bytes].map((b) => b.toString(16).padStart(2, '0')).join('\\');
  return [
    '(0042,0010) ST [IOLMaster 500 report]',
    `(0042,0011) OB ${hex}`,
    '(0042,0012) LO [application/pdf]',
  ];
}

/** Writes `dump` (latin1, as its character set says) and converts it with dump2dcm. */
async function dumpToDicom(dump: readonly string[], transferSyntax: '+te' | '+ti' = '+te'): Promise<Buffer> {
  const dir = await mkdtemp(path.join(tmpdir(), 'cra-biometry-'));
  try {
    const dumpFile = path.join(dir, 'object.dump');
    const dicomFile = path.join(dir, 'object.dcm');
    await writeFile(dumpFile, `${dump.join('\n')}\n`, 'latin1');
    const result = await runDcmtk('dump2dcm', [transferSyntax, dumpFile, dicomFile]);
    if (result.code !== 0) throw new Error(`dump2dcm failed: ${result.output}`);
    return await readFile(dicomFile);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * An IOLMaster 500 object with known values per eye. Right: AL 23.45 (SNR 150.3, single SNRs 120.5 and
 * 98.7), K 43.25@10 / 44.5@100 changed by hand to d1 43.1 / d2 44.2 (flat axis 12, steep axis 102), ACD
 * 3.21, refraction -1.5 / -0.75 x 90, target -0.5, status 0, lens SN60WF (118.7, emmetropia 21.5, IOL
 * 21.0/0.31 and 21.5/-0.02). Left: AL 24.12 (SNR 210), K 42.75@170 / 43.5@80 with mean cylinder 1.25,
 * ACD 3.05, refraction 0.25, target 0, status 99 (not an IOLMaster code), lens "Acme Lens 9" (119.1,
 * emmetropia 20.25, IOL 20.0/0.12). Formula "SRK®/T", surgeon "Smith John".
 */
export function iolMaster500(
  patient: PatientTags,
  study: StudyTags,
  options: {
    eyes?: readonly ('R' | 'L')[];
    /** Manufacturer's Model Name (default `IOLMaster 500`). */
    model?: string;
    /** Implicit VR little endian: the private elements' VRs are not in the file. */
    isImplicitVr?: boolean;
    /** Another creator's block at 0x10 holding an axial length sequence with other values. */
    hasDecoyBlock?: boolean;
    /** The IOLMaster 500's encapsulated PDF carrying the same private data, instead of the image. */
    isPdf?: boolean;
  } = {},
): Promise<Buffer> {
  const eyes = options.eyes ?? ['R', 'L'];
  const has = (side: 'R' | 'L') => eyes.includes(side);
  const al = [
    ...(has('R')
      ? [
          [
            `${z('08')} CS [R]`,
            `${z('43')} FD 23.45`,
            `${z('44')} FD 150.3`,
            ...sequence(z('31'), [[`${z('0c')} FD 120.5`], [`${z('0c')} FD 98.7`], [`${z('0c')} FD 0`]]),
          ],
        ]
      : []),
    ...(has('L') ? [[`${z('08')} CS [OS]`, `${z('43')} FD 24.12`, `${z('44')} FD 210`]] : []),
  ];
  const k = [
    ...(has('R')
      ? [
          [
            `${z('08')} CS [R]`,
            `${z('4a')} FD 43.25`,
            `${z('4b')} FD 10`,
            `${z('4d')} FD 44.5`,
            `${z('4e')} FD 100`,
          ],
        ]
      : []),
    ...(has('L')
      ? [
          [
            `${z('08')} CS [L]`,
            `${z('4a')} FD 42.75`,
            `${z('4b')} FD 170`,
            `${z('4d')} FD 43.5`,
            `${z('4e')} FD 80`,
            `${z('4f')} FD 1.25`,
          ],
        ]
      : []),
  ];
  const acd = [
    ...(has('R') ? [[`${z('08')} CS [R]`, `${z('0e')} FD 3.21`]] : []),
    ...(has('L') ? [[`${z('08')} CS [L]`, `${z('0e')} FD 3.05`]] : []),
  ];
  const pairs = (values: readonly [number, number][]) =>
    sequence(
      z('05'),
      values.map(([iol, ref]) => [`${z('2a')} FD ${iol}`, `${z('28')} FD ${ref}`]),
    );
  const perEye = [
    ...(has('R')
      ? [
          [
            `${z('08')} CS [R]`,
            ...sequence(z('02'), [
              [
                `${z('40')} FD -1.5`,
                `${z('41')} FD -0.75`,
                `${z('42')} FD 90`,
                `${z('29')} FD -0.5`,
                `${z('25')} IS [0]`,
                `${z('45')} CS [NO]`,
                `${z('46')} CS [YES]`,
                `${z('11')} FD 43.1`,
                `${z('12')} FD 44.2`,
                `${z('13')} FD 12`,
                `${z('14')} FD 102`,
              ],
            ]),
            ...sequence(z('03'), [
              [
                `${z('06')} LO [SN60WF]`,
                `${z('07')} FD 118.7`,
                `${z('2b')} FD 21.5`,
                ...pairs([
                  [21.0, 0.31],
                  [21.5, -0.02],
                ]),
              ],
            ]),
          ],
        ]
      : []),
    ...(has('L')
      ? [
          [
            `${z('08')} CS [OS]`,
            ...sequence(z('02'), [
              [`${z('40')} FD 0.25`, `${z('29')} FD 0`, `${z('25')} IS [99]`, `${z('45')} CS [NO]`],
            ]),
            ...sequence(z('03'), [
              [
                `${z('06')} LO [Acme Lens 9]`,
                `${z('07')} FD 119.1`,
                `${z('2b')} FD 20.25`,
                ...pairs([[20.0, 0.12]]),
              ],
            ]),
          ],
        ]
      : []),
  ];
  const decoy =
    options.hasDecoyBlock === true
      ? [
          '(771b,0010) LO [OTHER]',
          ...sequence('(771b,1030)', [
            ['(771b,1008) CS [R]', '(771b,1043) FD 99.99'],
            ['(771b,1008) CS [L]', '(771b,1043) FD 88.88'],
          ]),
        ]
      : [];
  return dumpToDicom(
    [
      ...commonTags(
        patient,
        study,
        options.isPdf === true ? ENCAPSULATED_PDF : '1.2.840.10008.5.1.4.1.1.7.4',
        options.model ?? 'IOLMaster 500',
      ),
      ...decoy,
      ...(options.isPdf === true ? pdfDocument() : imagePixelModule()),
      `(771b,00${BLOCK}) LO [99CZM]`,
      ...sequence(z('30'), al),
      ...sequence(z('32'), k),
      ...sequence(z('34'), acd),
      ...sequence(z('36'), [
        [`${z('09')} LO [SRK\u00ae/T]`, `${z('2c')} PN [Smith John]`, ...sequence(z('01'), perEye)],
      ]),
      ...(options.isPdf === true ? [] : ['(7fe0,0010) OB 10\\20\\30\\40\\50\\60\\70\\80\\90\\a0\\b0\\c0']),
    ],
    options.isImplicitVr === true ? '+ti' : '+te',
  );
}

/**
 * An IOLMaster 700 report: an encapsulated PDF (pdf2dcm, which gives it its own SOP instance UID) with
 * the device's tags set by dcmodify.
 */
export async function iolMaster700Report(patient: PatientTags, study: StudyTags): Promise<Buffer> {
  const dir = await mkdtemp(path.join(tmpdir(), 'cra-biometry-'));
  try {
    const pdf = path.join(dir, 'report.pdf');
    const dicomFile = path.join(dir, 'report.dcm');
    await writeFile(pdf, PDF_BYTES);
    const made = await runDcmtk('pdf2dcm', [
      '+pn',
      'Biometry^Test',
      '+pi',
      patient.id,
      '+pb',
      patient.dob,
      '+ps',
      patient.sex,
      '+t',
      'IOLMaster 700 report',
      pdf,
      dicomFile,
    ]);
    if (made.code !== 0) throw new Error(`pdf2dcm failed: ${made.output}`);
    const modified = await runDcmtk('dcmodify', [
      '-nb',
      '-i',
      `(0020,000d)=${study.studyUid}`,
      '-i',
      '(0008,0060)=OAM',
      '-i',
      '(0008,0070)=Carl Zeiss Meditec',
      '-i',
      '(0008,1090)=IOLMaster 700',
      '-i',
      '(0018,1000)=SN-0700',
      ...(study.acquisition === undefined ? [] : ['-i', `(0008,002a)=${study.acquisition}`]),
      ...(study.contentDate === undefined ? [] : ['-i', `(0008,0023)=${study.contentDate}`]),
      ...(study.contentTime === undefined ? [] : ['-i', `(0008,0033)=${study.contentTime}`]),
      dicomFile,
    ]);
    if (modified.code !== 0) throw new Error(`dcmodify failed: ${modified.output}`);
    return await readFile(dicomFile);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * A standard Ophthalmic Axial Measurements object: right eye 23.9 mm (SNR 180) under the Optical Selected
 * Ophthalmic Axial Length Sequence beside an unselected 23.7, left eye 24.3 mm.
 */
export function axialMeasurements(patient: PatientTags, study: StudyTags): Promise<Buffer> {
  return dumpToDicom([
    ...commonTags(patient, study, '1.2.840.10008.5.1.4.1.1.78.7', 'Axial Meter 1'),
    ...sequence('(0022,1007)', [
      [
        '(0022,1009) CS [OPTICAL]',
        ...sequence('(0022,1050)', [['(0022,1019) FL 23.7']]),
        ...sequence('(0022,1255)', [['(0022,1019) FL 23.9', '(0022,1155) FL 180']]),
      ],
    ]),
    ...sequence('(0022,1008)', [
      ['(0022,1009) CS [OPTICAL]', ...sequence('(0022,1050)', [['(0022,1019) FL 24.3']])],
    ]),
  ]);
}

/**
 * A standard Intraocular Lens Calculations object, right eye only: target refraction -0.25, formula
 * "Haigis" (coded), AL 23.1, ACD 3.3, flat K 42.5 @ 175, steep K 43.75 @ 85, lens SN60WF with constant
 * 119.0, emmetropia 21.25, IOL 21.0 / 0.18 and 21.5 / -0.15.
 */
export function iolCalculation(patient: PatientTags, study: StudyTags): Promise<Buffer> {
  return dumpToDicom([
    ...commonTags(patient, study, '1.2.840.10008.5.1.4.1.1.78.8', 'Calculator 2'),
    ...sequence('(0022,1300)', [
      [
        '(0022,1037) FL -0.25',
        ...sequence('(0022,1028)', [
          ['(0008,0100) SH [HAIGIS]', '(0008,0102) SH [99TEST]', '(0008,0104) LO [Haigis]'],
        ]),
        ...sequence('(0022,1012)', [['(0022,1019) FL 23.1']]),
        ...sequence('(0022,1128)', [['(0022,1131) FL 3.3']]),
        ...sequence('(0046,0080)', [['(0046,0076) FD 42.5', '(0046,0077) FD 175']]),
        ...sequence('(0046,0074)', [['(0046,0076) FD 43.75', '(0046,0077) FD 85']]),
        '(0022,1095) LO [SN60WF]',
        ...sequence('(0022,1092)', [['(0040,a30a) DS [119.0]']]),
        '(0022,1121) FL 21.25',
        ...sequence('(0022,1090)', [
          ['(0022,1053) FL 21.0', '(0022,1054) FL 0.18'],
          ['(0022,1053) FL 21.5', '(0022,1054) FL -0.15'],
        ]),
      ],
    ]),
  ]);
}

/**
 * An "IOLMaster 700" object (default: Ophthalmic Axial Measurements, 78.7) whose 99CZM block carries the
 * calculations `lensNames` gives (one formula, "SRK®/T"), for the eyes `eyes`: one calculation per name
 * and eye, each with the lens's name and, unless `isBare`, a constant and one IOL/REF pair. Names are
 * written as the dump's LO values (no backslash or bracket in them). The attack objects of the hostile
 * tests: thousands of lens names, or tens of thousands of calculations of one lens.
 */
export function iolMasterCalculations(
  patient: PatientTags,
  study: StudyTags,
  options: {
    lensNames: readonly string[];
    eyes?: readonly ('R' | 'L')[];
    sopClass?: string;
    /** Only each calculation's lens name (two elements per calculation). */
    isBare?: boolean;
    /** Each eye's axial length (default 23.5 mm). */
    axialLengthMm?: number;
  },
): Promise<Buffer> {
  const eyes = options.eyes ?? ['R'];
  const calculation = (name: string): string[] =>
    options.isBare === true
      ? [`${z('06')} LO [${name}]`]
      : [
          `${z('06')} LO [${name}]`,
          `${z('07')} FD 118.5`,
          `${z('2b')} FD 21`,
          ...sequence(z('05'), [[`${z('2a')} FD 21`, `${z('28')} FD 0.1`]]),
        ];
  const perEye = eyes.map((side) => [
    `${z('08')} CS [${side}]`,
    ...sequence(z('02'), [[`${z('29')} FD 0`, `${z('25')} IS [0]`, `${z('45')} CS [NO]`]]),
    ...sequence(z('03'), options.lensNames.map(calculation)),
  ]);
  return dumpToDicom([
    ...commonTags(patient, study, options.sopClass ?? '1.2.840.10008.5.1.4.1.1.78.7', 'IOLMaster 700'),
    `(771b,00${BLOCK}) LO [99CZM]`,
    ...sequence(
      z('30'),
      eyes.map((side) => [`${z('08')} CS [${side}]`, `${z('43')} FD ${options.axialLengthMm ?? 23.5}`]),
    ),
    ...sequence(z('36'), [[`${z('09')} LO [SRK\u00ae/T]`, ...sequence(z('01'), perEye)]]),
  ]);
}
