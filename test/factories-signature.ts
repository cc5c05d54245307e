/**
 * Factories for sign/add: a CVI event type with its E-Sign element type, a patient's episode and event,
 * the event's e-sign element, and a unique code mapped to the event. Also real PNG/JPEG bytes.
 */
import { randomBytes } from 'node:crypto';
import { crc32, deflateSync } from 'node:zlib';
import type { Kysely } from 'kysely';
import type { DB } from '../src/db/schema.ts';
import type { TestPatient } from './factories.ts';
import { createPatient, unique } from './factories.ts';

export const ESIGN_CLASS = 'OEModule\\OphCoCvi\\models\\Element_OphCoCvi_Esign';

export interface TestEventType {
  readonly eventTypeId: number;
  /** The E-Sign element type (`table_name` `et_ophcocvi_esign`). */
  readonly esignElementTypeId: number;
}

/** An event type (`OphCoCvi` by default) with an E-Sign element type. */
export async function createCviEventType(
  db: Kysely<DB>,
  options: { className?: string; esign?: { className?: string; tableName?: string | null } } = {},
): Promise<TestEventType> {
  const eventType = await db
    .insertInto('event_type')
    .values({ name: unique('CVI').slice(0, 40), class_name: options.className ?? 'OphCoCvi' })
    .returning('id')
    .executeTakeFirstOrThrow();
  const elementType = await db
    .insertInto('element_type')
    .values({
      name: 'E-Sign',
      class_name: options.esign?.className ?? ESIGN_CLASS,
      event_type_id: eventType.id,
      table_name: options.esign?.tableName === undefined ? 'et_ophcocvi_esign' : options.esign.tableName,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return { eventTypeId: eventType.id, esignElementTypeId: elementType.id };
}

const CODE_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ23456789';

/** A fresh 6-character code of the original's alphabet (A-Z, 2-9). */
export function newUniqueCode(): string {
  const bytes = randomBytes(6);
  return Array.from(bytes, (b) => CODE_ALPHABET[b % CODE_ALPHABET.length]).join('');
}

/** A unique code mapped to `eventId`. */
export async function createUniqueCode(
  db: Kysely<DB>,
  eventId: number,
  options: { code?: string; isActive?: boolean } = {},
): Promise<string> {
  const code = options.code ?? newUniqueCode();
  const row = await db
    .insertInto('unique_codes')
    .values({ code, active: options.isActive === false ? 0 : 1 })
    .returning('id')
    .executeTakeFirstOrThrow();
  await db.insertInto('unique_codes_mapping').values({ unique_code_id: row.id, event_id: eventId }).execute();
  return code;
}

export interface SignableEvent extends TestEventType {
  readonly patient: TestPatient;
  readonly episodeId: number;
  readonly eventId: number;
  /** The event's `et_ophcocvi_esign` row. */
  readonly elementId: number;
  readonly code: string;
}

/**
 * A patient's event with an e-sign element and a mapped unique code: everything a valid sign/add needs.
 * Pass `eventType` to put several events on one type.
 */
export async function createSignableEvent(
  db: Kysely<DB>,
  options: {
    eventType?: TestEventType;
    firstName?: string;
    lastName?: string;
    info?: string | null;
    isDeleted?: boolean;
    isCodeActive?: boolean;
  } = {},
): Promise<SignableEvent> {
  const eventType = options.eventType ?? (await createCviEventType(db));
  const patient = await createPatient(db, { firstName: options.firstName, lastName: options.lastName });
  const episode = await db
    .insertInto('episode')
    .values({ patient_id: patient.patientId })
    .returning('id')
    .executeTakeFirstOrThrow();
  const event = await db
    .insertInto('event')
    .values({
      episode_id: episode.id,
      event_type_id: eventType.eventTypeId,
      info:
        options.info === undefined
          ? 'Incomplete/Missing: Consent signature, Consultant signature'
          : options.info,
      deleted: options.isDeleted === true ? 1 : 0,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  const element = await db
    .insertInto('et_ophcocvi_esign')
    .values({ event_id: event.id })
    .returning('id')
    .executeTakeFirstOrThrow();
  const code = await createUniqueCode(db, event.id, { isActive: options.isCodeActive });
  return { ...eventType, patient, episodeId: episode.id, eventId: event.id, elementId: element.id, code };
}

function pngChunk(type: string, data: Uint8Array): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, 'latin1');
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])), 0);
  return Buffer.concat([head, data, crc]);
}

/**
 * A valid RGB PNG of `width` x `height`. With `isNoisy`, the pixels are random, so the file is about
 * 3 * width * height bytes (a 100 x 68 noisy PNG is about 20 KB).
 */
export function makePng(width = 4, height = 3, options: { isNoisy?: boolean } = {}): Buffer {
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  const rowBytes = 1 + 3 * width;
  const raw =
    options.isNoisy === true ? randomBytes(rowBytes * height) : Buffer.alloc(rowBytes * height, 0x7f);
  for (let y = 0; y < height; y++) raw[y * rowBytes] = 0; // filter type None
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    pngChunk('IHDR', ihdr),
    pngChunk('IDAT', deflateSync(raw)),
    pngChunk('IEND', new Uint8Array(0)),
  ]);
}

/** A structurally complete baseline JPEG header chain (SOI, DQT, SOF0, DHT, SOS, data, EOI). */
export function makeJpeg(): Buffer {
  const segment = (marker: number, data: number[]) => [
    0xff,
    marker,
    (data.length + 2) >> 8,
    (data.length + 2) & 0xff,
    ...data,
  ];
  return Buffer.from([
    0xff,
    0xd8,
    ...segment(0xdb, [0x00, ...new Array<number>(64).fill(1)]),
    ...segment(0xc0, [8, 0, 1, 0, 1, 1, 1, 0x11, 0]),
    ...segment(0xc4, [0x00, 1, ...new Array<number>(15).fill(0), 0]),
    ...segment(0xda, [1, 1, 0x00, 0, 63, 0]),
    0x00,
    0x3f,
    0xff,
    0xd9,
  ]);
}

/** Base64 of `bytes`. */
export function b64(bytes: Uint8Array): string {
  return Buffer.from(bytes).toString('base64');
}
