import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { createSignableEvent } from '../../../test/factories-signature.ts';
import type { TestDatabase } from '../../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../../test/harness.ts';
import type { SignatureRows } from './signature.queries.postgres.ts';
import { saveSignatureInOneStatement } from './signature.queries.postgres.ts';
import {
  insertImportLog,
  insertPatientSignature,
  insertProtectedFiles,
  updateEventInfo,
} from './signature.queries.ts';

const NOW = '2026-05-06 07:08:09';

/** The rows of one saved signature, in both ways of writing them. */
function rowsOf(
  eventId: number,
  elementId: number,
  info: { previous: string } | undefined,
  fileCount: 1 | 2,
) {
  const uids = Array.from({ length: fileCount }, () => randomBytes(20).toString('hex'));
  const signatureUid = uids.at(-1)!;
  const rows: SignatureRows = {
    files: uids.map((uid, i) => ({
      uid,
      name: `sign_${i}_${uid}.png`,
      mimetype: 'image/png',
      sizeBytes: 1000 + i,
      now: NOW,
    })),
    signatureUid,
    signature: { elementId, signatoryName: 'Ann Smith', timestamp: 1_700_000_040, now: NOW },
    ...(info === undefined
      ? {}
      : { eventInfo: { eventId, previous: info.previous, next: 'Complete', now: NOW } }),
    log: {
      filename: 'a/b/c/original',
      statusId: 4,
      returnMessage: '{"e_id":1} CODE',
      eventId,
      now: NOW,
      auditDates: { createdDate: NOW.slice(0, 10), lastModifiedDate: NOW.slice(0, 10) },
    },
  };
  return rows;
}

forEachDialect((dialect) => {
  describe(`saving a signature's rows (${dialect})`, () => {
    let testDb: TestDatabase;
    before(async () => {
      testDb = await createTestDatabase(dialect);
    });
    after(async () => {
      await testDb.drop();
    });

    const inTransaction = (rows: SignatureRows) =>
      testDb.database.writeTransaction(async (trx) => {
        const ids = await insertProtectedFiles(trx, rows.files);
        const signatureFileId = ids.get(rows.signatureUid)!;
        await insertPatientSignature(trx, { ...rows.signature, signatureFileId });
        if (rows.eventInfo !== undefined) await updateEventInfo(trx, testDb.database, rows.eventInfo);
        return insertImportLog(trx, { ...rows.log, croppedFileId: signatureFileId });
      });
    // Only an engine with data-modifying CTEs runs the one statement (`hasWritableCte`).
    const oneStatement = (rows: SignatureRows) => saveSignatureInOneStatement(testDb.database, rows);
    const ways =
      dialect === 'postgres'
        ? ([
            ['one statement', oneStatement],
            ['transaction', inTransaction],
          ] as const)
        : ([['transaction', inTransaction]] as const);

    /** What a save wrote: files (in id order), the signature and the log, and the event's info. */
    async function written(logId: number, eventId: number) {
      const log = await testDb.db
        .selectFrom('signature_import_log')
        .selectAll()
        .where('id', '=', logId)
        .executeTakeFirstOrThrow();
      const signature = await testDb.db
        .selectFrom('ophcocvi_signature')
        .selectAll()
        .where('signature_file_id', '=', log.cropped_file_id!)
        .executeTakeFirstOrThrow();
      const files = await testDb.db
        .selectFrom('protected_file')
        .select(['id', 'uid', 'name', 'title', 'description', 'mimetype', 'size', 'created_date'])
        .where('created_date', '=', NOW)
        .where('id', '>', log.cropped_file_id! - 2)
        .where('id', '<=', log.cropped_file_id!)
        .orderBy('id')
        .execute();
      const event = await testDb.db
        .selectFrom('event')
        .select(['info', 'last_modified_user_id'])
        .where('id', '=', eventId)
        .executeTakeFirstOrThrow();
      return { log, signature, files, event };
    }

    it('writes the same rows either way: files in order, the signature and log naming the signature file', async () => {
      assert.equal(testDb.database.dialect.hasWritableCte, dialect === 'postgres');
      for (const [way, save] of ways) {
        for (const fileCount of [1, 2] as const) {
          const event = await createSignableEvent(testDb.db);
          const before = await testDb.db
            .selectFrom('event')
            .select('info')
            .where('id', '=', event.eventId)
            .executeTakeFirstOrThrow();
          const rows = rowsOf(event.eventId, event.elementId, { previous: before.info! }, fileCount);
          const got = await written(await save(rows), event.eventId);
          const what = `${way}, ${fileCount} files`;
          assert.deepEqual(
            got.files
              .slice(-fileCount)
              .map((f) => [f.uid, f.name, f.title, f.description, f.mimetype, f.size]),
            rows.files.map((f) => [f.uid, f.name, '', '', 'image/png', String(f.sizeBytes)]),
            what,
          );
          const signatureFile = got.files.at(-1)!;
          assert.equal(signatureFile.uid, rows.signatureUid, what);
          assert.equal(got.signature.element_id, event.elementId, what);
          assert.equal(got.signature.type, 3, what);
          assert.equal(got.signature.signed_user_id, null, what);
          assert.equal(got.signature.signatory_role, 'Patient', what);
          assert.equal(got.signature.signatory_name, 'Ann Smith', what);
          assert.equal(Number(got.signature.timestamp), 1_700_000_040, what);
          assert.equal(got.log.cropped_file_id, signatureFile.id, what);
          assert.equal(got.log.status_id, 4, what);
          assert.equal(got.log.filename, 'a/b/c/original', what);
          assert.equal(got.log.return_message, '{"e_id":1} CODE', what);
          assert.equal(got.log.event_id, event.eventId, what);
          assert.equal(String(got.log.import_datetime).slice(0, 19), NOW, what);
          assert.deepEqual(got.event, { info: 'Complete', last_modified_user_id: 1 }, what);
        }
      }
    });

    it('leaves a status text changed since it was read alone, and writes the rest', async () => {
      for (const [way, save] of ways) {
        const event = await createSignableEvent(testDb.db, { info: 'Changed meanwhile' });
        const rows = rowsOf(event.eventId, event.elementId, { previous: 'What was read' }, 2);
        const got = await written(await save(rows), event.eventId);
        assert.equal(got.event.info, 'Changed meanwhile', way);
        assert.equal(got.log.cropped_file_id, got.files.at(-1)!.id, way);
        const untouched = await createSignableEvent(testDb.db, { info: 'Untouched' });
        const plain = rowsOf(untouched.eventId, untouched.elementId, undefined, 1);
        assert.equal((await written(await save(plain), untouched.eventId)).event.info, 'Untouched', way);
      }
    });

    it('writes nothing when one of the rows fails (an element that does not exist)', async () => {
      for (const [way, save] of ways) {
        const event = await createSignableEvent(testDb.db);
        const rows = rowsOf(event.eventId, 999_999_999, { previous: 'x' }, 2);
        const countOf = async (table: 'protected_file' | 'signature_import_log') =>
          Number(
            (
              await testDb.db
                .selectFrom(table)
                .select((eb) => eb.fn.countAll().as('n'))
                .executeTakeFirstOrThrow()
            ).n,
          );
        const [files, logs] = [await countOf('protected_file'), await countOf('signature_import_log')];
        await assert.rejects(save(rows), Error, way);
        assert.deepEqual(
          [await countOf('protected_file'), await countOf('signature_import_log')],
          [files, logs],
          way,
        );
      }
    });
  });
});
