/**
 * The device corpus of the `dicom-chain` bench: ophthalmic device objects built at bench time with the
 * builders the tests use (`test/device-objects.ts`, `test/biometry-objects.ts`; dcmtk `dump2dcm`,
 * `pdf2dcm`, `dcmodify`), one study per patient and kind, and a twin of each built the same way but with
 * an unknown device (Modality `OT`, no known manufacturer or model), which the fallback profile files.
 *
 * One study set per patient: a Humphrey field PDF per eye (Zeiss private indices), a Cirrus OCT PDF per
 * eye, a Heidelberg OCT image per eye, a Topcon colour photograph per eye, a Kowa photograph per eye, an
 * IOLMaster 500 object (both eyes' biometry) and an IOLMaster 700 report PDF of the same study: 12 files.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { iolMaster500, iolMaster700Report } from '../test/biometry-objects.ts';
import { runDcmtk } from '../test/dcmtk.ts';
import type { DeviceObjectOptions, DevicePatient } from '../test/device-objects.ts';
import {
  ENCAPSULATED_PDF,
  OPHTHALMIC_PHOTOGRAPHY_8_BIT,
  SECONDARY_CAPTURE,
  buildDeviceObject,
  humphreyPrivateLines,
} from '../test/device-objects.ts';
import { newUid } from '../test/dicom-instances.ts';

/** Files per study set. */
export const FILES_PER_SET = 12;

/** A manufacturer no profile names; with Modality OT, the fallback profile files the object. */
const UNKNOWN_MANUFACTURER = 'Bench Unknown Devices';

export interface DeviceSource {
  /** What the file is (for the notes and the check). */
  readonly kind: string;
  readonly bytes: Buffer;
  /** The profile the device file must get; for a twin, a fallback (`generic...`) profile. */
  readonly expectedProfile: RegExp;
}

type ObjectKind = {
  readonly kind: string;
  readonly profile: RegExp;
  readonly options: Omit<DeviceObjectOptions, 'studyInstanceUid' | 'patient' | 'imageLaterality'>;
};

const ACQUISITION = '20240312101530';

const DEVICE_KINDS: readonly ObjectKind[] = [
  {
    kind: 'Humphrey field PDF',
    profile: /^zeiss-humphrey$/,
    options: {
      sopClassUid: ENCAPSULATED_PDF,
      modality: 'OPV',
      manufacturer: 'Carl Zeiss Meditec',
      model: 'HFA3 860',
      content: 'pdf',
      acquisitionDateTime: ACQUISITION,
      extraLines: humphreyPrivateLines({ meanDeviation: '-3.2', vfi: '95' }),
    },
  },
  {
    kind: 'Cirrus OCT PDF',
    profile: /^zeiss-cirrus$/,
    options: {
      sopClassUid: ENCAPSULATED_PDF,
      modality: 'OPT',
      manufacturer: 'Carl Zeiss Meditec',
      model: 'CIRRUS HD-OCT 5000',
      content: 'pdf',
      acquisitionDateTime: ACQUISITION,
    },
  },
  {
    kind: 'Heidelberg OCT image',
    profile: /^heidelberg-oct$/,
    options: {
      sopClassUid: OPHTHALMIC_PHOTOGRAPHY_8_BIT,
      modality: 'OPT',
      manufacturer: 'Heidelberg Engineering',
      model: 'SPECTRALIS',
      content: 'image',
      acquisitionDateTime: ACQUISITION,
    },
  },
  {
    kind: 'Topcon colour photograph',
    profile: /^topcon-colour-photograph$/,
    options: {
      sopClassUid: SECONDARY_CAPTURE,
      modality: 'SC',
      manufacturer: 'Topcon',
      model: 'TRC-NW8',
      seriesDescription: 'COLOR',
      content: 'image',
      studyDate: '20240312',
    },
  },
  {
    kind: 'Kowa photograph',
    profile: /^kowa$/,
    options: {
      sopClassUid: OPHTHALMIC_PHOTOGRAPHY_8_BIT,
      modality: 'OP',
      manufacturer: 'Kowa',
      model: 'nonmyd WX3D',
      content: 'image',
      studyDate: '20240312',
    },
  },
];

/** The object of `kind` as an unknown device sends it: Modality OT, unknown manufacturer, no model. */
function twinOf(kind: ObjectKind): ObjectKind {
  return {
    kind: kind.kind,
    profile: /^generic-/,
    options: { ...kind.options, modality: 'OT', manufacturer: UNKNOWN_MANUFACTURER, model: undefined },
  };
}

/** Replaces the model and modality of a Part 10 file with dcmodify (the biometry twins). */
async function asUnknownDevice(bytes: Buffer): Promise<Buffer> {
  const dir = await mkdtemp(path.join(tmpdir(), 'cra-bench-twin-'));
  try {
    const file = path.join(dir, 'object.dcm');
    await writeFile(file, bytes);
    const result = await runDcmtk('dcmodify', [
      '-nb',
      '-m',
      '(0008,0060)=OT',
      '-m',
      `(0008,0070)=${UNKNOWN_MANUFACTURER}`,
      '-m',
      '(0008,1090)=Unknown Biometer',
      file,
    ]);
    if (result.code !== 0) throw new Error(`dcmodify failed: ${result.output}`);
    return await readFile(file);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Runs `tasks` at most `limit` at a time, keeping their order. */
async function inTurn<T>(tasks: readonly (() => Promise<T>)[], limit: number): Promise<T[]> {
  const results = new Array<T>(tasks.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, tasks.length) }, async () => {
      while (next < tasks.length) {
        const index = next++;
        results[index] = await tasks[index]!();
      }
    }),
  );
  return results;
}

/**
 * The files of `sets` study sets, one set per patient from hospital number `firstPatient` on (patients
 * born 1980-01-02, F, as `insertMatchablePatients` makes them): the device files, or with `unknown` their
 * twins of an unknown device. Every file has its own study and instance UIDs and its own PDF or pixels
 * (the IOLMaster objects' fixed image and PDF are unique per patient), so that no payload is skipped as
 * already attached.
 */
export async function buildDeviceSources(
  sets: number,
  firstPatient: number,
  unknown: boolean,
): Promise<DeviceSource[]> {
  const tasks: (() => Promise<DeviceSource>)[] = [];
  for (let set = 0; set < sets; set++) {
    const id = String(firstPatient + set).padStart(7, '0');
    const patient: DevicePatient = { id, birthDate: '19800102', sex: 'F' };
    for (const base of DEVICE_KINDS) {
      const kind = unknown ? twinOf(base) : base;
      const studyInstanceUid = newUid();
      for (const eye of ['R', 'L']) {
        tasks.push(async () => ({
          kind: kind.kind,
          expectedProfile: kind.profile,
          bytes: await buildDeviceObject({
            ...kind.options,
            patient,
            studyInstanceUid,
            imageLaterality: eye,
          }),
        }));
      }
    }
    const tags = { id, dob: '19800102', sex: 'F' as const };
    const study = { studyUid: newUid(), sopUid: newUid(), acquisition: '20240312093000' };
    tasks.push(async () => {
      const bytes = await iolMaster500(tags, study);
      return {
        kind: 'IOLMaster 500',
        expectedProfile: unknown ? /^generic-/ : /^zeiss-iolmaster-500/,
        bytes: unknown ? await asUnknownDevice(bytes) : bytes,
      };
    });
    tasks.push(async () => {
      const bytes = await iolMaster700Report(tags, { ...study, sopUid: newUid() });
      return {
        kind: 'IOLMaster 700 report',
        expectedProfile: unknown ? /^generic-/ : /^zeiss-iolmaster-700$/,
        bytes: unknown ? await asUnknownDevice(bytes) : bytes,
      };
    });
  }
  return inTurn(tasks, 4);
}
