/**
 * Visual field indices of a file: the Humphrey's mean deviation and VFI (its private group, only from a
 * block whose creator starts with `99CZM`), else the global indices of a standard Visual Field Static
 * Perimetry Measurements object. OpenEyes's triggers on `ophgeneric_hfa_entry` turn each entry into the
 * patient's visual-field statistics, and fail the write on anything but plain numbers, so the values are
 * checked here: mean deviation a number from -30 to 5 dB, VFI a whole number from 0 to 100 %, stored as
 * plain decimal text (`-3.21`, `96`).
 */
import type { DeviceHeader } from './device-header.ts';
import { headerText } from './device-header.ts';

export interface HfaValues {
  /** Decimal text, dB, two decimals at most. */
  readonly meanDeviation: string;
  /** Whole-number text, %. */
  readonly visualFieldIndex: string;
  /** Where the values came from, for the log. */
  readonly source: string;
}

export type HfaReading = { readonly values: HfaValues } | { readonly problem: string };

/** The checked indices of a file, or why there are none. */
export function readHfaValues(header: DeviceHeader): HfaReading {
  const zeiss = [headerText(header, 'ZeissHfaMeanDeviation'), headerText(header, 'ZeissHfaVisualFieldIndex')];
  const standard = [headerText(header, 'GlobalDeviationFromNormal'), headerText(header, 'VisualFieldIndex')];
  const [md, vfi, source] =
    zeiss[0] !== null || zeiss[1] !== null
      ? [zeiss[0], zeiss[1], 'Zeiss private group 7717 (creator 99CZM)']
      : [standard[0], standard[1], 'Visual Field Global Results (0024,0066), (0024,0320)'];
  if (md === null || vfi === null) {
    return { problem: 'no mean deviation and VFI in the file (or not from a 99CZM private block)' };
  }
  const meanDeviation = Number(md);
  const visualFieldIndex = Number(vfi);
  if (md === '' || !Number.isFinite(meanDeviation) || meanDeviation < -30 || meanDeviation > 5) {
    return { problem: 'the mean deviation is not a number from -30 to 5 dB' };
  }
  if (!Number.isInteger(visualFieldIndex) || visualFieldIndex < 0 || visualFieldIndex > 100) {
    return { problem: 'the VFI is not a whole number from 0 to 100' };
  }
  return {
    values: {
      meanDeviation: String(Number(meanDeviation.toFixed(2))),
      visualFieldIndex: String(visualFieldIndex),
      source,
    },
  };
}
