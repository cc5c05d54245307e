/**
 * `FILE_BIOMETRY`: files a biometry device's object of the matched patient as OpenEyes's Biometry
 * (OphInBiometry) event of its study, in place of `ATTACH_TO_EVENT` (the device profile chains it after
 * `PATIENT_MATCH`). `prepare` reads the file's measurements (the IOLMaster's 99CZM private data, or a
 * standard axial measurements / IOL calculation object) on the DICOM module's worker threads; `run`
 * files them, and files the report images or PDF the chain extracted (`DICOM_PDF`, `DICOM_IMAGE_<n>`)
 * under the same event. A report that arrives
 * before the measurements creates the event, which the measurements join later. A file that is no
 * biometry after all is filed generically: the chain runs `ATTACH_TO_EVENT` next. Holds the patient's lock, as
 * `ATTACH_TO_EVENT` does, so that two files of one study never create two events.
 *
 * A file beyond the site's caps (`BIOMETRY_MAX_*_PER_EYE`: lenses, formulas, calculations per eye) fails
 * at once, before anything is written, with the reason in the routine's log; so does an identifier longer
 * than its column, and so does a study date that cannot date the event (not a date, before 1900 or the
 * patient's birth, more than a day ahead: `checkEventDate`). The writes give the event loop a turn between chunks (`ctx.yieldTurn`), where the time
 * limit stops them.
 */
import type { BiometryFile } from '../biometry/index.ts';
import {
  BiometryFileError,
  biometryLimitRefusal,
  fileBiometry,
  readBiometryFileOnThread,
  readBiometryTypes,
} from '../biometry/index.ts';
import { ColumnWidthError, checkEventDate } from '../device-filing/index.ts';
import { DicomError } from '../dicom/index.ts';
import { PermanentRoutineError, defineFilingRoutine } from './catalog.ts';
import type { DeviceDecision } from './device-profile.ts';
import { readDeviceDecision } from './device-profile.ts';
import { readDicomPayload } from './dicom-payload.ts';

/** The rows `EXTRACT_IMAGE` makes of a DICOM payload: what a biometry report is filed as. */
const isReportMnemonic = (mnemonic: string) =>
  mnemonic === 'DICOM_PDF' || mnemonic.startsWith('DICOM_IMAGE_');

/** What `FILE_BIOMETRY` did: filed the biometry event, or found no biometry (filed generically next). */
export interface FileBiometryOutcome {
  readonly kind: 'filed' | 'filed-generically';
}

export const fileBiometryRoutine = defineFilingRoutine<BiometryFile, FileBiometryOutcome>({
  name: 'FILE_BIOMETRY',
  timeoutMs: 60_000,
  retry: 'backoff',
  prepare: async (ctx) => {
    const bytes = await readDicomPayload(ctx);
    let file: BiometryFile;
    try {
      file = await readBiometryFileOnThread(bytes, ctx.config);
    } catch (error) {
      if (error instanceof BiometryFileError) throw new PermanentRoutineError(error.message);
      if (error instanceof DicomError) {
        throw new PermanentRoutineError(
          `The biometry data cannot be read (${error.code}): ${error.message.slice(0, 200)}`,
        );
      }
      throw error;
    }
    if (file.kind === 'measurements') {
      const refusal = biometryLimitRefusal(file.reading, {
        maxLensesPerEye: ctx.config.biometryMaxLensesPerEye,
        maxFormulasPerEye: ctx.config.biometryMaxFormulasPerEye,
        maxCalculationsPerEye: ctx.config.biometryMaxCalculationsPerEye,
      });
      if (refusal !== undefined) throw new PermanentRoutineError(`Biometry file refused: ${refusal}`);
    }
    return file;
  },
  run: async (ctx, file) => {
    if (file.kind === 'other') {
      ctx.log(`not filed as biometry (${file.reason}): filed generically`);
      return { kind: 'filed-generically' };
    }
    const { texts, payloads } = await ctx.readRequest(['REQUEST_DATA']);
    const patientId = texts.REQUEST_DATA?.matched_patient_id;
    if (typeof patientId !== 'number' || !Number.isInteger(patientId)) {
      throw new PermanentRoutineError('No matched patient: PATIENT_MATCH must run first');
    }
    const patient = await ctx.trx
      .selectFrom('patient')
      .select('dob')
      .where('id', '=', patientId)
      .executeTakeFirst();
    const dateProblem = checkEventDate(file.study.eventDate, {
      now: ctx.now(),
      birthDate: patient?.dob ?? null,
    });
    if (dateProblem !== undefined)
      throw new PermanentRoutineError(
        `Biometry file refused: its date (${file.study.eventDate}) ${dateProblem}`,
      );
    const types = await ctx.reference('biometry event types', readBiometryTypes);
    if (types === undefined) throw new PermanentRoutineError('The Biometry event type is not configured');
    await ctx.lock(`patient:${patientId}`);
    const result = await fileBiometry(
      {
        offersNewLenses: ctx.config.biometryOffersNewLenses,
        yieldTurn: () => ctx.yieldTurn(),
        trx: ctx.trx,
        dialect: ctx.dialect,
        schema: ctx.schema,
        stamp: ctx.stamp(),
        institutionCode: ctx.config.institutionCode,
        timeZone: ctx.config.timeZone,
        requestId: ctx.routine.request_id,
        log: (line) => ctx.log(line),
      },
      types,
      {
        patientId,
        study: file.study,
        ...(file.kind === 'measurements' ? { reading: file.reading } : {}),
        attachmentIds: payloads.filter((p) => isReportMnemonic(p.attachment_mnemonic)).map((p) => p.id),
        ...profileEyeOf(readDeviceDecision(texts.REQUEST_DATA ?? {})),
      },
    ).catch((error: unknown) => {
      if (error instanceof ColumnWidthError)
        throw new PermanentRoutineError(`Biometry file refused: ${error.message}`);
      throw error;
    });
    if (file.kind === 'measurements') {
      ctx.log(`${file.source}: ${result.changedRows} biometry row(s) written`);
    }
    await ctx.mergeRequestData({ event_id: result.eventId });
    return { kind: 'filed' };
  },
});

/** The eye DICOM_SEED chose from the header or the device profile's rule, when it chose one. */
function profileEyeOf(decision: DeviceDecision | undefined): { profileEye?: 'L' | 'R' | 'B' } {
  return decision === undefined || decision.eye === null ? {} : { profileEye: decision.eye };
}
