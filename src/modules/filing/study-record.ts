/**
 * The study record of a DICOM request, as the filing steps read it: the `DICOM_STUDY` row receipt
 * queued the request with (the header its checks read; see the DICOM module's `study-record.ts`),
 * checked once against its schema. A request that has no valid record (queued by queue add's raw or
 * multipart body, which reads no header, or received before receipt stored one) has the header of its
 * payload read once, by the first step that needs it; that step stores the record it built
 * ({@link storeRebuiltRecord}), so that every step after it reads the row instead.
 */
import type { DicomStudyRecord } from '../dicom/index.ts';
import {
  DICOM_STUDY_MNEMONIC,
  DicomError,
  parseStudyRecord,
  readDicomFile,
  storableStudyRecord,
  studyRecordOf,
} from '../dicom/index.ts';
import type { PrepareContext, RoutineContext } from './catalog.ts';
import { PermanentRoutineError } from './catalog.ts';
import { readDicomPayload } from './dicom-payload.ts';

/** The record a step works from, and whether it was built from the payload (then stored by the step). */
export interface StudyRecordRead {
  readonly record: DicomStudyRecord;
  readonly isRebuilt: boolean;
}

/** The request's stored record when it is a valid one of this version, else undefined. */
export async function readStoredStudyRecord(ctx: PrepareContext): Promise<DicomStudyRecord | undefined> {
  return parseStudyRecord(await ctx.readText(DICOM_STUDY_MNEMONIC));
}

/**
 * The request's record: the stored one, else one read from the payload's header (see the file comment).
 * A payload that is not a readable Part 10 file, or is over a limit, fails the step permanently with
 * the cause the reader names.
 */
export async function readStudyRecord(ctx: PrepareContext): Promise<StudyRecordRead> {
  const stored = await readStoredStudyRecord(ctx);
  if (stored !== undefined) return { record: stored, isRebuilt: false };
  const bytes = await readDicomPayload(ctx);
  const sizeBytes = bytes.length;
  try {
    // The payload is read for this check alone: its buffer goes to the decoding thread uncopied.
    const summary = await readDicomFile(bytes, ctx.config, { isHandedOver: true });
    return { record: studyRecordOf(summary, sizeBytes), isRebuilt: true };
  } catch (error) {
    if (error instanceof DicomError) {
      throw new PermanentRoutineError(`Not a readable DICOM file (${error.code}): ${error.message}`);
    }
    throw error;
  }
}

/**
 * Stores a record built from the payload as the request's `DICOM_STUDY` row (characters the database
 * cannot hold replaced, as receipt does), and answers the record as stored; a stored record unchanged.
 */
export async function storeRebuiltRecord(
  ctx: RoutineContext,
  read: StudyRecordRead,
): Promise<DicomStudyRecord> {
  if (!read.isRebuilt) return read.record;
  const record = storableStudyRecord(read.record, ctx.schema.maxTextCodePoint);
  await ctx.putText(DICOM_STUDY_MNEMONIC, record);
  ctx.log('study record read from the payload (the request was queued without one)');
  return record;
}
