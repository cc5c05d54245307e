/**
 * `DICOM_SEED` (step 1 of the DICOM chain): checks the request's DICOM payload as a
 * Part 10 file within the configured limits and reads its main tags, on the DICOM module's worker
 * threads (never on the event loop). Stores the tags as the `DICOM_HEADER` row and in `REQUEST_DATA`
 * (keys prefixed `dicom_`), with the transfer syntax, SOP class and frame count; chooses the device
 * profile from the same header and records it, the event date and the eye (keys prefixed `device_`, see
 * `device-profile.ts`); then the chain runs `EXTRACT_IMAGE`. A file that is not a readable Part 10 file, or is
 * over a limit, fails permanently with the cause the reader names (no `DICM` prefix, element past the
 * end of the file, too many elements, ...); so does a file with no usable or plausible date, unless the
 * desk gave the study's date in the console (`device-profile.ts`).
 */
import { findUnstorableCharacter, replaceUnstorableCharacters } from '../../db/schema-profile.ts';
import type { DicomHeader, DicomSummary } from '../dicom/index.ts';
import { DicomError, readDicomFile } from '../dicom/index.ts';
import { PermanentRoutineError, defineFilingRoutine } from './catalog.ts';
import type { DeviceProfileRecord } from './device-profile.ts';
import { CONSOLE_EVENT_DATE_KEY, profileDicomFile } from './device-profile.ts';
import { readDicomPayload } from './dicom-payload.ts';

interface Seed {
  readonly summary: DicomSummary;
  readonly device: DeviceProfileRecord;
}

export const dicomSeedRoutine = defineFilingRoutine<Seed>({
  name: 'DICOM_SEED',
  timeoutMs: 120_000,
  retry: 'backoff',
  prepare: async (ctx) => {
    const bytes = await readDicomPayload(ctx);
    let summary: DicomSummary;
    try {
      // The payload is read for this check alone: its buffer goes to the decoding thread uncopied.
      summary = await readDicomFile(bytes, ctx.config, { isHandedOver: true });
    } catch (error) {
      if (error instanceof DicomError) {
        throw new PermanentRoutineError(`Not a readable DICOM file (${error.code}): ${error.message}`);
      }
      throw error;
    }
    // The study date the desk gave in the console dates a file with no plausible date of its own.
    const requestData = await ctx.readText('REQUEST_DATA');
    const device = profileDicomFile(summary.header, summary, ctx.config.deviceProfiles, {
      now: ctx.now(),
      givenEventDate: requestData[CONSOLE_EVENT_DATE_KEY],
    });
    return { summary, device };
  },
  run: async (ctx, { summary, device }) => {
    const header = storableHeader(summary.header, ctx.schema.maxTextCodePoint, (line) => ctx.log(line));
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
      // What names the worklist entry the study was made for (PATIENT_MATCH).
      dicom_accession_number: header.AccessionNumber,
      dicom_requested_procedure_id: header.RequestedProcedureID,
      dicom_transfer_syntax_uid: summary.transferSyntaxUid,
      dicom_sop_class_uid: summary.sopClassUid,
      dicom_number_of_frames: summary.numberOfFrames,
      dicom_has_pixel_data: summary.hasPixelData,
      dicom_model: header.ManufacturerModelName,
      dicom_sop_instance_uid: header.SOPInstanceUID,
      ...device.requestData,
    });
    ctx.log(
      `DICOM header read (modality ${header.Modality ?? 'none'}, transfer syntax ${summary.transferSyntaxUid}, ${summary.elementCount} elements)`,
    );
    for (const line of device.logLines) ctx.log(line);
  },
});

/**
 * The header with each character the database's text columns cannot hold (beyond the Basic Multilingual
 * Plane on OpenEyes's utf8mb3 tables) replaced by U+FFFD, the tags so changed logged by name: the
 * original file keeps every byte, and a device's emoji never fails the request's writes.
 */
function storableHeader(header: DicomHeader, maxCodePoint: number, log: (line: string) => void): DicomHeader {
  const changed: string[] = [];
  const storable = { ...header };
  for (const [keyword, value] of Object.entries(header) as [keyof DicomHeader, string | null][]) {
    if (value === null || findUnstorableCharacter(value, maxCodePoint) === undefined) continue;
    storable[keyword] = replaceUnstorableCharacters(value, maxCodePoint);
    changed.push(keyword);
  }
  if (changed.length > 0)
    log(`${changed.join(', ')}: characters the database cannot store replaced by U+FFFD`);
  return storable;
}
