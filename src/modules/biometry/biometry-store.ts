/**
 * Files biometry as OpenEyes's biometry module keeps it: one Biometry (OphInBiometry) event per patient and
 * study (StudyInstanceUID), found through `ophinbiometry_imported_events`, created by event filing
 * (`createEvent`: dated by the device in the stored zone, as a device event of the same study is) with
 * `episode_id` NULL (OpenEyes links an imported event to an episode when a user picks it, setting
 * `is_linked`), its measurement,
 * calculation and selection elements (one row each, per-eye columns) and one IOL table row per lens and
 * formula. A later file of the same study changes only the eyes it carries and widens the elements' eye
 * to both; a file whose values are already stored changes nothing. Reports (the IOLMaster's PDF, its
 * images) are filed under the event's attachment element, whichever file of the study comes first.
 * Rows are copied into their `_version` twins before an update where the schema keeps versions.
 *
 * The lens, formula and IOL table rows are read and written set-based (one lookup of every name, multi-row
 * inserts), in chunks of {@link ROWS_PER_CHUNK} with the event loop given a turn and the routine's time
 * limit checked between chunks (`yieldTurn`). A lens type the lens list lacks is created inactive, listed
 * for no institution and recorded in `biometry_lens_review` (held for review: OpenEyes does not offer it)
 * unless the site offers new lenses at once (`BIOMETRY_OFFER_NEW_LENSES`). Device text goes through
 * `fitColumn` (device-filing/column-width.ts) before it is written to a fixed-width column, and every
 * device number through `fitDecimal` before it is written to a `decimal(p,s)` column: a number beyond
 * the column's range refuses the file, with the column named.
 */
import type { Kysely } from 'kysely';
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
import type { ColumnWidth, FitOptions } from '../device-filing/index.ts';
import {
  ATTACHMENT_ELEMENT_CLASSES,
  createEvent,
  ensureAttachmentElement,
  findInstitutionId,
  touchEvent,
} from '../event-filing/index.ts';
import {
  bodySiteOf,
  eyeIdOf as eyeIdOfEye,
  eyeOfId,
  fitColumn,
  fitDecimal,
  fitOptionalColumn,
  mergeEyes,
} from '../device-filing/index.ts';
import type { BiometryStudy } from './biometry-file.ts';
import type { BiometryTables, ElementTableName } from './biometry-tables.ts';
import { BIOMETRY_COLUMNS } from './biometry-tables.ts';
import type { BiometryReading, EyeMeasurement, IolCalculation, Side } from './reading.ts';
import { SIDES, hasData } from './reading.ts';

export const BIOMETRY_EVENT_CLASS = 'OphInBiometry';
export const BIOMETRY_REPORT_TYPE = 'Biometry Report';
const MEASUREMENT_CLASS = 'Element_OphInBiometry_Measurement';
const DEFAULT_FORMULA = 'SRK/T';
/** Rows per statement, and between two turns of the event loop. */
export const ROWS_PER_CHUNK = 50;
/** Names per lookup statement. */
const NAMES_PER_LOOKUP = 200;
const IOL_TABLE = 'et_ophinbiometry_iol_ref_values';

export interface BiometryFilingDeps {
  readonly trx: Kysely<DB>;
  readonly dialect: DialectAdapter;
  readonly schema: SchemaProfile;
  readonly stamp: AuditStamp;
  /** `INSTITUTION_CODE`: the institution events are created in and new lenses are listed for. */
  readonly institutionCode: string;
  /** `TIME_ZONE`: the site's zone, in which the device's dates are wall-clock times. */
  readonly timeZone: string;
  readonly requestId: number;
  /**
   * `BIOMETRY_OFFER_NEW_LENSES`: a new lens type is listed for the institution at once; otherwise it is
   * created inactive and held for review.
   */
  readonly offersNewLenses: boolean;
  log(line: string): void;
  /** The routine's `ctx.yieldTurn`: a turn of the event loop, and its time limit checked. */
  yieldTurn(): Promise<void>;
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
    .where('et.class_name', 'in', [MEASUREMENT_CLASS, ...ATTACHMENT_ELEMENT_CLASSES])
    .orderBy('et.id')
    .execute();
  const attachment = rows.find((r) => ATTACHMENT_ELEMENT_CLASSES.includes(r.class_name));
  if (attachment === undefined || !rows.some((r) => r.class_name === MEASUREMENT_CLASS)) return undefined;
  return { eventTypeId: attachment.eventTypeId, attachmentElementTypeId: attachment.elementTypeId };
}

type Db = Kysely<DB & BiometryTables>;

type Values = Record<string, string | number | null>;

const suffix = (side: Side) => (side === 'R' ? 'right' : 'left');
const round = (value: number, places: number) => Math.round(value * 10 ** places) / 10 ** places;
/** The laser vision correction columns (`varchar(30)` in both schemas): device text, cut. */
const lvcColumn = (column: string): ColumnWidth => ({
  column: `et_ophinbiometry_measurement.${column}`,
  width: 30,
  onOverflow: 'cut',
});
/** `value` as `table.column`, a `decimal(precision, scale)`, holds it (see the file comment). */
const decimal = (table: string, column: string, precision: number, scale: number, value: number) =>
  fitDecimal(value, { column: `${table}.${column}`, precision, scale });
/** `eye_id` of the eyes a row holds, by device filing's eye ids (left when it holds none). */
const eyeIdOf = (sides: ReadonlySet<Side>) =>
  eyeIdOfEye([...sides].reduce<'L' | 'R' | 'B' | null>((eye, side) => mergeEyes(eye, side), null) ?? 'L');
/** The eyes of a stored `eye_id` (left for an id that names none). */
const sidesOfEyeId = (eyeId: number): Side[] => {
  const eye = eyeOfId(eyeId) ?? 'L';
  return eye === 'B' ? ['R', 'L'] : [eye];
};
const fitOptionsOf = (deps: BiometryFilingDeps): FitOptions => ({
  maxCodePoint: deps.schema.maxTextCodePoint,
  log: (line) => deps.log(line),
});

function chunksOf<T>(items: readonly T[], size: number): T[][] {
  const chunks: T[][] = [];
  for (let start = 0; start < items.length; start += size) chunks.push(items.slice(start, start + size));
  return chunks;
}

/** The measurement columns of one eye (`_left`/`_right`), as the element stores them. */
function measurementColumns(
  side: Side,
  eye: EyeMeasurement | undefined,
  knownStatuses: ReadonlySet<number>,
  fit: FitOptions,
): Values {
  const s = suffix(side);
  const table = 'et_ophinbiometry_measurement';
  // decimal(6,2), decimal(6,1) and k1_axis's decimal(5,1), in both schemas.
  const d2 = (name: string, value: number | undefined) => decimal(table, `${name}_${s}`, 6, 2, value ?? 0);
  const d1 = (name: string, value: number | undefined, precision = 6) =>
    decimal(table, `${name}_${s}`, precision, 1, value ?? 0);
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
    [`k1_${s}`]: d2('k1', k1),
    [`k2_${s}`]: d2('k2', k2),
    [`axial_length_${s}`]: d2('axial_length', eye?.axialLengthMm),
    [`acd_${s}`]: d2('acd', eye?.acdMm),
    [`delta_k_${s}`]: d2('delta_k', deltaK),
    [`refraction_sphere_${s}`]: d2('refraction_sphere', eye?.refractionSphere),
    [`refraction_delta_${s}`]: d2('refraction_delta', eye?.refractionDelta),
    [`k1_axis_${s}`]: d1('k1_axis', eye?.k1Axis, 5),
    [`k2_axis_${s}`]: d1('k2_axis', eye?.k2Axis),
    [`delta_k_axis_${s}`]: d1('delta_k_axis', deltaKAxis),
    [`refraction_axis_${s}`]: d1('refraction_axis', eye?.refractionAxis),
    [`snr_min_${s}`]: d1('snr_min', eye?.snrMin),
    [`snr_${s}`]: eye?.snr === undefined ? null : d1('snr', eye.snr),
    // Only the IOLMaster's own codes are stored; anything else is Unknown.
    [`eye_status_${s}`]: knownStatuses.has(status) ? status : -1,
    [`al_modified_${s}`]: eye?.isAlModified === true ? 1 : 0,
    [`k_modified_${s}`]: eye?.isKModified === true ? 1 : 0,
    [`lvc_${s}`]: fitOptionalColumn(eye?.lvc, lvcColumn(`lvc_${s}`), fit),
    [`lvc_mode_${s}`]: fitOptionalColumn(eye?.lvcMode, lvcColumn(`lvc_mode_${s}`), fit),
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
  const fit = fitOptionsOf(deps);
  const text = (value: string | undefined, column: ColumnWidth) => fitOptionalColumn(value, column, fit);
  // Refused before anything is written: an identifier longer than its column.
  const studyId = fitColumn(study.studyInstanceUid, BIOMETRY_COLUMNS.studyId, fit);
  const sopUid = text(study.sopInstanceUid, BIOMETRY_COLUMNS.sopUid);
  text(study.seriesInstanceUid, BIOMETRY_COLUMNS.seriesId);
  const existing = await db
    .selectFrom('ophinbiometry_imported_events as ie')
    .innerJoin('event as e', 'e.id', 'ie.event_id')
    .selectAll('ie')
    .where('ie.patient_id', '=', filing.patientId)
    .where('ie.study_id', '=', studyId)
    .where('e.deleted', '=', 0)
    .orderBy('ie.event_id', 'desc')
    .executeTakeFirst();

  let eventId: number;
  let isNewEvent = false;
  if (existing === undefined) {
    eventId = await createBiometryEvent(db, deps, types, filing);
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
          sop_uid: sopUid,
          ...(isLater ? { content_datetime: study.contentDateTime, is_merged: 1 } : {}),
          ...(existing.surgeon_name === null && reading.surgeonName !== undefined
            ? { surgeon_name: text(reading.surgeonName, BIOMETRY_COLUMNS.importedSurgeonName) }
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
    await touchEvent(deps, eventId);
  }
  return { eventId, isNewEvent, changedRows, attachedCount };
}

async function createBiometryEvent(
  db: Db,
  deps: BiometryFilingDeps,
  types: BiometryTypes,
  filing: BiometryFiling,
): Promise<number> {
  const { stamp } = deps;
  const { study } = filing;
  const fit = fitOptionsOf(deps);
  const text = (value: string | undefined, column: ColumnWidth) => fitOptionalColumn(value, column, fit);
  const audit = {
    created_user_id: stamp.userId,
    last_modified_user_id: stamp.userId,
    created_date: stamp.now,
    last_modified_date: stamp.now,
  };
  const institutionId = (await findInstitutionId(deps.trx, deps.institutionCode)) ?? null;
  // No episode: OpenEyes links an imported Biometry event to one when a user picks it.
  const event = await createEvent(deps, {
    patientId: filing.patientId,
    eventTypeId: types.eventTypeId,
    eventDate: { wallClock: study.eventDate, timeZone: deps.timeZone },
    episode: { kind: 'unlinked' },
    institutionId,
    automatedSource: JSON.stringify({ request_id: deps.requestId }),
  });
  await db
    .insertInto('ophinbiometry_imported_events')
    .values({
      event_id: event.eventId,
      patient_id: filing.patientId,
      study_id: text(study.studyInstanceUid, BIOMETRY_COLUMNS.studyId),
      device_id: text(study.stationName, BIOMETRY_COLUMNS.deviceId),
      device_name: text(study.institutionName, BIOMETRY_COLUMNS.deviceName),
      device_model: text(study.model, BIOMETRY_COLUMNS.deviceModel),
      device_manufacturer: text(study.manufacturer, BIOMETRY_COLUMNS.deviceManufacturer),
      device_software_version: text(study.softwareVersion, BIOMETRY_COLUMNS.deviceSoftwareVersion),
      is_linked: 0,
      is_merged: 0,
      content_datetime: study.contentDateTime ?? null,
      surgeon_name: text(filing.reading?.surgeonName, BIOMETRY_COLUMNS.importedSurgeonName),
      series_id: text(study.seriesInstanceUid, BIOMETRY_COLUMNS.seriesId),
      device_serial_number: text(study.serialNumber, BIOMETRY_COLUMNS.deviceSerialNumber),
      // The column holds 25 characters, one fewer than the longest DT: a long value loses its offset.
      acquisition_datetime: text(
        study.acquisitionDateTime !== undefined && study.acquisitionDateTime.length > 25
          ? study.acquisitionDateTime.replace(/[+-]\d{4}$/, '')
          : study.acquisitionDateTime,
        BIOMETRY_COLUMNS.acquisitionDatetime,
      ),
      sop_uid: text(study.sopInstanceUid, BIOMETRY_COLUMNS.sopUid),
      ...audit,
    })
    .execute();
  return event.eventId;
}

/**
 * Inserts or merges one element row of the event (measurement, calculation, selection): `perSide` gives
 * the columns of each eye the file carries, `common` the columns written on insert only. Returns 1 when a
 * row was written.
 */
async function mergeElement(
  db: Db,
  deps: BiometryFilingDeps,
  table: Exclude<ElementTableName, typeof IOL_TABLE>,
  eventId: number,
  sides: readonly Side[],
  perSide: (side: Side) => Values,
  common: Values,
  absentSide: (side: Side) => Values = () => ({}),
): Promise<number> {
  const stored = (await db
    .selectFrom(table)
    .selectAll()
    .where('event_id', '=', eventId)
    .where('deleted', '=', 0)
    .orderBy('id', 'desc')
    .executeTakeFirst()) as Record<string, unknown> | undefined;
  const audit = { last_modified_user_id: deps.stamp.userId, last_modified_date: deps.stamp.now };
  if (stored === undefined) {
    const values: Values = {
      event_id: eventId,
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
  const eyeFormula = (side: Side) => reading.eyes[side]?.formulaName ?? DEFAULT_FORMULA;
  // Every formula the file names, found (or created) in one go.
  const formulaIds = await findOrCreateFormulas(db, deps, [
    ...sides.map(eyeFormula),
    ...reading.calculations.map((c) => c.formulaName),
  ]);
  const formulaIdOf = (side: Side) => formulaIds.get(eyeFormula(side))!;
  let written = await mergeElement(
    db,
    deps,
    'et_ophinbiometry_measurement',
    eventId,
    sides,
    (side) => measurementColumns(side, reading.eyes[side], knownStatuses, fitOptionsOf(deps)),
    {},
    (side) => measurementColumns(side, undefined, knownStatuses, fitOptionsOf(deps)),
  );
  written += await mergeElement(
    db,
    deps,
    'et_ophinbiometry_calculation',
    eventId,
    sides,
    (side) => {
      const target = reading.eyes[side]?.targetRefraction;
      return {
        [`target_refraction_${suffix(side)}`]:
          target === undefined
            ? null
            : decimal('et_ophinbiometry_calculation', `target_refraction_${suffix(side)}`, 6, 2, target),
        [`formula_id_${suffix(side)}`]: formulaIdOf(side),
      };
    },
    {
      comments: fitOptionalColumn(reading.comments, BIOMETRY_COLUMNS.calculationComments, fitOptionsOf(deps)),
    },
  );
  written += await mergeElement(
    db,
    deps,
    'et_ophinbiometry_selection',
    eventId,
    sides,
    (side) => ({ [`formula_id_${suffix(side)}`]: formulaIdOf(side) }),
    { lens_id_left: 0, lens_id_right: 0 },
  );
  await deps.yieldTurn();
  written += await writeIolTables(db, deps, eventId, reading, formulaIds);
  return written;
}

/** One lens and formula of the file: its calculations by eye. */
interface IolGroup {
  readonly lensName: string;
  readonly formulaName: string;
  readonly bySide: Map<Side, IolCalculation>;
  constant: number | undefined;
}

/**
 * One IOL table row per lens and formula, with each eye's IOL/REF pairs and emmetropia power: the event's
 * active rows read once, new rows inserted a chunk at a time, changed rows updated (or, where the
 * measurements were changed by hand, kept inactive beside a new row, so that the calculation made from
 * the earlier measurements stays on record).
 */
async function writeIolTables(
  db: Db,
  deps: BiometryFilingDeps,
  eventId: number,
  reading: BiometryReading,
  formulaIds: ReadonlyMap<string, number>,
): Promise<number> {
  if (reading.calculations.length === 0) return 0;
  const fit = fitOptionsOf(deps);
  const lensNames = new Map<string, string>();
  const lensNameOf = (name: string) => {
    let fitted = lensNames.get(name);
    if (fitted === undefined) {
      fitted = fitColumn(name, BIOMETRY_COLUMNS.lensName, fit);
      lensNames.set(name, fitted);
    }
    return fitted;
  };
  const groups = new Map<string, IolGroup>();
  for (const calculation of reading.calculations) {
    const lensName = lensNameOf(calculation.lensName);
    const key = JSON.stringify([lensName, calculation.formulaName]);
    let group = groups.get(key);
    if (group === undefined) {
      group = { lensName, formulaName: calculation.formulaName, bySide: new Map(), constant: undefined };
      groups.set(key, group);
    }
    // The last calculation of an eye is the one filed; the first constant given is the lens's.
    group.bySide.set(calculation.side, calculation);
    group.constant ??= calculation.constant;
  }
  const lensConstants = new Map<string, number | undefined>();
  for (const group of groups.values()) {
    if (!lensConstants.has(group.lensName) || lensConstants.get(group.lensName) === undefined) {
      lensConstants.set(group.lensName, group.constant);
    }
  }
  const lensIds = await findOrCreateLenses(db, deps, lensConstants);
  const surgeonId =
    reading.surgeonName === undefined ? null : await findOrCreateSurgeon(db, deps, reading.surgeonName);
  // A hand-changed AL, K or ACD makes the earlier calculations stale: they are kept, inactive.
  const isHandChanged = SIDES.some((side) => {
    const eye = reading.eyes[side];
    return eye?.isAlModified === true || eye?.isKModified === true || eye?.isAcdModified === true;
  });

  const storedRows = (await db
    .selectFrom(IOL_TABLE)
    .selectAll()
    .where('event_id', '=', eventId)
    .where('active', '=', 1)
    .orderBy('id', 'desc')
    .execute()) as Record<string, unknown>[];
  const storedByKey = new Map<string, Record<string, unknown>>();
  for (const row of storedRows) {
    const key = `${String(row.lens_id)}:${String(row.formula_id)}`;
    if (!storedByKey.has(key)) storedByKey.set(key, row);
  }

  const audit = { last_modified_user_id: deps.stamp.userId, last_modified_date: deps.stamp.now };
  const created = { created_user_id: deps.stamp.userId, created_date: deps.stamp.now };
  const newRows: Values[] = [];
  const replacements: Values[] = [];
  const replacedIds: number[] = [];
  const updates: { id: number; change: Values }[] = [];
  for (const group of groups.values()) {
    const lensId = lensIds.get(group.lensName)!;
    const formulaId = formulaIds.get(group.formulaName)!;
    const perSide = (side: Side): Values => {
      const calculation = group.bySide.get(side);
      if (calculation === undefined) {
        return { [`iol_ref_values_${suffix(side)}`]: null, [`emmetropia_${suffix(side)}`]: null };
      }
      return {
        [`iol_ref_values_${suffix(side)}`]: JSON.stringify({
          IOL: calculation.pairs.map((p) => round(p.iol, 2)),
          REF: calculation.pairs.map((p) => round(p.ref, 2)),
        }),
        [`emmetropia_${suffix(side)}`]:
          calculation.emmetropia === undefined
            ? null
            : decimal(IOL_TABLE, `emmetropia_${suffix(side)}`, 6, 2, calculation.emmetropia),
      };
    };
    const sides = [...group.bySide.keys()];
    const stored = storedByKey.get(`${lensId}:${formulaId}`);
    if (stored === undefined) {
      // Every new row has the same columns (both eyes'), as one multi-row INSERT needs.
      newRows.push({
        event_id: eventId,
        eye_id: eyeIdOf(new Set(sides)),
        lens_id: lensId,
        formula_id: formulaId,
        constant: group.constant === undefined ? null : decimal(IOL_TABLE, 'constant', 7, 3, group.constant),
        active: 1,
        surgeon_id: surgeonId,
        ...mergeValues(SIDES.map(perSide)),
        ...audit,
        ...created,
      });
      continue;
    }
    const change = changedColumns(stored, {
      eye_id: eyeIdOf(new Set([...sidesOfEyeId(Number(stored.eye_id)), ...sides])),
      ...mergeValues(sides.map(perSide)),
    });
    if (Object.keys(change).length === 0) continue;
    const id = Number(stored.id);
    if (isHandChanged) {
      // The new row: the stored row's values (the other eye's among them), then what the file changes.
      const { id: _storedId, ...kept } = stored as Values;
      replacedIds.push(id);
      replacements.push({ ...kept, ...change, active: 1, ...audit, ...created });
    } else {
      updates.push({ id, change });
    }
  }

  const changedIds = [...replacedIds, ...updates.map((u) => u.id)];
  for (const ids of chunksOf(changedIds, ROWS_PER_CHUNK)) {
    await deps.schema.keepRowVersions(db, IOL_TABLE, ids);
    await deps.yieldTurn();
  }
  for (const ids of chunksOf(replacedIds, ROWS_PER_CHUNK)) {
    await db
      .updateTable(IOL_TABLE)
      .set({ active: 0, ...audit } as never)
      .where('id', 'in', ids)
      .execute();
    await deps.yieldTurn();
  }
  for (const chunk of chunksOf(updates, ROWS_PER_CHUNK)) {
    for (const { id, change } of chunk) {
      await db
        .updateTable(IOL_TABLE)
        .set({ ...change, ...audit } as never)
        .where('id', '=', id)
        .execute();
    }
    await deps.yieldTurn();
  }
  for (const rows of [newRows, replacements]) {
    for (const chunk of chunksOf(rows, ROWS_PER_CHUNK)) {
      await db.insertInto(IOL_TABLE).values(chunk).execute();
      await deps.yieldTurn();
    }
  }
  if (replacedIds.length > 0) {
    deps.log(
      `${IOL_TABLE} ${replacedIds.join(', ')}: measurements changed by hand, kept inactive and replaced by new rows`,
    );
  }
  return newRows.length + replacements.length + updates.length;
}

/**
 * Collation-aware equality of names, for a database whose comparison ignores case and accents (MariaDB's
 * `utf8_unicode_ci`, which also ignores trailing spaces).
 */
const COLLATOR = new Intl.Collator('en', { sensitivity: 'base' });

/**
 * The ids of the rows of `table` named by each of `names` (the first by `deleted`, then id), in one
 * statement per {@link NAMES_PER_LOOKUP} names. A name matches its own row first; a row whose name is
 * none of those asked for was matched by the engine's collation (case- or accent-insensitive), and is
 * the row of the name it equals that way.
 */
async function findIdsByName(
  db: Db,
  table: 'ophinbiometry_lenstype_lens' | 'ophinbiometry_calculation_formula',
  names: readonly string[],
): Promise<Map<string, number>> {
  const found = new Map<string, number>();
  for (const chunk of chunksOf([...new Set(names)], NAMES_PER_LOOKUP)) {
    const rows = await db
      .selectFrom(table)
      .select(['id', 'name'])
      .where('name', 'in', chunk)
      .orderBy('deleted')
      .orderBy('id')
      .execute();
    const asked = new Set(chunk);
    for (const row of rows) if (!found.has(row.name) && asked.has(row.name)) found.set(row.name, row.id);
    const collated = rows.filter((row) => !asked.has(row.name));
    for (const name of chunk) {
      if (found.has(name)) continue;
      const row = collated.find((r) => COLLATOR.compare(r.name.trimEnd(), name.trimEnd()) === 0);
      if (row !== undefined) found.set(name, row.id);
    }
  }
  return found;
}

/** The ids of the formulas `names` (a name with ® also matches its plain form), created when missing. */
async function findOrCreateFormulas(
  db: Db,
  deps: BiometryFilingDeps,
  names: readonly string[],
): Promise<Map<string, number>> {
  const fit = fitOptionsOf(deps);
  const fitted = new Map<string, string>();
  for (const name of new Set(names)) fitted.set(name, fitColumn(name, BIOMETRY_COLUMNS.formulaName, fit));
  const candidatesOf = (name: string) => {
    const own = fitted.get(name)!;
    return [...new Set([own, own.replace(/®/g, '').trim()])];
  };
  const ids = new Map<string, number>();
  const resolve = (found: ReadonlyMap<string, number>) => {
    for (const name of fitted.keys()) {
      if (ids.has(name)) continue;
      const id = candidatesOf(name)
        .map((c) => found.get(c))
        .find((c) => c !== undefined);
      if (id !== undefined) ids.set(name, id);
    }
  };
  resolve(
    await findIdsByName(db, 'ophinbiometry_calculation_formula', [...fitted.keys()].flatMap(candidatesOf)),
  );
  const missing = [...new Set([...fitted.keys()].filter((n) => !ids.has(n)).map((n) => fitted.get(n)!))];
  if (missing.length === 0) return ids;
  for (const chunk of chunksOf(missing, ROWS_PER_CHUNK)) {
    await db
      .insertInto('ophinbiometry_calculation_formula')
      .values(
        chunk.map((name) => ({
          name,
          display_order: 0,
          created_user_id: deps.stamp.userId,
          last_modified_user_id: deps.stamp.userId,
          created_date: deps.stamp.now,
          last_modified_date: deps.stamp.now,
        })),
      )
      .execute();
    await deps.yieldTurn();
  }
  resolve(await findIdsByName(db, 'ophinbiometry_calculation_formula', missing));
  deps.log(`${missing.length} formula(s) created`);
  return ids;
}

/**
 * The ids of the lenses `constants` names (names as their column stores them, with the A-constant a new
 * lens gets). A missing lens is created: listed for the configured institution (as OpenEyes lists
 * lenses) when the site offers new lenses at once, else inactive, listed for no institution and recorded
 * in `biometry_lens_review` (held for review).
 */
async function findOrCreateLenses(
  db: Db,
  deps: BiometryFilingDeps,
  constants: ReadonlyMap<string, number | undefined>,
): Promise<Map<string, number>> {
  const ids = await findIdsByName(db, 'ophinbiometry_lenstype_lens', [...constants.keys()]);
  const missing = [...constants.keys()].filter((name) => !ids.has(name));
  if (missing.length === 0) return ids;
  const audit = {
    created_user_id: deps.stamp.userId,
    last_modified_user_id: deps.stamp.userId,
    created_date: deps.stamp.now,
    last_modified_date: deps.stamp.now,
  };
  const isOffered = deps.offersNewLenses;
  for (const chunk of chunksOf(missing, ROWS_PER_CHUNK)) {
    await db
      .insertInto('ophinbiometry_lenstype_lens')
      .values(
        chunk.map((name) => ({
          // The name fits its column (128); the display name and description hold 255.
          name,
          display_name: name,
          description: name,
          comments: isOffered
            ? 'Created by the biometry import'
            : 'Created by the biometry import, held for review',
          position_id: 0,
          acon: decimal('ophinbiometry_lenstype_lens', 'acon', 8, 4, constants.get(name) ?? 0),
          active: isOffered ? 1 : 0,
          ...audit,
        })),
      )
      .execute();
    await deps.yieldTurn();
  }
  const created = await findIdsByName(db, 'ophinbiometry_lenstype_lens', missing);
  const createdIds = missing.map((name) => created.get(name)!);
  for (const [name, id] of created) ids.set(name, id);
  if (isOffered) {
    const institutionId = await findInstitutionId(deps.trx, deps.institutionCode);
    if (institutionId !== undefined) {
      for (const chunk of chunksOf(createdIds, ROWS_PER_CHUNK)) {
        await db
          .insertInto('ophinbiometry_lenstype_lens_institution')
          .values(chunk.map((id) => ({ lenstype_lens_id: id, institution_id: institutionId, ...audit })))
          .execute();
        await deps.yieldTurn();
      }
    }
    deps.log(`${createdIds.length} lens type(s) created: ${createdIds.join(', ')}`);
    return ids;
  }
  for (const chunk of chunksOf(createdIds, ROWS_PER_CHUNK)) {
    await db
      .insertInto('biometry_lens_review')
      .values(
        chunk.map((id) => ({
          lenstype_lens_id: id,
          request_id: deps.requestId,
          created_date: deps.stamp.now,
        })),
      )
      .execute();
    await deps.yieldTurn();
  }
  deps.log(`${createdIds.length} lens type(s) created and held for review: ${createdIds.join(', ')}`);
  return ids;
}

async function findOrCreateSurgeon(db: Db, deps: BiometryFilingDeps, name: string): Promise<number> {
  const fitted = fitColumn(name, BIOMETRY_COLUMNS.surgeonName, fitOptionsOf(deps));
  const found = await db
    .selectFrom('ophinbiometry_surgeon')
    .select('id')
    .where('name', '=', fitted)
    .executeTakeFirst();
  if (found !== undefined) return found.id;
  const created = await db
    .insertInto('ophinbiometry_surgeon')
    .values({ name: fitted })
    .returning('id')
    .executeTakeFirstOrThrow();
  return created.id;
}

/**
 * The eye of a file's reports: the header's laterality, else the eyes the file has measurements for
 * (both when it has both), else the profile's fixed eye; null when none names one (no body site). The
 * measurements come before the profile's eye because a profile fixed to both eyes (the IOLMaster 500
 * v7.5 sends one file per eye) would otherwise mark each eye's image as both.
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
  await ensureAttachmentElement(deps, eventId);
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
