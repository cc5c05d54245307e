/**
 * The one way an event is created: generic attachments (`ATTACH_TO_EVENT`), device files, biometry and the
 * PAS's Did Not Attend all call {@link createEvent}. It chooses the episode by one rule, writes the event
 * row with its audit columns, the institution, the episode's firm and the date as the schema stores it,
 * the event's subtype item and, where the schema has one, the attachment element row.
 *
 * **The episode** (openeyes-behaviour.md D77): the patient's open episode (not deleted, not legacy, not
 * support services, not ended; on OpenEyes also not a change-tracker episode and not Discharged): with a
 * firm, the most recent one in that firm's subspecialty (on OpenEyes: a firm of the same service
 * subspecialty assignment; in the own schema, which has no firm table: that firm), then the most recent of
 * any firm; else a new one starting at the event date, for that firm (or none). An imported Biometry
 * event has no episode (`unlinked`): OpenEyes links it when a user picks it.
 *
 * **The date**: a device's wall-clock time in the site's zone (`TIME_ZONE`) is stored as the schema
 * stores date-times ({@link storedEventDate}: UTC in the own schema, that local time on OpenEyes), so that
 * every event of one study carries one date; the time of filing is the stored stamp itself.
 */
import type { Generated, Kysely } from 'kysely';
import type { DialectAdapter } from '../../db/dialect.ts';
import type { DB } from '../../db/schema.ts';
import type { SchemaProfile } from '../../db/schema-profile.ts';
import { formatDateTime, storedTimeZone, wallClockFormat } from '../../db/stored-time.ts';
import type { AuditStamp } from '../attachment-data/index.ts';

/**
 * The classes of the attachment element (OphGeneric's, which the Biometry event type has too): the own
 * schema's (migration 0007) and OpenEyes's. Ordered as they are looked up.
 */
export const ATTACHMENT_ELEMENT_CLASSES: readonly string[] = [
  'Element_OphGeneric_Attachment',
  'OEModule\\OphGeneric\\models\\Attachment',
];

/** What writing an event needs of its caller (a routine's context, a PAS change). */
export interface EventWriter {
  readonly trx: Kysely<DB>;
  readonly schema: SchemaProfile;
  readonly dialect: DialectAdapter;
  readonly stamp: AuditStamp;
}

/**
 * The date of a new event: a wall-clock time (`YYYY-MM-DD HH:MM:SS`) in `timeZone`, stored as the schema
 * stores date-times; or a text stored as it is (a stamp already in the stored zone, a calendar date).
 */
export type EventDate =
  { readonly wallClock: string; readonly timeZone: string } | { readonly stored: string };

/**
 * Which open episode a new event prefers: those of `subspecialtyId` when given (a worklist entry's
 * subspecialty; on OpenEyes only, through its firms' service assignments), else those of `firmId`'s
 * subspecialty; a new episode is for `firmId` (or none).
 */
export interface EpisodePreference {
  readonly firmId?: number;
  readonly subspecialtyId?: number;
}

export interface NewEvent {
  readonly patientId: number;
  readonly eventTypeId: number;
  readonly eventDate: EventDate;
  /** `open`: the episode rule of the file comment; `unlinked`: no episode. */
  readonly episode: ({ readonly kind: 'open' } & EpisodePreference) | { readonly kind: 'unlinked' };
  readonly institutionId: number | null;
  readonly siteId?: number | null;
  /** `event.automated_source`. */
  readonly automatedSource: string;
  /** An `event_subtype` row's name: the event gets its subtype item. */
  readonly subtype?: string;
  /** The event gets its attachment element row, where the schema has that table. */
  readonly hasAttachmentElement?: boolean;
}

export interface CreatedEvent {
  readonly eventId: number;
  readonly episodeId: number | null;
  readonly firmId: number | null;
  /** `event.event_date` as written. */
  readonly eventDate: string;
}

/** The tables beside the service's `DB` that event creation writes or reads (where the schema has them). */
type EventTables = {
  episode: { change_tracker: number | null; episode_status_id: number | null };
  episode_status: { id: number; name: string };
  firm: { id: number; service_subspecialty_assignment_id: number | null };
  service_subspecialty_assignment: { id: number; subspecialty_id: number };
  event_subtype_item: {
    id: Generated<number>;
    event_id: number;
    event_subtype: string;
    display_order: number;
    created_user_id: number;
    last_modified_user_id: number;
    created_date: string;
    last_modified_date: string;
  };
};

/** A row of the schema's attachment element table (OpenEyes's `et_ophgeneric_attachment`). */
type AttachmentElementTables = Record<
  string,
  {
    id: Generated<number>;
    event_id: number;
    created_user_id: number;
    last_modified_user_id: number;
    created_date: string;
    last_modified_date: string;
  }
>;

function audit(stamp: AuditStamp) {
  return {
    created_user_id: stamp.userId,
    last_modified_user_id: stamp.userId,
    created_date: stamp.now,
    last_modified_date: stamp.now,
  };
}

/**
 * The stored date-time of a wall-clock `YYYY-MM-DD HH:MM:SS` in `timeZone` (the site's zone): the text
 * itself where the database stores that zone's local time (OpenEyes), else converted (UTC). The same rule
 * on either side of UTC: a time the clocks skip (spring forward) is read with the offset before the change,
 * so it lands the gap's length later; a time they repeat (fall back) is the earlier of its two instants.
 */
export function storedEventDate(wallClock: string, timeZone: string): string {
  if (timeZone === storedTimeZone()) return wallClock;
  const format = wallClockFormat(timeZone);
  const wallAt = (instant: number) => {
    const part: Record<string, string> = {};
    for (const { type, value } of format.formatToParts(new Date(instant))) part[type] = value;
    return Date.parse(`${part.year}-${part.month}-${part.day}T${part.hour}:${part.minute}:${part.second}Z`);
  };
  const asUtc = Date.parse(`${wallClock.replace(' ', 'T')}Z`);
  const DAY_MS = 24 * 60 * 60 * 1000;
  // The zone's offsets a day either side: one transition at most lies between them.
  const offsetBefore = wallAt(asUtc - DAY_MS) - (asUtc - DAY_MS);
  const offsetAfter = wallAt(asUtc + DAY_MS) - (asUtc + DAY_MS);
  const candidates = [asUtc - offsetBefore, asUtc - offsetAfter].filter(
    (instant) => wallAt(instant) === asUtc,
  );
  const instant = candidates.length > 0 ? Math.min(...candidates) : asUtc - offsetBefore;
  return formatDateTime(new Date(instant));
}

/** `event.event_date` of `date`. */
export function storedDateOf(date: EventDate): string {
  return 'stored' in date ? date.stored : storedEventDate(date.wallClock, date.timeZone);
}

/** The patient's episode for a new event (the rule of the file comment); created when it has none. */
export async function chooseEpisode(
  writer: EventWriter,
  patientId: number,
  startDate: string,
  preference: EpisodePreference,
): Promise<{ id: number; firmId: number | null }> {
  const { trx, schema, stamp } = writer;
  const { firmId, subspecialtyId } = preference;
  let query = trx
    .withTables<EventTables>()
    .selectFrom('episode')
    .select(['episode.id', 'episode.firm_id'])
    .where('episode.patient_id', '=', patientId)
    .where('episode.deleted', '=', 0)
    .where((eb) => eb.or([eb('episode.legacy', '=', 0), eb('episode.legacy', 'is', null)]))
    .where('episode.support_services', '=', 0)
    .where('episode.end_date', 'is', null);
  if (schema.hasEpisodeWorkflow) {
    query = query
      .where((eb) => eb.or([eb('episode.change_tracker', 'is', null), eb('episode.change_tracker', '=', 0)]))
      .where((eb) =>
        eb.not(
          eb.exists(
            eb
              .selectFrom('episode_status as s')
              .select('s.id')
              .whereRef('s.id', '=', 'episode.episode_status_id')
              .where('s.name', '=', 'Discharged'),
          ),
        ),
      );
  }
  if (subspecialtyId !== undefined && schema.hasFirmSubspecialties) {
    // Episodes of the subspecialty's firms first (0), then the others (1).
    query = query.orderBy((eb) =>
      eb
        .case()
        .when(
          eb(
            'episode.firm_id',
            'in',
            eb
              .selectFrom('firm as same')
              .innerJoin(
                'service_subspecialty_assignment as ssa',
                'ssa.id',
                'same.service_subspecialty_assignment_id',
              )
              .select('same.id')
              .where('ssa.subspecialty_id', '=', subspecialtyId),
          ),
        )
        .then(0)
        .else(1)
        .end(),
    );
  } else if (firmId !== undefined) {
    // Episodes of the firm's subspecialty first (0), then the others (1).
    query = query.orderBy((eb) =>
      eb
        .case()
        .when(
          schema.hasFirmSubspecialties
            ? eb(
                'episode.firm_id',
                'in',
                eb
                  .selectFrom('firm as same')
                  .innerJoin('firm as configured', (join) =>
                    join.onRef(
                      'configured.service_subspecialty_assignment_id',
                      '=',
                      'same.service_subspecialty_assignment_id',
                    ),
                  )
                  .select('same.id')
                  .where('configured.id', '=', firmId),
              )
            : eb('episode.firm_id', '=', firmId),
        )
        .then(0)
        .else(1)
        .end(),
    );
  }
  const open = await query
    .orderBy('episode.start_date', 'desc')
    .orderBy('episode.id', 'desc')
    .executeTakeFirst();
  if (open !== undefined) return { id: open.id, firmId: open.firm_id };
  const created = await trx
    .insertInto('episode')
    .values({ patient_id: patientId, firm_id: firmId ?? null, start_date: startDate, ...audit(stamp) })
    .returning('id')
    .executeTakeFirstOrThrow();
  return { id: created.id, firmId: firmId ?? null };
}

/** Creates an event (see the file comment). */
export async function createEvent(writer: EventWriter, event: NewEvent): Promise<CreatedEvent> {
  const { trx, stamp } = writer;
  const eventDate = storedDateOf(event.eventDate);
  const episode =
    event.episode.kind === 'open'
      ? await chooseEpisode(writer, event.patientId, eventDate, event.episode)
      : { id: null, firmId: null };
  const row = await trx
    .insertInto('event')
    .values({
      episode_id: episode.id,
      event_type_id: event.eventTypeId,
      event_date: eventDate,
      is_automated: 1,
      automated_source: event.automatedSource,
      info: null,
      firm_id: episode.firmId,
      institution_id: event.institutionId,
      site_id: event.siteId ?? null,
      ...audit(stamp),
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  if (event.hasAttachmentElement === true) await ensureAttachmentElement(writer, row.id);
  if (event.subtype !== undefined) {
    await trx
      .withTables<EventTables>()
      .insertInto('event_subtype_item')
      .values({ event_id: row.id, event_subtype: event.subtype, display_order: 1, ...audit(stamp) })
      .execute();
  }
  return { eventId: row.id, episodeId: episode.id, firmId: episode.firmId, eventDate };
}

/**
 * Gives the event its attachment element row where the schema has that table (OpenEyes shows an event's
 * attachments through it), unless it has one.
 */
export async function ensureAttachmentElement(writer: EventWriter, eventId: number): Promise<void> {
  const table = writer.schema.attachmentElementTable;
  if (table === undefined) return;
  const elements = writer.trx.withTables<AttachmentElementTables>();
  const row = await elements
    .selectFrom(table)
    .select('id')
    .where('event_id', '=', eventId)
    .executeTakeFirst();
  if (row !== undefined) return;
  await elements
    .insertInto(table)
    .values({ event_id: eventId, ...audit(writer.stamp) })
    .execute();
}

/**
 * Marks an existing event modified by this change: its row copied into `event_version` first where the
 * schema keeps versions, then its modifier and a modification date that only moves forward.
 */
export async function touchEvent(writer: EventWriter, eventId: number): Promise<void> {
  const { trx, schema, dialect, stamp } = writer;
  await schema.keepRowVersions(trx, 'event', [eventId]);
  await trx
    .updateTable('event')
    .set({
      last_modified_user_id: stamp.userId,
      last_modified_date: dialect.nextModifiedDate('last_modified_date', stamp.now),
    })
    .where('id', '=', eventId)
    .execute();
}

/** The institution `code` names (`institution.remote_id`: `INSTITUTION_CODE`), the first by id. */
export async function findInstitutionId(db: Kysely<DB>, code: string): Promise<number | undefined> {
  const row = await db
    .selectFrom('institution')
    .select('id')
    .where('remote_id', '=', code)
    .orderBy('id')
    .executeTakeFirst();
  return row?.id;
}
