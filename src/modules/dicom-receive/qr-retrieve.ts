/**
 * The query/retrieve C-MOVE and C-GET (PS3.4 C.4.2, C.4.3) in the Patient Root and Study Root models:
 * what the identifier names is read from `dicom_instance_index`, and each instance is sent, one at a time,
 * as the service received it (the data set of its request's `REQUEST_BLOB` payload, byte for byte after
 * the file meta information) through a sink: a C-STORE on a new association to the move destination
 * (`qr-move.ts`) or on the caller's own association (C-GET, `dimse-server.ts`).
 *
 * - Identifier: the Query/Retrieve Level and the unique keys of C.4.2.2.1: PATIENT (Patient Root only) a
 *   single Patient ID, answered as C-FIND answers it (a study filed to a patient is that patient's
 *   identifier for `INSTITUTION_CODE`, any other the Patient ID the device sent); STUDY a Study Instance
 *   UID, SERIES a Series Instance UID, IMAGE a SOP Instance UID, each a single value or a list (`\`);
 *   UID keys of the levels above are matched too. A missing key, a wildcard or an unknown level: A900.
 * - At most `DICOM_QR_MAX_RETRIEVE` instances: a retrieve naming more is refused with A702 before any
 *   is sent (counted in the index, nothing read).
 * - Sub-operations are counted (remaining, completed, failed, warning) and reported in a pending
 *   response after each one; an instance whose bytes are gone (the clean-up policy dropped them), or that
 *   the sink could not send (no accepted context for its SOP class and transfer syntax, a refusal by the
 *   destination), is failed and listed in the final response's Failed SOP Instance UID List
 *   (0008,0058). The final status is 0000, or B000 when any failed or had a warning; a C-CANCEL-RQ seen
 *   between sub-operations ends with FE00 and the counts so far.
 * - Memory: the index is read in pages of SOP Instance UIDs and each instance's bytes are read only when
 *   it is sent, so one retrieve holds one instance at a time whatever it names.
 * - Audit: before a page is sent, one row `dicom.move` / `dicom.get` (the caller's AE title as user name,
 *   its address, the association) with the filed patients' ids, and one with the requests holding the
 *   page's instances (each request is one received instance of a study): who, which patient, which
 *   studies. A page whose rows could not be written is not sent (C000).
 * - Logs: counts and statuses, never a UID or a value of the identifier.
 */
import dcmjsDimse from 'dcmjs-dimse';
import type { Config } from '../../config.ts';
import type { Database } from '../../db/database.ts';
import type { Logger } from '../../logger.ts';
import type { AuditTrail } from '../audit/index.ts';
import { ChangedWhileReadingError, readBlobSlices } from '../attachment-data/index.ts';
import type { AnswerElement } from '../worklist/index.ts';
import { encodeAnswer, readIdentifier, readQuery } from '../worklist/index.ts';
import type { RetrieveRow, RetrieveUids } from './qr.queries.ts';
import { countRetrieve, findStudiesOfPatientId, readFiledPatients, readRetrievePage } from './qr.queries.ts';

const { Dataset } = dcmjsDimse;

/** Patient Root and Study Root Query/Retrieve Information Model - MOVE and - GET (PS3.4 C.6.1, C.6.2). */
export const PATIENT_ROOT_MOVE = '1.2.840.10008.5.1.4.1.2.1.2';
export const STUDY_ROOT_MOVE = '1.2.840.10008.5.1.4.1.2.2.2';
export const PATIENT_ROOT_GET = '1.2.840.10008.5.1.4.1.2.1.3';
export const STUDY_ROOT_GET = '1.2.840.10008.5.1.4.1.2.2.3';

/** C-MOVE / C-GET response statuses (PS3.4 C.4.2.1.5, C.4.3.1.4). */
export const RETRIEVE_STATUS = {
  success: 0x0000,
  pending: 0xff00,
  cancel: 0xfe00,
  /** Sub-operations complete, one or more failures or warnings. */
  warning: 0xb000,
  /** Refused: out of resources, unable to perform sub-operations. */
  outOfResources: 0xa702,
  moveDestinationUnknown: 0xa801,
  identifierDoesNotMatch: 0xa900,
  unableToProcess: 0xc000,
} as const;

const PAGE_ROWS = 100;
const QUERY_RETRIEVE_LEVEL = 0x00080052;
const FAILED_SOP_INSTANCE_UID_LIST = 0x00080058;
/** A UI value in Explicit VR has a 16-bit length: the list names as many failed UIDs as fit. */
const MAX_UI_LIST_BYTES = 0xfffe;
const META_PREFIX_BYTES = 4096;

type Level = 'PATIENT' | 'STUDY' | 'SERIES' | 'IMAGE';
const LEVELS: readonly Level[] = ['PATIENT', 'STUDY', 'SERIES', 'IMAGE'];
const UID_KEYS: readonly {
  readonly tag: number;
  readonly level: Level;
  readonly column: 'study_instance_uid' | 'series_instance_uid' | 'sop_instance_uid';
}[] = [
  { tag: 0x0020000d, level: 'STUDY', column: 'study_instance_uid' },
  { tag: 0x0020000e, level: 'SERIES', column: 'series_instance_uid' },
  { tag: 0x00080018, level: 'IMAGE', column: 'sop_instance_uid' },
];

export function isRetrieveSopClass(uid: string): boolean {
  return (
    uid === PATIENT_ROOT_MOVE || uid === STUDY_ROOT_MOVE || uid === PATIENT_ROOT_GET || uid === STUDY_ROOT_GET
  );
}

/** One instance to send: its data set as received, in the transfer syntax it was received in. */
export interface RetrieveInstance {
  readonly sopClassUid: string;
  readonly sopInstanceUid: string;
  readonly transferSyntaxUid: string;
  readonly dataSet: Buffer;
}

export interface SubOperationCounts {
  readonly remaining: number;
  readonly completed: number;
  readonly failed: number;
  readonly warning: number;
}

/** A SOP class and the transfer syntax its instances are held in (what a sub-association proposes). */
export interface StoragePair {
  readonly sopClassUid: string;
  readonly transferSyntaxUid: string;
}

export interface RetrieveSink {
  /**
   * Called once the instances are known and within the cap, before any is sent; with the SOP class and
   * transfer syntax pairs when `needsPairs` (a new association must propose them). A refusal ends the
   * retrieve with its status.
   */
  begin(
    pairs: readonly StoragePair[],
  ): Promise<
    { readonly ok: true } | { readonly ok: false; readonly status: number; readonly comment: string }
  >;
  readonly needsPairs: boolean;
  /** Sends one instance; resolves to the C-STORE status, or undefined when it could not be sent. */
  store(instance: RetrieveInstance): Promise<number | undefined>;
  /** A pending response with the counts so far. */
  pending(counts: SubOperationCounts): Promise<void>;
  isCancelled(): boolean;
  /** Called once at the end, whatever the outcome (closes a sub-association). */
  end(): Promise<void>;
}

export interface RetrieveRequest {
  readonly sopClassUid: string;
  readonly identifier: Buffer;
  readonly isExplicitVr: boolean;
  readonly callingAeTitle: string;
  readonly address: string;
  readonly associationId: string;
  /** The C-MOVE's Move Destination (for the audit detail). */
  readonly destination?: string;
}

export interface RetrieveOutcome {
  readonly status: number;
  readonly comment?: string;
  readonly counts: SubOperationCounts;
  /** The final response's identifier (the Failed SOP Instance UID List), when any failed. */
  readonly identifier?: Buffer;
}

export interface QrRetriever {
  retrieve(request: RetrieveRequest, sink: RetrieveSink): Promise<RetrieveOutcome>;
}

const NO_COUNTS: SubOperationCounts = { remaining: 0, completed: 0, failed: 0, warning: 0 };

export function createQrRetriever(deps: {
  readonly database: Database;
  readonly config: Config;
  readonly logger: Logger;
  readonly audit: AuditTrail;
}): QrRetriever {
  const { database, config } = deps;
  const { db, dialect } = database;
  const maxRetrieve = config.dicomNetwork.qrMaxRetrieve;

  return {
    async retrieve(request, sink) {
      let isBegun = false;
      try {
        const named = await readRetrieveKeys(request);
        if (!named.ok)
          return {
            status: RETRIEVE_STATUS.identifierDoesNotMatch,
            comment: named.comment,
            counts: NO_COUNTS,
          };
        const { uids } = named;
        const total = await countRetrieve(db, uids);
        if (total > maxRetrieve) {
          deps.logger.warn({ instances: total }, 'query/retrieve refused at DICOM_QR_MAX_RETRIEVE');
          return {
            status: RETRIEVE_STATUS.outOfResources,
            comment: `more than ${maxRetrieve} instances (DICOM_QR_MAX_RETRIEVE): retrieve fewer at a time`,
            counts: NO_COUNTS,
          };
        }
        if (total === 0) return { status: RETRIEVE_STATUS.success, counts: NO_COUNTS };
        const pairs = sink.needsPairs ? await readPairs(uids) : [];
        isBegun = true;
        const begun = await sink.begin(pairs);
        if (!begun.ok) return { status: begun.status, comment: begun.comment, counts: NO_COUNTS };
        return await send(request, sink, uids, total);
      } finally {
        if (isBegun) await sink.end();
      }
    },
  };

  /** The instances' SOP class and transfer syntax pairs, read from each one's file meta information. */
  async function readPairs(uids: RetrieveUids): Promise<StoragePair[]> {
    const pairs = new Map<string, StoragePair>();
    let after = '';
    for (;;) {
      const rows = await readRetrievePage(db, uids, after, PAGE_ROWS);
      if (rows.length === 0) break;
      after = rows.at(-1)!.sopInstanceUid;
      const syntaxes = await Promise.all(rows.map((row) => readTransferSyntax(row)));
      rows.forEach((row, i) => {
        const transferSyntaxUid = syntaxes[i];
        if (transferSyntaxUid === undefined) return;
        pairs.set(`${row.sopClassUid} ${transferSyntaxUid}`, {
          sopClassUid: row.sopClassUid,
          transferSyntaxUid,
        });
      });
      if (rows.length < PAGE_ROWS) break;
    }
    return [...pairs.values()];
  }

  async function readTransferSyntax(row: RetrieveRow): Promise<string | undefined> {
    if (row.payloadId === undefined) return undefined;
    const slice = await dialect.readBlobSlice({
      table: 'attachment_data',
      idColumn: 'id',
      id: row.payloadId,
      column: 'blob_data',
      offset: 0,
      lengthBytes: META_PREFIX_BYTES,
      versionColumn: 'last_modified_date',
    });
    if (slice?.bytes == null) return undefined;
    const meta = readPart10Meta(slice.bytes);
    if (meta !== undefined) return meta.transferSyntaxUid;
    // A file meta group longer than the prefix (rare: long private meta elements): the whole file.
    const bytes = await readInstanceBytes(row.payloadId);
    return bytes === undefined ? undefined : readPart10Meta(bytes)?.transferSyntaxUid;
  }

  async function readInstanceBytes(payloadId: number): Promise<Buffer | undefined> {
    const slices: Buffer[] = [];
    let size = 0;
    try {
      for await (const slice of readBlobSlices(dialect, payloadId, 'blob_data')) {
        slices.push(slice);
        size += slice.length;
      }
    } catch (error) {
      // Deleted or rewritten while read (a clean-up between two slices): this instance fails.
      if (error instanceof ChangedWhileReadingError) return undefined;
      throw error;
    }
    if (slices.length === 0) return undefined;
    return slices.length === 1 ? slices[0] : Buffer.concat(slices, size);
  }

  async function send(
    request: RetrieveRequest,
    sink: RetrieveSink,
    uids: RetrieveUids,
    total: number,
  ): Promise<RetrieveOutcome> {
    let completed = 0;
    let failed = 0;
    let warning = 0;
    const failedUids: string[] = [];
    const counts = (): SubOperationCounts => ({
      remaining: Math.max(0, total - completed - failed - warning),
      completed,
      failed,
      warning,
    });
    const finish = (status: number, comment?: string): RetrieveOutcome => ({
      status,
      ...(comment === undefined ? {} : { comment }),
      counts: counts(),
      ...(failedUids.length === 0 ? {} : { identifier: failedList(failedUids, request.isExplicitVr) }),
    });
    let after = '';
    for (;;) {
      if (sink.isCancelled()) return finish(RETRIEVE_STATUS.cancel);
      const rows = await readRetrievePage(db, uids, after, PAGE_ROWS);
      if (rows.length === 0) break;
      after = rows.at(-1)!.sopInstanceUid;
      try {
        await auditPage(request, rows);
      } catch (error) {
        deps.logger.error({ err: error }, 'audit rows not written: the retrieve ends with C000');
        return finish(RETRIEVE_STATUS.unableToProcess, 'the read could not be audited');
      }
      for (const row of rows) {
        if (sink.isCancelled()) return finish(RETRIEVE_STATUS.cancel);
        // An instance received after the count was taken is left for another retrieve.
        if (completed + failed + warning >= total) break;
        const status = await sendOne(sink, row);
        if (status === 'completed') completed += 1;
        else if (status === 'warning') warning += 1;
        else {
          failed += 1;
          failedUids.push(row.sopInstanceUid);
        }
        if (counts().remaining > 0) await sink.pending(counts());
      }
      if (rows.length < PAGE_ROWS) break;
    }
    return finish(failed + warning > 0 ? RETRIEVE_STATUS.warning : RETRIEVE_STATUS.success);
  }

  async function sendOne(sink: RetrieveSink, row: RetrieveRow): Promise<'completed' | 'warning' | 'failed'> {
    if (row.payloadId === undefined) return 'failed';
    const bytes = await readInstanceBytes(row.payloadId);
    const meta = bytes === undefined ? undefined : readPart10Meta(bytes);
    if (bytes === undefined || meta === undefined) return 'failed';
    const status = await sink.store({
      sopClassUid: row.sopClassUid,
      sopInstanceUid: row.sopInstanceUid,
      transferSyntaxUid: meta.transferSyntaxUid,
      dataSet: bytes.subarray(meta.dataSetOffset),
    });
    if (status === undefined) return 'failed';
    if (status === 0) return 'completed';
    // C-STORE warnings (PS3.4 B.2.3): coercion B000, elements discarded B006, does not match B007.
    if ((status & 0xf000) === 0xb000) return 'warning';
    return 'failed';
  }

  /** One row for the filed patients of a page, one for the requests holding its instances. */
  async function auditPage(request: RetrieveRequest, rows: readonly RetrieveRow[]): Promise<void> {
    const filed = await readFiledPatients(
      db,
      rows.map((r) => r.studyInstanceUid),
      config.institutionCode,
    );
    const patients = [...new Set([...filed.values()].map((p) => p.patientId))];
    const requests = [...new Set(rows.map((r) => r.requestId))];
    const isMove = request.sopClassUid === PATIENT_ROOT_MOVE || request.sopClassUid === STUDY_ROOT_MOVE;
    const model =
      request.sopClassUid === PATIENT_ROOT_MOVE || request.sopClassUid === PATIENT_ROOT_GET
        ? 'patient root'
        : 'study root';
    const base = {
      action: isMove ? 'dicom.move' : 'dicom.get',
      userId: null,
      outcome: 200,
      clientAddress: request.address,
      requestId: request.associationId,
      username: request.callingAeTitle,
      detail: isMove ? `${model}, to ${request.destination ?? ''}` : model,
    };
    await Promise.all([
      ...(patients.length > 0
        ? [deps.audit.record({ ...base, targetType: 'patient', targetIds: patients })]
        : []),
      deps.audit.record({ ...base, targetType: 'request', targetIds: requests }),
    ]);
  }

  /** The UID keys the identifier names, checked against its level (C.4.2.2.1). */
  async function readRetrieveKeys(
    request: RetrieveRequest,
  ): Promise<
    { readonly ok: true; readonly uids: RetrieveUids } | { readonly ok: false; readonly comment: string }
  > {
    const reading = readIdentifier(request.identifier, request.isExplicitVr);
    if (!reading.ok) return { ok: false, comment: 'identifier not readable' };
    const parsed = readQuery(reading.elements);
    if (!parsed.ok) return { ok: false, comment: parsed.comment };
    const keys = parsed.query.keys;
    const levelKey = keys.find((k) => k.tag === QUERY_RETRIEVE_LEVEL);
    const level = (typeof levelKey?.value === 'string' ? levelKey.value.trim().toUpperCase() : '') as Level;
    if (!LEVELS.includes(level))
      return { ok: false, comment: 'Query/Retrieve Level missing or not PATIENT, STUDY, SERIES or IMAGE' };
    const isPatientRoot =
      request.sopClassUid === PATIENT_ROOT_MOVE || request.sopClassUid === PATIENT_ROOT_GET;
    if (level === 'PATIENT' && !isPatientRoot)
      return { ok: false, comment: 'the Study Root model has no PATIENT level' };
    const rank = LEVELS.indexOf(level);
    const uids = new Map<'study_instance_uid' | 'series_instance_uid' | 'sop_instance_uid', string[]>();
    for (const key of UID_KEYS) {
      if (LEVELS.indexOf(key.level) > rank) continue;
      const given = keys.find((k) => k.tag === key.tag);
      const value = typeof given?.value === 'string' ? given.value : '';
      if (value === '') {
        if (key.level === level) return { ok: false, comment: `no unique key of the ${level} level` };
        continue;
      }
      if (/[*?]/.test(value)) return { ok: false, comment: 'a unique key may not hold a wildcard' };
      uids.set(
        key.column,
        value.split('\\').map((u) => u.trim()),
      );
    }
    if (level === 'PATIENT') {
      const given = keys.find((k) => k.tag === 0x00100020);
      const value = typeof given?.value === 'string' ? given.value : '';
      if (value === '' || /[*?\\]/.test(value)) return { ok: false, comment: 'no single Patient ID' };
      uids.set(
        'study_instance_uid',
        await findStudiesOfPatientId(db, dialect, value, config.institutionCode),
      );
    }
    return { ok: true, uids };
  }
}

/** The final response's identifier: the Failed SOP Instance UID List, as many UIDs as a UI value holds. */
function failedList(uids: readonly string[], isExplicitVr: boolean): Buffer {
  let value = '';
  for (const uid of uids) {
    const next = value === '' ? uid : `${value}\\${uid}`;
    if (next.length > MAX_UI_LIST_BYTES) break;
    value = next;
  }
  const elements: AnswerElement[] = [{ tag: FAILED_SOP_INSTANCE_UID_LIST, vr: 'UI', value }];
  return encodeAnswer(elements, { isExplicitVr, characterSet: 'ISO_IR 192' });
}

/**
 * Where a Part 10 file's data set starts and its transfer syntax: the file meta group (0002), Explicit VR
 * Little Endian (PS3.10 7.1), walked element by element. Undefined when `bytes` does not hold all of it.
 * The stored files were checked whole at receipt (`part10-scan.ts`); only the group's end is needed here,
 * so the few bytes are read directly rather than by a parser that would read the whole data set.
 */
export function readPart10Meta(
  bytes: Buffer,
): { readonly transferSyntaxUid: string; readonly dataSetOffset: number } | undefined {
  if (bytes.length < 132 || bytes.toString('latin1', 128, 132) !== 'DICM') return undefined;
  let offset = 132;
  let transferSyntaxUid: string | undefined;
  while (offset + 8 <= bytes.length && bytes.readUInt16LE(offset) === 0x0002) {
    const element = bytes.readUInt16LE(offset + 2);
    const vr = bytes.toString('latin1', offset + 4, offset + 6);
    const isLong = ['OB', 'OD', 'OF', 'OL', 'OV', 'OW', 'SQ', 'SV', 'UC', 'UN', 'UR', 'UT', 'UV'].includes(
      vr,
    );
    if (isLong && offset + 12 > bytes.length) return undefined;
    const length = isLong ? bytes.readUInt32LE(offset + 8) : bytes.readUInt16LE(offset + 6);
    const start = offset + (isLong ? 12 : 8);
    if (start + length > bytes.length) return undefined;
    if (element === 0x0010)
      transferSyntaxUid = bytes
        .toString('latin1', start, start + length)
        .replace(/[\0 ]+$/, '')
        .trim();
    offset = start + length;
  }
  // The group must have ended inside `bytes` (the next element's group read, or the file's end).
  if (transferSyntaxUid === undefined || (offset + 2 > bytes.length && offset !== bytes.length))
    return undefined;
  if (offset + 2 <= bytes.length && bytes.readUInt16LE(offset) === 0x0002) return undefined;
  return { transferSyntaxUid, dataSetOffset: offset };
}

/** A data set the library sends as these bytes, never parsed or re-encoded. */
export class RawDataSet extends Dataset {
  private readonly bytes: Buffer;
  constructor(bytes: Buffer, transferSyntaxUid: string) {
    super({}, transferSyntaxUid);
    this.bytes = bytes;
  }

  override getDenaturalizedDataset(): Buffer {
    return this.bytes;
  }
}
