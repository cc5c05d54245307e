/**
 * The device profile of a request's DICOM file, recorded in `REQUEST_DATA` (`device_profile`,
 * `device_subtype`, `device_attachment_type`, `device_extraction`, `device_reader`, `device_filer`,
 * `device_laterality`, `device_eye_id`, `device_event_date`): the profile chosen from the header
 * (Manufacturer, Modality, model, SOP class; see the device-filing module), the file's event date and its
 * eye. An unknown device gets the fallback profile and is filed like any other; a file with no date at all
 * fails at once (its event could only be dated by the moment of filing, which a clinician would read as
 * the date of the examination).
 *
 * `DICOM_SEED` records the profile from the header it has just read ({@link profileDicomFile}), so that
 * the chain needs no queue step of its own for it. The `DEVICE_PROFILE` routine stays registered for the
 * requests a site queued before that, whose `DICOM_SEED` chained `DEVICE_PROFILE`: it records the profile
 * from the stored `DICOM_HEADER` and chains `EXTRACT_IMAGE`, as `DICOM_SEED` does now.
 */
import type { DeviceHeader, DeviceProfile } from '../../device-filing/index.ts';
import {
  chooseProfile,
  deviceFactsOf,
  eventDateOf,
  eyeIdOf,
  lateralityOf,
} from '../../device-filing/index.ts';
import { PermanentRoutineError, defineRoutine } from './catalog.ts';

/** What a file's device profile adds to `REQUEST_DATA`, and the log lines that say why. */
export interface DeviceProfileRecord {
  readonly requestData: Record<string, unknown>;
  readonly logLines: readonly string[];
}

/**
 * The device profile, event date and eye of a DICOM file with header `header`; throws a
 * {@link PermanentRoutineError} for a file with no usable date.
 */
export function profileDicomFile(
  header: DeviceHeader,
  file: { readonly sopClassUid: string | null; readonly hasPixelData: boolean },
  siteProfiles: readonly DeviceProfile[],
): DeviceProfileRecord {
  const facts = deviceFactsOf(header, file);
  const profile = chooseProfile(facts, siteProfiles);
  const eventDate = eventDateOf(header);
  if (eventDate === undefined) {
    throw new PermanentRoutineError(
      'The file has no usable date (Acquisition DateTime, Content, Series or Study Date): refused, since its event would be dated by the time of filing',
    );
  }
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
    ],
  };
}

export const deviceProfileRoutine = defineRoutine({
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
    );
    await ctx.mergeRequestData(record.requestData);
    for (const line of record.logLines) ctx.log(line);
    await ctx.addRoutine('EXTRACT_IMAGE');
  },
});
