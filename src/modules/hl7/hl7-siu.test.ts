/**
 * SIU appointments and A34 merges over the HL7 MLLP listener on every dialect, read by `@medplum/hl7`'s
 * `Hl7Client`: S12 books on the one worklist instance PASAPI's `PatientAppointment` would choose, S13 and
 * S14 move or change the same booking (SCH-2), S15 and S17 delete it; location and clinician from AIL and
 * AIP, or PV1 where a feed fills that instead. Each refusal is an AE that wrote nothing. Messages and
 * patients are built here, synthetic.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Hl7Message } from '@medplum/core';
import { Hl7Client } from '@medplum/hl7';
import { countRows } from '../../../test/factories.ts';
import type { PasInstallation } from '../../../test/factories-pasapi.ts';
import {
  createPasInstallation,
  createWorklistDefinition,
  newHospitalNumber,
} from '../../../test/factories-pasapi.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import { loadConfig } from '../../config.ts';
import { formatDateTime } from '../../db/stored-time.ts';
import { createLogger } from '../../logger.ts';
import { createAuditTrail } from '../audit/index.ts';
import type { Hl7Server } from './index.ts';
import { startHl7Server } from './index.ts';

const BOOKING_TABLES = ['worklist_patient', 'worklist_patient_attribute', 'pasapi_assignment'] as const;

let counter = 0;
const next = () => `${process.pid}-${Date.now()}-${(counter += 1)}`;

interface SiuValues {
  readonly event: string;
  readonly hospitalNumber: string;
  readonly appointmentId: string;
  /** SCH-11.4, `YYYYMMDDHHMM`. */
  readonly start?: string;
  /** AIL-3.1; none = no AIL segment. */
  readonly clinic?: string;
  /** AIP-3 family name; none = no AIP segment. */
  readonly doctor?: string;
  /** PV1-3.1 and PV1-9 (family name), for feeds that send the visit instead of the resources. */
  readonly pv1?: { readonly clinic: string; readonly doctor: string };
  readonly controlId?: string;
}

/** An SIU message (segments ended by CR) for a synthetic patient. */
function siu(values: SiuValues): string {
  const segments = [
    `MSH|^~\\&|PAS|RHS|CRA|EYE|20310601120000||SIU^${values.event}^SIU_S12|${values.controlId ?? `S${next()}`}|P|2.4`,
    `SCH||${values.appointmentId}^PAS|||||ROUTINE||||^^^${values.start ?? '203106100940'}^203106101000|||||||||||||Booked`,
    `PID|1||${values.hospitalNumber}^^^PAS^MR||Testperson^Alex||19800214|F`,
    ...(values.pv1 === undefined
      ? []
      : [`PV1|1|O|${values.pv1.clinic}^^^RHS||||||D123^${values.pv1.doctor}^Ann`]),
    'RGS|1|A',
    ...(values.clinic === undefined ? [] : [`AIL|1|A|${values.clinic}^^^RHS`]),
    ...(values.doctor === undefined ? [] : [`AIP|1|A|C456^${values.doctor}^Bea`]),
  ];
  return segments.join('\r');
}

function adt(event: string, hospitalNumber: string, secondary?: string): string {
  return [
    `MSH|^~\\&|PAS|RHS|CRA|EYE|20310601120000||ADT^${event}^ADT_A05|A${next()}|P|2.4`,
    `EVN|${event}|20310601120000`,
    `PID|1||${hospitalNumber}^^^PAS^MR||Testperson^Alex||19800214|F`,
    ...(secondary === undefined ? [] : [`MRG|${secondary}^^^PAS^MR`]),
  ].join('\r');
}

interface Ack {
  readonly code: string;
  readonly text: string;
}

forEachDialect((dialect) => {
  describe(`HL7 SIU appointments and A34 (${dialect})`, () => {
    let app: TestApp;
    let pas: PasInstallation;
    let server: Hl7Server;
    let client: Hl7Client;
    let dir: string;
    let clinicA: { worklistId: number };
    let clinicB: { worklistId: number };

    before(async () => {
      app = await startTestApp(dialect, { env: { TIME_ZONE: 'UTC' } });
      pas = await createPasInstallation(app.db);
      dir = await mkdtemp(path.join(tmpdir(), 'cra-hl7-siu-'));
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
      // Two clinics on 2031-06-10, 08:00-17:00, told apart by the key Clinic.
      clinicA = await createWorklistDefinition(app.db, {
        typeId: pas.localTypeId,
        name: 'Cataract A1',
        start: '2031-06-10 08:00:00',
        end: '2031-06-10 17:00:00',
        mappings: { Clinic: ['CATA1'], Doctor: [] },
      });
      clinicB = await createWorklistDefinition(app.db, {
        typeId: pas.localTypeId,
        name: 'Glaucoma B2',
        start: '2031-06-10 08:00:00',
        end: '2031-06-10 17:00:00',
        mappings: { Clinic: ['GLAB2'], Doctor: [] },
        displayOrder: 2,
      });
    });
    after(async () => {
      await client?.close();
      await server?.stop();
      await app?.close();
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    });

    const counts = () => Promise.all(BOOKING_TABLES.map((t) => countRows(app.db, t)));

    async function send(text: string): Promise<Ack> {
      const ack = await client.sendAndWait(Hl7Message.parse(text), { timeoutMs: 20_000 });
      const msa = ack.getSegment('MSA');
      return { code: msa?.getField(1)?.toString() ?? '', text: msa?.getField(3)?.toString() ?? '' };
    }

    async function newPatient(): Promise<{ number: string; id: number }> {
      const number = newHospitalNumber();
      assert.equal((await send(adt('A28', number))).code, 'AA');
      const row = await app.db
        .selectFrom('patient_identifier')
        .select('patient_id')
        .where('patient_identifier_type_id', '=', pas.localTypeId)
        .where('value', '=', number)
        .executeTakeFirstOrThrow();
      return { number, id: row.patient_id };
    }

    async function bookingOf(appointmentId: string) {
      const assignment = await app.db
        .selectFrom('pasapi_assignment')
        .select('internal_id')
        .where('resource_type', '=', 'PatientAppointment')
        .where('resource_id', '=', appointmentId)
        .executeTakeFirst();
      if (assignment === undefined) return undefined;
      const row = await app.db
        .selectFrom('worklist_patient')
        .select(['id', 'worklist_id', 'patient_id', 'when'])
        .where('id', '=', assignment.internal_id)
        .executeTakeFirst();
      if (row === undefined) return undefined;
      const attributes = await app.db
        .selectFrom('worklist_patient_attribute as a')
        .innerJoin('worklist_attribute as n', 'n.id', 'a.worklist_attribute_id')
        .select(['n.name', 'a.attribute_value'])
        .where('a.worklist_patient_id', '=', row.id)
        .orderBy('n.name')
        .execute();
      const when = row.when as unknown;
      return {
        id: row.id,
        worklistId: row.worklist_id,
        patientId: row.patient_id,
        when: when instanceof Date ? formatDateTime(when) : String(when).slice(0, 19),
        attributes: Object.fromEntries(attributes.map((a) => [a.name, a.attribute_value])),
      };
    }

    it('books an S12 on the one instance its AIL clinic matches (AA), with AIP as the doctor', async () => {
      const patient = await newPatient();
      const appointmentId = `V${next()}`.slice(0, 40);
      const ack = await send(
        siu({
          event: 'S12',
          hospitalNumber: patient.number,
          appointmentId,
          clinic: 'cata1',
          doctor: 'Surgeon',
        }),
      );
      assert.deepEqual(ack, { code: 'AA', text: '' });
      assert.deepEqual(await bookingOf(appointmentId), {
        id: (await bookingOf(appointmentId))!.id,
        worklistId: clinicA.worklistId,
        patientId: patient.id,
        when: '2031-06-10 09:40:00',
        attributes: { Clinic: 'cata1', Doctor: 'Surgeon' },
      });
    });

    it('moves the booking on an S13 and changes it on an S14 from PV1, keeping its id', async () => {
      const patient = await newPatient();
      const appointmentId = `V${next()}`.slice(0, 40);
      const book = siu({ event: 'S12', hospitalNumber: patient.number, appointmentId, clinic: 'CATA1' });
      assert.equal((await send(book)).code, 'AA');
      const first = await bookingOf(appointmentId);
      const rowsAfterBooking = await counts();

      const moved = await send(
        siu({
          event: 'S13',
          hospitalNumber: patient.number,
          appointmentId,
          start: '203106101415',
          clinic: 'GLAB2',
          doctor: 'Other',
        }),
      );
      assert.equal(moved.code, 'AA', moved.text);
      const afterMove = await bookingOf(appointmentId);
      assert.equal(afterMove?.id, first?.id);
      assert.equal(afterMove?.worklistId, clinicB.worklistId);
      assert.equal(afterMove?.when, '2031-06-10 14:15:00');
      assert.deepEqual(afterMove?.attributes, { Clinic: 'GLAB2', Doctor: 'Other' });

      const modified = await send(
        siu({
          event: 'S14',
          hospitalNumber: patient.number,
          appointmentId,
          start: '203106101500',
          pv1: { clinic: 'GLAB2', doctor: 'Visitdoctor' },
        }),
      );
      assert.equal(modified.code, 'AA', modified.text);
      const afterModify = await bookingOf(appointmentId);
      assert.equal(afterModify?.id, first?.id);
      assert.equal(afterModify?.when, '2031-06-10 15:00:00');
      assert.deepEqual(afterModify?.attributes, { Clinic: 'GLAB2', Doctor: 'Visitdoctor' });
      assert.deepEqual(await counts(), rowsAfterBooking, 'no second booking');
    });

    it('deletes the booking on an S15, and answers AE for a cancel of an unknown appointment', async () => {
      const patient = await newPatient();
      const appointmentId = `V${next()}`.slice(0, 40);
      const rowsBefore = await counts();
      assert.equal(
        (await send(siu({ event: 'S12', hospitalNumber: patient.number, appointmentId, clinic: 'CATA1' })))
          .code,
        'AA',
      );
      const cancelled = await send(siu({ event: 'S15', hospitalNumber: patient.number, appointmentId }));
      assert.equal(cancelled.code, 'AA', cancelled.text);
      assert.equal(await bookingOf(appointmentId), undefined);
      assert.deepEqual(await counts(), rowsBefore);

      const again = await send(siu({ event: 'S17', hospitalNumber: patient.number, appointmentId }));
      assert.equal(again.code, 'AE');
      assert.match(again.text, /Could not find resource for external Id/);
    });

    it('answers AE, writing nothing, for a booking no instance accepts, an unknown patient or a bad start', async () => {
      const patient = await newPatient();
      const cases = [
        {
          text: siu({
            event: 'S12',
            hospitalNumber: patient.number,
            appointmentId: `V${next()}`,
            clinic: 'NOSUCH',
          }),
          reason: /No worklist found for criteria/,
        },
        {
          text: siu({
            event: 'S12',
            hospitalNumber: newHospitalNumber(),
            appointmentId: `V${next()}`,
            clinic: 'CATA1',
          }),
          reason: /no patient holds this local number/,
        },
        {
          text: siu({
            event: 'S12',
            hospitalNumber: patient.number,
            appointmentId: `V${next()}`,
            clinic: 'CATA1',
            start: '203102301000',
          }),
          reason: /SCH-11\.4 is not a date and time of day/,
        },
      ];
      for (const { text, reason } of cases) {
        const rowsBefore = await counts();
        const ack = await send(text);
        assert.equal(ack.code, 'AE', ack.text);
        assert.match(ack.text, reason);
        assert.deepEqual(await counts(), rowsBefore);
      }
    });

    it('answers an S12 sent again with its first answer, booking once', async () => {
      const patient = await newPatient();
      const text = siu({
        event: 'S12',
        hospitalNumber: patient.number,
        appointmentId: `V${next()}`,
        clinic: 'CATA1',
        controlId: `S${next()}`,
      });
      assert.equal((await send(text)).code, 'AA');
      const rows = await counts();
      assert.equal((await send(text)).code, 'AA');
      assert.deepEqual(await counts(), rows);
    });

    it('answers AR for an SIU event not handled (S26)', async () => {
      const rowsBefore = await counts();
      const ack = await send(
        siu({ event: 'S26', hospitalNumber: newHospitalNumber(), appointmentId: `V${next()}` }),
      );
      assert.equal(ack.code, 'AR');
      assert.deepEqual(await counts(), rowsBefore);
    });

    it('merges the MRG-1 patient into the PID patient on an A34, as on an A40', async () => {
      const primary = await newPatient();
      const secondary = await newPatient();
      const ack = await send(adt('A34', primary.number, secondary.number));
      assert.equal(ack.code, 'AA', ack.text);
      const request = await app.db
        .selectFrom('patient_merge_request')
        .select(['primary_id', 'status'])
        .where('secondary_id', '=', secondary.id)
        .execute();
      assert.deepEqual(request, [{ primary_id: primary.id, status: 20 }]);
      const retired = await app.db
        .selectFrom('patient')
        .select('deleted')
        .where('id', '=', secondary.id)
        .executeTakeFirstOrThrow();
      assert.equal(retired.deleted, 1);
    });
  });
});
