/**
 * Files a device object's attachments as a clinician expects: one OphGeneric event per patient and study
 * (StudyInstanceUID, the profile's subtype, and the device model for visual fields and OCT), found through
 * the service's own index (`device_event`), so that a second file of the study joins the event and the
 * left and right eye merge (eye both). A new event gets its subtype item (the profile's, else
 * `Fundus Images` for an image and `OCT Images` for anything else), a Comments element, a Device
 * Information element from the first file's header, and (on OpenEyes) its attachment element row; the
 * event date is the device's date, never the time of filing. A deleted event is never joined: the study
 * gets a new one. An HFA profile also writes the visual field indices of each eye from its own file.
 *
 * Rows of OpenEyes's versioned tables are copied to their `_version` twin before every update (the
 * schema profile's `keepRowVersions`); `created_*` columns are never touched by an update. An HFA entry
 * is never updated: OpenEyes's trigger would rewrite the eye's whole visual-field history.
 *
 * Header text goes through `fitColumn` (column-width.ts) before it is written: the Device Information
 * columns are `text` (cut to what one holds; on OpenEyes's utf8mb3 tables a character beyond U+FFFF
 * becomes U+FFFD), and the index's key columns refuse a longer value, since a key cut to its width could
 * join one study's files to another's event.
 */
import type { Kysely } from 'kysely';
import type { DialectAdapter } from '../../db/dialect.ts';
import type { DB } from '../../db/schema.ts';
import type { SchemaProfile } from '../../db/schema-profile.ts';
import type { AuditStamp } from '../attachment-data/index.ts';
import { linkAttachmentsToEvent, updateAttachmentData } from '../attachment-data/index.ts';
import type { EventDate } from '../event-filing/index.ts';
import { createEvent, touchEvent } from '../event-filing/index.ts';
import type { ColumnWidth, FitOptions } from './column-width.ts';
import { TEXT_COLUMN_CHARACTERS, fitColumn, fitOptionalColumn } from './column-width.ts';
import type { DeviceHeader } from './device-header.ts';
import { bodySiteOf, deviceInformationOf, eyeIdOf, headerText, mergeEyes } from './device-header.ts';
import type { HfaValues } from './hfa.ts';
import { readHfaValues } from './hfa.ts';
import type { DeviceFiler, EyeLetter } from './profiles.ts';
import type { DeviceInformationValues, DeviceTables } from './tables.ts';

/** What filing needs of the routine that runs it. */
export interface FilingContext {
  readonly trx: Kysely<DB>;
  readonly dialect: DialectAdapter;
  readonly schema: SchemaProfile;
  readonly stamp: AuditStamp;
  /** A line of the routine's log (never patient data). */
  log(line: string): void;
}

export interface DeviceFiling {
  readonly requestId: number;
  readonly patientId: number;
  readonly header: DeviceHeader;
  readonly profile: {
    readonly name: string;
    readonly subtype: string | null;
    readonly attachmentType: string;
    readonly filer: DeviceFiler;
  };
  readonly eye: EyeLetter | null;
  /** The device's date (a wall-clock time in the site's zone): stored by event filing's rule. */
  readonly eventDate: EventDate;
  readonly institutionId: number | null;
  /**
   * The firm whose subspecialty's open episode is preferred, and of new episodes: the worklist entry's
   * firm, else `DEVICE_FIRM_ID`.
   */
  readonly firmId: number | undefined;
  /** The worklist entry's subspecialty (its context names no firm): its open episode is preferred. */
  readonly subspecialtyId?: number | undefined;
  readonly eventTypeId: number;
  readonly attachmentElementTypeId: number;
  /** The attachments to file; `isExtracted` marks the images and PDFs taken from the DICOM file. */
  readonly attachments: readonly { readonly id: number; readonly isExtracted: boolean }[];
}

export interface DeviceFilingOutcome {
  readonly eventId: number;
  readonly isNewEvent: boolean;
  /** The event's eye once this file is in. */
  readonly eye: EyeLetter | null;
  /** What happened to the visual field indices (HFA profiles), for the log and the request. */
  readonly hfa?: string;
}

/** Modalities whose study events are also told apart by the device model. */
const MODEL_KEYED_MODALITIES = new Set(['OPV', 'OPT']);

const EYE_OF_ID: Record<number, EyeLetter> = { 1: 'L', 2: 'R', 3: 'B' };

/** The key columns of the service's index (`varchar(64)` in both schemas): refused beyond their width. */
const KEY_COLUMNS = {
  studyInstanceUid: { column: 'device_event.study_instance_uid', width: 64, onOverflow: 'refuse' },
  model: { column: 'device_event.model', width: 64, onOverflow: 'refuse' },
} as const satisfies Record<string, ColumnWidth>;

/**
 * The index's table is utf8mb4 in both schemas: its keys keep every character, so that two values that
 * differ only in a character beyond U+FFFF stay two keys.
 */
const KEY_CODE_POINTS = 0x10ffff;

function fitOptionsOf(ctx: FilingContext, maxCodePoint = ctx.schema.maxTextCodePoint): FitOptions {
  return { maxCodePoint, log: (line) => ctx.log(line) };
}

/** The Device Information columns of a file's header, as their `text` columns store them. */
function fittedDeviceInformation(ctx: FilingContext, header: DeviceHeader): DeviceInformationValues {
  const fit = fitOptionsOf(ctx);
  const values = deviceInformationOf(header);
  for (const column of Object.keys(values) as (keyof DeviceInformationValues)[]) {
    values[column] = fitOptionalColumn(
      values[column],
      {
        column: `et_ophgeneric_device_information.${column}`,
        width: TEXT_COLUMN_CHARACTERS,
        onOverflow: 'cut',
      },
      fit,
    );
  }
  return values;
}

function audit(stamp: AuditStamp) {
  return {
    created_user_id: stamp.userId,
    last_modified_user_id: stamp.userId,
    created_date: stamp.now,
    last_modified_date: stamp.now,
  };
}

/** `name` when the reference table has that row, else undefined. */
async function existingSubtype(trx: Kysely<DB>, subtype: string | null): Promise<string | undefined> {
  if (subtype === null) return undefined;
  const row = await trx
    .withTables<DeviceTables>()
    .selectFrom('event_subtype')
    .select('event_subtype')
    .where('event_subtype', '=', subtype)
    .executeTakeFirst();
  return row?.event_subtype;
}

/** The subtypes of an event whose profile names none that exists: by what the file holds. */
const FALLBACK_SUBTYPES = { image: 'Fundus Images', other: 'OCT Images' } as const;

/**
 * The event's subtype: the profile's when `event_subtype` has it, else the fallback by what the file
 * holds (`Fundus Images` when an image was taken from it, else `OCT Images`), so that every event gets
 * a title OpenEyes can show; undefined only when `event_subtype` has neither.
 */
async function subtypeOf(ctx: FilingContext, filing: DeviceFiling): Promise<string | undefined> {
  const named = await existingSubtype(ctx.trx, filing.profile.subtype);
  if (named !== undefined) return named;
  const extractedIds = filing.attachments.filter((a) => a.isExtracted).map((a) => a.id);
  const images =
    extractedIds.length === 0
      ? []
      : await ctx.trx
          .selectFrom('attachment_data')
          .select('id')
          .where('id', 'in', extractedIds)
          .where('mime_type', 'like', 'image/%')
          .execute();
  const fallback = FALLBACK_SUBTYPES[images.length > 0 ? 'image' : 'other'];
  const subtype = await existingSubtype(ctx.trx, fallback);
  ctx.log(
    `${filing.profile.subtype === null ? 'the profile names no event subtype' : `event subtype "${filing.profile.subtype}" is not in event_subtype`}: ${subtype === undefined ? 'filed without a subtype' : `filed as ${subtype}`}`,
  );
  return subtype;
}

async function existingAttachmentType(trx: Kysely<DB>, type: string): Promise<boolean> {
  const row = await trx
    .selectFrom('attachment_type')
    .select('attachment_type')
    .where('attachment_type', '=', type)
    .executeTakeFirst();
  return row !== undefined;
}

/** Creates the event of a study with its elements; returns its id and its Device Information row's. */
async function createStudyEvent(
  ctx: FilingContext,
  filing: DeviceFiling,
  subtype: string | undefined,
): Promise<{ eventId: number; deviceInformationId: number }> {
  const { trx, stamp } = ctx;
  const db = trx.withTables<DeviceTables>();
  const { eventId } = await createEvent(ctx, {
    patientId: filing.patientId,
    eventTypeId: filing.eventTypeId,
    eventDate: filing.eventDate,
    episode: {
      kind: 'open',
      ...(filing.firmId === undefined ? {} : { firmId: filing.firmId }),
      ...(filing.subspecialtyId === undefined ? {} : { subspecialtyId: filing.subspecialtyId }),
    },
    institutionId: filing.institutionId,
    automatedSource: JSON.stringify({ request_id: filing.requestId, device_profile: filing.profile.name }),
    ...(subtype === undefined ? {} : { subtype }),
    hasAttachmentElement: true,
  });
  await db
    .insertInto('et_ophgeneric_comments')
    .values({ event_id: eventId, comment: null, ...audit(stamp) })
    .execute();
  const information = await db
    .insertInto('et_ophgeneric_device_information')
    .values({
      event_id: eventId,
      last_request_id: filing.requestId,
      ...fittedDeviceInformation(ctx, filing.header),
      ...audit(stamp),
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return { eventId, deviceInformationId: information.id };
}

/**
 * Files `filing` (see the module comment). Throws a `ColumnWidthError` before anything is written when a
 * key of the index is longer than its column.
 */
export async function fileDeviceObject(
  ctx: FilingContext,
  filing: DeviceFiling,
): Promise<DeviceFilingOutcome> {
  const { trx, stamp } = ctx;
  const db = trx.withTables<DeviceTables>();
  const studyUid =
    headerText(filing.header, 'StudyInstanceUID') ??
    headerText(filing.header, 'SOPInstanceUID') ??
    `request-${filing.requestId}`;
  const modality = headerText(filing.header, 'Modality')?.toUpperCase() ?? '';
  const keyFit = fitOptionsOf(ctx, KEY_CODE_POINTS);
  const model = MODEL_KEYED_MODALITIES.has(modality)
    ? fitColumn(headerText(filing.header, 'ManufacturerModelName') ?? '', KEY_COLUMNS.model, keyFit)
    : '';
  const studyKey = fitColumn(studyUid, KEY_COLUMNS.studyInstanceUid, keyFit);
  const subtype = await subtypeOf(ctx, filing);
  const key = {
    patient_id: filing.patientId,
    study_instance_uid: studyKey,
    event_subtype: subtype ?? '',
    model,
  };

  const indexed = await db
    .selectFrom('device_event as de')
    .innerJoin('event as e', 'e.id', 'de.event_id')
    .select(['de.id', 'de.event_id', 'de.device_information_id', 'de.eye_id', 'e.deleted'])
    .where('de.patient_id', '=', key.patient_id)
    .where('de.study_instance_uid', '=', key.study_instance_uid)
    .where('de.event_subtype', '=', key.event_subtype)
    .where('de.model', '=', key.model)
    .executeTakeFirst();

  let eventId: number;
  let isNewEvent: boolean;
  let eye: EyeLetter | null;
  if (indexed !== undefined && indexed.deleted === 0) {
    eventId = indexed.event_id;
    isNewEvent = false;
    const before = indexed.eye_id === null ? null : (EYE_OF_ID[indexed.eye_id] ?? null);
    eye = mergeEyes(before, filing.eye);
    await db
      .updateTable('device_event')
      .set({ eye_id: eye === null ? null : eyeIdOf(eye), last_modified_date: stamp.now })
      .where('id', '=', indexed.id)
      .execute();
    if (eye === 'B' && before !== 'B' && indexed.device_information_id !== null) {
      // Both eyes of the study are in: the Device Information says so.
      await ctx.schema.keepRowVersions(trx, 'et_ophgeneric_device_information', [
        indexed.device_information_id,
      ]);
      await db
        .updateTable('et_ophgeneric_device_information')
        .set({
          laterality: 'B',
          image_laterality: 'B',
          last_modified_user_id: stamp.userId,
          last_modified_date: stamp.now,
        })
        .where('id', '=', indexed.device_information_id)
        .execute();
    }
    await touchEvent(ctx, eventId);
    ctx.log(`event ${eventId}: joined (study already filed)`);
  } else {
    const created = await createStudyEvent(ctx, filing, subtype);
    eventId = created.eventId;
    isNewEvent = true;
    eye = filing.eye;
    const row = {
      event_id: eventId,
      device_information_id: created.deviceInformationId,
      eye_id: eye === null ? null : eyeIdOf(eye),
      last_modified_date: stamp.now,
    };
    if (indexed === undefined) {
      await db
        .insertInto('device_event')
        .values({ ...key, ...row, created_date: stamp.now })
        .execute();
    } else {
      // The study's event was deleted in OpenEyes: the study starts again on a new event.
      await db.updateTable('device_event').set(row).where('id', '=', indexed.id).execute();
    }
    ctx.log(`event ${eventId}: created for the study${subtype === undefined ? '' : ` (${subtype})`}`);
  }

  await linkAttachmentsToEvent(
    trx,
    {
      eventId,
      elementTypeId: filing.attachmentElementTypeId,
      attachmentIds: filing.attachments.map((a) => a.id),
      systemOnlyManaged: 1,
      isNewEvent,
    },
    stamp,
  );
  let attachmentType = filing.profile.attachmentType;
  if (!(await existingAttachmentType(trx, attachmentType))) {
    ctx.log(`attachment type "${attachmentType}" is not in attachment_type: NONE instead`);
    attachmentType = 'NONE';
  }
  for (const attachment of filing.attachments.filter((a) => a.isExtracted)) {
    await updateAttachmentData(
      trx,
      ctx.dialect,
      { id: attachment.id },
      { attachmentType, bodySite: filing.eye === null ? null : bodySiteOf(filing.eye) },
      stamp,
    );
  }

  if (filing.profile.filer !== 'hfa') return { eventId, isNewEvent, eye };
  const hfa = await writeVisualField(ctx, filing, eventId);
  ctx.log(`visual field: ${hfa}`);
  return { eventId, isNewEvent, eye, hfa };
}

/**
 * Writes the HFA element of the event (one, its eye widened to both once both eyes are in) and the entry
 * of the file's eye, when the file's indices are usable and OpenEyes's statistics trigger can take them
 * (an episode, a date of birth, one eye). An eye that has its entry keeps it: an identical file changes
 * nothing, a differing one is logged and left. Returns what happened.
 */
async function writeVisualField(ctx: FilingContext, filing: DeviceFiling, eventId: number): Promise<string> {
  const { trx, stamp } = ctx;
  const db = trx.withTables<DeviceTables>();
  const reading = readHfaValues(filing.header);
  if ('problem' in reading) return `not written: ${reading.problem}`;
  if (filing.eye !== 'L' && filing.eye !== 'R') return 'not written: the file names no single eye';
  const patient = await trx
    .selectFrom('patient')
    .select('dob')
    .where('id', '=', filing.patientId)
    .executeTakeFirst();
  if (patient?.dob === null || patient?.dob === undefined) {
    return 'not written: the patient has no date of birth';
  }
  const eyeId = eyeIdOf(filing.eye);
  const values: HfaValues = reading.values;
  let element = await db
    .selectFrom('et_ophgeneric_hfa')
    .select(['id', 'eye_id'])
    .where('event_id', '=', eventId)
    .orderBy('id')
    .executeTakeFirst();
  if (element === undefined) {
    const inserted = await db
      .insertInto('et_ophgeneric_hfa')
      .values({ event_id: eventId, eye_id: eyeId, ...audit(stamp) })
      .returning('id')
      .executeTakeFirstOrThrow();
    element = { id: inserted.id, eye_id: eyeId };
  }
  const entry = await db
    .selectFrom('ophgeneric_hfa_entry')
    .select(['id', 'mean_deviation', 'visual_field_index'])
    .where('element_id', '=', element.id)
    .where('eye_id', '=', eyeId)
    .orderBy('id')
    .executeTakeFirst();
  if (entry !== undefined) {
    return entry.mean_deviation === values.meanDeviation &&
      entry.visual_field_index === values.visualFieldIndex
      ? `eye ${filing.eye} already has these indices`
      : `eye ${filing.eye} already has other indices: left as they are`;
  }
  await db
    .insertInto('ophgeneric_hfa_entry')
    .values({
      element_id: element.id,
      eye_id: eyeId,
      mean_deviation: values.meanDeviation,
      visual_field_index: values.visualFieldIndex,
      ...audit(stamp),
    })
    .execute();
  if (element.eye_id !== eyeId && element.eye_id !== 3) {
    await ctx.schema.keepRowVersions(trx, 'et_ophgeneric_hfa', [element.id]);
    await db
      .updateTable('et_ophgeneric_hfa')
      .set({ eye_id: 3, last_modified_user_id: stamp.userId, last_modified_date: stamp.now })
      .where('id', '=', element.id)
      .execute();
  }
  return `eye ${filing.eye}: mean deviation and VFI written (${values.source})`;
}
