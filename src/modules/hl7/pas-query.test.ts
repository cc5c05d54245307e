/**
 * Asking the PAS for a patient the service lacks, on every dialect, against a real MLLP peer on
 * 127.0.0.1 (test/pas-peer.ts, framed by `@medplum/hl7`) that answers QBP^Q22 with RSP^K21: the patient
 * it knows is stored with the rows the same ADT^A28 sent through the listener writes, a PATIENT_MATCH
 * request is matched in one step and the search answers the patient; NF, an unreadable answer, an answer
 * for another number, a silent peer and a closed port store nothing, leave the request waiting and answer
 * the search's empty result. Synthetic patients only.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Hl7Message } from '@medplum/core';
import { Hl7Client } from '@medplum/hl7';
import { sql } from 'kysely';
import { buildApp } from '../../app.ts';
import { createAppServices } from '../../app-services.ts';
import type { Config } from '../../config.ts';
import { loadConfig } from '../../config.ts';
import { createLogger } from '../../logger.ts';
import { countRows } from '../../../test/factories.ts';
import type { TestUser } from '../../../test/factories.ts';
import { createUser } from '../../../test/factories.ts';
import type { PasInstallation } from '../../../test/factories-pasapi.ts';
import { createPasInstallation, newHospitalNumber } from '../../../test/factories-pasapi.ts';
import { createRequestType, jsonRow, routinesOf } from '../../../test/factories-queue.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import { until } from '../../../test/until.ts';
import type { PeerPatient } from '../../../test/pas-peer.ts';
import { closedPort, peerPid, startPasPeer } from '../../../test/pas-peer.ts';
import type { PasPeer } from '../../../test/pas-peer.ts';
import { createAuditTrail } from '../audit/index.ts';
import { createFilingCatalog } from '../filing/index.ts';
import type { MissingPatientSource } from '../patient/index.ts';
import { createQueueEngine, enqueueRequest } from '../request-queue/index.ts';
import type { Hl7Server, PasQuery } from './index.ts';
import { createPasQuery, startHl7Server } from './index.ts';

const PATIENT_TABLES = ['patient', 'contact', 'address', 'patient_identifier', 'pasapi_assignment'] as const;
const JANE: PeerPatient = { surname: 'Testperson', given: 'Alex', dob: '19800214', sex: 'F' };
/** Columns that differ between two patients stored alike: keys, dates, the number itself. */
const VARYING = new Set([
  'id',
  'patient_id',
  'contact_id',
  'internal_id',
  'created_date',
  'last_modified_date',
  'unique_row_string',
]);

forEachDialect((dialect) => {
  describe(`asking the PAS for a patient it lacks (${dialect})`, () => {
    let app: TestApp;
    let pas: PasInstallation;
    let peer: PasPeer;
    let dir: string;
    let config: Config;
    let query: PasQuery;
    let listener: Hl7Server;
    let searchUrl: string;
    let user: TestUser;
    const stops: (() => Promise<void>)[] = [];

    /** The configuration with the PAS at `port` (the peer's unless given). */
    async function configFor(env: Record<string, string> = {}): Promise<Config> {
      const remote = await app.db
        .selectFrom('institution')
        .select('remote_id')
        .where('id', '=', pas.institutionId)
        .executeTakeFirstOrThrow();
      const mapFile = path.join(dir, 'field-map.json');
      await writeFile(
        mapFile,
        JSON.stringify({ localIdentifiers: [{ authority: 'PAS', identifierType: pas.typeKey }] }),
      );
      return loadConfig({
        ...app.env,
        INSTITUTION_CODE: remote.remote_id,
        REFERENCE_CACHE_TTL_MS: '0',
        SIGN_RATE_LIMIT_PER_MINUTE: '0',
        AUTH_FAILURE_LIMIT_PER_MINUTE: '0',
        AUTH_FAILURE_FREE_ATTEMPTS: '0',
        AUTH_FAILURE_LIMIT_PER_USERNAME: '0',
        AUTH_CONCURRENT_VERIFICATIONS_PER_CLIENT: '0',
        MAX_REQUESTS_PER_CLIENT: '0',
        HL7_PORT: '0',
        HL7_HOST: '127.0.0.1',
        HL7_ALLOWED_SENDERS: 'PAS^RHS@127.0.0.0/8',
        HL7_FIELD_MAP_FILE: mapFile,
        PAS_QUERY_HOST: '127.0.0.1',
        PAS_QUERY_PORT: String(peer.port),
        PAS_QUERY_TIMEOUT_MS: '1000',
        ...env,
      });
    }

    async function queryFor(env: Record<string, string> = {}): Promise<PasQuery> {
      const made = await createPasQuery({
        database: app.database,
        config: await configFor(env),
        logger: createLogger('silent'),
        auditTrail: createAuditTrail(app.database),
      });
      assert.ok(made !== undefined);
      return made;
    }

    /** A search app whose patient search asks `source`. */
    async function startSearch(source?: MissingPatientSource): Promise<string> {
      const deps = { ...app.deps, config };
      const served = await buildApp(deps, {
        services: createAppServices(deps, source === undefined ? {} : { missingPatients: source }),
      });
      await served.listen({ host: '127.0.0.1', port: 0 });
      stops.push(() => served.close());
      const address = served.server.address();
      assert.ok(address !== null && typeof address === 'object');
      return `http://127.0.0.1:${address.port}`;
    }

    before(async () => {
      app = await startTestApp(dialect);
      pas = await createPasInstallation(app.db);
      dir = await mkdtemp(path.join(tmpdir(), 'cra-pas-query-'));
      peer = await startPasPeer();
      config = await configFor();
      query = await queryFor();
      listener = await startHl7Server({
        database: app.database,
        config,
        logger: createLogger('silent'),
        auditTrail: createAuditTrail(app.database),
      });
      searchUrl = await startSearch(query);
      user = await createUser(app.db);
    });
    after(async () => {
      for (const stop of stops) await stop();
      await listener?.stop();
      await peer?.close();
      await app?.close();
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    });

    const counts = () => Promise.all(PATIENT_TABLES.map((t) => countRows(app.db, t)));

    async function patientOf(number: string): Promise<number | undefined> {
      const row = await app.db
        .selectFrom('patient_identifier')
        .select('patient_id')
        .where('patient_identifier_type_id', '=', pas.localTypeId)
        .where('value', '=', number)
        .executeTakeFirst();
      return row?.patient_id;
    }

    /** The rows of the patient holding `number`, without what differs between two patients stored alike. */
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
      const patient = await app.db.selectFrom('patient').selectAll().where('id', '=', patientId).execute();
      const contactId = (patient[0] as { contact_id: number }).contact_id;
      return {
        patient: clean(patient),
        contact: clean(await app.db.selectFrom('contact').selectAll().where('id', '=', contactId).execute()),
        address: clean(
          await app.db
            .selectFrom('address')
            .selectAll()
            .where('contact_id', '=', contactId)
            .orderBy('id')
            .execute(),
        ),
        identifiers: clean(
          await app.db
            .selectFrom('patient_identifier')
            .selectAll()
            .where('patient_id', '=', patientId)
            .orderBy('id')
            .execute(),
        ),
        assignment: clean(
          await app.db
            .selectFrom('pasapi_assignment')
            .selectAll()
            .where('internal_id', '=', patientId)
            .where('resource_type', '=', 'Patient')
            .execute(),
        ),
      };
    }

    /** A PATIENT_MATCH request for `number`, run once by an engine whose match asks `source`. */
    async function matchOnce(number: string, source: MissingPatientSource, dob = '1980-02-14') {
      const type = await createRequestType(app.db, { routineName: 'PATIENT_MATCH' });
      const { requestId } = await enqueueRequest(app.database, {
        requestType: type.requestType,
        attachments: [jsonRow('REQUEST_DATA', { hos_num: number, dob, sex: 'F' })],
      });
      const engine = createQueueEngine({
        database: app.database,
        config,
        catalog: createFilingCatalog({ missingPatients: source }),
      });
      const outcome = await engine.step(type.queue);
      if (outcome.kind !== 'ran') assert.fail(`the step did not run the match: ${outcome.kind}`);
      const data = await app.db
        .selectFrom('attachment_data')
        .select('text_data')
        .where('request_id', '=', requestId)
        .where('attachment_mnemonic', '=', 'REQUEST_DATA')
        .executeTakeFirstOrThrow();
      const [match] = await routinesOf(app.db, requestId);
      return {
        status: outcome.status,
        error: outcome.error,
        matched: (JSON.parse(data.text_data ?? '{}') as { matched_patient_id?: number }).matched_patient_id,
        routine: match!,
      };
    }

    async function search(baseUrl: string, term: string) {
      const response = await fetch(`${baseUrl}/api/v1/patient/search?term=${encodeURIComponent(term)}`, {
        headers: { authorization: user.authorization },
      });
      return {
        status: response.status,
        body: (await response.json()) as { id: number; last_name: string }[],
      };
    }

    it('matches a PATIENT_MATCH request in one step with the patient the PAS supplies, stored as the same A28 stores it', async () => {
      const asked = newHospitalNumber();
      peer.set(asked, { kind: 'found', patient: JANE });
      const before = peer.received.length;
      const result = await matchOnce(asked, query);
      assert.equal(result.status, 'COMPLETE', result.error);
      const patientId = await patientOf(asked);
      assert.equal(result.matched, patientId);
      assert.deepEqual(peer.received.slice(before), [
        {
          number: asked,
          authority: 'PAS',
          messageType: 'QBP^Q22^QBP_Q21',
          receiver: 'PAS^PAS',
          queryName: 'Q22^Find Candidates^HL7nnnn',
          rcp: 'I|1^RD',
        },
      ]);

      // The same patient under another number, sent as an ADT^A28 through the listener.
      const sent = newHospitalNumber();
      const client = new Hl7Client({ host: '127.0.0.1', port: listener.port });
      try {
        const ack = await client.sendAndWait(
          Hl7Message.parse(
            [
              `MSH|^~\\&|PAS|RHS|CRA|EYE|20260301120000||ADT^A28^ADT_A05|A28-${sent}|P|2.4`,
              'EVN|A28|20260301120000',
              peerPid(sent, JANE),
              'PD1|||',
            ].join('\r'),
          ),
          { timeoutMs: 20_000 },
        );
        assert.equal(ack.getSegment('MSA')?.getField(1)?.toString(), 'AA');
      } finally {
        await client.close();
      }
      assert.deepEqual(await snapshot(asked), await snapshot(sent));

      const audit = await sql<{ action: string; target_type: string; target_ids: string; outcome: number }>`
        select action, target_type, target_ids, outcome from ${sql.table('audit_event')}
        where action = 'hl7.pas-query' and target_ids = ${String(patientId)}`.execute(app.db);
      assert.deepEqual(
        audit.rows.map((r) => ({ ...r, outcome: Number(r.outcome) })),
        [{ action: 'hl7.pas-query', target_type: 'patient', target_ids: String(patientId), outcome: 201 }],
      );
    });

    it('answers a search by identifier with the patient the PAS supplies, the read audited', async () => {
      const asked = newHospitalNumber();
      peer.set(asked, { kind: 'found', patient: { ...JANE, surname: 'Searchperson' } });
      const { status, body } = await search(searchUrl, asked);
      assert.equal(status, 200);
      const patientId = await patientOf(asked);
      assert.ok(patientId !== undefined);
      assert.deepEqual(
        body.map((p) => [p.id, p.last_name]),
        [[patientId, 'Searchperson']],
      );
      // The read is audited as any search: the patient shown, by id.
      await until(
        async () =>
          (
            await sql`select 1 from ${sql.table('audit_event')}
              where action = 'patient.search' and target_ids = ${String(patientId)}`.execute(app.db)
          ).rows.length === 1,
        { what: "the search's audit row" },
      );
      // A search without the PAS now finds the stored patient too.
      const plain = await search(await startSearch(), asked);
      assert.deepEqual(
        plain.body.map((p) => p.id),
        [patientId],
      );
    });

    it('leaves the request waiting and stores nothing when the PAS says NF, and answers the same number again from the cache', async () => {
      const asked = newHospitalNumber();
      const before = await counts();
      const receivedBefore = peer.received.length;
      const first = await matchOnce(asked, query);
      assert.equal(first.status, 'RETRY');
      assert.match(
        first.error ?? '',
        /^No patient matches .*\(the PAS knows no patient of this identifier\)$/,
      );
      assert.deepEqual(await counts(), before);
      const second = await matchOnce(asked, query);
      assert.equal(second.status, 'RETRY');
      assert.equal(
        peer.received.length - receivedBefore,
        1,
        'the second request was answered from the cache',
      );
      const uncached = await queryFor({ PAS_QUERY_NOT_FOUND_CACHE_MS: '0' });
      await matchOnce(asked, uncached);
      await matchOnce(asked, uncached);
      assert.equal(peer.received.length - receivedBefore, 3, 'without the cache every request asks');
    });

    for (const [kind, words] of [
      ['garbage', /no answer within/],
      ['other-number', /the answer is for another number/],
      ['error', /MSA-1 AE/],
      ['silent', /no answer within/],
    ] as const) {
      it(`stores nothing, leaves the request waiting and answers the empty search when the PAS answers ${kind}`, async () => {
        const asked = newHospitalNumber();
        peer.set(asked, kind === 'other-number' ? { kind, patient: JANE } : { kind });
        const before = await counts();
        const result = await matchOnce(asked, query);
        assert.equal(result.status, 'RETRY');
        assert.match(result.error ?? '', words);
        assert.match(
          result.error ?? '',
          /^No patient matches the identifier, date of birth and sex \(the PAS gave no answer/,
        );
        const { status, body } = await search(searchUrl, asked);
        assert.deepEqual({ status, body }, { status: 200, body: [] });
        assert.deepEqual(await counts(), before);
        // Not cached: an unavailable PAS is asked again.
        const receivedBefore = peer.received.length;
        await query.findMissingPatient(asked);
        assert.equal(peer.received.length, receivedBefore + 1);
      });
    }

    it('leaves the request waiting and answers the empty search when the PAS port is closed', async () => {
      const down = await queryFor({ PAS_QUERY_PORT: String(await closedPort()) });
      const asked = newHospitalNumber();
      const before = await counts();
      const result = await matchOnce(asked, down);
      assert.equal(result.status, 'RETRY');
      assert.match(
        result.error ?? '',
        /\(the PAS gave no answer: the PAS cannot be reached \(ECONNREFUSED\)\)$/,
      );
      const { status, body } = await search(await startSearch(down), asked);
      assert.deepEqual({ status, body }, { status: 200, body: [] });
      assert.deepEqual(await counts(), before);
      assert.deepEqual(await down.findMissingPatient(asked), {
        kind: 'unavailable',
        reason: 'the PAS cannot be reached (ECONNREFUSED)',
      });
    });

    it('shares one query between concurrent asks for the same number', async () => {
      const asked = newHospitalNumber();
      peer.set(asked, { kind: 'found', patient: JANE, delayMs: 100 });
      const receivedBefore = peer.received.length;
      const answers = await Promise.all([
        query.findMissingPatient(asked),
        query.findMissingPatient(asked),
        query.findMissingPatient(` ${asked.slice(0, 4)} ${asked.slice(4)} `),
      ]);
      const patientId = await patientOf(asked);
      assert.ok(patientId !== undefined);
      assert.deepEqual(answers, [
        { kind: 'found', patientId },
        { kind: 'found', patientId },
        { kind: 'found', patientId },
      ]);
      assert.equal(peer.received.length, receivedBefore + 1);
    });

    it('does not ask the PAS when a local patient matches, nor for an identifier no local type accepts', async () => {
      const asked = newHospitalNumber();
      peer.set(asked, { kind: 'found', patient: JANE });
      assert.equal((await matchOnce(asked, query)).status, 'COMPLETE');
      const receivedBefore = peer.received.length;
      assert.equal((await matchOnce(asked, query)).status, 'COMPLETE');
      assert.deepEqual(await query.findMissingPatient('ABC-not-a-number'), { kind: 'not-found' });
      assert.equal(peer.received.length, receivedBefore);
    });

    it('keeps the request waiting when the PAS patient has another date of birth', async () => {
      const asked = newHospitalNumber();
      peer.set(asked, { kind: 'found', patient: JANE });
      const result = await matchOnce(asked, query, '1980-02-15');
      assert.equal(result.status, 'RETRY');
      assert.match(result.error ?? '', /another date of birth or sex\)$/);
      assert.equal(result.matched, undefined);
      assert.equal(result.routine.status, 'RETRY');
    });
  });
});

describe('PAS query settings', () => {
  it('is off without PAS_QUERY_HOST, and lists every problem of a bad setting at start', () => {
    assert.equal(loadConfig({}).pasQuery.host, undefined);
    assert.throws(
      () =>
        loadConfig({
          PAS_QUERY_HOST: '127.0.0.1',
          PAS_QUERY_TIMEOUT_MS: '5',
          PAS_QUERY_AUTHORITIES: 'PAS,ELSEWHERE',
          PAS_QUERY_RECEIVER: 'PAS|X',
        }),
      (error: Error) => {
        assert.deepEqual(error.message.split('\n').slice(1), [
          '  - PAS_QUERY_HOST needs PAS_QUERY_PORT',
          '  - PAS_QUERY_TIMEOUT_MS must be a whole number from 100 to 30000, got "5"',
          '  - PAS_QUERY_RECEIVER must be APPLICATION^FACILITY, got "PAS|X"',
          '  - PAS_QUERY_AUTHORITIES: "ELSEWHERE" is not a local authority of the HL7 field map (PAS)',
        ]);
        return true;
      },
    );
    assert.throws(() => loadConfig({ PAS_QUERY_PORT: '2575' }), /PAS_QUERY_PORT needs PAS_QUERY_HOST/);
  });
});
