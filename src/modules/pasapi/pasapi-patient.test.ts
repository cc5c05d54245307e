/**
 * PASAPI V1 `Patient` PUT against the real app on every dialect: the cases of OpenEyes's own feature
 * tests (PASAPI_Test, PASAPI_Patient_Test), ported, and the places where this service answers a clear
 * 4xx where OpenEyes is defective. Every refusal asserts that nothing was written.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { XMLValidator } from 'fast-xml-parser';
import { basicHeader, countRows, createPatient, createUser } from '../../../test/factories.ts';
import { addIdentifier, setSetting } from '../../../test/factories-patient.ts';
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
  'patient',
  'contact',
  'address',
  'patient_identifier',
  'pasapi_assignment',
] as const satisfies readonly (keyof DB)[];

forEachDialect((dialect) => {
  describe(`PUT /PASAPI/V1/Patient (${dialect})`, () => {
    let app: TestApp;
    let pas: PasInstallation;
    let auth: Record<string, string>;

    before(async () => {
      // Tests change settings, identifier types and remap rules between requests: nothing kept.
      app = await startTestApp(dialect, { env: { REFERENCE_CACHE_TTL_MS: '0' } });
      pas = await createPasInstallation(app.db);
      await createGpAndPractice(app.db, 'G3258868', 'C82103');
      const user = await createUser(app.db);
      auth = { authorization: user.authorization };
    });
    after(async () => app?.close());

    const counts = () => Promise.all(WRITTEN_TABLES.map((t) => countRows(app.db, t)));
    const url = (id: string) => `Patient/${encodeURIComponent(id)}/identifier-type/${pas.typeKey}`;

    /** Sends `body` and asserts the status, an XML Failure, and that no row was written. */
    async function assertRefused(
      path: string,
      body: string | undefined,
      status: number,
      headers: Record<string, string> = {},
    ) {
      const before = await counts();
      const response = await pasapiPut(app, path, body, { ...auth, ...headers });
      const text = await response.text();
      assert.equal(response.status, status, text);
      assert.match(response.headers.get('content-type') ?? '', /^application\/xml/);
      assert.match(text, /<Failure><Errors><Error>/);
      assert.equal(XMLValidator.validate(text), true);
      assert.deepEqual(await counts(), before, 'a refused request wrote nothing');
      return text;
    }

    async function patientOf(id: number) {
      return app.db
        .selectFrom('patient as p')
        .innerJoin('contact as c', 'c.id', 'p.contact_id')
        .select([
          'p.dob',
          'p.gender',
          'p.ethnic_group_id',
          'p.gp_id',
          'p.practice_id',
          'p.is_deceased',
          'p.date_of_death',
        ])
        .select([
          'c.title',
          'c.first_name',
          'c.last_name',
          'c.mobile_phone',
          'c.primary_phone',
          'c.id as contact_id',
        ])
        .where('p.id', '=', id)
        .executeTakeFirstOrThrow();
    }

    async function create(
      values: Parameters<typeof fullPatientXml>[0],
      headers: Record<string, string> = {},
    ) {
      const response = await pasapiPut(app, url(values.hospitalNumber), fullPatientXml(values), {
        ...auth,
        ...headers,
      });
      const text = await response.text();
      assert.equal(response.status, 201, text);
      return Number(xmlText(text, 'Id'));
    }

    describe('OpenEyes feature test cases', () => {
      it('answers 400 Failure for a PUT without an id (testMissingID)', async () => {
        await assertRefused('Patient', undefined, 400);
      });

      it('answers 400 for a PUT without an identifier type (testEmptyPatient)', async () => {
        const text = await assertRefused('Patient/TEST01', undefined, 400);
        assert.match(text, /Required parameter\(s\) are: id, identifier-type/);
      });

      it('answers 400 "Missing Resource Body" for an empty body', async () => {
        const text = await assertRefused(url(newHospitalNumber()), '', 400);
        assert.match(text, /Missing Resource Body/);
      });

      it('answers 400 for malformed XML (testMalformedPatient)', async () => {
        await assertRefused(url(newHospitalNumber()), '<Patient>', 400);
      });

      it('answers 400 for a mismatched root tag (testMismatchedRootTag)', async () => {
        const text = await assertRefused(url(newHospitalNumber()), '<OEPatient />', 400);
        assert.match(text, /Mismatched root tag OEPatient for resource type Patient/);
      });

      it('answers 400 listing the required elements (testPatientResourceValidation)', async () => {
        const number = newHospitalNumber();
        const text = await assertRefused(
          url(number),
          `<Patient><HospitalNumber>${number}</HospitalNumber></Patient>`,
          400,
        );
        assert.deepEqual(xmlTexts(text, 'Error'), [
          'FirstName is required',
          'Surname is required',
          'DateOfBirth is required',
        ]);
      });

      it('answers 422 for a hospital number the type refuses (testPatientModelValidation)', async () => {
        const number = '92312423123123123231231232142342';
        const body = `<Patient><HospitalNumber>${number}</HospitalNumber><FirstName>Test</FirstName><Surname>API</Surname><DateOfBirth>1978-03-01</DateOfBirth></Patient>`;
        const text = await assertRefused(url(number), body, 422);
        assert.match(text, /Patient number \(format\) in request URL is invalid/);
      });

      it('creates the patient with its rows (testCreatePatient)', async () => {
        const number = newHospitalNumber();
        const nhs = newNhsNumber();
        const response = await pasapiPut(
          app,
          url(number),
          fullPatientXml({ hospitalNumber: number, nhsNumber: nhs }),
          auth,
        );
        const text = await response.text();
        assert.equal(response.status, 201, text);
        assert.match(response.headers.get('content-type') ?? '', /^application\/xml/);
        assert.equal(xmlText(text, 'Message'), 'Patient created.');
        const id = Number(xmlText(text, 'Id'));
        const patient = await patientOf(id);
        assert.equal(patient.last_name, 'API');
        assert.equal(patient.first_name, 'Test');
        assert.equal(patient.title, 'MRS');
        assert.equal(patient.mobile_phone, '030406024378', 'phone stored without spaces');
        assert.equal(patient.dob, '1978-03-01');
        assert.equal(patient.gender, 'F');
        const ethnic = await app.db
          .selectFrom('ethnic_group')
          .select('id')
          .where('code', '=', 'A')
          .executeTakeFirstOrThrow();
        assert.equal(patient.ethnic_group_id, ethnic.id);
        assert.notEqual(patient.gp_id, null);
        assert.notEqual(patient.practice_id, null);
        const addresses = await app.db
          .selectFrom('address')
          .selectAll()
          .where('contact_id', '=', patient.contact_id)
          .execute();
        assert.equal(addresses.length, 1);
        assert.equal(addresses[0]!.postcode, 'QA88 2GC');
        assert.equal(addresses[0]!.address1, '82 Scarisbrick Lane');
        assert.equal(addresses[0]!.address_type_id, 2);
        const identifiers = await app.db
          .selectFrom('patient_identifier')
          .select(['patient_identifier_type_id', 'value', 'source_info', 'deleted', 'unique_row_string'])
          .where('patient_id', '=', id)
          .orderBy('patient_identifier_type_id')
          .execute();
        assert.deepEqual(
          identifiers.map((i) => [
            i.patient_identifier_type_id,
            i.value,
            i.source_info,
            i.deleted,
            i.unique_row_string,
          ]),
          [
            [pas.localTypeId, number, 'ACTIVE', 0, `${id}-${pas.localTypeId}-ACTIVE`],
            [pas.globalTypeId, nhs, 'ACTIVE', 0, `${id}-${pas.globalTypeId}-ACTIVE`],
          ].sort((a, b) => Number(a[0]) - Number(b[0])),
        );
        const assignment = await app.db
          .selectFrom('pasapi_assignment')
          .selectAll()
          .where('resource_id', '=', number)
          .execute();
        assert.deepEqual(
          assignment.map((a) => [a.resource_type, a.internal_type, a.internal_id]),
          [['Patient', '\\Patient', id]],
        );
        const audit = await app.db
          .selectFrom('audit_event' as keyof DB)
          .selectAll()
          .execute();
        const row = (
          audit as unknown as { action: string; target_ids: string | null; outcome: number }[]
        ).find((r) => r.action === 'pasapi.patient' && r.target_ids === String(id));
        assert.equal(row?.outcome, 201, 'the write is audited with the patient id');
      });

      it('does not create a patient with updateOnly="1", then creates it without (testUpdateOnlyDoesntCreatePatient)', async () => {
        const number = newHospitalNumber();
        const before = await counts();
        const response = await pasapiPut(
          app,
          url(number),
          fullPatientXml({ hospitalNumber: number, rootAttributes: ' updateOnly="1"' }),
          auth,
        );
        const text = await response.text();
        assert.equal(response.status, 200, text);
        assert.equal(xmlText(text, 'Message'), 'Patient not created');
        assert.equal(xmlText(text, 'Id'), undefined);
        assert.deepEqual(await counts(), before);
        const id = await create({ hospitalNumber: number });
        const identifier = await app.db
          .selectFrom('patient_identifier')
          .select('patient_id')
          .where('value', '=', number)
          .executeTakeFirstOrThrow();
        assert.equal(identifier.patient_id, id);
      });

      it('updates an existing patient with updateOnly="1" (testUpdateOnlyDoesUpdatePatient)', async () => {
        const number = newHospitalNumber();
        const id = await create({ hospitalNumber: number });
        const response = await pasapiPut(
          app,
          url(number),
          fullPatientXml({ hospitalNumber: number, rootAttributes: ' updateOnly="1"', dob: '1981-02-13' }),
          auth,
        );
        const text = await response.text();
        assert.equal(response.status, 200, text);
        assert.equal(xmlText(text, 'Message'), 'Patient updated.');
        assert.equal(Number(xmlText(text, 'Id')), id);
        assert.equal((await patientOf(id)).dob, '1981-02-13');
      });

      it('does not create a patient with X-OE-Update-Only: 1 (testUpdateOnlyHeaderDoesNotCreatePatient)', async () => {
        const number = newHospitalNumber();
        const before = await counts();
        const response = await pasapiPut(app, url(number), fullPatientXml({ hospitalNumber: number }), {
          ...auth,
          'x-oe-update-only': '1',
        });
        assert.equal(response.status, 200);
        assert.equal(xmlText(await response.text(), 'Message'), 'Patient not created');
        assert.deepEqual(await counts(), before);
      });

      it('creates a patient from a partial record (testPartialUpdateAllowedForNewRecord)', async () => {
        const number = newHospitalNumber();
        const body = `<Patient><NHSNumber>${newNhsNumber()}</NHSNumber><HospitalNumber>${number}</HospitalNumber><FirstName>Test First</FirstName><Surname>Test Last</Surname><DateOfBirth>1978-03-01</DateOfBirth></Patient>`;
        const response = await pasapiPut(app, url(number), body, { ...auth, 'x-oe-partial-record': '1' });
        const text = await response.text();
        assert.equal(response.status, 201, text);
        assert.equal((await patientOf(Number(xmlText(text, 'Id')))).last_name, 'Test Last');
      });

      it('blanks in a full update what the record omits (testUpdate)', async () => {
        const number = newHospitalNumber();
        const nhs = newNhsNumber();
        const id = await create({ hospitalNumber: number, nhsNumber: nhs });
        const update = fullPatientXml({ hospitalNumber: number, nhsNumber: nhs, title: 'Mr' }).replace(
          /<EthnicGroup>.*<\/GpCode>/s,
          '',
        );
        const response = await pasapiPut(app, url(number), update, auth);
        assert.equal(response.status, 200, await response.text());
        const patient = await patientOf(id);
        assert.equal(patient.title, 'Mr');
        assert.equal(patient.ethnic_group_id, null);
        assert.equal(patient.gp_id, null);
        assert.equal(patient.practice_id, null);
        assert.equal(patient.gender, 'F');
        assert.equal(patient.dob, '1978-03-01');
      });

      for (const [partial, check] of [
        [
          '<Patient><Title>Mr</Title></Patient>',
          (p: Awaited<ReturnType<typeof patientOf>>) =>
            assert.deepEqual([p.title, p.gender, p.gp_id !== null], ['Mr', 'F', true]),
        ],
        [
          '<Patient><Title>Dr</Title><Gender>M</Gender></Patient>',
          (p: Awaited<ReturnType<typeof patientOf>>) => assert.deepEqual([p.title, p.gender], ['Dr', 'M']),
        ],
        [
          '<Patient><Gender/></Patient>',
          (p: Awaited<ReturnType<typeof patientOf>>) => assert.deepEqual([p.title, p.gender], ['MRS', null]),
        ],
        [
          '<Patient><EthnicGroup/><GpCode /><PracticeCode /></Patient>',
          (p: Awaited<ReturnType<typeof patientOf>>) =>
            assert.deepEqual([p.ethnic_group_id, p.gp_id, p.practice_id, p.title], [null, null, null, 'MRS']),
        ],
        [
          '<Patient><Gender/><DateOfBirth>1990-08-03</DateOfBirth></Patient>',
          (p: Awaited<ReturnType<typeof patientOf>>) =>
            assert.deepEqual([p.gender, p.dob, p.last_name], [null, '1990-08-03', 'API']),
        ],
      ] as const) {
        it(`keeps what a partial record omits: ${partial} (testPartialUpdate)`, async () => {
          const number = newHospitalNumber();
          const id = await create({ hospitalNumber: number });
          const response = await pasapiPut(app, url(number), partial, {
            ...auth,
            'x-oe-partial-record': '1',
          });
          assert.equal(response.status, 200, await response.text());
          check(await patientOf(id));
        });
      }
    });

    describe('authentication and negotiation (PASAPI_Test)', () => {
      const body = () => fullPatientXml({ hospitalNumber: '1234567' });

      it('answers 401 with WWW-Authenticate and an empty XML body without credentials (testAuthRequired)', async () => {
        const before = await counts();
        const response = await pasapiPut(app, url('1234567'), body(), {});
        assert.equal(response.status, 401);
        assert.equal(response.headers.get('www-authenticate'), 'Basic realm="OpenEyes"');
        assert.match(response.headers.get('content-type') ?? '', /^application\/xml/);
        assert.equal(await response.text(), '');
        assert.deepEqual(await counts(), before);
      });

      it('answers 401 for a wrong password', async () => {
        const user = await createUser(app.db);
        const response = await pasapiPut(app, url('1234567'), body(), {
          authorization: basicHeader(user.username, 'wrong'),
        });
        assert.equal(response.status, 401);
      });

      it('refuses an anonymous body before reading it: 401 for one above the body limit, not 413', async () => {
        // Larger than the 256 KiB body limit: a body read before the guard would answer 413.
        const huge = `<Patient>${'x'.repeat(300 * 1024)}</Patient>`;
        const before = await counts();
        for (const headers of [{}, { authorization: basicHeader('nobody', 'wrong') }] as Record<
          string,
          string
        >[]) {
          const response = await pasapiPut(app, url('1234567'), huge, headers);
          assert.equal(response.status, 401);
          assert.equal(await response.text(), '');
        }
        assert.deepEqual(await counts(), before);
      });

      it('answers 403 for a user without the API access role (testAuthNeedsAccess)', async () => {
        const user = await createUser(app.db, { roles: [] });
        const before = await counts();
        const response = await pasapiPut(app, url('1234567'), body(), { authorization: user.authorization });
        assert.equal(response.status, 403);
        assert.equal(await response.text(), '');
        assert.deepEqual(await counts(), before);
      });

      it('answers 406 for Accept: application/json (testErrorForJsonAccept)', async () => {
        const before = await counts();
        const response = await pasapiPut(app, url('1234567'), '<Patient />', {
          ...auth,
          accept: 'application/json',
        });
        assert.equal(response.status, 406);
        assert.deepEqual(await counts(), before);
      });

      it('takes XML when a later Accept entry names it', async () => {
        const response = await pasapiPut(app, url(newHospitalNumber()), '<Patient />', {
          ...auth,
          accept: 'text/html, application/xml',
        });
        assert.equal(response.status, 400);
      });

      for (const method of ['GET', 'POST', 'DELETE']) {
        it(`answers ${method} with 405 and Allow: PUT`, async () => {
          const response = await app.request(`/PASAPI/V1/${url('1234567')}`, { method, headers: auth });
          assert.equal(response.status, 405);
          assert.equal(response.headers.get('allow'), 'PUT');
        });
      }

      it('answers 404 Failure for an unknown identifier type', async () => {
        const text = await assertRefused('Patient/1234567/identifier-type/NOPE-9-9', body(), 404);
        assert.match(text, /PatientIdentifierType cannot be found based on "identifier-type": NOPE-9-9/);
      });

      it('answers 404 Failure for an unknown resource type', async () => {
        const text = await assertRefused(`Person/1234567/identifier-type/${pas.typeKey}`, body(), 404);
        assert.match(text, /Unrecognised Resource type Person/);
      });
    });

    describe('hostile XML', () => {
      it('refuses an entity expansion bomb with 400, reading nothing', async () => {
        const number = newHospitalNumber();
        const bomb = `<?xml version="1.0"?><!DOCTYPE Patient [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">]><Patient><HospitalNumber>${number}</HospitalNumber><FirstName>&d;</FirstName><Surname>API</Surname><DateOfBirth>1978-03-01</DateOfBirth></Patient>`;
        const text = await assertRefused(url(number), bomb, 400);
        assert.match(text, /document type declarations are not accepted/);
      });

      it('refuses a SYSTEM entity with 400 and never shows the file', async () => {
        const number = newHospitalNumber();
        const body = `<?xml version="1.0"?><!DOCTYPE Patient [<!ENTITY x SYSTEM "file:///etc/passwd">]><Patient><HospitalNumber>${number}</HospitalNumber><FirstName>&x;</FirstName><Surname>API</Surname><DateOfBirth>1978-03-01</DateOfBirth></Patient>`;
        const text = await assertRefused(url(number), body, 400);
        assert.doesNotMatch(text, /root:/);
      });

      it('refuses an undeclared entity reference with 400', async () => {
        const number = newHospitalNumber();
        await assertRefused(
          url(number),
          fullPatientXml({ hospitalNumber: number, firstName: '&nbsp;' }),
          400,
        );
      });

      it('refuses a deeply nested document with 400', async () => {
        const number = newHospitalNumber();
        const deep = `<Patient>${'<a>'.repeat(50)}${'</a>'.repeat(50)}</Patient>`;
        await assertRefused(url(number), deep, 400);
      });

      it('refuses a body over the limit with 413', async () => {
        const number = newHospitalNumber();
        const big = fullPatientXml({ hospitalNumber: number, extra: `<!-- ${'x'.repeat(300 * 1024)} -->` });
        await assertRefused(url(number), big, 413);
      });

      it('decodes predefined entities and character references in text', async () => {
        const number = newHospitalNumber();
        const id = await create({ hospitalNumber: number, surname: 'O&apos;Brien &amp; Sm&#105;th' });
        assert.equal((await patientOf(id)).last_name, "O'Brien & Smith");
      });
    });

    describe('where OpenEyes is defective', () => {
      it('refuses a rolled-over date with 400 (OpenEyes stores 2021-03-02)', async () => {
        const number = newHospitalNumber();
        const text = await assertRefused(
          url(number),
          fullPatientXml({ hospitalNumber: number, dob: '2021-02-30' }),
          400,
        );
        assert.match(text, /invalid date format for DateOfBirth/);
      });

      it('reads a date without leading zeros, as OpenEyes does', async () => {
        const number = newHospitalNumber();
        const id = await create({ hospitalNumber: number, dob: '1978-3-1' });
        assert.equal((await patientOf(id)).dob, '1978-03-01');
      });

      it('reads IsDeceased "false" as false (OpenEyes: true)', async () => {
        const number = newHospitalNumber();
        const id = await create({ hospitalNumber: number, extra: '<IsDeceased>false</IsDeceased>' });
        assert.equal((await patientOf(id)).is_deceased, 0);
        const again = await pasapiPut(
          app,
          url(number),
          fullPatientXml({ hospitalNumber: number, extra: '<IsDeceased>TRUE</IsDeceased>' }),
          auth,
        );
        assert.equal(again.status, 200);
        assert.equal((await patientOf(id)).is_deceased, 1);
      });

      it('refuses an unreadable flag with 400 (OpenEyes: any text is true)', async () => {
        const number = newHospitalNumber();
        await assertRefused(
          url(number),
          fullPatientXml({ hospitalNumber: number, extra: '<IsDeceased>maybe</IsDeceased>' }),
          400,
        );
        await assertRefused(url(number), fullPatientXml({ hospitalNumber: number }), 400, {
          'x-oe-partial-record': 'sometimes',
        });
      });

      it('treats updateOnly="0" as off (OpenEyes: on)', async () => {
        const number = newHospitalNumber();
        const response = await pasapiPut(
          app,
          url(number),
          fullPatientXml({ hospitalNumber: number, rootAttributes: ' updateOnly="0"' }),
          auth,
        );
        assert.equal(response.status, 201);
      });

      it('refuses an unknown element with 400 Failure (OpenEyes: 500 with a stack trace)', async () => {
        const number = newHospitalNumber();
        const text = await assertRefused(
          url(number),
          fullPatientXml({ hospitalNumber: number, extra: '<ContactList/>' }),
          400,
        );
        assert.match(text, /Unrecognised tag ContactList/);
      });

      it('refuses an unknown gender with 400', async () => {
        const number = newHospitalNumber();
        await assertRefused(url(number), fullPatientXml({ hospitalNumber: number, gender: 'X' }), 400);
      });

      it('refuses a HospitalNumber that differs from the URL with 422', async () => {
        const number = newHospitalNumber();
        const body = fullPatientXml({ hospitalNumber: number }).replace(
          `<HospitalNumber>${number}`,
          '<HospitalNumber>1',
        );
        const text = await assertRefused(url(number), body, 422);
        assert.match(text, /HospitalNumber in URL and in XML must match/);
      });

      it('escapes its answers: a warning holding & and < is well-formed XML', async () => {
        const number = newHospitalNumber();
        const response = await pasapiPut(
          app,
          url(number),
          fullPatientXml({ hospitalNumber: number }).replace('<GpCode>G3258868', '<GpCode>G&amp;&lt;1'),
          auth,
        );
        const text = await response.text();
        assert.equal(response.status, 201, text);
        assert.equal(XMLValidator.validate(text), true);
        assert.ok(text.includes('<Warning>Could not find GP for code G&amp;&lt;1</Warning>'), text);
      });

      it('adopts a patient that PASAPI did not create (OpenEyes: 422 HospitalNumber belongs to another patient)', async () => {
        const number = newHospitalNumber();
        const existing = await createPatient(app.db, { lastName: 'Registered' });
        await addIdentifier(app.db, existing.patientId, pas.localTypeId, number);
        const response = await pasapiPut(app, url(number), fullPatientXml({ hospitalNumber: number }), auth);
        const text = await response.text();
        assert.equal(response.status, 200, text);
        assert.equal(Number(xmlText(text, 'Id')), existing.patientId);
        assert.equal((await patientOf(existing.patientId)).last_name, 'API');
        const assignment = await app.db
          .selectFrom('pasapi_assignment')
          .select('internal_id')
          .where('resource_id', '=', number)
          .executeTakeFirstOrThrow();
        assert.equal(assignment.internal_id, existing.patientId);
      });

      it('refuses an NHS number another patient holds with 409, changing nothing', async () => {
        const nhs = newNhsNumber();
        await create({ hospitalNumber: newHospitalNumber(), nhsNumber: nhs, dob: '1950-01-01' });
        const number = newHospitalNumber();
        const text = await assertRefused(
          url(number),
          fullPatientXml({ hospitalNumber: number, nhsNumber: nhs }),
          409,
        );
        assert.match(text, /NHSNumber belongs to another patient/);
      });

      it('refuses an NHS number longer than an identifier with 400 where its type bounds no length, writing nothing', async () => {
        // patient_identifier.value is varchar(255): a longer value fails the insert on PostgreSQL and
        // MariaDB in strict mode, and the deleted row's unique_row_string adds its prefix to it.
        const global = () => app.db.updateTable('patient_identifier_type').where('id', '=', pas.globalTypeId);
        const { validate_regex: pattern } = await app.db
          .selectFrom('patient_identifier_type')
          .select('validate_regex')
          .where('id', '=', pas.globalTypeId)
          .executeTakeFirstOrThrow();
        await global().set({ validate_regex: '/^[0-9]+$/' }).execute();
        try {
          for (const nhs of ['9'.repeat(300), '4'.repeat(41)]) {
            const number = newHospitalNumber();
            const text = await assertRefused(
              url(number),
              fullPatientXml({ hospitalNumber: number, nhsNumber: nhs }),
              400,
            );
            assert.match(text, /NHSNumber is too long \(maximum is 40 characters\)/);
          }
          const number = newHospitalNumber();
          await create({ hospitalNumber: number, nhsNumber: '7'.repeat(40) });
        } finally {
          await global().set({ validate_regex: pattern }).execute();
        }
      });

      it('refuses a renumbering with 409 (same NHS number, date of birth and gender; new hospital number)', async () => {
        const nhs = newNhsNumber();
        await create({ hospitalNumber: newHospitalNumber(), nhsNumber: nhs });
        const number = newHospitalNumber();
        const text = await assertRefused(
          url(number),
          fullPatientXml({ hospitalNumber: number, nhsNumber: nhs }),
          409,
        );
        assert.match(text, /This patient has a different HospitalNumber/);
      });

      it('refuses an invalid phone number with 400 (OpenEyes accepts 1e5)', async () => {
        const number = newHospitalNumber();
        const body = fullPatientXml({ hospitalNumber: number }).replace(
          '<TelephoneNumber>03040 6024378',
          '<TelephoneNumber>1e5',
        );
        const text = await assertRefused(url(number), body, 400);
        assert.match(text, /primary_phone: Phone number must be a valid telephone number/);
      });
    });

    describe('addresses, identifiers and remapping', () => {
      it('matches addresses by postcode, adds new ones and deletes those no longer sent', async () => {
        const number = newHospitalNumber();
        const id = await create({ hospitalNumber: number });
        const { contact_id: contactId } = await patientOf(id);
        const [first] = await app.db
          .selectFrom('address')
          .select('id')
          .where('contact_id', '=', contactId)
          .execute();
        const two = fullPatientXml({ hospitalNumber: number })
          .replace('82 Scarisbrick Lane', '83 Scarisbrick Lane')
          .replace(
            '</AddressList>',
            '<Address><Line1>1 Other Road</Line1><City>Leeds</City><Postcode>LS1 1AA</Postcode><Country>GB</Country><Type>CORR</Type></Address></AddressList>',
          );
        assert.equal((await pasapiPut(app, url(number), two, auth)).status, 200);
        const rows = await app.db
          .selectFrom('address')
          .selectAll()
          .where('contact_id', '=', contactId)
          .orderBy('id')
          .execute();
        assert.deepEqual(
          rows.map((r) => [r.id === first!.id, r.address1, r.address_type_id]),
          [
            [true, '83 Scarisbrick Lane', 2],
            [false, '1 Other Road', 3],
          ],
        );
        const none = fullPatientXml({ hospitalNumber: number }).replace(
          /<AddressList>.*<\/AddressList>/s,
          '',
        );
        assert.equal((await pasapiPut(app, url(number), none, auth)).status, 200);
        assert.equal(
          (await app.db.selectFrom('address').select('id').where('contact_id', '=', contactId).execute())
            .length,
          0,
        );
      });

      it('skips an address with an unknown country, with a 1-based warning', async () => {
        const number = newHospitalNumber();
        const response = await pasapiPut(
          app,
          url(number),
          fullPatientXml({ hospitalNumber: number }).replace('<Country>GB', '<Country>ZZ'),
          auth,
        );
        const text = await response.text();
        assert.equal(response.status, 201);
        assert.deepEqual(
          xmlTexts(text, 'Warning').filter((w) => w.startsWith('Address')),
          ['Address 1: Unrecognised country code ZZ', 'Address 1 not added'],
        );
      });

      it('soft-deletes the NHS number when a full record sends it empty', async () => {
        const number = newHospitalNumber();
        const id = await create({ hospitalNumber: number, nhsNumber: newNhsNumber() });
        assert.equal(
          (await pasapiPut(app, url(number), fullPatientXml({ hospitalNumber: number, nhsNumber: '' }), auth))
            .status,
          200,
        );
        const global = await app.db
          .selectFrom('patient_identifier')
          .select(['deleted', 'source_info'])
          .where('patient_id', '=', id)
          .where('patient_identifier_type_id', '=', pas.globalTypeId)
          .executeTakeFirstOrThrow();
        assert.equal(global.deleted, 1);
        assert.match(global.source_info, /^DEL BY PASAPI\[\d+\]$/);
      });

      it('applies pasapi_xpath_remap values of the type institution; NULL output removes the element', async () => {
        const remap = await app.db
          .insertInto('pasapi_xpath_remap')
          .values({ name: 'Ethnic', xpath: '/Patient/EthnicGroup', institution_id: pas.institutionId })
          .returning('id')
          .executeTakeFirstOrThrow();
        await app.db
          .insertInto('pasapi_remap_value')
          .values([
            { xpath_id: remap.id, input: 'AX', output: 'B' },
            { xpath_id: remap.id, input: 'DROP', output: null },
          ])
          .execute();
        try {
          const number = newHospitalNumber();
          const id = await create({ hospitalNumber: number, extra: '', title: 'MRS' }).then(
            async (created) => {
              const body = fullPatientXml({ hospitalNumber: number }).replace(
                '<EthnicGroup>A',
                '<EthnicGroup>AX',
              );
              assert.equal((await pasapiPut(app, url(number), body, auth)).status, 200);
              return created;
            },
          );
          const b = await app.db
            .selectFrom('ethnic_group')
            .select('id')
            .where('code', '=', 'B')
            .executeTakeFirstOrThrow();
          assert.equal((await patientOf(id)).ethnic_group_id, b.id);
          // Removed: absent from a partial record, so the stored value stays.
          const partial = '<Patient><EthnicGroup>DROP</EthnicGroup></Patient>';
          assert.equal(
            (await pasapiPut(app, url(number), partial, { ...auth, 'x-oe-partial-record': '1' })).status,
            200,
          );
          assert.equal((await patientOf(id)).ethnic_group_id, b.id);
        } finally {
          await app.db.deleteFrom('pasapi_remap_value').where('xpath_id', '=', remap.id).execute();
          await app.db.deleteFrom('pasapi_xpath_remap').where('id', '=', remap.id).execute();
        }
      });

      it('stores phone numbers as sent when validate_PASAPI_phone_number is off', async () => {
        await app.db
          .insertInto('setting_installation')
          .values({ key: 'validate_PASAPI_phone_number', value: 'off' })
          .execute();
        try {
          const number = newHospitalNumber();
          const body = fullPatientXml({ hospitalNumber: number }).replace(
            '<TelephoneNumber>03040 6024378',
            '<TelephoneNumber>ext 12',
          );
          const response = await pasapiPut(app, url(number), body, auth);
          assert.equal(response.status, 201);
          assert.equal(
            (await patientOf(Number(xmlText(await response.text(), 'Id')))).primary_phone,
            'ext12',
          );
        } finally {
          await setSetting(app.db, 'validate_PASAPI_phone_number', 'on');
        }
      });
    });
  });
});
