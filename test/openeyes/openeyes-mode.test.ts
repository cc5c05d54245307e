/**
 * DATABASE_SCHEMA=openeyes against an OpenEyes v6.8-shaped database (schema.sql and seed.sql beside this
 * file) on the test MariaDB/MySQL server: the real start-up (migrations of the `cra_` tables, the schema
 * check, routine registration), then the endpoints as OpenEyes's own users and screens would see them,
 * the queue worker to COMPLETE, and finally the proof that no OpenEyes table's schema changed.
 *
 * The stored time zone is Asia/Kolkata (UTC+05:30 all year), so that a date-time written in UTC instead
 * of local time cannot pass.
 */
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { Config } from '../../src/config.ts';
import type { Database } from '../../src/db/database.ts';
import type { MigrationOutcome } from '../../src/db/migrate.ts';
import { QueueHeldElsewhereError } from '../../src/db/openeyes/queue-guard.ts';
import type { Bootstrapped } from '../../src/main/bootstrap.ts';
import { createQueueEngine, createQueueWorker } from '../../src/modules/request-queue/index.ts';
import { defaultRoutineCatalog } from '../../src/modules/filing/index.ts';
import { ENCAPSULATED_PDF, buildDeviceObject, humphreyPrivateLines } from '../device-objects.ts';
import { newUid } from '../dicom-instances.ts';
import { basicHeader } from '../factories.ts';
import { b64, makePng } from '../factories-signature.ts';
import { runCli } from '../run-cli.ts';
import type { OpenEyesApp } from './openeyes-app.ts';
import { startOpenEyesApp } from './openeyes-app.ts';
import type { OpenEyesTestDatabase } from './openeyes-database.ts';
import { connectForScripts, createOpenEyesDatabase, openKysely, testMysqlUrl } from './openeyes-database.ts';

const adminUrl = testMysqlUrl();
const skip = adminUrl === undefined ? 'TEST_MYSQL_URL is not set (no MariaDB/MySQL server)' : false;
const TIME_ZONE = 'Asia/Kolkata';
const SERVER = path.resolve(import.meta.dirname, '../../src/main/server.ts');

const API = basicHeader('api', 'api-password');

/** `YYYY-MM-DD HH:MM:SS` of `date` in Asia/Kolkata (UTC+05:30, no daylight saving). */
function kolkata(date: Date): string {
  return new Date(date.getTime() + 330 * 60_000).toISOString().slice(0, 19).replace('T', ' ');
}

/** True when the stored local time `text` is within two minutes of now. */
function isNow(text: string): boolean {
  const now = Date.now();
  const earliest = kolkata(new Date(now - 120_000));
  const latest = kolkata(new Date(now + 120_000));
  return text >= earliest && text <= latest;
}

/**
 * Everything `information_schema` says about the schema of OpenEyes's tables (every table but the
 * service's `cra_` ones): tables, columns, indexes, constraints, foreign keys and triggers, as text.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function openEyesSchemaOf(db: Kysely<any>): Promise<string> {
  const own = sql`not like 'cra\\_%'`;
  const queries = [
    sql`select table_name, table_type, engine, row_format, table_collation, create_options, table_comment
      from information_schema.tables where table_schema = database() and table_name ${own} order by table_name`,
    sql`select table_name, column_name, ordinal_position, column_default, is_nullable, column_type,
        character_set_name, collation_name, column_key, extra, generation_expression, column_comment
      from information_schema.columns where table_schema = database() and table_name ${own}
      order by table_name, ordinal_position`,
    sql`select table_name, index_name, non_unique, seq_in_index, column_name, sub_part, index_type
      from information_schema.statistics where table_schema = database() and table_name ${own}
      order by table_name, index_name, seq_in_index`,
    sql`select table_name, constraint_name, constraint_type from information_schema.table_constraints
      where table_schema = database() and table_name ${own} order by table_name, constraint_name`,
    sql`select table_name, constraint_name, column_name, ordinal_position, referenced_table_name,
        referenced_column_name
      from information_schema.key_column_usage where table_schema = database() and table_name ${own}
      order by table_name, constraint_name, ordinal_position`,
    sql`select table_name, constraint_name, update_rule, delete_rule, referenced_table_name
      from information_schema.referential_constraints where constraint_schema = database()
        and table_name ${own} order by table_name, constraint_name`,
    sql`select trigger_name, event_object_table, action_timing, event_manipulation, action_statement
      from information_schema.triggers where trigger_schema = database() and event_object_table ${own}
      order by trigger_name`,
  ];
  const parts: string[] = [];
  for (const query of queries) parts.push(JSON.stringify((await query.execute(db)).rows));
  return parts.join('\n');
}

describe('DATABASE_SCHEMA=openeyes on an OpenEyes v6.8-shaped database', { skip }, () => {
  let service: OpenEyesApp | undefined;
  let oe: OpenEyesTestDatabase;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  let admin: Kysely<any>;
  let schemaBefore: string;
  let booted: Bootstrapped;
  let database: Database;
  let config: Config;
  let baseUrl: string;
  let filesDir: string;
  let env: Record<string, string>;
  let adminMigrations: MigrationOutcome;
  let account: string;
  let printedGrants: string;

  const request = (pathAndQuery: string, init?: RequestInit) => fetch(`${baseUrl}${pathAndQuery}`, init);
  const search = (term: string, authorization = API) =>
    request(`/api/v1/patient/search?term=${encodeURIComponent(term)}`, { headers: { authorization } });

  before(async () => {
    // The site's administrator creates the cra_ tables with an account that may, then gives the
    // service's account what `openeyes grants` prints, and nothing more: every test below runs on it.
    service = await startOpenEyesApp(adminUrl!, {
      tempPrefix: 'cra-oe-files-',
      prepare: async (oeAdmin) => {
        schemaBefore = await openEyesSchemaOf(oeAdmin);
      },
      settings: () => ({
        DATABASE_SCHEMA: 'openeyes',
        TIME_ZONE,
        // Below the test server's max_allowed_packet (16 MiB by default), which the start-up checks.
        RAW_BODY_LIMIT_BYTES: String(8 * 1024 * 1024),
        SIGN_RATE_LIMIT_PER_MINUTE: '0',
        AUTH_FAILURE_LIMIT_PER_MINUTE: '0',
        WORKER: 'off',
        DEMO_DATA: 'off',
        LOG_LEVEL: 'silent',
      }),
    });
    ({
      oe,
      admin,
      booted,
      database,
      config,
      baseUrl,
      filesDir,
      env,
      migrations: adminMigrations,
      account,
      grants: printedGrants,
    } = service);
  });

  after(() => service?.close());

  it('starts by creating only its cra_ tables and registering its routine names, as the Java processor does', async () => {
    assert.deepEqual(adminMigrations.applied, [
      '0001-service-tables',
      '0002-dicom-received-instances',
      '0003-console-session-credential',
      '0004-device-events',
      '0005-biometry-lens-review',
      '0005-worklist-entry-ids',
      '0006-dicom-instance-index',
      '0007-hl7-messages',
      '0008-dicom-query-keys',
      '0009-hl7-message-text',
    ]);
    assert.deepEqual(booted.migrations.applied, []);
    const { rows: tables } = await sql<{ name: string }>`
      select table_name as name from information_schema.tables
      where table_schema = database() and table_name like 'cra\\_%' order by table_name`.execute(admin);
    assert.deepEqual(
      tables.map((t) => t.name),
      [
        'cra_attachment_data_digest',
        'cra_audit_event',
        'cra_biometry_lens_review',
        'cra_console_secret',
        'cra_console_session',
        'cra_device_event',
        'cra_dicom_instance_index',
        'cra_dicom_received_instance',
        'cra_hl7_message',
        'cra_migration',
        'cra_migration_lock',
        'cra_mwl_entry',
        'cra_rate_limit_counter',
        'cra_request_routine_attempt',
      ],
    );
    const { rows } = await sql<{ routine_name: string; hash_code: number | null }>`
      select routine_name, hash_code from routine_library order by routine_name`.execute(admin);
    const byName = new Map(rows.map((r) => [r.routine_name, r.hash_code]));
    // The seed's rows are left as they were; the service's are added with a 32-bit hash.
    assert.equal(byName.get('DICOM_SEED'), null);
    for (const name of [
      'PATIENT_MATCH',
      'DEVICE_PROFILE',
      'MAKE_THUMBNAILS',
      'ATTACH_TO_EVENT',
      'CLEAN_UP',
      'NOOP',
    ]) {
      const hash = byName.get(name);
      assert.ok(typeof hash === 'number' && Number.isInteger(hash) && Math.abs(hash) < 2 ** 31, name);
    }
  });

  it('logs in OpenEyes accounts: a $2y$ hash with an empty salt and OprnApi through API access', async () => {
    assert.equal((await search('smith')).status, 200);
    // A login without OprnApi (role User only) is forbidden, a deactivated one and a wrong password are not let in.
    const clinician = await search('smith', basicHeader('clinician', 'clinician-password'));
    assert.equal(clinician.status, 403);
    assert.equal(await clinician.json(), '403 Forbidden');
    assert.equal((await search('smith', basicHeader('disabled', 'disabled-password'))).status, 401);
    assert.equal((await search('smith', basicHeader('api', 'wrong'))).status, 401);
  });

  it('searches OpenEyes patients by name under its collations and by padded identifier', async () => {
    const ids = async (term: string) => {
      const response = await search(term);
      assert.equal(response.status, 200);
      return ((await response.json()) as { id: number; first_name: string }[]).map((p) => p.id);
    };
    // Patient 4 (Removed Smith) is deleted; patient 3 (John Smith) is deceased and still found.
    assert.deepEqual((await ids('smith')).sort(), [1, 3]);
    // utf8_general_ci: Zoë equals Zoe; Ø is not O.
    assert.deepEqual(await ids("o'brien, zoe"), [2]);
    assert.deepEqual(await ids('olsen, oyvind'), []);
    assert.deepEqual(await ids('olsen, øyv'), [5]);
    // The hospital number without its padding, the NHS number with spaces.
    assert.deepEqual(await ids('12345'), [1]);
    assert.deepEqual(await ids('450 557 7104'), [1]);
  });

  it('signs a CVI event as OpenEyes reads it: signature, protected file on disk, versioned event info, local time', async () => {
    const png = makePng(6, 4);
    const response = await request('/api/v1/sign/add', {
      method: 'POST',
      body: JSON.stringify({
        unique_identifier: 'abc234',
        extra_info: JSON.stringify({ e_id: 1, e_t_id: 1 }),
        image: b64(png),
      }),
    });
    assert.equal(response.status, 200);
    assert.equal(await response.json(), 'Correct signature saved!');

    const signature = await admin
      .selectFrom('ophcocvi_signature as s')
      .innerJoin('protected_file as f', 'f.id', 's.signature_file_id')
      .select([
        's.element_id',
        's.type',
        's.status',
        's.signatory_role',
        's.signatory_name',
        's.timestamp',
        's.signed_user_id',
        's.created_user_id',
        's.created_date',
        'f.uid',
        'f.mimetype',
        'f.size',
        'f.name',
      ])
      .where('s.element_id', '=', 1)
      .executeTakeFirstOrThrow();
    assert.equal(signature.type, 3);
    assert.equal(signature.status, 1);
    assert.equal(signature.signatory_role, 'Patient');
    assert.equal(signature.signatory_name, 'Jane Smith');
    assert.equal(signature.signed_user_id, null);
    assert.equal(signature.created_user_id, 1);
    assert.ok(Number.isInteger(signature.timestamp) && signature.timestamp % 60 === 0);
    assert.ok(isNow(signature.created_date), `created_date ${signature.created_date} is local time`);
    assert.equal(signature.mimetype, 'image/png');
    assert.equal(signature.size, String(png.length));
    assert.match(signature.name, /^sign_1_\d+_[0-9a-f]{40}\.png$/);
    // OpenEyes's protected file layout: <root>/<uid[0]>/<uid[1]>/<uid[2]>/<uid>.
    const uid = signature.uid as string;
    assert.deepEqual(await readFile(path.join(filesDir, uid[0]!, uid[1]!, uid[2]!, uid)), png);

    const event = await admin
      .selectFrom('event')
      .select(['info', 'last_modified_user_id', 'last_modified_date'])
      .where('id', '=', 1)
      .executeTakeFirstOrThrow();
    assert.equal(event.info, 'Incomplete/Missing: Clinical');
    assert.equal(event.last_modified_user_id, 1);
    assert.ok(isNow(event.last_modified_date));
    // The previous version of the event, as OpenEyes's history reads it.
    const versions = await admin
      .selectFrom('event_version')
      .select(['id', 'info', 'last_modified_user_id', 'version_date'])
      .where('id', '=', 1)
      .execute();
    assert.equal(versions.length, 1);
    assert.equal(versions[0]!.info, 'Incomplete/Missing: Clinical, Consent signature');
    assert.equal(versions[0]!.last_modified_user_id, 3);
    assert.ok(isNow(versions[0]!.version_date));

    const log = await admin
      .selectFrom('signature_import_log')
      .selectAll()
      .orderBy('id', 'desc')
      .executeTakeFirstOrThrow();
    assert.equal(log.status_id, 4);
    assert.equal(log.event_id, 1);
    assert.ok(isNow(log.import_datetime), `import_datetime ${log.import_datetime} is local time`);
  });

  it('creates an attachment on an event and serves it back, with Last-Modified from the local time', async () => {
    const png = makePng(5, 5);
    const created = await request('/api/v1/attachmentdisplay/create?event_id=1&element_type_id=2', {
      method: 'POST',
      headers: { authorization: API, 'content-type': 'image/png' },
      body: png,
    });
    assert.equal(created.status, 200, await created.clone().text());
    const { id } = (await created.json()) as { id: number };
    const row = await admin
      .selectFrom('attachment_data as ad')
      .innerJoin('request as r', 'r.id', 'ad.request_id')
      .select([
        'r.request_type',
        'r.created_user_id as request_user',
        'ad.system_only_managed',
        'ad.created_user_id',
        'ad.last_modified_date',
      ])
      .where('ad.id', '=', id)
      .executeTakeFirstOrThrow();
    // The site's request type (DEFAULT_REQUEST_TYPE): the service adds none to OpenEyes.
    assert.equal(row.request_type, 'dicom_request');
    assert.equal(row.request_user, 2);
    assert.equal(row.created_user_id, 2);
    assert.equal(row.system_only_managed, 0);
    assert.ok(isNow(row.last_modified_date));
    const linked = await admin
      .selectFrom('event_attachment_item as i')
      .innerJoin('event_attachment_group as g', 'g.id', 'i.event_attachment_group_id')
      .select(['g.event_id', 'g.element_type_id', 'g.created_user_id'])
      .where('i.attachment_data_id', '=', id)
      .executeTakeFirstOrThrow();
    assert.deepEqual(linked, { event_id: 1, element_type_id: 2, created_user_id: 2 });

    const view = await request(`/api/v1/attachmentdisplay/view?id=${id}`, {
      headers: { authorization: API },
    });
    assert.equal(view.status, 200);
    assert.deepEqual(Buffer.from(await view.arrayBuffer()), png);
    const stored = row.last_modified_date as string;
    const utc = new Date(Date.parse(`${stored.replace(' ', 'T')}+05:30`));
    assert.equal(view.headers.get('last-modified'), utc.toUTCString());
    // The digest lives in the service's own table.
    const digest = await sql<{ n: number }>`
      select count(*) as n from cra_attachment_data_digest where attachment_data_id = ${id}`.execute(admin);
    assert.equal(Number(digest.rows[0]!.n), 1);
  });

  it('refuses text that utf8 (utf8mb3) cannot hold with a 422 before writing anything', async () => {
    const count = async () =>
      Number((await sql<{ n: number }>`select count(*) as n from request`.execute(admin)).rows[0]!.n);
    const before = await count();
    const queued = await request('/api/v1/request/queue/add?request_type=dicom_request', {
      method: 'POST',
      headers: { authorization: API, 'content-type': 'application/json' },
      body: JSON.stringify({ data: { note: 'eye \u{1F441} check' } }),
    });
    assert.equal(queued.status, 422);
    const body = (await queued.json()) as { success: number; message: Record<string, string> };
    assert.equal(body.success, 0);
    assert.match(body.message.data ?? '', /character the database cannot store/);
    const upload = new FormData();
    upload.append('file', new Blob([new Uint8Array(makePng())], { type: 'image/png' }), 'scan \u{1F600}.png');
    const created = await request('/api/v1/attachmentdisplay/create', {
      method: 'POST',
      headers: { authorization: API },
      body: upload,
    });
    assert.equal(created.status, 422);
    assert.equal(await count(), before);
  });

  it('queues a submission and runs its routines to COMPLETE, filing it on a new OpenEyes event', async () => {
    // The site's administrator configures the request type (the service adds none).
    await sql`insert into request_type (request_type, title_full, title_short, default_routine_name, default_request_queue)
      values ('form_data', 'Form data', 'Form data', 'PATIENT_MATCH', 'dicom_queue')`.execute(admin);
    const form = new FormData();
    form.append('identifier', '0012345');
    form.append('dob', '1970-01-01');
    form.append('sex', 'F');
    form.append(
      'scan',
      new Blob([new Uint8Array(makePng(40, 30, { isNoisy: true }))], { type: 'image/png' }),
      'scan.png',
    );
    const queued = await request('/api/v1/request/queue/add?request_type=form_data', {
      method: 'POST',
      headers: { authorization: API },
      body: form,
    });
    assert.equal(queued.status, 200, await queued.clone().text());
    const { request_id: requestId } = (await queued.json()) as { request_id: number };

    const engine = createQueueEngine({ database, config, catalog: defaultRoutineCatalog });
    const ran: string[] = [];
    for (let i = 0; i < 20; i++) {
      const outcome = await engine.step();
      if (outcome.kind !== 'ran') break;
      ran.push(`${outcome.routineName}:${outcome.status}`);
    }
    await engine.flushCounters();
    assert.ok(ran.length > 0 && ran.every((r) => r.endsWith(':COMPLETE')), ran.join(', '));
    const routines = await admin
      .selectFrom('request_routine')
      .select(['routine_name', 'status'])
      .where('request_id', '=', requestId)
      .orderBy('execute_sequence')
      .execute();
    assert.ok(
      routines.every((r) => r.status === 'COMPLETE'),
      JSON.stringify(routines),
    );
    assert.ok(routines.some((r) => r.routine_name === 'ATTACH_TO_EVENT'));
    const executions = await admin
      .selectFrom('request_routine_execution as x')
      .innerJoin('request_routine as rr', 'rr.id', 'x.request_routine_id')
      .select(['x.execution_date_time'])
      .where('rr.request_id', '=', requestId)
      .execute();
    assert.ok(executions.every((x) => isNow(x.execution_date_time)));

    // The new event as OpenEyes needs it: its NOT NULL columns and audit columns, its attachment
    // element row, and the attachment group of that element.
    const details = await admin
      .selectFrom('request_details')
      .select(['name', 'value'])
      .where('request_id', '=', requestId)
      .execute();
    const eventId = Number(details.find((d) => d.name === 'event_id')?.value);
    assert.equal(Number(details.find((d) => d.name === 'matched_patient_id')?.value), 1);
    const event = await admin
      .selectFrom('event as e')
      .innerJoin('episode as ep', 'ep.id', 'e.episode_id')
      .select([
        'ep.patient_id',
        'e.event_type_id',
        'e.institution_id',
        'e.created_user_id',
        'e.is_automated',
        'e.event_date',
      ])
      .where('e.id', '=', eventId)
      .executeTakeFirstOrThrow();
    assert.deepEqual(
      { ...event, event_date: undefined },
      {
        patient_id: 1,
        event_type_id: 2,
        institution_id: 1,
        created_user_id: 1,
        is_automated: 1,
        event_date: undefined,
      },
    );
    assert.ok(isNow(event.event_date));
    const element = await admin
      .selectFrom('et_ophgeneric_attachment')
      .select('event_id')
      .where('event_id', '=', eventId)
      .execute();
    assert.equal(element.length, 1);
    const groups = await admin
      .selectFrom('event_attachment_group')
      .select('element_type_id')
      .where('event_id', '=', eventId)
      .execute();
    assert.deepEqual(groups, [{ element_type_id: 2 }]);
  });

  it('files Humphrey fields of both eyes on one OpenEyes event as OpenEyes reads it, with versions kept', async () => {
    // Patient 5 of the seed: hospital number 0054321, born 1990-12-12, male.
    const study = newUid();
    const field = (eye: 'L' | 'R', acquired: string, meanDeviation: string, vfi: string) =>
      buildDeviceObject({
        sopClassUid: ENCAPSULATED_PDF,
        studyInstanceUid: study,
        patient: { id: '0054321', birthDate: '19901212', sex: 'M' },
        modality: 'OPV',
        manufacturer: 'Carl Zeiss Meditec',
        model: 'HFA3 860',
        imageLaterality: eye,
        acquisitionDateTime: acquired,
        content: 'pdf',
        extraLines: humphreyPrivateLines({ meanDeviation, vfi }),
      });
    const engine = createQueueEngine({ database, config, catalog: defaultRoutineCatalog });
    const file = async (bytes: Buffer) => {
      const form = new FormData();
      form.append('scan', new Blob([new Uint8Array(bytes)], { type: 'application/dicom' }), 'field.dcm');
      const queued = await request('/api/v1/request/queue/add?request_type=dicom_request', {
        method: 'POST',
        headers: { authorization: API },
        body: form,
      });
      assert.equal(queued.status, 200, await queued.clone().text());
      const ran: string[] = [];
      for (let i = 0; i < 20; i++) {
        const outcome = await engine.step();
        if (outcome.kind !== 'ran') break;
        ran.push(`${outcome.routineName}:${outcome.status}`);
      }
      assert.ok(ran.length > 0 && ran.every((r) => r.endsWith(':COMPLETE')), ran.join(', '));
    };
    // Episodes the event must not go into: a discharged one and a change-tracker one.
    await sql`insert into episode (patient_id, firm_id, start_date, episode_status_id, change_tracker, created_user_id, last_modified_user_id)
      values (5, 1, '2024-02-01 10:00:00', 6, 0, 1, 1), (5, 1, '2024-02-02 10:00:00', 1, 1, 1, 1)`.execute(
      admin,
    );
    const closed = await admin.selectFrom('episode').select('id').where('patient_id', '=', 5).execute();
    const right = await field('R', '20240320093000', '-3.21', '96');
    await file(right);
    await file(await field('L', '20240320094500', '-12.4', '71'));
    await engine.flushCounters();

    const events = await admin
      .selectFrom('event as e')
      .innerJoin('episode as ep', 'ep.id', 'e.episode_id')
      .select(['e.id', 'e.event_date', 'e.institution_id', 'e.created_user_id', 'e.info', 'e.event_type_id'])
      .where('ep.patient_id', '=', 5)
      .execute();
    assert.equal(events.length, 1, 'one event for the study');
    const event = events[0]!;
    const { episode_id: episodeId } = await admin
      .selectFrom('event')
      .select('episode_id')
      .where('id', '=', event.id)
      .executeTakeFirstOrThrow();
    assert.ok(
      !closed.some((e) => e.id === episodeId),
      'a new episode, not a discharged or change-tracker one',
    );
    assert.deepEqual(
      { ...event, id: undefined },
      {
        id: undefined,
        event_date: '2024-03-20 09:30:00',
        institution_id: 1,
        created_user_id: 1,
        info: null,
        event_type_id: 2,
      },
    );
    const subtypes = await admin
      .selectFrom('event_subtype_item')
      .select('event_subtype')
      .where('event_id', '=', event.id)
      .execute();
    assert.deepEqual(subtypes, [{ event_subtype: 'Visual Field Images' }]);
    const information = await admin
      .selectFrom('et_ophgeneric_device_information')
      .select([
        'manufacturer',
        'modality',
        'study_instance_uid',
        'laterality',
        'image_laterality',
        'acquisition_date_time',
      ])
      .where('event_id', '=', event.id)
      .execute();
    assert.deepEqual(information, [
      {
        manufacturer: 'Carl Zeiss Meditec',
        modality: 'OPV',
        study_instance_uid: study,
        laterality: 'B',
        image_laterality: 'B',
        acquisition_date_time: '20240320093000',
      },
    ]);
    const elements = await admin
      .selectFrom('et_ophgeneric_hfa')
      .select(['id', 'eye_id'])
      .where('event_id', '=', event.id)
      .execute();
    assert.deepEqual(
      elements.map((e) => e.eye_id as number),
      [3],
    );
    const entries = await admin
      .selectFrom('ophgeneric_hfa_entry')
      .select(['eye_id', 'mean_deviation', 'visual_field_index'])
      .where('element_id', '=', elements[0]!.id)
      .orderBy('eye_id')
      .execute();
    assert.deepEqual(entries, [
      { eye_id: 1, mean_deviation: '-12.4', visual_field_index: '71' },
      { eye_id: 2, mean_deviation: '-3.21', visual_field_index: '96' },
    ]);
    assert.equal(
      (
        await admin
          .selectFrom('et_ophgeneric_attachment')
          .select('id')
          .where('event_id', '=', event.id)
          .execute()
      ).length,
      1,
    );
    assert.equal(
      (
        await admin
          .selectFrom('et_ophgeneric_comments')
          .select('id')
          .where('event_id', '=', event.id)
          .execute()
      ).length,
      1,
    );
    const sites = await admin
      .selectFrom('event_attachment_item as i')
      .innerJoin('event_attachment_group as g', 'g.id', 'i.event_attachment_group_id')
      .innerJoin('attachment_data as a', 'a.id', 'i.attachment_data_id')
      .select(['a.body_site_snomed_type', 'a.attachment_type'])
      .where('g.event_id', '=', event.id)
      .where('a.attachment_mnemonic', '=', 'DICOM_PDF')
      .orderBy('a.id')
      .execute();
    assert.deepEqual(sites, [
      { body_site_snomed_type: '18944008', attachment_type: 'Visual Field Images' },
      { body_site_snomed_type: '8966001', attachment_type: 'Visual Field Images' },
    ]);
    // OpenEyes's statistics trigger took both entries: the patient's age at the event, each eye's values.
    const points = await admin
      .selectFrom('patient_statistic_datapoint')
      .select(['stat_type_mnem', 'eye_id', 'x_value', 'y_value', 'event_id'])
      .where('patient_id', '=', 5)
      .orderBy('eye_id')
      .orderBy('stat_type_mnem')
      .execute();
    assert.deepEqual(
      points.map((p): unknown[] => [
        p.stat_type_mnem,
        p.eye_id,
        p.x_value,
        Number(Number(p.y_value).toFixed(2)),
        p.event_id,
      ]),
      [
        ['md', 1, 33, -12.4, event.id],
        ['vfi', 1, 33, 71, event.id],
        ['md', 2, 33, -3.21, event.id],
        ['vfi', 2, 33, 96, event.id],
      ],
    );
    // The rows changed by the second eye kept their previous versions, as OpenEyes's versioning does.
    const versions = async (table: string, id: number) =>
      admin.selectFrom(`${table}_version`).selectAll().where('id', '=', id).execute();
    assert.deepEqual(
      (await versions('et_ophgeneric_hfa', elements[0]!.id)).map((v) => v.eye_id as number),
      [2],
    );
    assert.equal((await versions('event', event.id)).length, 1);
    const informationId = (
      await admin
        .selectFrom('et_ophgeneric_device_information')
        .select('id')
        .where('event_id', '=', event.id)
        .executeTakeFirstOrThrow()
    ).id;
    assert.deepEqual(
      (await versions('et_ophgeneric_device_information', informationId)).map(
        (v) => v.image_laterality as string,
      ),
      ['R'],
    );
    const index = await admin
      .selectFrom('cra_device_event')
      .select(['patient_id', 'event_id', 'eye_id'])
      .execute();
    assert.deepEqual(index, [{ patient_id: 5, event_id: event.id, eye_id: 3 }]);

    // The same file again changes nothing.
    const before = JSON.stringify([
      await admin.selectFrom('event').selectAll().where('id', '=', event.id).execute(),
      await admin.selectFrom('ophgeneric_hfa_entry').selectAll().orderBy('id').execute(),
      await admin.selectFrom('event_attachment_item').select('id').orderBy('id').execute(),
    ]);
    await file(right);
    const after = JSON.stringify([
      await admin.selectFrom('event').selectAll().where('id', '=', event.id).execute(),
      await admin.selectFrom('ophgeneric_hfa_entry').selectAll().orderBy('id').execute(),
      await admin.selectFrom('event_attachment_item').select('id').orderBy('id').execute(),
    ]);
    assert.equal(after, before);
  });

  it("refuses to serve a queue that another engine holds, and holds it against OpenEyes's Java processor", async () => {
    const java = await connectForScripts(oe.url);
    try {
      // The Java processor holds its queue's lock row for its life.
      await java.query("insert ignore into request_queue_lock (request_queue) values ('dicom_queue')");
      await java.query('start transaction');
      await java.query(
        "select * from request_queue_lock where request_queue = 'dicom_queue' for update nowait",
      );
      const worker = createQueueWorker({
        database,
        config: { ...config, workerQueues: ['dicom_queue'] },
        catalog: defaultRoutineCatalog,
      });
      await assert.rejects(worker.start(), QueueHeldElsewhereError);
      await java.query('rollback');

      // Started first, the service's worker keeps the Java processor out.
      await worker.start();
      try {
        await java.query('start transaction');
        await assert.rejects(
          java.query(
            "select * from request_queue_lock where request_queue = 'dicom_queue' for update nowait",
          ),
          (error: { errno?: number }) => error.errno === 1205 || error.errno === 3572,
        );
        await java.query('rollback');
      } finally {
        await worker.stop();
      }
    } finally {
      await java.end();
    }
  });

  it("prints grants that read OpenEyes's tables and write only those it writes, and never change a schema", () => {
    const lines = printedGrants.trim().split('\n');
    const on = (table: string) => `ON \`${oe.name}\`.\`${table}\` TO '${account}'@'127.0.0.1';`;
    assert.ok(lines.every((line) => line.startsWith('GRANT ')));
    // The PAS endpoint writes patients (never deletes them).
    assert.ok(lines.includes(`GRANT SELECT, INSERT, UPDATE ${on('patient')}`));
    assert.ok(lines.includes(`GRANT SELECT ${on('patient_identifier_type')}`));
    assert.ok(lines.includes(`GRANT SELECT ${on('user_authentication')}`));
    assert.ok(lines.includes(`GRANT SELECT, INSERT, UPDATE ${on('event')}`));
    assert.ok(lines.includes(`GRANT INSERT ${on('event_version')}`));
    assert.ok(lines.includes(`GRANT SELECT, INSERT, DELETE ${on('request_details')}`));
    assert.ok(lines.includes(`GRANT SELECT, INSERT, UPDATE, DELETE ${on('cra_audit_event')}`));
    assert.ok(
      lines.every((line) => !/\b(CREATE|ALTER|DROP|INDEX|ALL|TRIGGER|GRANT OPTION)\b/.test(line.slice(6))),
    );
  });

  it('has the CLI refuse the account changes and dataset commands, and check the database', async () => {
    const accountRows = async () =>
      JSON.stringify(
        await sql`select a.username, a.active, a.password_hash, s.itemname from user_authentication a
          left join authassignment s on s.userid = a.user_id order by a.id, s.itemname`.execute(admin),
      );
    const accountsBefore = await accountRows();
    for (const command of [
      ['user', 'create', 'newcomer', '--password', 'a-long-enough-password'],
      ['user', 'disable', 'api'],
      ['user', 'enable', 'disabled'],
      ['user', 'password', 'api', '--password', 'another-long-password'],
      ['role', 'grant', 'clinician', 'OprnApi'],
      ['role', 'revoke', 'api', 'API access'],
    ]) {
      const result = await runCli(env, command);
      assert.equal(result.status, 2, command.join(' '));
      assert.match(result.stderr, /OpenEyes manages its users and roles/, command.join(' '));
    }
    assert.equal(await accountRows(), accountsBefore);
    // Reading is harmless: who holds which OpenEyes role, on OpenEyes's own tables (userid an integer).
    const users = await runCli(env, ['user', 'list']);
    assert.equal(users.status, 0, users.stderr);
    const userLines = users.stdout.trim().split('\n');
    assert.equal(userLines[0], 'username\tuser_id\tactive\titems\tlast_activity\tpassword_changed');
    const userLine = (name: string) => userLines.find((l) => l.startsWith(`${name}\t`))?.split('\t');
    assert.deepEqual(userLine('api')?.slice(0, 4), ['api', '2', 'yes', 'API access,User']);
    assert.deepEqual(userLine('clinician')?.slice(0, 4), ['clinician', '3', 'yes', 'User']);
    assert.deepEqual(userLine('disabled')?.slice(0, 4), ['disabled', '4', 'no', 'API access,User']);
    assert.doesNotMatch(users.stdout, /\$2[aby]\$/, 'no password hash is printed');
    const holders = await runCli(env, ['role', 'list', 'OprnApi']);
    assert.equal(holders.status, 0, holders.stderr);
    assert.deepEqual(holders.stdout.trim().split('\n'), [
      'item\tkind\tusername\tuser_id\tactive\tthrough',
      'OprnApi\toperation\tapi\t2\tyes\tAPI access',
      'OprnApi\toperation\tdisabled\t4\tno\tAPI access',
    ]);
    const all = await runCli(env, ['role', 'list']);
    assert.equal(all.status, 0, all.stderr);
    assert.match(all.stdout, /^Edit Payload Processor\trole\t-\t-\t-\t-$/m);
    assert.equal(await accountRows(), accountsBefore);
    const exported = await runCli(env, ['export', path.join(filesDir, 'x.json')]);
    assert.equal(exported.status, 2);
    const demoCodes = await runCli(env, ['demo', 'codes']);
    assert.equal(demoCodes.status, 2);
    assert.match(demoCodes.stderr, /on an OpenEyes database \(DATABASE_SCHEMA=openeyes\) OpenEyes owns/);
    const check = await runCli(env, ['openeyes', 'check']);
    assert.equal(check.status, 0, check.stderr);
    assert.match(check.stdout, /every table and column the service uses is present and compatible/);
  });

  it('leaves the schema of every OpenEyes table exactly as it was (information_schema)', async () => {
    assert.equal(await openEyesSchemaOf(admin), schemaBefore);
  });

  it('prints the DDL of the indexes its queries use that the database lacks, which an administrator can run', async () => {
    const suggested = await runCli(env, ['openeyes', 'suggest-indexes']);
    assert.equal(suggested.status, 0, suggested.stderr);
    const ddl = suggested.stdout.split('\n').filter((line) => line.startsWith('ALTER TABLE'));
    // The v6.8 schema serves identifier search and the foreign keys; these seven it lacks.
    assert.deepEqual(ddl.map((line) => /ADD INDEX `(\w+)`/.exec(line)?.[1]).sort(), [
      'cra_contact_first_name',
      'cra_contact_last_first_name',
      'cra_request_routine_claim',
      'cra_request_routine_request_sequence',
      'cra_signature_import_log_filename',
      'cra_unique_codes_code',
      'cra_user_authentication_username',
    ]);
    // The service's account may not run them (no ALTER or INDEX privilege); the administrator can.
    const connection = await connectForScripts(oe.url);
    try {
      await connection.query(suggested.stdout);
    } finally {
      await connection.end();
    }
    const again = await runCli(env, ['openeyes', 'suggest-indexes']);
    assert.equal(again.status, 0, again.stderr);
    assert.match(again.stdout, /has every index the service's queries use/);
    assert.equal((await search('smith')).status, 200);
  });
});

describe(
  'DATABASE_SCHEMA=openeyes start-up on a database that lacks what the service needs',
  { skip },
  () => {
    let oe: OpenEyesTestDatabase;
    before(async () => {
      oe = await createOpenEyesDatabase(adminUrl!);
      const connection = await connectForScripts(oe.url);
      try {
        await connection.query('alter table patient drop column dob');
        await connection.query("delete from request_type where request_type = 'dicom_request'");
      } finally {
        await connection.end();
      }
    });
    after(() => oe?.drop());

    it('refuses to start with one message listing every problem, exit status 2, and changes nothing', async () => {
      const result = spawnSync(process.execPath, ['--disable-warning=ExperimentalWarning', SERVER], {
        env: {
          ...process.env,
          DATABASE_URL: oe.url,
          DATABASE_SCHEMA: 'openeyes',
          RAW_BODY_LIMIT_BYTES: String(8 * 1024 * 1024),
          LOG_LEVEL: 'silent',
          PORT: '0',
        },
        encoding: 'utf8',
      });
      assert.equal(result.status, 2, result.stderr);
      assert.match(result.stderr, /^OpenEyes database cra_oe_\w+ cannot be served: 2 problems\n/);
      assert.match(result.stderr, /\n {2}- column patient\.dob is missing\n/);
      assert.match(
        result.stderr,
        /\n {2}- request type dicom_request \(DEFAULT_REQUEST_TYPE\) is not in request_type/,
      );
      assert.doesNotMatch(result.stderr, /\n\s+at /, 'no stack trace');
      // `openeyes check` prints the same report, changing nothing either.
      const check = await runCli(
        { DATABASE_URL: oe.url, DATABASE_SCHEMA: 'openeyes', RAW_BODY_LIMIT_BYTES: String(8 * 1024 * 1024) },
        ['openeyes', 'check'],
      );
      assert.equal(check.status, 2);
      assert.match(check.stdout, /cannot be served: 2 problems\n/);
      assert.match(check.stdout, /\n {2}- column patient\.dob is missing\n/);
      const db = openKysely(oe.url);
      try {
        const { rows } = await sql<{ n: number }>`
        select count(*) as n from information_schema.tables
        where table_schema = database() and table_name like 'cra\\_%'`.execute(db);
        assert.equal(Number(rows[0]!.n), 0, 'no table of the service was created');
      } finally {
        await db.destroy();
      }
    });
  },
);
