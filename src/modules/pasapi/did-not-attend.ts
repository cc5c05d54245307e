/**
 * A missed appointment from the PAS (PASAPI's `DidNotAttend` PUT): an automated `Did Not Attend` event
 * (`OphCiDidNotAttend`) with its comments element, for the patient holding the hospital number of the
 * identifier type the body names, when the setting `DNA_autogen_enabled` is `on` (OpenEyes's default is
 * off: then nothing is written and the answer says so). One write transaction.
 *
 * Differences from OpenEyes (P25): every element is required (OpenEyes never checks), the date is a date
 * (OpenEyes adds the clock time), and the event is created by event filing (`createEvent`): in the
 * patient's most recent open episode that is not Discharged (OpenEyes: the episode of the API user's last
 * firm, created when missing), else a new episode without a firm, as device filing opens one without
 * `DEVICE_FIRM_ID`.
 */
import type { Generated, Transaction } from 'kysely';
import { createEvent } from '../event-filing/index.ts';
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
    const source = (await readInstallationSetting(trx, 'DNA_autogen_message'))?.trim() || DEFAULT_SOURCE;
    const event = await createEvent(
      { trx, schema: database.schema, dialect: database.dialect, stamp: { userId: actor.userId, now } },
      {
        patientId,
        eventTypeId: eventType.id,
        // A calendar date, stored as it is.
        eventDate: { stored: `${record.date!} 00:00:00` },
        episode: { kind: 'open' },
        institutionId: type.institutionId,
        siteId: type.siteId,
        automatedSource: source,
      },
    );
    await trx
      .withTables<DidNotAttendTables>()
      .insertInto('et_ophcididnotattend_comments')
      .values({ event_id: event.eventId, comment: comments, ...audit })
      .execute();
    return { outcome: 'created', eventId: event.eventId, patientId };
  }

  return {
    recordDidNotAttend: (record, actor) => database.writeTransaction((trx) => apply(trx, record, actor)),
  };
}
