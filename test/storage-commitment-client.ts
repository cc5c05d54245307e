/**
 * dcmjs-dimse's Client as a Storage Commitment SCU (dcmtk has none): an N-ACTION naming instances, the
 * association kept open for the report, the N-EVENT-REPORT it gets there answered with success.
 */
import dcmjsDimse from 'dcmjs-dimse';
import type * as Dimse from 'dcmjs-dimse';

const { Client, Dataset, constants, requests, responses } = dcmjsDimse;
const STGCMT = '1.2.840.10008.1.20.1';
const STGCMT_INSTANCE = '1.2.840.10008.1.20.1.1';

export interface CommitmentReference {
  readonly sopClassUid: string;
  readonly sopInstanceUid: string;
}

/** What dcmjs-dimse's Client got: the N-ACTION status and the report sent on its association. */
export interface ClientOutcome {
  readonly actionStatus: number | undefined;
  readonly report?: { readonly eventType: number; readonly elements: Record<string, unknown> };
}

/** A Storage Commitment request from dcmjs-dimse's Client, which keeps the association open 3 s. */
export function commitWithClient(
  port: number,
  callingAeTitle: string,
  transactionUid: string,
  references: readonly CommitmentReference[],
): Promise<ClientOutcome> {
  return new Promise((resolve, reject) => {
    const client = new Client();
    const request = new requests.NActionRequest(STGCMT, STGCMT_INSTANCE, 1);
    request.setDataset(
      new Dataset(
        {
          TransactionUID: transactionUid,
          ReferencedSOPSequence: references.map((r) => ({
            ReferencedSOPClassUID: r.sopClassUid,
            ReferencedSOPInstanceUID: r.sopInstanceUid,
          })),
        },
        constants.TransferSyntax.ExplicitVRLittleEndian,
      ),
    );
    let actionStatus: number | undefined;
    let report: ClientOutcome['report'];
    request.on('response', (response: Dimse.responses.NActionResponse) => {
      actionStatus = response.getStatus();
    });
    client.on(
      'nEventReportRequest',
      (
        event: Dimse.requests.NEventReportRequest,
        callback: (response: Dimse.responses.NEventReportResponse) => void,
      ) => {
        report = {
          eventType: event.getEventTypeId(),
          elements: event.getDataset()?.getElements() as Record<string, unknown>,
        };
        const response = responses.NEventReportResponse.fromRequest(event);
        response.setStatus(0);
        callback(response);
      },
    );
    client.addRequest(request);
    client.on('networkError', (error: Error) => reject(error));
    client.on('closed', () => resolve({ actionStatus, ...(report === undefined ? {} : { report }) }));
    client.send('127.0.0.1', port, callingAeTitle, 'CRA_TEST', { associationLingerTimeout: 3000 });
  });
}

/** The (class, instance) pairs of a naturalized sequence, sorted; with the failure reason if any. */
export function pairsOf(sequence: unknown): string[] {
  return ((sequence ?? []) as Record<string, unknown>[])
    .map((item) =>
      [item.ReferencedSOPClassUID, item.ReferencedSOPInstanceUID, item.FailureReason]
        .filter((v) => v !== undefined)
        .map((v) => String(v as string | number))
        .join(' '),
    )
    .sort();
}
