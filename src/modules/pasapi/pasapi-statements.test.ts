/**
 * The statements one PASAPI `Patient` PUT runs, counted through the database's query hook (`onQuery`):
 * with the reference data kept (REFERENCE_CACHE_TTL_MS's default), an update of a known patient's full
 * record reads its identity in one statement, its GP, practice and NHS number's holder in one, its
 * identifiers in one, and updates each of its rows once; a new patient's identifiers and addresses are
 * multi-row inserts. The bounds hold on every dialect (a transaction's begin and commit, and SQLite's
 * savepoint of a shared commit, included; the audit row is not counted).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createUser } from '../../../test/factories.ts';
import type { PasInstallation } from '../../../test/factories-pasapi.ts';
import {
  createGpAndPractice,
  createPasInstallation,
  fullPatientXml,
  newHospitalNumber,
  newNhsNumber,
  pasapiPut,
} from '../../../test/factories-pasapi.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';

// Each bound has one statement of margin: the account's revocation check (at most every 2 s) may fall
// in a request on a loaded machine.
/** A full-record update of a known patient, one address and both numbers. */
const MAX_UPDATE_STATEMENTS = 14;
/** A new patient, one address and both numbers. */
const MAX_CREATE_STATEMENTS = 14;

forEachDialect((dialect) => {
  describe(`PASAPI Patient PUT statements (${dialect})`, () => {
    let app: TestApp;
    let pas: PasInstallation;
    let auth: Record<string, string>;
    const statements: string[] = [];

    before(async () => {
      app = await startTestApp(dialect, {
        // The audit row is written beside the change, maybe after the answer: not counted.
        onQuery: (sql) => {
          if (!/\baudit_event\b/.test(sql)) statements.push(sql);
        },
      });
      pas = await createPasInstallation(app.db);
      await createGpAndPractice(app.db, 'G3258868', 'C82103');
      const user = await createUser(app.db);
      auth = { authorization: user.authorization };
    });
    after(async () => app?.close());

    /** The statements of one PUT, and its status. */
    async function countPut(
      number: string,
      body: string,
    ): Promise<{ status: number; count: number; run: string }> {
      statements.length = 0;
      const response = await pasapiPut(app, `Patient/${number}/identifier-type/${pas.typeKey}`, body, auth);
      await response.text();
      return {
        status: response.status,
        count: statements.length,
        run: statements.map((sql) => sql.slice(0, 60)).join('\n'),
      };
    }

    it('creates and updates a patient in a bounded number of statements', async () => {
      // A first patient loads the reference data (and the account) into the caches.
      const warm = newHospitalNumber();
      assert.equal((await countPut(warm, fullPatientXml({ hospitalNumber: warm }))).status, 201);

      const number = newHospitalNumber();
      const nhsNumber = newNhsNumber();
      const created = await countPut(number, fullPatientXml({ hospitalNumber: number, nhsNumber }));
      assert.equal(created.status, 201);
      const updated = await countPut(
        number,
        fullPatientXml({ hospitalNumber: number, nhsNumber, firstName: 'Changed' }),
      );
      assert.equal(updated.status, 200);
      assert.ok(
        created.count <= MAX_CREATE_STATEMENTS,
        `create: ${created.count} statements:\n${created.run}`,
      );
      assert.ok(
        updated.count <= MAX_UPDATE_STATEMENTS,
        `update: ${updated.count} statements:\n${updated.run}`,
      );
      const patient = await app.db
        .selectFrom('patient_identifier')
        .select('patient_id')
        .where('value', '=', number)
        .executeTakeFirstOrThrow();
      const contact = await app.db
        .selectFrom('patient as p')
        .innerJoin('contact as c', 'c.id', 'p.contact_id')
        .select('c.first_name')
        .where('p.id', '=', patient.patient_id)
        .executeTakeFirstOrThrow();
      assert.equal(contact.first_name, 'Changed');
    });

    it('finds a GP and a practice created after a change that lacked them (they are never kept)', async () => {
      const gpCode = `G${String(process.pid).slice(-4)}${Date.now() % 1000}`;
      const practiceCode = `P${String(process.pid).slice(-4)}${Date.now() % 1000}`;
      const number = newHospitalNumber();
      const body = fullPatientXml({ hospitalNumber: number })
        .replace('<GpCode>G3258868</GpCode>', `<GpCode>${gpCode}</GpCode>`)
        .replace('<PracticeCode>C82103</PracticeCode>', `<PracticeCode>${practiceCode}</PracticeCode>`);
      const path = `Patient/${number}/identifier-type/${pas.typeKey}`;
      const first = await pasapiPut(app, path, body, auth);
      assert.equal(first.status, 201);
      const text = await first.text();
      assert.match(text, new RegExp(`Could not find GP for code ${gpCode}`));
      assert.match(text, new RegExp(`Could not find Practice for code ${practiceCode}`));

      await createGpAndPractice(app.db, gpCode, practiceCode);
      const second = await pasapiPut(app, path, body, auth);
      assert.equal(second.status, 200);
      assert.doesNotMatch(await second.text(), /Could not find/);
      const patient = await app.db
        .selectFrom('patient_identifier as pi')
        .innerJoin('patient as p', 'p.id', 'pi.patient_id')
        .select(['p.gp_id', 'p.practice_id'])
        .where('pi.value', '=', number)
        .executeTakeFirstOrThrow();
      const gp = await app.db
        .selectFrom('gp')
        .select('id')
        .where('nat_id', '=', gpCode)
        .executeTakeFirstOrThrow();
      const practice = await app.db
        .selectFrom('practice')
        .select('id')
        .where('code', '=', practiceCode)
        .executeTakeFirstOrThrow();
      assert.equal(patient.gp_id, gp.id);
      assert.equal(patient.practice_id, practice.id);
    });
  });
});
