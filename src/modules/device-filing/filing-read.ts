/**
 * What device filing did, as the operations console shows it: a request's profile, eye and event with
 * the visual field indices of that event, and the subtypes of events (their title in OpenEyes).
 */
import type { Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { DeviceTables } from './tables.ts';

export interface RequestDeviceFiling {
  readonly profile: string;
  readonly subtype: string | null;
  readonly filer: string | null;
  /** The file's eye (L, R, B) or null. */
  readonly eye: string | null;
  readonly eventId: number | null;
  /** What happened to the visual field indices, as logged. */
  readonly visualField: string | null;
  /** The indices of the event, per eye (1 left, 2 right). */
  readonly entries: readonly {
    readonly eyeId: number | null;
    readonly meanDeviation: string | null;
    readonly visualFieldIndex: string | null;
  }[];
}

const DETAIL_NAMES = [
  'device_profile',
  'device_subtype',
  'device_filer',
  'device_laterality',
  'device_hfa',
  'event_id',
];

/** The device filing of request `requestId` (from its shredded `REQUEST_DATA`), or undefined. */
export async function readRequestDeviceFiling(
  db: Kysely<DB>,
  requestId: number,
): Promise<RequestDeviceFiling | undefined> {
  const rows = await db
    .selectFrom('request_details')
    .select(['name', 'value'])
    .where('request_id', '=', requestId)
    .where('name', 'in', DETAIL_NAMES)
    .orderBy('id')
    .execute();
  const value = new Map(rows.map((r) => [r.name, r.value]));
  const profile = value.get('device_profile');
  if (profile === undefined || profile === null) return undefined;
  const eventText = value.get('event_id');
  const eventId = eventText === undefined || eventText === null ? null : Number(eventText);
  const entries =
    eventId === null || !Number.isInteger(eventId)
      ? []
      : await db
          .withTables<DeviceTables>()
          .selectFrom('ophgeneric_hfa_entry as x')
          .innerJoin('et_ophgeneric_hfa as h', 'h.id', 'x.element_id')
          .select(['x.eye_id', 'x.mean_deviation', 'x.visual_field_index'])
          .where('h.event_id', '=', eventId)
          .orderBy('x.eye_id')
          .execute();
  return {
    profile,
    subtype: value.get('device_subtype') ?? null,
    filer: value.get('device_filer') ?? null,
    eye: value.get('device_laterality') ?? null,
    eventId: eventId !== null && Number.isInteger(eventId) ? eventId : null,
    visualField: value.get('device_hfa') ?? null,
    entries: entries.map((e) => ({
      eyeId: e.eye_id,
      meanDeviation: e.mean_deviation,
      visualFieldIndex: e.visual_field_index,
    })),
  };
}

/** The subtype title (`display_name` of the lowest `display_order` item) of each of `eventIds` that has one. */
export async function readEventSubtypes(
  db: Kysely<DB>,
  eventIds: readonly number[],
): Promise<Map<number, string>> {
  const titles = new Map<number, string>();
  if (eventIds.length === 0) return titles;
  const rows = await db
    .withTables<DeviceTables>()
    .selectFrom('event_subtype_item as i')
    .innerJoin('event_subtype as s', 's.event_subtype', 'i.event_subtype')
    .select(['i.event_id', 's.display_name'])
    .where('i.event_id', 'in', [...new Set(eventIds)])
    .orderBy('i.event_id')
    .orderBy('i.display_order')
    .orderBy('i.id')
    .execute();
  for (const row of rows) if (!titles.has(row.event_id)) titles.set(row.event_id, row.display_name);
  return titles;
}
