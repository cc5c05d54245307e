/**
 * A C-GET's sub-operation (PS3.4 C.4.3.2): one C-STORE-RQ on the caller's own association, on a storage
 * context the caller proposed for the instance's SOP class with the SCP role (SCP/SCU Role Selection,
 * PS3.7 D.3.3.4) and accepted in the transfer syntax the instance is held in (it goes as received, never
 * transcoded). An instance without such a context is not sent: the sub-operation fails.
 *
 * The request goes through the library's own sender of the association (`Network._sendDimse`, with its
 * message ids and its list of requests awaiting a response, dcmjs-dimse 0.3), which is emptied here once
 * the response came: the library never empties it, and it would hold every instance sent.
 */
import dcmjsDimse from 'dcmjs-dimse';
import type * as Dimse from 'dcmjs-dimse';
import type { PduGate } from './pdu-gate.ts';
import type { RetrieveInstance } from './qr-retrieve.ts';
import { RawDataSet } from './qr-retrieve.ts';

const { constants, requests } = dcmjsDimse;

type Association = Dimse.association.Association;
type PresentationContext = Dimse.association.PresentationContext;
type CStoreRequest = Dimse.requests.CStoreRequest;
type CStoreResponse = Dimse.responses.CStoreResponse;

/** What the SCP's library object offers to send a request on its association. */
export interface GetSender {
  _sendDimse(message: { context: PresentationContext; command: CStoreRequest }): void;
  _getNextMessageId(): number;
  pending: unknown[];
  on(event: 'close', listener: () => void): void;
  off(event: 'close', listener: () => void): void;
}

/** Sends one instance; resolves to the caller's C-STORE status, undefined when it could not be sent. */
export async function sendGetSubOperation(
  sender: GetSender,
  options: {
    readonly association: Association;
    readonly gate: PduGate;
    readonly instance: RetrieveInstance;
    readonly isClosed: () => boolean;
  },
): Promise<number | undefined> {
  const { association, gate, instance } = options;
  const context = association
    .getPresentationContexts()
    .map((pc) => pc.context)
    .find(
      (c) =>
        c.getResult() === constants.PresentationContextResult.Accept &&
        c.getAbstractSyntaxUid() === instance.sopClassUid &&
        c.getAcceptedTransferSyntaxUid() === instance.transferSyntaxUid &&
        c.getProviderRole() === true,
    );
  if (context === undefined || options.isClosed()) return undefined;
  const request = new requests.CStoreRequest(new RawDataSet(instance.dataSet, instance.transferSyntaxUid));
  request.setAffectedSopClassUid(instance.sopClassUid);
  request.setAffectedSopInstanceUid(instance.sopInstanceUid);
  request.setMessageId(sender._getNextMessageId());
  let onClose: () => void = () => {};
  const answered = new Promise<number | undefined>((resolve) => {
    request.on('response', (response: CStoreResponse) => resolve(response.getStatus()));
    onClose = () => resolve(undefined);
    sender.on('close', onClose);
  });
  sender.pending.push(request);
  gate.expectStoreResponse();
  try {
    sender._sendDimse({ context, command: request });
    const status = await answered;
    if (status === undefined) gate.forgetStoreResponse();
    return status;
  } finally {
    sender.off('close', onClose);
    const index = sender.pending.indexOf(request);
    if (index !== -1) sender.pending.splice(index, 1);
  }
}
