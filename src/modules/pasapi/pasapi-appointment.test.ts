/**
 * PASAPI V1 `PatientAppointment` PUT and DELETE against the real app on every dialect: which generated
 * worklist instance a booking lands on (the URL's identifier type, the window with its start included and
 * its end excluded, every mapping matched ignoring case, exactly one), the `when` in the site's zone, the
 * attribute values, update-only and partial records (the cases of OpenEyes's
 * PASAPI_PatientAppointment_Test, ported), and the refusals: each a 4xx `<Failure>` that wrote nothing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { XMLValidator } from 'fast-xml-parser';
import { basicHeader, countRows, createPatient, createUser } from '../../../test/factories.ts';
import { addIdentifier, createIdentifierType } from '../../../test/factories-patient.ts';
import type { PasInstallation } from '../../../test/factories-pasapi.ts';
import {
  appointmentXml,
  createPasInstallation,
  createWorklistDefinition,
  pasapiPut,
  xmlText,
  xmlTexts,
} from '../../../test/factories-pasapi.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import type { DB } from '../../db/schema.ts';
import { formatDateTime } from '../../db/stored-time.ts';

const WRITTEN_TABLES = [
  'worklist_patient',
  'worklist_patient_attribute',
  'pasapi_assignment',
] as const satisfies readonly (keyof DB)[];

/** A stored date-time as text, whatever the driver hands back. */
const stored = (value: unknown): string =>
  value instanceof Date ? formatDateTime(value) : String(value).slice(0, 19);

let visitCounter = 0;
const newVisitId = () => `V${process.pid}-${(visitCounter += 1)}`;

forEachDialect((dialect) => {
  describe(`PASAPI PatientAppointment (${dialect})`, () => {
    let app: TestApp;
    let pas: PasInstallation;
    let auth: Record<string, string>;
    let patientId: number;
    let clinicA: { worklistId: number; attributeIds: Map<string, number> };
    let clinicB: { worklistId: number; attributeIds: Map<string, number> };

    before(async () => {
      // Summer in London: the site's 09:40 is stored as 08:40 UTC in the own schema.
      app = await startTestApp(dialect, { env: { TIME_ZONE: 'Europe/London' } });
      pas = await createPasInstallation(app.db);
      auth = { authorization: (await createUser(app.db)).authorization };
      patientId = (await createPatient(app.db)).patientId;
      // The one patient is booked many times here; the default (one booking per instance) has its own test.
      await app.db
        .insertInto('setting_installation')
        .values({ key: 'worklist_allow_duplicate_patients', value: 'on' })
        .execute();
      // Two clinics of the URL's type on 2031-06-10, 08:00-17:00 site time, told apart by Clinic Code.
      clinicA = await createWorklistDefinition(app.db, {
        typeId: pas.localTypeId,
        name: 'Cataract A1',
        start: '2031-06-10 07:00:00',
        end: '2031-06-10 16:00:00',
        mappings: { 'Clinic Code': ['A1'], Doctor: [] },
      });
      clinicB = await createWorklistDefinition(app.db, {
        typeId: pas.localTypeId,
        name: 'Glaucoma B2',
        start: '2031-06-10 07:00:00',
        end: '2031-06-10 16:00:00',
        mappings: { 'Clinic Code': ['B2'], Doctor: [] },
        displayOrder: 2,
      });
      // The same clinic code in another number space: never a candidate for LOCAL bookings.
      const otherType = await createIdentifierType(app.db, {
        institution_id: pas.institutionId,
        usage_type: 'LOCAL',
        unique_row_string: `OTHER-${pas.institutionId}-0`,
      });
      await createWorklistDefinition(app.db, {
        typeId: otherType,
        name: 'Other number space A1',
        start: '2031-06-10 07:00:00',
        end: '2031-06-10 16:00:00',
        mappings: { 'Clinic Code': ['A1'] },
      });
    });
    after(async () => app?.close());

    const url = (id: string) => `PatientAppointment/${encodeURIComponent(id)}/identifier-type/${pas.typeKey}`;
    const counts = () => Promise.all(WRITTEN_TABLES.map((t) => countRows(app.db, t)));
    const clinicXml = (values: {
      time?: string;
      clinic?: string;
      doctor?: string;
      extra?: Record<string, string>;
    }) =>
      appointmentXml({
        patientId,
        date: '2031-06-10',
        time: values.time ?? '09:40',
        mappings: {
          'Clinic Code': values.clinic ?? 'A1',
          Doctor: values.doctor ?? 'Mr A Surgeon',
          ...values.extra,
        },
      });

    async function bookingOf(id: number) {
      const row = await app.db
        .selectFrom('worklist_patient')
        .select(['worklist_id', 'patient_id', 'when'])
        .where('id', '=', id)
        .executeTakeFirst();
      if (row === undefined) return undefined;
      const attributes = await app.db
        .selectFrom('worklist_patient_attribute as a')
        .innerJoin('worklist_attribute as n', 'n.id', 'a.worklist_attribute_id')
        .select(['n.name', 'n.worklist_id', 'a.attribute_value'])
        .where('a.worklist_patient_id', '=', id)
        .orderBy('n.name')
        .execute();
      return {
        worklistId: row.worklist_id,
        patientId: row.patient_id,
        when: stored(row.when),
        attributes: Object.fromEntries(attributes.map((a) => [a.name, a.attribute_value])),
        attributeWorklists: [...new Set(attributes.map((a) => a.worklist_id))],
      };
    }

    /** Sends `body` and asserts the status, an XML Failure, and that no row was written. */
    async function assertRefused(
      path: string,
      body: string | undefined,
      status: number,
      headers: Record<string, string> = {},
    ): Promise<string> {
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

    async function create(visitId: string, body = clinicXml({})): Promise<number> {
      const response = await pasapiPut(app, url(visitId), body, auth);
      const text = await response.text();
      assert.equal(response.status, 201, text);
      return Number(xmlText(text, 'Id'));
    }

    describe('PUT creates and updates a booking', () => {
      it('books onto the one instance whose definition, window and mappings match, with `when` and the attributes (201)', async () => {
        const before = await counts();
        const visitId = newVisitId();
        const response = await pasapiPut(app, url(visitId), clinicXml({}), auth);
        const text = await response.text();
        assert.equal(response.status, 201, text);
        assert.match(response.headers.get('content-type') ?? '', /^application\/xml/);
        assert.equal(xmlText(text, 'Message'), 'PatientAppointment created.');
        const id = Number(xmlText(text, 'Id'));
        assert.deepEqual(await bookingOf(id), {
          worklistId: clinicA.worklistId,
          patientId,
          when: '2031-06-10 08:40:00',
          attributes: { 'Clinic Code': 'A1', Doctor: 'Mr A Surgeon' },
          attributeWorklists: [clinicA.worklistId],
        });
        assert.deepEqual(await counts(), [before[0]! + 1, before[1]! + 2, before[2]! + 1]);
        const assignment = await app.db
          .selectFrom('pasapi_assignment')
          .select(['resource_type', 'internal_type', 'internal_id'])
          .where('resource_id', '=', visitId)
          .execute();
        assert.deepEqual(assignment, [
          { resource_type: 'PatientAppointment', internal_type: '\\WorklistPatient', internal_id: id },
        ]);
        const audit = (await app.db
          .selectFrom('audit_event' as keyof DB)
          .selectAll()
          .execute()) as unknown as { action: string; target_ids: string | null; outcome: number }[];
        assert.equal(
          audit.find((r) => r.action === 'pasapi.appointment' && r.target_ids === String(patientId))?.outcome,
          201,
          'the booking is audited with the patient id',
        );
      });

      it('matches mapping values ignoring case and surrounding spaces, and includes the window start', async () => {
        const id = await create(newVisitId(), clinicXml({ time: '08:00', clinic: ' b2 ' }));
        const booking = await bookingOf(id);
        assert.equal(booking?.worklistId, clinicB.worklistId);
        assert.equal(booking?.when, '2031-06-10 07:00:00');
        assert.equal(booking?.attributes['Clinic Code'], ' b2 ', 'the value is stored as sent');
      });

      it('updates the booking of a known visit id (200), and moves it to another instance with a full record', async () => {
        const visitId = newVisitId();
        const id = await create(visitId);
        const before = await counts();
        const response = await pasapiPut(
          app,
          url(visitId),
          clinicXml({ time: '10:15', doctor: 'Dr B' }),
          auth,
        );
        const text = await response.text();
        assert.equal(response.status, 200, text);
        assert.equal(xmlText(text, 'Message'), 'PatientAppointment updated.');
        assert.equal(Number(xmlText(text, 'Id')), id);
        assert.deepEqual(await counts(), before, 'an update adds no rows');
        const updated = await bookingOf(id);
        assert.equal(updated?.when, '2031-06-10 09:15:00');
        assert.deepEqual(updated?.attributes, { 'Clinic Code': 'A1', Doctor: 'Dr B' });

        const moved = await pasapiPut(app, url(visitId), clinicXml({ clinic: 'B2' }), auth);
        assert.equal(moved.status, 200, await moved.text());
        const after = await bookingOf(id);
        assert.equal(after?.worklistId, clinicB.worklistId);
        assert.deepEqual(after?.attributeWorklists, [clinicB.worklistId], 'the old instance’s values went');
        assert.deepEqual(after?.attributes, { 'Clinic Code': 'B2', Doctor: 'Mr A Surgeon' });
      });

      it('ignores a key the instance has no attribute for, with a warning', async () => {
        const response = await pasapiPut(app, url(newVisitId()), clinicXml({ extra: { Room: '3' } }), auth);
        const text = await response.text();
        assert.equal(response.status, 201, text);
        assert.deepEqual(xmlTexts(text, 'Warning'), ['Unrecognised attribute Room for Cataract A1']);
        assert.deepEqual(Object.keys((await bookingOf(Number(xmlText(text, 'Id'))))!.attributes), [
          'Clinic Code',
          'Doctor',
        ]);
      });
    });

    describe('X-OE-Update-Only and X-OE-Partial-Record', () => {
      it('does not create an unknown appointment with X-OE-Update-Only (200 not created), and updates a known one', async () => {
        const before = await counts();
        const response = await pasapiPut(app, url(newVisitId()), clinicXml({}), {
          ...auth,
          'x-oe-update-only': '1',
        });
        const text = await response.text();
        assert.equal(response.status, 200, text);
        assert.equal(xmlText(text, 'Message'), 'PatientAppointment not created');
        assert.equal(xmlText(text, 'Id'), undefined);
        assert.deepEqual(await counts(), before);

        const visitId = newVisitId();
        const id = await create(visitId);
        const update = await pasapiPut(app, url(visitId), clinicXml({ time: '11:00' }), {
          ...auth,
          'x-oe-update-only': 'true',
        });
        assert.equal(update.status, 200);
        assert.equal((await bookingOf(id))?.when, '2031-06-10 10:00:00');
      });

      it('refuses a partial record for a new appointment (testPartialUpdateErrorsForNewRecord)', async () => {
        const text = await assertRefused(
          url(newVisitId()),
          '<PatientAppointment><Appointment><AppointmentDate>2031-06-10</AppointmentDate></Appointment></PatientAppointment>',
          400,
          { 'x-oe-partial-record': '1' },
        );
        assert.match(text, /Cannot perform partial update on a new record/);
      });

      // testPartialUpdate's cases: each partial PUT after the same full one.
      const partialCases = [
        {
          name: 'a new time keeps the date and the attributes',
          body: '<PatientAppointment><Appointment><AppointmentTime>10:30</AppointmentTime></Appointment></PatientAppointment>',
          expected: {
            when: '2031-06-10 09:30:00',
            attributes: { 'Clinic Code': 'A1', Doctor: 'Mr A Surgeon' },
          },
        },
        {
          name: 'a new doctor keeps the clinic code and the time',
          body: '<PatientAppointment><Appointment><AppointmentMappingItems><AppointmentMapping><Key>Doctor</Key><Value>Dr J. Morgan</Value></AppointmentMapping></AppointmentMappingItems></Appointment></PatientAppointment>',
          expected: {
            when: '2031-06-10 08:40:00',
            attributes: { 'Clinic Code': 'A1', Doctor: 'Dr J. Morgan' },
          },
        },
        {
          name: 'a clinic code no definition accepts is refused (400 No worklist found)',
          body: '<PatientAppointment><Appointment><AppointmentMappingItems><AppointmentMapping><Key>Clinic Code</Key><Value>Error code</Value></AppointmentMapping></AppointmentMappingItems></Appointment></PatientAppointment>',
          error: /No worklist found for criteria/,
        },
        {
          name: 'a clinic code of another instance is refused (400 mapping change not allowed)',
          body: '<PatientAppointment><Appointment><AppointmentMappingItems><AppointmentMapping><Key>Clinic Code</Key><Value>B2</Value></AppointmentMapping></AppointmentMappingItems></Appointment></PatientAppointment>',
          error: /Worklist mapping change not allowed for partial update\./,
        },
      ];
      for (const testCase of partialCases) {
        it(`partial update: ${testCase.name}`, async () => {
          const visitId = newVisitId();
          const id = await create(visitId);
          const original = await bookingOf(id);
          if (testCase.error !== undefined) {
            const text = await assertRefused(url(visitId), testCase.body, 400, {
              'x-oe-partial-record': '1',
            });
            assert.match(text, testCase.error);
            assert.deepEqual(await bookingOf(id), original, 'the booking is unchanged');
            return;
          }
          const response = await pasapiPut(app, url(visitId), testCase.body, {
            ...auth,
            'x-oe-partial-record': '1',
          });
          assert.equal(response.status, 200, await response.text());
          const booking = await bookingOf(id);
          assert.equal(booking?.worklistId, clinicA.worklistId);
          assert.equal(booking?.when, testCase.expected.when);
          assert.deepEqual(booking?.attributes, testCase.expected.attributes);
        });
      }
    });

    describe('DELETE /PASAPI/V1/PatientAppointment/{id}', () => {
      it('deletes the booking, its values and its assignment (204), audited; a second DELETE is 404', async () => {
        const visitId = newVisitId();
        const id = await create(visitId);
        const response = await app.request(`/PASAPI/V1/PatientAppointment/${encodeURIComponent(visitId)}`, {
          method: 'DELETE',
          headers: auth,
        });
        assert.equal(response.status, 204);
        assert.equal(await response.text(), '');
        assert.equal(await bookingOf(id), undefined);
        const values = await app.db
          .selectFrom('worklist_patient_attribute')
          .select('id')
          .where('worklist_patient_id', '=', id)
          .execute();
        assert.deepEqual(values, []);
        const assignment = await app.db
          .selectFrom('pasapi_assignment')
          .select('id')
          .where('resource_id', '=', visitId)
          .execute();
        assert.deepEqual(assignment, []);
        const audit = (await app.db
          .selectFrom('audit_event' as keyof DB)
          .selectAll()
          .execute()) as unknown as { action: string; outcome: number }[];
        assert.ok(audit.some((r) => r.action === 'pasapi.appointment-delete' && r.outcome === 204));

        const again = await app.request(`/PASAPI/V1/PatientAppointment/${encodeURIComponent(visitId)}`, {
          method: 'DELETE',
          headers: auth,
        });
        const text = await again.text();
        assert.equal(again.status, 404);
        assert.match(again.headers.get('content-type') ?? '', /^application\/xml/);
        assert.deepEqual(xmlTexts(text, 'Error'), ['Could not find resource for external Id']);
      });

      it('keeps an event recorded against the booking, without the link', async () => {
        const visitId = newVisitId();
        const id = await create(visitId);
        const eventType = await app.db
          .selectFrom('event_type')
          .select('id')
          .orderBy('id')
          .executeTakeFirstOrThrow();
        const episode = await app.db
          .insertInto('episode')
          .values({ patient_id: patientId, start_date: '2031-06-01 00:00:00' })
          .returning('id')
          .executeTakeFirstOrThrow();
        const event = await app.db
          .insertInto('event')
          .values({
            episode_id: episode.id,
            event_type_id: eventType.id,
            event_date: '2031-06-10 00:00:00',
            institution_id: pas.institutionId,
            worklist_patient_id: id,
          })
          .returning('id')
          .executeTakeFirstOrThrow();
        const response = await app.request(`/PASAPI/V1/PatientAppointment/${encodeURIComponent(visitId)}`, {
          method: 'DELETE',
          headers: auth,
        });
        assert.equal(response.status, 204);
        const kept = await app.db
          .selectFrom('event')
          .select(['episode_id', 'worklist_patient_id', 'deleted'])
          .where('id', '=', event.id)
          .executeTakeFirstOrThrow();
        assert.deepEqual(kept, { episode_id: episode.id, worklist_patient_id: null, deleted: 0 });
      });

      it('answers 403 with an empty body for a user without the API access role, and deletes nothing', async () => {
        const visitId = newVisitId();
        const id = await create(visitId);
        const user = await createUser(app.db, { roles: [] });
        const response = await app.request(`/PASAPI/V1/PatientAppointment/${encodeURIComponent(visitId)}`, {
          method: 'DELETE',
          headers: { authorization: user.authorization },
        });
        assert.equal(response.status, 403);
        assert.equal(await response.text(), '');
        assert.notEqual(await bookingOf(id), undefined);
      });
    });

    describe('refusals change nothing', () => {
      it('refuses an unknown patient id (400 Patient not found.)', async () => {
        const unknown = await assertRefused(
          url(newVisitId()),
          appointmentXml({ ...base(), patientId: 2_000_000_000 }),
          400,
        );
        assert.deepEqual(xmlTexts(unknown, 'Error'), ['PatientId error: Patient not found.']);
      });

      describe('<PatientId> by PasId, NHSNumber or HospitalNumber: refused as in OpenEyes (400), nothing written', () => {
        // A patient who holds these very numbers: the refusal is not a failed lookup.
        let numbered: number;
        const hospitalNumber = `H${process.pid}`;
        const nhsNumber = '9434765919';
        before(async () => {
          numbered = (await createPatient(app.db)).patientId;
          await addIdentifier(app.db, numbered, pas.localTypeId, hospitalNumber);
          await addIdentifier(app.db, numbered, pas.globalTypeId, nhsNumber);
        });
        const refusal = (method: string, tag: string) => [
          `PatientId error: ${method} not yet supported.`,
          `PatientId error: a patient is identified by Id (the Id a Patient PUT answers), not by ${tag}`,
        ];
        const cases: [string, () => string, string, string][] = [
          ['PasId', () => `<PasId>${hospitalNumber}</PasId>`, 'resolvePasId', 'PasId'],
          ['NHSNumber', () => `<NHSNumber>${nhsNumber}</NHSNumber>`, 'resolveModelNHSNumber', 'NHSNumber'],
          [
            'HospitalNumber',
            () => `<HospitalNumber>${hospitalNumber}</HospitalNumber>`,
            'resolveModelHospitalNumber',
            'HospitalNumber',
          ],
          [
            'NHSNumber and HospitalNumber (the first present tag decides)',
            () => `<HospitalNumber>${hospitalNumber}</HospitalNumber><NHSNumber>${nhsNumber}</NHSNumber>`,
            'resolveModelNHSNumber',
            'NHSNumber',
          ],
          ['an empty PasId', () => '<PasId/>', 'resolvePasId', 'PasId'],
        ];
        for (const [name, inner, method, tag] of cases)
          it(`by ${name}`, async () => {
            const text = await assertRefused(
              url(newVisitId()),
              appointmentXml({ ...base(), patientIdXml: `<PatientId>${inner()}</PatientId>` }),
              400,
            );
            assert.deepEqual(xmlTexts(text, 'Error'), refusal(method, tag));
          });

        it('by HospitalNumber in a partial update of an existing booking: the booking keeps its patient', async () => {
          const visitId = newVisitId();
          const id = await create(visitId);
          const before = await bookingOf(id);
          const text = await assertRefused(
            url(visitId),
            `<PatientAppointment><PatientId><HospitalNumber>${hospitalNumber}</HospitalNumber></PatientId></PatientAppointment>`,
            400,
            { 'X-OE-Partial-Record': '1' },
          );
          assert.deepEqual(xmlTexts(text, 'Error'), refusal('resolveModelHospitalNumber', 'HospitalNumber'));
          assert.deepEqual(await bookingOf(id), before);
          assert.equal(before?.patientId, patientId);
        });

        it('with <Id> present, the other tags are ignored and <Id> decides', async () => {
          const response = await pasapiPut(
            app,
            url(newVisitId()),
            appointmentXml({
              ...base(),
              patientIdXml: `<PatientId><NHSNumber>${nhsNumber}</NHSNumber><Id>${patientId}</Id></PatientId>`,
            }),
            auth,
          );
          const text = await response.text();
          assert.equal(response.status, 201, text);
          assert.equal((await bookingOf(Number(xmlText(text, 'Id'))))?.patientId, patientId);
        });
      });

      it('refuses a booking no definition takes: outside the window, at its end (excluded), a value not accepted, two matches', async () => {
        const late = await assertRefused(url(newVisitId()), clinicXml({ time: '18:30' }), 400);
        assert.deepEqual(xmlTexts(late, 'Error'), ['No worklist found for criteria']);
        const atEnd = await assertRefused(url(newVisitId()), clinicXml({ time: '17:00' }), 400);
        assert.deepEqual(xmlTexts(atEnd, 'Error'), ['No worklist found for criteria']);
        const wrongValue = await assertRefused(url(newVisitId()), clinicXml({ clinic: 'Z9' }), 400);
        assert.deepEqual(xmlTexts(wrongValue, 'Error'), [
          "Z9 not valid for key 'Clinic Code'",
          "Z9 not valid for key 'Clinic Code'",
          'No worklist found for criteria',
        ]);
        const missingKey = await assertRefused(
          url(newVisitId()),
          appointmentXml({ patientId, date: '2031-06-10', time: '09:40', mappings: { Doctor: 'X' } }),
          400,
        );
        assert.deepEqual(xmlTexts(missingKey, 'Error'), [
          'Missing key Clinic Code for Cataract A1',
          'Missing key Clinic Code for Glaucoma B2',
          'No worklist found for criteria',
        ]);
        for (const name of ['Morning one', 'Morning two'])
          await createWorklistDefinition(app.db, {
            typeId: pas.localTypeId,
            name,
            start: '2031-06-11 07:00:00',
            end: '2031-06-11 11:00:00',
          });
        const twice = await assertRefused(
          url(newVisitId()),
          appointmentXml({ patientId, date: '2031-06-11', time: '09:00' }),
          400,
        );
        assert.deepEqual(xmlTexts(twice, 'Error'), ['More than worklist matched criteria']);
      });

      it('refuses a second booking of the patient on the same instance (409) unless worklist_allow_duplicate_patients', async () => {
        await app.db
          .updateTable('setting_installation')
          .set({ value: 'off' })
          .where('key', '=', 'worklist_allow_duplicate_patients')
          .execute();
        try {
          const other = (await createPatient(app.db)).patientId;
          const body = appointmentXml({
            patientId: other,
            date: '2031-06-10',
            time: '12:00',
            mappings: { 'Clinic Code': 'A1', Doctor: 'D' },
          });
          await create(newVisitId(), body);
          const text = await assertRefused(url(newVisitId()), body, 409);
          assert.deepEqual(xmlTexts(text, 'Error'), ['Patient is already on the given worklist.']);
        } finally {
          await app.db
            .updateTable('setting_installation')
            .set({ value: 'on' })
            .where('key', '=', 'worklist_allow_duplicate_patients')
            .execute();
        }
      });

      it('refuses an unknown identifier type key (404)', async () => {
        const text = await assertRefused(
          `PatientAppointment/${newVisitId()}/identifier-type/NOPE-1-0`,
          clinicXml({}),
          404,
        );
        assert.match(text, /PatientIdentifierType cannot be found/);
      });

      const badBodies: [string, string | undefined, RegExp][] = [
        ['an empty body', undefined, /Missing Resource Body/],
        ['malformed XML (testMalformedPatientAppointment)', '<PatientAppointment>', /Malformed XML/],
        ['a mismatched root tag (testMismatchedRootTag)', '<OEAppoint />', /Mismatched root tag OEAppoint/],
        ['an empty resource', '<PatientAppointment />', /PatientId is required/],
        [
          'an unknown tag',
          appointmentXml({ ...base(), patientId: 1 }).replace('<Appointment>', '<Room>1</Room><Appointment>'),
          /Unrecognised tag Room/,
        ],
        [
          'a date that is not in the calendar',
          appointmentXml({ ...base(), patientId: 1, date: '2031-02-30' }),
          /invalid date format for AppointmentDate/,
        ],
        [
          'a time out of range',
          appointmentXml({ ...base(), patientId: 1, time: '25:99' }),
          /invalid time format for AppointmentTime/,
        ],
        [
          'a mapping without its value',
          appointmentXml({ ...base(), patientId: 1 }).replace('<Value>A1</Value>', ''),
          /Value is required/,
        ],
        [
          'a repeated mapping key',
          appointmentXml({ ...base(), patientId: 1 }).replace(
            '</AppointmentMappingItems>',
            '<AppointmentMapping><Key>Doctor</Key><Value>Two</Value></AppointmentMapping></AppointmentMappingItems>',
          ),
          /Duplicate key Doctor is not allowed\./,
        ],
        [
          'a document type declaration',
          '<!DOCTYPE x [<!ENTITY a "b">]><PatientAppointment/>',
          /document type declarations/,
        ],
      ];
      for (const [name, body, message] of badBodies) {
        it(`answers 400 for ${name}`, async () => {
          assert.match(await assertRefused(url(newVisitId()), body, 400), message);
        });
      }

      it('answers 401 without credentials and 403 without the API access role, with empty bodies', async () => {
        const before = await counts();
        const anonymous = await pasapiPut(app, url(newVisitId()), clinicXml({}), {});
        assert.equal(anonymous.status, 401);
        assert.equal(anonymous.headers.get('www-authenticate'), 'Basic realm="OpenEyes"');
        const wrongPassword = await pasapiPut(app, url(newVisitId()), clinicXml({}), {
          authorization: basicHeader('nobody', 'wrong'),
        });
        assert.equal(wrongPassword.status, 401);
        const user = await createUser(app.db, { roles: [] });
        const forbidden = await pasapiPut(app, url(newVisitId()), clinicXml({}), {
          authorization: user.authorization,
        });
        assert.equal(forbidden.status, 403);
        assert.equal(await forbidden.text(), '');
        assert.deepEqual(await counts(), before);
      });

      it('answers 406 for Accept: application/json', async () => {
        const before = await counts();
        const response = await pasapiPut(app, url(newVisitId()), clinicXml({}), {
          ...auth,
          accept: 'application/json',
        });
        assert.equal(response.status, 406);
        assert.deepEqual(await counts(), before);
      });

      it('skips, with warnings, a booking before worklist_ignore_date that lands nowhere (200 not created)', async () => {
        await app.db
          .insertInto('setting_installation')
          .values({ key: 'worklist_ignore_date', value: '2031-07-01' })
          .execute();
        try {
          const before = await counts();
          const response = await pasapiPut(app, url(newVisitId()), clinicXml({ time: '18:30' }), auth);
          const text = await response.text();
          assert.equal(response.status, 200, text);
          assert.equal(xmlText(text, 'Message'), 'PatientAppointment not created');
          assert.deepEqual(xmlTexts(text, 'Warning'), ['No worklist found for criteria']);
          assert.deepEqual(await counts(), before);
        } finally {
          await app.db.deleteFrom('setting_installation').where('key', '=', 'worklist_ignore_date').execute();
        }
      });
    });

    function base() {
      return { date: '2031-06-10', time: '09:40', mappings: { 'Clinic Code': 'A1', Doctor: 'D' } };
    }
  });
});
