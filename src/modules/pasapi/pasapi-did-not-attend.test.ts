/**
 * PASAPI V1 `DidNotAttend` PUT against the real app on every dialect: off by default
 * (`DNA_autogen_enabled`), then an automated Did Not Attend event with its comments for the patient of
 * the body's hospital number and identifier type, on the patient's open episode; remaps of that type's
 * institution; and the refusals, each a 4xx `<Failure>` that wrote nothing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { XMLValidator } from 'fast-xml-parser';
import { countRows, createPatient, createUser } from '../../../test/factories.ts';
import { addIdentifier } from '../../../test/factories-patient.ts';
import type { PasInstallation } from '../../../test/factories-pasapi.ts';
import {
  createPasInstallation,
  newHospitalNumber,
  pasapiPut,
  xmlText,
  xmlTexts,
} from '../../../test/factories-pasapi.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import type { DB } from '../../db/schema.ts';
import { formatDateTime } from '../../db/stored-time.ts';

const WRITTEN_TABLES = ['event', 'episode'] as const satisfies readonly (keyof DB)[];

const stored = (value: unknown): string =>
  value instanceof Date ? formatDateTime(value) : String(value).slice(0, 19);

forEachDialect((dialect) => {
  describe(`PUT /PASAPI/V1/DidNotAttend (${dialect})`, () => {
    let app: TestApp;
    let pas: PasInstallation;
    let auth: Record<string, string>;

    before(async () => {
      // Tests change settings, identifier types and remap rules between requests: nothing kept.
      app = await startTestApp(dialect, { env: { REFERENCE_CACHE_TTL_MS: '0' } });
      pas = await createPasInstallation(app.db);
      auth = { authorization: (await createUser(app.db)).authorization };
    });
    after(async () => app?.close());

    const counts = async () => [
      ...(await Promise.all(WRITTEN_TABLES.map((t) => countRows(app.db, t)))),
      await commentCount(),
    ];
    const commentCount = async () =>
      Number(
        (
          await app.db
            .withTables<{ et_ophcididnotattend_comments: { id: number } }>()
            .selectFrom('et_ophcididnotattend_comments')
            .select((eb) => eb.fn.countAll().as('n'))
            .executeTakeFirstOrThrow()
        ).n,
      );
    const body = (values: { number: string; type?: string; date?: string; comments?: string }) =>
      `<DidNotAttend>
        <HospitalNumber>${values.number}</HospitalNumber>
        <IdentifierType>${values.type ?? pas.typeKey}</IdentifierType>
        <Date>${values.date ?? '2031-06-10'}</Date>
        <Comments>${values.comments ?? 'Did not attend clinic CATA1'}</Comments>
      </DidNotAttend>`;
    const put = (xml: string | undefined, headers: Record<string, string> = auth) =>
      pasapiPut(app, 'DidNotAttend', xml, headers);
    const enable = (value: string) =>
      app.db
        .updateTable('setting_installation')
        .set({ value })
        .where('key', '=', 'DNA_autogen_enabled')
        .execute();

    async function patientWithNumber(): Promise<{ patientId: number; number: string }> {
      const number = newHospitalNumber();
      const { patientId } = await createPatient(app.db);
      await addIdentifier(app.db, patientId, pas.localTypeId, number);
      return { patientId, number };
    }

    async function assertRefused(xml: string | undefined, status: number): Promise<string[]> {
      const before = await counts();
      const response = await put(xml);
      const text = await response.text();
      assert.equal(response.status, status, text);
      assert.match(response.headers.get('content-type') ?? '', /^application\/xml/);
      assert.equal(XMLValidator.validate(text), true);
      assert.deepEqual(await counts(), before, 'a refused request wrote nothing');
      return xmlTexts(text, 'Error');
    }

    it('answers 200 "not created" and writes nothing while DNA_autogen_enabled is off (the default)', async () => {
      const { number } = await patientWithNumber();
      const before = await counts();
      const response = await put(body({ number }));
      const text = await response.text();
      assert.equal(response.status, 200, text);
      assert.equal(
        xmlText(text, 'Message'),
        'DidNotAttend not created as it is disabled in the admin settings.',
      );
      assert.equal(xmlText(text, 'Id'), undefined);
      assert.deepEqual(await counts(), before);
    });

    describe('with DNA_autogen_enabled on', () => {
      before(async () => {
        await app.db
          .insertInto('setting_installation')
          .values({ key: 'DNA_autogen_enabled', value: 'on' })
          .execute();
      });
      after(async () => enable('off'));

      it('creates an automated Did Not Attend event with the comments, on a new episode (201, audited)', async () => {
        const { patientId, number } = await patientWithNumber();
        const response = await put(body({ number }));
        const text = await response.text();
        assert.equal(response.status, 201, text);
        assert.equal(xmlText(text, 'Message'), 'Successfully created DidNotAttend.');
        const eventId = Number(xmlText(text, 'Id'));
        const event = await app.db
          .selectFrom('event as e')
          .innerJoin('event_type as t', 't.id', 'e.event_type_id')
          .innerJoin('episode as p', 'p.id', 'e.episode_id')
          .select([
            't.class_name',
            'p.patient_id',
            'e.event_date',
            'e.is_automated',
            'e.automated_source',
            'e.institution_id',
          ])
          .where('e.id', '=', eventId)
          .executeTakeFirstOrThrow();
        assert.deepEqual(
          { ...event, event_date: stored(event.event_date) },
          {
            class_name: 'OphCiDidNotAttend',
            patient_id: patientId,
            event_date: '2031-06-10 00:00:00',
            is_automated: 1,
            automated_source: 'Entry automatically created by the PAS.',
            institution_id: pas.institutionId,
          },
        );
        const comments = await app.db
          .withTables<{ et_ophcididnotattend_comments: { event_id: number; comment: string | null } }>()
          .selectFrom('et_ophcididnotattend_comments')
          .select('comment')
          .where('event_id', '=', eventId)
          .execute();
        assert.deepEqual(comments, [{ comment: 'Did not attend clinic CATA1' }]);
        const audit = (await app.db
          .selectFrom('audit_event' as keyof DB)
          .selectAll()
          .execute()) as unknown as { action: string; target_ids: string | null; outcome: number }[];
        assert.equal(
          audit.find((r) => r.action === 'pasapi.did-not-attend' && r.target_ids === String(patientId))
            ?.outcome,
          201,
        );
      });

      it("records it in the patient's open episode", async () => {
        const { patientId, number } = await patientWithNumber();
        const episode = await app.db
          .insertInto('episode')
          .values({ patient_id: patientId, firm_id: null, start_date: '2030-01-01 00:00:00' })
          .returning('id')
          .executeTakeFirstOrThrow();
        const episodesBefore = await countRows(app.db, 'episode');
        const response = await put(body({ number }));
        const text = await response.text();
        assert.equal(response.status, 201, text);
        const event = await app.db
          .selectFrom('event')
          .select('episode_id')
          .where('id', '=', Number(xmlText(text, 'Id')))
          .executeTakeFirstOrThrow();
        assert.equal(event.episode_id, episode.id);
        assert.equal(await countRows(app.db, 'episode'), episodesBefore);
      });

      it("applies the remaps of the body's identifier type's institution", async () => {
        const { number } = await patientWithNumber();
        const remap = await app.db
          .insertInto('pasapi_xpath_remap')
          .values({ name: 'DNA text', xpath: '/DidNotAttend/Comments', institution_id: pas.institutionId })
          .returning('id')
          .executeTakeFirstOrThrow();
        await app.db
          .insertInto('pasapi_remap_value')
          .values({ xpath_id: remap.id, input: 'DNA', output: 'Did not attend' })
          .execute();
        try {
          const response = await put(body({ number, comments: 'DNA' }));
          const text = await response.text();
          assert.equal(response.status, 201, text);
          const comments = await app.db
            .withTables<{ et_ophcididnotattend_comments: { event_id: number; comment: string | null } }>()
            .selectFrom('et_ophcididnotattend_comments')
            .select('comment')
            .where('event_id', '=', Number(xmlText(text, 'Id')))
            .executeTakeFirstOrThrow();
          assert.equal(comments.comment, 'Did not attend');
        } finally {
          await app.db.deleteFrom('pasapi_xpath_remap').where('id', '=', remap.id).execute();
        }
      });

      it('refuses an unknown patient, an unknown identifier type, missing elements and a bad date (400)', async () => {
        assert.deepEqual(await assertRefused(body({ number: '99999999' }), 400), ['Patient not found']);
        const { number } = await patientWithNumber();
        assert.deepEqual(await assertRefused(body({ number, type: 'NOPE-1-0' }), 400), [
          "Patient Identifier Type for 'NOPE-1-0' not found.",
        ]);
        assert.deepEqual(await assertRefused('<DidNotAttend><Comments/></DidNotAttend>', 400), [
          'HospitalNumber is required',
          'IdentifierType is required',
          'Date is required',
        ]);
        assert.deepEqual(await assertRefused(body({ number, date: '2031-02-30' }), 400), [
          'invalid date format for Date',
        ]);
      });

      it('refuses bad XML: empty, malformed, another root, an unknown tag, a DTD (400)', async () => {
        const { number } = await patientWithNumber();
        assert.deepEqual(await assertRefused(undefined, 400), ['Missing Resource Body']);
        assert.match((await assertRefused('<DidNotAttend>', 400))[0]!, /Malformed XML/);
        assert.deepEqual(await assertRefused('<Patient/>', 400), [
          'Mismatched root tag Patient for resource type DidNotAttend',
        ]);
        assert.deepEqual(
          await assertRefused(body({ number }).replace('<Date>', '<Room>1</Room><Date>'), 400),
          ['Unrecognised tag Room'],
        );
        assert.match(
          (await assertRefused('<!DOCTYPE d SYSTEM "file:///etc/passwd"><DidNotAttend/>', 400))[0]!,
          /document type declarations/,
        );
      });

      it('answers 401 without credentials and 403 without the API access role, writing nothing', async () => {
        const { number } = await patientWithNumber();
        const before = await counts();
        const anonymous = await put(body({ number }), {});
        assert.equal(anonymous.status, 401);
        const user = await createUser(app.db, { roles: [] });
        const forbidden = await put(body({ number }), { authorization: user.authorization });
        assert.equal(forbidden.status, 403);
        assert.equal(await forbidden.text(), '');
        assert.deepEqual(await counts(), before);
      });
    });
  });
});
