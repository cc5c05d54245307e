/**
 * Attachments filed under events: `event_attachment_group` (one per event and element type) and
 * `event_attachment_item` (one per attachment), the tables OpenEyes shows an event's attachments from.
 */
import type { Expression, Kysely } from 'kysely';
import type { DialectAdapter } from '../../db/dialect.ts';
import type { DB } from '../../db/schema.ts';
import type { AuditStamp } from './attachment-data.ts';
import { readPayloadBytes } from './payloads.ts';

export interface EventLink {
  readonly eventId: number;
  readonly elementTypeId: number;
  readonly attachmentIds: readonly number[];
  /** 1 when the system added them (the UI then hides "remove"). */
  readonly systemOnlyManaged: 0 | 1;
  /** The event was created in this transaction, so it has no group yet (one read fewer). */
  readonly isNewEvent?: boolean;
}

/**
 * Files `attachmentIds` under the event's group of the element type, creating the group when the event
 * has none (an event made for them gets a new one). Given a `dialect` that runs writes inside WITH, a new
 * group and its items are one statement.
 */
export async function linkAttachmentsToEvent(
  trx: Kysely<DB>,
  link: EventLink,
  stamp: AuditStamp,
  dialect?: Pick<DialectAdapter, 'hasWritableCte'>,
): Promise<void> {
  if (link.attachmentIds.length === 0) return;
  const audit = {
    created_user_id: stamp.userId,
    last_modified_user_id: stamp.userId,
    created_date: stamp.now,
    last_modified_date: stamp.now,
  };
  const existing =
    link.isNewEvent === true
      ? undefined
      : await trx
          .selectFrom('event_attachment_group')
          .select('id')
          .where('event_id', '=', link.eventId)
          .where('element_type_id', '=', link.elementTypeId)
          .orderBy('id')
          .executeTakeFirst();
  const items = (groupId: number | Expression<number>) =>
    link.attachmentIds.map((attachmentId) => ({
      event_attachment_group_id: groupId,
      attachment_data_id: attachmentId,
      system_only_managed: link.systemOnlyManaged,
      event_document_view_set: null,
      ...audit,
    }));
  if (existing === undefined && dialect?.hasWritableCte === true) {
    await trx
      .with('new_group', (db) =>
        db
          .insertInto('event_attachment_group')
          .values({ event_id: link.eventId, element_type_id: link.elementTypeId, ...audit })
          .returning('id'),
      )
      .insertInto('event_attachment_item')
      .values((eb) => items(eb.selectFrom('new_group').select('new_group.id').$asScalar()))
      .execute();
    return;
  }
  const groupId =
    existing?.id ??
    (
      await trx
        .insertInto('event_attachment_group')
        .values({ event_id: link.eventId, element_type_id: link.elementTypeId, ...audit })
        .returning('id')
        .executeTakeFirstOrThrow()
    ).id;
  await trx.insertInto('event_attachment_item').values(items(groupId)).execute();
}

/**
 * True when attachment `attachmentId`, or one with the same content (same hash, then the same bytes), is
 * already filed under a live event of the patient. `readBytes` gives the attachment's bytes; it is called
 * only when another attachment has the same hash. The look-up (a five-table join, which costs more to
 * plan than to run) runs prepared.
 */
export async function isAttachedToPatient(
  db: Kysely<DB>,
  dialect: DialectAdapter,
  patientId: number,
  attachmentId: number,
  hash: number,
  readBytes: () => Promise<Buffer>,
): Promise<boolean> {
  const query = db
    .selectFrom('event_attachment_item as item')
    .innerJoin('event_attachment_group as g', 'g.id', 'item.event_attachment_group_id')
    .innerJoin('event as e', 'e.id', 'g.event_id')
    .innerJoin('episode as ep', 'ep.id', 'e.episode_id')
    .innerJoin('attachment_data as ad', 'ad.id', 'item.attachment_data_id')
    .select(['ad.id'])
    .where('ep.patient_id', '=', patientId)
    .where('e.deleted', '=', 0)
    .where((eb) => eb.or([eb('ad.id', '=', attachmentId), eb('ad.hash_code', '=', hash)]));
  const { rows: candidates } = await dialect.runPreparedOn(db, query.compile());
  if (candidates.some((c) => c.id === attachmentId)) return true;
  let bytes: Buffer | undefined;
  for (const candidate of candidates) {
    bytes ??= await readBytes();
    if ((await readPayloadBytes(db, candidate.id)).equals(bytes)) return true;
  }
  return false;
}
