/**
 * Device filing: how a DICOM object from an ophthalmic device is filed in OpenEyes's tables. Device
 * profiles (built-in, and a site's from `DEVICE_PROFILES_FILE`) choose the event subtype, attachment type,
 * measurement reader and filer from the header; the filer files one OphGeneric event per patient and
 * study with its subtype, Device Information, eye and (visual fields) indices. The queue's routines
 * (`DICOM_SEED`, `ATTACH_TO_EVENT`) use it through this file; docs/DICOM.md describes it.
 */
export type {
  DeviceExtraction,
  DeviceFacts,
  DeviceFiler,
  DeviceProfile,
  DeviceProfileMatch,
  DeviceReader,
  EyeLetter,
} from './profiles.ts';
export { BUILT_IN_PROFILES, chooseProfile, fallbackProfile } from './profiles.ts';
export type { ProfileFileOutcome } from '../../site-files/device-profiles.ts';
export { parseDeviceProfiles, readDeviceProfilesFile } from '../../site-files/device-profiles.ts';
export type { DeviceHeader, FoundEventDate, LateralityFinding } from './device-header.ts';
export {
  EARLIEST_EVENT_DATE,
  bodySiteOf,
  checkEventDate,
  deviceFactsOf,
  dicomWallClock,
  eventDateOf,
  findEventDate,
  normaliseEventDate,
  eyeIdOf,
  eyeOfId,
  eyeOfLaterality,
  headerLateralityOf,
  headerText,
  lateralityOf,
  mergeEyes,
  storedEventDate,
} from './device-header.ts';
export type { HfaReading, HfaValues } from './hfa.ts';
export { readHfaValues } from './hfa.ts';
export type { DeviceFiling, DeviceFilingOutcome, FilingContext } from './filing.ts';
export { fileDeviceObject } from './filing.ts';
export type { RequestDeviceFiling } from './filing-read.ts';
export { readEventSubtypes, readRequestDeviceFiling } from './filing-read.ts';
export type { ColumnWidth, DecimalColumn, FitOptions } from './column-width.ts';
export {
  ColumnWidthError,
  TEXT_COLUMN_CHARACTERS,
  fitColumn,
  fitDecimal,
  fitOptionalColumn,
} from './column-width.ts';
