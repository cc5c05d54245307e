/**
 * Hostile biometry files through the queue, on every dialect: an "IOLMaster 700" object whose 99CZM block
 * carries thousands of lens names, and one with 90,000 calculations of one lens, are refused with their
 * reason before anything is written; a file within the caps but with many rows is stopped by the routine's
 * time limit between its chunks (the engine's clock, which the test moves on each turn of the event
 * loop: a filing that never gave the loop a turn would not see it move); a new lens type is held for
 * review unless the site offers new lenses, and an HTML- or SQL-looking name is stored as it is.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { closeDicomPools } from '../src/modules/dicom/index.ts';
import type { QueueEngine } from '../src/modules/request-queue/index.ts';
import { createQueueEngine } from '../src/modules/request-queue/index.ts';
import { defaultRoutineCatalog } from '../src/modules/filing/index.ts';
import type { PatientTags, StudyTags } from './biometry-objects.ts';
import { iolMasterCalculations } from './biometry-objects.ts';
import { newUid } from './dicom-instances.ts';
import type { TestUser } from './factories.ts';
import { createInstitution, createPatient, createUser } from './factories.ts';
import { ConsoleClient, createOperator } from './factories-console.ts';
import { addIdentifier, createIdentifierType } from './factories-patient.ts';
import { executionsOf, routinesOf, submitToQueue } from './factories-queue.ts';
import type { TestApp } from './harness.ts';
import { forEachDialect, startTestApp } from './harness.ts';

// Tables outside the service's shared row types (the biometry module's own).
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyDb = Kysely<any>;

const names = (count: number, prefix = 'Lens') =>
  Array.from({ length: count }, (_, i) => `${prefix} ${String(i).padStart(5, '0')}`);

/** Rows of the tables filing writes, counted: what a refused file must leave as it was. */
interface BiometryCounts {
  readonly imported: number;
  readonly lenses: number;
  readonly formulas: number;
  readonly iolRows: number;
  readonly reviews: number;
  readonly events: number;
}

async function biometryCounts(db: AnyDb, patientId: number): Promise<BiometryCounts> {
  const count = async (table: string) =>
    Number(
      (
        await db
          .selectFrom(table)
          .select(({ fn }) => fn.countAll().as('n'))
          .executeTakeFirstOrThrow()
      ).n,
    );
  const events = await db
    .selectFrom('ophinbiometry_imported_events')
    .select(({ fn }) => fn.countAll().as('n'))
    .where('patient_id', '=', patientId)
    .executeTakeFirstOrThrow();
  return {
    imported: Number(events.n),
    lenses: await count('ophinbiometry_lenstype_lens'),
    formulas: await count('ophinbiometry_calculation_formula'),
    iolRows: await count('et_ophinbiometry_iol_ref_values'),
    reviews: await count('biometry_lens_review'),
    events: await count('event'),
  };
}

forEachDialect((dialect) => {
  describe(`Hostile biometry files (${dialect})`, () => {
    let app: TestApp;
    let db: AnyDb;
    let user: TestUser;
    let typeId: number;
    /** The engine's clock: moved on by `tick` while a test lets it. */
    let clockMs = Date.now();
    let engine: QueueEngine;

    before(async () => {
      app = await startTestApp(dialect, {
        env: {
          BIOMETRY_MAX_LENSES_PER_EYE: '1000',
          BIOMETRY_MAX_FORMULAS_PER_EYE: '10',
          BIOMETRY_MAX_CALCULATIONS_PER_EYE: '1000',
        },
      });
      db = app.db as AnyDb;
      user = await createUser(app.db);
      engine = createQueueEngine({
        database: app.database,
        config: app.config,
        catalog: defaultRoutineCatalog,
        now: () => new Date(clockMs),
      });
      const institutionId = await createInstitution(app.db);
      typeId = await createIdentifierType(app.db, { institution_id: institutionId });
    });
    after(async () => {
      await closeDicomPools();
      await app.close();
    });

    async function newPatient(): Promise<{ patientId: number; tags: PatientTags }> {
      const id = `${Math.floor(Math.random() * 9_000_000) + 1_000_000}`;
      const patient = await createPatient(app.db, { patient: { dob: '1960-01-02', gender: 'F' } });
      await addIdentifier(app.db, patient.patientId, typeId, id);
      return { patientId: patient.patientId, tags: { id, dob: '19600102', sex: 'F' } };
    }

    const newStudy = (): StudyTags => ({
      studyUid: newUid(),
      sopUid: newUid(),
      acquisition: '20240301103512',
    });

    /** Queues `bytes` and drains the queue: each routine's outcome, and FILE_BIOMETRY's last log. */
    async function file(
      bytes: Buffer,
      options: { engine?: QueueEngine } = {},
    ): Promise<{ ran: string[]; log: string }> {
      const form = new FormData();
      form.append('scan', new Blob([new Uint8Array(bytes)], { type: 'application/dicom' }), 'scan.dcm');
      const response = await submitToQueue(app, user.authorization, {
        query: 'request_type=dicom_request',
        body: form,
      });
      assert.equal(response.status, 200, await response.clone().text());
      const { request_id: requestId } = (await response.json()) as { request_id: number };
      const ran: string[] = [];
      for (let i = 0; i < 20; i++) {
        const outcome = await (options.engine ?? engine).step();
        if (outcome.kind !== 'ran') break;
        ran.push(`${outcome.routineName}:${outcome.status}`);
        if (outcome.routineName === 'FILE_BIOMETRY' && outcome.status !== 'COMPLETE') break;
      }
      const routine = (await routinesOf(app.db, requestId)).find((r) => r.routine_name === 'FILE_BIOMETRY');
      const log =
        routine === undefined ? '' : ((await executionsOf(app.db, routine.id)).at(-1)?.log_text ?? '');
      return { ran, log };
    }

    it('refuses a file with thousands of lens names with its reason, and writes nothing', async () => {
      const { patientId, tags } = await newPatient();
      const before = await biometryCounts(db, patientId);
      const { ran, log } = await file(
        await iolMasterCalculations(tags, newStudy(), { lensNames: names(3000), eyes: ['R'] }),
      );
      assert.ok(ran.includes('FILE_BIOMETRY:FAILED'), ran.join(', '));
      assert.match(log, /Biometry file refused: more than 1000 IOL calculations for the right eye/);
      assert.deepEqual(await biometryCounts(db, patientId), before);
    });

    it('refuses a file beyond the per-eye lens cap with the setting named, and writes nothing', async () => {
      const { patientId, tags } = await newPatient();
      const before = await biometryCounts(db, patientId);
      const { ran, log } = await file(
        await iolMasterCalculations(tags, newStudy(), { lensNames: names(11, 'Capped'), eyes: ['L'] }),
        {
          engine: createQueueEngine({
            database: app.database,
            config: { ...app.config, biometryMaxLensesPerEye: 10 },
            catalog: defaultRoutineCatalog,
          }),
        },
      );
      assert.ok(ran.includes('FILE_BIOMETRY:FAILED'), ran.join(', '));
      assert.match(
        log,
        /Biometry file refused: 11 lenses for the left eye, more than the 10 allowed \(BIOMETRY_MAX_LENSES_PER_EYE\)/,
      );
      assert.deepEqual(await biometryCounts(db, patientId), before);
    });

    it("refuses a file whose number is beyond its decimal column's range with the column named, and writes nothing", async () => {
      // et_ophinbiometry_measurement.axial_length_right is decimal(6,2): PostgreSQL and MariaDB in
      // strict mode fail the statement on 123456.5, SQLite would store it.
      const { patientId, tags } = await newPatient();
      const before = await biometryCounts(db, patientId);
      const { ran, log } = await file(
        await iolMasterCalculations(tags, newStudy(), { lensNames: ['SN60WF'], axialLengthMm: 123456.5 }),
      );
      assert.ok(ran.includes('FILE_BIOMETRY:FAILED'), ran.join(', '));
      assert.match(
        log,
        /Biometry file refused: et_ophinbiometry_measurement\.axial_length_right would be a value outside the column's range \(-9999\.99 to 9999\.99\)/,
      );
      assert.doesNotMatch(log, /123456/, 'the value is not logged');
      assert.deepEqual(await biometryCounts(db, patientId), before);
    });

    it('refuses a file with 90,000 calculations of one lens on the reading thread, and writes nothing', async () => {
      const { patientId, tags } = await newPatient();
      const before = await biometryCounts(db, patientId);
      const { ran, log } = await file(
        await iolMasterCalculations(tags, newStudy(), {
          lensNames: Array.from({ length: 90_000 }, () => 'SN60WF'),
          isBare: true,
        }),
      );
      assert.ok(ran.includes('FILE_BIOMETRY:FAILED'), ran.join(', '));
      assert.match(log, /Biometry file refused: more than 1000 IOL calculations for the right eye/);
      assert.deepEqual(await biometryCounts(db, patientId), before);
    });

    it('stops a filing within the caps at its time limit between chunks, and keeps none of its rows', async () => {
      const { patientId, tags } = await newPatient();
      const bytes = await iolMasterCalculations(tags, newStudy(), {
        lensNames: names(1000, 'Slow'),
        eyes: ['R', 'L'],
      });
      const before = await biometryCounts(db, patientId);
      // Every turn of the event loop is 5 s of the engine's clock: FILE_BIOMETRY's 60 s pass after 12 turns.
      let isTicking = true;
      const tick = () => {
        clockMs += 5_000;
        if (isTicking) setImmediate(tick);
      };
      setImmediate(tick);
      let outcome: { ran: string[]; log: string };
      try {
        outcome = await file(bytes);
      } finally {
        isTicking = false;
      }
      assert.ok(outcome.ran.includes('FILE_BIOMETRY:RETRY'), outcome.ran.join(', '));
      assert.match(outcome.log, /Routine timed out after 60000 ms/);
      assert.deepEqual(await biometryCounts(db, patientId), before);

      // The same file with the clock still: filed whole, its new lenses held for review.
      const retried = await file(bytes);
      assert.ok(retried.ran.includes('FILE_BIOMETRY:COMPLETE'), retried.ran.join(', '));
      const after = await biometryCounts(db, patientId);
      assert.equal(after.imported, 1);
      assert.equal(after.lenses - before.lenses, 1000);
      assert.equal(after.reviews - before.reviews, 1000);
      assert.equal(after.iolRows - before.iolRows, 1000);
    });

    it('holds a new lens type for review (inactive, for no institution), its HTML- and SQL-looking name stored as it is', async () => {
      const { patientId, tags } = await newPatient();
      const hostile = [`<img src=x onerror=alert(1)>`, `x'); DROP TABLE patient; --`];
      const { ran } = await file(
        await iolMasterCalculations(tags, newStudy(), { lensNames: ['SN60WF', ...hostile] }),
      );
      assert.ok(ran.includes('FILE_BIOMETRY:COMPLETE'), ran.join(', '));
      const lenses = await db
        .selectFrom('ophinbiometry_lenstype_lens as l')
        .leftJoin('ophinbiometry_lenstype_lens_institution as li', 'li.lenstype_lens_id', 'l.id')
        .leftJoin('biometry_lens_review as r', 'r.lenstype_lens_id', 'l.id')
        .select(['l.name', 'l.display_name', 'l.active', 'li.institution_id', 'r.request_id'])
        .where('l.name', 'in', ['SN60WF', ...hostile])
        .orderBy('l.id')
        .execute();
      assert.deepEqual(
        lenses.map((l): unknown[] => [
          l.name,
          l.display_name,
          Number(l.active),
          l.institution_id,
          l.request_id === null,
        ]),
        [
          // The seeded lens stays as it was, listed for the installation's institutions.
          ...lenses
            .filter((l) => l.name === 'SN60WF')
            .map((l): unknown[] => ['SN60WF', 'SN60WF', 1, l.institution_id, true]),
          [hostile[0], hostile[0], 0, null, false],
          [hostile[1], hostile[1], 0, null, false],
        ],
      );
      assert.ok(await db.selectFrom('patient').select('id').where('id', '=', patientId).executeTakeFirst());
    });

    it("lists the held lens types on the console's Biometry lenses page, their names escaped", async () => {
      const { tags } = await newPatient();
      const name = `<script>alert("held")</script> Lens`;
      const { ran } = await file(await iolMasterCalculations(tags, newStudy(), { lensNames: [name] }));
      assert.ok(ran.includes('FILE_BIOMETRY:COMPLETE'), ran.join(', '));
      const lens = await db
        .selectFrom('ophinbiometry_lenstype_lens')
        .select('id')
        .where('name', '=', name)
        .executeTakeFirstOrThrow();
      const operator = await createOperator(app.db);
      const client = new ConsoleClient(app);
      assert.equal((await client.signIn(operator)).status, 303);
      const page = await client.get('/console/biometry-lenses');
      assert.equal(page.status, 200);
      const html = await page.text();
      assert.ok(
        html.includes('&lt;script&gt;alert(&quot;held&quot;)&lt;/script&gt; Lens'),
        'the name, escaped',
      );
      assert.ok(!html.includes('<script>alert('), 'never the raw name');
      assert.match(html, new RegExp(`<td class="num">${lens.id}</td>`));

      // Activated in OpenEyes's lens admin: off the list.
      await db
        .updateTable('ophinbiometry_lenstype_lens')
        .set({ active: 1 })
        .where('id', '=', lens.id)
        .execute();
      const after = await (await client.get('/console/biometry-lenses')).text();
      assert.ok(!after.includes(`<td class="num">${lens.id}</td>`), 'an active lens is not listed');
    });

    it('offers a new lens type at once where the site opts in (BIOMETRY_OFFER_NEW_LENSES=on)', async () => {
      const { tags } = await newPatient();
      const offering = createQueueEngine({
        database: app.database,
        config: { ...app.config, biometryOffersNewLenses: true },
        catalog: defaultRoutineCatalog,
      });
      const institution = await db
        .selectFrom('institution')
        .select('id')
        .where('remote_id', '=', app.config.institutionCode)
        .executeTakeFirst();
      const { ran } = await file(
        await iolMasterCalculations(tags, newStudy(), { lensNames: ['Offered Lens 1'] }),
        { engine: offering },
      );
      assert.ok(ran.includes('FILE_BIOMETRY:COMPLETE'), ran.join(', '));
      const lens = await db
        .selectFrom('ophinbiometry_lenstype_lens as l')
        .leftJoin('biometry_lens_review as r', 'r.lenstype_lens_id', 'l.id')
        .select(['l.id', 'l.active', 'r.id as review_id'])
        .where('l.name', '=', 'Offered Lens 1')
        .executeTakeFirstOrThrow();
      assert.deepEqual([Number(lens.active), lens.review_id], [1, null]);
      const listed = await db
        .selectFrom('ophinbiometry_lenstype_lens_institution')
        .select('institution_id')
        .where('lenstype_lens_id', '=', lens.id)
        .execute();
      assert.deepEqual(
        listed.map((l): number => Number(l.institution_id)),
        institution === undefined ? [] : [institution.id],
      );
    });
  });
});
