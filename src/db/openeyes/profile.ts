/**
 * The schema profile of an OpenEyes database (`DATABASE_SCHEMA=openeyes`, see schema-profile.ts), with
 * OpenEyes's row versioning: before a row of a versioned table is updated or deleted, its current values
 * are copied into `<table>_version` with `version_date` = now, as OpenEyes's `BaseActiveRecordVersioned`
 * does, so that OpenEyes's history screens stay right. The copy names its columns: those of the table that
 * its twin also has (twins can drift from their table), read once per table from `information_schema`.
 * The types of `signature_import_log`'s audit dates are read from there once too (DATE or datetime).
 */
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { SchemaProfile, TimedAuditDates } from '../schema-profile.ts';
import { nowDateTime } from '../stored-time.ts';
import { holdQueueLocks } from './queue-guard.ts';
import { readColumns } from './schema-check.ts';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type AnyKysely = Kysely<any>;

/** The columns both `table` and `<table>_version` have, in table order. */
async function sharedColumns(db: AnyKysely, table: string): Promise<string[]> {
  const { rows } = await sql<{ table_name: string; column_name: string }>`
    select table_name as table_name, column_name as column_name from information_schema.columns
    where table_schema = database() and table_name in (${table}, ${`${table}_version`})
    order by ordinal_position`.execute(db);
  const twin = new Set(rows.filter((r) => r.table_name !== table).map((r) => r.column_name));
  twin.delete('version_id');
  twin.delete('version_date');
  const shared = rows
    .filter((r) => r.table_name === table && twin.has(r.column_name))
    .map((r) => r.column_name);
  if (shared.length === 0)
    throw new Error(`${table}_version is missing: cannot keep the versions of ${table}`);
  return shared;
}

/** Whether the audit date columns of `signature_import_log` are datetime (or timestamp) rather than DATE. */
async function readImportLogTimedDates(db: AnyKysely): Promise<TimedAuditDates> {
  const columns = (await readColumns(db, ['signature_import_log'])).get('signature_import_log');
  const isTimed = (name: string) => {
    const type = columns?.get(name)?.dataType;
    return type === 'datetime' || type === 'timestamp';
  };
  return { createdDate: isTimed('created_date'), lastModifiedDate: isTimed('last_modified_date') };
}

/** The profile of the OpenEyes database at `url`. */
export function createOpenEyesProfile(url: string): SchemaProfile {
  const columnsOf = new Map<string, Promise<string[]>>();
  let importLogDates: Promise<TimedAuditDates> | undefined;
  return {
    name: 'openeyes',
    managesAccounts: false,
    hasUserActiveColumn: false,
    hasElementTableName: false,
    hasEpisodeWorkflow: true,
    hasFirmSubspecialties: true,
    attachmentElementTable: 'et_ophgeneric_attachment',
    uploadRequestType: undefined,
    maxTextCodePoint: 0xffff,
    holdQueues: (queues, onLost) => holdQueueLocks(url, queues, onLost),
    importLogTimedDates: (db) => {
      if (importLogDates === undefined) {
        const read = readImportLogTimedDates(db);
        importLogDates = read;
        read.catch(() => {
          if (importLogDates === read) importLogDates = undefined;
        });
      }
      return importLogDates;
    },
    keepsRowVersions: true,
    keepRowVersions: async (trx, table, ids) => {
      if (ids.length === 0) return;
      let columns = columnsOf.get(table);
      if (columns === undefined) {
        columns = sharedColumns(trx, table);
        columnsOf.set(table, columns);
        columns.catch(() => columnsOf.delete(table));
      }
      const names = (await columns).map((c) => sql.ref(c));
      await sql`insert into ${sql.table(`${table}_version`)} (${sql.join(names)}, version_date)
        select ${sql.join(names)}, ${nowDateTime()} from ${sql.table(table)}
        where id in (${sql.join(ids)})`.execute(trx);
    },
  };
}
