/**
 * The small demo dataset a new embedded database gets at `npm start`: a few hundred synthetic patients,
 * a CVI event type with its E-Sign element type, a few CVI events with e-sign elements and unique codes
 * (so that signature import can be tried), and the demo account.
 */
import { randomInt } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { AppDeps } from '../../deps.ts';
import { nowDateTime } from '../../db/database.ts';
import type { DB } from '../../db/schema.ts';
import { createAccount } from '../user/index.ts';
import { generateDemoPopulation } from './demo-population.ts';

export interface DemoAccount {
  readonly username: string;
  readonly password: string;
  /** The demo console account, with the roles of every console screen. */
  readonly operator: { readonly username: string; readonly password: string };
  /** What sign/add needs for each demo CVI event; set only when this call created them. */
  readonly signatureCodes?: readonly DemoSignatureCode[];
}

/** A unique code of a demo CVI event and the `extra_info` that names its e-sign element. */
export interface DemoSignatureCode {
  readonly code: string;
  /** `{"e_id":<e-sign element id>,"e_t_id":<its element type id>}`, as a signature pad sends it. */
  readonly extraInfo: string;
}

/** The demo login, documented in the README. Only a new embedded database gets it. */
export const DEMO_USERNAME = 'demo';
export const DEMO_PASSWORD = 'demo-password-change-me';
/** The demo console login: the roles of the console's three screens (request admin, clinical, audit). */
export const DEMO_OPERATOR_USERNAME = 'operator';
export const DEMO_OPERATOR_PASSWORD = 'operator-password-change-me';
export const DEMO_OPERATOR_ROLES = ['Edit Payload Processor', 'TaskViewClinical', 'View Audit Log'] as const;
export const DEMO_PATIENTS = 300;
export const DEMO_CVI_EVENTS = 5;

export const CVI_EVENT_CLASS = 'OphCoCvi';
export const ESIGN_ELEMENT_CLASS = 'OEModule\\OphCoCvi\\models\\Element_OphCoCvi_Esign';
const CODE_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ23456789';

/**
 * Loads the demo dataset unless the demo account already exists; returns the demo account either way.
 */
export async function loadDemoData(
  deps: Pick<AppDeps, 'database' | 'files' | 'config'>,
): Promise<DemoAccount | undefined> {
  const { db } = deps.database;
  const account = {
    username: DEMO_USERNAME,
    password: DEMO_PASSWORD,
    operator: { username: DEMO_OPERATOR_USERNAME, password: DEMO_OPERATOR_PASSWORD },
  };
  const existing = await db
    .selectFrom('user_authentication')
    .select('id')
    .where((eb) => eb(eb.fn('lower', ['username']), '=', DEMO_USERNAME))
    .executeTakeFirst();
  if (existing !== undefined) return account;

  const population = await generateDemoPopulation(deps.database, {
    patients: DEMO_PATIENTS,
    institutionCode: deps.config.institutionCode,
  });
  const signatureCodes = await createCviEvents(
    db,
    population.firstPatientId,
    population.reference.localInstitutionId,
  );
  // A start stopped between the two accounts left this one: the demo account is what marks completion.
  const operator = await db
    .selectFrom('user_authentication')
    .select('id')
    .where((eb) => eb(eb.fn('lower', ['username']), '=', DEMO_OPERATOR_USERNAME))
    .executeTakeFirst();
  if (operator === undefined)
    await createAccount(db, {
      username: DEMO_OPERATOR_USERNAME,
      password: DEMO_OPERATOR_PASSWORD,
      firstName: 'Demo',
      lastName: 'Operator',
      roles: [...DEMO_OPERATOR_ROLES],
    });
  // Created last: its presence means the demo dataset is complete.
  await createAccount(db, {
    username: DEMO_USERNAME,
    password: DEMO_PASSWORD,
    firstName: 'Demo',
    lastName: 'Account',
    roles: ['API access'],
  });
  return { ...account, signatureCodes };
}

/**
 * The lines the server prints at a start that loaded the demo data, as the README shows them: the demo
 * API account, the console account, and each demo unique code with the `extra_info` a pad sends.
 */
export function demoStartupLines(account: DemoAccount): string[] {
  return [
    `demo data loaded; demo account: username "${account.username}", password "${account.password}"`,
    `demo console account (/console/): username "${account.operator.username}", password "${account.operator.password}"`,
    ...(account.signatureCodes ?? []).map(demoCodeLine),
  ];
}

/** The line of one demo unique code, at start and in `demo codes`. */
export function demoCodeLine({ code, extraInfo }: DemoSignatureCode): string {
  return `demo unique code for sign/add: unique_identifier "${code}", extra_info ${extraInfo}`;
}

/**
 * The unique codes of the demo data's CVI events (active, of an event with an e-sign element), in event
 * order, with their `extra_info`; undefined when the database has no demo data (no demo account, which
 * `loadDemoData` creates last).
 */
export async function findDemoSignatureCodes(db: Kysely<DB>): Promise<DemoSignatureCode[] | undefined> {
  const demo = await db
    .selectFrom('user_authentication')
    .select('id')
    .where((eb) => eb(eb.fn('lower', ['username']), '=', DEMO_USERNAME))
    .executeTakeFirst();
  if (demo === undefined) return undefined;
  const elementType = await db
    .selectFrom('element_type')
    .select('id')
    .where('class_name', '=', ESIGN_ELEMENT_CLASS)
    .executeTakeFirst();
  if (elementType === undefined) return [];
  const rows = await db
    .selectFrom('unique_codes as uc')
    .innerJoin('unique_codes_mapping as m', 'm.unique_code_id', 'uc.id')
    .innerJoin('event as e', 'e.id', 'm.event_id')
    .innerJoin('event_type as et', 'et.id', 'e.event_type_id')
    .innerJoin('et_ophcocvi_esign as es', 'es.event_id', 'e.id')
    .select(['uc.code', 'es.id as elementId'])
    .where('et.class_name', '=', CVI_EVENT_CLASS)
    .where('uc.active', '=', 1)
    .where('e.deleted', '=', 0)
    .orderBy('e.id')
    .orderBy('es.id')
    .execute();
  return rows.map((r) => ({
    code: r.code,
    extraInfo: JSON.stringify({ e_id: r.elementId, e_t_id: elementType.id }),
  }));
}

/** CVI events with an e-sign element and a unique code each, for the first demo patients. */
async function createCviEvents(
  db: Kysely<DB>,
  firstPatientId: number,
  institutionId: number,
): Promise<DemoSignatureCode[]> {
  const now = nowDateTime();
  return db.transaction().execute(async (trx) => {
    let eventType = await trx
      .selectFrom('event_type')
      .select('id')
      .where('class_name', '=', CVI_EVENT_CLASS)
      .executeTakeFirst();
    eventType ??= await trx
      .insertInto('event_type')
      .values({ name: 'CVI', class_name: CVI_EVENT_CLASS, created_date: now, last_modified_date: now })
      .returning('id')
      .executeTakeFirstOrThrow();
    const existingElementType = await trx
      .selectFrom('element_type')
      .select('id')
      .where('class_name', '=', ESIGN_ELEMENT_CLASS)
      .executeTakeFirst();
    const elementType =
      existingElementType ??
      (await trx
        .insertInto('element_type')
        .values({
          name: 'E-Sign',
          class_name: ESIGN_ELEMENT_CLASS,
          event_type_id: eventType.id,
          table_name: 'et_ophcocvi_esign',
          created_date: now,
          last_modified_date: now,
        })
        .returning('id')
        .executeTakeFirstOrThrow());
    const codes: DemoSignatureCode[] = [];
    for (let i = 0; i < DEMO_CVI_EVENTS; i += 1) {
      const episode = await trx
        .insertInto('episode')
        .values({
          patient_id: firstPatientId + i,
          start_date: now,
          created_date: now,
          last_modified_date: now,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      const event = await trx
        .insertInto('event')
        .values({
          episode_id: episode.id,
          event_type_id: eventType.id,
          institution_id: institutionId,
          event_date: now,
          created_date: now,
          last_modified_date: now,
        })
        .returning('id')
        .executeTakeFirstOrThrow();
      const element = await trx
        .insertInto('et_ophcocvi_esign')
        .values({ event_id: event.id, created_date: now, last_modified_date: now })
        .returning('id')
        .executeTakeFirstOrThrow();
      const code = await newUniqueCode(trx);
      const unique = await trx
        .insertInto('unique_codes')
        .values({ code, active: 1, created_date: now, last_modified_date: now })
        .returning('id')
        .executeTakeFirstOrThrow();
      await trx
        .insertInto('unique_codes_mapping')
        .values({ unique_code_id: unique.id, event_id: event.id, created_date: now, last_modified_date: now })
        .execute();
      codes.push({ code, extraInfo: JSON.stringify({ e_id: element.id, e_t_id: elementType.id }) });
    }
    return codes;
  });
}

async function newUniqueCode(db: Kysely<DB>): Promise<string> {
  for (;;) {
    const code = Array.from({ length: 6 }, () => CODE_ALPHABET[randomInt(CODE_ALPHABET.length)]).join('');
    const taken = await db
      .selectFrom('unique_codes')
      .select('id')
      .where((eb) => eb(eb.fn('lower', ['code']), '=', code.toLowerCase()))
      .executeTakeFirst();
    if (taken === undefined) return code;
  }
}
