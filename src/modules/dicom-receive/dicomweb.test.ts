/**
 * DICOMweb QIDO-RS and WADO-RS over fetch, on instances stored with STOW-RS: each search URL with
 * keywords, tags, wildcards, date ranges, UID lists, includefield, limit/offset and the answer cap; each
 * retrieve (instances byte for byte, metadata, rendered images); Accept negotiation; bad parameters;
 * attachment view's rule on a request's private rows (a filed study for everyone, an unfiled one for its
 * sender and request admins, 404 otherwise); and the read audit rows.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { buildInstance, multipartRelated, newUid, stowContentType } from '../../../test/dicom-instances.ts';
import { receiptOf } from '../../../test/dicom-receiving.ts';
import { createEventWithElementType } from '../../../test/factories-attachment.ts';
import { addIdentifier, createStandardInstitutions } from '../../../test/factories-patient.ts';
import { attachmentsByMnemonic } from '../../../test/factories-queue.ts';
import type { TestUser } from '../../../test/factories.ts';
import { createPatient, createUser } from '../../../test/factories.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import { until } from '../../../test/until.ts';
import { linkAttachmentsToEvent } from '../attachment-data/index.ts';
import { withAuditTable } from '../audit/audit.queries.ts';
import { createQueueEngine } from '../request-queue/index.ts';
import { defaultRoutineCatalog } from '../filing/index.ts';

const ROOT = '/api/v1/dicomweb';
type Dataset = Record<string, { vr: string; Value?: unknown[] }>;

const first = (d: Dataset, tag: string) => d[tag]?.Value?.[0] as string | number | undefined;

/** The parts of a `multipart/related` answer: headers (lower-cased names) and bytes. */
function parseMultipart(
  body: Buffer,
  contentType: string,
): { headers: Record<string, string>; bytes: Buffer }[] {
  const boundary = /boundary=("?)([^";]+)\1/.exec(contentType)?.[2];
  assert.ok(boundary !== undefined, contentType);
  const delimiter = Buffer.from(`--${boundary}`);
  const parts = [];
  let at = body.indexOf(delimiter);
  for (;;) {
    const start = at + delimiter.length;
    if (body.subarray(start, start + 2).toString() === '--') break;
    const headerEnd = body.indexOf('\r\n\r\n', start);
    const headers = Object.fromEntries(
      body
        .subarray(start + 2, headerEnd)
        .toString()
        .split('\r\n')
        .map((line) => {
          const colon = line.indexOf(':');
          return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()];
        }),
    );
    const length = Number(headers['content-length']);
    const bytes = body.subarray(headerEnd + 4, headerEnd + 4 + length);
    parts.push({ headers, bytes });
    at = body.indexOf(delimiter, headerEnd + 4 + length);
    assert.ok(at > 0, 'each part is followed by a delimiter');
  }
  return parts;
}

forEachDialect((dialect) => {
  describe(`DICOMweb QIDO-RS and WADO-RS [${dialect}]`, () => {
    let app: TestApp;
    let sender: TestUser;
    let other: TestUser;
    let admin: TestUser;
    const study = { a: newUid(), b: newUid(), c: newUid(), d: newUid() };
    const series = { a1: newUid(), a2: newUid() };
    const files: Record<string, Buffer[]> = {};
    const requestOf = new Map<Buffer, number>();
    let annId = 0;

    const get = (user: TestUser | undefined, path: string, headers: Record<string, string> = {}) =>
      app.request(`${ROOT}${path}`, {
        headers: { ...(user === undefined ? {} : { authorization: user.authorization }), ...headers },
      });
    const search = async (user: TestUser, path: string): Promise<Dataset[]> => {
      const response = await get(user, path);
      if (response.status === 204) return [];
      assert.equal(response.status, 200, await response.clone().text());
      assert.match(response.headers.get('content-type') ?? '', /^application\/dicom\+json/);
      return (await response.json()) as Dataset[];
    };
    const auditRowsOf = async (response: Response) => {
      const id = response.headers.get('x-request-id');
      assert.ok(id !== null);
      await until(() => app.app.auditSink!.stats().backlogRows === 0, { what: 'the audit sink committed' });
      return withAuditTable(app.db)
        .selectFrom('audit_event')
        .selectAll()
        .where('request_id', '=', id)
        .execute();
    };

    before(async () => {
      app = await startTestApp(dialect, { env: { DICOM_QR_MAX_ANSWERS: '3', INSTITUTION_CODE: 'NEW' } });
      sender = await createUser(app.db);
      other = await createUser(app.db);
      admin = await createUser(app.db, { roles: ['API access', 'Edit Payload Processor'] });
      const ann = { PatientID: 'DEV-ANN', PatientName: 'Smith^Ann', PatientBirthDate: '19500304' };
      const make = (studyUid: string, tags: Record<string, string>) =>
        buildInstance({ studyInstanceUid: studyUid, pixelBytes: 3000, tags });
      files.a = [
        make(study.a, { ...ann, SeriesInstanceUID: series.a1, InstanceNumber: '1', Modality: 'OP' }),
        make(study.a, { ...ann, SeriesInstanceUID: series.a1, InstanceNumber: '2', Modality: 'OP' }),
        make(study.a, { ...ann, SeriesInstanceUID: series.a2, InstanceNumber: '1', Modality: 'OPT' }),
      ];
      files.b = [make(study.b, { PatientID: 'DEV-BOB', PatientName: 'Jones^Bob', StudyDate: '20240601' })];
      files.c = [make(study.c, { PatientID: 'DEV-CY', StudyDate: '20230101' })];
      files.d = [make(study.d, { PatientID: 'DEV-DI', StudyDate: '20230102' })];
      for (const file of Object.values(files).flat()) {
        const stored = await app.request(`${ROOT}/studies`, {
          method: 'POST',
          headers: { authorization: sender.authorization, 'content-type': stowContentType() },
          body: multipartRelated([file]),
        });
        assert.equal(stored.status, 200);
        const body = (await stored.json()) as Dataset;
        const uid = (body['00081199']!.Value![0] as Dataset)['00081155']!.Value![0] as string;
        requestOf.set(file, (await receiptOf(app.db, uid))!.lastRequestId);
      }
      // Study a is filed: its bytes under Ann's event (as ATTACH_TO_EVENT files them), and the study in
      // device filing's index, Ann's hospital number being NEW's LOCAL identifier 1000001.
      const { localTypeId } = await createStandardInstitutions(app.db, 'NEW');
      const patient = await createPatient(app.db, { firstName: 'Ann', lastName: 'Smith' });
      annId = patient.patientId;
      await addIdentifier(app.db, annId, localTypeId, '1000001');
      const { eventId, elementTypeId } = await createEventWithElementType(app.db);
      const blobs = [];
      for (const file of files.a)
        blobs.push((await attachmentsByMnemonic(app.db, requestOf.get(file)!)).get('REQUEST_BLOB')!.id);
      await linkAttachmentsToEvent(
        app.db,
        { eventId, elementTypeId, attachmentIds: blobs, systemOnlyManaged: 1 },
        { userId: 1, now: '2024-01-01 00:00:00' },
      );
      await sql`insert into ${sql.table('device_event')} (patient_id, study_instance_uid, event_subtype, model, event_id, created_date, last_modified_date)
        values (${annId}, ${study.a}, ${'Fundus Images'}, ${'TEST'}, ${eventId}, ${'2024-01-01 00:00:00'}, ${'2024-01-01 00:00:00'})`.execute(
        app.db,
      );
    });
    after(() => app.close());

    describe('QIDO-RS', () => {
      it('answers a study search with the default attributes, the filed Patient ID and the counts', async () => {
        const [a] = await search(sender, `/studies?StudyInstanceUID=${study.a}`);
        assert.ok(a !== undefined);
        assert.equal(first(a, '0020000D'), study.a);
        assert.equal(first(a, '00100020'), '1000001');
        assert.deepEqual(a['00100010'], { vr: 'PN', Value: [{ Alphabetic: 'Smith^Ann' }] });
        assert.deepEqual(a['00080061'], { vr: 'CS', Value: ['OP', 'OPT'] });
        assert.deepEqual(a['00201206'], { vr: 'IS', Value: [2] });
        assert.deepEqual(a['00201208'], { vr: 'IS', Value: [3] });
        assert.equal(first(a, '00081190'), `${app.baseUrl}${ROOT}/studies/${study.a}`);
        assert.equal(a['00081030'], undefined, 'StudyDescription only with includefield');
      });

      it('matches by keyword and tag, wildcards, date ranges and UID lists; includefield and all', async () => {
        const uids = (datasets: Dataset[]) => datasets.map((d) => first(d, '0020000D')).sort();
        assert.deepEqual(uids(await search(sender, '/studies?PatientID=1000001')), [study.a]);
        assert.deepEqual(
          uids(await search(sender, '/studies?00100020=DEV-*')),
          [study.b, study.c, study.d].sort(),
        );
        assert.deepEqual(uids(await search(sender, '/studies?PatientName=jon?s*')), [study.b]);
        assert.deepEqual(
          uids(await search(sender, '/studies?StudyDate=20230101-20230131')),
          [study.c, study.d].sort(),
        );
        assert.deepEqual(
          uids(await search(sender, `/studies?StudyInstanceUID=${study.a},${study.c}&fuzzymatching=true`)),
          [study.a, study.c].sort(),
        );
        const [withField] = await search(
          sender,
          `/studies?StudyInstanceUID=${study.b}&includefield=00081030`,
        );
        assert.ok(withField!['00081030'] !== undefined);
        const [all] = await search(sender, `/studies?StudyInstanceUID=${study.b}&includefield=all`);
        assert.ok(all!['00081030'] !== undefined && all!['00100040'] !== undefined);
      });

      it('caps answers at DICOM_QR_MAX_ANSWERS with the Warning header; limit and offset page', async () => {
        const capped = await get(sender, '/studies');
        assert.equal(capped.status, 200);
        assert.equal(((await capped.json()) as Dataset[]).length, 3);
        assert.match(capped.headers.get('warning') ?? '', /^299 .*Additional results can be requested/);
        const paged = await get(sender, '/studies?limit=2&offset=3');
        assert.equal(((await paged.json()) as Dataset[]).length, 1);
        assert.equal(paged.headers.get('warning'), null);
      });

      it('searches series and instances, within a study or series and across studies', async () => {
        const inStudy = await search(sender, `/studies/${study.a}/series`);
        const counts = Object.fromEntries(inStudy.map((s) => [first(s, '0020000E'), first(s, '00201209')]));
        assert.deepEqual(counts, { [series.a1]: 2, [series.a2]: 1 });
        const byModality = await search(sender, '/series?Modality=OPT');
        assert.deepEqual(
          byModality.map((s) => first(s, '0020000E')),
          [series.a2],
        );
        assert.equal(first(byModality[0]!, '00100020'), '1000001', 'study attributes across studies');
        const inSeries = await search(sender, `/studies/${study.a}/series/${series.a1}/instances`);
        assert.deepEqual(inSeries.map((i) => first(i, '00200013')).sort(), [1, 2]);
        assert.equal(inSeries[0]!['00100020'], undefined, 'no study attributes under a study');
        assert.equal((await search(sender, `/studies/${study.a}/instances`)).length, 3);
        const across = await search(sender, `/instances?SeriesInstanceUID=${series.a2}`);
        assert.equal(across.length, 1);
        assert.equal(first(across[0]!, '00080016'), '1.2.840.10008.5.1.4.1.1.7');
      });

      it('answers 204 for no match, 400 for bad parameters and UIDs, 406 for XML', async () => {
        assert.equal((await get(sender, '/studies?PatientID=NOBODY')).status, 204);
        assert.equal((await get(sender, `/studies/${newUid()}/series`)).status, 204);
        for (const query of [
          'NotAKeyword=1',
          'limit=0',
          'limit=x',
          'offset=-1',
          'PatientID=a&PatientID=b',
          'includefield=Nope',
          'fuzzymatching=maybe',
          `PatientName=${'x'.repeat(2000)}`,
        ]) {
          const response = await get(sender, `/studies?${query}`);
          assert.equal(response.status, 400, query);
        }
        assert.equal((await get(sender, '/studies/1.2.x/series')).status, 400);
        assert.equal((await get(sender, '/studies', { accept: 'application/dicom+xml' })).status, 406);
        // A known attribute the index does not hold: not matched, named in a Warning.
        const unmatched = await get(sender, `/studies?StudyInstanceUID=${study.a}&InstitutionName=X`);
        assert.equal(unmatched.status, 200);
        assert.match(unmatched.headers.get('warning') ?? '', /not supported for matching: InstitutionName/);
      });

      it('shows a study not filed only to its sender and request admins; audits the patients and requests', async () => {
        const uids = (datasets: Dataset[]) => datasets.map((d) => first(d, '0020000D')).sort();
        assert.deepEqual(uids(await search(other, '/studies')), [study.a]);
        assert.deepEqual(
          uids(await search(admin, `/studies?StudyInstanceUID=${study.b},${study.c},${study.d}`)),
          [study.b, study.c, study.d].sort(),
        );
        assert.equal((await get(other, `/studies?StudyInstanceUID=${study.b}`)).status, 204);
        assert.equal((await get(undefined, '/studies')).status, 401);

        const response = await get(other, '/studies?PatientID=1000001');
        assert.equal(response.status, 200);
        const [row] = await auditRowsOf(response);
        assert.equal(row?.action, 'dicomweb.search');
        assert.equal(row?.user_id, other.userId);
        assert.equal(row?.target_type, 'patient');
        assert.equal(row?.target_ids, String(annId));
        assert.ok(!JSON.stringify(row).includes('1000001'), 'no identifier in the row');
      });
    });

    describe('WADO-RS', () => {
      it('retrieves a study, a series and an instance as multipart/related of the stored bytes', async () => {
        const response = await get(sender, `/studies/${study.a}`);
        assert.equal(response.status, 200);
        const type = response.headers.get('content-type') ?? '';
        assert.match(type, /^multipart\/related; type="application\/dicom"; boundary=/);
        const parts = parseMultipart(Buffer.from(await response.arrayBuffer()), type);
        assert.equal(parts.length, 3);
        for (const part of parts) {
          assert.equal(part.headers['content-type'], 'application/dicom');
          assert.ok(
            files.a!.some((f) => f.equals(part.bytes)),
            'a part is an instance byte for byte',
          );
        }
        const seriesAnswer = await get(other, `/studies/${study.a}/series/${series.a2}`, {
          accept: 'multipart/related; type="application/dicom"; transfer-syntax=*',
        });
        const seriesParts = parseMultipart(
          Buffer.from(await seriesAnswer.arrayBuffer()),
          seriesAnswer.headers.get('content-type')!,
        );
        assert.equal(seriesParts.length, 1);
        assert.ok(seriesParts[0]!.bytes.equals(files.a![2]!));
        const [row] = await auditRowsOf(seriesAnswer);
        assert.equal(row?.action, 'dicomweb.retrieve');
        assert.equal(row?.target_type, 'patient');
        assert.equal(row?.target_ids, String(annId));

        const b = files.b![0]!;
        const sop = (await search(sender, `/studies/${study.b}/instances`)).map((i) =>
          first(i, '00080018'),
        )[0];
        const series_b = (await search(sender, `/studies/${study.b}/series`)).map((s) =>
          first(s, '0020000E'),
        )[0];
        const instance = await get(sender, `/studies/${study.b}/series/${series_b}/instances/${sop}`);
        const [only] = parseMultipart(
          Buffer.from(await instance.arrayBuffer()),
          instance.headers.get('content-type')!,
        );
        assert.ok(only!.bytes.equals(b));
        const [unfiledRow] = await auditRowsOf(instance);
        assert.equal(unfiledRow?.target_type, 'request');
        assert.equal(unfiledRow?.target_ids, String(requestOf.get(b)));
      });

      it('answers 404 for what the caller may not see or what does not exist, 406 and 400 otherwise', async () => {
        assert.equal((await get(other, `/studies/${study.b}`)).status, 404);
        assert.equal((await get(admin, `/studies/${study.b}`)).status, 200);
        assert.equal((await get(sender, `/studies/${newUid()}`)).status, 404);
        assert.equal((await get(sender, `/studies/${study.a}/series/${newUid()}`)).status, 404);
        assert.equal(
          (
            await get(sender, `/studies/${study.a}`, {
              accept: 'multipart/related; type="application/dicom"; transfer-syntax=1.2.840.10008.1.2.4.50',
            })
          ).status,
          406,
        );
        assert.equal(
          (await get(sender, `/studies/${study.a}`, { accept: 'application/dicom+json' })).status,
          406,
        );
        assert.equal(
          (await get(sender, `/studies/${study.a}/metadata`, { accept: 'multipart/related' })).status,
          406,
        );
        assert.equal((await get(sender, '/studies/..%2F..')).status, 400);
        assert.equal(
          (await app.request(`${ROOT}/studies/${study.a}/series/${series.a1}`, { method: 'DELETE' })).status,
          405,
        );
      });

      it('answers metadata in DICOM JSON without bulk data, with the filed Patient ID', async () => {
        const response = await get(other, `/studies/${study.a}/metadata`);
        assert.equal(response.status, 200);
        assert.match(response.headers.get('content-type') ?? '', /^application\/dicom\+json/);
        const datasets = (await response.json()) as Dataset[];
        assert.equal(datasets.length, 3);
        for (const d of datasets) {
          assert.equal(first(d, '0020000D'), study.a);
          assert.equal(first(d, '00100020'), '1000001');
          assert.deepEqual(d['7FE00010'], { vr: 'OB' });
          assert.equal(d['00020010'], undefined, 'no file meta information');
        }
      });

      it('answers rendered with 404 when no image was extracted', async () => {
        const sop = first(
          (await search(sender, `/studies/${study.a}/series/${series.a2}/instances`))[0]!,
          '00080018',
        );
        const path = `/studies/${study.a}/series/${series.a2}/instances/${sop}`;
        assert.equal((await get(sender, `${path}/rendered`)).status, 404);
        assert.equal((await get(sender, `${path}/frames/1/rendered`)).status, 404);
        assert.equal((await get(sender, `${path}/frames/x/rendered`)).status, 400);
      });
    });
  });

  describe(`DICOMweb rendered: the image the queue extracted [${dialect}]`, () => {
    let app: TestApp;
    let user: TestUser;
    before(async () => {
      app = await startTestApp(dialect);
      user = await createUser(app.db);
    });
    after(() => app.close());

    it('answers /rendered and /frames/1/rendered with the extracted image, 406 for another type', async () => {
      const studyUid = newUid();
      const file = buildInstance({ studyInstanceUid: studyUid, pixelBytes: 30_000 });
      const stored = await app.request(`${ROOT}/studies`, {
        method: 'POST',
        headers: { authorization: user.authorization, 'content-type': stowContentType() },
        body: multipartRelated([file]),
      });
      assert.equal(stored.status, 200);
      const engine = createQueueEngine({
        database: app.database,
        config: app.config,
        catalog: defaultRoutineCatalog,
      });
      for (let step = 0; step < 20; step += 1) if ((await engine.step()).kind !== 'ran') break;
      const [instance] = (await (
        await app.request(`${ROOT}/studies/${studyUid}/instances`, {
          headers: { authorization: user.authorization },
        })
      ).json()) as Dataset[];
      const path = `${ROOT}/studies/${studyUid}/series/${first(instance!, '0020000E')}/instances/${first(instance!, '00080018')}`;
      const { lastRequestId } = (await receiptOf(app.db, String(first(instance!, '00080018'))))!;
      const image = (await attachmentsByMnemonic(app.db, lastRequestId)).get('DICOM_IMAGE_1');
      assert.ok(image !== undefined, 'the queue extracted the image');
      for (const url of [`${path}/rendered`, `${path}/frames/1/rendered`]) {
        const response = await app.request(url, {
          headers: { authorization: user.authorization, accept: 'image/*' },
        });
        assert.equal(response.status, 200);
        assert.equal(response.headers.get('content-type'), image.mime_type);
        assert.ok(Buffer.from(await response.arrayBuffer()).equals(Buffer.from(image.blob_data!)));
      }
      const wrong = await app.request(`${path}/rendered`, {
        headers: { authorization: user.authorization, accept: 'image/gif' },
      });
      assert.equal(wrong.status, 406);
      const frame2 = await app.request(`${path}/frames/2/rendered`, {
        headers: { authorization: user.authorization },
      });
      assert.equal(frame2.status, 404);
    });
  });
});
