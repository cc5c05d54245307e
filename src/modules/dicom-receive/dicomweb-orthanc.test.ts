/**
 * Orthanc's DICOMweb plugin as a client of the service's QIDO-RS and WADO-RS (`/dicom-web/servers/cra/…`):
 * a studies search and a series search through Orthanc, and a WADO-RS retrieve that Orthanc stores, the
 * instances it then holds being the ones the service received, byte for byte.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { buildInstance, multipartRelated, newUid, stowContentType } from '../../../test/dicom-instances.ts';
import type { TestUser } from '../../../test/factories.ts';
import { createUser } from '../../../test/factories.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import type { Orthanc } from '../../../test/orthanc.ts';
import { orthancMissing, startOrthanc } from '../../../test/orthanc.ts';

const missing = orthancMissing();
/** Orthanc's rendering of the answers: each value a string, with the tag's group, element and name. */
type Dataset = Record<string, { vr: string; Value?: string; Name: string }>;

forEachDialect((dialect) => {
  describe(
    `Orthanc's DICOMweb plugin as a QIDO-RS and WADO-RS client [${dialect}]`,
    { skip: missing ?? false },
    () => {
      let app: TestApp;
      let orthanc: Orthanc;
      let user: TestUser;
      const study = newUid();
      const seriesUid = newUid();
      let files: Buffer[] = [];

      before(async () => {
        app = await startTestApp(dialect);
        user = await createUser(app.db);
        files = [1, 2, 3].map((n) =>
          buildInstance({
            studyInstanceUid: study,
            pixelBytes: 20_000,
            tags: {
              PatientID: 'ORTHANC-QR-1',
              PatientName: 'Test^Orthanc',
              SeriesInstanceUID: seriesUid,
              InstanceNumber: String(n),
            },
          }),
        );
        const stored = await app.request('/api/v1/dicomweb/studies', {
          method: 'POST',
          headers: { authorization: user.authorization, 'content-type': stowContentType() },
          body: multipartRelated(files),
        });
        assert.equal(stored.status, 200);
        orthanc = await startOrthanc({
          dicomWeb: {
            url: `${app.baseUrl}/api/v1/dicomweb/`,
            username: user.username,
            password: user.password,
          },
        });
      });
      after(async () => {
        await orthanc?.stop();
        await app?.close();
      });

      it('searches studies and series through /dicom-web/servers/cra/qido', async () => {
        const studies = (await orthanc.post('/dicom-web/servers/cra/qido', {
          Uri: '/studies',
          Arguments: { PatientID: 'ORTHANC-QR-*' },
        })) as Dataset[];
        assert.deepEqual(
          studies.map((s) => s['0020000D']?.Value),
          [study],
        );
        assert.equal(studies[0]!['00100020']?.Value, 'ORTHANC-QR-1');
        assert.equal(studies[0]!['00100010']?.Value, 'Test^Orthanc');
        const series = (await orthanc.post('/dicom-web/servers/cra/qido', {
          Uri: `/studies/${study}/series`,
        })) as Dataset[];
        assert.deepEqual(
          series.map((s) => s['0020000E']?.Value),
          [seriesUid],
        );
      });

      it('retrieves the study with /dicom-web/servers/cra/retrieve: Orthanc stores the received bytes', async () => {
        await orthanc.post('/dicom-web/servers/cra/retrieve', { Resources: [{ Study: study }] });
        const ids = (await (await fetch(`${orthanc.httpUrl}/instances`)).json()) as string[];
        assert.equal(ids.length, 3);
        const held = await Promise.all(
          ids.map(async (id) =>
            Buffer.from(await (await fetch(`${orthanc.httpUrl}/instances/${id}/file`)).arrayBuffer()),
          ),
        );
        for (const file of files)
          assert.ok(
            held.some((h) => h.equals(file)),
            'Orthanc holds the instance as sent',
          );
      });
    },
  );
});
