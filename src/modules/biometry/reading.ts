/** What a biometry object says, per eye, whatever the device: the values of OpenEyes's biometry elements. */

export type Side = 'R' | 'L';

/**
 * A file that cannot be filed as biometry whatever is retried (no study, no date, more than a reader's
 * ceiling).
 */
export class BiometryFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BiometryFileError';
  }
}
export const SIDES: readonly Side[] = ['R', 'L'];

/** One eye's measurements (et_ophinbiometry_measurement) and calculation inputs. */
export interface EyeMeasurement {
  axialLengthMm?: number;
  snr?: number;
  snrMin?: number;
  k1?: number;
  k2?: number;
  k1Axis?: number;
  k2Axis?: number;
  /** The device's own cylinder (mean zyl), used for delta K when present. */
  meanCylinder?: number;
  acdMm?: number;
  refractionSphere?: number;
  refractionDelta?: number;
  refractionAxis?: number;
  /** The IOLMaster's eye status code (dicom_eye_status); -1 when unknown. */
  eyeStatus?: number;
  isAlModified?: boolean;
  isKModified?: boolean;
  /** The ACD was changed by hand on the device. */
  isAcdModified?: boolean;
  lvc?: string;
  lvcMode?: string;
  targetRefraction?: number;
  /** The formula of the eye's first calculation. */
  formulaName?: string;
}

/** One lens and formula calculated for one eye: its constant, emmetropia power and IOL/REF pairs. */
export interface IolCalculation {
  readonly side: Side;
  readonly lensName: string;
  readonly formulaName: string;
  readonly constant?: number;
  readonly emmetropia?: number;
  readonly pairs: readonly { readonly iol: number; readonly ref: number }[];
}

export interface BiometryReading {
  readonly eyes: Partial<Record<Side, EyeMeasurement>>;
  readonly calculations: readonly IolCalculation[];
  readonly surgeonName?: string;
  readonly comments?: string;
}

/** True when the eye has a value worth filing. */
export function hasData(eye: EyeMeasurement | undefined): eye is EyeMeasurement {
  return (
    eye !== undefined &&
    Object.entries(eye).some(([key, value]) => key !== 'eyeStatus' && value !== undefined && value !== false)
  );
}
