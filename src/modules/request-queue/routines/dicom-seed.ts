/**
 * `DICOM_SEED` (reference 9.6, step 1 of the DICOM chain): parses the DICOM Part 10 header of the
 * request's DICOM payload with `dicom-parser`, stops before the pixel data (so the parse is a short,
 * header-sized piece of synchronous work), stores the main tags as the `DICOM_HEADER` row and in
 * `REQUEST_DATA` (keys prefixed `dicom_`), then chains `PATIENT_MATCH`.
 */
import dicomParser from 'dicom-parser';
import type { PrepareContext } from './catalog.ts';
import { PermanentRoutineError, defineRoutine } from './catalog.ts';
import { findPayloads, readPayloadBytes } from '../../attachment-data/index.ts';

/** The tags read, by DICOM keyword: (group,element) as dicom-parser names them. */
export const DICOM_TAGS = {
  PatientID: 'x00100020',
  PatientName: 'x00100010',
  PatientBirthDate: 'x00100030',
  PatientSex: 'x00100040',
  Modality: 'x00080060',
  Manufacturer: 'x00080070',
  StudyInstanceUID: 'x0020000d',
  StudyDate: 'x00080020',
} as const;

export type DicomHeader = Record<keyof typeof DICOM_TAGS, string | null>;

/** Reads the tags of {@link DICOM_TAGS} from a Part 10 file; throws on anything that is not one. */
export function parseDicomHeader(bytes: Uint8Array): DicomHeader {
  const dataSet = dicomParser.parseDicom(bytes, { untilTag: 'x7fe00010' });
  const header = {} as DicomHeader;
  for (const [keyword, tag] of Object.entries(DICOM_TAGS) as [keyof typeof DICOM_TAGS, string][]) {
    const value = dataSet.string(tag);
    header[keyword] = value === undefined || value.trim() === '' ? null : value.trim();
  }
  return header;
}

async function findDicomPayload(ctx: PrepareContext): Promise<Buffer> {
  const payloads = await findPayloads(ctx.db, ctx.routine.request_id);
  const payload =
    payloads.find((p) => p.mime_type === 'application/dicom') ??
    payloads.find((p) => p.attachment_mnemonic === 'REQUEST_BLOB');
  if (payload === undefined) throw new PermanentRoutineError('No DICOM payload in the request');
  return readPayloadBytes(ctx.db, payload.id);
}

export const dicomSeedRoutine = defineRoutine<DicomHeader>({
  name: 'DICOM_SEED',
  timeoutMs: 30_000,
  retry: 'backoff',
  prepare: async (ctx) => {
    const bytes = await findDicomPayload(ctx);
    try {
      return parseDicomHeader(bytes);
    } catch {
      throw new PermanentRoutineError('The payload is not a readable DICOM Part 10 file');
    }
  },
  run: async (ctx, header) => {
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
    });
    ctx.log(`DICOM header read (modality ${header.Modality ?? 'none'})`);
    await ctx.addRoutine('PATIENT_MATCH');
  },
});
