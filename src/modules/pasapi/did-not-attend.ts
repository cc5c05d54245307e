/**
 * A missed appointment from the PAS (PASAPI's `DidNotAttend` PUT): an automated `Did Not Attend` event
 * (`OphCiDidNotAttend`) with its comments element, for the patient holding the hospital number of the
 * identifier type the body names, when the setting `DNA_autogen_enabled` is `on` (OpenEyes's default is
 * off: then nothing is written and the answer says so). One write transaction.
 *
 * Differences from OpenEyes (P25): every element is required (OpenEyes never checks), the date is a date
 * (OpenEyes adds the clock time), and the episode is the patient's most recent open one (OpenEyes: the
 * episode of the API user's last firm, created when missing), else a new episode without a firm, as
 * device filing opens one without `DEVICE_FIRM_ID`.
 */
import type { Generated, Kysely, Transaction } from 'kysely';
import type { Database } from '../../db/database.ts';
import { findUnstorableCharacter, unstorableCharacterMessage } from '../../db/schema-profile.ts';
import type { DB } from '../../db/schema.ts';
import { nowDateTime } from '../../db/stored-time.ts';
import type { ChangeActor } from './patient-change.ts';
import { findIdentifierType, findPatientByIdentifier, readInstallationSetting } from './patient-change.ts';
import { PasapiError, parseLooseBoolean } from './pasapi-values.ts';

/** The `<DidNotAttend>` elements, each absent (undefined) or its text; `date` as `YYYY-MM-DD`. */
export interface DidNotAttendRecord {
  readonly hospitalNumber?: string;
  readonly identifierType?: string;
  readonly date?: string;
  readonly comments?: string;
}

export type DidNotAttendResult =
  | { readonly outcome: 'disabled' }
  | { readonly outcome: 'created'; readonly eventId: number; readonly patientId: number };

export const DID_NOT_ATTEND_CLASS = 'OphCiDidNotAttend';
const DEFAULT_SOURCE = 'Entry automatically created by the PAS.';

/** The comments element of a Did Not Attend event (not in the service's typed schema). */
type DidNotAttendTables = {
  et_ophcididnotattend_comments: {
    id: Generated<number>;
    event_id: number;
    comment: string | null;
    created_user_id: number;
    created_date: string;
    last_modified_user_id: number;
    last_modified_date: string;
  };
};

/** The patient's most recent open episode (not legacy, not support services, not the change tracker). */
async function findOpenEpisode(
  database: Database,
  trx: Kysely<DB>,
  patientId: number,
): Promise<{ id: number; firmId: number | null } | undefined> {
  let query = trx
    .withTables<{ episode: { change_tracker: number | null } }>()
    .selectFrom('episode')
    .select(['id', 'firm_id'])
    .where('patient_id', '=', patientId)
    .where('deleted', '=', 0)
    .where((eb) => eb.or([eb('legacy', '=', 0), eb('legacy', 'is', null)]))
    .where('support_services', '=', 0)
    .where('end_date', 'is', null);
  if (database.schema.hasEpisodeWorkflow)
    query = query.where((eb) => eb.or([eb('change_tracker', 'is', null), eb('change_tracker', '=', 0)]));
  const row = await query.orderBy('start_date', 'desc').orderBy('id', 'desc').executeTakeFirst();
  return row === undefined ? undefined : { id: row.id, firmId: row.firm_id };
}

export function createDidNotAttends(database: Database): {
  recordDidNotAttend(record: DidNotAttendRecord, actor: ChangeActor): Promise<DidNotAttendResult>;
} {
  async function apply(
    trx: Transaction<DB>,
    record: DidNotAttendRecord,
    actor: ChangeActor,
  ): Promise<DidNotAttendResult> {
    const errors: string[] = [];
    for (const [tag, value] of [
      ['HospitalNumber', record.hospitalNumber],
      ['IdentifierType', record.identifierType],
      ['Date', record.date],
      ['Comments', record.comments],
    ] as const)
      if (value === undefined || (tag !== 'Comments' && value.trim() === ''))
        errors.push(`${tag} is required`);
    if (errors.length > 0) throw new PasapiError(400, errors);
    const comments = record.comments!;
    if (findUnstorableCharacter(comments, database.schema.maxTextCodePoint) !== undefined)
      throw new PasapiError(400, [unstorableCharacterMessage('Comments')]);

    if (parseLooseBoolean((await readInstallationSetting(trx, 'DNA_autogen_enabled')) ?? 'off') !== true)
      return { outcome: 'disabled' };

    const typeKey = record.identifierType!.trim();
    const type = await findIdentifierType(trx, typeKey);
    if (type === undefined)
      throw new PasapiError(400, [`Patient Identifier Type for '${typeKey}' not found.`]);
    const patientId = await findPatientByIdentifier(trx, type.id, record.hospitalNumber!.trim());
    if (patientId === undefined) throw new PasapiError(400, ['Patient not found']);
    const eventType = await trx
      .selectFrom('event_type')
      .select('id')
      .where('class_name', '=', DID_NOT_ATTEND_CLASS)
      .orderBy('id')
      .executeTakeFirst();
    if (eventType === undefined)
      throw new PasapiError(422, [`The event type ${DID_NOT_ATTEND_CLASS} is not installed`]);

    const now = nowDateTime();
    const audit = {
      created_user_id: actor.userId,
      created_date: now,
      last_modified_user_id: actor.userId,
      last_modified_date: now,
    };
    const eventDate = `${record.date!} 00:00:00`;
    let episode = await findOpenEpisode(database, trx, patientId);
    if (episode === undefined) {
      const row = await trx
        .insertInto('episode')
        .values({ patient_id: patientId, firm_id: null, start_date: eventDate, ...audit })
        .returning('id')
        .executeTakeFirstOrThrow();
      episode = { id: row.id, firmId: null };
    }
    const source = (await readInstallationSetting(trx, 'DNA_autogen_message'))?.trim() || DEFAULT_SOURCE;
    const event = await trx
      .insertInto('event')
      .values({
        episode_id: episode.id,
        event_type_id: eventType.id,
        event_date: eventDate,
        is_automated: 1,
        automated_source: source,
        info: null,
        firm_id: episode.firmId,
        institution_id: type.institutionId,
        site_id: type.siteId,
        ...audit,
      })
      .returning('id')
      .executeTakeFirstOrThrow();
    await trx
      .withTables<DidNotAttendTables>()
      .insertInto('et_ophcididnotattend_comments')
      .values({ event_id: event.id, comment: comments, ...audit })
      .execute();
    return { outcome: 'created', eventId: event.id, patientId };
  }

  return {
    recordDidNotAttend: (record, actor) => database.writeTransaction((trx) => apply(trx, record, actor)),
  };
}
