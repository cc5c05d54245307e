/**
 * The standard ophthalmic biometry objects (PS3.3): Ophthalmic Axial Measurements (SOP class
 * 1.2.840.10008.5.1.4.1.1.78.7: a Right/Left Eye Sequence (0022,1007)/(0022,1008) of axial lengths
 * (0022,1019), the selected one under an Optical/Ultrasound Selected or Selected Total Ophthalmic Axial
 * Length Sequence, with its signal-to-noise ratio (0022,1155)) and Intraocular Lens Calculations
 * (1.2.840.10008.5.1.4.1.1.78.8: a Right/Left Eye Sequence (0022,1300)/(0022,1310) with target refraction
 * (0022,1037), formula (0022,1028), axial length, anterior chamber depth (0022,1131), flat and steep
 * keratometry (0046,0080)/(0046,0074) with power (0046,0076) and axis (0046,0077), the lens (0022,1095),
 * its constant (0022,1092), the power for emmetropia (0022,1121) and IOL power / predicted refraction pairs
 * (0022,1090): (0022,1053)/(0022,1054)).
 */
import type { DataSet, NumberVr } from './data-set.ts';
import { readItems, readNumber, readString, tagKey } from './data-set.ts';
import type { BiometryReading, EyeMeasurement, IolCalculation, Side } from './reading.ts';
import { createCalculationCounter } from './limits.ts';
import { BiometryFileError } from './reading.ts';

export const AXIAL_MEASUREMENTS_SOP_CLASS = '1.2.840.10008.5.1.4.1.1.78.7';
export const IOL_CALCULATION_SOP_CLASS = '1.2.840.10008.5.1.4.1.1.78.8';

const tag = (group: number, element: number) => tagKey(group, element);
const AXIAL_LENGTH = tag(0x0022, 0x1019);
const SNR = tag(0x0022, 0x1155);
const SELECTED_SEQUENCES = [tag(0x0022, 0x1255), tag(0x0022, 0x1230), tag(0x0022, 0x1260)];
const ACD = tag(0x0022, 0x1131);
const TARGET_REFRACTION = tag(0x0022, 0x1037);
const FORMULA_CODE_SEQUENCE = tag(0x0022, 0x1028);
const FORMULA_DETAIL = tag(0x0022, 0x1029);
const CODE_MEANING = tag(0x0008, 0x0104);
const FLAT_K_SEQUENCE = tag(0x0046, 0x0080);
const STEEP_K_SEQUENCE = tag(0x0046, 0x0074);
const K_POWER = tag(0x0046, 0x0076);
const K_AXIS = tag(0x0046, 0x0077);
const IMPLANT_NAME = tag(0x0022, 0x1095);
const LENS_CONSTANT_SEQUENCE = tag(0x0022, 0x1092);
const NUMERIC_VALUE = tag(0x0040, 0xa30a);
const IOL_POWER_SEQUENCE = tag(0x0022, 0x1090);
const IOL_POWER = tag(0x0022, 0x1053);
const PREDICTED_REFRACTION = tag(0x0022, 0x1054);
const EMMETROPIA = tag(0x0022, 0x1121);

const EYE_SEQUENCES: Readonly<Record<string, readonly [Side, string][]>> = {
  [AXIAL_MEASUREMENTS_SOP_CLASS]: [
    ['R', tag(0x0022, 0x1007)],
    ['L', tag(0x0022, 0x1008)],
  ],
  [IOL_CALCULATION_SOP_CLASS]: [
    ['R', tag(0x0022, 0x1300)],
    ['L', tag(0x0022, 0x1310)],
  ],
};

/** The first data set holding `key`, searching `dataSet` and then its items depth first. */
function findHolder(dataSet: DataSet, key: string, depth = 0): DataSet | undefined {
  if (dataSet.elements[key] !== undefined) return dataSet;
  if (depth > 8) return undefined;
  for (const element of Object.values(dataSet.elements)) {
    for (const item of element.items ?? []) {
      const found = item.dataSet === undefined ? undefined : findHolder(item.dataSet, key, depth + 1);
      if (found !== undefined) return found;
    }
  }
  return undefined;
}

function findNumber(dataSet: DataSet | undefined, key: string, vr: NumberVr): number | undefined {
  const holder = dataSet === undefined ? undefined : findHolder(dataSet, key);
  return holder === undefined ? undefined : readNumber(holder, key, vr);
}

function findString(dataSet: DataSet | undefined, key: string): string | undefined {
  const holder = dataSet === undefined ? undefined : findHolder(dataSet, key);
  return holder === undefined ? undefined : readString(holder, key);
}

/** True when `sopClassUid` is one of the standard biometry objects. */
export function isStandardBiometry(sopClassUid: string | undefined): boolean {
  return sopClassUid !== undefined && sopClassUid in EYE_SEQUENCES;
}

/** The values of a standard axial measurements or IOL calculation object, per eye. */
export function readStandardBiometry(dataSet: DataSet, sopClassUid: string): BiometryReading {
  const eyes: Partial<Record<Side, EyeMeasurement>> = {};
  const calculations: IolCalculation[] = [];
  const counter = createCalculationCounter(
    (reason) => new BiometryFileError(`Biometry file refused: ${reason}`),
  );
  for (const [side, sequence] of EYE_SEQUENCES[sopClassUid] ?? []) {
    const items = readItems(dataSet, sequence);
    if (items.length === 0) continue;
    const item = items[0]!;
    const selected = SELECTED_SEQUENCES.map((key) => readItems(item, key)[0]).find((s) => s !== undefined);
    const measurement: EyeMeasurement = {
      axialLengthMm: findNumber(selected, AXIAL_LENGTH, 'FL') ?? findNumber(item, AXIAL_LENGTH, 'FL'),
      snr: findNumber(selected, SNR, 'FL') ?? findNumber(item, SNR, 'FL'),
      acdMm: findNumber(item, ACD, 'FL'),
      targetRefraction: findNumber(item, TARGET_REFRACTION, 'FL'),
      eyeStatus: -1,
    };
    const flat = readItems(findHolder(item, FLAT_K_SEQUENCE) ?? item, FLAT_K_SEQUENCE)[0];
    const steep = readItems(findHolder(item, STEEP_K_SEQUENCE) ?? item, STEEP_K_SEQUENCE)[0];
    if (flat !== undefined) {
      measurement.k1 = readNumber(flat, K_POWER, 'FD');
      measurement.k1Axis = readNumber(flat, K_AXIS, 'FD');
    }
    if (steep !== undefined) {
      measurement.k2 = readNumber(steep, K_POWER, 'FD');
      measurement.k2Axis = readNumber(steep, K_AXIS, 'FD');
    }
    const formulaCode = readItems(item, FORMULA_CODE_SEQUENCE)[0];
    const formulaName =
      (formulaCode === undefined ? undefined : readString(formulaCode, CODE_MEANING)) ??
      readString(item, FORMULA_DETAIL);
    const lensName = findString(item, IMPLANT_NAME);
    if (formulaName !== undefined) measurement.formulaName = formulaName;
    eyes[side] = measurement;
    const powers = readItems(item, IOL_POWER_SEQUENCE);
    counter.count(side, powers.length);
    if (lensName !== undefined && formulaName !== undefined) {
      const constantItem = readItems(
        findHolder(item, LENS_CONSTANT_SEQUENCE) ?? item,
        LENS_CONSTANT_SEQUENCE,
      )[0];
      calculations.push({
        side,
        lensName,
        formulaName,
        constant: constantItem === undefined ? undefined : readNumber(constantItem, NUMERIC_VALUE, 'DS'),
        emmetropia: findNumber(item, EMMETROPIA, 'FL'),
        pairs: powers.flatMap((power) => {
          const iol = readNumber(power, IOL_POWER, 'FL');
          const ref = readNumber(power, PREDICTED_REFRACTION, 'FL');
          return iol === undefined || ref === undefined ? [] : [{ iol, ref }];
        }),
      });
    }
  }
  return { eyes, calculations };
}
