/**
 * The statements one ADT A08 over MLLP runs, counted through the database's query hook (`onQuery`): with
 * the reference data kept (REFERENCE_CACHE_TTL_MS's default), the duplicate check, PASAPI's patient
 * change (identity in one statement, identifiers in one) and the message's `hl7_message` row. The bound
 * holds on every dialect (begin, commit and SQLite's savepoint included; the audit row is not counted).
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { PasFeed } from '../../../test/factories-hl7.ts';
import {
  adtMessage,
  createFeedIdentifierType,
  newControlId,
  pasFeedEnv,
  startPasFeed,
} from '../../../test/factories-hl7.ts';
import { newHospitalNumber } from '../../../test/factories-pasapi.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';

/** An A08 of a known patient (name, date of birth, gender, one address). */
const MAX_A08_STATEMENTS = 14;

forEachDialect((dialect) => {
  describe(`HL7 A08 statements (${dialect})`, () => {
    let app: TestApp;
    let feed: PasFeed;
    let dir: string;
    const statements: string[] = [];

    before(async () => {
      dir = await mkdtemp(path.join(tmpdir(), 'cra-hl7-count-'));
      app = await startTestApp(dialect, {
        env: await pasFeedEnv(dir),
        // The audit row is written beside the change, maybe after the answer: not counted.
        onQuery: (sql) => {
          if (!/\baudit_event\b/.test(sql)) statements.push(sql);
        },
      });
      await createFeedIdentifierType(app.db);
      feed = await startPasFeed(app);
    });
    after(async () => {
      await feed?.stop();
      await app?.close();
      if (dir !== undefined) await rm(dir, { recursive: true, force: true });
    });

    it('applies an A08 in a bounded number of statements', async () => {
      // A first patient loads the reference data into the cache.
      const warm = newHospitalNumber();
      const first = await feed.send(
        adtMessage({ event: 'A28', controlId: newControlId(), hospitalNumber: warm }),
      );
      assert.equal(first.code, 'AA');
      const number = newHospitalNumber();
      const created = await feed.send(
        adtMessage({ event: 'A28', controlId: newControlId(), hospitalNumber: number }),
      );
      assert.equal(created.code, 'AA');
      statements.length = 0;
      const updated = await feed.send(
        adtMessage({ event: 'A08', controlId: newControlId(), hospitalNumber: number, surname: 'Changed' }),
      );
      const count = statements.length;
      assert.equal(updated.code, 'AA');
      assert.ok(count <= MAX_A08_STATEMENTS, `A08: ${count} statements`);
      const row = await app.db
        .selectFrom('patient_identifier as pi')
        .innerJoin('patient as p', 'p.id', 'pi.patient_id')
        .innerJoin('contact as c', 'c.id', 'p.contact_id')
        .select('c.last_name')
        .where('pi.value', '=', number)
        .executeTakeFirstOrThrow();
      assert.equal(row.last_name, 'Changed');
    });
  });
});
