/**
 * The HL7 v2 MLLP listener against real clients on every dialect: `mllp_send` (Debian's python3-hl7)
 * as the independent sender, `@medplum/hl7`'s `Hl7Client` to read acknowledgements. Messages are built
 * here for synthetic patients. Each case asserts the acknowledgement and what was (or was not) written.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Hl7Message } from '@medplum/core';
import { Hl7Client } from '@medplum/hl7';
import { sql } from 'kysely';
import { countRows } from '../../../test/factories.ts';
import type { PasInstallation } from '../../../test/factories-pasapi.ts';
import { createPasInstallation, newHospitalNumber, newNhsNumber } from '../../../test/factories-pasapi.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import { loadConfig } from '../../config.ts';
import { createLogger } from '../../logger.ts';
import { createAuditTrail } from '../audit/index.ts';
import type { Hl7Server } from './index.ts';
import { startHl7Server } from './index.ts';

const PATIENT_TABLES = ['patient', 'contact', 'address', 'patient_identifier', 'pasapi_assignment'] as const;

interface AdtValues {
  readonly event: string;
  readonly controlId: string;
  readonly hospitalNumber: string;
  readonly nhsNumber?: string;
  readonly surname?: string;
  readonly given?: string;
  readonly dob?: string;
  readonly sex?: string;
  readonly application?: string;
  readonly charset?: string;
  /** MRG-1's number (A40). */
  readonly secondary?: string;
}

let controlCounter = 0;
const newControlId = () => `T${process.pid}-${Date.now()}-${(controlCounter += 1)}`;

/** An ADT message (segments ended by CR) for a synthetic patient. */
function adt(values: AdtValues): string {
  const event = values.event;
  const structure = event === 'A40' ? 'ADT_A39' : event === 'A28' || event === 'A31' ? 'ADT_A05' : 'ADT_A01';
  const pid3 = [
    `${values.hospitalNumber}^^^PAS^MR`,
    ...(values.nhsNumber === undefined ? [] : [`${values.nhsNumber}^^^NHS^NH`]),
  ].join('~');
  const segments = [
    `MSH|^~\\&|${values.application ?? 'PAS'}|RHS|CRA|EYE|20260301120000||ADT^${event}^${structure}|${values.controlId}|P|2.4|||AL|NE||${values.charset ?? ''}`,
    `EVN|${event}|20260301120000`,
    `PID|1||${pid3}||${values.surname ?? 'Testperson'}^${values.given ?? 'Alex'}^Jo^^mrs||${values.dob ?? '19800214'}|${values.sex ?? 'F'}|||1 Test Road^Flat 2^Testtown^Testshire^TE1 1ST^^H||01134960000|07700900000`,
    'PD1|||',
    ...(values.secondary === undefined ? [] : [`MRG|${values.secondary}^^^PAS^MR`]),
  ];
  return segments.join('\r');
}

/** What an acknowledgement says. */
interface Ack {
  readonly code: string;
  readonly controlId: string;
  readonly text: string;
}

function readAck(message: Hl7Message): Ack {
  const msa = message.getSegment('MSA');
  return {
    code: msa?.getField(1)?.toString() ?? '',
    controlId: msa?.getField(2)?.toString() ?? '',
    text: msa?.getField(3)?.toString() ?? '',
  };
}

/** Runs `mllp_send` with `args`, resolving to its acknowledgements (it prints each as received). */
async function mllpSend(args: readonly string[]): Promise<Ack[]> {
  const child = spawn('mllp_send', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const out: Buffer[] = [];
  let err = '';
  child.stdout.on('data', (chunk: Buffer) => out.push(chunk));
  child.stderr.on('data', (chunk: Buffer) => (err += chunk.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  assert.equal(code, 0, err);
  return Buffer.concat(out)
    .toString('latin1')
    .split('\x1c')
    .map((frame) => frame.replaceAll('\x0b', '').trim())
    .filter((frame) => frame.startsWith('MSH'))
    .map((frame) => readAck(Hl7Message.parse(frame)));
}

forEachDialect((dialect) => {
  describe(`HL7 MLLP listener (${dialect})`, () => {
    let app: TestApp;
    let pas: PasInstallation;
    let server: Hl7Server;
    let client: Hl7Client;
    let utf8Client: Hl7Client;
    let dir: string;

    before(async () => {
      app = await startTestApp(dialect);
      pas = await createPasInstallation(app.db);
      dir = await mkdtemp(path.join(tmpdir(), 'cra-hl7-'));
      const mapFile = path.join(dir, 'field-map.json');
      await writeFile(
        mapFile,
        JSON.stringify({ localIdentifiers: [{ authority: 'PAS', identifierType: pas.typeKey }] }),
      );
      const hl7 = loadConfig({
        HL7_PORT: '0',
        HL7_HOST: '127.0.0.1',
        HL7_ALLOWED_SENDERS: 'PAS^RHS@127.0.0.0/8',
        HL7_FIELD_MAP_FILE: mapFile,
      }).hl7;
      server = await startHl7Server({
        database: app.database,
        config: { ...app.config, hl7 },
        logger: createLogger('silent'),
        auditTrail: createAuditTrail(app.database),
      });
      client = new Hl7Client({ host: '127.0.0.1', port: server.port });
      utf8Client = new Hl7Client({ host: '127.0.0.1', port: server.port, encoding: 'utf-8' });
    });
    after(async () => {
      await client?.close();
      await utf8Client?.close();
      await server?.stop();
      await app?.close();
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    });

    const counts = () => Promise.all(PATIENT_TABLES.map((t) => countRows(app.db, t)));
    const messageRows = async () =>
      Number(
        (await sql<{ n: number }>`select count(*) as n from ${sql.table('hl7_message')}`.execute(app.db))
          .rows[0]!.n,
      );

    async function send(text: string, via: Hl7Client = client): Promise<Ack> {
      return readAck(await via.sendAndWait(Hl7Message.parse(text), { timeoutMs: 20_000 }));
    }

    /** Sends `text` as a file through `mllp_send --loose` (raw bytes, as written). */
    async function sendWithMllpSend(bytes: Buffer): Promise<Ack[]> {
      const file = path.join(dir, `${newControlId()}.hl7`);
      await writeFile(file, bytes);
      return mllpSend(['--loose', '-p', String(server.port), '-f', file, '127.0.0.1']);
    }

    async function patientOf(hospitalNumber: string) {
      return app.db
        .selectFrom('patient_identifier as pi')
        .innerJoin('patient as p', 'p.id', 'pi.patient_id')
        .innerJoin('contact as c', 'c.id', 'p.contact_id')
        .select(['p.id', 'p.dob', 'p.gender', 'p.deleted', 'c.first_name', 'c.last_name', 'c.title'])
        .select(['c.primary_phone', 'c.id as contact_id'])
        .where('pi.patient_identifier_type_id', '=', pas.localTypeId)
        .where('pi.value', '=', hospitalNumber)
        .executeTakeFirst();
    }

    it('creates the patient of an A28 sent by mllp_send, and answers AA once committed', async () => {
      const number = newHospitalNumber();
      const nhs = newNhsNumber();
      const controlId = newControlId();
      const acks = await sendWithMllpSend(
        Buffer.from(adt({ event: 'A28', controlId, hospitalNumber: number, nhsNumber: nhs }) + '\n'),
      );
      assert.deepEqual(acks, [{ code: 'AA', controlId, text: '' }]);
      const patient = await patientOf(number);
      assert.ok(patient !== undefined, 'the patient was created');
      assert.equal(patient.last_name, 'Testperson');
      assert.equal(patient.first_name, 'Alex Jo');
      assert.equal(patient.title, 'Mrs');
      assert.equal(patient.dob, '1980-02-14');
      assert.equal(patient.gender, 'F');
      assert.equal(patient.primary_phone, '01134960000');
      const address = await app.db
        .selectFrom('address')
        .select(['address1', 'city', 'county', 'postcode', 'address_type_id'])
        .where('contact_id', '=', patient.contact_id)
        .execute();
      assert.deepEqual(address, [
        {
          address1: '1 Test Road',
          city: 'Testtown',
          county: 'Testshire',
          postcode: 'TE1 1ST',
          address_type_id: 2,
        },
      ]);
      const global = await app.db
        .selectFrom('patient_identifier')
        .select('value')
        .where('patient_id', '=', patient.id)
        .where('patient_identifier_type_id', '=', pas.globalTypeId)
        .execute();
      assert.deepEqual(global, [{ value: nhs }]);
      const audit = await sql<{ action: string; target_ids: string; outcome: number }>`
        select action, target_ids, outcome from ${sql.table('audit_event')}
        where action = 'hl7.patient' and target_ids = ${String(patient.id)}`.execute(app.db);
      assert.deepEqual(
        audit.rows.map((r) => ({ ...r, outcome: Number(r.outcome) })),
        [{ action: 'hl7.patient', target_ids: String(patient.id), outcome: 201 }],
      );
    });

    it('updates the patient of an A08 read by Hl7Client', async () => {
      const number = newHospitalNumber();
      assert.equal(
        (await send(adt({ event: 'A28', controlId: newControlId(), hospitalNumber: number }))).code,
        'AA',
      );
      const before = await patientOf(number);
      const ack = await send(
        adt({
          event: 'A08',
          controlId: newControlId(),
          hospitalNumber: number,
          surname: 'Renamed',
          sex: 'M',
        }),
      );
      assert.equal(ack.code, 'AA');
      const after = await patientOf(number);
      assert.equal(after?.id, before?.id);
      assert.equal(after?.last_name, 'Renamed');
      assert.equal(after?.gender, 'M');
    });

    it('merges the MRG-1 patient into the PID patient on an A40', async () => {
      const primary = newHospitalNumber();
      const secondary = newHospitalNumber();
      for (const number of [primary, secondary])
        assert.equal(
          (await send(adt({ event: 'A28', controlId: newControlId(), hospitalNumber: number }))).code,
          'AA',
        );
      const secondaryId = (await patientOf(secondary))!.id;
      const ack = await send(
        adt({ event: 'A40', controlId: newControlId(), hospitalNumber: primary, secondary }),
      );
      assert.equal(ack.code, 'AA', ack.text);
      const request = await app.db
        .selectFrom('patient_merge_request')
        .select(['primary_id', 'status'])
        .where('secondary_id', '=', secondaryId)
        .execute();
      assert.deepEqual(request, [{ primary_id: (await patientOf(primary))!.id, status: 20 }]);
      const retired = await app.db
        .selectFrom('patient')
        .select('deleted')
        .where('id', '=', secondaryId)
        .executeTakeFirstOrThrow();
      assert.equal(retired.deleted, 1);
    });

    it('answers AE for an A40 whose MRG-1 patient is unknown, writing no merge request', async () => {
      const primary = newHospitalNumber();
      assert.equal(
        (await send(adt({ event: 'A28', controlId: newControlId(), hospitalNumber: primary }))).code,
        'AA',
      );
      const before = await countRows(app.db, 'patient_merge_request');
      const ack = await send(
        adt({
          event: 'A40',
          controlId: newControlId(),
          hospitalNumber: primary,
          secondary: newHospitalNumber(),
        }),
      );
      assert.equal(ack.code, 'AE');
      assert.match(ack.text, /secondary patient not found/);
      assert.equal(await countRows(app.db, 'patient_merge_request'), before);
    });

    it('answers a message control id sent again with its first answer, without applying it twice', async () => {
      const number = newHospitalNumber();
      const first = adt({
        event: 'A28',
        controlId: newControlId(),
        hospitalNumber: number,
        surname: 'First',
      });
      assert.equal((await send(first)).code, 'AA');
      assert.equal(
        (
          await send(
            adt({ event: 'A08', controlId: newControlId(), hospitalNumber: number, surname: 'Second' }),
          )
        ).code,
        'AA',
      );
      const [rowsBefore, logBefore] = [await counts(), await messageRows()];
      const again = await send(first);
      assert.equal(again.code, 'AA');
      assert.equal((await patientOf(number))?.last_name, 'Second', 'the first message was not applied again');
      assert.deepEqual(await counts(), rowsBefore);
      assert.equal(await messageRows(), logBefore);
    });

    it('answers AE for an A08 with an impossible date of birth, changing nothing, and the same AE again', async () => {
      const number = newHospitalNumber();
      assert.equal(
        (await send(adt({ event: 'A28', controlId: newControlId(), hospitalNumber: number }))).code,
        'AA',
      );
      const rowsBefore = await counts();
      const bad = adt({
        event: 'A08',
        controlId: newControlId(),
        hospitalNumber: number,
        surname: 'Changed',
        dob: '19800231',
      });
      const ack = await send(bad);
      assert.equal(ack.code, 'AE');
      assert.match(ack.text, /PID-7\.1 is not a date of the calendar/);
      assert.equal((await patientOf(number))?.last_name, 'Testperson');
      assert.equal((await patientOf(number))?.dob, '1980-02-14');
      assert.deepEqual(await counts(), rowsBefore);
      assert.deepEqual(await send(bad), ack);
    });

    it('answers AR for a frame that is not HL7, and writes nothing', async () => {
      const [rowsBefore, logBefore] = [await counts(), await messageRows()];
      const file = path.join(dir, 'garbage.mllp');
      await writeFile(file, Buffer.from('\x0bthis is not an HL7 message\x1c\r'));
      const acks = await mllpSend(['-p', String(server.port), '-f', file, '127.0.0.1']);
      assert.equal(acks.length, 1);
      assert.equal(acks[0]!.code, 'AR');
      assert.deepEqual(await counts(), rowsBefore);
      assert.equal(await messageRows(), logBefore);
    });

    it('answers AR for a sender not allowed (MSH-3), and writes nothing', async () => {
      const [rowsBefore, logBefore] = [await counts(), await messageRows()];
      const controlId = newControlId();
      const ack = await send(
        adt({ event: 'A28', controlId, hospitalNumber: newHospitalNumber(), application: 'INTRUDER' }),
      );
      assert.deepEqual(ack, { code: 'AR', controlId, text: 'sender not allowed' });
      assert.deepEqual(await counts(), rowsBefore);
      assert.equal(await messageRows(), logBefore);
    });

    it('answers AR for an unsupported message type', async () => {
      const text = adt({
        event: 'A28',
        controlId: newControlId(),
        hospitalNumber: newHospitalNumber(),
      }).replace('ADT^A28^ADT_A05', 'ORU^R01^ORU_R01');
      const ack = await send(text);
      assert.equal(ack.code, 'AR');
    });

    it('reads names in the character set MSH-18 declares (8859/1 bytes, UNICODE UTF-8)', async () => {
      const latin = newHospitalNumber();
      const acks = await sendWithMllpSend(
        Buffer.from(
          adt({
            event: 'A28',
            controlId: newControlId(),
            hospitalNumber: latin,
            given: 'Zoë',
            charset: '8859/1',
          }) + '\n',
          'latin1',
        ),
      );
      assert.equal(acks[0]?.code, 'AA');
      assert.equal((await patientOf(latin))?.first_name, 'Zoë Jo');

      const unicode = newHospitalNumber();
      const ack = await send(
        adt({
          event: 'A28',
          controlId: newControlId(),
          hospitalNumber: unicode,
          given: 'Zoë',
          surname: 'Łukasz',
          charset: 'UNICODE UTF-8',
        }),
        utf8Client,
      );
      assert.equal(ack.code, 'AA');
      const patient = await patientOf(unicode);
      assert.equal(patient?.first_name, 'Zoë Jo');
      assert.equal(patient?.last_name, 'Łukasz');
    });
  });
});
