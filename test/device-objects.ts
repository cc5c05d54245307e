/**
 * DICOM objects of ophthalmic devices, built at test time with dcmtk's `dump2dcm` from text dumps the
 * way the devices' conformance statements describe them: Encapsulated PDF reports (Humphrey fields with
 * the Zeiss private group 7717 under creator `99CZM_HFA_EMR_2`, OCT and topography reports), photographs
 * (Ophthalmic Photography 8 bit, Secondary Capture) and the standard Ophthalmic Visual Field Static
 * Perimetry Measurements object with its nested global results. Invented patients and values only.
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { runDcmtk } from './dcmtk.ts';
import { newUid } from './dicom-instances.ts';

const execFileAsync = promisify(execFile);

export const ENCAPSULATED_PDF = '1.2.840.10008.5.1.4.1.1.104.1';
export const OPHTHALMIC_PHOTOGRAPHY_8_BIT = '1.2.840.10008.5.1.4.1.1.77.1.5.1';
export const SECONDARY_CAPTURE = '1.2.840.10008.5.1.4.1.1.7';
export const VISUAL_FIELD_MEASUREMENTS = '1.2.840.10008.5.1.4.1.1.80.1';

export interface DevicePatient {
  readonly id: string;
  /** `YYYYMMDD`. */
  readonly birthDate: string;
  readonly sex: 'F' | 'M';
}

export interface DeviceObjectOptions {
  readonly sopClassUid: string;
  readonly studyInstanceUid: string;
  readonly sopInstanceUid?: string;
  readonly patient: DevicePatient;
  readonly modality: string;
  readonly manufacturer?: string;
  readonly model?: string;
  readonly softwareVersions?: string;
  readonly seriesDescription?: string;
  readonly imageLaterality?: string;
  readonly laterality?: string;
  /** DT `YYYYMMDDHHMMSS[.FFFFFF][&ZZXX]`. */
  readonly acquisitionDateTime?: string;
  readonly contentDate?: string;
  readonly contentTime?: string;
  readonly studyDate?: string;
  readonly studyTime?: string;
  /** What the object holds: an encapsulated PDF, a small RGB image, or nothing (measurements). */
  readonly content: 'pdf' | 'image' | 'none';
  /** More dump lines: private groups, sequences with nested items. */
  readonly extraLines?: readonly string[];
}

/** The dump lines of the Zeiss private group 7717 of a Humphrey field, under `creator`. */
export function humphreyPrivateLines(
  values: { readonly meanDeviation: string; readonly vfi: string },
  creator = '99CZM_HFA_EMR_2',
): string[] {
  return [
    `(7717,0010) LO [${creator}]`,
    '(7717,1008) IS [17]',
    '(7717,1009) IS [1]',
    `(7717,1016) DS [${values.meanDeviation}]`,
    '(7717,1017) DS [0.5]',
    '(7717,1018) DS [2.43]',
    `(7717,1034) DS [${values.vfi}]`,
  ];
}

/**
 * The dump lines of a Visual Field Static Perimetry Measurements object's global results: the age
 * corrected results (mean deviation as Global Deviation From Normal, FL) and the VFI as a global index
 * (concept 111852 of DCM).
 */
export function visualFieldGlobalLines(values: {
  readonly meanDeviation: number;
  readonly vfi: number;
}): string[] {
  const begin = (tag: string) => [
    `${tag} SQ (Sequence with undefined length)`,
    '(fffe,e000) na (Item with undefined length)',
  ];
  const end = ['(fffe,e00d) na (ItemDelimitationItem)', '(fffe,e0dd) na (SequenceDelimitationItem)'];
  return [
    '(0024,0063) CS [YES]',
    ...begin('(0024,0064)'),
    `(0024,0066) FL ${values.meanDeviation}`,
    '(0024,0068) FL 2.1',
    ...end,
    ...begin('(0024,0320)'),
    ...begin('(0024,0325)'),
    ...begin('(0040,a043)'),
    '(0008,0100) SH [111852]',
    '(0008,0102) SH [DCM]',
    '(0008,0104) LO [Visual Field Index]',
    ...end,
    '(0040,a040) CS [NUMERIC]',
    `(0040,a30a) DS [${values.vfi}]`,
    ...end,
    '(0024,0338) CS [NO]',
    ...end,
  ];
}

/** A one-page PDF whose bytes are unique to `label`. */
function pdfOf(label: string): Buffer {
  return Buffer.from(
    `%PDF-1.4\n% ${label}\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n2 0 obj<</Type/Pages/Kids[3 0 R]/Count 1>>endobj\n3 0 obj<</Type/Page/Parent 2 0 R/MediaBox[0 0 120 90]>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n`,
    'latin1',
  );
}

/** Builds the object with dump2dcm (Explicit VR Little Endian). */
export async function buildDeviceObject(options: DeviceObjectOptions): Promise<Buffer> {
  const dir = await mkdtemp(path.join(tmpdir(), 'cra-device-'));
  try {
    const sopInstanceUid = options.sopInstanceUid ?? newUid();
    const value = (tag: string, vr: string, text: string | undefined) =>
      text === undefined ? [] : [`${tag} ${vr} [${text}]`];
    const lines = [
      `(0002,0002) UI [${options.sopClassUid}]`,
      `(0002,0003) UI [${sopInstanceUid}]`,
      '(0002,0010) UI =LittleEndianExplicit',
      '(0008,0005) CS [ISO_IR 100]',
      ...value('(0008,0020)', 'DA', options.studyDate),
      ...value('(0008,0023)', 'DA', options.contentDate),
      ...value('(0008,002a)', 'DT', options.acquisitionDateTime),
      ...value('(0008,0030)', 'TM', options.studyTime),
      ...value('(0008,0033)', 'TM', options.contentTime),
      `(0008,0016) UI [${options.sopClassUid}]`,
      `(0008,0018) UI [${sopInstanceUid}]`,
      `(0008,0060) CS [${options.modality}]`,
      ...value('(0008,0070)', 'LO', options.manufacturer),
      '(0008,1010) SH [STATION-7]',
      ...value('(0008,103e)', 'LO', options.seriesDescription),
      '(0008,1070) PN [Operator^Olive]',
      ...value('(0008,1090)', 'LO', options.model),
      '(0010,0010) PN [Test^Device]',
      `(0010,0020) LO [${options.patient.id}]`,
      `(0010,0030) DA [${options.patient.birthDate}]`,
      `(0010,0040) CS [${options.patient.sex}]`,
      '(0018,1000) LO [SN-4711]',
      ...value('(0018,1020)', 'LO', options.softwareVersions),
      `(0020,000d) UI [${options.studyInstanceUid}]`,
      `(0020,000e) UI [${newUid()}]`,
      '(0020,0010) SH [S1]',
      '(0020,0011) IS [1]',
      '(0020,0013) IS [1]',
      ...value('(0020,0060)', 'CS', options.laterality),
      ...value('(0020,0062)', 'CS', options.imageLaterality),
      ...(options.extraLines ?? []),
    ];
    if (options.content === 'pdf') {
      await writeFile(path.join(dir, 'report.pdf'), pdfOf(sopInstanceUid));
      lines.push(
        '(0028,0301) CS [NO]',
        '(0042,0010) ST [Report]',
        `(0042,0011) OB =${path.join(dir, 'report.pdf')}`,
        '(0042,0012) LO [application/pdf]',
      );
    } else if (options.content === 'image') {
      // 8 x 8 RGB, different for every instance (so that two files of a study are two attachments).
      const pixels = randomBytes(8 * 8 * 3);
      await writeFile(path.join(dir, 'pixels.raw'), pixels);
      lines.push(
        '(0028,0002) US 3',
        '(0028,0004) CS [RGB]',
        '(0028,0006) US 0',
        '(0028,0010) US 8',
        '(0028,0011) US 8',
        '(0028,0100) US 8',
        '(0028,0101) US 8',
        '(0028,0102) US 7',
        '(0028,0103) US 0',
        `(7fe0,0010) OB =${path.join(dir, 'pixels.raw')}`,
      );
    }
    await writeFile(path.join(dir, 'object.dump'), `${lines.join('\n')}\n`, 'latin1');
    const result = await runDcmtk('dump2dcm', [
      '+te',
      path.join(dir, 'object.dump'),
      path.join(dir, 'object.dcm'),
    ]);
    if (result.code !== 0) throw new Error(`dump2dcm failed: ${result.output}`);
    return await readFile(path.join(dir, 'object.dcm'));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** `bytes` with elements set by dcmtk's `dcmodify` (`-i "(gggg,eeee)=value"` each), for example another software version. */
export async function modifyDeviceObject(bytes: Buffer, assignments: readonly string[]): Promise<Buffer> {
  const dir = await mkdtemp(path.join(tmpdir(), 'cra-device-'));
  try {
    const file = path.join(dir, 'object.dcm');
    await writeFile(file, bytes);
    const result = await runDcmtk('dcmodify', ['-nb', ...assignments.flatMap((a) => ['-i', a]), file]);
    if (result.code !== 0) throw new Error(`dcmodify failed: ${result.output}`);
    return await readFile(file);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * `bytes` rewritten through a text dump: dcmtk's `dcmdump` (every value in full), `edit` on its text
 * (latin1), then `dump2dcm` (Explicit VR Little Endian). For values inside nested private sequences,
 * which `dcmodify` cannot reach without a dictionary entry.
 */
export async function editDeviceObject(bytes: Buffer, edit: (dump: string) => string): Promise<Buffer> {
  const dir = await mkdtemp(path.join(tmpdir(), 'cra-device-'));
  try {
    await writeFile(path.join(dir, 'object.dcm'), bytes);
    // Read as latin1, the character set of the objects built here, so that every byte comes back.
    const { stdout: text } = await execFileAsync('dcmdump', ['+L', '-q', path.join(dir, 'object.dcm')], {
      encoding: 'latin1',
      maxBuffer: 64 * 1024 * 1024,
    });
    await writeFile(path.join(dir, 'edited.dump'), edit(text), 'latin1');
    const built = await runDcmtk('dump2dcm', [
      '+te',
      path.join(dir, 'edited.dump'),
      path.join(dir, 'edited.dcm'),
    ]);
    if (built.code !== 0) throw new Error(`dump2dcm failed: ${built.output}`);
    return await readFile(path.join(dir, 'edited.dcm'));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * For {@link editDeviceObject} on an IOLMaster 500 object of test/biometry-objects.ts: the right eye's
 * first IOL power 21 -> 22.5 and its K1 changed by hand (d1) 43.1 -> 43.6.
 */
export function changeIolMasterRightEyeByHand(dump: string): string {
  return dump
    .replace(/\(771b,112a\) FD 21 /, '(771b,112a) FD 22.5 ')
    .replace(/\(771b,1111\) FD [0-9.]+/, '(771b,1111) FD 43.6');
}

/** A site's profiles file (DEVICE_PROFILES_FILE) with a scanner no built-in profile knows. */
export const SITE_DEVICE_PROFILES = {
  profiles: [
    {
      name: 'acme-topographer',
      match: { manufacturer: 'Acme Vision', modality: 'OT' },
      subtype: 'Topography Images',
      attachmentType: 'Topography Images',
      extraction: 'image',
      reader: 'none',
      filer: 'generic',
    },
  ],
};

/** A device profile filed as an OphGeneric event: the device's header, and what must be filed. */
export interface DeviceProfileCase {
  readonly profile: string;
  readonly device: Omit<
    DeviceObjectOptions,
    'studyInstanceUid' | 'patient' | 'imageLaterality' | 'acquisitionDateTime' | 'extraLines'
  >;
  /** The private or measurement lines of each eye's file (visual fields). */
  readonly lines?: { readonly L: readonly string[]; readonly R: readonly string[] };
  readonly subtype: string | null;
  readonly attachmentType: string;
  /** The visual field indices of each eye, as stored. */
  readonly hfa?: { readonly L: readonly [string, string]; readonly R: readonly [string, string] };
}

const zeiss = 'Carl Zeiss Meditec';
const image = (
  profile: string,
  manufacturer: string,
  modality: string,
  subtype: string | null,
  extra: Partial<DeviceObjectOptions> = {},
): DeviceProfileCase => ({
  profile,
  device: {
    sopClassUid: modality === 'OP' ? OPHTHALMIC_PHOTOGRAPHY_8_BIT : SECONDARY_CAPTURE,
    modality,
    manufacturer,
    model: `${manufacturer.split(' ')[0]} ${modality} 1`,
    softwareVersions: '2.1.0',
    content: 'image',
    ...extra,
  },
  subtype,
  attachmentType: subtype ?? 'NONE',
});
const report = (
  profile: string,
  manufacturer: string,
  modality: string,
  subtype: string | null,
  attachmentType = subtype ?? 'NONE',
): DeviceProfileCase => ({
  profile,
  device: {
    sopClassUid: ENCAPSULATED_PDF,
    modality,
    manufacturer,
    model: `${manufacturer.split(' ')[0]} ${modality} 1`,
    softwareVersions: '2.1.0',
    content: 'pdf',
  },
  subtype,
  attachmentType,
});
const humphrey = (profile: string, manufacturer: string): DeviceProfileCase => ({
  profile,
  device: {
    sopClassUid: ENCAPSULATED_PDF,
    modality: 'OPV',
    manufacturer,
    model: 'HFA3 860',
    softwareVersions: '1.5.1',
    content: 'pdf',
    // The Humphrey's study date is its print date: the acquisition date-time comes first.
    studyDate: '20240401',
    studyTime: '120000',
  },
  lines: {
    L: humphreyPrivateLines({ meanDeviation: '-12.4', vfi: '71' }),
    R: humphreyPrivateLines({ meanDeviation: '-3.21', vfi: '96' }),
  },
  subtype: 'Visual Field Images',
  attachmentType: 'Visual Field Images',
  hfa: { L: ['-12.4', '71'], R: ['-3.21', '96'] },
});

/**
 * One case per built-in OphGeneric profile, then the fallbacks of a device no profile names and a site
 * profile of {@link SITE_DEVICE_PROFILES}. Each file names its eye in Image Laterality.
 */
export const DEVICE_PROFILE_CASES: readonly DeviceProfileCase[] = [
  humphrey('zeiss-humphrey', zeiss),
  report('zeiss-cirrus', zeiss, 'OPT', 'OCT', 'NONE'),
  image('zeiss-photograph', zeiss, 'OP', 'Fundus Images'),
  image('zeiss-angiography', zeiss, 'AG', 'OCTAngiography Report'),
  report('zeiss-document', zeiss, 'DOC', 'OCT', 'NONE'),
  humphrey('zeiss-forum-glaucoma', 'FORUM Glaucoma Workplace Carl Zeiss Meditec'),
  report('zeiss-cirrus-hd-oct', 'CIRRUS HD-OCT 4000', 'OPT', 'OCT', 'NONE'),
  report('heidelberg-photograph', 'Heidelberg Engineering', 'OP', 'OCT Images'),
  report('heidelberg-oct', 'Heidelberg Engineering', 'OPT', 'OCT Images'),
  report('triton-oct', 'Triton', 'OPT', 'OCT', 'NONE'),
  image('triton-capture', 'Triton', 'SC', 'Fundus Images'),
  report('topcon-oct', 'TOPCON Corporation', 'OPT', 'OCT', 'NONE'),
  image('topcon-colour-photograph', 'TOPCON Corporation', 'SC', 'Clinical Photograph Colour', {
    seriesDescription: 'COLOR FUNDUS',
  }),
  image('topcon-capture', 'TOPCON Corporation', 'SC', 'Fundus Images'),
  image('topcon', 'TOPCON Corporation', 'OP', 'Fundus Images'),
  image('kowa', 'Kowa Company, Ltd.', 'OP', 'Clinical Photograph Colour'),
  image('optos', 'OPTOS', 'OP', 'Fundus Images'),
  report('oculus-pentacam', 'OCULUS Optikgeraete GmbH', 'OT', 'Topography Images'),
  image('orion', 'Orion Imaging', 'OP', 'Fundus Images'),
  image('quantel-bscan', 'Quantel Medical', 'US', 'B SCAN Images'),
  {
    profile: 'visual-field-measurements',
    device: {
      sopClassUid: VISUAL_FIELD_MEASUREMENTS,
      modality: 'OPV',
      manufacturer: 'Perimetry Makers',
      model: 'PM-1',
      softwareVersions: '3',
      content: 'none',
    },
    lines: {
      L: visualFieldGlobalLines({ meanDeviation: -5.5, vfi: 88 }),
      R: visualFieldGlobalLines({ meanDeviation: -2.25, vfi: 93 }),
    },
    subtype: 'Visual Field Images',
    attachmentType: 'Visual Field Images',
    hfa: { L: ['-5.5', '88'], R: ['-2.25', '93'] },
  },
  humphrey('generic-opv', 'Perimetry Makers'),
  report('generic-opt', 'Nobody Medical', 'OPT', 'OCT Images'),
  report('generic-oam', 'Nobody Medical', 'OAM', 'OCT Images'),
  image('generic-op', 'Nobody Medical', 'OP', 'Fundus Images'),
  image('generic-xc', 'Nobody Medical', 'XC', 'Fundus Images'),
  image('generic-ag', 'Nobody Medical', 'AG', 'OCTAngiography Report'),
  image('generic-us', 'Nobody Medical', 'US', 'B SCAN Images'),
  report('generic-raw', 'Nobody Medical', 'RAW', 'Topography Images'),
  // A device no profile names: filed all the same, typed by what it sends.
  image('generic-image', 'Nowhere Devices', 'OT', 'Fundus Images'),
  report('generic-pdf', 'Nowhere Devices', 'DOC', 'OCT Images'),
  // A site's own profile (DEVICE_PROFILES_FILE) files a scanner the built-in table does not know.
  image('acme-topographer', 'Acme Vision Ltd', 'OT', 'Topography Images'),
];
