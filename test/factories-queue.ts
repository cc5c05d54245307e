/**
 * Factories of the request queue: request types (with their routine and queue), submissions through
 * queue add, and readers of what a request stored.
 */
import type { Kysely } from 'kysely';
import type { DB, Row } from '../src/db/schema.ts';
import { unique } from './factories.ts';
import type { TestApp } from './harness.ts';

export const ADD_PATH = '/api/v1/request/queue/add';
export const STATUS_PATH = '/api/v1/request/queue/status';

export interface TestRequestType {
  readonly requestType: string;
  readonly routineName: string;
  readonly queue: string;
}

/**
 * A request type whose default routine and queue exist (created when missing). Names are unique unless
 * given.
 */
export async function createRequestType(
  db: Kysely<DB>,
  options: { requestType?: string; routineName?: string; queue?: string } = {},
): Promise<TestRequestType> {
  const requestType = options.requestType ?? unique('rt_');
  const routineName = options.routineName ?? unique('ROUTINE_');
  const queue = options.queue ?? unique('queue_');
  if (!(await hasRow(db, 'request_queue', 'request_queue', queue)))
    await db.insertInto('request_queue').values({ request_queue: queue }).execute();
  await createRoutineName(db, routineName);
  await db
    .insertInto('request_type')
    .values({
      request_type: requestType,
      title_full: requestType.slice(0, 45),
      title_short: requestType.slice(0, 45),
      default_routine_name: routineName,
      default_request_queue: queue,
    })
    .execute();
  return { requestType, routineName, queue };
}

/** Sends one submission to queue add with the user's credentials. */
export function submitToQueue(
  app: TestApp,
  authorization: string,
  options: {
    query?: string;
    method?: string;
    body?: RequestInit['body'];
    headers?: Record<string, string>;
  } = {},
): Promise<Response> {
  const query = options.query === undefined || options.query === '' ? '' : `?${options.query}`;
  return app.request(`${ADD_PATH}${query}`, {
    method: options.method ?? 'POST',
    headers: { authorization, ...options.headers },
    ...(options.body === undefined ? {} : { body: options.body }),
  });
}

/** The attachment rows of a request, by mnemonic. */
export async function attachmentsByMnemonic(
  db: Kysely<DB>,
  requestId: number,
): Promise<Map<string, Row<'attachment_data'>>> {
  const rows = await db
    .selectFrom('attachment_data')
    .selectAll()
    .where('request_id', '=', requestId)
    .orderBy('id')
    .execute();
  return new Map(rows.map((r) => [r.attachment_mnemonic, r]));
}

/** The routines of a request in id order. */
export function routinesOf(db: Kysely<DB>, requestId: number): Promise<Array<Row<'request_routine'>>> {
  return db
    .selectFrom('request_routine')
    .selectAll()
    .where('request_id', '=', requestId)
    .orderBy('id')
    .execute();
}

/** The rows of the three tables a refused submission must leave untouched. */
export const QUEUE_TABLES = ['request', 'attachment_data', 'request_routine'] as const;

// --- worker: requests, routines and payload files for the queue engine tests --------------------------

/** A routine name in `routine_library` (the FK every `request_routine` needs), created when missing. */
export async function createRoutineName(db: Kysely<DB>, name = unique('T_')): Promise<string> {
  if (!(await hasRow(db, 'routine_library', 'routine_name', name)))
    await db.insertInto('routine_library').values({ routine_name: name, hash_code: null }).execute();
  return name;
}

/** True when `table` has a row whose key `column` is `value` (the factories' "create when missing"). */
async function hasRow(
  db: Kysely<DB>,
  table: 'request_queue' | 'routine_library',
  column: 'request_queue' | 'routine_name',
  value: string,
): Promise<boolean> {
  const row = await db
    .selectFrom(table)
    .select(column as never)
    .where(column as never, '=', value as never)
    .executeTakeFirst();
  return row !== undefined;
}

/** A JSON text row of a new request (`REQUEST_DATA`, `FORM_DATA`, a JSON `REQUEST_BLOB`). */
export function jsonRow(mnemonic: string, value: unknown) {
  return {
    mnemonic,
    mimeType: 'application/json',
    textData: JSON.stringify(value),
    blobData: null,
    uploadFileName: null,
    hashCode: null,
  };
}

/** A binary payload row of a new request. */
export function blobRow(
  mnemonic: string,
  mimeType: string,
  bytes: Buffer,
  uploadFileName: string | null = null,
) {
  return { mnemonic, mimeType, textData: null, blobData: bytes, uploadFileName, hashCode: null };
}

/** Adds a routine row to a request directly (for ordering and state tests). */
export async function addRoutineRow(
  db: Kysely<DB>,
  values: {
    requestId: number;
    name: string;
    queue: string;
    sequence: number;
    status?: Row<'request_routine'>['status'];
    tryCount?: number;
    nextTry?: string | null;
  },
): Promise<number> {
  const row = await db
    .insertInto('request_routine')
    .values({
      request_id: values.requestId,
      routine_name: values.name,
      execute_request_queue: values.queue,
      execute_sequence: values.sequence,
      status: values.status ?? 'NEW',
      try_count: values.tryCount ?? 0,
      next_try_date_time: values.nextTry ?? null,
      hash_code: null,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

/** The execution rows of a routine, in id order. */
export function executionsOf(
  db: Kysely<DB>,
  routineId: number,
): Promise<Array<Row<'request_routine_execution'>>> {
  return db
    .selectFrom('request_routine_execution')
    .selectAll()
    .where('request_routine_id', '=', routineId)
    .orderBy('id')
    .execute();
}

/** DICOM tags for {@link buildDicomFile}, by keyword. */
export interface DicomFileTags {
  readonly PatientID: string;
  readonly PatientName: string;
  readonly PatientBirthDate: string;
  readonly PatientSex: string;
  readonly Modality: string;
  readonly Manufacturer: string;
  readonly StudyInstanceUID: string;
  readonly StudyDate: string;
}

/**
 * One DICOM data element in explicit VR little endian; the value is padded to an even length.
 * `length` overrides the declared length (for truncated or undefined-length elements).
 */
export function dicomElement(group: number, el: number, vr: string, value: Buffer, length?: number): Buffer {
  const padded =
    value.length % 2 === 0
      ? value
      : Buffer.concat([value, Buffer.from([vr === 'UI' || vr === 'OB' ? 0 : 0x20])]);
  const isLong = ['OB', 'OW', 'SQ', 'UN', 'UT'].includes(vr);
  const head = Buffer.alloc(isLong ? 12 : 8);
  head.writeUInt16LE(group, 0);
  head.writeUInt16LE(el, 2);
  head.write(vr, 4, 'latin1');
  if (isLong) head.writeUInt32LE(length ?? padded.length, 8);
  else head.writeUInt16LE(length ?? padded.length, 6);
  return Buffer.concat([head, padded]);
}

/** A Part 10 file: 128-byte preamble, `DICM`, group 0002 (explicit VR little endian), then `dataset`. */
export function buildPart10File(
  dataset: Buffer,
  options: { transferSyntaxUid?: string; sopClassUid?: string; sopInstanceUid?: string } = {},
): Buffer {
  const text = (s: string) => Buffer.from(s, 'latin1');
  const metaBody = Buffer.concat([
    dicomElement(0x0002, 0x0001, 'OB', Buffer.from([0, 1])),
    dicomElement(0x0002, 0x0002, 'UI', text(options.sopClassUid ?? '1.2.840.10008.5.1.4.1.1.7')),
    dicomElement(0x0002, 0x0003, 'UI', text(options.sopInstanceUid ?? '1.2.826.0.1.3680043.8.498.1')),
    dicomElement(0x0002, 0x0010, 'UI', text(options.transferSyntaxUid ?? '1.2.840.10008.1.2.1')),
  ]);
  const groupLength = Buffer.alloc(4);
  groupLength.writeUInt32LE(metaBody.length, 0);
  return Buffer.concat([
    Buffer.alloc(128),
    text('DICM'),
    dicomElement(0x0002, 0x0000, 'UL', groupLength),
    metaBody,
    dataset,
  ]);
}

/**
 * A minimal, valid DICOM Part 10 file without pixel data: 128-byte preamble, `DICM`, the group 0002 file
 * meta information (explicit VR little endian), then the given tags in explicit VR little endian.
 */
export function buildDicomFile(tags: DicomFileTags, sopInstanceUid = '1.2.826.0.1.3680043.8.498.1'): Buffer {
  const text = (s: string) => Buffer.from(s, 'latin1');
  const dataset = Buffer.concat([
    dicomElement(0x0008, 0x0016, 'UI', text('1.2.840.10008.5.1.4.1.1.7')),
    dicomElement(0x0008, 0x0018, 'UI', text(sopInstanceUid)),
    dicomElement(0x0008, 0x0020, 'DA', text(tags.StudyDate)),
    dicomElement(0x0008, 0x0060, 'CS', text(tags.Modality)),
    dicomElement(0x0008, 0x0070, 'LO', text(tags.Manufacturer)),
    dicomElement(0x0010, 0x0010, 'PN', text(tags.PatientName)),
    dicomElement(0x0010, 0x0020, 'LO', text(tags.PatientID)),
    dicomElement(0x0010, 0x0030, 'DA', text(tags.PatientBirthDate)),
    dicomElement(0x0010, 0x0040, 'CS', text(tags.PatientSex)),
    dicomElement(0x0020, 0x000d, 'UI', text(tags.StudyInstanceUID)),
  ]);
  return buildPart10File(dataset, { sopInstanceUid });
}
