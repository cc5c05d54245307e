/**
 * A later IOLMaster file of a study whose measurements were changed by hand on the device, filed through
 * the queue on each database: the measurement row is updated, the IOL table row it changes is kept with
 * `active` = 0 beside a new active row (the earlier calculation stays on record), the other lens's row is
 * untouched, and the same file again changes nothing.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Kysely } from 'kysely';
import { iolMaster500 } from '../../../test/biometry-objects.ts';
import { changeIolMasterRightEyeByHand, editDeviceObject } from '../../../test/device-objects.ts';
import { newUid } from '../../../test/dicom-instances.ts';
import type { TestUser } from '../../../test/factories.ts';
import { createInstitution, createPatient, createUser } from '../../../test/factories.ts';
import { addIdentifier, createIdentifierType } from '../../../test/factories-patient.ts';
import { submitToQueue } from '../../../test/factories-queue.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import { closeDicomPools } from '../dicom/index.ts';
import type { QueueEngine } from '../request-queue/index.ts';
import { createQueueEngine } from '../request-queue/index.ts';
import { defaultRoutineCatalog } from '../filing/index.ts';

forEachDialect((dialect) => {
  describe(`hand-changed biometry of a study filed again (${dialect})`, () => {
    let app: TestApp;
    // Tables outside the service's shared row types (the biometry module's own).
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    let db: Kysely<any>;
    let user: TestUser;
    let engine: QueueEngine;
    let typeId: number;

    before(async () => {
      app = await startTestApp(dialect);
      db = app.db;
      user = await createUser(app.db);
      engine = createQueueEngine({
        database: app.database,
        config: app.config,
        catalog: defaultRoutineCatalog,
      });
      const institutionId = await createInstitution(app.db);
      typeId = await createIdentifierType(app.db, { institution_id: institutionId });
    });
    after(async () => {
      await closeDicomPools();
      await app.close();
    });

    async function file(bytes: Buffer): Promise<void> {
      const form = new FormData();
      form.append('scan', new Blob([new Uint8Array(bytes)], { type: 'application/dicom' }), 'scan.dcm');
      const response = await submitToQueue(app, user.authorization, {
        query: 'request_type=dicom_request',
        body: form,
      });
      assert.equal(response.status, 200, await response.clone().text());
      const ran: string[] = [];
      for (let i = 0; i < 30; i++) {
        const outcome = await engine.step();
        if (outcome.kind !== 'ran') break;
        ran.push(`${outcome.routineName}:${outcome.status}`);
      }
      assert.ok(
        ran.includes('FILE_BIOMETRY:COMPLETE') && ran.every((r) => r.endsWith(':COMPLETE')),
        ran.join(),
      );
    }

    it('keeps the IOL row of the earlier measurements inactive beside a new one, and a re-send changes nothing', async () => {
      const id = `${Math.floor(Math.random() * 9_000_000) + 1_000_000}`;
      const { patientId } = await createPatient(app.db, { patient: { dob: '1960-01-02', gender: 'F' } });
      await addIdentifier(app.db, patientId, typeId, id);
      const tags = { id, dob: '19600102', sex: 'F' } as const;
      const study = { studyUid: newUid(), acquisition: '20240301103512' };
      const right = await iolMaster500(tags, { ...study, sopUid: newUid() }, { eyes: ['R'] });
      await file(right);
      await file(await iolMaster500(tags, { ...study, sopUid: newUid() }, { eyes: ['L'] }));
      const { event_id: eventId } = await db
        .selectFrom('ophinbiometry_imported_events')
        .select('event_id')
        .where('patient_id', '=', patientId)
        .executeTakeFirstOrThrow();
      const iolRows = () =>
        db
          .selectFrom('et_ophinbiometry_iol_ref_values as v')
          .innerJoin('ophinbiometry_lenstype_lens as l', 'l.id', 'v.lens_id')
          .select([
            'v.id',
            'l.name',
            'v.active',
            'v.eye_id',
            'v.iol_ref_values_right',
            'v.iol_ref_values_left',
          ])
          .where('v.event_id', '=', eventId)
          .orderBy('v.id')
          .execute();
      const [rightLens, leftLens] = await iolRows();
      assert.deepEqual(
        [rightLens?.name, Number(rightLens?.active), leftLens?.name, Number(leftLens?.active)],
        ['SN60WF', 1, 'Acme Lens 9', 1],
      );

      const changed = await editDeviceObject(right, changeIolMasterRightEyeByHand);
      await file(changed);
      const rows = await iolRows();
      assert.deepEqual(
        rows.map((r): unknown[] => [
          r.name,
          Number(r.active),
          JSON.parse(String(r.iol_ref_values_right ?? 'null')),
        ]),
        [
          ['SN60WF', 0, { IOL: [21, 21.5], REF: [0.31, -0.02] }],
          ['Acme Lens 9', 1, null],
          ['SN60WF', 1, { IOL: [22.5, 21.5], REF: [0.31, -0.02] }],
        ],
      );
      assert.equal(rows[1]!.id, leftLens!.id, "the other lens's row is untouched");
      const measurement = await db
        .selectFrom('et_ophinbiometry_measurement')
        .selectAll()
        .where('event_id', '=', eventId)
        .execute();
      assert.equal(measurement.length, 1);
      assert.ok(Math.abs(Number(measurement[0]!.k1_right) - 43.6) < 0.005, String(measurement[0]!.k1_right));
      assert.equal(Number(measurement[0]!.eye_id), 3);

      const before = JSON.stringify(await iolRows());
      await file(changed);
      assert.equal(JSON.stringify(await iolRows()), before, 're-sending the file changes nothing');
    });
  });
});
