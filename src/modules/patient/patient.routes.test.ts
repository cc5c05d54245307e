import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { itEnforcesBasicAuth } from '../../../test/auth-cases.ts';
import type { TestUser } from '../../../test/factories.ts';
import {
  basicHeader,
  countRows,
  createInstitution,
  createPatient,
  createUser,
} from '../../../test/factories.ts';
import {
  addDisplayOrder,
  addIdentifier,
  createIdentifierType,
  createSite,
  createStandardInstitutions,
  setSetting,
} from '../../../test/factories-patient.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';

const CODE = 'CUR';

let nameCounter = 0;
/** A letters-only surname unique in this process (digits would turn a term into an identifier). */
function uniqueName(prefix = 'Qz'): string {
  nameCounter += 1;
  let n = process.pid * 1000 + nameCounter;
  let letters = '';
  while (n > 0) {
    letters = String.fromCharCode(97 + (n % 26)) + letters;
    n = Math.floor(n / 26);
  }
  return `${prefix}${letters}`;
}

let numberCounter = 100_000 + Math.floor(Math.random() * 800_000);
/** A fresh number of `digits` digits. */
function uniqueNumber(digits = 6): string {
  numberCounter += 1;
  return String(numberCounter).padStart(digits, '0').slice(-digits);
}

function yearsSince(dob: string): string {
  const today = new Date().toISOString().slice(0, 10);
  let years = Number(today.slice(0, 4)) - Number(dob.slice(0, 4));
  if (today.slice(5) < dob.slice(5)) years -= 1;
  return String(years);
}

interface SearchResult {
  id: number;
  first_name: string;
  last_name: string;
  age: string;
  genderletter: string | null;
  dob: string | null;
  is_deceased: boolean;
  patient_identifiers: { title: string; value: string }[];
  primary_patient_identifiers: { title: string; value: string } | null;
}

forEachDialect((dialect) => {
  describe(`GET /api/v1/patient/search (${dialect})`, () => {
    let app: TestApp;
    let user: TestUser;
    let standard: Awaited<ReturnType<typeof createStandardInstitutions>>;

    before(async () => {
      app = await startTestApp(dialect, {
        env: { INSTITUTION_CODE: CODE, REFERENCE_CACHE_TTL_MS: '0', TIME_ZONE: 'UTC' },
      });
      user = await createUser(app.db);
      standard = await createStandardInstitutions(app.db, CODE);
    });
    after(async () => {
      await app.close();
    });

    const search = async (
      query: Record<string, string | string[]>,
      init: { cookie?: string; method?: string } = {},
    ): Promise<{ status: number; body: SearchResult[]; response: Response }> => {
      const params = new URLSearchParams();
      for (const [key, value] of Object.entries(query)) {
        for (const v of Array.isArray(value) ? value : [value]) params.append(key, v);
      }
      const response = await app.request(`/api/v1/patient/search?${params.toString()}`, {
        method: init.method ?? 'GET',
        headers: { authorization: user.authorization, ...(init.cookie ? { cookie: init.cookie } : {}) },
      });
      const body = (await response.json()) as SearchResult[];
      return { status: response.status, body, response };
    };
    const ids = (body: SearchResult[]) => body.map((r) => r.id);

    /** A patient with a LOCAL hospital number (7 digits, zero-padded) and an NHS number. */
    const makePatient = async (
      options: {
        lastName?: string;
        firstName?: string;
        patient?: NonNullable<Parameters<typeof createPatient>[1]>['patient'];
        hosNum?: string | null;
        nhsNum?: string | null;
      } = {},
    ) => {
      const { patientId } = await createPatient(app.db, {
        lastName: options.lastName ?? uniqueName(),
        firstName: options.firstName ?? 'Test',
        ...(options.patient === undefined ? {} : { patient: options.patient }),
      });
      const hosNum = options.hosNum === undefined ? `0${uniqueNumber(6)}` : options.hosNum;
      const nhsNum = options.nhsNum === undefined ? `4${uniqueNumber(9)}` : options.nhsNum;
      if (hosNum !== null) await addIdentifier(app.db, patientId, standard.localTypeId, hosNum);
      if (nhsNum !== null) await addIdentifier(app.db, patientId, standard.globalTypeId, nhsNum);
      return { patientId, hosNum: hosNum ?? '', nhsNum: nhsNum ?? '' };
    };

    itEnforcesBasicAuth(() => app, {
      method: 'GET',
      path: '/api/v1/patient/search?term=smith',
      operation: 'OprnApi',
      tablesUnchanged: ['patient', 'patient_identifier'],
    });

    it('finds a patient by a hospital number without its zero padding, with the exact result shape', async () => {
      const lastName = uniqueName();
      const p = await makePatient({
        lastName,
        firstName: 'Ada',
        patient: { dob: '1980-02-01', gender: 'F' },
        hosNum: '0001234',
        nhsNum: '4505577104',
      });
      const { status, body, response } = await search({ term: '1234' });
      assert.equal(status, 200);
      assert.match(response.headers.get('content-type') ?? '', /^application\/json/);
      assert.equal(response.headers.get('cache-control'), 'no-store');
      assert.deepEqual(body, [
        {
          id: p.patientId,
          first_name: 'Ada',
          last_name: lastName,
          age: yearsSince('1980-02-01'),
          genderletter: 'F',
          dob: '1980-02-01',
          is_deceased: false,
          patient_identifiers: [
            { title: 'Hospital Number', value: '0001234' },
            { title: 'NHS Number', value: '4505577104' },
          ],
          primary_patient_identifiers: { title: 'Hos Num', value: '0001234' },
        },
      ]);
    });

    it('finds a patient by an NHS number written with spaces or hyphens', async () => {
      const p = await makePatient({ nhsNum: '9434765919' });
      for (const term of ['943 476 5919', '943-476-5919', '9434765919']) {
        const { body } = await search({ term });
        assert.deepEqual(ids(body), [p.patientId], term);
      }
    });

    it('never shows deleted patients, and never matches or lists deleted identifiers', async () => {
      const gone = await makePatient({ patient: { deleted: 1 } });
      assert.deepEqual((await search({ term: gone.hosNum })).body, []);
      assert.deepEqual((await search({ term: gone.nhsNum })).body, []);

      const live = await makePatient({ hosNum: null });
      const oldNumber = `0${uniqueNumber(6)}`;
      await addIdentifier(app.db, live.patientId, standard.localTypeId, oldNumber, { deleted: true });
      assert.deepEqual((await search({ term: oldNumber })).body, []);
      const { body } = await search({ term: live.nhsNum });
      assert.deepEqual(body[0]?.patient_identifiers, [{ title: 'NHS Number', value: live.nhsNum }]);
      // The primary identifier falls back to none of the deleted LOCAL number.
      assert.deepEqual(body[0]?.primary_patient_identifiers, { title: 'N/A', value: 'None' });
    });

    it('answers N/A/None as primary identifier and [] identifiers for a patient without any', async () => {
      const lastName = uniqueName();
      await makePatient({ lastName, hosNum: null, nhsNum: null });
      const { body } = await search({ term: lastName });
      assert.equal(body.length, 1);
      assert.deepEqual(body[0]!.patient_identifiers, []);
      assert.deepEqual(body[0]!.primary_patient_identifiers, { title: 'N/A', value: 'None' });
    });

    it("lists a patient's identifiers in the order they were recorded, whatever their type and value", async () => {
      const institutionId = await createInstitution(app.db);
      const first = await createIdentifierType(app.db, {
        institution_id: institutionId,
        long_title: 'First',
      });
      const second = await createIdentifierType(app.db, {
        institution_id: institutionId,
        long_title: 'Second',
      });
      const p = await makePatient({ nhsNum: null });
      // Recorded against the order of (type id, value): the later type first, the larger value first.
      await addIdentifier(app.db, p.patientId, second, '999');
      await addIdentifier(app.db, p.patientId, first, '111');
      await addIdentifier(app.db, p.patientId, second, '100');
      const { body } = await search({ term: p.hosNum });
      assert.deepEqual(body[0]!.patient_identifiers, [
        { title: 'Hospital Number', value: p.hosNum },
        { title: 'Second', value: '999' },
        { title: 'First', value: '111' },
        { title: 'Second', value: '100' },
      ]);
    });

    it('uses long_title in patient_identifiers, short_title only when long_title is null', async () => {
      const institutionId = await createInstitution(app.db);
      const nullTitle = await createIdentifierType(app.db, {
        institution_id: institutionId,
        long_title: null,
        short_title: 'Short',
        unique_row_string: null,
      });
      const emptyTitle = await createIdentifierType(app.db, {
        institution_id: institutionId,
        usage_type: 'GLOBAL',
        long_title: '',
        short_title: 'Other',
      });
      const p = await makePatient();
      await addIdentifier(app.db, p.patientId, nullTitle, '55');
      await addIdentifier(app.db, p.patientId, emptyTitle, '66');
      const { body } = await search({ term: p.hosNum });
      assert.deepEqual(body[0]!.patient_identifiers.slice(2), [
        { title: 'Short', value: '55' },
        { title: '', value: '66' },
      ]);
    });

    describe('names', () => {
      it('matches "Last, First", "First Last" and a surname prefix, case-insensitively', async () => {
        const lastName = uniqueName('Hq');
        const a = await makePatient({ lastName, firstName: 'John' });
        const b = await makePatient({ lastName, firstName: 'Jane' });
        const other = await makePatient({ lastName: `${lastName}son`, firstName: 'Ann' });
        assert.deepEqual(ids((await search({ term: `${lastName.toUpperCase()}, jo` })).body), [a.patientId]);
        assert.deepEqual(ids((await search({ term: `jane ${lastName.toLowerCase()}` })).body), [b.patientId]);
        assert.deepEqual(
          new Set(ids((await search({ term: lastName.slice(0, -1) })).body)),
          new Set([a.patientId, b.patientId, other.patientId]),
        );
        assert.deepEqual(ids((await search({ term: `${lastName}son` })).body), [other.patientId]);
      });

      it('restricts by a trailing date of birth', async () => {
        const lastName = uniqueName();
        const born = await makePatient({ lastName, firstName: 'Kim', patient: { dob: '1975-12-09' } });
        await makePatient({ lastName, firstName: 'Kim', patient: { dob: '1975-12-10' } });
        for (const term of [
          `${lastName}, Kim 9/12/1975`,
          `${lastName} 09-12-1975`,
          `Kim ${lastName} 09/12/1975`,
        ]) {
          assert.deepEqual(ids((await search({ term })).body), [born.patientId], term);
        }
      });

      it('answers [] for two-digit years and impossible dates, instead of rolling them over', async () => {
        const lastName = uniqueName();
        await makePatient({ lastName, patient: { dob: '1980-03-02' } });
        for (const term of [`${lastName} 2/3/80`, `${lastName} 31/02/1980`, `${lastName} 1/13/1980`]) {
          const { status, body } = await search({ term });
          assert.equal(status, 200);
          assert.deepEqual(body, [], term);
        }
      });

      it('takes %, _ and \\ in names literally', async () => {
        const base = uniqueName('Wc');
        const percent = await makePatient({ lastName: `${base}%x` });
        const underscore = await makePatient({ lastName: `${base}_y` });
        const backslash = await makePatient({ lastName: `${base}\\z` });
        await makePatient({ lastName: `${base}abc` });
        assert.deepEqual(ids((await search({ term: `${base}%` })).body), [percent.patientId]);
        assert.deepEqual(ids((await search({ term: `${base}_` })).body), [underscore.patientId]);
        assert.deepEqual(ids((await search({ term: `${base}\\` })).body), [backslash.patientId]);
        assert.deepEqual((await search({ term: '%' })).body, []);
        assert.deepEqual((await search({ term: '_' })).body, []);
      });

      it('finds names with an apostrophe or a hyphen', async () => {
        const base = uniqueName("O'");
        const p = await makePatient({ lastName: `${base}-Smith` });
        assert.deepEqual(ids((await search({ term: `${base}-sm` })).body), [p.patientId]);
      });

      it('orders by last name, first name, then id', async () => {
        const base = uniqueName('Ord');
        const c = await makePatient({ lastName: `${base}b`, firstName: 'A' });
        const a1 = await makePatient({ lastName: `${base}a`, firstName: 'B' });
        const a0 = await makePatient({ lastName: `${base}A`, firstName: 'a' });
        const a2 = await makePatient({ lastName: `${base}a`, firstName: 'b' });
        assert.deepEqual(ids((await search({ term: base })).body), [
          a0.patientId,
          a1.patientId,
          a2.patientId,
          c.patientId,
        ]);
      });
    });

    describe('identifier type parameter', () => {
      it('searches only the given type, by id or unique_row_string, with the padded term', async () => {
        const p = await makePatient();
        const row = await app.db
          .selectFrom('patient_identifier_type')
          .select('unique_row_string')
          .where('id', '=', standard.localTypeId)
          .executeTakeFirstOrThrow();
        const unpadded = p.hosNum.replace(/^0+/, '');
        for (const type of [String(standard.localTypeId), row.unique_row_string!]) {
          const { body } = await search({ term: unpadded, patient_identifier_type: type });
          assert.deepEqual(ids(body), [p.patientId], type);
          assert.equal(body[0]!.primary_patient_identifiers, null);
          assert.equal(body[0]!.patient_identifiers.length, 2);
        }
        const wrongType = await search({
          term: p.hosNum,
          patient_identifier_type: String(standard.globalTypeId),
        });
        assert.deepEqual(wrongType.body, []);
      });

      it('answers [] for unknown or absurd types, and treats "" and "0" as omitted', async () => {
        const p = await makePatient();
        for (const type of ['999999', 'NOPE-1-0', '-1', '1e3', '99999999999999999999999']) {
          const { status, body } = await search({ term: p.hosNum, patient_identifier_type: type });
          assert.equal(status, 200);
          assert.deepEqual(body, [], type);
        }
        for (const type of ['', '0']) {
          assert.deepEqual(ids((await search({ term: p.hosNum, patient_identifier_type: type })).body), [
            p.patientId,
          ]);
        }
      });

      it('restricts name searches to patients holding that type', async () => {
        const lastName = uniqueName();
        const both = await makePatient({ lastName });
        await makePatient({ lastName, nhsNum: null, hosNum: null });
        const { body } = await search({
          term: lastName,
          patient_identifier_type: String(standard.globalTypeId),
        });
        assert.deepEqual(ids(body), [both.patientId]);
      });
    });

    describe('identifier types of the current institution and site', () => {
      /** An institution with its own LOCAL type; selected through the institution_id cookie. */
      const makeInstitution = async (values: { any_number_search_allowed?: number } = {}) => {
        const institutionId = await createInstitution(app.db, values);
        const localTypeId = await createIdentifierType(app.db, {
          institution_id: institutionId,
          short_title: 'MRN',
          long_title: 'Medical Record Number',
          validate_regex: '/^([A-Z]{2}[0-9]{4})$/i',
          pad: null,
        });
        return { institutionId, localTypeId, cookie: `institution_id=${institutionId}` };
      };

      it('uses the institution of a valid institution_id cookie, else the configured one', async () => {
        const inst = await makeInstitution();
        const p = await makePatient();
        await addIdentifier(app.db, p.patientId, inst.localTypeId, 'AB1234');
        assert.deepEqual(ids((await search({ term: 'ab1234' }, { cookie: inst.cookie })).body), [
          p.patientId,
        ]);
        assert.deepEqual((await search({ term: 'AB1234' })).body, []);
        // Invalid cookies fall back to the configured institution.
        for (const cookie of ['institution_id=999999', 'institution_id=abc', 'institution_id=']) {
          assert.deepEqual(ids((await search({ term: p.hosNum }, { cookie })).body), [p.patientId], cookie);
        }
      });

      it('reads the cookie header leniently, first of duplicates, without percent-decoding', async () => {
        const inst = await makeInstitution();
        const p = await makePatient();
        await addIdentifier(app.db, p.patientId, inst.localTypeId, 'CD5678');
        const id = String(inst.institutionId);
        const percentEncoded = `%${id.charCodeAt(0).toString(16)}${id.slice(1)}`;
        for (const [cookie, isSelected] of [
          [`institution_id="${id}"`, true],
          [` institution_id = ${id} ; site_id=`, true],
          [`junk; =${id}; institution_id=${id}`, true],
          [`institution_id=${id}; institution_id=999999`, true],
          [`institution_id=999999; institution_id=${id}`, false],
          [`institution_id=${percentEncoded}`, false],
          [`institution_id="${id}`, false],
          [`institution_id${id}`, false],
          [`Institution_Id=${id}`, false],
        ] as const) {
          const found = ids((await search({ term: 'CD5678' }, { cookie })).body);
          assert.deepEqual(found, isSelected ? [p.patientId] : [], cookie);
        }
      });

      it('follows display-order rules: only searchable types, and protocols when given', async () => {
        const inst = await makeInstitution();
        const hiddenType = await createIdentifierType(app.db, {
          institution_id: inst.institutionId,
          usage_type: 'GLOBAL',
          validate_regex: '/^([0-9]{5})$/',
        });
        await addDisplayOrder(app.db, {
          institution_id: inst.institutionId,
          patient_identifier_type_id: inst.localTypeId,
          search_protocol_prefix: 'MRN|loc',
        });
        await addDisplayOrder(app.db, {
          institution_id: inst.institutionId,
          patient_identifier_type_id: hiddenType,
          searchable: 0,
        });
        const p = await makePatient();
        await addIdentifier(app.db, p.patientId, inst.localTypeId, 'CD5678');
        await addIdentifier(app.db, p.patientId, hiddenType, '12345');
        const found = (term: string) => search({ term }, { cookie: inst.cookie }).then((r) => ids(r.body));
        assert.deepEqual(await found('CD5678'), [p.patientId]);
        assert.deepEqual(await found('mrn:CD5678'), [p.patientId]);
        assert.deepEqual(await found('LOC: CD5678'), [p.patientId]);
        assert.deepEqual(await found('nhs:CD5678'), []);
        assert.deepEqual(await found('12345'), []);
        // The fallback types have no protocols: with no rules, a protocol finds nothing.
        assert.deepEqual(ids((await search({ term: `nhs:${p.nhsNum}` })).body), []);
      });

      it('prefers site-level rules for a site of the institution, and ignores a site of another', async () => {
        const inst = await makeInstitution();
        const siteId = await createSite(app.db, inst.institutionId);
        const foreignSite = await createSite(app.db, standard.institutionId);
        const siteType = await createIdentifierType(app.db, {
          institution_id: inst.institutionId,
          site_id: siteId,
          validate_regex: '/^(S[0-9]{3})$/i',
          pad: null,
          short_title: 'Site No',
        });
        await addDisplayOrder(app.db, {
          institution_id: inst.institutionId,
          patient_identifier_type_id: inst.localTypeId,
        });
        await addDisplayOrder(app.db, {
          institution_id: inst.institutionId,
          site_id: siteId,
          patient_identifier_type_id: siteType,
        });
        const p = await makePatient();
        await addIdentifier(app.db, p.patientId, siteType, 'S123');
        await addIdentifier(app.db, p.patientId, inst.localTypeId, 'EF9012');
        const atSite = `${inst.cookie}; site_id=${siteId}`;
        assert.deepEqual(ids((await search({ term: 's123' }, { cookie: atSite })).body), [p.patientId]);
        assert.deepEqual(ids((await search({ term: 'EF9012' }, { cookie: atSite })).body), []);
        const elsewhere = `${inst.cookie}; site_id=${foreignSite}`;
        assert.deepEqual(ids((await search({ term: 'S123' }, { cookie: elsewhere })).body), []);
        assert.deepEqual(ids((await search({ term: 'EF9012' }, { cookie: elsewhere })).body), [p.patientId]);
        // Primary identifier: site rules first.
        const { body } = await search({ term: 'S123' }, { cookie: atSite });
        assert.deepEqual(body[0]!.primary_patient_identifiers, { title: 'Site No', value: 'S123' });
      });

      it('allows any: only where the institution allows it, then searching every type', async () => {
        const closed = await makeInstitution({ any_number_search_allowed: 0 });
        const open = await makeInstitution({ any_number_search_allowed: 1 });
        const p = await makePatient();
        await addIdentifier(app.db, p.patientId, closed.localTypeId, 'GH3456');
        assert.deepEqual((await search({ term: 'any:GH3456' }, { cookie: closed.cookie })).body, []);
        assert.deepEqual((await search({ term: 'ANY:GH3456' })).body, []);
        assert.deepEqual(ids((await search({ term: 'any:GH3456' }, { cookie: open.cookie })).body), [
          p.patientId,
        ]);
        assert.deepEqual(ids((await search({ term: `Any:${p.nhsNum}` }, { cookie: open.cookie })).body), [
          p.patientId,
        ]);
      });

      it('resolves display_primary_number_usage_code at site, institution and installation level', async () => {
        const inst = await makeInstitution();
        const siteId = await createSite(app.db, inst.institutionId);
        const nhsNum = `4${uniqueNumber(9)}`;
        const p = await makePatient({ nhsNum });
        await addIdentifier(app.db, p.patientId, inst.localTypeId, 'JK7890');
        await app.db
          .updateTable('patient_identifier_type')
          .set({ value_display_prefix: '#', value_display_suffix: '!' })
          .where('id', '=', inst.localTypeId)
          .execute();
        const primary = async (cookie: string) =>
          (await search({ term: 'JK7890' }, { cookie })).body[0]!.primary_patient_identifiers;
        assert.deepEqual(await primary(inst.cookie), { title: 'MRN', value: '#JK7890!' });
        await setSetting(app.db, 'display_primary_number_usage_code', 'GLOBAL', {
          institutionId: inst.institutionId,
        });
        assert.deepEqual(await primary(inst.cookie), {
          title: 'NHS',
          value: `${nhsNum.slice(0, 3)} ${nhsNum.slice(3, 6)} ${nhsNum.slice(6)}`,
        });
        await setSetting(app.db, 'display_primary_number_usage_code', 'LOCAL', { siteId });
        assert.deepEqual(await primary(`${inst.cookie}; site_id=${siteId}`), {
          title: 'MRN',
          value: '#JK7890!',
        });
      });

      it('does not treat a name without a date as a name when dob_mandatory_in_search is on', async () => {
        const inst = await makeInstitution();
        await setSetting(app.db, 'dob_mandatory_in_search', 'on', { institutionId: inst.institutionId });
        const lastName = uniqueName();
        const p = await makePatient({ lastName, patient: { dob: '1990-05-04' } });
        assert.deepEqual((await search({ term: lastName }, { cookie: inst.cookie })).body, []);
        assert.deepEqual(
          ids((await search({ term: `${lastName} 4/5/1990` }, { cookie: inst.cookie })).body),
          [p.patientId],
        );
        assert.deepEqual(ids((await search({ term: lastName })).body), [p.patientId]);
      });
    });

    describe('ages', () => {
      it('answers Deceased, Unknown and the age at death', async () => {
        const lastName = uniqueName();
        const dead = await makePatient({ lastName, firstName: 'A', patient: { is_deceased: 1 } });
        const noDob = await makePatient({ lastName, firstName: 'B', patient: { dob: null } });
        const died = await makePatient({
          lastName,
          firstName: 'C',
          patient: { dob: '1950-06-01', date_of_death: '2000-05-31' },
        });
        const { body } = await search({ term: lastName });
        assert.deepEqual(
          body.map((r) => [r.id, r.age, r.is_deceased, r.dob]),
          [
            [dead.patientId, 'Deceased', true, '1980-02-01'],
            [noDob.patientId, 'Unknown', false, null],
            [died.patientId, '49', false, '1950-06-01'],
          ],
        );
      });
    });

    describe('pages and order', () => {
      const lastName = uniqueName('Pg');
      const created: number[] = [];
      before(async () => {
        for (let i = 0; i < 105; i += 1) {
          const { patientId } = await createPatient(app.db, {
            lastName,
            firstName: `F${String.fromCharCode(97 + (i % 26))}`,
            patient: { dob: `19${String(10 + (i % 80)).padStart(2, '0')}-01-01` },
          });
          created.push(patientId);
        }
      });

      it('answers 20 per page by default and at most 100', async () => {
        assert.equal((await search({ term: lastName })).body.length, 20);
        for (const pageSize of ['0', '-5', 'abc', '', '2.5']) {
          assert.equal((await search({ term: lastName, pageSize })).body.length, 20, pageSize);
        }
        assert.equal((await search({ term: lastName, pageSize: '1000000000000000000000' })).body.length, 20);
        assert.equal((await search({ term: lastName, pageSize: '1000' })).body.length, 100);
        assert.equal((await search({ term: lastName, pageSize: '7' })).body.length, 7);
      });

      it('pages with Patient_page from 1, and answers [] past the end', async () => {
        const all = ids((await search({ term: lastName, pageSize: '100' })).body);
        const second = ids((await search({ term: lastName, pageSize: '10', Patient_page: '2' })).body);
        assert.deepEqual(second, all.slice(10, 20));
        for (const page of ['0', '-1', 'x']) {
          assert.deepEqual(
            ids((await search({ term: lastName, pageSize: '10', Patient_page: page })).body),
            all.slice(0, 10),
          );
        }
        assert.equal((await search({ term: lastName, pageSize: '100', Patient_page: '2' })).body.length, 5);
        assert.deepEqual((await search({ term: lastName, pageSize: '100', Patient_page: '3' })).body, []);
        assert.deepEqual((await search({ term: lastName, Patient_page: '999999999999' })).body, []);
      });

      it('sorts by a whitelisted sort_by and sort_dir, and ignores anything else', async () => {
        const byDobDesc = (await search({ term: lastName, pageSize: '100', sort_by: '4', sort_dir: 'desc' }))
          .body;
        const dobs = byDobDesc.map((r) => r.dob!);
        assert.deepEqual(dobs, [...dobs].sort().reverse());
        const byFirstAsc = (await search({ term: lastName, pageSize: '100', sort_by: '2', sort_dir: 'asc' }))
          .body;
        const firsts = byFirstAsc.map((r) => r.first_name.toLowerCase());
        assert.deepEqual(firsts, [...firsts].sort());
        const plain = ids((await search({ term: lastName, pageSize: '100' })).body);
        for (const sortBy of ['6', 'id; drop table patient', '1 desc', '-1']) {
          const { status, body } = await search({ term: lastName, pageSize: '100', sort_by: sortBy });
          assert.equal(status, 200);
          assert.deepEqual(ids(body), plain, sortBy);
        }
        assert.equal(await countRows(app.db, 'patient'), await countRows(app.db, 'patient'));
        for (const sortBy of ['0', '1', '3', '5']) {
          const { status, body } = await search({
            term: lastName,
            pageSize: '100',
            sort_by: sortBy,
            sort_dir: '1',
          });
          assert.equal(status, 200);
          assert.equal(body.length, 100, sortBy);
        }
      });

      it('orders identifier matches by their smallest numeric identifier, then id', async () => {
        const number = uniqueNumber(6);
        const low = await makePatient({ hosNum: `0${number}` });
        const high = await makePatient({ hosNum: null, nhsNum: `0000${number}` });
        // The same value in two types: two patients, ordered by the smallest identifier of each.
        await app.db
          .updateTable('patient_identifier')
          .set({ value: `9${number}` })
          .where('patient_id', '=', low.patientId)
          .where('patient_identifier_type_id', '=', standard.globalTypeId)
          .execute();
        const { body } = await search({ term: `0000${number}` });
        assert.deepEqual(ids(body), [high.patientId]);
        const both = await search({ term: number });
        assert.deepEqual(ids(both.body), [low.patientId]);
      });
    });

    describe('bad input', () => {
      it('answers 200 [] for a missing, empty, repeated, bracketed or absurdly long term', async () => {
        const lastName = uniqueName();
        await makePatient({ lastName });
        const before = await countRows(app.db, 'patient');
        const paths = [
          '/api/v1/patient/search',
          '/api/v1/patient/search?term=',
          '/api/v1/patient/search?term=%20%20',
          `/api/v1/patient/search?term=${lastName}&term=${lastName}`,
          `/api/v1/patient/search?term[]=${lastName}`,
          `/api/v1/patient/search?term=${lastName}${'a'.repeat(300)}`,
          `/api/v1/patient/search?term=${'9'.repeat(5000)}`,
          '/api/v1/patient/search?term=%2C',
          '/api/v1/patient/search?term=%00',
        ];
        for (const path of paths) {
          const response = await app.request(path, { headers: { authorization: user.authorization } });
          assert.equal(response.status, 200, path);
          assert.deepEqual(await response.json(), [], path);
        }
        assert.equal(await countRows(app.db, 'patient'), before);
      });

      it('answers the same to POST and PUT with form or query parameters', async () => {
        const lastName = uniqueName();
        const p = await makePatient({ lastName });
        for (const method of ['POST', 'PUT']) {
          const response = await app.request('/api/v1/patient/search', {
            method,
            headers: {
              authorization: user.authorization,
              'content-type': 'application/x-www-form-urlencoded',
            },
            body: new URLSearchParams({ term: lastName }).toString(),
          });
          assert.equal(response.status, 200, method);
          assert.deepEqual(
            ((await response.json()) as SearchResult[]).map((r) => r.id),
            [p.patientId],
          );
          const viaQuery = await search({ term: lastName }, { method });
          assert.deepEqual(ids(viaQuery.body), [p.patientId]);
        }
      });

      it('refuses an unauthenticated form POST or PUT before its body is read: 401, not 413', async () => {
        // Larger than the form body limit (16 KiB): a body parsed before the guard would answer 413.
        const body = new URLSearchParams({ term: 'x'.repeat(20 * 1024) }).toString();
        const form = { 'content-type': 'application/x-www-form-urlencoded' };
        for (const method of ['POST', 'PUT']) {
          for (const headers of [form, { ...form, authorization: basicHeader(user.username, 'wrong') }]) {
            const response = await app.request('/api/v1/patient/search', { method, headers, body });
            assert.equal(
              response.status,
              401,
              `${method} ${'authorization' in headers ? 'bad password' : 'anonymous'}`,
            );
            assert.equal(response.headers.get('www-authenticate'), 'Basic realm="OpenEyes"');
            assert.equal(await response.json(), '401 Unauthorized');
          }
        }
        // Authenticated, the same body meets the limit.
        const authorized = await app.request('/api/v1/patient/search', {
          method: 'POST',
          headers: { ...form, authorization: user.authorization },
          body,
        });
        assert.equal(authorized.status, 413);
        await authorized.body?.cancel();
      });

      it('answers 405 with Allow to other methods, and 404 to other actions', async () => {
        const response = await app.request('/api/v1/patient/search?term=x', {
          method: 'DELETE',
          headers: { authorization: user.authorization },
        });
        assert.equal(response.status, 405);
        assert.equal(response.headers.get('allow'), 'GET, HEAD, POST, PUT');
        const other = await app.request('/api/v1/patient/view?id=1', {
          headers: { authorization: user.authorization },
        });
        assert.equal(other.status, 404);
        assert.equal(await other.json(), 'Not Found');
        const caseInsensitive = await app.request('/api/v1/Patient/Search?term=x', {
          headers: { authorization: user.authorization },
        });
        assert.equal(caseInsensitive.status, 200);
      });
    });
  });
});
