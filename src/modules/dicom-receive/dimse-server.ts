/**
 * The DIMSE C-STORE SCP (PS3.4 B, PS3.7, PS3.8) with C-ECHO, on `dcmjs-dimse`: the library decodes and
 * writes the PDUs that `pdu-gate.ts` lets through; this file decides what to accept and hands each
 * received data set, as a Part 10 file, to the receiver (queue intake). Started by the server process
 * when `DICOM_PORT` is set.
 *
 * - Connections: at most `DICOM_MAX_CONNECTIONS_PER_ADDRESS` from one address (beyond, a new one is
 *   closed at once); at `DICOM_MAX_CONNECTIONS` open or `DICOM_MAX_UNASSOCIATED_CONNECTIONS` not yet
 *   associated, a new one closes the oldest not yet associated (or is closed itself when every one is
 *   associated), so that a flood of idle connections can take neither the process's file descriptors
 *   (the HTTP side's) nor every place of the senders. Every PDU goes through `pdu-gate.ts`, which closes a connection that sends no
 *   whole A-ASSOCIATE-RQ within `DICOM_ASSOCIATION_TIMEOUT_MS`, and aborts one that sends a PDU longer
 *   than announced, or a command or data set that the gate does not allow on its context.
 * - Associations: the called AE title must be `DICOM_AE_TITLE`; the calling AE title and the peer address
 *   must match an item of `DICOM_ALLOWED_CALLERS`; beyond `DICOM_MAX_ASSOCIATIONS` open ones, or
 *   `DICOM_MAX_ASSOCIATIONS_PER_AE` of the calling AE title, or `DICOM_MAX_ASSOCIATIONS_PER_ADDRESS` from
 *   the peer's address, a new one is refused as "local limit exceeded" (transient).
 * - Presentation contexts: Verification and the storage classes of `storage-classes.ts`, each with the
 *   first acceptable transfer syntax the sender proposes; Modality Worklist FIND and Storage Commitment
 *   Push Model in Little Endian (Explicit VR preferred); Patient and Study Root Query/Retrieve FIND
 *   likewise for a caller of `DICOM_QR_CALLERS`, user-rejected for any other; anything else is refused
 *   per context.
 * - C-STORE: the data set is kept in memory up to 1 MiB and beyond in a temporary file (`files/spool.ts`),
 *   up to `RAW_BODY_LIMIT_BYTES` (beyond, the store fails with A700 and nothing is kept); it is loaded
 *   under the process's upload memory budget (`UPLOAD_MEMORY_BYTES`, shared with the HTTP uploads), then
 *   stored and queued in one transaction; its audit row is committed before the response is sent. The
 *   next request is read only once the response is sent. A connection lost before the data set is
 *   complete leaves nothing.
 * - C-FIND on the Modality Worklist context: answered by the worklist module (`worklist-find.ts`), one
 *   pending response per entry, the next sent once the peer took the last; a C-CANCEL-RQ ends it. On a
 *   Query/Retrieve FIND context, answered the same way by `qr-find.ts`.
 * - N-ACTION on the Storage Commitment Push Model context (`storage-commitment.ts`): answered at once,
 *   then the report (N-EVENT-REPORT-RQ) on this association while it is open; one not answered before
 *   the association ends goes on a new association to the caller's `DICOM_REMOTE_NODES` entry.
 * - Logs and metrics per association and per store: AE titles, peer address, outcome, status; never a
 *   UID or anything from the data set.
 */
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import type { AddressInfo, Socket } from 'node:net';
import { BlockList, createServer, isIPv6 } from 'node:net';
import { PassThrough, Writable } from 'node:stream';
import dcmjsDimse from 'dcmjs-dimse';
import type * as Dimse from 'dcmjs-dimse';
import type { Config, DicomCaller } from '../../config.ts';
import type { Database } from '../../db/database.ts';
import { AppError } from '../../errors.ts';
import type { SpooledBytes } from '../../files/spool.ts';
import { SPOOL_THRESHOLD_BYTES, spoolDirOf, spoolStream } from '../../files/spool.ts';
import type { UploadMemory } from '../../http/upload-spool.ts';
import { createUploadMemory } from '../../http/upload-spool.ts';
import type { Logger } from '../../logger.ts';
import type { AuditTrail } from '../audit/index.ts';
import type { IntakeService } from '../request-queue/index.ts';
import type { DicomRemoteNode } from '../../config.ts';
import type { WorklistFindSink, WorklistFinder } from '../worklist/index.ts';
import { MODALITY_WORKLIST_FIND, createWorklistFinder } from '../worklist/index.ts';
import type { AssociationOutcome } from './dicom-metrics.ts';
import {
  countAssociation,
  countConnectionRefused,
  countEcho,
  trackOpenAssociations,
} from './dicom-metrics.ts';
import type { FailureReason } from './instance.ts';
import {
  FAILURE,
  IMPLEMENTATION_CLASS_UID,
  IMPLEMENTATION_VERSION_NAME,
  buildPart10,
  releaseInstanceBytes,
} from './instance.ts';
import type { DicomReceiver, ReceiveOutcome } from './receive.ts';
import { createDicomReceiver } from './receive.ts';
import type { QrFinder } from './qr-find.ts';
import { PATIENT_ROOT_FIND, STUDY_ROOT_FIND, createQrFinder } from './qr-find.ts';
import { sendGetSubOperation } from './qr-get.ts';
import type { MoveAssociation } from './qr-move.ts';
import { openMoveAssociation } from './qr-move.ts';
import type { QrRetriever, RetrieveSink, SubOperationCounts } from './qr-retrieve.ts';
import {
  PATIENT_ROOT_GET,
  PATIENT_ROOT_MOVE,
  RETRIEVE_STATUS,
  STUDY_ROOT_GET,
  STUDY_ROOT_MOVE,
  createQrRetriever,
} from './qr-retrieve.ts';
import type { ContextKind, GateRefusal } from './pdu-gate.ts';
import { PduGate } from './pdu-gate.ts';
import { VERIFICATION_SOP_CLASS, chooseTransferSyntax, findStorageClass } from './storage-classes.ts';
import type { CommitmentReport } from './storage-commitment.ts';
import {
  COMMITMENT_STATUS,
  REQUEST_COMMITMENT_ACTION,
  STORAGE_COMMITMENT_INSTANCE,
  STORAGE_COMMITMENT_PUSH,
  checkCommitment,
  readCommitmentRequest,
  reportRequest,
  sendReportToNode,
} from './storage-commitment.ts';

const { Dataset, Implementation, Scp, constants, log: dimseLog, responses } = dcmjsDimse;
const { PresentationContextResult, RejectReason, RejectResult, RejectSource, Status } = constants;

type Association = Dimse.association.Association;
type PresentationContext = Dimse.association.PresentationContext;
type CEchoRequest = Dimse.requests.CEchoRequest;
type CStoreRequest = Dimse.requests.CStoreRequest;
type CEchoResponse = Dimse.responses.CEchoResponse;
type CStoreResponse = Dimse.responses.CStoreResponse;
type CFindRequest = Dimse.requests.CFindRequest;
type CCancelRequest = Dimse.requests.CCancelRequest;
type CFindResponse = Dimse.responses.CFindResponse;
type CMoveRequest = Dimse.requests.CMoveRequest;
type CMoveResponse = Dimse.responses.CMoveResponse;
type CGetRequest = Dimse.requests.CGetRequest;
type CGetResponse = Dimse.responses.CGetResponse;
type NActionRequest = Dimse.requests.NActionRequest;
type NActionResponse = Dimse.responses.NActionResponse;
type NEventReportResponse = Dimse.responses.NEventReportResponse;
/** Why a connection was closed at once: the total or per-address limit, or evicted as the oldest unassociated. */
type ConnectionRefusal = 'total' | 'address' | 'unassociated';

/** REQUEST_DATA `source` of instances received by C-STORE. */
export const C_STORE_SOURCE = 'C-STORE';

/** Largest PDU the service receives; senders split data sets into PDUs of at most this. */
const MAX_PDU_BYTES = 256 * 1024;
/** Idle time after which an associated connection is closed, in ms. */
const TIMEOUT_MS = 60_000;
const IMPLICIT_VR_LITTLE_ENDIAN = '1.2.840.10008.1.2';
const EXPLICIT_VR_LITTLE_ENDIAN = '1.2.840.10008.1.2.1';
/** C-FIND "unable to process" (PS3.4 C.4.1.1.4), when the worklist cannot be read. */
const WORKLIST_UNABLE_TO_PROCESS = 0xc000;
/** Bytes of a Storage Commitment N-ACTION data set per instance it may name (two UIDs of 64, item tags). */
const COMMITMENT_BYTES_PER_INSTANCE = 176;
/** At most one log line per this interval about refused connections (a flood would fill the log). */
const REFUSAL_LOG_INTERVAL_MS = 10_000;

export interface DicomServer {
  /** The port listened on (the one asked for, or the one the system chose for port 0). */
  readonly port: number;
  /**
   * Stops accepting associations, lets the stores in progress finish (their data sets, transactions and
   * responses), then aborts the open associations; after `timeoutMs` every connection is closed.
   */
  stop(timeoutMs?: number): Promise<void>;
}

export interface DicomServerDeps {
  readonly database: Database;
  readonly config: Config;
  readonly logger: Logger;
  /** The process's audit trail (the HTTP app's): one row per association decision and instance. */
  readonly auditTrail: AuditTrail;
  /** The process's queue intake (the HTTP app's). */
  readonly intake: IntakeService;
  /** Defaults to a receiver of `database`, `config` and `intake`. */
  readonly receiver?: DicomReceiver;
  /** The process's upload memory budget (the HTTP app's); defaults to a new one of `UPLOAD_MEMORY_BYTES`. */
  readonly uploadMemory?: UploadMemory;
}

/** Per-server state shared by its connections. */
interface ServerContext {
  readonly config: Config;
  readonly logger: Logger;
  readonly database: Database;
  readonly receiver: DicomReceiver;
  readonly worklist: WorklistFinder;
  readonly queryRetrieve: QrFinder;
  readonly retrieve: QrRetriever;
  readonly audit: AuditTrail;
  readonly uploadMemory: UploadMemory;
  readonly allowedCallers: AllowedCallers;
  /** `DICOM_QR_CALLERS`: who may use the Query/Retrieve FIND contexts. */
  readonly qrCallers: AllowedCallers;
  readonly connections: Set<StoreScp>;
  readonly inFlight: Set<Promise<void>>;
  /** Open connections per peer address. */
  readonly connectionsByAddress: Map<string, number>;
  /** Open associations per calling AE title and per peer address. */
  readonly associationsByAe: Map<string, number>;
  readonly associationsByAddress: Map<string, number>;
  /** Connections whose association is not accepted yet, oldest first. */
  readonly unassociated: Set<StoreScp>;
  openAssociations: number;
  isStopping: boolean;
}

/** The library's logger writes to the console; the service logs through pino instead. */
dimseLog.setLevel('silent');
Implementation.setMaxPduLength(MAX_PDU_BYTES);
Implementation.setImplementationClassUid(IMPLEMENTATION_CLASS_UID);
Implementation.setImplementationVersion(IMPLEMENTATION_VERSION_NAME);

/** Starts the SCP on `DICOM_PORT` (and `HOST`); resolves once it listens. */
export async function startDicomServer(deps: DicomServerDeps): Promise<DicomServer> {
  const { config, database, logger } = deps;
  const port = config.dicomNetwork.port;
  if (port === undefined) throw new Error('DICOM_PORT is not set');
  const context: ServerContext = {
    config,
    logger,
    database,
    receiver: deps.receiver ?? createDicomReceiver({ database, config, intake: deps.intake }),
    worklist: createWorklistFinder({ database, config, logger }),
    queryRetrieve: createQrFinder({ database, config, logger, audit: deps.auditTrail }),
    retrieve: createQrRetriever({ database, config, logger, audit: deps.auditTrail }),
    audit: deps.auditTrail,
    uploadMemory: deps.uploadMemory ?? createUploadMemory(config.limits.uploadMemoryBytes),
    allowedCallers: compileAllowedCallers(config.dicomNetwork.allowedCallers),
    qrCallers: compileAllowedCallers(config.dicomNetwork.qrCallers),
    connections: new Set(),
    inFlight: new Set(),
    connectionsByAddress: new Map(),
    associationsByAe: new Map(),
    associationsByAddress: new Map(),
    unassociated: new Set(),
    openAssociations: 0,
    isStopping: false,
  };
  const { maxConnections, maxConnectionsPerAddress, maxUnassociatedConnections } = config.dicomNetwork;
  let refusedSinceLog = 0;
  let lastRefusalLogAt = 0;
  const refuseConnection = (socket: Socket, reason: ConnectionRefusal) => {
    socket.destroy();
    countConnectionRefused(reason);
    refusedSinceLog += 1;
    if (Date.now() - lastRefusalLogAt >= REFUSAL_LOG_INTERVAL_MS) {
      logger.warn({ reason, refused: refusedSinceLog }, 'DICOM connections refused at a limit');
      lastRefusalLogAt = Date.now();
      refusedSinceLog = 0;
    }
  };
  // A C-FIND answer is a command PDU then a data set PDU per match, and a release answer follows the
  // final one: without noDelay, Nagle's algorithm holds each small write after the first until the
  // peer's delayed acknowledgement (tens of ms per query on loopback).
  const server = createServer({ noDelay: true }, (socket) => {
    if (context.isStopping) {
      socket.destroy();
      return;
    }
    const address = normaliseAddress(socket.remoteAddress ?? '');
    const fromAddress = context.connectionsByAddress.get(address) ?? 0;
    if (fromAddress >= maxConnectionsPerAddress) return refuseConnection(socket, 'address');
    // At the total or the not-yet-associated limit, the oldest connection still without an association
    // makes room (it had the longest to send its request): idle connections cannot lock senders out.
    if (
      context.connections.size >= maxConnections ||
      context.unassociated.size >= maxUnassociatedConnections
    ) {
      const oldest = context.unassociated.values().next();
      if (oldest.done === true) return refuseConnection(socket, 'total');
      oldest.value.evict();
      countConnectionRefused('unassociated');
    }
    context.connectionsByAddress.set(address, fromAddress + 1);
    const scp = new StoreScp(socket, address, context);
    context.connections.add(scp);
    context.unassociated.add(scp);
    socket.once('close', () => {
      context.connections.delete(scp);
      decrement(context.connectionsByAddress, address);
      scp.closed();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, host: config.host }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (error) => logger.error({ err: error }, 'DICOM server error'));
  const address = server.address() as AddressInfo;
  logger.info(
    {
      port: address.port,
      aeTitle: config.dicomNetwork.aeTitle,
      callers: config.dicomNetwork.allowedCallers.length,
    },
    'DICOM C-STORE SCP listening',
  );

  return {
    port: address.port,
    async stop(timeoutMs = 20_000) {
      context.isStopping = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      const deadline = new Promise<void>((resolve) => setTimeout(resolve, timeoutMs).unref());
      await Promise.race([Promise.allSettled([...context.inFlight]), deadline]);
      for (const scp of context.connections) scp.abortAndClose();
      await Promise.race([closed, deadline]);
      for (const scp of context.connections) scp.destroy();
      await context.audit.flush();
      logger.info('DICOM C-STORE SCP stopped');
    },
  };
}

/** The received bytes of one C-STORE data set, handed from the store stream to `cStoreRequest`. */
class ReceivedDataSet extends Dataset {
  readonly spooled: SpoolResult;
  constructor(spooled: SpoolResult, transferSyntaxUid: string) {
    // An empty element map: the data set is never parsed into dcmjs objects here.
    super({}, transferSyntaxUid);
    this.spooled = spooled;
  }
}

/** What became of a received data set: its spooled bytes, or why none are kept. */
type SpoolResult =
  { readonly ok: true; readonly bytes: SpooledBytes } | { readonly ok: false; readonly cause: string };

/**
 * Spools a data set's fragments as they arrive (`files/spool.ts`: memory up to 1 MiB, then a temporary
 * file) up to `limitBytes`; past it, or when the file cannot be written, keeps nothing and swallows the
 * rest (the store then fails).
 */
class DataSetCollector extends Writable {
  private readonly input = new PassThrough();
  private failure: string | undefined;
  /** The callback of a write waiting for the spool to take more. */
  private pendingDone: (() => void) | undefined;
  /** Settles once the input ended (or failed). */
  readonly result: Promise<SpoolResult>;

  constructor(options: { dir: string; limitBytes: number }) {
    // Not destroyed at its end: the spool may still be reading the last bytes from `input`.
    super({ autoDestroy: false });
    // A write after the end (a peer that breaks the protocol) is an error event, not a crash.
    this.on('error', () => {});
    // Once the spool stops reading (over the limit, a failed file, or destroyed), waiting writes go on.
    this.input.on('close', () => this.continueWriting());
    this.result = spoolStream(this.input, {
      dir: options.dir,
      memoryThresholdBytes: SPOOL_THRESHOLD_BYTES,
      limitBytes: options.limitBytes,
    }).then(
      (bytes): SpoolResult => ({ ok: true, bytes }),
      (error: unknown): SpoolResult => {
        this.failure =
          error instanceof AppError && error.code === 'payload_too_large'
            ? 'data set larger than RAW_BODY_LIMIT_BYTES'
            : 'data set could not be spooled';
        return { ok: false, cause: this.failure };
      },
    );
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (error?: Error | null) => void): void {
    if (this.failure !== undefined || this.input.destroyed) return done();
    if (this.input.write(chunk)) return done();
    this.pendingDone = () => done();
    this.input.once('drain', () => this.continueWriting());
  }

  private continueWriting(): void {
    const done = this.pendingDone;
    this.pendingDone = undefined;
    done?.();
  }

  override _final(done: (error?: Error | null) => void): void {
    if (!this.input.destroyed) this.input.end();
    done();
  }

  /** Destroying the collector (connection lost mid data set) ends the spool, which removes its file. */
  override _destroy(error: Error | null, done: (error?: Error | null) => void): void {
    this.input.destroy();
    done(error);
  }
}

/** A worklist answer, encoded by the worklist module: the library sends its bytes as they are. */
class EncodedDataSet extends Dataset {
  private readonly bytes: Buffer;
  constructor(bytes: Buffer, transferSyntaxUid: string) {
    super({}, transferSyntaxUid);
    this.bytes = bytes;
  }

  override getDenaturalizedDataset(): Buffer {
    return this.bytes;
  }
}

/** The library's sender of one DIMSE message (`Network._sendDimse`, dcmjs-dimse 0.3). */
interface LibrarySender {
  _sendDimse(message: {
    context: PresentationContext;
    command: CFindResponse | CMoveResponse | CGetResponse;
  }): void;
}

/** One connection: at most one association, its C-ECHOs, C-STOREs and C-FINDs. */
class StoreScp extends Scp {
  private readonly context: ServerContext;
  private readonly peer: Socket;
  private readonly gate: PduGate;
  private readonly address: string;
  /** Names the association in logs and audit rows. */
  private readonly associationId = randomUUID();
  private association: Association | undefined;
  private isAssociated = false;
  private callingAeTitle = '';
  private stores = 0;
  /** Message ids of C-FINDs whose C-CANCEL-RQ came. */
  private readonly cancelledFinds = new Set<number>();
  /** The data set being received, until it is handed to the store. */
  private collector: DataSetCollector | undefined;
  /** Storage commitment reports sent on this association and not answered yet. */
  private readonly unansweredReports = new Set<CommitmentReport>();
  /** The peer asked to release: nothing more is sent on this association. */
  private isReleaseRequested = false;

  constructor(socket: Socket, address: string, context: ServerContext) {
    let onRefused: (refusal: GateRefusal, detail?: string) => void = () => {};
    const gate = new PduGate(socket, {
      associationTimeoutMs: context.config.dicomNetwork.associationTimeoutMs,
      commitmentRequestMaxBytes:
        4096 + context.config.dicomNetwork.commitmentMaxInstances * COMMITMENT_BYTES_PER_INSTANCE,
      onRefused: (refusal, detail) => onRefused(refusal, detail),
    });
    // The library reads and writes through the gate, never the socket itself.
    super(gate as unknown as Socket, {
      associationTimeout: TIMEOUT_MS,
      pduTimeout: TIMEOUT_MS,
      connectTimeout: TIMEOUT_MS,
    });
    this.context = context;
    this.peer = socket;
    this.gate = gate;
    this.address = address;
    onRefused = (refusal, detail) => {
      countAssociation(refusal === 'association-timeout' ? 'timed-out' : 'aborted-protocol');
      this.log('warn', { refusal, detail }, 'DICOM connection closed by the PDU gate');
    };
    this.on('networkError', (error: Error) => {
      this.log('info', { error: error.message }, 'DICOM connection error');
      socket.destroy();
    });
  }

  override associationRequested(association: Association): void {
    this.association = association;
    this.callingAeTitle = association.getCallingAeTitle().trim();
    const { aeTitle, maxAssociations } = this.context.config.dicomNetwork;
    const { maxAssociationsPerAe, maxAssociationsPerAddress } = this.context.config.dicomNetwork;
    const refuse = (outcome: AssociationOutcome, result: number, source: number, reason: number) => {
      countAssociation(outcome);
      this.log('warn', { outcome }, 'DICOM association refused');
      this.gate.refuse();
      this.sendAssociationReject(result, source, reason);
      this.peer.end();
    };
    if (association.getCalledAeTitle().trim() !== aeTitle)
      return refuse(
        'refused-called-ae',
        RejectResult.Permanent,
        RejectSource.ServiceUser,
        RejectReason.CalledAeNotRecognized,
      );
    if (!isAllowedCaller(this.context.allowedCallers, this.callingAeTitle, this.address))
      return refuse(
        'refused-calling-ae',
        RejectResult.Permanent,
        RejectSource.ServiceUser,
        RejectReason.CallingAeNotRecognized,
      );
    // One calling AE title or one address cannot take every association slot.
    if (
      this.context.isStopping ||
      this.context.openAssociations >= maxAssociations ||
      (this.context.associationsByAe.get(this.callingAeTitle) ?? 0) >= maxAssociationsPerAe ||
      (this.context.associationsByAddress.get(this.address) ?? 0) >= maxAssociationsPerAddress
    )
      return refuse(
        'refused-limit',
        RejectResult.Transient,
        RejectSource.ServiceProviderPresentation,
        RejectReason.LocalLimitExceeded,
      );

    const accepted = new Map<number, ContextKind>();
    const explicitVr = new Set<number>();
    const mayQuery = isAllowedCaller(this.context.qrCallers, this.callingAeTitle, this.address);
    for (const { context } of association.getPresentationContexts()) {
      const kind = acceptOrRefuse(context, mayQuery);
      if (kind !== undefined) accepted.set(context.getPresentationContextId(), kind);
      if (context.getAcceptedTransferSyntaxUid() === EXPLICIT_VR_LITTLE_ENDIAN)
        explicitVr.add(context.getPresentationContextId());
    }
    association.setMaxPduLength(MAX_PDU_BYTES);
    this.isAssociated = true;
    this.context.unassociated.delete(this);
    this.context.openAssociations += 1;
    increment(this.context.associationsByAe, this.callingAeTitle);
    increment(this.context.associationsByAddress, this.address);
    trackOpenAssociations(1);
    countAssociation('accepted');
    this.log('info', {}, 'DICOM association accepted');
    this.sendAssociationAccept();
    this.gate.accept(MAX_PDU_BYTES, accepted, explicitVr);
  }

  override associationReleaseRequested(): void {
    this.isReleaseRequested = true;
    this.log('info', { stores: this.stores }, 'DICOM association released');
    this.sendAssociationReleaseResponse();
  }

  override cEchoRequest(request: CEchoRequest, callback: (response: CEchoResponse) => void): void {
    countEcho();
    const response = responses.CEchoResponse.fromRequest(request);
    response.setStatus(Status.Success);
    callback(response);
    this.gate.answered();
  }

  override createStoreWritableStream(): Writable {
    this.collector = new DataSetCollector({
      dir: spoolDirOf(this.context.config.filesDir),
      limitBytes: this.context.config.limits.rawBodyBytes,
    });
    return this.collector;
  }

  override createDatasetFromStoreWritableStream(
    writable: Writable,
    acceptedPresentationContext: PresentationContext,
    callback: (dataset: InstanceType<typeof Dataset>) => void,
  ): void {
    // Accepted contexts always carry the one transfer syntax chosen at association.
    const transferSyntax = acceptedPresentationContext.getAcceptedTransferSyntaxUid() ?? '';
    if (this.collector === writable) this.collector = undefined;
    // The gate reads no further PDU until this request is answered, so the library's state waits too.
    void (writable as DataSetCollector).result.then((spooled) => {
      if (this.peer.destroyed) {
        if (spooled.ok) void spooled.bytes.dispose();
        return;
      }
      callback(new ReceivedDataSet(spooled, transferSyntax));
    });
  }

  override cStoreRequest(request: CStoreRequest, callback: (response: CStoreResponse) => void): void {
    const answer = (status: number) => {
      const response = responses.CStoreResponse.fromRequest(request);
      response.setStatus(status);
      if (this.peer.destroyed) return;
      callback(response);
      this.gate.answered();
    };
    const work = this.store(request).then(answer, (error: unknown) => {
      this.log('error', { err: error }, 'DICOM C-STORE failed');
      answer(FAILURE.processingFailure);
    });
    this.context.inFlight.add(work);
    void work.finally(() => this.context.inFlight.delete(work));
  }

  override cFindRequest(request: CFindRequest, callback: (responses: CFindResponse[]) => void): void {
    const messageId = request.getMessageId();
    const transferSyntax = request.getDataset()?.getTransferSyntaxUid() ?? IMPLICIT_VR_LITTLE_ENDIAN;
    const taken = this.gate.takeIdentifier();
    const responseOf = (status: number, identifier?: Buffer, comment?: string) => {
      const response = responses.CFindResponse.fromRequest(request);
      response.setStatus(status);
      if (identifier !== undefined) response.setDataset(new EncodedDataSet(identifier, transferSyntax));
      if (comment !== undefined) response.setErrorComment(comment);
      return response;
    };
    // The library's callback may be called once, with every response; pending responses go out one at a
    // time instead, through the library's own sender (on the request's presentation context), so that a
    // C-CANCEL-RQ can stop them and none waits in memory for the others. The final one goes through the
    // callback.
    //
    // Every pending response of one C-FIND has the same command (message id, SOP class, status, a data
    // set): the library encodes it once here, and each answer is sent with those bytes. Encoding it per
    // answer through dcmjs cost about 1.4 ms, most of a worklist answer's CPU (bench/RESULTS.md,
    // worklist).
    const pendingCommands = new Map<number, Buffer>();
    const sendPending = (status: number, identifier: Buffer) => {
      let command = pendingCommands.get(status);
      if (command === undefined) {
        command = responseOf(status, identifier).getCommandDataset().getDenaturalizedCommandDataset();
        pendingCommands.set(status, command);
      }
      const dataset = new EncodedDataSet(identifier, transferSyntax);
      const encoded = command;
      // What the library's sender reads of a response (dcmjs-dimse 0.3 `Network._sendPDataTF`).
      const response = {
        getDataset: () => dataset,
        getCommandDataset: () => ({ getDenaturalizedCommandDataset: () => encoded }),
        toString: () => 'C-FIND-RSP (pending)',
      };
      (this as unknown as LibrarySender)._sendDimse({
        context: this.association!.getPresentationContext(taken?.contextId ?? 0),
        command: response as unknown as CFindResponse,
      });
    };
    const respond = (status: number, identifier?: Buffer, comment?: string) =>
      callback([responseOf(status, identifier, comment)]);
    // The service is the one of the presentation context the identifier came on (the gate let it
    // through only on a Worklist or Query/Retrieve FIND context), whatever the command names.
    const sopClassUid =
      taken === undefined
        ? ''
        : this.association!.getPresentationContext(taken.contextId).getAbstractSyntaxUid();
    const isQuery = sopClassUid === PATIENT_ROOT_FIND || sopClassUid === STUDY_ROOT_FIND;
    const findRequest = {
      identifier: taken?.identifier ?? Buffer.alloc(0),
      isExplicitVr: transferSyntax === EXPLICIT_VR_LITTLE_ENDIAN,
      callingAeTitle: this.callingAeTitle,
    };
    const service = isQuery ? 'query/retrieve' : 'worklist';
    const sink: WorklistFindSink = {
      answer: async (identifier, status) => {
        if (this.peer.destroyed) throw new Error('connection closed');
        sendPending(status, identifier);
        // The next answer waits for the socket to take this one, and a turn of the event loop lets a
        // C-CANCEL-RQ in.
        if (this.peer.writableNeedDrain) await once(this.peer, 'drain');
        await new Promise<void>((resolve) => setImmediate(resolve));
      },
      isCancelled: () => this.cancelledFinds.has(messageId) || this.peer.destroyed,
    };
    const find = isQuery
      ? this.context.queryRetrieve.find(
          { ...findRequest, sopClassUid, address: this.address, associationId: this.associationId },
          sink,
        )
      : this.context.worklist.find(findRequest, sink);
    const work = find.then(
      (outcome) => {
        this.log(
          outcome.status === Status.Success ? 'info' : 'warn',
          {
            status: `0x${outcome.status.toString(16).toUpperCase().padStart(4, '0')}`,
            answers: outcome.answers,
          },
          `DICOM ${service} C-FIND answered`,
        );
        if (this.peer.destroyed) return;
        respond(outcome.status, undefined, outcome.comment);
      },
      (error: unknown) => {
        this.log('error', { err: error }, `DICOM ${service} C-FIND failed`);
        if (!this.peer.destroyed) respond(WORKLIST_UNABLE_TO_PROCESS, undefined, `${service} not available`);
      },
    );
    this.context.inFlight.add(work);
    void work.finally(() => {
      this.context.inFlight.delete(work);
      this.cancelledFinds.delete(messageId);
      this.gate.answered();
    });
  }

  override cMoveRequest(request: CMoveRequest, callback: (responses: CMoveResponse[]) => void): void {
    this.serveRetrieve('move', request, (all) => callback(all));
  }

  override cGetRequest(request: CGetRequest, callback: (responses: CGetResponse[]) => void): void {
    this.serveRetrieve('get', request, (all) => callback(all));
  }

  /**
   * A C-MOVE or C-GET (`qr-retrieve.ts`): pending responses after each sub-operation, sent one at a time
   * as the C-FIND's answers are (so that a C-CANCEL-RQ can stop them), the final one through the
   * library's callback. A C-MOVE's sub-operations go on a new association to its destination
   * (`qr-move.ts`), which must be one of `DICOM_MOVE_DESTINATIONS`; a C-GET's on this association, on the
   * storage contexts the caller proposed (`qr-get.ts`).
   */
  private serveRetrieve(
    kind: 'move' | 'get',
    request: CMoveRequest | CGetRequest,
    callback: (responses: (CMoveResponse | CGetResponse)[]) => void,
  ): void {
    const messageId = request.getMessageId();
    const transferSyntax = request.getDataset()?.getTransferSyntaxUid() ?? IMPLICIT_VR_LITTLE_ENDIAN;
    const taken = this.gate.takeIdentifier();
    const context = this.association!.getPresentationContext(taken?.contextId ?? 0);
    const responseOf = (
      status: number,
      counts?: SubOperationCounts,
      identifier?: Buffer,
      comment?: string,
    ) => {
      const response =
        kind === 'move'
          ? responses.CMoveResponse.fromRequest(request)
          : responses.CGetResponse.fromRequest(request as CGetRequest);
      response.setStatus(status);
      if (counts !== undefined) {
        // Remaining only while sub-operations are under way or were cancelled (PS3.7 C.4.2.1.6).
        if (status === RETRIEVE_STATUS.pending || status === RETRIEVE_STATUS.cancel)
          response.setRemaining(counts.remaining);
        response.setCompleted(counts.completed);
        response.setFailures(counts.failed);
        response.setWarnings(counts.warning);
      }
      if (identifier !== undefined) response.setDataset(new EncodedDataSet(identifier, transferSyntax));
      if (comment !== undefined) response.setErrorComment(comment);
      return response;
    };
    const sopClassUid = taken === undefined ? '' : context.getAbstractSyntaxUid();
    const destination =
      kind === 'move' ? (request.getCommandDataset().getElement('MoveDestination') ?? '').trim() : undefined;
    const service = kind === 'move' ? 'C-MOVE' : 'C-GET';
    const done = (status: number, counts?: SubOperationCounts, identifier?: Buffer, comment?: string) => {
      this.log(
        status === RETRIEVE_STATUS.success ? 'info' : 'warn',
        { status: hex(status), ...counts },
        `DICOM ${service} answered`,
      );
      if (!this.peer.destroyed) callback([responseOf(status, counts, identifier, comment)]);
    };
    const { moveDestinations, remoteNodes, aeTitle } = this.context.config.dicomNetwork;
    const node =
      destination === undefined || !moveDestinations.includes(destination)
        ? undefined
        : remoteNodes.find((n) => n.aeTitle === destination);
    if (kind === 'move' && node === undefined) {
      done(
        RETRIEVE_STATUS.moveDestinationUnknown,
        undefined,
        undefined,
        'not a DICOM_MOVE_DESTINATIONS node',
      );
      this.cancelledFinds.delete(messageId);
      this.gate.answered();
      return;
    }
    let subAssociation: MoveAssociation | undefined;
    const sink: RetrieveSink = {
      needsPairs: kind === 'move',
      begin: async (pairs) => {
        if (kind === 'get') return { ok: true };
        try {
          subAssociation = await openMoveAssociation(
            node!,
            aeTitle,
            pairs,
            { aeTitle: this.callingAeTitle, messageId },
            TIMEOUT_MS,
          );
          return { ok: true };
        } catch (error) {
          this.log('warn', { error: (error as Error).message }, 'DICOM C-MOVE destination not reached');
          return {
            ok: false,
            status: RETRIEVE_STATUS.outOfResources,
            comment: 'the move destination did not accept an association',
          };
        }
      },
      store: async (instance) => {
        if (kind === 'move') return subAssociation?.store(instance);
        if (this.peer.destroyed) return undefined;
        return sendGetSubOperation(this as unknown as Parameters<typeof sendGetSubOperation>[0], {
          association: this.association!,
          gate: this.gate,
          instance,
          isClosed: () => this.peer.destroyed,
        });
      },
      pending: async (counts) => {
        if (this.peer.destroyed) throw new Error('connection closed');
        (this as unknown as LibrarySender)._sendDimse({
          context,
          command: responseOf(RETRIEVE_STATUS.pending, counts),
        });
        if (this.peer.writableNeedDrain) await once(this.peer, 'drain');
        await new Promise<void>((resolve) => setImmediate(resolve));
      },
      isCancelled: () => this.cancelledFinds.has(messageId) || this.peer.destroyed,
      end: async () => {
        await subAssociation?.close();
      },
    };
    const work = this.context.retrieve
      .retrieve(
        {
          sopClassUid,
          identifier: taken?.identifier ?? Buffer.alloc(0),
          isExplicitVr: transferSyntax === EXPLICIT_VR_LITTLE_ENDIAN,
          callingAeTitle: this.callingAeTitle,
          address: this.address,
          associationId: this.associationId,
          ...(destination === undefined ? {} : { destination }),
        },
        sink,
      )
      .then(
        (outcome) => done(outcome.status, outcome.counts, outcome.identifier, outcome.comment),
        (error: unknown) => {
          this.log('error', { err: error }, `DICOM ${service} failed`);
          done(RETRIEVE_STATUS.unableToProcess, undefined, undefined, 'retrieve not available');
        },
      );
    this.context.inFlight.add(work);
    void work.finally(() => {
      this.context.inFlight.delete(work);
      this.cancelledFinds.delete(messageId);
      this.gate.answered();
    });
  }

  override nActionRequest(request: NActionRequest, callback: (response: NActionResponse) => void): void {
    const isOverflow = this.gate.takeCommitmentOverflow();
    const respond = (status: number, comment?: string) => {
      const response = responses.NActionResponse.fromRequest(request);
      response.setStatus(status);
      if (comment !== undefined) response.setErrorComment(comment);
      this.log(
        status === Status.Success ? 'info' : 'warn',
        { status: hex(status) },
        'DICOM storage commitment request answered',
      );
      if (this.peer.destroyed) return;
      callback(response);
      this.gate.answered();
    };
    if (request.getRequestedSopClassUid() !== STORAGE_COMMITMENT_PUSH)
      return respond(COMMITMENT_STATUS.invalidObjectInstance, 'not the Storage Commitment Push Model');
    if (request.getRequestedSopInstanceUid() !== STORAGE_COMMITMENT_INSTANCE)
      return respond(COMMITMENT_STATUS.invalidObjectInstance, 'not the well-known SOP Instance');
    if (request.getActionTypeId() !== REQUEST_COMMITMENT_ACTION)
      return respond(COMMITMENT_STATUS.noSuchAction);
    const { commitmentMaxInstances } = this.context.config.dicomNetwork;
    if (isOverflow)
      return respond(
        COMMITMENT_STATUS.resourceLimitation,
        `more than ${commitmentMaxInstances} instances (DICOM_COMMITMENT_MAX_INSTANCES)`,
      );
    const reading = readCommitmentRequest(request.getDataset()?.getElements(), commitmentMaxInstances);
    if (!reading.ok) return respond(reading.status, reading.comment);
    respond(COMMITMENT_STATUS.success);
    const transferSyntax =
      this.association?.getAcceptedPresentationContextFromRequest(request)?.getAcceptedTransferSyntaxUid() ??
      IMPLICIT_VR_LITTLE_ENDIAN;
    const work = checkCommitment(this.context.database.db, reading.request).then(
      (report) => this.deliverReport(report, transferSyntax),
      (error: unknown) => {
        // No report can be given: the device sees no answer and asks again (PS3.4 J.3.3).
        this.log('error', { err: error }, 'DICOM storage commitment check failed');
      },
    );
    this.context.inFlight.add(work);
    void work.finally(() => this.context.inFlight.delete(work));
  }

  /** Sends a report on this association while it is open, else on a new one to the caller's node. */
  private deliverReport(report: CommitmentReport, transferSyntax: string): void {
    const counts = { committed: report.committed.length, failed: report.failed.length };
    if (!this.isAssociated || this.isReleaseRequested || this.peer.destroyed)
      return this.deliverElsewhere(report);
    const request = reportRequest(report, transferSyntax);
    this.unansweredReports.add(report);
    request.on('response', (response: NEventReportResponse) => {
      this.unansweredReports.delete(report);
      this.log(
        'info',
        { ...counts, status: hex(response.getStatus()) },
        'DICOM storage commitment report sent on the request association',
      );
    });
    this.gate.expectEventReportResponse();
    this.sendRequests(request);
  }

  /** A report that this association cannot carry: on a new association to the caller's remote node. */
  private deliverElsewhere(report: CommitmentReport): void {
    const counts = { committed: report.committed.length, failed: report.failed.length };
    const node: DicomRemoteNode | undefined = this.context.config.dicomNetwork.remoteNodes.find(
      (n) => n.aeTitle === this.callingAeTitle,
    );
    if (node === undefined) {
      this.log(
        'warn',
        counts,
        'DICOM storage commitment report lost: the caller has no DICOM_REMOTE_NODES entry',
      );
      return;
    }
    const work = sendReportToNode(
      report,
      node,
      this.context.config.dicomNetwork.aeTitle,
      this.context.logger,
    ).then((status) =>
      this.log(
        status === undefined ? 'error' : 'info',
        { ...counts, status: status === undefined ? undefined : hex(status) },
        status === undefined
          ? 'DICOM storage commitment report lost: the remote node did not answer'
          : 'DICOM storage commitment report sent on a new association',
      ),
    );
    this.context.inFlight.add(work);
    void work.finally(() => this.context.inFlight.delete(work));
  }

  override cCancelRequest(request: CCancelRequest): void {
    this.cancelledFinds.add(request.getMessageIdBeingRespondedTo());
  }

  override abort(): void {
    countAssociation('aborted');
    this.log('info', { stores: this.stores }, 'DICOM association aborted by the peer');
    this.peer.destroy();
  }

  /** Stores one instance; resolves to the C-STORE status, once its audit row is committed. */
  private async store(request: CStoreRequest): Promise<number> {
    this.stores += 1;
    const dataSet = request.getDataset();
    const spooled: SpoolResult =
      dataSet instanceof ReceivedDataSet ? dataSet.spooled : { ok: false, cause: 'no data set' };
    let outcome: ReceiveOutcome;
    if (!spooled.ok) {
      outcome = {
        ok: false,
        reason: FAILURE.outOfResources,
        sopClassUid: undefined,
        sopInstanceUid: undefined,
        cause: spooled.cause,
      };
    } else {
      // As queue add: twice the data set (the Part 10 file, and the driver's copy when it is bound),
      // reserved before a spooled one is loaded; one kept in memory was counted as it arrived.
      const release = spooled.bytes.isOnDisk
        ? await this.context.uploadMemory.reserve(2 * spooled.bytes.sizeBytes)
        : () => {};
      try {
        const loaded = await spooled.bytes.load();
        const file = buildPart10(
          {
            sopClassUid: request.getAffectedSopClassUid(),
            sopInstanceUid: request.getAffectedSopInstanceUid(),
            transferSyntaxUid: dataSet!.getTransferSyntaxUid(),
            sourceAeTitle: this.callingAeTitle,
          },
          loaded,
        );
        await spooled.bytes.dispose();
        releaseInstanceBytes(loaded);
        try {
          outcome = await this.receive(file);
        } finally {
          releaseInstanceBytes(file);
        }
      } finally {
        release();
        await spooled.bytes.dispose();
      }
    }
    const status: number = outcome.ok ? Status.Success : outcome.reason;
    this.log(
      outcome.ok ? 'info' : outcome.error === undefined ? 'warn' : 'error',
      outcome.ok
        ? { requestId: outcome.requestId }
        : { status: hex(outcome.reason), cause: outcome.cause, err: outcome.error },
      outcome.ok ? 'DICOM C-STORE stored' : 'DICOM C-STORE refused',
    );
    try {
      await this.context.audit.record({
        action: 'dicom.store',
        userId: null,
        targetType: 'request',
        targetIds: outcome.ok ? [outcome.requestId] : [],
        outcome: outcome.ok ? 200 : httpStatusOf(outcome.reason),
        clientAddress: this.address,
        requestId: this.associationId,
      });
    } catch (error) {
      // As on the HTTP side: no success is answered for a store whose audit row could be lost.
      this.log('error', { err: error }, 'audit row not written: C-STORE answered A700');
      return FAILURE.outOfResources;
    }
    return status;
  }

  /** Checks and queues the Part 10 file of a C-STORE. */
  private receive(file: Buffer): Promise<ReceiveOutcome> {
    return this.context.receiver.receive(file, {
      path: 'c-store',
      systemMessage: this.callingAeTitle,
      requestData: {
        source: C_STORE_SOURCE,
        calling_ae_title: this.callingAeTitle,
        called_ae_title: this.context.config.dicomNetwork.aeTitle,
        source_address: this.address,
      },
      headers: {
        'dicom-calling-ae-title': this.callingAeTitle,
        'dicom-called-ae-title': this.context.config.dicomNetwork.aeTitle,
        'dicom-association-id': this.associationId,
      },
      clientAddress: this.address,
      userId: 1,
    });
  }

  /** The socket closed (released, aborted, dropped): partial data sets are dropped with this object. */
  closed(): void {
    this.collector?.destroy();
    this.collector = undefined;
    for (const report of this.unansweredReports) this.deliverElsewhere(report);
    this.unansweredReports.clear();
    this.context.unassociated.delete(this);
    if (this.isAssociated) {
      this.isAssociated = false;
      this.context.openAssociations -= 1;
      decrement(this.context.associationsByAe, this.callingAeTitle);
      decrement(this.context.associationsByAddress, this.address);
      trackOpenAssociations(-1);
    }
  }

  /** Closes a connection not yet associated to make room for a new one. */
  evict(): void {
    this.context.unassociated.delete(this);
    this.context.connections.delete(this);
    this.peer.destroy();
  }

  /** A-ABORT from the service provider, then close (server stop). */
  abortAndClose(): void {
    if (this.isAssociated && !this.peer.destroyed) this.sendAbort(constants.AbortSource.ServiceProvider, 0);
    this.peer.end();
  }

  destroy(): void {
    this.peer.destroy();
  }

  private log(level: 'info' | 'warn' | 'error', fields: Record<string, unknown>, message: string): void {
    this.context.logger[level](
      {
        association: this.associationId,
        callingAeTitle: this.callingAeTitle || undefined,
        calledAeTitle: this.association?.getCalledAeTitle().trim(),
        peer: this.address,
        ...fields,
      },
      message,
    );
  }
}

/**
 * Accepts a proposed presentation context with a transfer syntax, or refuses it with the reason; returns
 * what an accepted one carries.
 */
function acceptOrRefuse(context: PresentationContext, mayQuery: boolean): ContextKind | undefined {
  const abstractSyntax = context.getAbstractSyntaxUid();
  const retrieveKind: ContextKind | undefined =
    abstractSyntax === PATIENT_ROOT_MOVE || abstractSyntax === STUDY_ROOT_MOVE
      ? 'move'
      : abstractSyntax === PATIENT_ROOT_GET || abstractSyntax === STUDY_ROOT_GET
        ? 'get'
        : undefined;
  if (retrieveKind !== undefined) {
    // As the FIND contexts: only for a caller of DICOM_QR_CALLERS.
    if (!mayQuery) {
      context.setResult(PresentationContextResult.RejectUser);
      return undefined;
    }
    const proposed = context.getTransferSyntaxUids();
    const chosen = [EXPLICIT_VR_LITTLE_ENDIAN, IMPLICIT_VR_LITTLE_ENDIAN].find((ts) => proposed.includes(ts));
    if (chosen === undefined) {
      context.setResult(PresentationContextResult.RejectTransferSyntaxesNotSupported);
      return undefined;
    }
    context.setResult(PresentationContextResult.Accept, chosen);
    return retrieveKind;
  }
  if (abstractSyntax === PATIENT_ROOT_FIND || abstractSyntax === STUDY_ROOT_FIND) {
    // A caller not in DICOM_QR_CALLERS: user-rejection of the context (PS3.8 9.3.3.2), nothing answered.
    if (!mayQuery) {
      context.setResult(PresentationContextResult.RejectUser);
      return undefined;
    }
    const proposed = context.getTransferSyntaxUids();
    const chosen = [EXPLICIT_VR_LITTLE_ENDIAN, IMPLICIT_VR_LITTLE_ENDIAN].find((ts) => proposed.includes(ts));
    if (chosen === undefined) {
      context.setResult(PresentationContextResult.RejectTransferSyntaxesNotSupported);
      return undefined;
    }
    context.setResult(PresentationContextResult.Accept, chosen);
    return 'query';
  }
  if (abstractSyntax === STORAGE_COMMITMENT_PUSH) {
    const proposed = context.getTransferSyntaxUids();
    const chosen = [EXPLICIT_VR_LITTLE_ENDIAN, IMPLICIT_VR_LITTLE_ENDIAN].find((ts) => proposed.includes(ts));
    if (chosen === undefined) {
      context.setResult(PresentationContextResult.RejectTransferSyntaxesNotSupported);
      return undefined;
    }
    context.setResult(PresentationContextResult.Accept, chosen);
    return 'commitment';
  }
  if (abstractSyntax === MODALITY_WORKLIST_FIND) {
    // The worklist identifiers are read and written in Little Endian, Explicit VR preferred.
    const proposed = context.getTransferSyntaxUids();
    const chosen = [EXPLICIT_VR_LITTLE_ENDIAN, IMPLICIT_VR_LITTLE_ENDIAN].find((ts) => proposed.includes(ts));
    if (chosen === undefined) {
      context.setResult(PresentationContextResult.RejectTransferSyntaxesNotSupported);
      return undefined;
    }
    context.setResult(PresentationContextResult.Accept, chosen);
    return 'worklist';
  }
  const kind: ContextKind | undefined =
    abstractSyntax === VERIFICATION_SOP_CLASS
      ? 'verification'
      : findStorageClass(abstractSyntax) === undefined
        ? undefined
        : 'storage';
  if (kind === undefined) {
    context.setResult(PresentationContextResult.RejectAbstractSyntaxNotSupported);
    return undefined;
  }
  const chosen = chooseTransferSyntax(context.getTransferSyntaxUids());
  if (chosen === undefined) {
    context.setResult(PresentationContextResult.RejectTransferSyntaxesNotSupported);
    return undefined;
  }
  context.setResult(PresentationContextResult.Accept, chosen);
  return kind;
}

/** The allowed callers, each AE title with the addresses it may come from. */
type AllowedCallers = ReadonlyMap<string, BlockList | 'any'>;

/** Indexes `DICOM_ALLOWED_CALLERS` by AE title, its addresses and subnets in a `BlockList` (a matcher). */
export function compileAllowedCallers(callers: readonly DicomCaller[]): AllowedCallers {
  const compiled = new Map<string, BlockList | 'any'>();
  for (const { aeTitle, address } of callers) {
    const known = compiled.get(aeTitle);
    if (known === 'any') continue;
    if (address === '*') {
      compiled.set(aeTitle, 'any');
      continue;
    }
    const list = known ?? new BlockList();
    const slash = address.indexOf('/');
    const ip = normaliseAddress(slash === -1 ? address : address.slice(0, slash));
    const family = isIPv6(ip) ? 'ipv6' : 'ipv4';
    if (slash === -1) list.addAddress(ip, family);
    else list.addSubnet(ip, Number(address.slice(slash + 1)), family);
    compiled.set(aeTitle, list);
  }
  return compiled;
}

/** True when an allowed caller names `aeTitle` and an address or subnet holding `address` (or `*`). */
export function isAllowedCaller(callers: AllowedCallers, aeTitle: string, address: string): boolean {
  const allowed = callers.get(aeTitle);
  if (allowed === undefined) return false;
  if (allowed === 'any') return true;
  return allowed.check(address, isIPv6(address) ? 'ipv6' : 'ipv4');
}

function increment(counts: Map<string, number>, key: string): void {
  counts.set(key, (counts.get(key) ?? 0) + 1);
}

function decrement(counts: Map<string, number>, key: string): void {
  const count = (counts.get(key) ?? 0) - 1;
  if (count > 0) counts.set(key, count);
  else counts.delete(key);
}

/** An IPv4 peer seen through an IPv6 socket (`::ffff:10.0.0.5`) as the plain IPv4 address. */
function normaliseAddress(address: string): string {
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}

function hex(status: number): string {
  return `0x${status.toString(16).toUpperCase().padStart(4, '0')}`;
}

/** The HTTP status an audit row records for a C-STORE outcome, as STOW-RS would answer it. */
function httpStatusOf(reason: FailureReason): number {
  if (reason === FAILURE.outOfResources) return 503;
  if (reason === FAILURE.processingFailure) return 500;
  return 409;
}
