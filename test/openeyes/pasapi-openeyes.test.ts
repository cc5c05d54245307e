/**
 * PASAPI on an OpenEyes database (`DATABASE_SCHEMA=openeyes`, MariaDB/MySQL) with the tables OpenEyes's
 * migrations create (schema.sql): the seed's `api` user (role API access) creates and updates a patient
 * at `LOCAL-1-0`, the previous rows are kept in the `_version` twins, a hand-registered patient is
 * adopted, a merge writes `patient_merge_request` and its twin (which keeps three old column names), and
 * an appointment lands on OpenEyes's generated worklist, its updates and deletion kept in the twins.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/config.ts';
import type { Bootstrapped } from '../../src/main/bootstrap.ts';
import { bootstrap } from '../../src/main/bootstrap.ts';
import { createAuthenticator } from '../../src/modules/user/index.ts';
import { basicHeader } from '../factories.ts';
import { appointmentXml, fullPatientXml, pasapiPut, xmlText } from '../factories-pasapi.ts';
import type { OpenEyesTestDatabase } from './openeyes-database.ts';
import { createOpenEyesDatabase, openKysely, testMysqlUrl } from './openeyes-database.ts';

const adminUrl = testMysqlUrl();
const skip = adminUrl === undefined ? 'TEST_MYSQL_URL is not set (no MariaDB/MySQL server)' : false;
const auth = { authorization: basicHeader('api', 'api-password') };

describe('PASAPI on an OpenEyes database', { skip }, () => {
  let oe: OpenEyesTestDatabase;
  let booted: Bootstrapped;
  let app: FastifyInstance;
  let baseUrl: string;
  let filesDir: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  let db: Kysely<any>;
  const client = { request: (p: string, init?: RequestInit) => fetch(`${baseUrl}${p}`, init) };

  before(async () => {
    oe = await createOpenEyesDatabase(adminUrl!);
    filesDir = await mkdtemp(path.join(tmpdir(), 'cra-oe-pasapi-'));
    const config = loadConfig({
      DATABASE_URL: oe.url,
      DATABASE_SCHEMA: 'openeyes',
      TIME_ZONE: 'UTC',
      FILES_DIR: filesDir,
      AUTH_FAILURE_LIMIT_PER_MINUTE: '0',
      AUTH_CACHE_TTL_MS: '0',
      WORKER: 'off',
      DEMO_DATA: 'off',
      LOG_LEVEL: 'silent',
    });
    booted = await bootstrap(config);
    app = await buildApp({
      config: booted.config,
      database: booted.database,
      files: booted.files,
      authenticator: createAuthenticator(booted.database.db, { cacheTtlMs: 0, database: booted.database }),
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    baseUrl = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`;
    db = openKysely(oe.url);
  });
  after(async () => {
    await db?.destroy();
    await app?.close();
    await booted?.database.close();
    await oe?.drop();
    if (filesDir !== undefined) await rm(filesDir, { recursive: true, force: true });
  });

  const count = async (table: string) =>
    Number(
      (
        await db
          .selectFrom(table)
          .select((eb) => eb.fn.countAll().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );

  it('creates, then updates with the previous rows in the _version twins', async () => {
    const create = await pasapiPut(
      client,
      'Patient/7654321/identifier-type/LOCAL-1-0',
      fullPatientXml({ hospitalNumber: '7654321', nhsNumber: '4857773456' }),
      auth,
    );
    const text = await create.text();
    assert.equal(create.status, 201, text);
    const id = Number(xmlText(text, 'Id'));
    const patient = await db.selectFrom('patient').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    assert.equal(patient.dob, '1978-03-01');
    assert.notEqual(patient.created_user_id, 1, 'audit columns name the api user');
    const identifiers = await db
      .selectFrom('patient_identifier')
      .select(['patient_identifier_type_id', 'value', 'unique_row_string'])
      .where('patient_id', '=', id)
      .orderBy('patient_identifier_type_id')
      .execute();
    assert.deepEqual(identifiers, [
      { patient_identifier_type_id: 1, value: '7654321', unique_row_string: `${id}-1-ACTIVE` },
      { patient_identifier_type_id: 2, value: '4857773456', unique_row_string: `${id}-2-ACTIVE` },
    ]);
    const address = await db
      .selectFrom('address')
      .selectAll()
      .where('contact_id', '=', patient.contact_id)
      .executeTakeFirstOrThrow();
    assert.equal(address.country_id, 1);

    const versionsBefore = await Promise.all(
      ['patient_version', 'contact_version', 'address_version'].map(count),
    );
    const update = await pasapiPut(
      client,
      'Patient/7654321/identifier-type/LOCAL-1-0',
      fullPatientXml({ hospitalNumber: '7654321', nhsNumber: '4857773456', surname: 'Changed' }),
      auth,
    );
    assert.equal(update.status, 200, await update.text());
    const versionsAfter = await Promise.all(
      ['patient_version', 'contact_version', 'address_version'].map(count),
    );
    assert.deepEqual(
      versionsAfter,
      versionsBefore.map((n) => n + 1),
    );
    const kept = await db
      .selectFrom('contact_version')
      .select('last_name')
      .where('id', '=', patient.contact_id)
      .executeTakeFirstOrThrow();
    assert.equal(kept.last_name, 'API');
  });

  it('adopts a patient OpenEyes registered by hand (seed patient 2, 0067890)', async () => {
    const assignmentsBefore = await count('pasapi_assignment');
    const response = await pasapiPut(
      client,
      'Patient/0067890/identifier-type/LOCAL-1-0',
      fullPatientXml({ hospitalNumber: '0067890' }),
      auth,
    );
    const text = await response.text();
    assert.equal(response.status, 200, text);
    assert.equal(Number(xmlText(text, 'Id')), 2);
    assert.equal(await count('pasapi_assignment'), assignmentsBefore + 1);
  });

  it("merges two patients and keeps the request versions under the twin's old column names", async () => {
    const response = await pasapiPut(
      client,
      'PatientMerge/7654321/identifier-type/LOCAL-1-0',
      '<PatientMerge><PrimaryPatientNumber>7654321</PrimaryPatientNumber><SecondaryPatientNumber>0067890</SecondaryPatientNumber></PatientMerge>',
      auth,
    );
    const text = await response.text();
    assert.equal(response.status, 201, text);
    const requestId = Number(xmlText(text, 'Id'));
    const row = await db
      .selectFrom('patient_merge_request')
      .selectAll()
      .where('id', '=', requestId)
      .executeTakeFirstOrThrow();
    assert.equal(row.status, 20);
    assert.equal(row.secondary_id, 2);
    const version = await db
      .selectFrom('patient_merge_request_version')
      .selectAll()
      .where('id', '=', requestId)
      .executeTakeFirstOrThrow();
    assert.equal(version.status, 0, 'the version before the merge');
    assert.equal(version.primary_local_identifier_value, '7654321');
    const retired = await db
      .selectFrom('patient')
      .select('deleted')
      .where('id', '=', 2)
      .executeTakeFirstOrThrow();
    assert.equal(retired.deleted, 1);
    assert.ok((await count('patient_version')) > 0);
  });

  it('books, updates and deletes an appointment on a generated worklist, keeping versions', async () => {
    // A definition of LOCAL-1-0 with a Clinic mapping and its instance of 2031-06-10, 08:00-17:00.
    const definition = await db
      .insertInto('worklist_definition')
      .values({
        name: 'Cataract clinic',
        rrule: 'FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR',
        start_time: '08:00:00',
        end_time: '17:00:00',
        active_from: '2031-01-01 00:00:00',
        scheduled: 1,
        display_order: 1,
        patient_identifier_type_id: 1,
      })
      .executeTakeFirstOrThrow();
    const definitionId = Number(definition.insertId);
    const mapping = await db
      .insertInto('worklist_definition_mapping')
      .values({ worklist_definition_id: definitionId, key: 'Clinic', display_order: 1 })
      .executeTakeFirstOrThrow();
    await db
      .insertInto('worklist_definition_mapping_value')
      .values({ worklist_definition_mapping_id: Number(mapping.insertId), mapping_value: 'CATA1' })
      .execute();
    const worklist = await db
      .insertInto('worklist')
      .values({
        name: 'Cataract clinic',
        start: '2031-06-10 08:00:00',
        end: '2031-06-10 17:00:00',
        scheduled: 1,
        worklist_definition_id: definitionId,
      })
      .executeTakeFirstOrThrow();
    const worklistId = Number(worklist.insertId);
    await db
      .insertInto('worklist_attribute')
      .values({ worklist_id: worklistId, name: 'Clinic', display_order: 1 })
      .execute();

    const url = 'PatientAppointment/VISIT42/identifier-type/LOCAL-1-0';
    const body = (time: string, clinic: string) =>
      appointmentXml({ patientId: 1, date: '2031-06-10', time, mappings: { Clinic: clinic } });
    const created = await pasapiPut(client, url, body('09:40', 'cata1'), auth);
    const text = await created.text();
    assert.equal(created.status, 201, text);
    const bookingId = Number(xmlText(text, 'Id'));
    const booking = await db
      .selectFrom('worklist_patient')
      .selectAll()
      .where('id', '=', bookingId)
      .executeTakeFirstOrThrow();
    assert.equal(booking.worklist_id, worklistId);
    assert.equal(booking.patient_id, 1);
    assert.equal(booking.when, '2031-06-10 09:40:00', "OpenEyes's local time, as sent");
    assert.notEqual(booking.created_user_id, 1, 'audit columns name the api user');
    const assignment = await db
      .selectFrom('pasapi_assignment')
      .select(['internal_type', 'internal_id'])
      .where('resource_type', '=', 'PatientAppointment')
      .where('resource_id', '=', 'VISIT42')
      .execute();
    assert.deepEqual(assignment, [{ internal_type: '\\WorklistPatient', internal_id: bookingId }]);

    const updated = await pasapiPut(client, url, body('10:00', 'CATA1'), auth);
    assert.equal(updated.status, 200, await updated.text());
    assert.equal(await count('worklist_patient_version'), 1);
    assert.equal(await count('worklist_patient_attribute_version'), 1);
    const previous = await db
      .selectFrom('worklist_patient_version')
      .select('when')
      .where('id', '=', bookingId)
      .executeTakeFirstOrThrow();
    assert.equal(previous.when, '2031-06-10 09:40:00');

    const refused = await pasapiPut(client, url, body('18:00', 'CATA1'), auth);
    assert.equal(refused.status, 400);
    assert.match(await refused.text(), /No worklist found for criteria/);

    // Seed patient 1 by its hospital number, as OpenEyes refuses it: 400, nothing written.
    const bookingsBefore = await count('worklist_patient');
    const byNumber = await pasapiPut(
      client,
      'PatientAppointment/VISIT43/identifier-type/LOCAL-1-0',
      appointmentXml({
        date: '2031-06-10',
        time: '09:40',
        mappings: { Clinic: 'CATA1' },
        patientIdXml: '<PatientId><HospitalNumber>0012345</HospitalNumber></PatientId>',
      }),
      auth,
    );
    const byNumberText = await byNumber.text();
    assert.equal(byNumber.status, 400, byNumberText);
    assert.match(
      byNumberText,
      /<Failure><Errors><Error>PatientId error: resolveModelHospitalNumber not yet supported\.<\/Error>/,
    );
    assert.match(
      byNumberText,
      /a patient is identified by Id \(the Id a Patient PUT answers\), not by HospitalNumber/,
    );
    assert.equal(await count('worklist_patient'), bookingsBefore);
    assert.equal(await count('worklist_patient_version'), 1);
    const visit43 = await db
      .selectFrom('pasapi_assignment')
      .select('id')
      .where('resource_id', '=', 'VISIT43')
      .execute();
    assert.deepEqual(visit43, []);

    const deleted = await client.request(`/PASAPI/V1/PatientAppointment/VISIT42`, {
      method: 'DELETE',
      headers: auth,
    });
    assert.equal(deleted.status, 204, await deleted.text());
    assert.equal(await count('worklist_patient'), 0);
    assert.equal(await count('worklist_patient_attribute'), 0);
    assert.equal(await count('worklist_patient_version'), 2);
    assert.equal(await count('worklist_patient_attribute_version'), 2);
  });

  it('records a Did Not Attend event in the open episode of seed patient 1 (0012345)', async () => {
    await db
      .insertInto('event_type')
      .values({ name: 'Did Not Attend', event_group_id: 1, class_name: 'OphCiDidNotAttend' })
      .execute();
    await db.insertInto('setting_installation').values({ key: 'DNA_autogen_enabled', value: 'on' }).execute();
    const response = await pasapiPut(
      client,
      'DidNotAttend',
      '<DidNotAttend><HospitalNumber>0012345</HospitalNumber><IdentifierType>LOCAL-1-0</IdentifierType><Date>2031-06-10</Date><Comments>Missed CATA1</Comments></DidNotAttend>',
      auth,
    );
    const text = await response.text();
    assert.equal(response.status, 201, text);
    const event = await db
      .selectFrom('event')
      .selectAll()
      .where('id', '=', Number(xmlText(text, 'Id')))
      .executeTakeFirstOrThrow();
    assert.equal(event.episode_id, 1);
    assert.equal(event.event_date, '2031-06-10 00:00:00');
    assert.equal(event.is_automated, 1);
    assert.equal(event.institution_id, 1);
    assert.notEqual(event.created_user_id, 1, 'audit columns name the api user');
    const comment = await db
      .selectFrom('et_ophcididnotattend_comments')
      .select('comment')
      .where('event_id', '=', event.id)
      .executeTakeFirstOrThrow();
    assert.equal(comment.comment, 'Missed CATA1');
  });

  it('refuses the seed user without OprnApi with 403', async () => {
    const response = await pasapiPut(client, 'Patient/1/identifier-type/LOCAL-1-0', '<Patient/>', {
      authorization: basicHeader('clinician', 'clinician-password'),
    });
    assert.equal(response.status, 403);
  });
});
