/**
 * Storage Commitment Push Model SCP (PS3.4 J; statuses PS3.7 10.1.4.1.10 and 10.1.1.1.8; failure reasons
 * PS3.3 C.14.1.1): a device asks, with an N-ACTION (Request Storage Commitment), whether the service
 * holds a list of instances; the service answers the N-ACTION at once and reports in an N-EVENT-REPORT
 * which it holds and which not, on the same association while the device keeps it open, otherwise on a
 * new one to the device's `DICOM_REMOTE_NODES` entry.
 *
 * - Committed means held durably: the instance's receipt (`dicom_received_instance`, written in the
 *   transaction of the request it became) names the same SOP Class UID, and that request still holds the
 *   received bytes (`REQUEST_BLOB`). An unknown instance or one whose bytes were dropped by the clean-up
 *   policy fails with 0112 (no such object instance); a known instance named with another class with
 *   0119 (class-instance conflict); a class the service never stores with 0122 (SOP class not supported).
 * - A request naming more than `DICOM_COMMITMENT_MAX_INSTANCES` instances (or whose data set the PDU gate
 *   cut off) is refused with N-ACTION status 0213 (resource limitation); a malformed one with 0115.
 * - A report to a new association is tried three times, then logged as lost; it is not kept across a
 *   restart. The device may ask again with a new Transaction UID (the answer is recomputed each time).
 * - Logs: counts, statuses, AE titles; never a UID.
 */
import dcmjsDimse from 'dcmjs-dimse';
import type * as Dimse from 'dcmjs-dimse';
import type { Kysely } from 'kysely';
import type { DicomRemoteNode } from '../../config.ts';
import type { DB } from '../../db/schema.ts';
import type { Logger } from '../../logger.ts';
import { findHeldInstances } from './received-instance.queries.ts';
import { findStorageClass } from './storage-classes.ts';

const { Client, Dataset, constants, requests } = dcmjsDimse;

/** Storage Commitment Push Model SOP Class and its well-known SOP Instance (PS3.4 J.3.5, J.3.6). */
export const STORAGE_COMMITMENT_PUSH = '1.2.840.10008.1.20.1';
export const STORAGE_COMMITMENT_INSTANCE = '1.2.840.10008.1.20.1.1';
/** Action Type ID "Request Storage Commitment" (PS3.4 Table J.3-1). */
export const REQUEST_COMMITMENT_ACTION = 1;
/** Event Type IDs (PS3.4 Table J.3-2): every instance committed, or some failed. */
export const COMMITMENT_EVENT = { allCommitted: 1, failuresExist: 2 } as const;

/** N-ACTION-RSP statuses the SCP answers (PS3.7 10.1.4.1.10). */
export const COMMITMENT_STATUS = {
  success: 0x0000,
  processingFailure: 0x0110,
  invalidArgumentValue: 0x0115,
  invalidObjectInstance: 0x0117,
  noSuchAction: 0x0123,
  resourceLimitation: 0x0213,
} as const;

/** Failure Reason (0008,1197) of a Failed SOP Sequence item (PS3.3 C.14.1.1). */
export const FAILURE_REASON = {
  noSuchObjectInstance: 0x0112,
  classInstanceConflict: 0x0119,
  referencedSopClassNotSupported: 0x0122,
} as const;

/** UIDs queried per statement. */
const QUERY_CHUNK = 500;
/** Attempts and the waits between them, for a report on a new association. */
const REPORT_RETRY_DELAYS_MS = [1_000, 5_000] as const;
const REPORT_TIMEOUT_MS = 30_000;
const UID = /^(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))*$/;

export interface CommitmentReference {
  readonly sopClassUid: string;
  readonly sopInstanceUid: string;
}

export interface CommitmentRequest {
  readonly transactionUid: string;
  readonly references: readonly CommitmentReference[];
}

export type CommitmentReading =
  | { readonly ok: true; readonly request: CommitmentRequest }
  | { readonly ok: false; readonly status: number; readonly comment: string };

export interface CommitmentReport {
  readonly transactionUid: string;
  readonly committed: readonly CommitmentReference[];
  readonly failed: readonly (CommitmentReference & { readonly reason: number })[];
}

/** True for a UID of PS3.5 9.1 (at most 64 characters, digits and dots, no leading zeros). */
function isUid(value: unknown): value is string {
  return typeof value === 'string' && value.length <= 64 && UID.test(value);
}

/** The single string of a naturalized value (dcmjs gives a string or a one-element array). */
function single(value: unknown): unknown {
  return Array.isArray(value) ? (value.length === 1 ? (value[0] as unknown) : undefined) : value;
}

/**
 * Reads the N-ACTION data set (naturalized by the library): Transaction UID (0008,1195) and Referenced
 * SOP Sequence (0008,1199) of Referenced SOP Class UID / Instance UID items.
 */
export function readCommitmentRequest(
  elements: Record<string, unknown> | undefined,
  maxInstances: number,
): CommitmentReading {
  const invalid = (comment: string): CommitmentReading => ({
    ok: false,
    status: COMMITMENT_STATUS.invalidArgumentValue,
    comment,
  });
  if (elements === undefined) return invalid('no data set');
  const transactionUid = single(elements.TransactionUID);
  if (!isUid(transactionUid)) return invalid('Transaction UID missing or not a UID');
  const items = elements.ReferencedSOPSequence;
  if (!Array.isArray(items) || items.length === 0) return invalid('Referenced SOP Sequence missing or empty');
  if (items.length > maxInstances)
    return {
      ok: false,
      status: COMMITMENT_STATUS.resourceLimitation,
      comment: `more than ${maxInstances} instances (DICOM_COMMITMENT_MAX_INSTANCES)`,
    };
  const references: CommitmentReference[] = [];
  for (const item of items as unknown[]) {
    const fields = (item ?? {}) as Record<string, unknown>;
    const sopClassUid = single(fields.ReferencedSOPClassUID);
    const sopInstanceUid = single(fields.ReferencedSOPInstanceUID);
    if (!isUid(sopClassUid) || !isUid(sopInstanceUid))
      return invalid('a Referenced SOP Sequence item lacks a valid class or instance UID');
    references.push({ sopClassUid, sopInstanceUid });
  }
  return { ok: true, request: { transactionUid, references } };
}

/** Which of the request's instances the service holds durably (see the file comment). */
export async function checkCommitment(db: Kysely<DB>, request: CommitmentRequest): Promise<CommitmentReport> {
  const uids = [...new Set(request.references.map((r) => r.sopInstanceUid))];
  const held = new Map<string, { sopClassUid: string; isHeld: boolean }>();
  for (let start = 0; start < uids.length; start += QUERY_CHUNK)
    for (const row of await findHeldInstances(db, uids.slice(start, start + QUERY_CHUNK)))
      held.set(row.sopInstanceUid, row);
  const committed: CommitmentReference[] = [];
  const failed: (CommitmentReference & { reason: number })[] = [];
  for (const reference of request.references) {
    const row = held.get(reference.sopInstanceUid);
    if (findStorageClass(reference.sopClassUid) === undefined)
      failed.push({ ...reference, reason: FAILURE_REASON.referencedSopClassNotSupported });
    else if (row === undefined || !row.isHeld)
      failed.push({ ...reference, reason: FAILURE_REASON.noSuchObjectInstance });
    else if (row.sopClassUid !== reference.sopClassUid)
      failed.push({ ...reference, reason: FAILURE_REASON.classInstanceConflict });
    else committed.push(reference);
  }
  return { transactionUid: request.transactionUid, committed, failed };
}

/** The N-EVENT-REPORT-RQ of a report (PS3.4 Table J.3-2), its data set in `transferSyntaxUid`. */
export function reportRequest(
  report: CommitmentReport,
  transferSyntaxUid: string,
): Dimse.requests.NEventReportRequest {
  const eventType =
    report.failed.length === 0 ? COMMITMENT_EVENT.allCommitted : COMMITMENT_EVENT.failuresExist;
  const request = new requests.NEventReportRequest(
    STORAGE_COMMITMENT_PUSH,
    STORAGE_COMMITMENT_INSTANCE,
    eventType,
  );
  const elements: Record<string, unknown> = { TransactionUID: report.transactionUid };
  if (report.committed.length > 0)
    elements.ReferencedSOPSequence = report.committed.map((r) => ({
      ReferencedSOPClassUID: r.sopClassUid,
      ReferencedSOPInstanceUID: r.sopInstanceUid,
    }));
  if (report.failed.length > 0)
    elements.FailedSOPSequence = report.failed.map((r) => ({
      ReferencedSOPClassUID: r.sopClassUid,
      ReferencedSOPInstanceUID: r.sopInstanceUid,
      FailureReason: r.reason,
    }));
  request.setDataset(new Dataset(elements, transferSyntaxUid));
  return request;
}

/**
 * Sends `report` on a new association from `callingAeTitle` to `node` (the Storage Commitment context
 * proposed in both transfer syntaxes of the report), retrying twice; resolves to the device's status, or
 * undefined when no attempt got an answer.
 */
export async function sendReportToNode(
  report: CommitmentReport,
  node: DicomRemoteNode,
  callingAeTitle: string,
  logger: Logger,
): Promise<number | undefined> {
  for (let attempt = 0; ; attempt++) {
    const status = await sendOnce(report, node, callingAeTitle).catch((error: unknown) => {
      logger.warn(
        { calledAeTitle: node.aeTitle, attempt: attempt + 1, error: (error as Error).message },
        'storage commitment report: association to the device failed',
      );
      return undefined;
    });
    if (status !== undefined) return status;
    const delay = REPORT_RETRY_DELAYS_MS[attempt];
    if (delay === undefined) return undefined;
    await new Promise((resolve) => setTimeout(resolve, delay));
  }
}

function sendOnce(report: CommitmentReport, node: DicomRemoteNode, callingAeTitle: string): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const client = new Client();
    const request = reportRequest(report, constants.TransferSyntax.ExplicitVRLittleEndian);
    let status: number | undefined;
    request.on('response', (response: Dimse.responses.NEventReportResponse) => {
      status = response.getStatus();
    });
    client.addRequest(request);
    client.on('associationRejected', () => reject(new Error('association rejected')));
    client.on('networkError', (error: Error) => reject(error));
    client.on('closed', () => {
      if (status === undefined) reject(new Error('closed without an answer'));
      else resolve(status);
    });
    client.send(node.host, node.port, callingAeTitle, node.aeTitle, {
      connectTimeout: REPORT_TIMEOUT_MS,
      associationTimeout: REPORT_TIMEOUT_MS,
      pduTimeout: REPORT_TIMEOUT_MS,
    });
  });
}
