/**
 * `ATTACH_TO_EVENT` (as OpenEyes's `linkAttachmentDataWithEvent`): files the request's payloads under a new
 * event of the matched patient. Holds the routine lock `patient:<id>` so that two requests of one patient
 * never race on its episode. The event is created by event filing (`createEvent`): in the patient's open
 * episode by its one rule (the most recent one that is not legacy, support services, ended or Discharged),
 * created when the patient has none, dated now; its type is the `OphGeneric` event type and the group's element type the attachment element
 * (`Element_OphGeneric_Attachment`, seeded by migration 0007; OpenEyes's `OEModule\OphGeneric\models\Attachment`,
 * whose element table gets the event's row). A payload whose content is already
 * attached to one of the patient's events (same `hash_code`, then the same bytes) is skipped; when every
 * payload is skipped no event is created. The lock is held until the worker's batch commits, so that the
 * check and the filing are never interleaved with another request's of the same patient.
 *
 * A DICOM request whose device profile was chosen (by `DICOM_SEED`) is filed by the device-filing module
 * instead, from its study record's header (`study-record.ts`; read from the payload once when the request
 * has no record): into the one event of its patient and study (created with the study's first file), dated by
 * the device, with its subtype, Device Information, eye and visual field indices; a date before the
 * patient's birth (or otherwise implausible: `checkEventDate`) fails the routine for good. Re-sending a
 * file that is already filed changes nothing.
 */
import type { Kysely } from 'kysely';
import type { DB } from '../../db/schema.ts';
import type { DeviceHeader } from '../device-filing/index.ts';
import { checkEventDate, ColumnWidthError, fileDeviceObject } from '../device-filing/index.ts';
import { ATTACHMENT_ELEMENT_CLASSES, createEvent, findInstitutionId } from '../event-filing/index.ts';
import type { RoutineContext } from './catalog.ts';
import { PermanentRoutineError, defineFilingRoutine } from './catalog.ts';
import type { DeviceDecision } from './device-profile.ts';
import { readDeviceDecision } from './device-profile.ts';
import type { StudyRecordRead } from './study-record.ts';
import { readStudyRecord, storeRebuiltRecord } from './study-record.ts';
import {
  contentHash,
  isAttachedToPatient,
  linkAttachmentsToEvent,
  readPayloadBytes,
  updateAttachmentData,
} from '../attachment-data/index.ts';

export const ATTACH_EVENT_CLASS = 'OphGeneric';

/** The event type and element type attachments are filed under (reference data). */
async function readAttachmentEventTypes(db: Kysely<DB>) {
  return db
    .selectFrom('element_type as et')
    .innerJoin('event_type as ev', 'ev.id', 'et.event_type_id')
    .select(['et.id as elementTypeId', 'ev.id as eventTypeId'])
    .where('et.class_name', 'in', ATTACHMENT_ELEMENT_CLASSES)
    .where('ev.class_name', '=', ATTACH_EVENT_CLASS)
    .executeTakeFirst();
}

export const attachToEventRoutine = defineFilingRoutine<StudyRecordRead | undefined>({
  name: 'ATTACH_TO_EVENT',
  timeoutMs: 60_000,
  retry: 'backoff',
  // A device request is filed from its study record (the header); any other has none to read.
  prepare: async (ctx) =>
    readDeviceDecision(await ctx.readText('REQUEST_DATA')) === undefined ? undefined : readStudyRecord(ctx),
  run: async (ctx, study) => {
    const { texts, payloads } = await ctx.readRequest(['REQUEST_DATA']);
    const patientId = texts.REQUEST_DATA?.matched_patient_id;
    if (typeof patientId !== 'number' || !Number.isInteger(patientId)) {
      throw new PermanentRoutineError('No matched patient: PATIENT_MATCH must run first');
    }
    const types = await ctx.reference('attachment event types', readAttachmentEventTypes);
    if (types === undefined) throw new PermanentRoutineError('The attachment event type is not configured');

    await ctx.lock(`patient:${patientId}`);
    const toLink: number[] = [];
    for (const payload of payloads) {
      // The bytes are read only when needed: to hash a payload stored without its hash, or to compare
      // with an attachment of the same hash.
      let bytes: Buffer | undefined;
      const readBytes = async () => (bytes ??= await readPayloadBytes(ctx.trx, payload.id));
      let hash = payload.hash_code;
      if (hash === null) {
        hash = contentHash(await readBytes());
        await updateAttachmentData(ctx.trx, ctx.dialect, { id: payload.id }, { hashCode: hash }, ctx.stamp());
      }
      if (await isAttachedToPatient(ctx.trx, ctx.dialect, patientId, payload.id, hash, readBytes)) {
        ctx.log(`attachment_data ${payload.id}: already attached to this patient, skipped`);
      } else {
        toLink.push(payload.id);
      }
    }
    if (toLink.length === 0) {
      ctx.log('nothing new to attach');
      return;
    }
    // The institution of INSTITUTION_CODE, as OpenEyes records the one an event was created in (NOT
    // NULL there; the own schema allows none). Reference data: kept REFERENCE_CACHE_TTL_MS.
    const code = ctx.config.institutionCode;
    const institutionId =
      (await ctx.reference(`institution ${code}`, (db) => findInstitutionId(db, code))) ?? null;
    const requestData = texts.REQUEST_DATA ?? {};
    const decision = readDeviceDecision(requestData);
    if (decision !== undefined) {
      // `prepare` read the record when it found the decision; one written since then waits for a retry.
      if (study === undefined) throw new Error('The device profile was recorded during this attempt');
      const record = await storeRebuiltRecord(ctx, study);
      const mnemonics = new Map(payloads.map((p) => [p.id, p.attachment_mnemonic]));
      await fileDevice(ctx, {
        patientId,
        requestData,
        decision,
        header: record.header,
        institutionId,
        eventTypeId: types.eventTypeId,
        attachmentElementTypeId: types.elementTypeId,
        attachments: toLink.map((id) => ({
          id,
          isExtracted: /^DICOM_(IMAGE_\d+|PDF)$/.test(mnemonics.get(id) ?? ''),
        })),
      });
      return;
    }
    const writer = { trx: ctx.trx, schema: ctx.schema, dialect: ctx.dialect, stamp: ctx.stamp() };
    const event = await createEvent(writer, {
      patientId,
      eventTypeId: types.eventTypeId,
      // Filed now: the stamp is already in the stored zone.
      eventDate: { stored: writer.stamp.now },
      episode: { kind: 'open' },
      institutionId,
      automatedSource: JSON.stringify({ request_id: ctx.routine.request_id }),
      hasAttachmentElement: true,
    });
    await linkAttachmentsToEvent(
      ctx.trx,
      {
        eventId: event.eventId,
        elementTypeId: types.elementTypeId,
        attachmentIds: toLink,
        systemOnlyManaged: 0,
        isNewEvent: true,
      },
      ctx.stamp(),
      ctx.dialect,
    );
    await ctx.mergeRequestData({ event_id: event.eventId });
    ctx.log(`event ${event.eventId}: ${toLink.length} attachment(s) linked`);
  },
});

/** Files a device request through the device-filing module (see the module comment). */
async function fileDevice(
  ctx: RoutineContext,
  input: {
    readonly patientId: number;
    readonly requestData: Record<string, unknown>;
    readonly decision: DeviceDecision;
    readonly header: DeviceHeader;
    readonly institutionId: number | null;
    readonly eventTypeId: number;
    readonly attachmentElementTypeId: number;
    readonly attachments: readonly { readonly id: number; readonly isExtracted: boolean }[];
  },
): Promise<void> {
  const data = input.requestData;
  const { decision } = input;
  const { eventDate } = decision;
  // DICOM_SEED checked the date's form and range; here it is checked again with the patient's birth.
  const patient = await ctx.trx
    .selectFrom('patient')
    .select('dob')
    .where('id', '=', input.patientId)
    .executeTakeFirst();
  const dateProblem = checkEventDate(eventDate, { now: ctx.now(), birthDate: patient?.dob ?? null });
  if (dateProblem !== undefined)
    throw new PermanentRoutineError(`The device event date (${eventDate}) ${dateProblem}: refused`);
  // The study's worklist entry (PATIENT_MATCH) gives the appointment's context: its firm, else its
  // subspecialty with DEVICE_FIRM_ID for a new episode.
  const id = (key: string) => (typeof data[key] === 'number' && data[key] > 0 ? data[key] : undefined);
  const worklistFirmId = id('device_worklist_firm_id');
  const subspecialtyId = worklistFirmId === undefined ? id('device_worklist_subspecialty_id') : undefined;
  const firmId = worklistFirmId ?? ctx.config.deviceFirmId;
  if (firmId !== undefined && ctx.schema.hasFirmSubspecialties) {
    const firm = await ctx.trx
      .withTables<{ firm: { id: number } }>()
      .selectFrom('firm')
      .select('id')
      .where('id', '=', firmId)
      .executeTakeFirst();
    if (firm === undefined) {
      throw new PermanentRoutineError(
        worklistFirmId === undefined
          ? `DEVICE_FIRM_ID ${firmId} is not a firm of this database: correct the setting, then retry the request`
          : `The worklist entry's firm ${firmId} is not a firm of this database: correct the worklist definition's display context, then retry the request`,
      );
    }
  }
  const outcome = await fileDeviceObject(
    {
      trx: ctx.trx,
      dialect: ctx.dialect,
      schema: ctx.schema,
      stamp: ctx.stamp(),
      log: (line) => ctx.log(line),
    },
    {
      requestId: ctx.routine.request_id,
      patientId: input.patientId,
      header: input.header,
      profile: {
        name: decision.profile,
        subtype: decision.subtype,
        attachmentType: decision.attachmentType,
        filer: decision.filer,
      },
      eye: decision.eye,
      eventDate: { wallClock: eventDate, timeZone: ctx.config.timeZone },
      institutionId: input.institutionId,
      firmId,
      subspecialtyId,
      eventTypeId: input.eventTypeId,
      attachmentElementTypeId: input.attachmentElementTypeId,
      attachments: input.attachments,
    },
  ).catch((error: unknown) => {
    // A value beyond its OpenEyes column: the same file fails the same way on every try.
    if (error instanceof ColumnWidthError) throw new PermanentRoutineError(`refused: ${error.message}`);
    throw error;
  });
  await ctx.mergeRequestData({
    event_id: outcome.eventId,
    device_event_eye: outcome.eye,
    ...(outcome.hfa === undefined ? {} : { device_hfa: outcome.hfa }),
  });
  ctx.log(`event ${outcome.eventId}: ${input.attachments.length} attachment(s) linked`);
}
