import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import sharp from 'sharp';
import type { Config } from '../../config.ts';
import { loadConfig } from '../../config.ts';
import { createInstitution, createPatient } from '../../../test/factories.ts';
import { addIdentifier, createIdentifierType } from '../../../test/factories-patient.ts';
import { blobRow, buildDicomFile, jsonRow, routinesOf } from '../../../test/factories-queue.ts';
import type { TestDatabase } from '../../../test/harness.ts';
import { createTestDatabase, forEachDialect } from '../../../test/harness.ts';
import type { QueueEngine } from '../request-queue/index.ts';
import { createQueueEngine, enqueueRequest } from '../request-queue/index.ts';
import { defaultRoutineCatalog } from './index.ts';
import { DicomError, readDicomFile } from '../dicom/index.ts';
import { applyPad, translatePcre } from '../patient/index.ts';
import { normaliseDob } from './patient-match.ts';

const TAGS = {
  PatientID: '12345',
  PatientName: 'Doe^Jane',
  PatientBirthDate: '19700315',
  PatientSex: 'F',
  Modality: 'OP',
  Manufacturer: 'Acme Optics',
  StudyInstanceUID: '1.2.826.0.1.3680043.8.498.77',
  StudyDate: '20240102',
};

/** The SOP class and instance `buildDicomFile` writes. */
const FILE_UIDS = {
  SOPClassUID: '1.2.840.10008.5.1.4.1.1.7',
  SOPInstanceUID: '1.2.826.0.1.3680043.8.498.1',
};

describe('routine helpers', () => {
  it('reads the main tags of a Part 10 file', async () => {
    const summary = await readDicomFile(buildDicomFile(TAGS), loadConfig({}));
    // Every other tag the header reads is absent from this file.
    const absent = Object.fromEntries(Object.keys(summary.header).map((keyword) => [keyword, null]));
    assert.deepEqual(summary.header, { ...absent, ...TAGS, ...FILE_UIDS });
    assert.equal(summary.transferSyntaxUid, '1.2.840.10008.1.2.1');
    assert.equal(summary.hasPixelData, false);
  });
  it('refuses bytes that are not DICOM, naming the cause', async () => {
    await assert.rejects(
      readDicomFile(Buffer.from('not a dicom file at all'), loadConfig({})),
      (error) => error instanceof DicomError && error.code === 'no-dicm-prefix',
    );
  });
  it('normalises identifiers and dates like the search', () => {
    assert.equal(applyPad('1234', '%07s'), '0001234');
    assert.equal(applyPad('1234', null), '1234');
    assert.equal(translatePcre('/^([0-9]{1,9})$/')?.test('0001234'), true);
    assert.equal(translatePcre('/^a$/x'), undefined);
    assert.equal(normaliseDob('19700315'), '1970-03-15');
    assert.equal(normaliseDob('1970-02-30'), undefined);
  });
});

forEachDialect((dialect) => {
  describe(`queue routines end to end (${dialect})`, () => {
    let testDb: TestDatabase;
    let config: Config;
    let engine: QueueEngine;
    let clock = new Date('2030-01-01T00:00:00Z');
    let localType: number;
    let photo: Buffer;

    before(async () => {
      testDb = await createTestDatabase(dialect);
      config = loadConfig(testDb.env);
      engine = createQueueEngine({
        database: testDb.database,
        config,
        catalog: defaultRoutineCatalog,
        now: () => clock,
      });
      const institutionId = await createInstitution(testDb.db);
      localType = await createIdentifierType(testDb.db, { institution_id: institutionId });
      photo = await sharp({
        create: { width: 900, height: 600, channels: 3, background: { r: 200, g: 30, b: 30 } },
      })
        .png()
        .toBuffer();
    });
    after(async () => {
      await testDb.drop();
    });

    async function drain(): Promise<string[]> {
      const ran: string[] = [];
      for (;;) {
        const outcome = await engine.step();
        if (outcome.kind !== 'ran') return ran;
        ran.push(`${outcome.routineName}:${outcome.status}`);
      }
    }

    async function createJane(hospitalNumber: string, typeId = localType) {
      const patient = await createPatient(testDb.db, {
        firstName: 'Jane',
        lastName: 'Doe',
        patient: { dob: '1970-03-15', gender: 'F' },
      });
      await addIdentifier(testDb.db, patient.patientId, typeId, hospitalNumber);
      return patient.patientId;
    }

    it('turns a DICOM file and an image into an event with both attached and thumbnails made', async () => {
      const patientId = await createJane('0012345');
      const dicom = buildDicomFile(TAGS);
      const { requestId } = await enqueueRequest(testDb.database, {
        requestType: 'dicom_request',
        attachments: [
          jsonRow('REQUEST_DATA', {}),
          blobRow('dicom', 'application/dicom', dicom, 'scan.dcm'),
          blobRow('photo', 'image/png', photo, 'photo.png'),
        ],
      });
      assert.deepEqual(await drain(), [
        'DICOM_SEED:COMPLETE',
        'EXTRACT_IMAGE:COMPLETE',
        'PATIENT_MATCH:COMPLETE',
        'MAKE_THUMBNAILS:COMPLETE',
        'ATTACH_TO_EVENT:COMPLETE',
        'CLEAN_UP:COMPLETE',
      ]);
      assert.deepEqual(
        (await routinesOf(testDb.db, requestId)).map((r) => [r.routine_name, r.execute_sequence]),
        [
          ['DICOM_SEED', 10],
          ['EXTRACT_IMAGE', 20],
          ['PATIENT_MATCH', 30],
          ['MAKE_THUMBNAILS', 40],
          ['ATTACH_TO_EVENT', 50],
          ['CLEAN_UP', 60],
        ],
      );

      const rows = await testDb.db
        .selectFrom('attachment_data')
        .selectAll()
        .where('request_id', '=', requestId)
        .execute();
      const byMnemonic = new Map(rows.map((r) => [r.attachment_mnemonic, r]));
      const header = JSON.parse(byMnemonic.get('DICOM_HEADER')!.text_data!) as Record<string, unknown>;
      const absent = Object.fromEntries(Object.keys(header).map((keyword) => [keyword, null]));
      assert.deepEqual(header, { ...absent, ...TAGS, ...FILE_UIDS });
      assert.equal(byMnemonic.get('DICOM_HEADER')!.mime_type, 'application/json');
      const requestData = JSON.parse(byMnemonic.get('REQUEST_DATA')!.text_data!);
      assert.equal(requestData.dicom_patient_id, '12345');
      assert.equal(requestData.dicom_modality, 'OP');
      assert.equal(requestData.matched_patient_id, patientId);

      const episodes = await testDb.db
        .selectFrom('episode')
        .selectAll()
        .where('patient_id', '=', patientId)
        .execute();
      assert.equal(episodes.length, 1, 'an episode is created for a patient without one');
      const events = await testDb.db
        .selectFrom('event')
        .innerJoin('event_type', 'event_type.id', 'event.event_type_id')
        .select(['event.id', 'event_type.class_name'])
        .where('episode_id', '=', episodes[0]!.id)
        .execute();
      assert.deepEqual(
        events.map((e) => e.class_name),
        ['OphGeneric'],
      );
      assert.equal(requestData.event_id, events[0]!.id);
      const linked = await testDb.db
        .selectFrom('event_attachment_item as i')
        .innerJoin('event_attachment_group as g', 'g.id', 'i.event_attachment_group_id')
        .select('i.attachment_data_id')
        .where('g.event_id', '=', events[0]!.id)
        .orderBy('i.attachment_data_id')
        .execute();
      assert.deepEqual(
        linked.map((l) => l.attachment_data_id),
        [byMnemonic.get('dicom')!.id, byMnemonic.get('photo')!.id],
      );

      const image = byMnemonic.get('photo')!;
      const sizes: number[] = [];
      for (const [blob, maxSide] of [
        [image.thumbnail_small_blob, 128],
        [image.thumbnail_medium_blob, 320],
        [image.thumbnail_large_blob, 640],
      ] as const) {
        assert.ok(blob);
        const meta = await sharp(blob).metadata();
        assert.equal(meta.format, 'jpeg');
        assert.equal(Math.max(meta.width, meta.height), maxSide);
        sizes.push(blob.length);
      }
      // Each thumbnail is its own JPEG, not the smaller ones concatenated in front (one reused buffer).
      assert.ok(!image.thumbnail_large_blob!.subarray(0, sizes[0]).equals(image.thumbnail_small_blob!));
      assert.equal(byMnemonic.get('dicom')!.thumbnail_small_blob, null, 'no thumbnails for DICOM');
      assert.ok(byMnemonic.get('dicom')!.blob_data, 'the default policy keeps the payload');

      // The same files again: already attached to this patient, so no second event.
      const again = await enqueueRequest(testDb.database, {
        requestType: 'dicom_request',
        attachments: [jsonRow('REQUEST_DATA', {}), blobRow('dicom', 'application/dicom', dicom)],
      });
      await drain();
      const eventsAfter = await testDb.db
        .selectFrom('event')
        .select('id')
        .where('episode_id', '=', episodes[0]!.id)
        .execute();
      assert.equal(eventsAfter.length, 1);
      assert.ok((await routinesOf(testDb.db, again.requestId)).every((r) => r.status === 'COMPLETE'));
    });

    it('retries the patient match with back-off until the patient exists', async () => {
      const hospitalNumber = '7654321';
      const { requestId } = await enqueueRequest(testDb.database, {
        requestType: 'diagnostic_data',
        attachments: [
          jsonRow('REQUEST_DATA', {}),
          jsonRow('REQUEST_BLOB', { data: { hos_num: hospitalNumber, dob: '1970-03-15', sex: 'female' } }),
        ],
      });
      assert.deepEqual(await drain(), ['PATIENT_MATCH:RETRY']);
      const [match] = await routinesOf(testDb.db, requestId);
      assert.equal(match!.try_count, 1);
      const patientId = await createJane(hospitalNumber);
      clock = new Date(clock.getTime() + 2 * 60_000);
      assert.deepEqual(await drain(), [
        'PATIENT_MATCH:COMPLETE',
        'ATTACH_TO_EVENT:COMPLETE',
        'CLEAN_UP:COMPLETE',
      ]);
      const linked = await testDb.db
        .selectFrom('event_attachment_item as i')
        .innerJoin('attachment_data as a', 'a.id', 'i.attachment_data_id')
        .innerJoin('event_attachment_group as g', 'g.id', 'i.event_attachment_group_id')
        .innerJoin('event as e', 'e.id', 'g.event_id')
        .innerJoin('episode as ep', 'ep.id', 'e.episode_id')
        .select(['a.attachment_mnemonic', 'ep.patient_id'])
        .where('a.request_id', '=', requestId)
        .execute();
      assert.deepEqual(linked, [{ attachment_mnemonic: 'REQUEST_BLOB', patient_id: patientId }]);
    });

    it('fails the patient match at once when the request names no patient', async () => {
      const { requestId } = await enqueueRequest(testDb.database, {
        requestType: 'form_data',
        attachments: [jsonRow('REQUEST_DATA', {}), jsonRow('FORM_DATA', { comment: 'no patient here' })],
      });
      assert.deepEqual(await drain(), ['PATIENT_MATCH:FAILED']);
      assert.equal((await routinesOf(testDb.db, requestId)).length, 1);
    });

    it('fails DICOM_SEED at once on a payload that is not DICOM', async () => {
      await enqueueRequest(testDb.database, {
        requestType: 'dicom_request',
        attachments: [
          jsonRow('REQUEST_DATA', {}),
          blobRow('REQUEST_BLOB', 'application/dicom', Buffer.from('junk')),
        ],
      });
      assert.deepEqual(await drain(), ['DICOM_SEED:FAILED']);
    });

    it('refuses to match when two patients share the identifier, date of birth and sex', async () => {
      // Two hospitals' numbers: the same value under two identifier types.
      const otherType = await createIdentifierType(testDb.db, {
        institution_id: await createInstitution(testDb.db),
      });
      await createJane('5550001');
      await createJane('5550001', otherType);
      await enqueueRequest(testDb.database, {
        requestType: 'imaging',
        attachments: [
          jsonRow('REQUEST_DATA', { hos_num: '555-0001', dob: '1970-03-15' }),
          blobRow('REQUEST_BLOB', 'image/png', photo),
        ],
      });
      assert.deepEqual(await drain(), ['PATIENT_MATCH:RETRY']);
    });

    it('sees an identifier type added since the previous batch: a second patient under it refuses the match', async () => {
      await createJane('6660001');
      const request = () =>
        enqueueRequest(testDb.database, {
          requestType: 'imaging',
          attachments: [
            jsonRow('REQUEST_DATA', { hos_num: '6660001', dob: '1970-03-15' }),
            blobRow('REQUEST_BLOB', 'image/png', photo),
          ],
        });
      await request();
      const first = await engine.step();
      assert.equal(first.kind === 'ran' && `${first.routineName}:${first.status}`, 'PATIENT_MATCH:COMPLETE');
      const newType = await createIdentifierType(testDb.db, {
        institution_id: await createInstitution(testDb.db),
        validate_regex: '/^[0-9]{9}$/',
        pad: '%09s',
      });
      // Only the new type's rule finds this one: its value is the identifier padded to 9 digits.
      await createJane('006660001', newType);
      await drain();
      await request();
      assert.deepEqual(await drain(), ['PATIENT_MATCH:RETRY']);
    });

    it('files events under the institution of INSTITUTION_CODE, as its rows are once REFERENCE_CACHE_TTL_MS has passed', async () => {
      const code = `TTL${Date.now() % 1_000_000}`;
      const first = await createInstitution(testDb.db, { remote_id: code });
      const ttlMs = 1000;
      const cached = createQueueEngine({
        database: testDb.database,
        config: loadConfig({ ...testDb.env, INSTITUTION_CODE: code, REFERENCE_CACHE_TTL_MS: String(ttlMs) }),
        catalog: defaultRoutineCatalog,
        now: () => clock,
      });
      await createJane('7770001');
      const fileOne = async (red: number) => {
        const image = await sharp({
          create: { width: 8, height: 8, channels: 3, background: { r: red, g: 0, b: 0 } },
        })
          .png()
          .toBuffer();
        const { requestId } = await enqueueRequest(testDb.database, {
          requestType: 'imaging',
          attachments: [
            jsonRow('REQUEST_DATA', { hos_num: '7770001', dob: '1970-03-15' }),
            blobRow('REQUEST_BLOB', 'image/png', image),
          ],
        });
        const ran: string[] = [];
        for (let outcome = await cached.step(); outcome.kind === 'ran'; outcome = await cached.step()) {
          ran.push(`${outcome.routineName}:${outcome.status}`);
        }
        assert.ok(ran.includes('ATTACH_TO_EVENT:COMPLETE'), ran.join(', '));
        const row = await testDb.db
          .selectFrom('attachment_data')
          .select('text_data')
          .where('request_id', '=', requestId)
          .where('attachment_mnemonic', '=', 'REQUEST_DATA')
          .executeTakeFirstOrThrow();
        const eventId = (JSON.parse(row.text_data!) as { event_id: number }).event_id;
        const event = await testDb.db
          .selectFrom('event')
          .select('institution_id')
          .where('id', '=', eventId)
          .executeTakeFirstOrThrow();
        return event.institution_id;
      };
      assert.equal(await fileOne(10), first);
      // The code now names another institution: seen once the cached row has expired.
      await testDb.db
        .updateTable('institution')
        .set({ remote_id: 'moved' })
        .where('id', '=', first)
        .execute();
      const second = await createInstitution(testDb.db, { remote_id: code });
      await new Promise((resolve) => setTimeout(resolve, ttlMs + 200));
      assert.equal(await fileOne(20), second);
    });
  });
});
