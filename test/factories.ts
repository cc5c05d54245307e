/**
 * Factories for the rows tests need. Each call makes new rows with unique values, so tests never depend
 * on each other.
 */
import type { Kysely } from 'kysely';
import type { DB, NewRow } from '../src/db/schema.ts';
import { createAccount, setAccountActive } from '../src/modules/user/index.ts';

let counter = 0;
/** A value unique within this test process. */
export function unique(prefix = 'u'): string {
  counter += 1;
  return `${prefix}${process.pid.toString(36)}${counter}`;
}

export function basicHeader(username: string, password: string): string {
  return `Basic ${Buffer.from(`${username}:${password}`, 'utf8').toString('base64')}`;
}

export interface TestUser {
  readonly userId: number;
  readonly username: string;
  readonly password: string;
  /** The `Authorization` header value. */
  readonly authorization: string;
}

/** A user with a local login; `roles` defaults to `API access` (which carries `OprnApi`). */
export async function createUser(
  db: Kysely<DB>,
  options: { roles?: readonly string[]; password?: string; isActive?: boolean; username?: string } = {},
): Promise<TestUser> {
  const username = options.username ?? unique('user');
  const password = options.password ?? `pw:${unique('secret')}`;
  const userId = await createAccount(db, { username, password, roles: options.roles ?? ['API access'] });
  if (options.isActive === false) await setAccountActive(db, username, false);
  return { userId, username, password, authorization: basicHeader(username, password) };
}

export async function createInstitution(
  db: Kysely<DB>,
  values: Partial<NewRow<'institution'>> = {},
): Promise<number> {
  const row = await db
    .insertInto('institution')
    .values({ name: 'Test Hospital', remote_id: unique('I').slice(0, 10), short_name: 'Test', ...values })
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

export interface TestPatient {
  readonly patientId: number;
  readonly contactId: number;
}

/** A patient with its contact (names live in `contact`). */
export async function createPatient(
  db: Kysely<DB>,
  values: {
    firstName?: string;
    lastName?: string;
    title?: string | null;
    patient?: Partial<NewRow<'patient'>>;
  } = {},
): Promise<TestPatient> {
  const contact = await db
    .insertInto('contact')
    .values({
      first_name: values.firstName ?? 'Test',
      last_name: values.lastName ?? unique('Patient'),
      title: values.title ?? null,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  const patient = await db
    .insertInto('patient')
    .values({ contact_id: contact.id, dob: '1980-02-01', gender: 'M', ...values.patient })
    .returning('id')
    .executeTakeFirstOrThrow();
  return { patientId: patient.id, contactId: contact.id };
}

/** Counts the rows of `table`: tests use it to prove that refused input wrote nothing. */
export async function countRows(db: Kysely<DB>, table: keyof DB): Promise<number> {
  const row = await db
    .selectFrom(table)
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}
