/**
 * Biometry filing with DATABASE_SCHEMA=openeyes, against the OpenEyes v6.8-shaped database of this folder
 * (schema.sql with OphInBiometry's tables, seed.sql), on the account `openeyes grants` prints: the start-up
 * check accepts the biometry tables, an IOLMaster 500 object becomes a Biometry event in OpenEyes's own
 * tables, a second file of the study copies the rows it changes into their `_version` twins first, a
 * re-sent file changes nothing, and the IOLMaster 700 report joins the event.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { Config } from '../../src/config.ts';
import type { Database } from '../../src/db/database.ts';
import { createQueueEngine } from '../../src/modules/request-queue/index.ts';
import { defaultRoutineCatalog } from '../../src/modules/filing/index.ts';
import { iolMaster500, iolMaster700Report, iolMasterCalculations } from '../biometry-objects.ts';
import { newUid } from '../dicom-instances.ts';
import { basicHeader } from '../factories.ts';
import type { OpenEyesApp } from './openeyes-app.ts';
import { startOpenEyesApp } from './openeyes-app.ts';
import { testMysqlUrl } from './openeyes-database.ts';

const adminUrl = testMysqlUrl();
const skip = adminUrl === undefined ? 'TEST_MYSQL_URL is not set (no MariaDB/MySQL server)' : false;
const API = basicHeader('api', 'api-password');
/** The seed's patient 1: hospital number 0012345, born 1970-01-01, female. */
const PATIENT = { id: '0012345', dob: '19700101', sex: 'F' } as const;

const near = (actual: unknown, expected: number, label: string) =>
  assert.ok(Math.abs(Number(actual) - expected) < 0.005, `${label}: ${String(actual)} is not ${expected}`);

describe('Biometry filing on an OpenEyes v6.8-shaped database', { skip }, () => {
  let service: OpenEyesApp | undefined;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  let admin: Kysely<any>;
  let database: Database;
  let config: Config;
  let baseUrl: string;

  before(async () => {
    // The start-up check covers the biometry tables: it refuses to start when one does not fit.
    service = await startOpenEyesApp(adminUrl!, {
      tempPrefix: 'cra-oe-biometry-',
      settings: () => ({
        DATABASE_SCHEMA: 'openeyes',
        TIME_ZONE: 'Asia/Kolkata',
        RAW_BODY_LIMIT_BYTES: String(8 * 1024 * 1024),
        SIGN_RATE_LIMIT_PER_MINUTE: '0',
        AUTH_FAILURE_LIMIT_PER_MINUTE: '0',
        WORKER: 'off',
        DEMO_DATA: 'off',
        LOG_LEVEL: 'silent',
      }),
    });
    ({ admin, database, config, baseUrl } = service);
  });

  after(() => service?.close());

  /**
   * Queues `bytes` as a `dicom_request`, marks it for the biometry filer after DICOM_SEED (which chooses
   * the device profile), and drains.
   */
  async function file(bytes: Buffer): Promise<string[]> {
    const form = new FormData();
    form.append('scan', new Blob([new Uint8Array(bytes)], { type: 'application/dicom' }), 'scan.dcm');
    const queued = await fetch(`${baseUrl}/api/v1/request/queue/add?request_type=dicom_request`, {
      method: 'POST',
      headers: { authorization: API },
      body: form,
    });
    assert.equal(queued.status, 200, await queued.clone().text());
    const { request_id: requestId } = (await queued.json()) as { request_id: number };
    const engine = createQueueEngine({ database, config, catalog: defaultRoutineCatalog });
    const ran: string[] = [];
    const step = await engine.step();
    if (step.kind === 'ran') ran.push(`${step.routineName}:${step.status}`);
    const row = await admin
      .selectFrom('attachment_data')
      .select(['id', 'text_data'])
      .where('request_id', '=', requestId)
      .where('attachment_mnemonic', '=', 'REQUEST_DATA')
      .executeTakeFirstOrThrow();
    const data = JSON.parse(String(row.text_data)) as Record<string, unknown>;
    await admin
      .updateTable('attachment_data')
      .set({ text_data: JSON.stringify({ ...data, device_filer: 'biometry' }) })
      .where('id', '=', row.id)
      .execute();
    for (let i = 0; i < 20; i++) {
      const outcome = await engine.step();
      if (outcome.kind !== 'ran') break;
      ran.push(`${outcome.routineName}:${outcome.status}`);
    }
    await engine.flushCounters();
    return ran;
  }

  const tableRows = async (table: string, eventId: number) =>
    (await admin
      .selectFrom(table)
      .selectAll()
      .where('event_id', '=', eventId)
      .orderBy('id')
      .execute()) as Record<string, unknown>[];
  const count = async (table: string) =>
    Number(
      (await sql<{ n: number }>`select count(*) as n from ${sql.table(table)}`.execute(admin)).rows[0]!.n,
    );

  it('files an IOLMaster 500 object, merges a second file with versions kept, ignores a re-send, attaches the report', async () => {
    const study = {
      studyUid: newUid(),
      sopUid: newUid(),
      acquisition: '20240301103512',
      contentDate: '20240301',
      contentTime: '103000',
    };
    const leftOnly = await iolMaster500(PATIENT, study, { eyes: ['L'] });
    let ran = await file(leftOnly);
    assert.ok(ran.length > 0 && ran.every((r) => r.endsWith(':COMPLETE')), ran.join(', '));
    assert.ok(ran.includes('FILE_BIOMETRY:COMPLETE'), ran.join(', '));

    const imported = await admin.selectFrom('ophinbiometry_imported_events').selectAll().execute();
    assert.equal(imported.length, 1);
    assert.equal(imported[0]!.patient_id, 1);
    assert.equal(imported[0]!.study_id, study.studyUid);
    assert.equal(imported[0]!.is_linked, 0);
    const eventId = Number(imported[0]!.event_id);
    const event = await admin
      .selectFrom('event')
      .selectAll()
      .where('id', '=', eventId)
      .executeTakeFirstOrThrow();
    assert.equal(event.episode_id, null);
    assert.equal(event.event_type_id, 50);
    assert.equal(event.institution_id, 1);
    assert.equal(event.created_user_id, 1);
    // The device's local time, verbatim (not moved by the stored time zone).
    assert.equal(event.event_date, '2024-03-01 10:35:12');
    const [measurement] = await tableRows('et_ophinbiometry_measurement', eventId);
    assert.equal(measurement!.eye_id, 1);
    near(measurement!.axial_length_left, 24.12, 'left AL');
    assert.equal(measurement!.eye_status_left, -1);
    assert.equal(measurement!.eye_status_right, -1);
    assert.equal(await count('et_ophinbiometry_measurement_version'), 0);
    // The lens the list lacks is held for review: inactive, listed for no institution, in the service's
    // own review table.
    const newLens = await admin
      .selectFrom('ophinbiometry_lenstype_lens as l')
      .leftJoin('ophinbiometry_lenstype_lens_institution as li', 'li.lenstype_lens_id', 'l.id')
      .leftJoin('cra_biometry_lens_review as r', 'r.lenstype_lens_id', 'l.id')
      .select(['l.id', 'l.active', 'li.institution_id', 'r.request_id'])
      .where('l.name', '=', 'Acme Lens 9')
      .execute();
    assert.deepEqual(
      newLens.map((l): unknown[] => [Number(l.active), l.institution_id, typeof l.request_id]),
      [[0, null, 'number']],
    );

    // The right eye of the same study: the rows it changes are versioned first, as OpenEyes does.
    ran = await file(await iolMaster500(PATIENT, { ...study, sopUid: newUid() }, { eyes: ['R'] }));
    assert.ok(
      ran.every((r) => r.endsWith(':COMPLETE')),
      ran.join(', '),
    );
    assert.equal((await admin.selectFrom('ophinbiometry_imported_events').select('id').execute()).length, 1);
    const [merged] = await tableRows('et_ophinbiometry_measurement', eventId);
    assert.equal(merged!.eye_id, 3);
    near(merged!.axial_length_right, 23.45, 'right AL');
    near(merged!.axial_length_left, 24.12, 'left AL kept');
    const versions = await admin
      .selectFrom('et_ophinbiometry_measurement_version')
      .selectAll()
      .where('id', '=', Number(merged!.id))
      .execute();
    assert.equal(versions.length, 1);
    assert.equal(versions[0]!.eye_id, 1);
    near(versions[0]!.axial_length_right, 0, 'the previous version');
    assert.equal(await count('et_ophinbiometry_calculation_version'), 1);
    assert.ok((await count('event_version')) >= 1);

    // The same file again changes nothing.
    const before = JSON.stringify([
      await tableRows('et_ophinbiometry_measurement', eventId),
      await tableRows('et_ophinbiometry_iol_ref_values', eventId),
      await count('et_ophinbiometry_measurement_version'),
    ]);
    ran = await file(await iolMaster500(PATIENT, { ...study, sopUid: newUid() }, { eyes: ['R'] }));
    assert.ok(
      ran.every((r) => r.endsWith(':COMPLETE')),
      ran.join(', '),
    );
    assert.equal(
      JSON.stringify([
        await tableRows('et_ophinbiometry_measurement', eventId),
        await tableRows('et_ophinbiometry_iol_ref_values', eventId),
        await count('et_ophinbiometry_measurement_version'),
      ]),
      before,
    );

    // The IOLMaster 700 report of the study joins the event through its attachment element.
    ran = await file(await iolMaster700Report(PATIENT, study));
    assert.ok(
      ran.every((r) => r.endsWith(':COMPLETE')),
      ran.join(', '),
    );
    const reports = await admin
      .selectFrom('event_attachment_item as i')
      .innerJoin('event_attachment_group as g', 'g.id', 'i.event_attachment_group_id')
      .innerJoin('attachment_data as ad', 'ad.id', 'i.attachment_data_id')
      .select(['g.element_type_id', 'ad.attachment_type', 'ad.mime_type', 'i.event_document_view_set'])
      .where('g.event_id', '=', eventId)
      .where('ad.mime_type', '=', 'application/pdf')
      .execute();
    assert.deepEqual(reports, [
      {
        element_type_id: 53,
        attachment_type: 'Biometry Report',
        mime_type: 'application/pdf',
        event_document_view_set: null,
      },
    ]);
    assert.equal((await tableRows('et_ophgeneric_attachment', eventId)).length, 1);
  });

  it("cuts a lens name longer than OpenEyes's varchar(128) to the column, so that strict mode never refuses it and a re-send finds the same lens", async () => {
    const long = `Long ${'L'.repeat(195)}`;
    const study = { studyUid: newUid(), acquisition: '20240302103512' };
    const lensRows = () =>
      admin
        .selectFrom('ophinbiometry_lenstype_lens')
        .select(['id', 'name'])
        .where('name', 'like', 'Long L%')
        .execute();
    let ran = await file(
      await iolMasterCalculations(PATIENT, { ...study, sopUid: newUid() }, { lensNames: [long] }),
    );
    assert.ok(ran.includes('FILE_BIOMETRY:COMPLETE'), ran.join(', '));
    const [lens, ...others] = await lensRows();
    assert.equal(others.length, 0);
    assert.equal(lens!.name, long.slice(0, 128));
    const logs = await admin
      .selectFrom('request_routine_execution')
      .select('log_text')
      .where('log_text', 'like', '%ophinbiometry_lenstype_lens.name: 200 characters cut to the column%')
      .execute();
    assert.equal(logs.length, 1, 'the cut is logged, with lengths only');

    ran = await file(
      await iolMasterCalculations(PATIENT, { ...study, sopUid: newUid() }, { lensNames: [long] }),
    );
    assert.ok(ran.includes('FILE_BIOMETRY:COMPLETE'), ran.join(', '));
    assert.deepEqual(await lensRows(), [lens], 'the re-sent file finds the cut lens, no second one');
  });

  it("refuses a number beyond OpenEyes's decimal(6,2) column at once, with the column named, so that strict mode never fails the batch", async () => {
    const tables = ['event', 'ophinbiometry_imported_events', 'et_ophinbiometry_measurement'];
    const before = await Promise.all(tables.map(count));
    const ran = await file(
      await iolMasterCalculations(
        PATIENT,
        { studyUid: newUid(), sopUid: newUid(), acquisition: '20240303103512' },
        { lensNames: ['SN60WF'], axialLengthMm: 123456.5 },
      ),
    );
    assert.equal(ran.at(-1), 'FILE_BIOMETRY:FAILED', ran.join(', '));
    const logs = await admin
      .selectFrom('request_routine_execution')
      .select('log_text')
      .where(
        'log_text',
        'like',
        "%Biometry file refused: et_ophinbiometry_measurement.axial_length_right would be a value outside the column's range (-9999.99 to 9999.99)%",
      )
      .execute();
    assert.equal(logs.length, 1, 'the refusal is logged with the range, not the value');
    assert.doesNotMatch(String(logs[0]!.log_text), /123456/);
    assert.deepEqual(await Promise.all(tables.map(count)), before, 'nothing written');
  });
});
