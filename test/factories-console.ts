/**
 * Factories of the operations console's tests: an operator with every console operation, records in
 * the states the console works on (a failed request, a failed signature upload with its original, a
 * filed attachment), and a small cookie-keeping HTTP client that signs in through the login form.
 */
import type { Kysely } from 'kysely';
import { nowDateTime } from '../src/db/database.ts';
import type { DB } from '../src/db/schema.ts';
import type { TestUser } from './factories.ts';
import { createInstitution, createPatient, createUser, unique } from './factories.ts';
import { addIdentifier, createIdentifierType } from './factories-patient.ts';
import { addRoutineRow, createRequestType } from './factories-queue.ts';
import type { SignableEvent } from './factories-signature.ts';
import { b64, createSignableEvent, makePng } from './factories-signature.ts';
import type { TestApp } from './harness.ts';

/** Roles carrying the three console operations (request admin, clinical views, audit). */
export const OPERATOR_ROLES = ['Edit Payload Processor', 'TaskViewClinical', 'View Audit Log'] as const;

export function createOperator(db: Kysely<DB>, roles: readonly string[] = OPERATOR_ROLES): Promise<TestUser> {
  return createUser(db, { roles: [...roles] });
}

export interface FailedRequest {
  readonly requestId: number;
  readonly routineId: number;
  readonly routineName: string;
  readonly queue: string;
}

/** A request whose one routine is FAILED after `tries` attempts (with an execution row per the last). */
export async function createFailedRequest(
  db: Kysely<DB>,
  options: {
    routineName?: string;
    queue?: string;
    status?: 'FAILED' | 'NEW' | 'RETRY' | 'COMPLETE';
    tries?: number;
  } = {},
): Promise<FailedRequest> {
  const type = await createRequestType(db, {
    ...(options.routineName === undefined ? {} : { routineName: options.routineName }),
    ...(options.queue === undefined ? {} : { queue: options.queue }),
  });
  const request = await db
    .insertInto('request')
    .values({ request_type: type.requestType, system_message: 'console test', created_date: nowDateTime() })
    .returning('id')
    .executeTakeFirstOrThrow();
  const tries = options.tries ?? 20;
  const status = options.status ?? 'FAILED';
  const routineId = await addRoutineRow(db, {
    requestId: request.id,
    name: type.routineName,
    queue: type.queue,
    sequence: 10,
    status,
    tryCount: status === 'NEW' ? 0 : tries,
  });
  if (status !== 'NEW') {
    await db
      .insertInto('request_routine_execution')
      .values({
        request_routine_id: routineId,
        log_text: `worker test\nError: device offline (${unique('e')})`,
        execution_date_time: '2026-01-02 03:04:05',
        status,
        try_number: tries,
      })
      .execute();
  }
  return { requestId: request.id, routineId, routineName: type.routineName, queue: type.queue };
}

export interface FailedUpload {
  readonly event: SignableEvent;
  readonly logId: number;
}

/**
 * A device post to sign/add that failed validation (no `extra_info`) but carried a valid original
 * capture: a status 3 import log row of the event, with the original stored, ready for a manual crop.
 */
export async function createFailedUpload(app: TestApp): Promise<FailedUpload> {
  const event = await createSignableEvent(app.db);
  const response = await app.request('/api/v1/sign/add', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      unique_identifier: event.code,
      image: b64(makePng(16, 9)),
      origImage: b64(makePng(320, 240, { isNoisy: true })),
    }),
  });
  if (response.status !== 422) throw new Error(`sign/add answered ${response.status}, expected 422`);
  const log = await app.db
    .selectFrom('signature_import_log')
    .select('id')
    .where('event_id', '=', event.eventId)
    .orderBy('id', 'desc')
    .executeTakeFirstOrThrow();
  return { event, logId: log.id };
}

export interface FiledAttachment {
  readonly attachmentId: number;
  readonly eventId: number;
  readonly patientId: number;
  /** A hospital number of the patient. */
  readonly identifier: string;
}

/** A patient with a hospital number, an event of theirs, and a PNG attachment filed under it (with a thumbnail). */
export async function createFiledAttachment(db: Kysely<DB>): Promise<FiledAttachment> {
  const patient = await createPatient(db);
  const typeId = await createIdentifierType(db, { institution_id: await createInstitution(db) });
  const identifier = String(Math.floor(1_000_000 + Math.random() * 8_999_999));
  await addIdentifier(db, patient.patientId, typeId, identifier);
  const episode = await db
    .insertInto('episode')
    .values({ patient_id: patient.patientId })
    .returning('id')
    .executeTakeFirstOrThrow();
  const eventType = await db
    .insertInto('event_type')
    .values({ name: unique('Imaging').slice(0, 40), class_name: unique('OphImaging') })
    .returning('id')
    .executeTakeFirstOrThrow();
  const elementType = await db
    .insertInto('element_type')
    .values({ name: 'Attachment', class_name: unique('Element_'), event_type_id: eventType.id })
    .returning('id')
    .executeTakeFirstOrThrow();
  const event = await db
    .insertInto('event')
    .values({ episode_id: episode.id, event_type_id: eventType.id })
    .returning('id')
    .executeTakeFirstOrThrow();
  const request = await db
    .insertInto('request')
    .values({ request_type: 'dicom_request', system_message: 'console test' })
    .returning('id')
    .executeTakeFirstOrThrow();
  const attachment = await db
    .insertInto('attachment_data')
    .values({
      request_id: request.id,
      attachment_mnemonic: unique('IMAGE_'),
      attachment_type: 'NONE',
      mime_type: 'image/png',
      blob_data: makePng(64, 48, { isNoisy: true }),
      thumbnail_small_blob: makePng(12, 9),
      upload_file_name: 'fundus.png',
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  const group = await db
    .insertInto('event_attachment_group')
    .values({ event_id: event.id, element_type_id: elementType.id })
    .returning('id')
    .executeTakeFirstOrThrow();
  await db
    .insertInto('event_attachment_item')
    .values({ event_attachment_group_id: group.id, attachment_data_id: attachment.id })
    .execute();
  return { attachmentId: attachment.id, eventId: event.id, patientId: patient.patientId, identifier };
}

/** The value of the first hidden `_csrf` field of a page (or of the form whose action is given). */
export function csrfOf(html: string, action?: string): string {
  const scope = action === undefined ? html : html.slice(html.indexOf(`action="${action}"`));
  const match = /name="_csrf" value="([^"]+)"/.exec(scope);
  if (match === null)
    throw new Error(`no CSRF token${action === undefined ? '' : ` in the form of ${action}`}`);
  return match[1]!;
}

/** A browser-like HTTP client of the console: keeps its cookies, never follows redirects. */
export class ConsoleClient {
  readonly app: TestApp;
  readonly cookies = new Map<string, string>();

  constructor(app: TestApp) {
    this.app = app;
  }

  private remember(response: Response): void {
    for (const header of response.headers.getSetCookie()) {
      const [pair] = header.split(';');
      const eq = pair!.indexOf('=');
      const name = pair!.slice(0, eq);
      const value = pair!.slice(eq + 1);
      if (value === '' || /max-age=0/i.test(header)) this.cookies.delete(name);
      else this.cookies.set(name, value);
    }
  }

  private cookieHeader(): Record<string, string> {
    const text = [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ');
    return text === '' ? {} : { cookie: text };
  }

  async get(path: string): Promise<Response> {
    const response = await this.app.request(path, { headers: this.cookieHeader(), redirect: 'manual' });
    this.remember(response);
    return response;
  }

  async post(path: string, fields: Record<string, string>): Promise<Response> {
    const response = await this.app.request(path, {
      method: 'POST',
      headers: { ...this.cookieHeader(), 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(fields).toString(),
      redirect: 'manual',
    });
    this.remember(response);
    return response;
  }

  /** Signs in through the login form; returns the answer of the form's POST. */
  async signIn(user: { username: string; password: string }, password = user.password): Promise<Response> {
    const form = await this.get('/console/login');
    const html = await form.text();
    return this.post('/console/login', {
      _csrf: csrfOf(html),
      username: user.username,
      password,
      next: '/console/',
    });
  }

  /** GETs `page` and POSTs the form of `action` on it with `fields` and the page's CSRF token. */
  async submit(page: string, action: string, fields: Record<string, string>): Promise<Response> {
    const html = await (await this.get(page)).text();
    return this.post(action, { _csrf: csrfOf(html, action), ...fields });
  }
}

/** The routine version a request page shows (status/try count/next try), as its forms send it. */
export function versionOf(html: string, action: string): string {
  const scope = html.slice(html.indexOf(`action="${action}"`));
  const match = /name="version" value="([^"]*)"/.exec(scope);
  if (match === null) throw new Error(`no version in the form of ${action}`);
  return match[1]!;
}
