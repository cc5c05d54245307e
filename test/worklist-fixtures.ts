/**
 * Worklist test data and clients: OpenEyes worklist rows (a definition, its generated instance, bookings
 * with attributes), dcmtk `findscu -W` with its answers read back from the files it extracts, and query
 * files written with `dump2dcm` (for character sets and shapes `-k` cannot give).
 */
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import dcmjs from 'dcmjs';
import type { Kysely } from 'kysely';
import type { DB } from '../src/db/schema.ts';
import { formatDateTime } from '../src/db/stored-time.ts';
import { runDcmtk } from './dcmtk.ts';

/** A worklist definition (of identifier type `typeId`) and one generated instance of it. */
export async function createWorklist(
  db: Kysely<DB>,
  options: { typeId: number; name: string; day: string; attributes?: readonly string[] },
): Promise<{ definitionId: number; worklistId: number; attributeIds: Map<string, number> }> {
  const definition = await db
    .insertInto('worklist_definition')
    .values({
      name: options.name,
      rrule: 'FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR',
      start_time: '08:00:00',
      end_time: '17:00:00',
      active_from: '2026-01-01 00:00:00',
      display_order: 1,
      patient_identifier_type_id: options.typeId,
      scheduled: 1,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  const worklist = await db
    .insertInto('worklist')
    .values({
      name: options.name,
      start: `${options.day} 08:00:00`,
      end: `${options.day} 17:00:00`,
      scheduled: 1,
      worklist_definition_id: definition.id,
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  const attributeIds = new Map<string, number>();
  let order = 1;
  for (const name of options.attributes ?? []) {
    const row = await db
      .insertInto('worklist_attribute')
      .values({ worklist_id: worklist.id, name, display_order: order++ })
      .returning('id')
      .executeTakeFirstOrThrow();
    attributeIds.set(name, row.id);
  }
  return { definitionId: definition.id, worklistId: worklist.id, attributeIds };
}

/** A booking of `patientId` on `worklistId` at the instant `whenUtc` (stored in the database's zone). */
export async function createBooking(
  db: Kysely<DB>,
  options: {
    worklistId: number;
    patientId: number;
    whenUtc: string;
    attributes?: ReadonlyMap<number, string>;
  },
): Promise<number> {
  const row = await db
    .insertInto('worklist_patient')
    .values({
      worklist_id: options.worklistId,
      patient_id: options.patientId,
      when: formatDateTime(new Date(options.whenUtc)),
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  for (const [attributeId, value] of options.attributes ?? [])
    await db
      .insertInto('worklist_patient_attribute')
      .values({ worklist_attribute_id: attributeId, worklist_patient_id: row.id, attribute_value: value })
      .execute();
  return row.id;
}

/** One answer of a worklist C-FIND, naturalized by dcmjs (keyword -> value). */
export type WorklistAnswer = Record<string, unknown>;

export interface FindResult {
  readonly code: number | null;
  readonly output: string;
  readonly answers: readonly WorklistAnswer[];
  /** The extracted answer files' bytes, in the same order. */
  readonly files: readonly Buffer[];
}

/**
 * `findscu -W` from `callingAe` to `calledAe` on 127.0.0.1:`port` with `keys` (`-k` items) and/or a query
 * file; the answers it extracted, in the order received.
 */
export async function findWorklist(
  port: number,
  options: {
    keys?: readonly string[];
    queryFile?: string;
    callingAe?: string;
    calledAe?: string;
    extra?: readonly string[];
  },
): Promise<FindResult> {
  const dir = await mkdtemp(path.join(tmpdir(), 'cra-findscu-'));
  try {
    const args = [
      '-W',
      '-v',
      '-aet',
      options.callingAe ?? 'DEV',
      '-aec',
      options.calledAe ?? 'CRA_TEST',
      '-X',
      '-od',
      dir,
      ...(options.extra ?? []),
      ...(options.keys ?? []).flatMap((k) => ['-k', k]),
      '127.0.0.1',
      String(port),
      ...(options.queryFile !== undefined ? [options.queryFile] : []),
    ];
    const result = await runDcmtk('findscu', args, 60_000);
    const files = (await readdir(dir)).filter((f) => f.startsWith('rsp')).sort();
    const bytes = await Promise.all(files.map((file) => readFile(path.join(dir, file))));
    return { code: result.code, output: result.output, answers: bytes.map(readAnswerFile), files: bytes };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function readAnswerFile(bytes: Buffer): WorklistAnswer {
  const data = dcmjs.data as unknown as {
    DicomMessage: { readFile(buffer: ArrayBuffer): { dict: Record<string, unknown> } };
    DicomMetaDictionary: { naturalizeDataset(dict: Record<string, unknown>): WorklistAnswer };
  };
  const arrayBuffer = bytes.buffer.slice(
    bytes.byteOffset,
    bytes.byteOffset + bytes.byteLength,
  ) as ArrayBuffer;
  return data.DicomMetaDictionary.naturalizeDataset(data.DicomMessage.readFile(arrayBuffer).dict);
}

/** The Alphabetic group of a naturalized PN value. */
export function nameOf(value: unknown): string {
  const first = Array.isArray(value) ? (value[0] as unknown) : value;
  if (first === undefined || first === null) return '';
  if (typeof first === 'string') return first;
  return String((first as { Alphabetic?: string }).Alphabetic ?? '');
}

/** The first item of a naturalized sequence. */
export function itemOf(value: unknown): WorklistAnswer {
  const first = Array.isArray(value) ? (value[0] as unknown) : value;
  return (first ?? {}) as WorklistAnswer;
}

/**
 * A query (or worklist) file made by `dump2dcm` from dump lines (`(gggg,eeee) VR [value]`), the bytes of
 * the dump written as `encoding` (values reach the file byte for byte).
 */
export async function dumpToDicom(
  dir: string,
  name: string,
  lines: readonly string[],
  encoding: BufferEncoding = 'utf8',
): Promise<string> {
  const dump = path.join(dir, `${name}.dump`);
  const file = path.join(dir, name);
  await writeFile(dump, Buffer.from(`${lines.join('\n')}\n`, encoding));
  const result = await runDcmtk('dump2dcm', ['-q', '+l', '65536', dump, file]);
  if (result.code !== 0) throw new Error(`dump2dcm failed: ${result.output}`);
  return file;
}
