/**
 * The C-MOVE's sub-operations (PS3.4 C.4.2.2): an association, as the Storage SCU, to the move
 * destination's `DICOM_REMOTE_NODES` entry (the address the configuration names, never one the caller
 * gives), proposing one presentation context per SOP class and transfer syntax held (each instance goes
 * as it was received, never transcoded), then one C-STORE-RQ at a time, each carrying the Move Originator
 * AE Title and Message ID, the next sent once the last is answered.
 *
 * The association is dcmjs-dimse's: its `Network` (the class its `Client` and `Scp` are built on) writes
 * and reads the PDUs. The `Client` is not used because it takes every request before the association is
 * opened, which would hold every instance of the retrieve at once; the library's list of requests sent
 * (`pending`, never emptied by the library) is emptied here once a request is answered.
 */
import type { Socket } from 'node:net';
import { connect } from 'node:net';
import dcmjsDimse from 'dcmjs-dimse';
import type * as Dimse from 'dcmjs-dimse';
import type { DicomRemoteNode } from '../../config.ts';
import type { RetrieveInstance, StoragePair } from './qr-retrieve.ts';
import { RawDataSet } from './qr-retrieve.ts';

const { Scp, association, constants, requests } = dcmjsDimse;

type Association = Dimse.association.Association;
type CStoreRequest = Dimse.requests.CStoreRequest;
type CStoreResponse = Dimse.responses.CStoreResponse;

/** The part of the library's `Network` this file drives (dcmjs-dimse 0.3: the base class of `Scp`). */
interface LibraryNetwork {
  sendAssociationRequest(association: Association): void;
  sendAssociationReleaseRequest(): void;
  sendAbort(source?: number, reason?: number): void;
  sendRequests(request: CStoreRequest): void;
  on(event: string, listener: (...args: never[]) => void): void;
  pending: unknown[];
}
type NetworkClass = new (
  socket: Socket,
  options: { connectTimeout: number; associationTimeout: number; pduTimeout: number },
) => LibraryNetwork;
const Network = Object.getPrototypeOf(Scp) as NetworkClass;

/** Presentation contexts one association may propose (PS3.8 9.3.2.2: odd ids 1 to 255). */
export const MAX_PRESENTATION_CONTEXTS = 128;

export interface MoveAssociation {
  /** Sends one instance; resolves to the destination's C-STORE status, undefined when it cannot go. */
  store(instance: RetrieveInstance): Promise<number | undefined>;
  /** Releases the association (aborts it when the release is not answered in time). */
  close(): Promise<void>;
}

export interface MoveOriginator {
  readonly aeTitle: string;
  readonly messageId: number;
}

/**
 * Opens the association to `node` as `callingAeTitle`, proposing `pairs`; rejects when it cannot be
 * opened (refused, not reachable, nothing accepted).
 */
export async function openMoveAssociation(
  node: DicomRemoteNode,
  callingAeTitle: string,
  pairs: readonly StoragePair[],
  originator: MoveOriginator,
  timeoutMs: number,
): Promise<MoveAssociation> {
  const proposed = new association.Association(callingAeTitle, node.aeTitle);
  for (const pair of pairs.slice(0, MAX_PRESENTATION_CONTEXTS)) {
    const id = proposed.addPresentationContext(pair.sopClassUid);
    proposed.addTransferSyntaxToPresentationContext(id, pair.transferSyntaxUid);
  }
  const socket = connect({ host: node.host, port: node.port });
  // Each C-STORE is a command PDU then data PDUs, each answered before the next instance goes: without
  // this, Nagle's algorithm holds the last small write for the peer's delayed acknowledgement.
  socket.setNoDelay(true);
  const network = new Network(socket, {
    connectTimeout: timeoutMs,
    associationTimeout: timeoutMs,
    pduTimeout: timeoutMs,
  });
  let closed = false;
  let onClosed: (error: Error) => void = () => {};
  const closedError = new Promise<never>((_, reject) => {
    onClosed = reject;
  });
  closedError.catch(() => {});
  const fail = (error: Error) => {
    closed = true;
    onClosed(error);
  };
  network.on('networkError', (error: Error) => {
    socket.destroy();
    fail(error);
  });
  network.on('close', () => fail(new Error('the destination closed the association')));
  network.on('abort', () => {
    socket.destroy();
    fail(new Error('the destination aborted the association'));
  });
  const accepted = await Promise.race([
    new Promise<Association>((resolve, reject) => {
      network.on('connect', () => network.sendAssociationRequest(proposed));
      network.on('associationAccepted', (result: Association) => resolve(result));
      network.on('associationRejected', () => {
        socket.end();
        reject(new Error('the destination rejected the association'));
      });
    }),
    closedError,
  ]);
  /** Accepted context ids by `class transfer-syntax`. */
  const contexts = new Set<string>();
  for (const { context } of accepted.getPresentationContexts())
    if (context.getResult() === constants.PresentationContextResult.Accept)
      contexts.add(`${context.getAbstractSyntaxUid()} ${context.getAcceptedTransferSyntaxUid() ?? ''}`);
  if (contexts.size === 0) {
    network.sendAbort();
    socket.destroy();
    throw new Error('the destination accepted no presentation context');
  }

  return {
    async store(instance) {
      if (closed) return undefined;
      if (!contexts.has(`${instance.sopClassUid} ${instance.transferSyntaxUid}`)) return undefined;
      const request = new requests.CStoreRequest(
        new RawDataSet(instance.dataSet, instance.transferSyntaxUid),
      );
      request.setAffectedSopClassUid(instance.sopClassUid);
      request.setAffectedSopInstanceUid(instance.sopInstanceUid);
      const command = request.getCommandDataset();
      command.setElement('MoveOriginatorApplicationEntityTitle', originator.aeTitle);
      // A US value: the library's typing names strings only.
      command.setElement('MoveOriginatorMessageID', originator.messageId as unknown as string);
      const answered = new Promise<number>((resolve) => {
        request.on('response', (response: CStoreResponse) => resolve(response.getStatus()));
      });
      network.sendRequests(request);
      try {
        return await Promise.race([answered, closedError]);
      } catch {
        return undefined;
      } finally {
        const index = network.pending.indexOf(request);
        if (index !== -1) network.pending.splice(index, 1);
      }
    },
    async close() {
      if (closed) return;
      const released = new Promise<void>((resolve) => {
        network.on('associationReleaseResponse', () => resolve());
      });
      network.sendAssociationReleaseRequest();
      const timer = new Promise<void>((resolve) => setTimeout(resolve, timeoutMs).unref());
      await Promise.race([released, closedError.catch(() => {}), timer]);
      socket.end();
      if (!closed) setTimeout(() => socket.destroy(), 2000).unref();
    },
  };
}
