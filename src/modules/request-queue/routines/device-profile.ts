/**
 * `DEVICE_PROFILE` (after `DICOM_SEED`): chooses the device profile of the request's DICOM file from its
 * header (Manufacturer, Modality, model, SOP class; see the device-filing module), finds the file's event
 * date and eye, stores them in `REQUEST_DATA` (`device_profile`, `device_subtype`,
 * `device_attachment_type`, `device_extraction`, `device_reader`, `device_filer`, `device_laterality`,
 * `device_eye_id`, `device_event_date`), then chains `EXTRACT_IMAGE`. An unknown device gets the fallback
 * profile and is filed like any other; a file with no date at all fails at once (its event could only be
 * dated by the moment of filing, which a clinician would read as the date of the examination).
 */
import {
  chooseProfile,
  deviceFactsOf,
  eventDateOf,
  eyeIdOf,
  lateralityOf,
} from '../../device-filing/index.ts';
import { PermanentRoutineError, defineRoutine } from './catalog.ts';

export const deviceProfileRoutine = defineRoutine({
  name: 'DEVICE_PROFILE',
  timeoutMs: 30_000,
  retry: 'backoff',
  run: async (ctx) => {
    const { DICOM_HEADER: header = {}, REQUEST_DATA: data = {} } = await ctx.readTexts([
      'DICOM_HEADER',
      'REQUEST_DATA',
    ]);
    const facts = deviceFactsOf(header, {
      sopClassUid: typeof data.dicom_sop_class_uid === 'string' ? data.dicom_sop_class_uid : null,
      hasPixelData: data.dicom_has_pixel_data === true,
    });
    const profile = chooseProfile(facts, ctx.config.deviceProfiles);
    const eventDate = eventDateOf(header);
    if (eventDate === undefined) {
      throw new PermanentRoutineError(
        'The file has no usable date (Acquisition DateTime, Content, Series or Study Date): refused, since its event would be dated by the time of filing',
      );
    }
    const laterality = lateralityOf(header, profile);
    await ctx.mergeRequestData({
      device_profile: profile.name,
      device_subtype: profile.subtype,
      device_attachment_type: profile.attachmentType,
      device_extraction: profile.extraction,
      device_reader: profile.reader,
      device_filer: profile.filer,
      device_laterality: laterality.eye,
      device_eye_id: laterality.eye === null ? null : eyeIdOf(laterality.eye),
      device_event_date: eventDate,
    });
    ctx.log(
      `profile ${profile.name} (modality ${facts.modality ?? 'none'}, ${facts.content}): subtype ${profile.subtype ?? 'none'}, attachment type ${profile.attachmentType}, filer ${profile.filer}`,
    );
    ctx.log(
      laterality.eye === null
        ? `eye: none (${laterality.source}); filed without a body site`
        : `eye: ${laterality.eye} (${laterality.source})`,
    );
    await ctx.addRoutine('EXTRACT_IMAGE');
  },
});
