/**
 * Backfill of `dicom_instance_index` (migration 0023) for instances received before it existed: each
 * receipt (`dicom_received_instance`) without an index row has the request it last became read back (its
 * `REQUEST_BLOB` payload, slice by slice), checked and read as at receipt (`checkInstance`, on the
 * decoding threads), and indexed with the receipt's date. In batches of SOP Instance UIDs, one instance's
 * bytes at a time; running it again indexes only what is still missing. An instance whose bytes were
 * dropped (the clean-up policy) or that no longer reads is counted and left out.
 */
import type { Kysely } from 'kysely';
import type { Config } from '../../config.ts';
import type { Database } from '../../db/database.ts';
import type { DB } from '../../db/schema.ts';
import { ChangedWhileReadingError, readBlobSlices } from '../attachment-data/index.ts';
import { checkInstance } from './instance.ts';
import type { DicomInstanceIndexTable, DicomReceivedInstanceTable } from './received-instance.queries.ts';
import { upsertInstanceIndex } from './received-instance.queries.ts';

type ReindexDb = Kysely<
  DB & { dicom_received_instance: DicomReceivedInstanceTable; dicom_instance_index: DicomInstanceIndexTable }
>;

export interface ReindexCounts {
  readonly indexed: number;
  /** The request no longer holds the bytes. */
  readonly dropped: number;
  /** The bytes no longer read as the instance received (not a Part 10 file, another instance). */
  readonly unreadable: number;
}

/** Receipts without an index row. */
export async function countUnindexed(db: Kysely<DB>): Promise<number> {
  const row = await (db as unknown as ReindexDb)
    .selectFrom('dicom_received_instance as r')
    .leftJoin('dicom_instance_index as x', 'x.sop_instance_uid', 'r.sop_instance_uid')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('x.sop_instance_uid', 'is', null)
    .executeTakeFirst();
  return Number(row?.n ?? 0);
}

/** Indexes every receipt without an index row, `batchSize` receipts per read; `onInstance` after each. */
export async function reindexInstances(
  database: Database,
  config: Config,
  options: { readonly batchSize: number; readonly onInstance?: () => void },
): Promise<ReindexCounts> {
  const db = database.db as unknown as ReindexDb;
  let indexed = 0;
  let dropped = 0;
  let unreadable = 0;
  let after = '';
  for (;;) {
    const rows = await db
      .selectFrom('dicom_received_instance as r')
      .leftJoin('dicom_instance_index as x', 'x.sop_instance_uid', 'r.sop_instance_uid')
      .leftJoin('attachment_data as a', (join) =>
        join
          .onRef('a.request_id', '=', 'r.last_request_id')
          .on('a.attachment_mnemonic', '=', 'REQUEST_BLOB')
          .on('a.blob_data', 'is not', null),
      )
      .select([
        'r.sop_instance_uid as sopInstanceUid',
        'r.sop_class_uid as sopClassUid',
        'r.last_request_id as requestId',
        'r.last_received_date as receivedDate',
        'a.id as payloadId',
      ])
      .where('x.sop_instance_uid', 'is', null)
      .where('r.sop_instance_uid', '>', after)
      .orderBy('r.sop_instance_uid')
      .limit(options.batchSize)
      .execute();
    if (rows.length === 0) break;
    after = rows.at(-1)!.sopInstanceUid;
    for (const row of rows) {
      const bytes = row.payloadId === null ? undefined : await readBytes(database, Number(row.payloadId));
      if (bytes === undefined) dropped += 1;
      else {
        const check = await checkInstance(bytes, config);
        if (!check.ok || check.sopInstanceUid !== row.sopInstanceUid) unreadable += 1;
        else {
          await upsertInstanceIndex(
            database.db,
            database.dialect,
            {
              sopInstanceUid: row.sopInstanceUid,
              sopClassUid: row.sopClassUid,
              requestId: Number(row.requestId),
              now: String(row.receivedDate),
              header: check.header,
            },
            database.schema.maxTextCodePoint,
          );
          indexed += 1;
        }
      }
      options.onInstance?.();
    }
    if (rows.length < options.batchSize) break;
  }
  return { indexed, dropped, unreadable };
}

async function readBytes(database: Database, payloadId: number): Promise<Buffer | undefined> {
  const slices: Buffer[] = [];
  let size = 0;
  try {
    for await (const slice of readBlobSlices(database.dialect, payloadId, 'blob_data')) {
      slices.push(slice);
      size += slice.length;
    }
  } catch (error) {
    if (error instanceof ChangedWhileReadingError) return undefined;
    throw error;
  }
  return slices.length === 0 ? undefined : Buffer.concat(slices, size);
}
