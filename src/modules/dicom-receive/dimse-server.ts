/**
 * The DIMSE C-STORE SCP (PS3.4 B, PS3.7, PS3.8) with C-ECHO, on `dcmjs-dimse`: the library reads and
 * writes every PDU; this file decides what to accept and hands each received data set, as a Part 10
 * file, to the receiver (queue intake). Started by the server process when `DICOM_PORT` is set.
 *
 * - Associations: the called AE title must be `DICOM_AE_TITLE`; the calling AE title (and, when
 *   configured, the peer address) must be in `DICOM_ALLOWED_CALLERS`; beyond `DICOM_MAX_ASSOCIATIONS`
 *   open ones a new one is refused as "local limit exceeded" (transient). A peer sends at most
 *   {@link MAX_UNASSOCIATED_BYTES} before its association is accepted.
 * - Presentation contexts: Verification and the storage classes of `storage-classes.ts`, each with the
 *   first acceptable transfer syntax the sender proposes; anything else is refused per context.
 * - C-STORE: the data set is collected in memory up to `RAW_BODY_LIMIT_BYTES` (beyond, the store fails
 *   with A700 and nothing is kept), then stored and queued in one transaction; its audit row is committed
 *   before the response is sent. A connection lost before the data set is complete leaves nothing.
 * - Logs and metrics per association and per store: AE titles, peer address, outcome, status; never a
 *   UID or anything from the data set.
 */
import { randomUUID } from 'node:crypto';
import type { AddressInfo, Socket } from 'node:net';
import { createServer } from 'node:net';
import { Writable } from 'node:stream';
import dcmjsDimse from 'dcmjs-dimse';
import type * as Dimse from 'dcmjs-dimse';
import type { Config, DicomCaller } from '../../config.ts';
import type { Database } from '../../db/database.ts';
import type { Logger } from '../../logger.ts';
import { createAuditTrail } from '../audit/index.ts';
import type { AuditTrail } from '../audit/index.ts';
import type { AssociationOutcome } from './dicom-metrics.ts';
import { countAssociation, countEcho, trackOpenAssociations } from './dicom-metrics.ts';
import type { FailureReason } from './instance.ts';
import { FAILURE, IMPLEMENTATION_CLASS_UID, IMPLEMENTATION_VERSION_NAME, buildPart10 } from './instance.ts';
import type { DicomReceiver, ReceiveOutcome } from './receive.ts';
import { createDicomReceiver } from './receive.ts';
import { VERIFICATION_SOP_CLASS, chooseTransferSyntax, findStorageClass } from './storage-classes.ts';

const { Dataset, Implementation, Scp, constants, log: dimseLog, responses } = dcmjsDimse;
const { PresentationContextResult, RejectReason, RejectResult, RejectSource, Status } = constants;

type Association = Dimse.association.Association;
type PresentationContext = Dimse.association.PresentationContext;
type CEchoRequest = Dimse.requests.CEchoRequest;
type CStoreRequest = Dimse.requests.CStoreRequest;
type CEchoResponse = Dimse.responses.CEchoResponse;
type CStoreResponse = Dimse.responses.CStoreResponse;

/** REQUEST_DATA `source` of instances received by C-STORE. */
export const C_STORE_SOURCE = 'C-STORE';

/** Bytes a peer may send before its association is accepted (an A-ASSOCIATE-RQ is a few KiB). */
export const MAX_UNASSOCIATED_BYTES = 256 * 1024;
/** Largest PDU the service receives; senders split data sets into PDUs of at most this. */
const MAX_PDU_BYTES = 256 * 1024;
/** Association and PDU idle timeouts of the library, in ms. */
const TIMEOUT_MS = 60_000;

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
  /** Defaults to a receiver of `database` and `config`. */
  readonly receiver?: DicomReceiver;
}

/** Per-server state shared by its connections. */
interface ServerContext {
  readonly config: Config;
  readonly logger: Logger;
  readonly receiver: DicomReceiver;
  readonly audit: AuditTrail;
  readonly connections: Set<StoreScp>;
  readonly inFlight: Set<Promise<void>>;
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
    receiver: deps.receiver ?? createDicomReceiver({ database, config }),
    audit: createAuditTrail(database),
    connections: new Set(),
    inFlight: new Set(),
    openAssociations: 0,
    isStopping: false,
  };
  const server = createServer((socket) => {
    if (context.isStopping) {
      socket.destroy();
      return;
    }
    const scp = new StoreScp(socket, context);
    context.connections.add(scp);
    socket.once('close', () => {
      context.connections.delete(scp);
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
  readonly bytes: Buffer | undefined;
  constructor(bytes: Buffer | undefined, transferSyntaxUid: string) {
    // An empty element map: the data set is never parsed into dcmjs objects here.
    super({}, transferSyntaxUid);
    this.bytes = bytes;
  }
}

/** Collects a data set's fragments up to `limitBytes`; past it, keeps nothing (the store then fails). */
class DataSetCollector extends Writable {
  private readonly limitBytes: number;
  private chunks: Buffer[] = [];
  private sizeBytes = 0;
  isOverLimit = false;

  constructor(limitBytes: number) {
    super();
    this.limitBytes = limitBytes;
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (error?: Error | null) => void): void {
    if (!this.isOverLimit) {
      this.sizeBytes += chunk.length;
      if (this.sizeBytes > this.limitBytes) {
        this.isOverLimit = true;
        this.chunks = [];
      } else {
        this.chunks.push(chunk);
      }
    }
    done();
  }

  /** The whole data set, or undefined when it was over the limit. */
  take(): Buffer | undefined {
    const bytes = this.isOverLimit ? undefined : Buffer.concat(this.chunks, this.sizeBytes);
    this.chunks = [];
    return bytes;
  }
}

/** One connection: at most one association, its C-ECHOs and C-STOREs. */
class StoreScp extends Scp {
  private readonly context: ServerContext;
  private readonly peer: Socket;
  private readonly address: string;
  /** Names the association in logs and audit rows. */
  private readonly associationId = randomUUID();
  private association: Association | undefined;
  private isAssociated = false;
  private callingAeTitle = '';
  private unassociatedBytes = 0;
  private stores = 0;

  constructor(socket: Socket, context: ServerContext) {
    super(socket, { associationTimeout: TIMEOUT_MS, pduTimeout: TIMEOUT_MS, connectTimeout: TIMEOUT_MS });
    this.context = context;
    this.peer = socket;
    this.address = normaliseAddress(socket.remoteAddress ?? '');
    socket.on('data', (chunk: Buffer) => {
      if (this.isAssociated) return;
      this.unassociatedBytes += chunk.length;
      if (this.unassociatedBytes > MAX_UNASSOCIATED_BYTES) {
        this.log('warn', { bytes: this.unassociatedBytes }, 'DICOM peer sent too much before association');
        socket.destroy();
      }
    });
    this.on('networkError', (error: Error) => {
      this.log('info', { error: error.message }, 'DICOM connection error');
      socket.destroy();
    });
  }

  override associationRequested(association: Association): void {
    this.association = association;
    this.callingAeTitle = association.getCallingAeTitle().trim();
    const { aeTitle, allowedCallers, maxAssociations } = this.context.config.dicomNetwork;
    const refuse = (outcome: AssociationOutcome, result: number, source: number, reason: number) => {
      countAssociation(outcome);
      this.log('warn', { outcome }, 'DICOM association refused');
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
    if (!isAllowedCaller(allowedCallers, this.callingAeTitle, this.address))
      return refuse(
        'refused-calling-ae',
        RejectResult.Permanent,
        RejectSource.ServiceUser,
        RejectReason.CallingAeNotRecognized,
      );
    if (this.context.isStopping || this.context.openAssociations >= maxAssociations)
      return refuse(
        'refused-limit',
        RejectResult.Transient,
        RejectSource.ServiceProviderPresentation,
        RejectReason.LocalLimitExceeded,
      );

    for (const { context } of association.getPresentationContexts()) acceptOrRefuse(context);
    association.setMaxPduLength(MAX_PDU_BYTES);
    this.isAssociated = true;
    this.context.openAssociations += 1;
    trackOpenAssociations(1);
    countAssociation('accepted');
    this.log('info', {}, 'DICOM association accepted');
    this.sendAssociationAccept();
  }

  override associationReleaseRequested(): void {
    this.log('info', { stores: this.stores }, 'DICOM association released');
    this.sendAssociationReleaseResponse();
  }

  override cEchoRequest(request: CEchoRequest, callback: (response: CEchoResponse) => void): void {
    countEcho();
    const response = responses.CEchoResponse.fromRequest(request);
    response.setStatus(Status.Success);
    callback(response);
  }

  override createStoreWritableStream(): Writable {
    return new DataSetCollector(this.context.config.limits.rawBodyBytes);
  }

  override createDatasetFromStoreWritableStream(
    writable: Writable,
    acceptedPresentationContext: PresentationContext,
    callback: (dataset: InstanceType<typeof Dataset>) => void,
  ): void {
    const bytes = (writable as DataSetCollector).take();
    // Accepted contexts always carry the one transfer syntax chosen at association.
    const transferSyntax = acceptedPresentationContext.getAcceptedTransferSyntaxUid() ?? '';
    callback(new ReceivedDataSet(bytes, transferSyntax));
  }

  override cStoreRequest(request: CStoreRequest, callback: (response: CStoreResponse) => void): void {
    const work = this.store(request).then(
      (status) => {
        const response = responses.CStoreResponse.fromRequest(request);
        response.setStatus(status);
        if (!this.peer.destroyed) callback(response);
      },
      (error: unknown) => {
        this.log('error', { err: error }, 'DICOM C-STORE failed');
        const response = responses.CStoreResponse.fromRequest(request);
        response.setStatus(FAILURE.processingFailure);
        if (!this.peer.destroyed) callback(response);
      },
    );
    this.context.inFlight.add(work);
    void work.finally(() => this.context.inFlight.delete(work));
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
    const bytes = dataSet instanceof ReceivedDataSet ? dataSet.bytes : undefined;
    let outcome: ReceiveOutcome;
    if (bytes === undefined) {
      outcome = {
        ok: false,
        reason: FAILURE.outOfResources,
        sopClassUid: undefined,
        sopInstanceUid: undefined,
        cause: 'data set larger than RAW_BODY_LIMIT_BYTES',
      };
    } else {
      const file = buildPart10(
        {
          sopClassUid: request.getAffectedSopClassUid(),
          sopInstanceUid: request.getAffectedSopInstanceUid(),
          transferSyntaxUid: dataSet!.getTransferSyntaxUid(),
          sourceAeTitle: this.callingAeTitle,
        },
        bytes,
      );
      outcome = await this.context.receiver.receive(file, {
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

  /** The socket closed (released, aborted, dropped): partial data sets are dropped with this object. */
  closed(): void {
    if (this.isAssociated) {
      this.isAssociated = false;
      this.context.openAssociations -= 1;
      trackOpenAssociations(-1);
    }
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

/** Accepts a proposed presentation context with a transfer syntax, or refuses it with the reason. */
function acceptOrRefuse(context: PresentationContext): void {
  const abstractSyntax = context.getAbstractSyntaxUid();
  if (abstractSyntax !== VERIFICATION_SOP_CLASS && findStorageClass(abstractSyntax) === undefined) {
    context.setResult(PresentationContextResult.RejectAbstractSyntaxNotSupported);
    return;
  }
  const chosen = chooseTransferSyntax(context.getTransferSyntaxUids());
  if (chosen === undefined) context.setResult(PresentationContextResult.RejectTransferSyntaxesNotSupported);
  else context.setResult(PresentationContextResult.Accept, chosen);
}

/** True when a configured caller names `aeTitle` and, if it names an address, that one. */
export function isAllowedCaller(callers: readonly DicomCaller[], aeTitle: string, address: string): boolean {
  return callers.some(
    (c) => c.aeTitle === aeTitle && (c.address === undefined || normaliseAddress(c.address) === address),
  );
}

/** An IPv4 peer seen through an IPv6 socket (`::ffff:10.0.0.5`) as the plain IPv4 address. */
function normaliseAddress(address: string): string {
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}

function hex(status: FailureReason): string {
  return `0x${status.toString(16).toUpperCase().padStart(4, '0')}`;
}

/** The HTTP status an audit row records for a C-STORE outcome, as STOW-RS would answer it. */
function httpStatusOf(reason: FailureReason): number {
  if (reason === FAILURE.outOfResources) return 503;
  if (reason === FAILURE.processingFailure) return 500;
  return 409;
}
