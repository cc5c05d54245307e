import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { TestDatabase } from '../../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../../test/harness.ts';
import { countRows } from '../../../test/factories.ts';
import { runCli } from '../../../test/run-cli.ts';
import { loadConfig } from '../../config.ts';
import { verifyPassword } from '../user/index.ts';
import type { GenerateResult } from './index.ts';
import {
  DEMO_PASSWORD,
  demoPatientAt,
  demoStartupLines,
  generateDemoPopulation,
  loadDemoData,
} from './index.ts';

const PATIENTS = 2000;

forEachDialect((dialect) => {
  describe(`demo population (${dialect})`, () => {
    let t: TestDatabase;
    let first: GenerateResult;
    before(async () => {
      t = await createTestDatabase(dialect);
      first = await generateDemoPopulation(t.database, {
        patients: PATIENTS,
        institutionCode: 'NEW',
        chunkSize: 700,
      });
    });
    after(async () => {
      await t.drop();
    });

    it('creates the local and national identifier types with their display order', async () => {
      const types = await t.db
        .selectFrom('patient_identifier_type as pit')
        .innerJoin('institution as i', 'i.id', 'pit.institution_id')
        .select([
          'pit.usage_type',
          'pit.short_title',
          'pit.pad',
          'pit.spacing_rule',
          'pit.unique_row_string',
          'i.remote_id',
          'i.name',
        ])
        .orderBy('pit.id')
        .execute();
      assert.deepEqual(
        types.map((r) => [r.usage_type, r.short_title, r.pad, r.spacing_rule, r.remote_id]),
        [
          ['LOCAL', 'Hos Num', '%07s', null, 'NEW'],
          ['GLOBAL', 'NHS', null, '### ### ####', 'NHS'],
        ],
      );
      assert.equal(types[0]!.unique_row_string, `LOCAL-${first.reference.localInstitutionId}-0`);
      assert.equal(types[1]!.name, 'National Health Service');
      const orders = await t.db
        .selectFrom('patient_identifier_type_display_order')
        .select([
          'patient_identifier_type_id',
          'display_order',
          'searchable',
          'search_protocol_prefix',
          'institution_id',
        ])
        .orderBy('display_order')
        .execute();
      assert.deepEqual(orders, [
        {
          patient_identifier_type_id: first.reference.localTypeId,
          display_order: 1,
          searchable: 1,
          search_protocol_prefix: null,
          institution_id: first.reference.localInstitutionId,
        },
        {
          patient_identifier_type_id: first.reference.globalTypeId,
          display_order: 2,
          searchable: 1,
          search_protocol_prefix: 'nhs',
          institution_id: first.reference.localInstitutionId,
        },
      ]);
    });

    it('gives each patient one unique hospital number and one unique national number', async () => {
      assert.equal(await countRows(t.db, 'patient'), PATIENTS);
      const active = await t.db
        .selectFrom('patient_identifier')
        .select(['patient_identifier_type_id', 'value', 'patient_id'])
        .where('deleted', '=', 0)
        .execute();
      const local = active.filter((r) => r.patient_identifier_type_id === first.reference.localTypeId);
      const national = active.filter((r) => r.patient_identifier_type_id === first.reference.globalTypeId);
      assert.equal(local.length, PATIENTS);
      assert.equal(national.length, PATIENTS);
      assert.equal(new Set(local.map((r) => r.value)).size, PATIENTS);
      assert.equal(new Set(national.map((r) => r.value)).size, PATIENTS);
      assert.ok(local.every((r) => /^\d{7}$/.test(r.value)));
      assert.ok(national.every((r) => /^\d{10}$/.test(r.value)));
    });

    it('makes some patients deceased, some soft-deleted and some with a deleted former number', async () => {
      const patients = await t.db
        .selectFrom('patient')
        .select(['is_deceased', 'date_of_death', 'dob', 'deleted', 'gender'])
        .execute();
      const deceased = patients.filter((p) => p.is_deceased === 1);
      assert.ok(
        deceased.length >= PATIENTS * 0.01 && deceased.length <= PATIENTS * 0.04,
        `${deceased.length} deceased`,
      );
      assert.ok(deceased.every((p) => p.date_of_death !== null && p.date_of_death > p.dob!));
      const deleted = patients.filter((p) => p.deleted === 1).length;
      assert.ok(deleted >= 1 && deleted <= PATIENTS * 0.02, `${deleted} deleted`);
      assert.deepEqual(new Set(patients.map((p) => p.gender)), new Set(['M', 'F', 'U']));
      const dobs = patients.map((p) => p.dob!).sort();
      assert.ok(dobs[0]! >= '1920-01-01' && dobs.at(-1)! <= '2020-12-31');
      const formerNumbers = (await countRows(t.db, 'patient_identifier')) - 2 * PATIENTS;
      assert.ok(
        formerNumbers >= PATIENTS * 0.03 && formerNumbers <= PATIENTS * 0.08,
        `${formerNumbers} former numbers`,
      );
    });

    it('stores what demoPatientAt(k) computes for patient k', async () => {
      for (const k of [0, 1, 777, PATIENTS - 1]) {
        const expected = demoPatientAt(k);
        const row = await t.db
          .selectFrom('patient as p')
          .innerJoin('contact as c', 'c.id', 'p.contact_id')
          .innerJoin('patient_identifier as pi', 'pi.patient_id', 'p.id')
          .select(['c.first_name', 'c.last_name', 'p.dob', 'p.gender', 'pi.value'])
          .where('p.id', '=', first.firstPatientId + k)
          .where('pi.patient_identifier_type_id', '=', first.reference.localTypeId)
          .where('pi.deleted', '=', 0)
          .executeTakeFirstOrThrow();
        assert.deepEqual(row, {
          first_name: expected.firstName,
          last_name: expected.lastName,
          dob: expected.dob,
          gender: expected.gender,
          value: expected.hospitalNumber,
        });
      }
    });

    it('continues after the existing demo patients when run again', async () => {
      const second = await generateDemoPopulation(t.database, { patients: 10, institutionCode: 'NEW' });
      assert.equal(second.firstIndex, PATIENTS);
      assert.equal(second.firstPatientId, first.firstPatientId + PATIENTS);
      assert.deepEqual(second.reference, first.reference);
      assert.equal(await countRows(t.db, 'patient'), PATIENTS + 10);
      // The sequence moved: a patient created normally gets the next id.
      const contact = await t.db
        .insertInto('contact')
        .values({ first_name: 'x' })
        .returning('id')
        .executeTakeFirstOrThrow();
      const row = await t.db
        .insertInto('patient')
        .values({ contact_id: contact.id })
        .returning('id')
        .executeTakeFirstOrThrow();
      assert.equal(row.id, first.firstPatientId + PATIENTS + 10);
    });
  });

  describe(`loadDemoData (${dialect})`, () => {
    let t: TestDatabase;
    before(async () => {
      t = await createTestDatabase(dialect);
    });
    after(async () => {
      await t.drop();
    });

    it('creates patients, CVI events with e-sign elements and unique codes, and the demo account', async () => {
      const config = loadConfig(t.env);
      const account = await loadDemoData({ database: t.database, files: t.files, config });
      assert.equal(account?.username, 'demo');
      assert.equal(account?.password, DEMO_PASSWORD);
      assert.ok((await countRows(t.db, 'patient')) >= 100);
      const login = await t.db
        .selectFrom('user_authentication')
        .select(['user_id', 'password_hash'])
        .where('username', '=', 'demo')
        .executeTakeFirstOrThrow();
      assert.equal(await verifyPassword(DEMO_PASSWORD, login.password_hash), true);
      const roles = await t.db
        .selectFrom('authassignment')
        .select('itemname')
        .where('userid', '=', String(login.user_id))
        .execute();
      assert.deepEqual(roles, [{ itemname: 'API access' }]);
      // The console account, with the role of each console screen.
      assert.deepEqual(account?.operator, { username: 'operator', password: 'operator-password-change-me' });
      const operator = await t.db
        .selectFrom('user_authentication')
        .select(['user_id', 'password_hash'])
        .where('username', '=', 'operator')
        .executeTakeFirstOrThrow();
      assert.equal(await verifyPassword('operator-password-change-me', operator.password_hash), true);
      const operatorRoles = await t.db
        .selectFrom('authassignment')
        .select('itemname')
        .where('userid', '=', String(operator.user_id))
        .orderBy('itemname')
        .execute();
      assert.deepEqual(
        operatorRoles.map((r) => r.itemname),
        ['Edit Payload Processor', 'TaskViewClinical', 'View Audit Log'],
      );

      const codes = await t.db
        .selectFrom('unique_codes as uc')
        .innerJoin('unique_codes_mapping as m', 'm.unique_code_id', 'uc.id')
        .innerJoin('event as e', 'e.id', 'm.event_id')
        .innerJoin('event_type as et', 'et.id', 'e.event_type_id')
        .innerJoin('et_ophcocvi_esign as es', 'es.event_id', 'e.id')
        .innerJoin('episode as ep', 'ep.id', 'e.episode_id')
        .select(['uc.code', 'et.class_name', 'et.name', 'es.id as elementId'])
        .execute();
      assert.ok(codes.length >= 3);
      for (const c of codes) {
        assert.match(c.code, /^[A-Z2-9]{6}$/);
        assert.equal(c.class_name, 'OphCoCvi');
        assert.equal(c.name, 'CVI');
      }
      const elementType = await t.db
        .selectFrom('element_type')
        .select(['id', 'name', 'table_name'])
        .where('class_name', '=', 'OEModule\\OphCoCvi\\models\\Element_OphCoCvi_Esign')
        .executeTakeFirstOrThrow();
      assert.deepEqual(
        { name: elementType.name, table_name: elementType.table_name },
        { name: 'E-Sign', table_name: 'et_ophcocvi_esign' },
      );
      // The codes handed back (and printed at start) name each event's e-sign element as a pad would.
      assert.deepEqual(
        [...(account?.signatureCodes ?? [])].sort((a, b) => a.code.localeCompare(b.code)),
        codes
          .map((c) => ({
            code: c.code,
            extraInfo: JSON.stringify({ e_id: c.elementId, e_t_id: elementType.id }),
          }))
          .sort((a, b) => a.code.localeCompare(b.code)),
      );
    });

    it('returns the account and adds nothing when the demo account exists', async () => {
      const patients = await countRows(t.db, 'patient');
      const account = await loadDemoData({ database: t.database, files: t.files, config: loadConfig(t.env) });
      assert.equal(account?.username, 'demo');
      assert.equal(await countRows(t.db, 'patient'), patients);
      assert.equal(account?.signatureCodes, undefined, 'the codes are handed back only when created');
    });

    it('lists the demo unique codes again with `demo codes`, as the first start printed them', async () => {
      const events = await t.db.selectFrom('et_ophcocvi_esign').select('event_id').execute();
      assert.equal(events.length, 5);
      const listed = await runCli(t.env, ['demo', 'codes']);
      assert.equal(listed.status, 0, listed.stderr);
      const lines = listed.stdout.trim().split('\n');
      assert.equal(lines.length, 5, listed.stdout);
      for (const line of lines) {
        assert.match(
          line,
          /^demo unique code for sign\/add: unique_identifier "[A-Z2-9]{6}", extra_info \{"e_id":\d+,"e_t_id":\d+\}$/,
        );
      }
      const elementType = await t.db
        .selectFrom('element_type')
        .select('id')
        .where('table_name', '=', 'et_ophcocvi_esign')
        .executeTakeFirstOrThrow();
      const mapped = await t.db
        .selectFrom('unique_codes as uc')
        .innerJoin('unique_codes_mapping as m', 'm.unique_code_id', 'uc.id')
        .innerJoin('et_ophcocvi_esign as es', 'es.event_id', 'm.event_id')
        .select(['uc.code', 'es.id as elementId'])
        .orderBy('m.event_id')
        .execute();
      assert.deepEqual(
        lines,
        demoStartupLines({
          username: '',
          password: '',
          operator: { username: '', password: '' },
          signatureCodes: mapped.map((r) => ({
            code: r.code,
            extraInfo: JSON.stringify({ e_id: r.elementId, e_t_id: elementType.id }),
          })),
        }).slice(2),
      );
    });
  });

  describe(`demo codes without demo data (${dialect})`, () => {
    let t: TestDatabase;
    before(async () => {
      t = await createTestDatabase(dialect);
    });
    after(async () => {
      await t.drop();
    });

    it('refuses with a clear message and exit status 2', async () => {
      const listed = await runCli(t.env, ['demo', 'codes']);
      assert.equal(listed.status, 2);
      assert.equal(listed.stdout, '');
      assert.match(listed.stderr, /This database has no demo data \(no demo account "demo"\)/);
    });
  });
});
