/**
 * A backup taken with `npm run cli -- export` restores into a new, empty database with
 * `npm run cli -- import`, after the service has used every table of the dataset: the queue has run
 * (its counters moved), signatures, attachments and accounts exist. The restored database exports to
 * the same bytes, and serves what the first one served.
 */
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { PNG_BYTES } from './factories-attachment.ts';
import { ADD_PATH, routinesOf } from './factories-queue.ts';
import { b64, createSignableEvent, makePng } from './factories-signature.ts';
import { createUser } from './factories.ts';
import type { TestApp, TestDatabase } from './harness.ts';
import { createTestDatabase, forEachDialect, startTestApp } from './harness.ts';
import { runCli } from './run-cli.ts';
import { until } from './until.ts';
import { createLogger } from '../src/logger.ts';
import { importDataset, loadDemoData } from '../src/modules/dataset/index.ts';
import { createQueueWorker } from '../src/modules/request-queue/index.ts';
import { defaultRoutineCatalog } from '../src/modules/filing/index.ts';
import { TABLE_NAMES } from '../src/modules/dataset/table-specs.ts';

type LooseDb = Record<string, Record<string, unknown>>;

async function emptyTables(db: Kysely<unknown>): Promise<string[]> {
  const loose = db as unknown as Kysely<LooseDb>;
  const empty: string[] = [];
  for (const table of TABLE_NAMES) {
    const row = await loose
      .selectFrom(table)
      .select((eb) => eb.fn.countAll<number>().as('count'))
      .executeTakeFirstOrThrow();
    if (Number(row.count) === 0) empty.push(table);
  }
  return empty;
}

forEachDialect((dialect) => {
  describe(`backup with export, restore with import into a new database (${dialect})`, () => {
    let app: TestApp;
    let target: TestDatabase;

    before(async () => {
      app = await startTestApp(dialect);
      target = await createTestDatabase(dialect);
    });
    after(async () => {
      await app.close();
      await target.drop();
    });

    /** The service used as it is in production: demo data, signatures, attachments, the queue, the CLI. */
    async function useEveryTable(): Promise<void> {
      await loadDemoData(app.deps);
      const user = await createUser(app.db);
      const event = await createSignableEvent(app.db);
      const signed = await app.request('/api/v1/sign/add', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          unique_identifier: event.code,
          extra_info: JSON.stringify({ e_id: event.elementId, e_t_id: event.esignElementTypeId }),
          image: b64(makePng(40, 30, { isNoisy: true })),
        }),
      });
      assert.equal(signed.status, 200, await signed.text());
      const created = await app.request('/api/v1/attachmentdisplay/create', {
        method: 'POST',
        headers: { authorization: user.authorization, 'content-type': 'image/png' },
        body: PNG_BYTES,
      });
      const createdText = await created.text();
      assert.equal(created.status, 200, createdText);
      const { id: attachmentId } = JSON.parse(createdText) as { id: number };
      const added = await app.request(`${ADD_PATH}?request_type=noop`, {
        method: 'POST',
        headers: { authorization: user.authorization, 'content-type': 'text/plain' },
        body: 'backup test',
      });
      const addedText = await added.text();
      assert.equal(added.status, 200, addedText);
      const { request_id: requestId } = JSON.parse(addedText) as { request_id: number };
      // The queue does work: routines complete and the queue's counters move (the seeded row changes).
      const worker = createQueueWorker({
        database: app.database,
        config: app.config,
        catalog: defaultRoutineCatalog,
        logger: createLogger('silent'),
      });
      await worker.start();
      try {
        await until(async () => (await routinesOf(app.db, requestId)).every((r) => r.status === 'COMPLETE'), {
          what: 'the queued routines complete',
        });
      } finally {
        await worker.stop();
      }
      assert.equal(
        (await runCli(app.env, ['role', 'grant', user.username, 'OprnApi'])).status,
        0,
        'the CLI adds an RBAC assignment',
      );
      // What the service never writes by itself gets a row too, so that every table is in the backup.
      const institution = await app.db.selectFrom('institution').select('id').executeTakeFirstOrThrow();
      const patient = await app.db
        .selectFrom('patient')
        .select(['id', 'contact_id'])
        .executeTakeFirstOrThrow();
      const country = await app.db.selectFrom('country').select('id').executeTakeFirstOrThrow();
      const addressType = await app.db.selectFrom('address_type').select('id').executeTakeFirstOrThrow();
      const identifierType = await app.db
        .selectFrom('patient_identifier_type')
        .select('id')
        .executeTakeFirstOrThrow();
      await importDataset(app, {
        format: 'clinical-records-dataset/1',
        tables: {
          site: [{ id: 900, institution_id: institution.id, name: 'Backup site' }],
          institution_authentication: [{ id: 900, institution_id: institution.id, site_id: 900 }],
          setting_institution: [{ id: 900, institution_id: institution.id, key: 'backup_test', value: 'x' }],
          setting_site: [{ id: 900, site_id: 900, key: 'backup_test', value: 'y' }],
          authitem: [{ name: 'Backup role', type: 2 }],
          authitemchild: [{ parent: 'Backup role', child: 'OprnApi' }],
          request_queue_lock: [{ request_queue: 'default_queue' }],
          request_routine_lock: [{ routine_lock: 'backup-test-lock' }],
          request_details: [{ id: 900, request_id: requestId, name: 'backup', value: 'test' }],
          event_attachment_group: [
            { id: 900, event_id: event.eventId, element_type_id: event.esignElementTypeId },
          ],
          event_attachment_item: [
            { id: 900, event_attachment_group_id: 900, attachment_data_id: attachmentId },
          ],
          contact: [
            { id: 901, first_name: 'A', last_name: 'Doctor' },
            { id: 902, first_name: '', last_name: 'Surgery' },
          ],
          address: [
            {
              id: 900,
              contact_id: patient.contact_id,
              address1: '1 Backup Street',
              postcode: 'LS1 1AA',
              country_id: country.id,
              address_type_id: addressType.id,
            },
          ],
          gp: [{ id: 900, obj_prof: 'G8123456', nat_id: 'G8123456', contact_id: 901 }],
          practice: [{ id: 900, code: 'B82001', phone: '0113 000 0000', contact_id: 902 }],
          contact_practice_associate: [{ id: 900, gp_id: 900, practice_id: 900 }],
          pasapi_assignment: [
            {
              id: 900,
              resource_type: 'Patient',
              resource_id: 'backup-1',
              internal_type: '\\Patient',
              internal_id: patient.id,
            },
          ],
          pasapi_xpath_remap: [
            { id: 900, name: 'Ethnic group', xpath: '/Patient/EthnicGroup', institution_id: institution.id },
          ],
          pasapi_remap_value: [{ id: 900, xpath_id: 900, input: 'AX', output: null }],
          patient_merge_request: [
            {
              id: 900,
              primary_id: patient.id,
              secondary_id: patient.id,
              primary_local_identifier_value: '1234567',
              secondary_local_identifier_value: '7654321',
              primary_dob: '1980-02-01',
              secondary_dob: '1980-02-01',
              status: 10,
            },
          ],
          worklist_definition: [
            {
              id: 900,
              name: 'Backup clinic',
              start_time: '08:00:00',
              end_time: '17:00:00',
              active_from: '2026-01-01 00:00:00',
              display_order: 1,
              patient_identifier_type_id: identifierType.id,
            },
          ],
          worklist_definition_mapping: [
            { id: 900, worklist_definition_id: 900, key: 'Clinic', display_order: 1 },
          ],
          worklist_definition_mapping_value: [
            { id: 900, worklist_definition_mapping_id: 900, mapping_value: 'EYE1' },
          ],
          worklist_definition_display_context: [
            { id: 900, worklist_definition_id: 900, institution_id: institution.id },
          ],
          worklist: [
            {
              id: 900,
              name: 'Backup clinic',
              start: '2026-12-02 08:00:00',
              end: '2026-12-02 17:00:00',
              worklist_definition_id: 900,
            },
          ],
          worklist_attribute: [{ id: 900, worklist_id: 900, name: 'Clinic', display_order: 1 }],
          worklist_patient: [
            { id: 900, worklist_id: 900, patient_id: patient.id, when: '2026-12-02 09:00:00' },
          ],
          worklist_patient_attribute: [
            { id: 900, worklist_attribute_id: 900, worklist_patient_id: 900, attribute_value: 'EYE1' },
          ],
        },
      });
      // An operator's change of a seeded setting, and of a queue.
      await app.db
        .updateTable('request_queue')
        .set({ maximum_active_threads: 7 })
        .where('request_queue', '=', 'dicom_queue')
        .execute();
    }

    it('restores every table into a new database, byte for byte, with the CLI commands of the README', async () => {
      await useEveryTable();
      assert.deepEqual(await emptyTables(app.db as Kysely<unknown>), [], 'the source uses every table');
      const dir = path.dirname(app.filesDir);
      const backup = path.join(dir, 'backup.json');
      const again = path.join(dir, 'again.json');

      const exported = await runCli(app.env, ['export', backup]);
      assert.equal(exported.status, 0, exported.stderr);
      const restored = await runCli(target.env, ['import', backup]);
      assert.equal(restored.status, 0, restored.stderr);
      assert.match(
        restored.stdout,
        /^Imported \d+ rows, updated \d+, \d+ already present; \d+ files written in \d+ s$/m,
      );

      const reexported = await runCli(target.env, ['export', again]);
      assert.equal(reexported.status, 0, reexported.stderr);
      assert.equal(await readFile(again, 'utf8'), await readFile(backup, 'utf8'));
      // The signature's file came back into the new file store.
      const file = await target.db.selectFrom('protected_file').select('uid').executeTakeFirstOrThrow();
      assert.deepEqual(await target.files.read(file.uid), await app.files.read(file.uid));
      // Importing the same backup again changes nothing.
      const twice = await runCli(target.env, ['import', backup]);
      assert.equal(twice.status, 0, twice.stderr);
      assert.match(twice.stdout, /^Imported 0 rows, updated 0, \d+ already present; 0 files written/m);
    });
  });
});
