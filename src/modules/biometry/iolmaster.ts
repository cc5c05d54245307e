/**
 * The Zeiss IOLMaster's private group (771B, creator `99CZM`; IOLMaster 500 conformance statement 7.5):
 * measured values in per-eye items of the axial length (xx30), keratometry (xx32) and anterior chamber
 * depth (xx34) sequences, and IOL calculations in per-eye items of the formula sequences (xx36 / xx37:
 * one formula, several lenses; xx01: one lens, several formulas), each with a container (xx02) of the
 * values the calculation used. Every measure is FD. An item's eye is (771B,xx08), R/L or OD/OS; an item
 * without one belongs to its parent's eye.
 *
 * Where the container says a value was changed by hand, that value is filed: AL (xx0B), ACD (xx26), and
 * K1/K2 from d1/d2 (xx11/xx12, the nomenclature of the measured means) with the flat axis (xx13) as K1's
 * and the steep axis (xx14) as K2's.
 */
import type { DataSet, PrivateReader } from './data-set.ts';
import { findPrivateBlock, privateReader } from './data-set.ts';
import type { BiometryReading, EyeMeasurement, IolCalculation, Side } from './reading.ts';
import { createCalculationCounter } from './limits.ts';
import { BiometryFileError } from './reading.ts';
import { sideOf } from './side.ts';

export const ZEISS_GROUP = 0x771b;
export const ZEISS_CREATOR = '99CZM';

const AL_SEQUENCE = 0x30;
const SINGLE_AL_SEQUENCE = 0x31;
const K_SEQUENCE = 0x32;
const ACD_SEQUENCE = 0x34;
const FORMULA_SEQUENCES = [0x36, 0x37] as const;
const MULTI_FORMULA_SEQUENCE = 0x01;
const CONTAINER = 0x02;
const CALCULATION_SEQUENCE = 0x03;
const IOL_PAIR_SEQUENCE = 0x05;
const SIDE = 0x08;

/** The low bytes of the sequences of the IOLMaster's private group. */
const SEQUENCE_LOW_BYTES = new Set([
  AL_SEQUENCE,
  SINGLE_AL_SEQUENCE,
  K_SEQUENCE,
  0x33,
  ACD_SEQUENCE,
  0x35,
  ...FORMULA_SEQUENCES,
  0x3b,
  MULTI_FORMULA_SEQUENCE,
  CONTAINER,
  CALCULATION_SEQUENCE,
  IOL_PAIR_SEQUENCE,
]);

/**
 * `SQ` for the sequences of group 771B in any private block, for an implicit VR file (where the file does
 * not say which elements are sequences).
 */
export function zeissVrOf(tag: string): string | undefined {
  if (!tag.startsWith('x771b')) return undefined;
  const element = Number.parseInt(tag.slice(5), 16);
  return element >= 0x1000 && SEQUENCE_LOW_BYTES.has(element & 0xff) ? 'SQ' : undefined;
}

/** The root reader of the 99CZM elements, or undefined when the data set has none of its sequences. */
export function zeissReader(dataSet: DataSet): PrivateReader | undefined {
  const block = findPrivateBlock(dataSet, ZEISS_GROUP, ZEISS_CREATOR);
  if (block === undefined) return undefined;
  const reader = privateReader(dataSet, ZEISS_GROUP, ZEISS_CREATOR, block);
  const sequences = [AL_SEQUENCE, K_SEQUENCE, ACD_SEQUENCE, ...FORMULA_SEQUENCES, MULTI_FORMULA_SEQUENCE];
  return sequences.some((low) => reader.has(low)) ? reader : undefined;
}

interface SidedItem {
  readonly side: Side | undefined;
  readonly item: PrivateReader;
}

function sided(items: readonly PrivateReader[], parent: Side | undefined): SidedItem[] {
  return items.map((item) => ({ side: sideOf(item.string(SIDE)) ?? parent, item }));
}

const isYes = (value: string | undefined) => value?.trim().toUpperCase() === 'YES';

/** The values of a 99CZM data set, per eye. */
export function readIolMaster(root: PrivateReader, comments: string | undefined): BiometryReading {
  const eyes: Partial<Record<Side, EyeMeasurement>> = {};
  const eye = (side: Side) => (eyes[side] ??= {});

  for (const { side, item } of sided(root.items(AL_SEQUENCE), undefined)) {
    if (side === undefined) continue;
    const target = eye(side);
    target.axialLengthMm = item.number(0x43, 'FD');
    target.snr = item.number(0x44, 'FD');
    const snrs = item
      .items(SINGLE_AL_SEQUENCE)
      .map((single) => single.number(0x0c, 'FD'))
      .filter((snr): snr is number => snr !== undefined && snr !== 0);
    if (snrs.length > 0) target.snrMin = Math.min(...snrs);
  }
  for (const { side, item } of sided(root.items(K_SEQUENCE), undefined)) {
    if (side === undefined) continue;
    const target = eye(side);
    target.k1 = item.number(0x4a, 'FD');
    target.k1Axis = item.number(0x4b, 'FD');
    target.k2 = item.number(0x4d, 'FD');
    target.k2Axis = item.number(0x4e, 'FD');
    target.meanCylinder = item.number(0x4f, 'FD');
  }
  for (const { side, item } of sided(root.items(ACD_SEQUENCE), undefined)) {
    if (side === undefined) continue;
    eye(side).acdMm = item.number(0x0e, 'FD');
  }

  const calculations: IolCalculation[] = [];
  const counter = createCalculationCounter(
    (reason) => new BiometryFileError(`Biometry file refused: ${reason}`),
  );
  let surgeonName: string | undefined;
  const seenContainer = new Set<Side>();
  // One lens, several formulas: the items of xx03 name formulas, the lens is xx0A of the parent.
  // One formula, several lenses: the items of xx03 name lenses, the formula is xx09 of the parent.
  const perEye = (items: SidedItem[], name: { lens?: string; formula?: string }) => {
    for (const { side, item } of items) {
      if (side === undefined) continue;
      const target = eye(side);
      const container = item.items(CONTAINER)[0] ?? item;
      if (!seenContainer.has(side)) {
        seenContainer.add(side);
        applyContainer(target, container);
      }
      for (const calculation of item.items(CALCULATION_SEQUENCE)) {
        const itemName = calculation.string(0x06);
        const lensName = name.lens ?? itemName;
        const formulaName = name.formula ?? itemName;
        if (lensName === undefined || formulaName === undefined) continue;
        const pairItems = calculation.items(IOL_PAIR_SEQUENCE);
        counter.count(side, pairItems.length);
        target.formulaName ??= formulaName;
        const pairs = pairItems.flatMap((pair) => {
          const iol = pair.number(0x2a, 'FD');
          const ref = pair.number(0x28, 'FD');
          return iol === undefined || ref === undefined ? [] : [{ iol, ref }];
        });
        calculations.push({
          side,
          lensName,
          formulaName,
          constant: calculation.number(0x07, 'FD'),
          emmetropia: calculation.number(0x2b, 'FD'),
          pairs,
        });
      }
    }
  };
  for (const low of FORMULA_SEQUENCES) {
    for (const formula of root.items(low)) {
      surgeonName ??= formula.string(0x2c);
      const formulaName = formula.string(0x09);
      perEye(sided(formula.items(MULTI_FORMULA_SEQUENCE), sideOf(formula.string(SIDE))), {
        ...(formulaName === undefined ? {} : { formula: formulaName }),
      });
    }
  }
  if (root.has(MULTI_FORMULA_SEQUENCE)) {
    surgeonName ??= root.string(0x2c);
    const lensName = root.string(0x0a);
    perEye(
      sided(root.items(MULTI_FORMULA_SEQUENCE), undefined),
      lensName === undefined ? {} : { lens: lensName },
    );
  }

  for (const measurement of Object.values(eyes)) measurement.eyeStatus ??= -1;
  return {
    eyes,
    calculations,
    ...(surgeonName === undefined ? {} : { surgeonName }),
    ...(comments === undefined ? {} : { comments }),
  };
}

/** The values of the calculation container: refraction, target, eye status, and hand-changed measures. */
function applyContainer(target: EyeMeasurement, container: PrivateReader): void {
  target.refractionSphere = container.number(0x40, 'FD');
  target.refractionDelta = container.number(0x41, 'FD');
  target.refractionAxis = container.number(0x42, 'FD');
  target.targetRefraction = container.number(0x29, 'FD');
  const status = container.number(0x25, 'IS');
  target.eyeStatus = status === undefined ? -1 : status;
  target.isAlModified = isYes(container.string(0x45));
  target.isKModified = isYes(container.string(0x46));
  if (target.isAlModified) target.axialLengthMm = container.number(0x0b, 'FD') ?? target.axialLengthMm;
  target.isAcdModified = isYes(container.string(0x48));
  if (target.isAcdModified) target.acdMm = container.number(0x26, 'FD') ?? target.acdMm;
  if (target.isKModified) {
    target.k1 = container.number(0x11, 'FD') ?? target.k1;
    target.k2 = container.number(0x12, 'FD') ?? target.k2;
    target.k1Axis = container.number(0x13, 'FD') ?? target.k1Axis;
    target.k2Axis = container.number(0x14, 'FD') ?? target.k2Axis;
    // The device's cylinder belongs to the measured Ks, not to the changed ones.
    target.meanCylinder = undefined;
  }
}
