/**
 * The PAS query on an OpenEyes database (`DATABASE_SCHEMA=openeyes`, MariaDB/MySQL, the tables of
 * schema.sql and the built-in field map: `PAS` numbers at `LOCAL-1-0`), against a PAS peer on 127.0.0.1
 * (test/pas-peer.ts): a PATIENT_MATCH request for a number only the PAS knows is matched in one step,
 * the patient's rows are those the same ADT^A28 through the listener writes, its audit row is in
 * `cra_audit_event`; a search by the number answers it; an NF answer stores nothing and leaves the
 * request waiting.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Hl7Message } from '@medplum/core';
import { Hl7Client } from '@medplum/hl7';
import type { Kysely } from 'kysely';
import type { Config } from '../../src/config.ts';
import { loadConfig } from '../../src/config.ts';
import { buildApp } from '../../src/app.ts';
import { createAppServices } from '../../src/app-services.ts';
import { createAuthenticator } from '../../src/modules/user/index.ts';
import { basicHeader } from '../factories.ts';
import { createLogger } from '../../src/logger.ts';
import type { Bootstrapped } from '../../src/main/bootstrap.ts';
import { bootstrap } from '../../src/main/bootstrap.ts';
import { createAuditTrail } from '../../src/modules/audit/index.ts';
import { createFilingCatalog } from '../../src/modules/filing/index.ts';
import type { Hl7Server, PasQuery } from '../../src/modules/hl7/index.ts';
import { createPasQuery, startHl7Server } from '../../src/modules/hl7/index.ts';
import { createQueueEngine, enqueueRequest } from '../../src/modules/request-queue/index.ts';
import { jsonRow } from '../factories-queue.ts';
import type { PasPeer, PeerPatient } from '../pas-peer.ts';
import { peerPid, startPasPeer } from '../pas-peer.ts';
import type { OpenEyesTestDatabase } from './openeyes-database.ts';
import { connectForScripts, createOpenEyesDatabase, openKysely, testMysqlUrl } from './openeyes-database.ts';

const adminUrl = testMysqlUrl();
const skip = adminUrl === undefined ? 'TEST_MYSQL_URL is not set (no MariaDB/MySQL server)' : false;
const PATIENT: PeerPatient = { surname: 'Oepasperson', given: 'Robin', dob: '19790305', sex: 'F' };
const TABLES = ['patient', 'contact', 'address', 'patient_identifier', 'pasapi_assignment'] as const;
/** Columns that differ between two patients stored alike. */
const VARYING = new Set([
  'id',
  'patient_id',
  'contact_id',
  'internal_id',
  'created_date',
  'last_modified_date',
  'unique_row_string',
]);

describe('the PAS query on an OpenEyes database', { skip }, () => {
  let oe: OpenEyesTestDatabase;
  let booted: Bootstrapped;
  let config: Config;
  let peer: PasPeer;
  let query: PasQuery;
  let listener: Hl7Server;
  let filesDir: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  let db: Kysely<any>;

  before(async () => {
    oe = await createOpenEyesDatabase(adminUrl!);
    filesDir = await mkdtemp(path.join(tmpdir(), 'cra-oe-pas-query-'));
    peer = await startPasPeer();
    booted = await bootstrap(
      loadConfig({
        DATABASE_URL: oe.url,
        DATABASE_SCHEMA: 'openeyes',
        TIME_ZONE: 'UTC',
        FILES_DIR: filesDir,
        WORKER: 'off',
        DEMO_DATA: 'off',
        LOG_LEVEL: 'silent',
        HL7_PORT: '0',
        HL7_HOST: '127.0.0.1',
        HL7_ALLOWED_SENDERS: 'PAS^RHS@127.0.0.1',
        PAS_QUERY_HOST: '127.0.0.1',
        PAS_QUERY_PORT: String(peer.port),
        PAS_QUERY_TIMEOUT_MS: '1000',
      }),
    );
    config = booted.config;
    const made = await createPasQuery({
      database: booted.database,
      config,
      logger: createLogger('silent'),
      auditTrail: createAuditTrail(booted.database),
    });
    assert.ok(made !== undefined);
    query = made;
    listener = await startHl7Server({
      database: booted.database,
      config,
      logger: createLogger('silent'),
      auditTrail: createAuditTrail(booted.database),
    });
    const connection = await connectForScripts(oe.url);
    try {
      await connection.query(`
        INSERT INTO request_type (request_type, title_full, title_short, default_routine_name, default_request_queue)
          VALUES ('pas_match', 'PAS match', 'PAS match', 'PATIENT_MATCH', 'dicom_queue');`);
    } finally {
      await connection.end();
    }
    db = openKysely(oe.url);
  });
  after(async () => {
    await listener?.stop();
    await peer?.close();
    await db?.destroy();
    await booted?.database.close();
    await oe?.drop();
    if (filesDir !== undefined) await rm(filesDir, { recursive: true, force: true });
  });

  const counts = () =>
    Promise.all(
      TABLES.map(async (t) =>
        Number(
          (
            await db
              .selectFrom(t)
              .select((eb) => eb.fn.countAll().as('n'))
              .executeTakeFirstOrThrow()
          ).n,
        ),
      ),
    );

  async function patientOf(number: string): Promise<number | undefined> {
    const row: { patient_id: number } | undefined = await db
      .selectFrom('patient_identifier')
      .select('patient_id')
      .where('patient_identifier_type_id', '=', 1)
      .where('value', '=', number)
      .executeTakeFirst();
    return row?.patient_id;
  }

  async function snapshot(number: string) {
    const patientId = await patientOf(number);
    assert.ok(patientId !== undefined, 'the patient is stored');
    const clean = (rows: readonly object[]) =>
      rows.map((row) =>
        Object.fromEntries(
          Object.entries(row)
            .filter(([key]) => !VARYING.has(key))
            .map(([key, value]) => [key, value === number ? 'N' : value]),
        ),
      );
    const patient = (await db.selectFrom('patient').selectAll().where('id', '=', patientId).execute()) as {
      contact_id: number;
    }[];
    const contactId = patient[0]!.contact_id;
    return {
      patient: clean(patient),
      contact: clean(await db.selectFrom('contact').selectAll().where('id', '=', contactId).execute()),
      address: clean(
        await db
          .selectFrom('address')
          .selectAll()
          .where('contact_id', '=', contactId)
          .orderBy('id')
          .execute(),
      ),
      identifiers: clean(
        await db
          .selectFrom('patient_identifier')
          .selectAll()
          .where('patient_id', '=', patientId)
          .orderBy('id')
          .execute(),
      ),
      assignment: clean(
        await db
          .selectFrom('pasapi_assignment')
          .selectAll()
          .where('internal_id', '=', patientId)
          .where('resource_type', '=', 'Patient')
          .execute(),
      ),
    };
  }

  async function matchOnce(number: string) {
    const { requestId } = await enqueueRequest(booted.database, {
      requestType: 'pas_match',
      attachments: [jsonRow('REQUEST_DATA', { hos_num: number, dob: '1979-03-05', sex: 'F' })],
    });
    const engine = createQueueEngine({
      database: booted.database,
      config,
      catalog: createFilingCatalog({ missingPatients: query }),
    });
    // The queue may hold the routines an earlier match chained: step until this request's match ran.
    let outcome = await engine.step();
    for (let i = 0; i < 10 && outcome.kind === 'ran' && outcome.requestId !== requestId; i += 1)
      outcome = await engine.step();
    if (outcome.kind !== 'ran' || outcome.requestId !== requestId) assert.fail('the match did not run');
    const data = await db
      .selectFrom('attachment_data')
      .select('text_data')
      .where('request_id', '=', requestId)
      .where('attachment_mnemonic', '=', 'REQUEST_DATA')
      .executeTakeFirstOrThrow();
    return {
      status: outcome.status,
      error: outcome.error,
      matched: (JSON.parse(data.text_data ?? '{}') as { matched_patient_id?: number }).matched_patient_id,
    };
  }

  it('matches a request in one step with the PAS patient, stored as the same A28 stores it', async () => {
    peer.set('7650101', { kind: 'found', patient: PATIENT });
    const result = await matchOnce('7650101');
    assert.equal(result.status, 'COMPLETE', result.error);
    const patientId = await patientOf('7650101');
    assert.ok(patientId !== undefined);
    assert.equal(result.matched, patientId);

    const client = new Hl7Client({ host: '127.0.0.1', port: listener.port });
    try {
      const ack = await client.sendAndWait(
        Hl7Message.parse(
          [
            'MSH|^~\\&|PAS|RHS|CRA|EYE|20260301120000||ADT^A28^ADT_A05|OE-PAS-1|P|2.4',
            'EVN|A28|20260301120000',
            peerPid('7650102', PATIENT),
            'PD1|||',
          ].join('\r'),
        ),
        { timeoutMs: 20_000 },
      );
      assert.equal(ack.getSegment('MSA')?.getField(1)?.toString(), 'AA');
    } finally {
      await client.close();
    }
    assert.deepEqual(await snapshot('7650101'), await snapshot('7650102'));
    const audit = (await db
      .selectFrom('cra_audit_event')
      .select(['action', 'target_ids', 'outcome'])
      .where('action', '=', 'hl7.pas-query')
      .execute()) as { action: string; target_ids: string; outcome: number }[];
    assert.deepEqual(
      audit.map((r) => ({ ...r, outcome: Number(r.outcome) })),
      [{ action: 'hl7.pas-query', target_ids: String(patientId), outcome: 201 }],
    );
  });

  it('answers a search by the number with the patient the PAS supplies', async () => {
    peer.set('7650301', { kind: 'found', patient: { ...PATIENT, surname: 'Oesearchperson' } });
    const deps = {
      config,
      database: booted.database,
      files: booted.files,
      authenticator: createAuthenticator(booted.database.db, { cacheTtlMs: 0, database: booted.database }),
    };
    const app = await buildApp(deps, { services: createAppServices(deps, { missingPatients: query }) });
    try {
      await app.listen({ host: '127.0.0.1', port: 0 });
      const port = (app.server.address() as { port: number }).port;
      const response = await fetch(`http://127.0.0.1:${port}/api/v1/patient/search?term=7650301`, {
        headers: { authorization: basicHeader('api', 'api-password') },
      });
      assert.equal(response.status, 200);
      const found = (await response.json()) as { id: number; last_name: string }[];
      assert.deepEqual(
        found.map((p) => [p.id, p.last_name]),
        [[await patientOf('7650301'), 'Oesearchperson']],
      );
    } finally {
      await app.close();
    }
  });

  it('stores nothing and leaves the request waiting when the PAS answers NF', async () => {
    const before = await counts();
    const result = await matchOnce('7650199');
    assert.equal(result.status, 'RETRY');
    assert.match(result.error ?? '', /\(the PAS knows no patient of this identifier\)$/);
    assert.equal(result.matched, undefined);
    assert.deepEqual(await counts(), before);
  });
});
