/**
 * Factories for attachment tests: `attachment_data` rows (with the `request` row they need), events and
 * element types to link uploads to, and small valid PNG/JPEG/PDF byte strings.
 */
import type { Kysely } from 'kysely';
import type { DB, NewRow } from '../src/db/schema.ts';
import { unique } from './factories.ts';

/** A date well outside the immutability grace period. */
export const SETTLED_DATE = '2020-03-04 05:06:07';
export const SETTLED_HTTP_DATE = 'Wed, 04 Mar 2020 05:06:07 GMT';

export const PNG_BYTES = Buffer.concat([
  Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
  Buffer.from('\0\0\0\rIHDR fake png body', 'latin1'),
]);
export const JPEG_BYTES = Buffer.concat([
  Buffer.from([0xff, 0xd8, 0xff, 0xe0]),
  Buffer.from('fake jpeg body'),
]);
export const PDF_BYTES = Buffer.from('%PDF-1.4\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n', 'latin1');

/**
 * A `request` row of the seeded `dicom_request` type, as the queue would write it; submitted by
 * `submitterUserId` (the column's default, the admin user, when omitted).
 */
export async function createRequest(
  db: Kysely<DB>,
  options: { readonly submitterUserId?: number } = {},
): Promise<number> {
  const submitter =
    options.submitterUserId === undefined
      ? {}
      : { created_user_id: options.submitterUserId, last_modified_user_id: options.submitterUserId };
  const row = await db
    .insertInto('request')
    .values({ request_type: 'dicom_request', system_message: 'test', ...submitter })
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

/** An `attachment_data` row; by default a settled PNG blob, with its own request. */
export async function createAttachment(
  db: Kysely<DB>,
  values: Partial<NewRow<'attachment_data'>> = {},
): Promise<number> {
  const requestId = values.request_id ?? (await createRequest(db));
  const row = await db
    .insertInto('attachment_data')
    .values({
      request_id: requestId,
      attachment_mnemonic: unique('TEST_'),
      attachment_type: 'NONE',
      mime_type: 'image/png',
      blob_data: PNG_BYTES,
      last_modified_date: SETTLED_DATE,
      ...values,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

/** An event (with the event type it needs) and an element type of that event type. */
export async function createEventWithElementType(
  db: Kysely<DB>,
): Promise<{ eventId: number; elementTypeId: number }> {
  const eventType = await db
    .insertInto('event_type')
    .values({ name: unique('Type'), class_name: unique('OphTest') })
    .returning('id')
    .executeTakeFirstOrThrow();
  const event = await db
    .insertInto('event')
    .values({ event_type_id: eventType.id })
    .returning('id')
    .executeTakeFirstOrThrow();
  const elementType = await db
    .insertInto('element_type')
    .values({ name: 'Attachment', class_name: unique('Element_'), event_type_id: eventType.id })
    .returning('id')
    .executeTakeFirstOrThrow();
  return { eventId: event.id, elementTypeId: elementType.id };
}
