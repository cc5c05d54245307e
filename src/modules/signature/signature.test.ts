import assert from 'node:assert/strict';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import type { FileStore } from '../../files/file-store.ts';
import { countRows, createUser } from '../../../test/factories.ts';
import type { SignableEvent } from '../../../test/factories-signature.ts';
import {
  b64,
  createCviEventType,
  createSignableEvent,
  makeJpeg,
  makePng,
} from '../../../test/factories-signature.ts';
import { addFailingTrigger } from '../../../test/failing-trigger.ts';
import type { TestApp } from '../../../test/harness.ts';
import { forEachDialect, startTestApp } from '../../../test/harness.ts';
import { readSignatureFields } from './signature-body.ts';
import { createSignatureService } from './signature.service.ts';

const PATH = '/api/v1/sign/add';

interface Counts {
  readonly files: number;
  readonly protectedFiles: number;
  readonly signatures: number;
  readonly logs: number;
  readonly maxProtectedFileId: number;
}

async function countFiles(dir: string): Promise<number> {
  try {
    const entries = await readdir(dir, { recursive: true, withFileTypes: true });
    return entries.filter((e) => e.isFile()).length;
  } catch {
    return 0;
  }
}

async function counts(app: TestApp): Promise<Counts> {
  return {
    files: await countFiles(app.filesDir),
    protectedFiles: await countRows(app.db, 'protected_file'),
    signatures: await countRows(app.db, 'ophcocvi_signature'),
    logs: await countRows(app.db, 'signature_import_log'),
    maxProtectedFileId: await maxId(app, 'protected_file'),
  };
}

async function maxId(app: TestApp, table: 'protected_file'): Promise<number> {
  const row = await app.db
    .selectFrom(table)
    .select((eb) => eb.fn.max<number | null>('id').as('id'))
    .executeTakeFirstOrThrow();
  return Number(row.id ?? 0);
}

async function assertDelta(app: TestApp, beforeCounts: Counts, delta: Partial<Counts>): Promise<void> {
  const now = await counts(app);
  assert.deepEqual(now, {
    files: beforeCounts.files + (delta.files ?? 0),
    protectedFiles: beforeCounts.protectedFiles + (delta.protectedFiles ?? 0),
    signatures: beforeCounts.signatures + (delta.signatures ?? 0),
    logs: beforeCounts.logs + (delta.logs ?? 0),
    maxProtectedFileId: now.maxProtectedFileId,
  });
}

async function lastLog(app: TestApp) {
  return app.db
    .selectFrom('signature_import_log')
    .selectAll()
    .orderBy('id', 'desc')
    .limit(1)
    .executeTakeFirstOrThrow();
}

function validBody(event: SignableEvent, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    unique_identifier: event.code,
    extra_info: JSON.stringify({ e_id: event.elementId, e_t_id: event.esignElementTypeId }),
    image: b64(makePng()),
    ...overrides,
  };
}

function assertCors(response: Response): void {
  assert.equal(response.headers.get('access-control-allow-origin'), '*');
}

async function assertJsonAnswer(response: Response, status: number, body: string): Promise<void> {
  assert.equal(response.status, status);
  assertCors(response);
  assert.match(response.headers.get('content-type') ?? '', /^application\/json/);
  assert.equal(await response.json(), body);
}

forEachDialect((dialect) => {
  describe(`POST /api/v1/sign/add (${dialect})`, () => {
    let app: TestApp;
    const post = (body: unknown, init: RequestInit = {}) =>
      app.request(PATH, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: typeof body === 'string' ? body : JSON.stringify(body),
        ...init,
      });

    before(async () => {
      app = await startTestApp(dialect);
    });
    after(async () => app.close());

    it('saves a valid signature: files, protected_file rows, signature row, status 4 log, CVI info', async () => {
      const event = await createSignableEvent(app.db, { firstName: 'Ada', lastName: 'Lovelace' });
      const png = makePng(5, 2);
      const body = validBody(event, { image: b64(png) });
      const start = await counts(app);
      const response = await post(body);
      await assertJsonAnswer(response, 200, 'Correct signature saved!');
      assert.equal(response.headers.get('cache-control'), 'no-store');
      await assertDelta(app, start, { files: 2, protectedFiles: 2, signatures: 1, logs: 1 });

      const signature = await app.db
        .selectFrom('ophcocvi_signature')
        .selectAll()
        .orderBy('id', 'desc')
        .executeTakeFirstOrThrow();
      assert.equal(signature.element_id, event.elementId);
      assert.equal(signature.type, 3);
      assert.equal(signature.signatory_role, 'Patient');
      assert.equal(signature.signatory_name, 'Ada Lovelace');
      assert.equal(signature.signed_user_id, null);
      assert.equal(signature.status, 1);
      assert.equal(signature.timestamp % 60, 0);
      assert.ok(Math.abs(signature.timestamp - Date.now() / 1000) < 120);

      const log = await lastLog(app);
      assert.equal(log.status_id, 4);
      assert.equal(log.event_id, event.eventId);
      assert.equal(log.return_message, `${body.extra_info as string} ${event.code}`);
      assert.equal(log.cropped_file_id, signature.signature_file_id);
      assert.ok(!path.isAbsolute(log.filename), 'the log stores a path relative to FILES_DIR');
      // The own schema's audit dates of the import log are DATE columns (as OpenEyes first declared them).
      const importDate = String(log.import_datetime).slice(0, 10);
      assert.match(importDate, /^\d{4}-\d{2}-\d{2}$/);
      assert.equal(String(log.created_date), importDate);
      assert.equal(String(log.last_modified_date), importDate);

      const sigFile = await app.db
        .selectFrom('protected_file')
        .selectAll()
        .where('id', '=', signature.signature_file_id!)
        .executeTakeFirstOrThrow();
      assert.match(sigFile.name, new RegExp(`^sign_${event.eventId}_\\d+_[0-9a-f]{40}\\.png$`));
      assert.equal(sigFile.mimetype, 'image/png');
      assert.equal(sigFile.size, String(png.length));
      assert.deepEqual(await app.files.read(sigFile.uid), png);

      const original = await app.db
        .selectFrom('protected_file')
        .selectAll()
        .where('uid', '=', path.basename(log.filename))
        .executeTakeFirstOrThrow();
      assert.match(original.name, /^sign_[0-9a-f]{40}\.png$/);
      // The original is stored first, so the signature is the call's second row.
      const callFiles = await app.db
        .selectFrom('protected_file')
        .select('id')
        .where('id', '>', start.maxProtectedFileId)
        .orderBy('id')
        .execute();
      assert.deepEqual(
        callFiles.map((f) => f.id),
        [original.id, signature.signature_file_id],
      );
      assert.deepEqual(
        await readFile(app.files.resolve(log.filename)),
        png,
        'without origImage, image is the original',
      );

      const row = await app.db
        .selectFrom('event')
        .select('info')
        .where('id', '=', event.eventId)
        .executeTakeFirstOrThrow();
      assert.equal(row.info, 'Incomplete/Missing: Consultant signature');
    });

    it('stores origImage as the original, names a JPEG .jpg, accepts a data: prefix, an object extra_info and a lower-case code', async () => {
      const event = await createSignableEvent(app.db, {
        info: 'Incomplete/Missing: Consent signature - Sight impaired',
      });
      const jpeg = makeJpeg();
      const orig = makePng(8, 8);
      const start = await counts(app);
      const response = await post({
        unique_identifier: event.code.toLowerCase(),
        extra_info: { e_id: event.elementId, e_t_id: event.esignElementTypeId },
        image: `data:image/jpeg;base64,${b64(jpeg)}`,
        origImage: `data:image/png;base64,${b64(orig)}`,
      });
      await assertJsonAnswer(response, 200, 'Correct signature saved!');
      await assertDelta(app, start, { files: 2, protectedFiles: 2, signatures: 1, logs: 1 });
      const log = await lastLog(app);
      assert.equal(
        log.return_message,
        `{"e_id":${event.elementId},"e_t_id":${event.esignElementTypeId}} ${event.code.toLowerCase()}`,
      );
      assert.deepEqual(await readFile(app.files.resolve(log.filename)), orig);
      const sigFile = await app.db
        .selectFrom('protected_file')
        .selectAll()
        .where('id', '=', log.cropped_file_id!)
        .executeTakeFirstOrThrow();
      assert.match(sigFile.name, /\.jpg$/);
      assert.equal(sigFile.mimetype, 'image/jpeg');
      assert.deepEqual(await app.files.read(sigFile.uid), jpeg);
      const row = await app.db
        .selectFrom('event')
        .select('info')
        .where('id', '=', event.eventId)
        .executeTakeFirstOrThrow();
      assert.equal(row.info, 'Complete - Sight impaired');
    });

    it('accepts ids given as decimal text, ignores the Content-Type and an Authorization header', async () => {
      const event = await createSignableEvent(app.db);
      const response = await post(
        validBody(event, {
          extra_info: JSON.stringify({
            e_id: String(event.elementId),
            e_t_id: String(event.esignElementTypeId),
          }),
        }),
        { headers: { 'content-type': 'text/plain', authorization: 'Basic bm9ib2R5Om5vcGU=' } },
      );
      await assertJsonAnswer(response, 200, 'Correct signature saved!');
    });

    it('ignores a malformed Content-Type too (not 415): the body is read as JSON', async () => {
      for (const contentType of ['0', ';;;', 'text/html; charset="unterminated', 'application/json;;']) {
        const event = await createSignableEvent(app.db);
        const start = await counts(app);
        const response = await post(validBody(event), { headers: { 'content-type': contentType } });
        await assertJsonAnswer(response, 200, 'Correct signature saved!');
        await assertDelta(app, start, { files: 2, protectedFiles: 2, signatures: 1, logs: 1 });
      }
    });

    it('leaves the info of a non-CVI event alone', async () => {
      const eventType = await createCviEventType(app.db, { className: 'OphGeneric' });
      const event = await createSignableEvent(app.db, {
        eventType,
        info: 'Incomplete/Missing: Consent signature',
      });
      await assertJsonAnswer(await post(validBody(event)), 200, 'Correct signature saved!');
      const row = await app.db
        .selectFrom('event')
        .select('info')
        .where('id', '=', event.eventId)
        .executeTakeFirstOrThrow();
      assert.equal(row.info, 'Incomplete/Missing: Consent signature');
    });

    it('takes many signatures on one event (each post is a new row)', async () => {
      const event = await createSignableEvent(app.db);
      const start = await counts(app);
      const answers = await Promise.all([1, 2, 3, 4].map(() => post(validBody(event))));
      for (const answer of answers) await assertJsonAnswer(answer, 200, 'Correct signature saved!');
      await assertDelta(app, start, { files: 8, protectedFiles: 8, signatures: 4, logs: 4 });
    });

    it('caps an enormous extra_info in the stored return_message at 1000 characters', async () => {
      const event = await createSignableEvent(app.db);
      const extra = JSON.stringify({
        e_id: event.elementId,
        e_t_id: event.esignElementTypeId,
        pad: 'x'.repeat(300_000),
      });
      await assertJsonAnswer(
        await post(validBody(event, { extra_info: extra })),
        200,
        'Correct signature saved!',
      );
      const log = await lastLog(app);
      assert.equal(log.return_message?.length, 1000);
      assert.ok(log.return_message?.startsWith('{"e_id":'));
    });

    it('reads a 1 MB image (decoded on a worker thread) and stores it byte for byte', async () => {
      const event = await createSignableEvent(app.db);
      const png = makePng(600, 580, { isNoisy: true });
      assert.ok(png.length > 1_000_000);
      await assertJsonAnswer(
        await post(validBody(event, { image: b64(png) })),
        200,
        'Correct signature saved!',
      );
      const log = await lastLog(app);
      assert.deepEqual(await readFile(app.files.resolve(log.filename)), png);
    });

    describe('refuses invalid input with 422, the joined messages and one status 3 log row', () => {
      // Each case: the body, given a fresh event, and the expected message.
      const png = () => b64(makePng());
      const truncatedPng = () => b64(makePng(20, 20, { isNoisy: true }).subarray(0, 600));
      const cases: [string, (e: SignableEvent) => Record<string, unknown>, string][] = [
        [
          'an empty object',
          () => ({}),
          'Missing unique_identifier Missing element and element type ids Missing image',
        ],
        [
          'a numeric unique_identifier',
          (e) => validBody(e, { unique_identifier: 123456 }),
          'Missing unique_identifier',
        ],
        [
          'an object unique_identifier',
          (e) => validBody(e, { unique_identifier: { code: e.code } }),
          'Missing unique_identifier',
        ],
        [
          'an empty unique_identifier',
          (e) => validBody(e, { unique_identifier: '' }),
          'Missing unique_identifier',
        ],
        [
          'a null extra_info',
          (e) => validBody(e, { extra_info: null }),
          'Missing element and element type ids',
        ],
        [
          'extra_info without e_id',
          (e) => validBody(e, { extra_info: JSON.stringify({ e_t_id: e.esignElementTypeId }) }),
          'Missing element id.',
        ],
        [
          'extra_info without e_t_id',
          (e) => validBody(e, { extra_info: { e_id: e.elementId } }),
          'Missing element type id.',
        ],
        [
          'undecodable extra_info text',
          (e) => validBody(e, { extra_info: '{"e_id":' }),
          'Missing element id. Missing element type id.',
        ],
        [
          'an array extra_info',
          (e) => validBody(e, { extra_info: [e.elementId, e.esignElementTypeId] }),
          'Missing element id. Missing element type id.',
        ],
        [
          'a numeric extra_info',
          (e) => validBody(e, { extra_info: 5 }),
          'Missing element id. Missing element type id.',
        ],
        [
          'a negative e_id',
          (e) => validBody(e, { extra_info: { e_id: -e.elementId, e_t_id: e.esignElementTypeId } }),
          'Missing element id.',
        ],
        [
          'a fractional e_id',
          (e) => validBody(e, { extra_info: { e_id: 1.5, e_t_id: e.esignElementTypeId } }),
          'Missing element id.',
        ],
        [
          'a non-numeric e_t_id text',
          (e) => validBody(e, { extra_info: { e_id: e.elementId, e_t_id: 'abc' } }),
          'Missing element type id.',
        ],
        [
          'an object e_t_id',
          (e) => validBody(e, { extra_info: { e_id: e.elementId, e_t_id: { id: 1 } } }),
          'Missing element type id.',
        ],
        [
          'a zero e_id and an array e_t_id',
          (e) => validBody(e, { extra_info: { e_id: 0, e_t_id: [1] } }),
          'Missing element id. Missing element type id.',
        ],
        ['an unknown code', (e) => validBody(e, { unique_identifier: 'ZZZZ99' }), 'Event not found'],
        [
          'a code with characters no code has',
          (e) => validBody(e, { unique_identifier: "x' or 1=1\u0000" }),
          'Event not found',
        ],
        [
          'a huge e_id',
          (e) => validBody(e, { extra_info: { e_id: 2 ** 40, e_t_id: e.esignElementTypeId } }),
          'Invalid UniqueCode or wrong event',
        ],
        [
          'an unknown e_t_id',
          (e) => validBody(e, { extra_info: { e_id: e.elementId, e_t_id: 999_999 } }),
          'Invalid UniqueCode or wrong event',
        ],
        ['a missing image', (e) => validBody(e, { image: undefined }), 'Missing image'],
        ['an empty image', (e) => validBody(e, { image: '' }), 'Missing image'],
        ['a numeric image', (e) => validBody(e, { image: 12345 }), 'Invalid image data'],
        ['an array image', (e) => validBody(e, { image: [png()] }), 'Invalid image data'],
        [
          'base64 with line breaks',
          (e) => validBody(e, { image: png().replace(/(.{16})/g, '$1\n') }),
          'Invalid image data',
        ],
        [
          'URL-safe base64',
          (e) =>
            validBody(e, {
              image: b64(makePng(30, 30, { isNoisy: true }))
                .replaceAll('+', '-')
                .replaceAll('/', '_'),
            }),
          'Invalid image data',
        ],
        [
          'base64 without padding',
          (e) =>
            validBody(e, { image: b64(Buffer.concat([makePng(), Buffer.from([0])])).replace(/=+$/, '') }),
          'Invalid image data',
        ],
        [
          'valid base64 that is not an image',
          (e) => validBody(e, { image: Buffer.from('hello, this is not an image').toString('base64') }),
          'Invalid image data',
        ],
        ['a truncated PNG', (e) => validBody(e, { image: truncatedPng() }), 'Invalid image data'],
        [
          'a PNG with trailing bytes after IEND',
          (e) => validBody(e, { image: b64(Buffer.concat([makePng(), Buffer.from('junk')])) }),
          'Invalid image data',
        ],
        [
          'a truncated JPEG',
          (e) => validBody(e, { image: b64(makeJpeg().subarray(0, 40)) }),
          'Invalid image data',
        ],
        [
          'an invalid origImage beside a valid image',
          (e) => validBody(e, { origImage: 'not base64!' }),
          'Invalid image data',
        ],
        [
          'an unknown original_log_id',
          (e) => validBody(e, { original_log_id: 987_654 }),
          'Invalid original_log_id',
        ],
        [
          'a negative original_log_id',
          (e) => validBody(e, { original_log_id: -1 }),
          'Invalid original_log_id',
        ],
        [
          'a text original_log_id',
          (e) => validBody(e, { original_log_id: 'first' }),
          'Invalid original_log_id',
        ],
        [
          'everything wrong at once',
          () => ({ unique_identifier: 7, extra_info: '[]', image: 'a', original_log_id: {} }),
          'Missing unique_identifier Missing element id. Missing element type id. Invalid image data Invalid original_log_id',
        ],
      ];
      for (const [name, makeBody, message] of cases) {
        it(`${name}: "${message}"`, async () => {
          const event = await createSignableEvent(app.db);
          const body = makeBody(event);
          const start = await counts(app);
          await assertJsonAnswer(await post(body), 422, message);
          const log = await lastLog(app);
          assert.equal(log.status_id, 3);
          assert.equal(log.return_message, message);
          assert.equal(log.cropped_file_id, null);
          const resolves =
            typeof body.unique_identifier === 'string' && body.unique_identifier === event.code;
          assert.equal(log.event_id, resolves ? event.eventId : null);
          // The original is kept only when it is a valid image of a resolved event (staff can crop it).
          const isValidOriginal = resolves && !/Missing image|Invalid image data/.test(message);
          if (isValidOriginal) {
            await assertDelta(app, start, { files: 1, protectedFiles: 1, logs: 1 });
            assert.notEqual(log.filename, '');
          } else {
            await assertDelta(app, start, { logs: 1 });
            assert.equal(log.filename, '');
          }
        });
      }
    });

    it('stores no file and no protected_file row for a code that resolves to no event, only its log row', async () => {
      const event = await createSignableEvent(app.db);
      const deleted = await createSignableEvent(app.db, { isDeleted: true });
      // A large valid capture beside a valid signature, as the disk-filling attack sends it.
      const capture = b64(makePng(400, 300, { isNoisy: true }));
      const bodies: [Record<string, unknown>, string][] = [
        [validBody(event, { unique_identifier: 'QQQQ77', origImage: capture }), 'Event not found'],
        [validBody(event, { unique_identifier: 'QQQQ78', image: capture }), 'Event not found'],
        [validBody(deleted, { origImage: capture }), 'Event not found'],
        [validBody(event, { unique_identifier: undefined, origImage: capture }), 'Missing unique_identifier'],
      ];
      for (const [body, message] of bodies) {
        const start = await counts(app);
        await assertJsonAnswer(await post(body), 422, message);
        await assertDelta(app, start, { logs: 1 });
        const log = await lastLog(app);
        assert.equal(log.filename, '');
        assert.equal(log.event_id, null);
        assert.equal(log.status_id, 3);
      }
    });

    it('answers 413 "Payload too large" to a body above the default 2 MiB, writing nothing', async () => {
      const event = await createSignableEvent(app.db);
      // About 2.1 MiB of base64: a valid PNG that a 10 MiB limit would have let through to the import.
      const big = b64(makePng(1000, 560, { isNoisy: true }));
      assert.ok(big.length > 2 * 1024 * 1024 && big.length < 3 * 1024 * 1024, String(big.length));
      for (const body of [
        validBody(event, { origImage: big }),
        validBody(event, { unique_identifier: 'QQQQ79', origImage: big }),
      ]) {
        const start = await counts(app);
        await assertJsonAnswer(await post(body), 413, 'Payload too large');
        await assertDelta(app, start, {});
      }
    });

    it('refuses a deleted event as "Event not found" and an inactive code as a wrong event', async () => {
      const deleted = await createSignableEvent(app.db, { isDeleted: true });
      await assertJsonAnswer(
        await post(validBody(deleted, { image: undefined })),
        422,
        'Event not found Missing image',
      );
      const inactive = await createSignableEvent(app.db, { isCodeActive: false });
      const start = await counts(app);
      await assertJsonAnswer(await post(validBody(inactive)), 422, 'Invalid UniqueCode or wrong event');
      await assertDelta(app, start, { files: 1, protectedFiles: 1, logs: 1 });
      assert.equal((await lastLog(app)).event_id, inactive.eventId);
    });

    it("never lands a signature on another patient's element", async () => {
      const mine = await createSignableEvent(app.db);
      const theirs = await createSignableEvent(app.db, { eventType: mine });
      const start = await counts(app);
      const response = await post(
        validBody(mine, { extra_info: { e_id: theirs.elementId, e_t_id: theirs.esignElementTypeId } }),
      );
      await assertJsonAnswer(response, 422, 'Invalid UniqueCode or wrong event');
      await assertDelta(app, start, { files: 1, protectedFiles: 1, logs: 1 });
    });

    it('refuses an element type of another event type, and a non-esign element type', async () => {
      const event = await createSignableEvent(app.db);
      const otherType = await createCviEventType(app.db);
      const foreign = await post(
        validBody(event, { extra_info: { e_id: event.elementId, e_t_id: otherType.esignElementTypeId } }),
      );
      await assertJsonAnswer(foreign, 422, 'Invalid UniqueCode or wrong event');
      const plain = await app.db
        .insertInto('element_type')
        .values({
          name: 'History',
          class_name: 'Element_History',
          event_type_id: event.eventTypeId,
          table_name: 'et_history',
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      const notEsign = await post(
        validBody(event, { extra_info: { e_id: event.elementId, e_t_id: plain.id } }),
      );
      await assertJsonAnswer(notEsign, 422, 'Invalid UniqueCode or wrong event');
    });

    it('accepts an esign element type without table_name by its class name', async () => {
      const eventType = await createCviEventType(app.db, { esign: { tableName: null } });
      const event = await createSignableEvent(app.db, { eventType });
      await assertJsonAnswer(await post(validBody(event)), 200, 'Correct signature saved!');
    });

    describe('original_log_id (manual crop)', () => {
      it('reuses the original file of that log and writes only the signature file', async () => {
        const event = await createSignableEvent(app.db);
        await assertJsonAnswer(await post(validBody(event)), 200, 'Correct signature saved!');
        const first = await lastLog(app);
        const start = await counts(app);
        const response = await post(
          validBody(event, { original_log_id: first.id, origImage: b64(makePng(9, 9)) }),
        );
        await assertJsonAnswer(response, 200, 'Correct signature saved!');
        await assertDelta(app, start, { files: 1, protectedFiles: 1, signatures: 1, logs: 1 });
        const second = await lastLog(app);
        assert.equal(second.filename, first.filename);
        assert.notEqual(second.cropped_file_id, first.cropped_file_id);
      });

      it("refuses the log of another patient's event", async () => {
        const other = await createSignableEvent(app.db);
        await assertJsonAnswer(await post(validBody(other)), 200, 'Correct signature saved!');
        const otherLog = await lastLog(app);
        const event = await createSignableEvent(app.db);
        const start = await counts(app);
        await assertJsonAnswer(
          await post(validBody(event, { original_log_id: otherLog.id })),
          422,
          'Invalid original_log_id',
        );
        // The valid image of this attempt is kept as its own original; the other log's file is not reused.
        await assertDelta(app, start, { files: 1, protectedFiles: 1, logs: 1 });
        assert.notEqual((await lastLog(app)).filename, otherLog.filename);
        const unresolved = await post(
          validBody(event, { unique_identifier: 'QQQQ22', original_log_id: otherLog.id }),
        );
        await assertJsonAnswer(unresolved, 422, 'Event not found Invalid original_log_id');
        assert.notEqual((await lastLog(app)).filename, otherLog.filename);
      });
    });

    describe('bodies that are not a JSON object: 400 "Bad request", nothing written (no import log row)', () => {
      const bodies: [string, RequestInit['body'], Record<string, string>][] = [
        ['malformed JSON', '{"unique_identifier":', { 'content-type': 'application/json' }],
        ['a JSON array', '[{"unique_identifier":"ABCDEF"}]', { 'content-type': 'application/json' }],
        ['a JSON string', '"hello"', { 'content-type': 'application/json' }],
        ['a JSON number', '42', {}],
        ['JSON null', 'null', { 'content-type': 'application/json' }],
        ['an empty body', '', { 'content-type': 'application/json' }],
        ['no body at all', undefined, {}],
        ['a form body', 'unique_identifier=ABCDEF', { 'content-type': 'application/x-www-form-urlencoded' }],
        [
          'invalid UTF-8',
          new Uint8Array([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]),
          { 'content-type': 'application/json' },
        ],
      ];
      for (const [name, body, headers] of bodies) {
        it(name, async () => {
          const start = await counts(app);
          const response = await app.request(PATH, {
            method: 'POST',
            headers,
            ...(body === undefined ? {} : { body }),
          });
          await assertJsonAnswer(response, 400, 'Bad request');
          await assertDelta(app, start, {});
        });
      }
    });

    it('answers 400 "Bad request" to GET, PUT, DELETE and PATCH, with the CORS header, writing nothing', async () => {
      const start = await counts(app);
      for (const method of ['GET', 'PUT', 'DELETE', 'PATCH']) {
        const response = await app.request(PATH, { method });
        await assertJsonAnswer(response, 400, 'Bad request');
      }
      const head = await app.request(PATH, { method: 'HEAD' });
      assert.equal(head.status, 400);
      assertCors(head);
      await assertDelta(app, start, {});
    });

    it('answers a CORS preflight with 204 and the allowed method, header and max age', async () => {
      const response = await app.request(PATH, {
        method: 'OPTIONS',
        headers: { origin: 'https://pad.example', 'access-control-request-method': 'POST' },
      });
      assert.equal(response.status, 204);
      assertCors(response);
      assert.equal(response.headers.get('access-control-allow-methods'), 'POST, OPTIONS');
      assert.equal(response.headers.get('access-control-allow-headers'), 'Content-Type');
      assert.equal(response.headers.get('access-control-max-age'), '600');
      assert.equal(await response.text(), '');
    });

    it('never answers 5xx to arbitrary field values, and leaves one log row per 422', async () => {
      const event = await createSignableEvent(app.db);
      const valid = validBody(event);
      const field = (name: string) =>
        fc.oneof(fc.constant(valid[name]), fc.jsonValue(), fc.constant(undefined));
      await fc.assert(
        fc.asyncProperty(
          fc.record({
            unique_identifier: field('unique_identifier'),
            extra_info: field('extra_info'),
            image: field('image'),
            origImage: fc.oneof(fc.constant(undefined), fc.jsonValue()),
            original_log_id: fc.oneof(fc.constant(undefined), fc.jsonValue()),
          }),
          async (body) => {
            const start = await counts(app);
            const response = await post(body);
            assert.ok([200, 422].includes(response.status), `status ${response.status}`);
            assertCors(response);
            await response.body?.cancel();
            const now = await counts(app);
            assert.equal(now.logs, start.logs + 1);
          },
        ),
        { numRuns: 40 },
      );
    });

    it('serves the legacy /Api/sign/add path', async () => {
      const event = await createSignableEvent(app.db);
      const response = await app.request('/Api/sign/add', {
        method: 'POST',
        body: JSON.stringify(validBody(event)),
      });
      await assertJsonAnswer(response, 200, 'Correct signature saved!');
    });

    describe('failures after the files are written', () => {
      it('a commit that fails leaves no rows and no files, logs status 3 and answers 200 "Failed signature save!"', async () => {
        const event = await createSignableEvent(app.db);
        // The injected crash: the last statement of the transaction (the status 4 log) fails.
        const dropTrigger = await addFailingTrigger(app.db, dialect, {
          name: 'fail_success_log',
          table: 'signature_import_log',
          when: 'new.status_id = 4',
          message: 'injected failure',
        });
        try {
          const infoBefore = await app.db
            .selectFrom('event')
            .select('info')
            .where('id', '=', event.eventId)
            .executeTakeFirstOrThrow();
          const start = await counts(app);
          await assertJsonAnswer(await post(validBody(event)), 200, 'Failed signature save!');
          await assertDelta(app, start, { logs: 1 });
          const log = await lastLog(app);
          assert.equal(log.status_id, 3);
          assert.match(log.return_message ?? '', /^Failed signature save! \w+$/);
          assert.equal(log.event_id, event.eventId);
          assert.equal(log.filename, '');
          const infoAfter = await app.db
            .selectFrom('event')
            .select('info')
            .where('id', '=', event.eventId)
            .executeTakeFirstOrThrow();
          assert.equal(infoAfter.info, infoBefore.info, 'the CVI info update was rolled back');
        } finally {
          await dropTrigger();
        }
      });

      it('a storage failure on the second file removes the first and logs status 3', async () => {
        const event = await createSignableEvent(app.db);
        let writes = 0;
        const failing: FileStore = {
          ...app.files,
          async write(bytes) {
            writes += 1;
            if (writes === 2) throw Object.assign(new Error('disk full'), { name: 'StorageError' });
            return app.files.write(bytes);
          },
        };
        const service = createSignatureService({ database: app.database, files: failing });
        const start = await counts(app);
        const body = validBody(event, { origImage: b64(makePng(7, 7)) });
        const outcome = await service.importSignature(readSignatureFields(body));
        assert.equal(outcome.kind, 'failed');
        assert.equal(writes, 2);
        await assertDelta(app, start, { logs: 1 });
        assert.equal((await lastLog(app)).status_id, 3);
      });
    });

    it('answers the same way with a Basic user as without one (no auth on this endpoint)', async () => {
      const user = await createUser(app.db);
      const event = await createSignableEvent(app.db);
      const response = await post(validBody(event), {
        headers: { 'content-type': 'application/json', authorization: user.authorization },
      });
      await assertJsonAnswer(response, 200, 'Correct signature saved!');
    });
  });

  describe(`POST /api/v1/sign/add limits (${dialect})`, () => {
    let app: TestApp;
    before(async () => {
      app = await startTestApp(dialect, {
        env: { SIGN_BODY_LIMIT_BYTES: '4096', SIGN_RATE_LIMIT_PER_MINUTE: '3' },
      });
    });
    after(async () => app.close());

    it('answers 413 "Payload too large" with the CORS header above the body limit, storing nothing', async () => {
      const event = await createSignableEvent(app.db);
      const start = await counts(app);
      const response = await app.request(PATH, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(validBody(event, { image: b64(makePng(40, 40, { isNoisy: true })) })),
      });
      await assertJsonAnswer(response, 413, 'Payload too large');
      await assertDelta(app, start, {});
    });

    it('answers 429 "Too Many Requests" with Retry-After and the CORS header past the per-IP limit', async () => {
      const event = await createSignableEvent(app.db);
      // The 413 case above already used one hit of this window.
      const statuses: number[] = [];
      let last: Response | undefined;
      for (let i = 0; i < 4; i++) {
        last = await app.request(PATH, { method: 'POST', body: JSON.stringify(validBody(event)) });
        statuses.push(last.status);
        if (last.status !== 429) await last.body?.cancel();
      }
      assert.ok(statuses.includes(200));
      assert.equal(statuses.at(-1), 429);
      await assertJsonAnswer(last!, 429, 'Too Many Requests');
      assert.match(last!.headers.get('retry-after') ?? '', /^[1-9]\d*$/);
      const start = await counts(app);
      const again = await app.request(PATH, { method: 'POST', body: JSON.stringify(validBody(event)) });
      assert.equal(again.status, 429);
      await again.body?.cancel();
      await assertDelta(app, start, {});
      const preflight = await app.request(PATH, { method: 'OPTIONS' });
      assert.equal(preflight.status, 204, 'preflights are not rate limited');
    });
  });
});
