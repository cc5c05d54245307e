/**
 * Receiving one DICOM instance, whatever the path it came by (a STOW-RS part, a C-STORE): the checks of
 * `instance.ts`, then queue intake exactly as queue add takes a raw `application/dicom` body (the same
 * limits, content checks and rows: REQUEST_DATA, the payload, HEADER_DATA without credentials), in one
 * transaction with the instance's receipt row and its query/retrieve index row. The header the checks
 * read is queued with it as its study record (the `DICOM_STUDY` row, in the same transaction), which
 * the filing steps read instead of parsing the file again. REQUEST_DATA carries what queue add's Mirth caller put in
 * its query string (`request_type`, `system_message`, `content_type`) and what identifies the source.
 */
import type { Config } from '../../config.ts';
import type { Database } from '../../db/database.ts';
import { nowDateTime } from '../../db/database.ts';
import { AppError, isDatabaseUnavailable } from '../../errors.ts';
import { DICOM_STUDY_MNEMONIC, storableStudyRecord, studyRecordOf } from '../dicom/index.ts';
import type { AlongsideWrite, IntakeService } from '../request-queue/index.ts';
import type { ReceivePath } from './dicom-metrics.ts';
import { countInstance } from './dicom-metrics.ts';
import type { FailureReason } from './instance.ts';
import { FAILURE, checkInstance } from './instance.ts';
import { insertFirstReceipt, upsertInstanceIndex, upsertReceipt } from './received-instance.queries.ts';

/** The request type every received instance becomes. */
export const DICOM_REQUEST_TYPE = 'dicom_request';

/** Where an instance came from; what of it is stored in the request. */
export interface InstanceSource {
  readonly path: ReceivePath;
  /** `request.system_message`, the column the queue admin lists: `STOW-RS`, or the calling AE title. */
  readonly systemMessage: string;
  /** Source keys added to REQUEST_DATA (`source`, `calling_ae_title`, ...), and any query parameters. */
  readonly requestData: Readonly<Record<string, unknown>>;
  /** HEADER_DATA: the transport's headers (credentials are dropped by intake). */
  readonly headers: Readonly<Record<string, string | readonly string[] | undefined>>;
  readonly clientAddress: string;
  /** Audit user of the rows: the Basic user of STOW-RS, the system user 1 for C-STORE. */
  readonly userId: number;
}

export interface ReceiveOptions {
  /** The Study Instance UID the instance must belong to (STOW-RS `studies/{uid}`). */
  readonly expectedStudyUid?: string;
}

export type ReceiveOutcome =
  | {
      readonly ok: true;
      readonly requestId: number;
      readonly sopClassUid: string;
      readonly sopInstanceUid: string;
    }
  | {
      readonly ok: false;
      readonly reason: FailureReason;
      readonly sopClassUid: string | undefined;
      readonly sopInstanceUid: string | undefined;
      /** For the log (no patient data, no value read from the file). */
      readonly cause: string;
      /** The unexpected error behind a processing failure, for the log. */
      readonly error?: unknown;
      /** A lack of resources that passes (the database unavailable): the same instance may succeed later. */
      readonly isTransient?: boolean;
    };

export interface DicomReceiver {
  /** Checks and queues one Part 10 instance; never throws for anything about the instance itself. */
  receive(bytes: Buffer, source: InstanceSource, options?: ReceiveOptions): Promise<ReceiveOutcome>;
}

export function createDicomReceiver(deps: {
  readonly database: Database;
  readonly config: Config;
  /** The process's queue intake. */
  readonly intake: IntakeService;
}): DicomReceiver {
  const { database, config, intake } = deps;
  const isRefusingDuplicates = config.dicomNetwork.duplicates === 'refuse';

  async function receive(
    bytes: Buffer,
    source: InstanceSource,
    options: ReceiveOptions = {},
  ): Promise<ReceiveOutcome> {
    let check;
    try {
      check = await checkInstance(bytes, config, options.expectedStudyUid);
    } catch (error) {
      return {
        ok: false,
        reason: FAILURE.processingFailure,
        sopClassUid: undefined,
        sopInstanceUid: undefined,
        cause: 'unexpected error in the checks',
        error,
      };
    }
    if (!check.ok) return check;
    const { sopClassUid, sopInstanceUid, header } = check;
    const studyRecord = storableStudyRecord(
      studyRecordOf(check.summary, bytes.length),
      database.schema.maxTextCodePoint,
    );
    const receipt: AlongsideWrite = async (trx, requestId) => {
      const instance = { sopInstanceUid, sopClassUid, requestId, now: nowDateTime() };
      if (isRefusingDuplicates) await insertFirstReceipt(trx, instance);
      else await upsertReceipt(trx, database.dialect, instance);
      await upsertInstanceIndex(
        trx,
        database.dialect,
        { ...instance, header },
        database.schema.maxTextCodePoint,
      );
    };
    try {
      const requestId = await intake.submitDicomInstance({
        bytes,
        requestData: {
          ...source.requestData,
          request_type: DICOM_REQUEST_TYPE,
          system_message: source.systemMessage,
          content_type: 'application/dicom',
        },
        headers: source.headers,
        clientAddress: source.clientAddress,
        userId: source.userId,
        describingRows: [{ mnemonic: DICOM_STUDY_MNEMONIC, value: studyRecord }],
        alongside: receipt,
      });
      return { ok: true, requestId, sopClassUid, sopInstanceUid };
    } catch (error) {
      const failure = (
        reason: FailureReason,
        cause: string,
        unexpected?: unknown,
        isTransient = false,
      ): ReceiveOutcome => ({
        ok: false,
        reason,
        sopClassUid,
        sopInstanceUid,
        cause,
        ...(unexpected === undefined ? {} : { error: unexpected }),
        ...(isTransient ? { isTransient } : {}),
      });
      if (isRefusingDuplicates && database.dialect.classifyError(error) === 'unique')
        return failure(FAILURE.duplicateSopInstance, 'SOP Instance UID received before');
      if (isDatabaseUnavailable(error))
        return failure(FAILURE.outOfResources, 'database unavailable', undefined, true);
      if (error instanceof AppError && error.code === 'validation_failed')
        return failure(
          FAILURE.processingFailure,
          `refused by queue intake: ${Object.keys(error.fields ?? {}).join(', ')}`,
        );
      return failure(FAILURE.processingFailure, 'unexpected error', error);
    }
  }

  return {
    async receive(bytes, source, options) {
      const outcome = await receive(bytes, source, options);
      countInstance(source.path, bytes.length, outcome.ok ? undefined : outcome.reason);
      return outcome;
    },
  };
}
