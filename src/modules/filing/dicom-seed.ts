/**
 * `DICOM_SEED` (step 1 of the DICOM chain): reads the request's study record (`DICOM_STUDY`, queued by
 * receipt from the header its checks read: `study-record.ts`), so that the payload is not parsed here;
 * a request without one (queue add's body) has its payload checked as a Part 10 file within the
 * configured limits and its header read once, on the DICOM module's worker threads, and the record so
 * built stored. Stores the header as the `DICOM_HEADER` row and mirrors the keys the console shows and
 * the desk corrects into `REQUEST_DATA` (prefixed `dicom_`: the patient's, which `PATIENT_MATCH` reads
 * as the desk left them, the study's and the file's); chooses the device profile from the record and
 * records it, the event date and the eye (keys prefixed `device_`, see `device-profile.ts`); then the
 * chain runs `EXTRACT_IMAGE`. A file that is not a readable Part 10 file, or is over a limit, fails
 * permanently with the cause the reader names (no `DICM` prefix, element past the end of the file, too
 * many elements, ...); so does a file with no usable or plausible date, unless the desk gave the
 * study's date in the console (`device-profile.ts`).
 */
import type { DicomStudyRecord } from '../dicom/index.ts';
import { defineFilingRoutine } from './catalog.ts';
import type { DeviceProfileRecord } from './device-profile.ts';
import { CONSOLE_EVENT_DATE_KEY, profileDicomFile } from './device-profile.ts';
import type { StudyRecordRead } from './study-record.ts';
import { readStudyRecord, storeRebuiltRecord } from './study-record.ts';

interface Seed {
  readonly study: StudyRecordRead;
  readonly device: DeviceProfileRecord;
}

export const dicomSeedRoutine = defineFilingRoutine<Seed>({
  name: 'DICOM_SEED',
  timeoutMs: 120_000,
  retry: 'backoff',
  prepare: async (ctx) => {
    const study = await readStudyRecord(ctx);
    const { record } = study;
    // The study date the desk gave in the console dates a file with no plausible date of its own.
    const requestData = await ctx.readText('REQUEST_DATA');
    const device = profileDicomFile(record.header, record, ctx.config.deviceProfiles, {
      now: ctx.now(),
      givenEventDate: requestData[CONSOLE_EVENT_DATE_KEY],
    });
    return { study, device };
  },
  run: async (ctx, { study, device }) => {
    const record: DicomStudyRecord = await storeRebuiltRecord(ctx, study);
    const { header } = record;
    if (record.replacedKeywords.length > 0)
      ctx.log(
        `${record.replacedKeywords.join(', ')}: characters the database cannot store replaced by U+FFFD`,
      );
    await ctx.putText('DICOM_HEADER', header);
    await ctx.mergeRequestData({
      dicom_patient_id: header.PatientID,
      dicom_patient_name: header.PatientName,
      dicom_patient_birth_date: header.PatientBirthDate,
      dicom_patient_sex: header.PatientSex,
      dicom_modality: header.Modality,
      dicom_manufacturer: header.Manufacturer,
      dicom_study_instance_uid: header.StudyInstanceUID,
      dicom_study_date: header.StudyDate,
      dicom_accession_number: header.AccessionNumber,
      dicom_requested_procedure_id: header.RequestedProcedureID,
      dicom_transfer_syntax_uid: record.transferSyntaxUid,
      dicom_sop_class_uid: record.sopClassUid,
      dicom_number_of_frames: record.numberOfFrames,
      dicom_has_pixel_data: record.hasPixelData,
      dicom_model: header.ManufacturerModelName,
      dicom_sop_instance_uid: header.SOPInstanceUID,
      ...device.requestData,
    });
    ctx.log(
      `DICOM header ${study.isRebuilt ? 'read' : 'from the study record'} (modality ${header.Modality ?? 'none'}, transfer syntax ${record.transferSyntaxUid}, ${record.elementCount} elements)`,
    );
    for (const line of device.logLines) ctx.log(line);
  },
});
