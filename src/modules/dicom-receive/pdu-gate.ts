/**
 * The gate between a DICOM connection and `dcmjs-dimse` (PS3.8 9.3): it reads the PDUs from the socket
 * itself and hands the library only whole PDUs that the association's state allows; the library never
 * sees the socket's bytes directly. It exists because the library cannot be configured to refuse what a
 * hostile peer sends: it buffers a PDU whole whatever length it declares (copying its whole buffer again
 * for every chunk received), and it collects the data set of any DIMSE message other than C-STORE without
 * limit and parses it with dcmjs on the main thread before the SCP is asked about the message.
 *
 * What passes:
 * - Before association: one A-ASSOCIATE-RQ of at most {@link MAX_ASSOCIATE_RQ_BYTES}, complete within the
 *   association timeout; the connection is closed on anything else. Reading then pauses until the SCP
 *   accepts ({@link PduGate.accept}) or refuses.
 * - Once associated: P-DATA-TF PDUs no longer than the maximum length the SCP announced, A-RELEASE-RQ and
 *   A-ABORT. In the P-DATA-TF, each PDV must name an accepted presentation context; a command set is at
 *   most {@link MAX_COMMAND_BYTES} (read here from its group 0000 elements, Implicit VR Little Endian per
 *   PS3.7 6.3.1, with a bounded linear scan); only C-ECHO-RQ without a data set on the Verification
 *   context and C-STORE-RQ with one on a storage context are allowed, and data set fragments only after a
 *   C-STORE-RQ on its context. On a Modality Worklist or Query/Retrieve FIND context, a C-FIND-RQ (on a
 *   Query/Retrieve MOVE or GET context, a C-MOVE-RQ or C-GET-RQ) with an identifier of at most
 *   `MAX_IDENTIFIER_BYTES`, whose elements and sequence depth the worklist module's bounded reader checks
 *   before the library sees it; while its answers go out, only a C-CANCEL-RQ for it is read, and, for a
 *   C-GET, the peer's C-STORE-RSP to each sub-operation the SCP sent ({@link PduGate.expectStoreResponse})
 *   on a storage context. On a Storage
 *   Commitment context, an N-ACTION-RQ whose data set the gate holds back until it is whole (so that the
 *   library buffers nothing unbounded): up to `commitmentRequestMaxBytes` it is handed on as received;
 *   beyond, the rest is discarded and the library gets a stand-in data set, the SCP is told
 *   ({@link PduGate.takeCommitmentOverflow}) and refuses the request with a status; and the peer's
 *   N-EVENT-REPORT-RSP to a report the SCP sent ({@link PduGate.expectEventReportResponse}). Anything else
 *   aborts the association (A-ABORT from the service provider) before a byte of it reaches the library:
 *   no data set of another command is ever buffered or parsed.
 *
 * Buffering is linear: chunks are kept in a list and each PDU is copied out once when whole.
 */
import { EventEmitter } from 'node:events';
import type { Socket } from 'node:net';
import type { IdentifierRefusal } from '../worklist/index.ts';
import { MAX_IDENTIFIER_BYTES, readIdentifier } from '../worklist/index.ts';

/** Largest A-ASSOCIATE-RQ read (a request proposing 128 presentation contexts is about 20 KiB). */
export const MAX_ASSOCIATE_RQ_BYTES = 64 * 1024;
/** Largest command set read (a C-STORE-RQ's is a few hundred bytes). */
export const MAX_COMMAND_BYTES = 4 * 1024;

const PDU_HEADER_BYTES = 6;
const PDU = {
  associateRq: 0x01,
  pData: 0x04,
  releaseRq: 0x05,
  abort: 0x07,
} as const;
/** Command Field values (PS3.7 E.1). */
const C_STORE_RQ = 0x0001;
const C_ECHO_RQ = 0x0030;
const C_FIND_RQ = 0x0020;
const C_CANCEL_RQ = 0x0fff;
const C_MOVE_RQ = 0x0021;
const C_GET_RQ = 0x0010;
const C_STORE_RSP = 0x8001;
const N_ACTION_RQ = 0x0130;
const N_EVENT_REPORT_RSP = 0x8100;
/** Command Data Set Type (0000,0800) meaning "no data set". */
const NO_DATA_SET = 0x0101;
/** A-ABORT source "service provider" and reasons (PS3.8 9.3.8). */
const ABORT_SOURCE_PROVIDER = 2;
const ABORT_UNEXPECTED_PDU = 2;
const ABORT_INVALID_PARAMETER = 6;
/** How long a refused or aborted connection may stay open for the peer to read the answer and close. */
const LINGER_MS = 2000;

/** What an accepted presentation context carries. */
/**
 * `query`: a Query/Retrieve FIND context, whose identifiers are bounded as the worklist's are; `move` and
 * `get`: a Query/Retrieve MOVE or GET context, the same.
 */
export type ContextKind = 'verification' | 'storage' | 'worklist' | 'query' | 'move' | 'get' | 'commitment';

/** The kinds whose request carries an identifier read by the bounded reader. */
const IDENTIFIER_KINDS: ReadonlySet<ContextKind> = new Set(['worklist', 'query', 'move', 'get']);
const IDENTIFIER_COMMAND: Readonly<Partial<Record<ContextKind, number>>> = {
  worklist: C_FIND_RQ,
  query: C_FIND_RQ,
  move: C_MOVE_RQ,
  get: C_GET_RQ,
};

/** Why the gate closed the connection (for the log and metrics; never a value the peer sent). */
export type GateRefusal =
  | 'association-timeout'
  | 'not-an-association-request'
  | 'association-request-too-large'
  | 'pdu-too-large'
  | 'unexpected-pdu'
  | 'malformed-pdu'
  | 'unknown-presentation-context'
  | 'command-too-large'
  | 'malformed-command'
  | 'data-set-not-allowed'
  | 'command-not-implemented'
  | 'unexpected-data-set'
  | 'request-before-answer'
  | 'identifier-too-large'
  | IdentifierRefusal;

export interface PduGateOptions {
  readonly associationTimeoutMs: number;
  /** Largest Storage Commitment N-ACTION data set handed on; a longer one is cut off and flagged. */
  readonly commitmentRequestMaxBytes: number;
  /** Called once when the gate closes the connection. */
  readonly onRefused: (refusal: GateRefusal, detail?: string) => void;
}

type Phase = 'awaiting-request' | 'deciding' | 'associated' | 'closed';

/**
 * Reads `socket` and re-emits to the library (which holds this object as its socket) `data` with whole,
 * allowed PDUs, and the socket's `error`, `timeout` and `close`; the library's writes go to the socket.
 */
export class PduGate extends EventEmitter {
  private readonly socket: Socket;
  private readonly options: PduGateOptions;
  private phase: Phase = 'awaiting-request';
  private chunks: Buffer[] = [];
  private bufferedBytes = 0;
  /** The PDU being received: its type and length, once its header is in. */
  private header: { type: number; length: number } | undefined;
  private maxPduBytes = 0;
  private contexts: ReadonlyMap<number, ContextKind> = new Map();
  /** Fragments of the command set being received. */
  private command: Buffer[] = [];
  private commandBytes = 0;
  /** The presentation context of the C-STORE data set being received, if one is. */
  private dataSetContext: number | undefined;
  /** Contexts whose data sets are in Explicit VR (the worklist identifiers' reader needs to know). */
  private explicitVrContexts: ReadonlySet<number> = new Set();
  /** The C-FIND identifier being received, and the last one received whole (for the SCP to take). */
  private identifierChunks: Buffer[] = [];
  private identifierBytes = 0;
  private identifier: { identifier: Buffer; contextId: number } | undefined;
  /** The context of the C-FIND being answered, and whether its C-CANCEL-RQ came. */
  private findContext: number | undefined;
  private isCancelSeen = false;
  /** The N-ACTION data set's PDVs held back (each a whole PDV item), their size, and whether it overflowed. */
  private commitmentItems: Buffer[] = [];
  private commitmentBytes = 0;
  private isCommitmentOverflow = false;
  private overflowSeen = false;
  /** N-EVENT-REPORT-RQs the SCP sent whose responses have not come. */
  private expectedReportResponses = 0;
  /** C-STORE-RQs the SCP sent (a C-GET's sub-operations) whose responses have not come. */
  private expectedStoreResponses = 0;
  /** The PDUs to hand on instead of the one checked (set by `checkPData` when it holds PDVs back). */
  private replacement: Buffer[] | undefined;
  /** A whole request passed and is not answered yet: nothing more is read until it is. */
  private isAwaitingAnswer = false;
  private isDraining = false;
  private readonly timer: NodeJS.Timeout;

  constructor(socket: Socket, options: PduGateOptions) {
    super();
    this.socket = socket;
    this.options = options;
    this.timer = setTimeout(() => this.close('association-timeout'), options.associationTimeoutMs);
    this.timer.unref();
    socket.on('data', (chunk: Buffer) => this.receive(chunk));
    socket.on('error', (error) => this.emit('error', error));
    // Idle while a request waits for the SCP (its memory turn, its transaction) is the SCP's doing.
    socket.on('timeout', () => {
      if (!this.isAwaitingAnswer) this.emit('timeout');
    });
    socket.on('close', () => {
      clearTimeout(this.timer);
      this.phase = 'closed';
      this.chunks = [];
      this.command = [];
      this.emit('close');
    });
  }

  /** The library's writes (A-ASSOCIATE-AC/RJ, P-DATA-TF responses, A-RELEASE-RP). */
  write(bytes: Buffer): boolean {
    return this.socket.writable ? this.socket.write(bytes) : false;
  }

  /** The library's idle timeout, applied to the socket. */
  setTimeout(timeoutMs: number): this {
    this.socket.setTimeout(timeoutMs);
    return this;
  }

  /** The association was accepted with these contexts (id -> kind) and this maximum PDU length. */
  accept(
    maxPduBytes: number,
    contexts: ReadonlyMap<number, ContextKind>,
    explicitVrContexts: ReadonlySet<number> = new Set(),
  ): void {
    if (this.phase !== 'deciding') return;
    this.phase = 'associated';
    this.explicitVrContexts = explicitVrContexts;
    this.maxPduBytes = maxPduBytes;
    this.contexts = contexts;
    // Called while a PDU is being passed on, the loop under way goes on reading.
    if (!this.isDraining) this.drain();
  }

  /**
   * The SCP answered the request passed last: reading goes on. One request at a time is the default of
   * PS3.7 (asynchronous operations are not negotiated), so a sender waits for each answer anyway.
   */
  answered(): void {
    if (!this.isAwaitingAnswer) return;
    this.isAwaitingAnswer = false;
    this.findContext = undefined;
    this.isCancelSeen = false;
    if (!this.isDraining) this.drain();
  }

  /**
   * The association was refused: what more arrives is discarded (reading goes on, so that the peer's
   * close is seen) while the SCP closes the connection; a peer that keeps it open is not waited for.
   */
  refuse(): void {
    if (this.phase === 'closed') return;
    this.phase = 'closed';
    this.chunks = [];
    this.bufferedBytes = 0;
    this.socket.resume();
    setTimeout(() => this.socket.destroy(), LINGER_MS).unref();
  }

  /** Whether the N-ACTION data set handed on last was cut off at the limit (once). */
  takeCommitmentOverflow(): boolean {
    const overflow = this.overflowSeen;
    this.overflowSeen = false;
    return overflow;
  }

  /** The SCP sent an N-EVENT-REPORT-RQ: its N-EVENT-REPORT-RSP may come. */
  expectEventReportResponse(): void {
    this.expectedReportResponses += 1;
  }

  /**
   * The SCP sent a C-STORE-RQ on a storage context (a C-GET sub-operation): its C-STORE-RSP may come,
   * and is read even after the C-GET's C-CANCEL-RQ.
   */
  expectStoreResponse(): void {
    this.expectedStoreResponses += 1;
    if (!this.isDraining && this.phase === 'associated') this.drain();
  }

  /** A C-STORE-RQ sent by the SCP will not be answered (the sub-operation was given up). */
  forgetStoreResponse(): void {
    if (this.expectedStoreResponses > 0) this.expectedStoreResponses -= 1;
  }

  /** The identifier of the C-FIND-RQ passed last and its presentation context (once). */
  takeIdentifier(): { identifier: Buffer; contextId: number } | undefined {
    const identifier = this.identifier;
    this.identifier = undefined;
    return identifier;
  }

  private receive(chunk: Buffer): void {
    if (this.phase === 'closed') return;
    this.chunks.push(chunk);
    this.bufferedBytes += chunk.length;
    this.drain();
  }

  /**
   * Passes on every whole PDU buffered while the state allows reading; the socket is paused while it does
   * not (the SCP deciding on the association, or a request not yet answered), so that nothing more is
   * buffered meanwhile.
   */
  private drain(): void {
    this.isDraining = true;
    try {
      while (this.isReading()) {
        if (this.header === undefined) {
          if (this.bufferedBytes < PDU_HEADER_BYTES) break;
          const start = this.peek(PDU_HEADER_BYTES);
          this.header = { type: start[0]!, length: start.readUInt32BE(2) };
          const refusal = this.checkHeader(this.header);
          if (refusal !== undefined) return this.close(refusal);
        }
        const total = PDU_HEADER_BYTES + this.header.length;
        if (this.bufferedBytes < total) break;
        const pdu = this.take(total);
        this.header = undefined;
        this.pass(pdu);
      }
    } finally {
      this.isDraining = false;
    }
    if (this.phase === 'closed') return;
    if (this.isReading()) this.socket.resume();
    else this.socket.pause();
  }

  private isReading(): boolean {
    // While a C-FIND is answered, reading goes on for its C-CANCEL-RQ (and stops once that came).
    const isAwaitingCancel = this.findContext !== undefined && !this.isCancelSeen;
    return (
      this.phase === 'awaiting-request' ||
      (this.phase === 'associated' &&
        (!this.isAwaitingAnswer || isAwaitingCancel || this.expectedStoreResponses > 0))
    );
  }

  /** A refusal for a PDU header the phase does not allow, before its body is buffered. */
  private checkHeader({ type, length }: { type: number; length: number }): GateRefusal | undefined {
    if (this.phase === 'awaiting-request') {
      if (type !== PDU.associateRq) return 'not-an-association-request';
      return length > MAX_ASSOCIATE_RQ_BYTES ? 'association-request-too-large' : undefined;
    }
    if (type === PDU.pData) return length > this.maxPduBytes ? 'pdu-too-large' : undefined;
    if (type === PDU.releaseRq || type === PDU.abort) return length === 4 ? undefined : 'malformed-pdu';
    return 'unexpected-pdu';
  }

  private pass(pdu: Buffer): void {
    if (this.phase === 'awaiting-request') {
      clearTimeout(this.timer);
      this.phase = 'deciding';
    } else if (pdu[0] === PDU.pData) {
      this.replacement = undefined;
      const refusal = this.checkPData(pdu);
      if (refusal !== undefined) return this.close(refusal.refusal, refusal.detail);
      const replacement = this.replacement as Buffer[] | undefined;
      if (replacement !== undefined) {
        this.replacement = undefined;
        for (const part of replacement) this.emit('data', part);
        return;
      }
    }
    this.emit('data', pdu);
  }

  /** Checks the PDVs of a P-DATA-TF (PS3.8 9.3.5) against the DIMSE state, advancing it. */
  private checkPData(pdu: Buffer): { refusal: GateRefusal; detail?: string } | undefined {
    let offset = PDU_HEADER_BYTES;
    /** The PDV items handed on as they are, when some of this PDU's are held back. */
    const passed: Buffer[] = [];
    let isHolding = false;
    const release: Buffer[] = [];
    while (offset < pdu.length) {
      if (offset + 6 > pdu.length) return { refusal: 'malformed-pdu' };
      const itemLength = pdu.readUInt32BE(offset);
      const start = offset;
      const end = offset + 4 + itemLength;
      if (itemLength < 2 || end > pdu.length) return { refusal: 'malformed-pdu' };
      const contextId = pdu[offset + 4]!;
      const control = pdu[offset + 5]!;
      const value = pdu.subarray(offset + 6, end);
      offset = end;
      const kind = this.contexts.get(contextId);
      if (kind === undefined) return { refusal: 'unknown-presentation-context' };
      if (control > 3) return { refusal: 'malformed-pdu' };
      const isCommand = (control & 1) === 1;
      const isLast = (control & 2) === 2;
      // The peer's answer to a report the SCP sent may come at any time, whole in one PDV.
      if (isCommand && isLast && kind === 'commitment' && this.command.length === 0) {
        const fields = readCommand(value);
        if (fields?.commandField === N_EVENT_REPORT_RSP) {
          if (this.expectedReportResponses === 0) return { refusal: 'unexpected-pdu' };
          if (fields.dataSetType !== NO_DATA_SET)
            return { refusal: 'data-set-not-allowed', detail: 'N-EVENT-REPORT-RSP' };
          this.expectedReportResponses -= 1;
          passed.push(pdu.subarray(start, end));
          continue;
        }
      }
      // The peer's answer to a C-STORE-RQ of a C-GET the SCP is serving, whole in one PDV.
      if (
        isCommand &&
        isLast &&
        kind === 'storage' &&
        this.command.length === 0 &&
        this.expectedStoreResponses > 0
      ) {
        const fields = readCommand(value);
        if (fields?.commandField === C_STORE_RSP) {
          if (fields.dataSetType !== NO_DATA_SET)
            return { refusal: 'data-set-not-allowed', detail: 'C-STORE-RSP' };
          this.expectedStoreResponses -= 1;
          passed.push(pdu.subarray(start, end));
          continue;
        }
      }
      if (this.isAwaitingAnswer && (this.findContext === undefined || this.isCancelSeen))
        return { refusal: 'request-before-answer' };
      if (this.isAwaitingAnswer) {
        // Only the C-CANCEL-RQ of the C-FIND being answered, whole in one PDV, without a data set.
        const fields = isCommand && isLast && this.command.length === 0 ? readCommand(value) : undefined;
        if (fields?.commandField !== C_CANCEL_RQ || contextId !== this.findContext)
          return { refusal: 'request-before-answer' };
        if (fields.dataSetType !== NO_DATA_SET)
          return { refusal: 'data-set-not-allowed', detail: 'C-CANCEL-RQ' };
        this.isCancelSeen = true;
        continue;
      }
      if (!isCommand && IDENTIFIER_KINDS.has(kind)) {
        if (this.dataSetContext !== contextId) return { refusal: 'unexpected-data-set' };
        this.identifierBytes += value.length;
        if (this.identifierBytes > MAX_IDENTIFIER_BYTES) return { refusal: 'identifier-too-large' };
        this.identifierChunks.push(value);
        if (isLast) {
          const identifier = Buffer.concat(this.identifierChunks, this.identifierBytes);
          this.identifierChunks = [];
          this.identifierBytes = 0;
          this.dataSetContext = undefined;
          const reading = readIdentifier(identifier, this.explicitVrContexts.has(contextId));
          if (!reading.ok) return { refusal: reading.refusal };
          this.identifier = { identifier, contextId };
          this.findContext = contextId;
          this.isAwaitingAnswer = true;
        }
        continue;
      }
      if (!isCommand && kind === 'commitment') {
        if (this.dataSetContext !== contextId) return { refusal: 'unexpected-data-set' };
        isHolding = true;
        if (!this.isCommitmentOverflow) {
          this.commitmentBytes += value.length;
          if (this.commitmentBytes > this.options.commitmentRequestMaxBytes) {
            this.isCommitmentOverflow = true;
            this.commitmentItems = [];
          } else this.commitmentItems.push(Buffer.from(pdu.subarray(start, end)));
        }
        if (isLast) {
          release.push(
            ...(this.isCommitmentOverflow
              ? [standInDataSet(contextId, this.explicitVrContexts.has(contextId))]
              : this.commitmentItems),
          );
          this.overflowSeen = this.isCommitmentOverflow;
          this.commitmentItems = [];
          this.commitmentBytes = 0;
          this.isCommitmentOverflow = false;
          this.dataSetContext = undefined;
          this.isAwaitingAnswer = true;
        }
        continue;
      }
      if (!isCommand) {
        passed.push(pdu.subarray(start, end));
        if (this.dataSetContext !== contextId) return { refusal: 'unexpected-data-set' };
        if (isLast) {
          this.dataSetContext = undefined;
          this.isAwaitingAnswer = true;
        }
        continue;
      }
      passed.push(pdu.subarray(start, end));
      if (this.dataSetContext !== undefined) return { refusal: 'unexpected-data-set' };
      this.commandBytes += value.length;
      if (this.commandBytes > MAX_COMMAND_BYTES) return { refusal: 'command-too-large' };
      this.command.push(value);
      if (!isLast) continue;
      const fields = readCommand(Buffer.concat(this.command, this.commandBytes));
      this.command = [];
      this.commandBytes = 0;
      if (fields === undefined) return { refusal: 'malformed-command' };
      const hasDataSet = fields.dataSetType !== NO_DATA_SET;
      if (fields.commandField === C_ECHO_RQ && kind === 'verification') {
        if (hasDataSet) return { refusal: 'data-set-not-allowed', detail: 'C-ECHO-RQ' };
        this.isAwaitingAnswer = true;
      } else if (IDENTIFIER_KINDS.has(kind) && fields.commandField === IDENTIFIER_COMMAND[kind]) {
        if (!hasDataSet) return { refusal: 'malformed-command' };
        this.dataSetContext = contextId;
      } else if (fields.commandField === C_STORE_RQ && kind === 'storage') {
        if (!hasDataSet) return { refusal: 'malformed-command' };
        this.dataSetContext = contextId;
      } else if (fields.commandField === N_ACTION_RQ && kind === 'commitment') {
        if (!hasDataSet) return { refusal: 'malformed-command' };
        this.dataSetContext = contextId;
      } else {
        return { refusal: 'command-not-implemented', detail: hex(fields.commandField) };
      }
    }
    if (isHolding)
      this.replacement = [
        ...(passed.length > 0 ? [pDataOf(passed)] : []),
        ...release.map((item) => pDataOf([item])),
      ];
    return undefined;
  }

  /** Closes the connection: A-ABORT first when associated, else a plain close. */
  private close(refusal: GateRefusal, detail?: string): void {
    if (this.phase === 'closed') return;
    const wasAssociated = this.phase === 'associated';
    this.phase = 'closed';
    clearTimeout(this.timer);
    this.chunks = [];
    this.bufferedBytes = 0;
    this.command = [];
    this.options.onRefused(refusal, detail);
    if (!wasAssociated || !this.socket.writable) {
      this.socket.destroy();
      return;
    }
    const abort = Buffer.from([PDU.abort, 0, 0, 0, 0, 4, 0, 0, ABORT_SOURCE_PROVIDER, 0]);
    abort[9] = refusal === 'unexpected-pdu' ? ABORT_UNEXPECTED_PDU : ABORT_INVALID_PARAMETER;
    this.socket.end(abort);
    // A peer that does not close its side is not waited for.
    setTimeout(() => this.socket.destroy(), LINGER_MS).unref();
  }

  /** The first `length` buffered bytes, without consuming them. */
  private peek(length: number): Buffer {
    if (this.chunks[0]!.length < length) this.chunks = [Buffer.concat(this.chunks, this.bufferedBytes)];
    return this.chunks[0]!.subarray(0, length);
  }

  /** Removes and returns the first `length` buffered bytes (one copy, or none when one chunk holds them). */
  private take(length: number): Buffer {
    const parts: Buffer[] = [];
    let needed = length;
    while (needed > 0) {
      const first = this.chunks[0]!;
      if (first.length <= needed) {
        parts.push(first);
        this.chunks.shift();
        needed -= first.length;
      } else {
        parts.push(first.subarray(0, needed));
        this.chunks[0] = first.subarray(needed);
        needed = 0;
      }
    }
    this.bufferedBytes -= length;
    return parts.length === 1 ? parts[0]! : Buffer.concat(parts, length);
  }
}

/**
 * The Command Field and Command Data Set Type of a command set: group 0000 elements in Implicit VR Little
 * Endian, each within the set; undefined when it is not one or lacks the Command Field.
 */
export function readCommand(bytes: Buffer): { commandField: number; dataSetType: number } | undefined {
  let commandField: number | undefined;
  let dataSetType = NO_DATA_SET;
  let offset = 0;
  while (offset < bytes.length) {
    if (offset + 8 > bytes.length) return undefined;
    const group = bytes.readUInt16LE(offset);
    const element = bytes.readUInt16LE(offset + 2);
    const length = bytes.readUInt32LE(offset + 4);
    if (group !== 0 || offset + 8 + length > bytes.length) return undefined;
    if (element === 0x0100 && length === 2) commandField = bytes.readUInt16LE(offset + 8);
    if (element === 0x0800 && length === 2) dataSetType = bytes.readUInt16LE(offset + 8);
    offset += 8 + length;
  }
  return commandField === undefined ? undefined : { commandField, dataSetType };
}

/** A P-DATA-TF PDU of whole PDV items. */
function pDataOf(items: readonly Buffer[]): Buffer {
  const length = items.reduce((sum, item) => sum + item.length, 0);
  const header = Buffer.from([PDU.pData, 0, 0, 0, 0, 0]);
  header.writeUInt32BE(length, 2);
  return Buffer.concat([header, ...items], PDU_HEADER_BYTES + length);
}

/**
 * The last data set PDV handed on in place of a cut-off N-ACTION data set: one empty Transaction UID
 * (0008,1195) in the context's transfer syntax (Implicit or Explicit VR Little Endian).
 */
function standInDataSet(contextId: number, isExplicitVr: boolean): Buffer {
  const lengthOrVr = isExplicitVr ? [0x55, 0x49, 0, 0] : [0, 0, 0, 0];
  return Buffer.from([0, 0, 0, 10, contextId, 0x02, 0x08, 0x00, 0x95, 0x11, ...lengthOrVr]);
}

function hex(value: number): string {
  return `0x${value.toString(16).toUpperCase().padStart(4, '0')}`;
}
