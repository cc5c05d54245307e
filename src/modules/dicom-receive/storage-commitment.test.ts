/**
 * The Storage Commitment Push Model SCP on the DICOM port, asked by real clients: Orthanc's storage
 * commitment SCU (`/modalities/{id}/storage-commitment`), which closes its request association and takes
 * the report on a new one (the service connects to its `DICOM_REMOTE_NODES` entry), and dcmjs-dimse's
 * Client, which keeps the association open and gets the report there. Only instances whose receipt and
 * bytes are in the database are committed; unknown ones, ones whose bytes were dropped and class
 * mismatches are listed as failed with their reasons; an oversized request is refused with 0213.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { buildInstance, newUid, sopInstanceUidOf } from '../../../test/dicom-instances.ts';
import type { CommitmentReference as Reference } from '../../../test/storage-commitment-client.ts';
import { commitWithClient, pairsOf } from '../../../test/storage-commitment-client.ts';
import { receiptOf, startDicomTestApp } from '../../../test/dicom-receiving.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect } from '../../../test/harness.ts';
import type { Orthanc } from '../../../test/orthanc.ts';
import { orthancMissing, startOrthanc } from '../../../test/orthanc.ts';
import { until } from '../../../test/until.ts';
import { createAppServices } from '../../app-services.ts';
import type { DicomRemoteNode } from '../../config.ts';
import { createLogger } from '../../logger.ts';
import type { DicomServer } from './index.ts';
import { startDicomServer } from './index.ts';

const SECONDARY_CAPTURE = '1.2.840.10008.5.1.4.1.1.7';
const PHOTOGRAPHY = '1.2.840.10008.5.1.4.1.1.77.1.5.1';
const missing = orthancMissing();

forEachDialect((dialect) => {
  describe(`Storage Commitment Push Model SCP [${dialect}]`, { skip: missing ?? false }, () => {
    let app: TestApp;
    let server: DicomServer;
    let orthanc: Orthanc;
    /** The remote nodes of the SCP under test, filled once Orthanc listens. */
    const remoteNodes: DicomRemoteNode[] = [];
    /** Two instances stored through Orthanc; one stored whose bytes are dropped afterwards. */
    let stored: Reference[];
    let dropped: Reference;

    before(async () => {
      ({ app, server } = await startDicomTestApp(dialect, 'ORTHANC@127.0.0.1,STGCMT@127.0.0.1'));
      // The SCP under test: the app's, with remote nodes that name Orthanc once it is started.
      await server.stop(1000);
      server = await startDicomServer({
        database: app.database,
        config: {
          ...app.config,
          dicomNetwork: { ...app.config.dicomNetwork, remoteNodes, commitmentMaxInstances: 50 },
        },
        logger: createLogger('silent'),
        ...createAppServices(app.deps),
      });
      orthanc = await startOrthanc({ modality: { aeTitle: 'CRA_TEST', port: server.port } });
      remoteNodes.push({ aeTitle: 'ORTHANC', host: '127.0.0.1', port: orthanc.dicomPort });

      const files = [
        buildInstance(),
        buildInstance({ sopClassUid: PHOTOGRAPHY }),
        buildInstance({ sopClassUid: PHOTOGRAPHY }),
      ];
      const ids = [];
      for (const file of files) ids.push(await orthanc.upload(file));
      await orthanc.post('/modalities/cra/store', { Resources: ids, Synchronous: true });
      const classes = [SECONDARY_CAPTURE, PHOTOGRAPHY, PHOTOGRAPHY];
      const references = files.map((file, i) => ({
        sopClassUid: classes[i]!,
        sopInstanceUid: sopInstanceUidOf(file),
      }));
      stored = references.slice(0, 2);
      dropped = references[2]!;
      // The clean-up policy's drop of the received bytes (QUEUE_DROP_BLOB_REQUEST_TYPES).
      const receipt = (await receiptOf(app.db, dropped.sopInstanceUid))!;
      await app.db
        .updateTable('attachment_data')
        .set({ blob_data: null })
        .where('request_id', '=', receipt.lastRequestId)
        .where('attachment_mnemonic', '=', 'REQUEST_BLOB')
        .execute();
    });
    after(async () => {
      await orthanc?.stop();
      await server?.stop(5000);
      await app?.close();
    });

    it("reports Orthanc's request on a new association: held instances committed, the others failed", async () => {
      const unknown = { sopClassUid: SECONDARY_CAPTURE, sopInstanceUid: newUid() };
      const mismatch = { sopClassUid: SECONDARY_CAPTURE, sopInstanceUid: stored[1]!.sopInstanceUid };
      const asked = [...stored, unknown, mismatch, dropped];
      const started = (await orthanc.post('/modalities/cra/storage-commitment', {
        DicomInstances: asked.map((r) => [r.sopClassUid, r.sopInstanceUid]),
      })) as { ID: string };
      let report: Record<string, unknown> = {};
      await until(
        async () => {
          const response = await fetch(`${orthanc.httpUrl}/storage-commitment/${started.ID}`);
          report = (await response.json()) as Record<string, unknown>;
          return report.Status !== 'Pending';
        },
        { what: "Orthanc's storage commitment report", timeoutMs: 60_000 },
      );
      assert.equal(report.Status, 'Failure', JSON.stringify(report));
      const success = (report.Success as { SOPClassUID: string; SOPInstanceUID: string }[])
        .map((r) => `${r.SOPClassUID} ${r.SOPInstanceUID}`)
        .sort();
      assert.deepEqual(success, stored.map((r) => `${r.sopClassUid} ${r.sopInstanceUid}`).sort());
      const failures = (
        report.Failures as { SOPClassUID: string; SOPInstanceUID: string; FailureReason: number }[]
      )
        .map((r) => `${r.SOPClassUID} ${r.SOPInstanceUID} ${r.FailureReason}`)
        .sort();
      assert.deepEqual(
        failures,
        [
          `${unknown.sopClassUid} ${unknown.sopInstanceUid} ${0x0112}`,
          `${mismatch.sopClassUid} ${mismatch.sopInstanceUid} ${0x0119}`,
          `${dropped.sopClassUid} ${dropped.sopInstanceUid} ${0x0112}`,
        ].sort(),
      );
    });

    it('reports on the request association while the client keeps it open (dcmjs-dimse Client)', async () => {
      const transactionUid = newUid();
      const unknown = { sopClassUid: PHOTOGRAPHY, sopInstanceUid: newUid() };
      const unsupported = { sopClassUid: '1.2.826.0.1.3680043.2.1143.99', sopInstanceUid: newUid() };
      const outcome = await commitWithClient(server.port, 'STGCMT', transactionUid, [
        ...stored,
        unknown,
        unsupported,
      ]);
      assert.equal(outcome.actionStatus, 0);
      assert.ok(outcome.report !== undefined, 'the report came on the same association');
      assert.equal(outcome.report.eventType, 2, 'failures exist');
      assert.equal(outcome.report.elements.TransactionUID, transactionUid);
      assert.deepEqual(
        pairsOf(outcome.report.elements.ReferencedSOPSequence),
        stored.map((r) => `${r.sopClassUid} ${r.sopInstanceUid}`).sort(),
      );
      assert.deepEqual(
        pairsOf(outcome.report.elements.FailedSOPSequence),
        [
          `${unknown.sopClassUid} ${unknown.sopInstanceUid} ${0x0112}`,
          `${unsupported.sopClassUid} ${unsupported.sopInstanceUid} ${0x0122}`,
        ].sort(),
      );

      const all = await commitWithClient(server.port, 'STGCMT', newUid(), stored);
      assert.equal(all.report?.eventType, 1, 'every instance committed');
      assert.equal(all.report?.elements.FailedSOPSequence, undefined);
    });

    it('refuses a request naming more than DICOM_COMMITMENT_MAX_INSTANCES with 0213, and sends no report', async () => {
      const many = (count: number) =>
        Array.from({ length: count }, () => ({ sopClassUid: SECONDARY_CAPTURE, sopInstanceUid: newUid() }));
      // Past the count, read whole; far past it, cut off by the PDU gate before the library parses it.
      for (const count of [51, 5000]) {
        const outcome = await commitWithClient(server.port, 'STGCMT', newUid(), many(count));
        assert.equal(outcome.actionStatus, 0x0213, `${count} instances`);
        assert.equal(outcome.report, undefined);
      }
      // The SCP still serves a request after the refusals.
      const after = await commitWithClient(server.port, 'STGCMT', newUid(), stored);
      assert.equal(after.report?.eventType, 1);
    });
  });
});
