/**
 * Files biometry as OpenEyes's biometry module keeps it: one Biometry (OphInBiometry) event per patient and
 * study (StudyInstanceUID), found through `ophinbiometry_imported_events`, with `episode_id` NULL (OpenEyes
 * links an imported event to an episode when a user picks it, setting `is_linked`), its measurement,
 * calculation and selection elements (one row each, per-eye columns) and one IOL table row per lens and
 * formula. A later file of the same study changes only the eyes it carries and widens the elements' eye
 * to both; a file whose values are already stored changes nothing. Reports (the IOLMaster's PDF, its
 * images) are filed under the event's attachment element, whichever file of the study comes first.
 * Rows are copied into their `_version` twins before an update where the schema keeps versions.
 */
import type { Generated, Kysely } from 'kysely';
import type { DialectAdapter } from '../../db/dialect.ts';
import type { DB } from '../../db/schema.ts';
import type { SchemaProfile } from '../../db/schema-profile.ts';
import type { AuditStamp } from '../attachment-data/index.ts';
import {
  contentHash,
  linkAttachmentsToEvent,
  readPayloadBytes,
  updateAttachmentData,
} from '../attachment-data/index.ts';
import { bodySiteOf } from '../device-filing/index.ts';
import type { BiometryStudy } from './biometry-file.ts';
import type { BiometryTables, ElementTableName } from './biometry-tables.ts';
import type { BiometryReading, EyeMeasurement, IolCalculation, Side } from './reading.ts';
import { SIDES, hasData } from './reading.ts';

export const BIOMETRY_EVENT_CLASS = 'OphInBiometry';
export const BIOMETRY_REPORT_TYPE = 'Biometry Report';
const MEASUREMENT_CLASS = 'Element_OphInBiometry_Measurement';
/** OphGeneric's attachment element, which the Biometry event type has too. */
const ATTACHMENT_CLASSES = ['OEModule\\OphGeneric\\models\\Attachment', 'Element_OphGeneric_Attachment'];
const DEFAULT_FORMULA = 'SRK/T';

export interface BiometryFilingDeps {
  readonly trx: Kysely<DB>;
  readonly dialect: DialectAdapter;
  readonly schema: SchemaProfile;
  readonly stamp: AuditStamp;
  /** `INSTITUTION_CODE`: the institution events are created in and new lenses are listed for. */
  readonly institutionCode: string;
  readonly requestId: number;
  log(line: string): void;
}

export interface BiometryFiling {
  readonly patientId: number;
  readonly study: BiometryStudy;
  readonly reading?: BiometryReading;
  /** Report rows (PDF, images) to file under the event's attachment element. */
  readonly attachmentIds: readonly number[];
  /**
   * The device profile's fixed eye (the IOLMaster 500 v7.5 report shows both eyes), for a file whose
   * header and data name none.
   */
  readonly profileEye?: 'L' | 'R' | 'B';
}

export interface BiometryFilingResult {
  readonly eventId: number;
  readonly isNewEvent: boolean;
  /** Element rows inserted or updated. */
  readonly changedRows: number;
  readonly attachedCount: number;
}

/** The Biometry event type and the element types filing needs (reference rows). */
export interface BiometryTypes {
  readonly eventTypeId: number;
  readonly attachmentElementTypeId: number;
}

/** The Biometry event type and its attachment element type; undefined when the schema lacks them. */
export async function readBiometryTypes(db: Kysely<DB>): Promise<BiometryTypes | undefined> {
  const rows = await db
    .selectFrom('element_type as et')
    .innerJoin('event_type as ev', 'ev.id', 'et.event_type_id')
    .select(['ev.id as eventTypeId', 'et.id as elementTypeId', 'et.class_name'])
    .where('ev.class_name', '=', BIOMETRY_EVENT_CLASS)
    .where('et.class_name', 'in', [MEASUREMENT_CLASS, ...ATTACHMENT_CLASSES])
    .orderBy('et.id')
    .execute();
  const attachment = rows.find((r) => ATTACHMENT_CLASSES.includes(r.class_name));
  if (attachment === undefined || !rows.some((r) => r.class_name === MEASUREMENT_CLASS)) return undefined;
  return { eventTypeId: attachment.eventTypeId, attachmentElementTypeId: attachment.elementTypeId };
}

type Db = Kysely<DB & BiometryTables>;

/** A row of the schema's attachment element table (OpenEyes's `et_ophgeneric_attachment`). */
type AttachmentElementRow = {
  id: Generated<number>;
  event_id: number;
  created_user_id: number;
  last_modified_user_id: number;
  created_date: string;
  last_modified_date: string;
};
type Values = Record<string, string | number | null>;

const suffix = (side: Side) => (side === 'R' ? 'right' : 'left');
const round = (value: number, places: number) => Math.round(value * 10 ** places) / 10 ** places;
const eyeIdOf = (sides: ReadonlySet<Side>) => (sides.has('R') && sides.has('L') ? 3 : sides.has('R') ? 2 : 1);
const sidesOfEyeId = (eyeId: number): Side[] => (eyeId === 3 ? ['R', 'L'] : eyeId === 2 ? ['R'] : ['L']);
const clip = (value: string | undefined, length: number) =>
  value === undefined ? null : value.slice(0, length);

/** The measurement columns of one eye (`_left`/`_right`), as the element stores them. */
function measurementColumns(
  side: Side,
  eye: EyeMeasurement | undefined,
  knownStatuses: ReadonlySet<number>,
): Values {
  const s = suffix(side);
  const d2 = (value: number | undefined) => round(value ?? 0, 2);
  const d1 = (value: number | undefined) => round(value ?? 0, 1);
  const k1 = eye?.k1;
  const k2 = eye?.k2;
  // Delta K: the device's cylinder, negative, when it gives one; else the difference of the Ks.
  const deltaK =
    eye?.meanCylinder !== undefined
      ? -eye.meanCylinder
      : k1 !== undefined && k2 !== undefined
        ? -Math.abs(k2 - k1)
        : undefined;
  const deltaKAxis =
    k1 !== undefined && k2 !== undefined ? (k1 <= k2 ? eye?.k1Axis : eye?.k2Axis) : undefined;
  const status = eye?.eyeStatus ?? -1;
  return {
    [`k1_${s}`]: d2(k1),
    [`k2_${s}`]: d2(k2),
    [`axial_length_${s}`]: d2(eye?.axialLengthMm),
    [`acd_${s}`]: d2(eye?.acdMm),
    [`delta_k_${s}`]: d2(deltaK),
    [`refraction_sphere_${s}`]: d2(eye?.refractionSphere),
    [`refraction_delta_${s}`]: d2(eye?.refractionDelta),
    [`k1_axis_${s}`]: d1(eye?.k1Axis),
    [`k2_axis_${s}`]: d1(eye?.k2Axis),
    [`delta_k_axis_${s}`]: d1(deltaKAxis),
    [`refraction_axis_${s}`]: d1(eye?.refractionAxis),
    [`snr_min_${s}`]: d1(eye?.snrMin),
    [`snr_${s}`]: eye?.snr === undefined ? null : d1(eye.snr),
    // Only the IOLMaster's own codes are stored; anything else is Unknown.
    [`eye_status_${s}`]: knownStatuses.has(status) ? status : -1,
    [`al_modified_${s}`]: eye?.isAlModified === true ? 1 : 0,
    [`k_modified_${s}`]: eye?.isKModified === true ? 1 : 0,
    [`lvc_${s}`]: eye?.lvc ?? null,
    [`lvc_mode_${s}`]: eye?.lvcMode ?? null,
  };
}

/** True when a stored value equals the value to write (decimals compared as numbers). */
function isSame(stored: unknown, value: string | number | null): boolean {
  if (value === null || stored === null || stored === undefined)
    return value === null && (stored ?? null) === null;
  if (typeof value === 'number') return Number(stored) === value;
  return typeof stored === 'string' && stored === value;
}

function mergeValues(parts: readonly Values[]): Values {
  const merged: Values = {};
  for (const part of parts) Object.assign(merged, part);
  return merged;
}

function changedColumns(stored: Record<string, unknown>, values: Values): Values {
  return Object.fromEntries(
    Object.entries(values).filter(([column, value]) => !isSame(stored[column], value)),
  );
}

/** Files `filing` in the caller's transaction (the caller holds the patient's lock). */
export async function fileBiometry(
  deps: BiometryFilingDeps,
  types: BiometryTypes,
  filing: BiometryFiling,
): Promise<BiometryFilingResult> {
  const db = deps.trx.withTables<BiometryTables>();
  const { study } = filing;
  const existing = await db
    .selectFrom('ophinbiometry_imported_events as ie')
    .innerJoin('event as e', 'e.id', 'ie.event_id')
    .selectAll('ie')
    .where('ie.patient_id', '=', filing.patientId)
    .where('ie.study_id', '=', study.studyInstanceUid)
    .where('e.deleted', '=', 0)
    .orderBy('ie.event_id', 'desc')
    .executeTakeFirst();

  let eventId: number;
  let isNewEvent = false;
  if (existing === undefined) {
    eventId = await createEvent(db, deps, types, filing);
    isNewEvent = true;
    deps.log(`Biometry event ${eventId} created for the study`);
  } else {
    eventId = existing.event_id;
    deps.log(`Biometry event ${eventId} of the study found`);
  }

  let changedRows = 0;
  const reading = filing.reading;
  if (reading !== undefined) {
    changedRows = await writeElements(db, deps, eventId, reading);
    if (existing !== undefined && changedRows > 0) {
      const isLater =
        study.contentDateTime !== undefined &&
        (existing.content_datetime === null || study.contentDateTime > String(existing.content_datetime));
      await db
        .updateTable('ophinbiometry_imported_events')
        .set({
          sop_uid: clip(study.sopInstanceUid, 255),
          ...(isLater ? { content_datetime: study.contentDateTime, is_merged: 1 } : {}),
          ...(existing.surgeon_name === null && reading.surgeonName !== undefined
            ? { surgeon_name: clip(reading.surgeonName, 255) }
            : {}),
          last_modified_user_id: deps.stamp.userId,
          last_modified_date: deps.stamp.now,
        })
        .where('id', '=', existing.id)
        .execute();
    }
  }
  const eye = reportEyeOf(filing);
  const attachedCount = await attachReports(db, deps, types, eventId, filing.attachmentIds, eye);
  if (!isNewEvent && (changedRows > 0 || attachedCount > 0)) {
    await deps.schema.keepRowVersions(db, 'event', [eventId]);
    await db
      .updateTable('event')
      .set({
        last_modified_user_id: deps.stamp.userId,
        last_modified_date: deps.dialect.nextModifiedDate('last_modified_date', deps.stamp.now),
      })
      .where('id', '=', eventId)
      .execute();
  }
  return { eventId, isNewEvent, changedRows, attachedCount };
}

async function createEvent(
  db: Db,
  deps: BiometryFilingDeps,
  types: BiometryTypes,
  filing: BiometryFiling,
): Promise<number> {
  const { stamp } = deps;
  const { study } = filing;
  const audit = {
    created_user_id: stamp.userId,
    last_modified_user_id: stamp.userId,
    created_date: stamp.now,
    last_modified_date: stamp.now,
  };
  const institution = await db
    .selectFrom('institution')
    .select('id')
    .where('remote_id', '=', deps.institutionCode)
    .orderBy('id')
    .executeTakeFirst();
  const event = await db
    .insertInto('event')
    .values({
      episode_id: null,
      event_type_id: types.eventTypeId,
      event_date: study.eventDate,
      is_automated: 1,
      automated_source: JSON.stringify({ request_id: deps.requestId }),
      info: null,
      institution_id: institution?.id ?? null,
      site_id: null,
      ...audit,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  await db
    .insertInto('ophinbiometry_imported_events')
    .values({
      event_id: event.id,
      patient_id: filing.patientId,
      study_id: clip(study.studyInstanceUid, 255),
      device_id: clip(study.stationName, 255),
      device_name: clip(study.institutionName, 255),
      device_model: clip(study.model, 255),
      device_manufacturer: clip(study.manufacturer, 255),
      device_software_version: clip(study.softwareVersion, 20),
      is_linked: 0,
      is_merged: 0,
      content_datetime: study.contentDateTime ?? null,
      surgeon_name: clip(filing.reading?.surgeonName, 255),
      series_id: clip(study.seriesInstanceUid, 255),
      device_serial_number: clip(study.serialNumber, 20),
      // The column holds 25 characters, one fewer than the longest DT: a long value loses its offset.
      acquisition_datetime: clip(
        study.acquisitionDateTime !== undefined && study.acquisitionDateTime.length > 25
          ? study.acquisitionDateTime.replace(/[+-]\d{4}$/, '')
          : study.acquisitionDateTime,
        25,
      ),
      sop_uid: clip(study.sopInstanceUid, 255),
      ...audit,
    })
    .execute();
  return event.id;
}

/**
 * Inserts or merges one element row of the event: `perSide` gives the columns of each eye the file
 * carries, `common` the columns written on insert only. With `isReplacedOnChange` (an IOL table whose
 * measurements were changed by hand), a stored row the file changes is kept as it was with `active` = 0
 * and a new row takes the merged values, so the calculation made from the earlier measurements stays on
 * record. Returns 1 when a row was written.
 */
async function mergeElement(
  db: Db,
  deps: BiometryFilingDeps,
  table: ElementTableName,
  match: { eventId: number; lensId?: number; formulaId?: number },
  sides: readonly Side[],
  perSide: (side: Side) => Values,
  common: Values,
  absentSide: (side: Side) => Values = () => ({}),
  isReplacedOnChange = false,
): Promise<number> {
  let query = db.selectFrom(table).selectAll().where('event_id', '=', match.eventId).orderBy('id', 'desc');
  if (table === 'et_ophinbiometry_iol_ref_values') {
    query = query
      .where('lens_id', '=', match.lensId!)
      .where('formula_id', '=', match.formulaId!)
      .where('active', '=', 1);
  } else {
    query = query.where('deleted', '=', 0);
  }
  const stored = (await query.executeTakeFirst()) as Record<string, unknown> | undefined;
  const audit = { last_modified_user_id: deps.stamp.userId, last_modified_date: deps.stamp.now };
  if (stored === undefined) {
    const values: Values = {
      event_id: match.eventId,
      eye_id: eyeIdOf(new Set(sides)),
      ...common,
      ...mergeValues(SIDES.map((side) => (sides.includes(side) ? perSide(side) : absentSide(side)))),
      ...audit,
      created_user_id: deps.stamp.userId,
      created_date: deps.stamp.now,
    };
    await db.insertInto(table).values(values).execute();
    return 1;
  }
  const storedSides = sidesOfEyeId(Number(stored.eye_id));
  const eyeId = eyeIdOf(new Set([...storedSides, ...sides]));
  const change = changedColumns(stored, {
    eye_id: eyeId,
    ...mergeValues(sides.map((side) => perSide(side))),
  });
  if (Object.keys(change).length === 0) return 0;
  const id = Number(stored.id);
  if (isReplacedOnChange) {
    await deps.schema.keepRowVersions(db, table, [id]);
    await db
      .updateTable(table)
      .set({ active: 0, ...audit } as never)
      .where('id', '=', id)
      .execute();
    // The new row: the stored row's values (the other eye's among them), then what the file changes.
    const { id: _storedId, ...kept } = stored;
    await db
      .insertInto(table)
      .values({
        ...kept,
        ...change,
        active: 1,
        ...audit,
        created_user_id: deps.stamp.userId,
        created_date: deps.stamp.now,
      })
      .execute();
    deps.log(`${table} ${id}: measurements changed by hand, kept inactive and replaced by a new row`);
    return 1;
  }
  await deps.schema.keepRowVersions(db, table, [id]);
  await db
    .updateTable(table)
    .set({ ...change, ...audit } as never)
    .where('id', '=', id)
    .execute();
  return 1;
}

async function writeElements(
  db: Db,
  deps: BiometryFilingDeps,
  eventId: number,
  reading: BiometryReading,
): Promise<number> {
  const sides = SIDES.filter((side) => hasData(reading.eyes[side]));
  if (sides.length === 0) {
    deps.log('no measurement of either eye in the file');
    return 0;
  }
  const knownStatuses = new Set(
    (await db.selectFrom('dicom_eye_status').select('id').execute()).map((r) => Number(r.id)),
  );
  const formulaIds = new Map<Side, number>();
  for (const side of sides) {
    formulaIds.set(
      side,
      await findOrCreateFormula(db, deps, reading.eyes[side]?.formulaName ?? DEFAULT_FORMULA),
    );
  }
  let written = await mergeElement(
    db,
    deps,
    'et_ophinbiometry_measurement',
    { eventId },
    sides,
    (side) => measurementColumns(side, reading.eyes[side], knownStatuses),
    {},
    (side) => measurementColumns(side, undefined, knownStatuses),
  );
  written += await mergeElement(
    db,
    deps,
    'et_ophinbiometry_calculation',
    { eventId },
    sides,
    (side) => {
      const target = reading.eyes[side]?.targetRefraction;
      return {
        [`target_refraction_${suffix(side)}`]: target === undefined ? null : round(target, 2),
        [`formula_id_${suffix(side)}`]: formulaIds.get(side)!,
      };
    },
    { comments: reading.comments ?? null },
  );
  written += await mergeElement(
    db,
    deps,
    'et_ophinbiometry_selection',
    { eventId },
    sides,
    (side) => ({ [`formula_id_${suffix(side)}`]: formulaIds.get(side)! }),
    { lens_id_left: 0, lens_id_right: 0 },
  );
  written += await writeIolTables(db, deps, eventId, reading);
  return written;
}

/** One IOL table row per lens and formula, with each eye's IOL/REF pairs and emmetropia power. */
async function writeIolTables(
  db: Db,
  deps: BiometryFilingDeps,
  eventId: number,
  reading: BiometryReading,
): Promise<number> {
  const groups = new Map<string, IolCalculation[]>();
  for (const calculation of reading.calculations) {
    const key = JSON.stringify([calculation.lensName, calculation.formulaName]);
    groups.set(key, [...(groups.get(key) ?? []), calculation]);
  }
  const surgeonId =
    reading.surgeonName === undefined ? null : await findOrCreateSurgeon(db, reading.surgeonName);
  // A hand-changed AL, K or ACD makes the earlier calculations stale: they are kept, inactive.
  const isHandChanged = SIDES.some((side) => {
    const eye = reading.eyes[side];
    return eye?.isAlModified === true || eye?.isKModified === true || eye?.isAcdModified === true;
  });
  let written = 0;
  for (const calculations of groups.values()) {
    const first = calculations[0]!;
    const lensId = await findOrCreateLens(db, deps, first.lensName, first.constant);
    const formulaId = await findOrCreateFormula(db, deps, first.formulaName);
    const bySide = new Map(calculations.map((c) => [c.side, c]));
    const constant = calculations.find((c) => c.constant !== undefined)?.constant;
    written += await mergeElement(
      db,
      deps,
      'et_ophinbiometry_iol_ref_values',
      { eventId, lensId, formulaId },
      [...bySide.keys()],
      (side) => {
        const calculation = bySide.get(side)!;
        return {
          [`iol_ref_values_${suffix(side)}`]: JSON.stringify({
            IOL: calculation.pairs.map((p) => round(p.iol, 2)),
            REF: calculation.pairs.map((p) => round(p.ref, 2)),
          }),
          [`emmetropia_${suffix(side)}`]:
            calculation.emmetropia === undefined ? null : round(calculation.emmetropia, 2),
        };
      },
      {
        lens_id: lensId,
        formula_id: formulaId,
        constant: constant === undefined ? null : round(constant, 3),
        active: 1,
        surgeon_id: surgeonId,
      },
      () => ({}),
      isHandChanged,
    );
  }
  return written;
}

async function findOrCreateFormula(db: Db, deps: BiometryFilingDeps, name: string): Promise<number> {
  const candidates = [...new Set([name, name.replace(/®/g, '').trim()])];
  const found = await db
    .selectFrom('ophinbiometry_calculation_formula')
    .select(['id', 'name'])
    .where('name', 'in', candidates)
    .orderBy('id')
    .execute();
  const match = candidates.map((c) => found.find((f) => f.name === c)).find((f) => f !== undefined);
  if (match !== undefined) return match.id;
  const created = await db
    .insertInto('ophinbiometry_calculation_formula')
    .values({
      name: name.slice(0, 128),
      display_order: 0,
      created_user_id: deps.stamp.userId,
      last_modified_user_id: deps.stamp.userId,
      created_date: deps.stamp.now,
      last_modified_date: deps.stamp.now,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  deps.log(`formula ${created.id} created`);
  return created.id;
}

/** The lens of `name`; a new lens is listed for the configured institution, as OpenEyes lists lenses. */
async function findOrCreateLens(
  db: Db,
  deps: BiometryFilingDeps,
  name: string,
  constant: number | undefined,
): Promise<number> {
  const found = await db
    .selectFrom('ophinbiometry_lenstype_lens')
    .select('id')
    .where('name', '=', name)
    .orderBy('deleted')
    .orderBy('id')
    .executeTakeFirst();
  if (found !== undefined) return found.id;
  const audit = {
    created_user_id: deps.stamp.userId,
    last_modified_user_id: deps.stamp.userId,
    created_date: deps.stamp.now,
    last_modified_date: deps.stamp.now,
  };
  const created = await db
    .insertInto('ophinbiometry_lenstype_lens')
    .values({
      name: name.slice(0, 128),
      display_name: name.slice(0, 255),
      description: name.slice(0, 255),
      comments: 'Created by the biometry import',
      position_id: 0,
      acon: round(constant ?? 0, 4),
      ...audit,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  const institution = await db
    .selectFrom('institution')
    .select('id')
    .where('remote_id', '=', deps.institutionCode)
    .orderBy('id')
    .executeTakeFirst();
  if (institution !== undefined) {
    await db
      .insertInto('ophinbiometry_lenstype_lens_institution')
      .values({ lenstype_lens_id: created.id, institution_id: institution.id, ...audit })
      .execute();
  }
  deps.log(`lens ${created.id} created`);
  return created.id;
}

async function findOrCreateSurgeon(db: Db, name: string): Promise<number> {
  const found = await db
    .selectFrom('ophinbiometry_surgeon')
    .select('id')
    .where('name', '=', name)
    .executeTakeFirst();
  if (found !== undefined) return found.id;
  const created = await db
    .insertInto('ophinbiometry_surgeon')
    .values({ name: name.slice(0, 255) })
    .returning('id')
    .executeTakeFirstOrThrow();
  return created.id;
}

/**
 * The eye of a file's reports: the header's laterality, else the eyes the file has measurements for
 * (both when it has both), else the profile's fixed eye; null when none names one (no body site).
 */
function reportEyeOf(filing: BiometryFiling): 'L' | 'R' | 'B' | null {
  if (filing.study.laterality !== undefined) return filing.study.laterality;
  const measured = SIDES.filter((side) => hasData(filing.reading?.eyes[side]));
  if (measured.length === 2) return 'B';
  if (measured.length === 1) return measured[0]!;
  return filing.profileEye ?? null;
}

/**
 * Files the report rows under the event's attachment element (typed `Biometry Report`), skipping a row
 * whose content the event already has (same hash, then the same bytes). Returns how many were filed.
 */
async function attachReports(
  db: Db,
  deps: BiometryFilingDeps,
  types: BiometryTypes,
  eventId: number,
  attachmentIds: readonly number[],
  eye: 'L' | 'R' | 'B' | null,
): Promise<number> {
  const toLink: number[] = [];
  for (const id of attachmentIds) {
    const bytes = await readPayloadBytes(deps.trx, id);
    const hash = contentHash(bytes);
    const candidates = await db
      .selectFrom('event_attachment_item as item')
      .innerJoin('event_attachment_group as g', 'g.id', 'item.event_attachment_group_id')
      .innerJoin('attachment_data as ad', 'ad.id', 'item.attachment_data_id')
      .select('ad.id')
      .where('g.event_id', '=', eventId)
      .where((eb) => eb.or([eb('ad.id', '=', id), eb('ad.hash_code', '=', hash)]))
      .execute();
    let isAttached = candidates.some((c) => c.id === id);
    for (const candidate of candidates) {
      if (isAttached) break;
      isAttached = (await readPayloadBytes(deps.trx, candidate.id)).equals(bytes);
    }
    if (isAttached) {
      deps.log(`attachment_data ${id}: already filed under the Biometry event, skipped`);
      continue;
    }
    await updateAttachmentData(
      deps.trx,
      deps.dialect,
      { id },
      {
        hashCode: hash,
        attachmentType: BIOMETRY_REPORT_TYPE,
        bodySite: eye === null ? null : bodySiteOf(eye),
      },
      deps.stamp,
    );
    toLink.push(id);
  }
  if (toLink.length === 0) return 0;
  const elementTable = deps.schema.attachmentElementTable;
  if (elementTable !== undefined) {
    // OpenEyes shows an event's attachments through its attachment element: the event gets that row.
    const elements = deps.trx.withTables<Record<string, AttachmentElementRow>>();
    const row = await elements
      .selectFrom(elementTable)
      .select('id')
      .where('event_id', '=', eventId)
      .executeTakeFirst();
    if (row === undefined) {
      await elements
        .insertInto(elementTable)
        .values({
          event_id: eventId,
          created_user_id: deps.stamp.userId,
          last_modified_user_id: deps.stamp.userId,
          created_date: deps.stamp.now,
          last_modified_date: deps.stamp.now,
        })
        .execute();
    }
  }
  await linkAttachmentsToEvent(
    deps.trx,
    {
      eventId,
      elementTypeId: types.attachmentElementTypeId,
      attachmentIds: toLink,
      systemOnlyManaged: 1,
    },
    deps.stamp,
  );
  deps.log(`${toLink.length} report attachment(s) filed under the Biometry event`);
  return toLink.length;
}
