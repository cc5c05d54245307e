/**
 * The statements one PASAPI `Patient` PUT runs, counted through the database's query hook (`onQuery`):
 * with the reference data kept (REFERENCE_CACHE_TTL_MS's default), an update of a known patient's full
 * record reads its identity, GP, practice and NHS number's holder in one statement, its identifiers in
 * one, and updates each of its rows once; a new patient's identifiers and addresses are
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

/** A full-record update of a known patient, one address and both numbers. */
const MAX_UPDATE_STATEMENTS = 12;
/** A new patient, one address and both numbers. */
const MAX_CREATE_STATEMENTS = 12;

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
    async function countPut(number: string, body: string): Promise<{ status: number; count: number }> {
      statements.length = 0;
      const response = await pasapiPut(app, `Patient/${number}/identifier-type/${pas.typeKey}`, body, auth);
      await response.text();
      return { status: response.status, count: statements.length };
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
      assert.ok(created.count <= MAX_CREATE_STATEMENTS, `create: ${created.count} statements`);
      assert.ok(updated.count <= MAX_UPDATE_STATEMENTS, `update: ${updated.count} statements`);
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
  });
});
