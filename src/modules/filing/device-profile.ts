/**
 * The device profile of a request's DICOM file, recorded in `REQUEST_DATA` (`device_profile`,
 * `device_subtype`, `device_attachment_type`, `device_extraction`, `device_reader`, `device_filer`,
 * `device_laterality`, `device_eye_id`, `device_event_date`): the profile chosen from the header
 * (Manufacturer, Modality, model, SOP class; see the device-filing module), the file's event date and its
 * eye. An unknown device gets the fallback profile and is filed like any other; a file with no date at all
 * fails at once (its event could only be dated by the moment of filing, which a clinician would read as
 * the date of the examination), and so does one whose date is not plausible (`checkEventDate`: before
 * 1900 or more than a day ahead). The desk resolves either by giving the study's date and time in the
 * console ("Fix the data and run on": `REQUEST_DATA.console_event_date`, checked the same way), which
 * then dates the event; a file with a plausible date of its own keeps it.
 *
 * The filers (`PATIENT_MATCH`'s choice of filer, `ATTACH_TO_EVENT`, `FILE_BIOMETRY`) read these keys
 * through {@link readDeviceDecision}, one schema check, rather than each key by hand.
 *
 * `DICOM_SEED` records the profile from the study record ({@link profileDicomFile}), so that
 * the chain needs no queue step of its own for it. The `DEVICE_PROFILE` routine stays registered for the
 * requests a site queued before that, whose `DICOM_SEED` chained `DEVICE_PROFILE`: it records the profile
 * from the stored `DICOM_HEADER`; `EXTRACT_IMAGE` follows it in the chain, as it follows `DICOM_SEED`.
 */
import { Type } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import type { DeviceFiler, DeviceHeader, DeviceProfile, EyeLetter } from '../device-filing/index.ts';
import {
  checkEventDate,
  chooseProfile,
  deviceFactsOf,
  eyeIdOf,
  findEventDate,
  lateralityOf,
} from '../device-filing/index.ts';
import { PermanentRoutineError, defineFilingRoutine } from './catalog.ts';

/** What a file's device profile adds to `REQUEST_DATA`, and the log lines that say why. */
export interface DeviceProfileRecord {
  readonly requestData: Record<string, unknown>;
  readonly logLines: readonly string[];
}

/** The `REQUEST_DATA` key of the study date and time the desk gives in the console. */
export const CONSOLE_EVENT_DATE_KEY = 'console_event_date';

/** What dates a device file's event when the file cannot: now, and the desk's date, if given. */
export interface EventDating {
  readonly now: Date;
  /** `REQUEST_DATA.console_event_date`: `YYYY-MM-DD HH:MM:SS`, the site's wall clock. */
  readonly givenEventDate?: unknown;
}

/**
 * The event date of a file with header `header` and the log line saying where it came from: the file's
 * own when it has a plausible one, else the desk's; throws a {@link PermanentRoutineError} naming the
 * problem otherwise.
 */
function datingOf(header: DeviceHeader, dating: EventDating): { eventDate: string; logLine: string } {
  const found = findEventDate(header);
  const fileProblem =
    found === undefined
      ? 'The file has no usable date (Acquisition DateTime, Content, Series or Study Date): refused, since its event would be dated by the time of filing'
      : (() => {
          const problem = checkEventDate(found.wallClock, { now: dating.now });
          return problem === undefined
            ? undefined
            : `The file's ${found.source} (${found.wallClock}) ${problem}: refused, since it cannot date the event`;
        })();
  if (found !== undefined && fileProblem === undefined)
    return { eventDate: found.wallClock, logLine: `event date: the file's ${found.source}` };
  const given = dating.givenEventDate;
  if (typeof given === 'string' && given !== '') {
    const problem = checkEventDate(given, { now: dating.now });
    if (problem !== undefined)
      throw new PermanentRoutineError(`The study date given in the console (${given}) ${problem}: refused`);
    return {
      eventDate: given,
      logLine: `event date: given in the console (${found === undefined ? 'the file has none' : `the file's ${found.source} is refused`})`,
    };
  }
  throw new PermanentRoutineError(
    `${fileProblem}. Give the study's date and time in the console ("Fix the data and run on") to file it.`,
  );
}

/**
 * The device profile, event date and eye of a DICOM file with header `header`; throws a
 * {@link PermanentRoutineError} for a file with no usable or plausible date that the desk gave none for.
 */
export function profileDicomFile(
  header: DeviceHeader,
  file: { readonly sopClassUid: string | null; readonly hasPixelData: boolean },
  siteProfiles: readonly DeviceProfile[],
  dating: EventDating,
): DeviceProfileRecord {
  const facts = deviceFactsOf(header, file);
  const profile = chooseProfile(facts, siteProfiles);
  const { eventDate, logLine: dateLine } = datingOf(header, dating);
  const laterality = lateralityOf(header, profile);
  return {
    requestData: {
      device_profile: profile.name,
      device_subtype: profile.subtype,
      device_attachment_type: profile.attachmentType,
      device_extraction: profile.extraction,
      device_reader: profile.reader,
      device_filer: profile.filer,
      device_laterality: laterality.eye,
      device_eye_id: laterality.eye === null ? null : eyeIdOf(laterality.eye),
      device_event_date: eventDate,
    },
    logLines: [
      `profile ${profile.name} (modality ${facts.modality ?? 'none'}, ${facts.content}): subtype ${profile.subtype ?? 'none'}, attachment type ${profile.attachmentType}, filer ${profile.filer}`,
      laterality.eye === null
        ? `eye: none (${laterality.source}); filed without a body site`
        : `eye: ${laterality.eye} (${laterality.source})`,
      dateLine,
    ],
  };
}

/**
 * The `device_*` keys of `REQUEST_DATA` the filers act on, as {@link profileDicomFile} writes them (the
 * console lists them from `request_details`; nobody else writes them: they are reserved keys).
 */
const DeviceDecisionSchema = Type.Object({
  device_profile: Type.String(),
  device_subtype: Type.Union([Type.String(), Type.Null()]),
  device_attachment_type: Type.String(),
  device_filer: Type.Union([Type.Literal('generic'), Type.Literal('hfa'), Type.Literal('biometry')]),
  device_laterality: Type.Union([Type.Literal('L'), Type.Literal('R'), Type.Literal('B'), Type.Null()]),
  device_event_date: Type.String(),
});

/** What `DICOM_SEED` decided of a device file: its profile, eye and event date (wall clock). */
export interface DeviceDecision {
  readonly profile: string;
  readonly subtype: string | null;
  readonly attachmentType: string;
  readonly filer: DeviceFiler;
  readonly eye: EyeLetter | null;
  /** `YYYY-MM-DD HH:MM:SS`, the device's (or the desk's) wall clock, checked by `DICOM_SEED`. */
  readonly eventDate: string;
}

/**
 * The device decision in `requestData`, checked once against its schema; undefined for a request
 * without one (not a DICOM file). Keys that are there but not as `DICOM_SEED` writes them fail the
 * routine for good: running the request again from `DICOM_SEED` writes them anew.
 */
export function readDeviceDecision(requestData: Record<string, unknown>): DeviceDecision | undefined {
  if (requestData.device_profile === undefined) return undefined;
  if (!Value.Check(DeviceDecisionSchema, requestData))
    throw new PermanentRoutineError(
      "The request's device profile keys are not as DICOM_SEED writes them: run the request again",
    );
  return {
    profile: requestData.device_profile,
    subtype: requestData.device_subtype,
    attachmentType: requestData.device_attachment_type,
    filer: requestData.device_filer,
    eye: requestData.device_laterality,
    eventDate: requestData.device_event_date,
  };
}

export const deviceProfileRoutine = defineFilingRoutine({
  name: 'DEVICE_PROFILE',
  timeoutMs: 30_000,
  retry: 'backoff',
  run: async (ctx) => {
    const { DICOM_HEADER: header = {}, REQUEST_DATA: data = {} } = await ctx.readTexts([
      'DICOM_HEADER',
      'REQUEST_DATA',
    ]);
    const record = profileDicomFile(
      header,
      {
        sopClassUid: typeof data.dicom_sop_class_uid === 'string' ? data.dicom_sop_class_uid : null,
        hasPixelData: data.dicom_has_pixel_data === true,
      },
      ctx.config.deviceProfiles,
      { now: ctx.now(), givenEventDate: data[CONSOLE_EVENT_DATE_KEY] },
    );
    await ctx.mergeRequestData(record.requestData);
    for (const line of record.logLines) ctx.log(line);
  },
});
