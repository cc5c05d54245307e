/**
 * PASAPI V1 `PatientMerge` PUT against the real app on every dialect: the merge request row, OpenEyes's
 * statuses (0 Not processed, 10 Conflict, 20 Merged) and the `pasapi_automerge` rule (default 1: merge
 * when date of birth and gender match), what a merge writes, and the refusals, which change nothing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { countRows, createUser } from '../../../test/factories.ts';
import type { PasInstallation } from '../../../test/factories-pasapi.ts';
import {
  createGpAndPractice,
  createPasInstallation,
  fullPatientXml,
  newHospitalNumber,
  newNhsNumber,
  pasapiPut,
  xmlText,
  xmlTexts,
} from '../../../test/factories-pasapi.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import type { DB } from '../../db/schema.ts';

const WRITTEN_TABLES = [
  'patient_merge_request',
  'patient_identifier',
  'pasapi_assignment',
] as const satisfies readonly (keyof DB)[];

forEachDialect((dialect) => {
  describe(`PUT /PASAPI/V1/PatientMerge (${dialect})`, () => {
    let app: TestApp;
    let pas: PasInstallation;
    let auth: Record<string, string>;

    before(async () => {
      app = await startTestApp(dialect);
      pas = await createPasInstallation(app.db);
      await createGpAndPractice(app.db, 'G3258868', 'C82103');
      auth = { authorization: (await createUser(app.db)).authorization };
    });
    after(async () => app?.close());

    const counts = () => Promise.all(WRITTEN_TABLES.map((t) => countRows(app.db, t)));
    const mergeUrl = (id: string) => `PatientMerge/${id}/identifier-type/${pas.typeKey}`;
    const mergeXml = (primary: string, secondary: string) =>
      `<PatientMerge><PrimaryPatientNumber>${primary}</PrimaryPatientNumber><SecondaryPatientNumber>${secondary}</SecondaryPatientNumber></PatientMerge>`;

    async function createPatient(values: { dob?: string; gender?: string } = {}) {
      const number = newHospitalNumber();
      const nhs = newNhsNumber();
      const response = await pasapiPut(
        app,
        `Patient/${number}/identifier-type/${pas.typeKey}`,
        fullPatientXml({ hospitalNumber: number, nhsNumber: nhs, ...values }),
        auth,
      );
      const text = await response.text();
      assert.equal(response.status, 201, text);
      return { number, nhs, id: Number(xmlText(text, 'Id')) };
    }

    async function setAutomerge(value: string | undefined) {
      await app.db.deleteFrom('setting_installation').where('key', '=', 'pasapi_automerge').execute();
      if (value !== undefined)
        await app.db.insertInto('setting_installation').values({ key: 'pasapi_automerge', value }).execute();
    }

    const requestRow = (id: number) =>
      app.db.selectFrom('patient_merge_request').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    const isDeleted = async (patientId: number) =>
      (
        await app.db
          .selectFrom('patient')
          .select('deleted')
          .where('id', '=', patientId)
          .executeTakeFirstOrThrow()
      ).deleted === 1;

    it('merges matching patients by default (pasapi_automerge 1): status 20, secondary retired', async () => {
      await setAutomerge(undefined);
      const primary = await createPatient();
      const secondary = await createPatient();
      const response = await pasapiPut(
        app,
        mergeUrl(primary.number),
        mergeXml(primary.number, secondary.number),
        auth,
      );
      const text = await response.text();
      assert.equal(response.status, 201, text);
      assert.equal(xmlText(text, 'Message'), 'PatientMerge created.');
      const row = await requestRow(Number(xmlText(text, 'Id')));
      assert.equal(row.status, 20);
      assert.equal(row.primary_id, primary.id);
      assert.equal(row.secondary_id, secondary.id);
      assert.equal(row.primary_local_identifier_value, primary.number);
      assert.equal(row.secondary_local_identifier_value, secondary.number);
      assert.equal(row.primary_global_identifier_value, primary.nhs);
      assert.equal(row.secondary_global_identifier_value, secondary.nhs);
      assert.equal(row.primary_dob, '1978-03-01');
      assert.equal(row.primary_gender, 'F');
      const log = JSON.parse(row.merge_json ?? '{}') as { log: string[] };
      assert.equal(log.log.at(-1), 'Patients successfully merged');
      assert.equal(await isDeleted(secondary.id), true);
      assert.equal(await isDeleted(primary.id), false);

      // The secondary's numbers are copied: the local one deleted (the primary has one), the NHS one too.
      const copies = await app.db
        .selectFrom('patient_identifier')
        .select(['patient_id', 'patient_identifier_type_id', 'value', 'deleted', 'source_info'])
        .where('value', 'in', [secondary.number, secondary.nhs])
        .orderBy('patient_id')
        .orderBy('patient_identifier_type_id')
        .execute();
      for (const copy of copies.filter((c) => c.patient_id === primary.id))
        assert.deepEqual([copy.deleted, copy.source_info], [1, `DEL ID=(${row.id})`]);
      for (const original of copies.filter((c) => c.patient_id === secondary.id)) {
        assert.equal(original.deleted, 1);
        assert.match(original.source_info, new RegExp(`^DEL ID=\\(${row.id}\\)\\[\\d+\\]$`));
      }
      assert.equal(copies.length, 4);

      // The secondary's assignment went (the primary has its own), so the old number reaches the primary.
      const assignments = await app.db
        .selectFrom('pasapi_assignment')
        .select('internal_id')
        .where('resource_id', '=', secondary.number)
        .execute();
      assert.deepEqual(assignments, []);
      const again = await pasapiPut(
        app,
        mergeUrl(primary.number),
        mergeXml(primary.number, secondary.number),
        auth,
      );
      const againText = await again.text();
      assert.equal(again.status, 200, againText);
      assert.equal(xmlText(againText, 'Message'), 'PatientMerge updated.');
      assert.equal(Number(xmlText(againText, 'Id')), row.id);
    });

    it('moves the secondary assignment to a primary that has none', async () => {
      await setAutomerge(undefined);
      const primary = await createPatient();
      const secondary = await createPatient();
      await app.db.deleteFrom('pasapi_assignment').where('internal_id', '=', primary.id).execute();
      const response = await pasapiPut(app, mergeUrl('x'), mergeXml(primary.number, secondary.number), auth);
      assert.equal(response.status, 201, await response.text());
      const moved = await app.db
        .selectFrom('pasapi_assignment')
        .select('internal_id')
        .where('resource_id', '=', secondary.number)
        .executeTakeFirstOrThrow();
      assert.equal(moved.internal_id, primary.id);
      // A later PUT with the retired number reaches the survivor, as a renumbering (OpenEyes: updates the
      // retired patient).
      const put = await pasapiPut(
        app,
        `Patient/${secondary.number}/identifier-type/${pas.typeKey}`,
        fullPatientXml({ hospitalNumber: secondary.number, surname: 'Survivor' }),
        auth,
      );
      const text = await put.text();
      assert.equal(put.status, 409, text);
      assert.match(text, /This patient has a different HospitalNumber/);
    });

    it('leaves a mismatch unprocessed (status 0) with conflict warnings under rule 1', async () => {
      await setAutomerge('1');
      const primary = await createPatient({ dob: '1970-01-01', gender: 'M' });
      const secondary = await createPatient({ dob: '1971-01-01', gender: 'F' });
      const response = await pasapiPut(app, mergeUrl('1'), mergeXml(primary.number, secondary.number), auth);
      const text = await response.text();
      assert.equal(response.status, 201, text);
      assert.deepEqual(xmlTexts(text, 'Warning'), [
        'Merge conflict: dob mismatch',
        'Merge conflict: gender mismatch',
      ]);
      assert.equal((await requestRow(Number(xmlText(text, 'Id')))).status, 0);
      assert.equal(await isDeleted(secondary.id), false);
    });

    it('never merges under rule 0', async () => {
      await setAutomerge('0');
      const primary = await createPatient();
      const secondary = await createPatient();
      const response = await pasapiPut(app, mergeUrl('1'), mergeXml(primary.number, secondary.number), auth);
      const text = await response.text();
      assert.equal(response.status, 201, text);
      assert.equal((await requestRow(Number(xmlText(text, 'Id')))).status, 0);
      assert.equal(await isDeleted(secondary.id), false);
    });

    it('merges a mismatch under rule 2', async () => {
      await setAutomerge('2');
      const primary = await createPatient({ dob: '1970-01-01' });
      const secondary = await createPatient({ dob: '1980-01-01' });
      const response = await pasapiPut(app, mergeUrl('1'), mergeXml(primary.number, secondary.number), auth);
      const text = await response.text();
      assert.equal(response.status, 201, text);
      assert.equal((await requestRow(Number(xmlText(text, 'Id')))).status, 20);
      assert.equal(await isDeleted(secondary.id), true);
      await setAutomerge(undefined);
    });

    it('refuses a request in the opposite direction with 400', async () => {
      await setAutomerge('0');
      const a = await createPatient();
      const b = await createPatient();
      assert.equal((await pasapiPut(app, mergeUrl('1'), mergeXml(a.number, b.number), auth)).status, 201);
      const before = await counts();
      const response = await pasapiPut(app, mergeUrl('1'), mergeXml(b.number, a.number), auth);
      const text = await response.text();
      assert.equal(response.status, 400);
      assert.match(text, /Merge request already exists in opposite direction \(status: Not processed\)/);
      assert.deepEqual(await counts(), before);
      await setAutomerge(undefined);
    });

    for (const [label, body, message] of [
      ['an unknown patient', () => mergeXml('99999999', '99999998'), /primary patient not found/],
      ['an empty number', () => mergeXml('', '1'), /primary patient number not provided/],
      [
        'a missing element',
        () => '<PatientMerge><PrimaryPatientNumber>1</PrimaryPatientNumber></PatientMerge>',
        /SecondaryPatientNumber is required/,
      ],
      ['an unknown element', () => '<PatientMerge><Other/></PatientMerge>', /Unrecognised tag Other/],
      ['a wrong root', () => '<Patient/>', /Mismatched root tag Patient for resource type PatientMerge/],
    ] as const) {
      it(`refuses ${label} with 400, writing nothing`, async () => {
        const before = await counts();
        const response = await pasapiPut(app, mergeUrl('1'), body(), auth);
        const text = await response.text();
        assert.equal(response.status, 400, text);
        assert.match(text, message);
        assert.deepEqual(await counts(), before);
      });
    }

    it('refuses an unknown identifier type with 404 Failure (OpenEyes: HTML 500)', async () => {
      const before = await counts();
      const response = await pasapiPut(
        app,
        'PatientMerge/1/identifier-type/NOPE-1-0',
        mergeXml('1', '2'),
        auth,
      );
      assert.equal(response.status, 404);
      assert.match(await response.text(), /<Failure>/);
      assert.deepEqual(await counts(), before);
    });
  });
});
