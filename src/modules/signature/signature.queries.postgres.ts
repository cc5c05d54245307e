/**
 * The rows of a saved signature in ONE statement, where the engine runs data-modifying CTEs
 * (`DialectAdapter.hasWritableCte`: PostgreSQL): the protected files, the signature, the CVI status text
 * and the import log go to the server as one statement (one round trip, its own implicit transaction,
 * committed durably before it answers) instead of BEGIN, four or five statements and COMMIT. Engines
 * without them write the same rows, built by the same row functions (signature.queries.ts), in a
 * transaction.
 */
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { runCompiled } from '../../db/compiled-queries.ts';
import type { Database } from '../../db/database.ts';
import type { DB } from '../../db/schema.ts';
import type { NewImportLog, NewPatientSignature, NewProtectedFile } from './signature.queries.ts';
import {
  eventInfoChangeOf,
  importLogRowOf,
  patientSignatureRowOf,
  protectedFileRowOf,
} from './signature.queries.ts';

export interface SignatureRows {
  /** The new files, in row order; `signatureUid` names the signature's. */
  readonly files: readonly NewProtectedFile[];
  readonly signatureUid: string;
  /** The signature; its file id is the new file `signatureUid`'s. */
  readonly signature: Omit<NewPatientSignature, 'signatureFileId'>;
  /**
   * The CVI status text to set: only while `event.info` still holds `previous` (a compare-and-set, as
   * `updateEventInfo` does). Only for a schema that keeps no row versions.
   */
  readonly eventInfo?: { eventId: number; previous: string; next: string; now: string };
  /** The success log; its cropped file id is the new file `signatureUid`'s. */
  readonly log: Omit<NewImportLog, 'croppedFileId'>;
}

/**
 * Writes `rows` atomically and durably; resolves to the import log's id. The statement's text depends
 * only on the number of files and on whether the status text changes: compiled once per shape
 * (`database.shapes`) and run prepared.
 */
export async function saveSignatureInOneStatement(database: Database, rows: SignatureRows): Promise<number> {
  // Every column value in a fixed order; the file ids the signature and the log refer to are found by
  // the signature file's uid, which takes their places.
  const files = rows.files.map(protectedFileRowOf);
  const signature = patientSignatureRowOf({ ...rows.signature, signatureFileId: rows.signatureUid as never });
  const log = importLogRowOf({ ...rows.log, croppedFileId: rows.signatureUid as never });
  const change = rows.eventInfo === undefined ? undefined : eventInfoChangeOf(rows.eventInfo);
  const values: unknown[] = [
    ...files.flatMap((file) => Object.values(file)),
    ...Object.values(signature),
    ...Object.values(log),
    ...(change === undefined
      ? []
      : [...Object.values(change), rows.eventInfo!.eventId, rows.eventInfo!.previous]),
  ];
  const key = `signature:save:${files.length}:${change !== undefined}`;
  const query = database.shapes.compile(key, values, (slots) => {
    let next = 0;
    /** `row` with each of its values replaced by the next slot, in the order `values` holds them. */
    const slotted = <T extends object>(row: T): T =>
      Object.fromEntries(Object.keys(row).map((column) => [column, slots[next++]])) as T;
    const fileSlots = files.map(slotted);
    const signatureSlots = slotted(signature);
    const logSlots = slotted(log);
    const changeSlots =
      change === undefined
        ? undefined
        : { set: slotted(change), eventId: slots[next++], previous: slots[next++] };
    return buildStatement(database.db, fileSlots, signatureSlots, logSlots, changeSlots);
  });
  const [row] = await runCompiled(database, query);
  return row!.id;
}

function buildStatement(
  db: Kysely<DB>,
  files: readonly ReturnType<typeof protectedFileRowOf>[],
  signature: ReturnType<typeof patientSignatureRowOf>,
  log: ReturnType<typeof importLogRowOf>,
  change: { set: ReturnType<typeof eventInfoChangeOf>; eventId: unknown; previous: unknown } | undefined,
) {
  const fileIdOf = (uid: unknown) => sql<number>`(select id from new_files where uid = ${uid})`;
  const inserts = db
    .with('new_files', (qc) => qc.insertInto('protected_file').values(files).returning(['id', 'uid']))
    .with('new_signature', (qc) =>
      qc
        .insertInto('ophcocvi_signature')
        .values({ ...signature, signature_file_id: fileIdOf(signature.signature_file_id) })
        .returning('id'),
    )
    .with('new_log', (qc) =>
      qc
        .insertInto('signature_import_log')
        .values({ ...log, cropped_file_id: fileIdOf(log.cropped_file_id) })
        .returning('id'),
    );
  const withChange =
    change === undefined
      ? inserts
      : inserts.with('event_info', (qc) =>
          qc
            .updateTable('event')
            .set(change.set)
            .where('id', '=', change.eventId as number)
            .where('info', '=', change.previous as string)
            .returning('id'),
        );
  return withChange.selectFrom('new_log').select('id');
}
