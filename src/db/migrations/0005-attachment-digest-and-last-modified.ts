/**
 * Attachment view support (ETag and Last-Modified validators, since rows change after they are written:
 * thumbnails are added and blobs cleared later):
 *
 * - `attachment_data.last_modified_date` moves on every write, enforced by a trigger on every dialect
 *   (so the queue intake, the worker and the dataset import cannot forget it): every UPDATE sets it to
 *   max(now, previous + 1 second), so it strictly increases and an `If-Modified-Since` copy is never
 *   judged current after a change, even two writes within one second. An INSERT that leaves the column
 *   at the schema default `1901-01-01 00:00:00` gets the current time instead (the Java processor's
 *   1901 dates made "immutable" wrong).
 * - `attachment_data_digest`: one row per attachment with the SHA-256 of each data field (and the type
 *   sniffed from each thumbnail), so that a HEAD or a 304 never loads the bytes. A digest is valid only
 *   while `source_modified_date` equals the row's `last_modified_date`; since that date strictly
 *   increases on every write, a digest can never describe older bytes. Deleting the attachment deletes it.
 * - Request type `attachment_upload` (with its own queue and routine-library row) for the `request` row
 *   that `POST attachmentdisplay/create` needs: `attachment_data.request_id` is NOT NULL. Uploads never
 *   get a `request_routine`, so no worker ever picks them up.
 */
import { sql } from 'kysely';
import type { AnyDb, DialectAdapter } from './helpers.ts';

const DATA_FIELDS = [
  'blob_data',
  'text_data',
  'thumbnail_small_blob',
  'thumbnail_medium_blob',
  'thumbnail_large_blob',
] as const;
const THUMBNAILS = ['thumbnail_small_blob', 'thumbnail_medium_blob', 'thumbnail_large_blob'] as const;

export async function up(db: AnyDb, dialect: DialectAdapter): Promise<void> {
  const t = dialect.columnTypes;
  let table = db.schema
    .createTable('attachment_data_digest')
    .addColumn('attachment_data_id', 'integer', (c) =>
      c.primaryKey().references('attachment_data.id').onDelete('cascade'),
    )
    .addColumn('source_modified_date', t.dateTime, (c) => c.notNull());
  for (const field of DATA_FIELDS) table = table.addColumn(`${field}_sha256`, 'varchar(64)');
  for (const field of THUMBNAILS) table = table.addColumn(`${field}_type`, 'varchar(45)');
  await table.execute();

  if (dialect.name === 'postgres') {
    // BEFORE triggers rewrite NEW in place: no second UPDATE and no recursion.
    await sql`
      create function attachment_data_touch() returns trigger language plpgsql as $$
      declare
        utc_now timestamp := date_trunc('second', now() at time zone 'UTC');
      begin
        if tg_op = 'INSERT' then
          if new.last_modified_date = timestamp '1901-01-01 00:00:00' then
            new.last_modified_date := utc_now;
          end if;
        else
          new.last_modified_date := greatest(utc_now, old.last_modified_date + interval '1 second');
        end if;
        return new;
      end
      $$`.execute(db);
    await sql`
      create trigger attachment_data_touch before insert or update on attachment_data
      for each row execute function attachment_data_touch()`.execute(db);
  } else if (dialect.name === 'mysql') {
    // BEFORE triggers assign NEW in place, as on PostgreSQL; the session time zone is UTC.
    await sql`
      create trigger attachment_data_touch_insert before insert on attachment_data for each row
        if new.last_modified_date = '1901-01-01 00:00:00' then
          set new.last_modified_date = utc_timestamp();
        end if`.execute(db);
    await sql`
      create trigger attachment_data_touch_update before update on attachment_data for each row
        set new.last_modified_date = greatest(utc_timestamp(), old.last_modified_date + interval 1 second)`.execute(
      db,
    );
  } else {
    // SQLite has no BEFORE-trigger assignment to NEW: an AFTER trigger updates the row again. That
    // inner UPDATE does not re-fire this trigger (recursive_triggers is off, the SQLite default).
    await sql`
      create trigger attachment_data_touch_update after update on attachment_data
      for each row begin
        update attachment_data set last_modified_date = max(
          strftime('%Y-%m-%d %H:%M:%S', 'now'),
          coalesce(datetime(old.last_modified_date, '+1 second'), '')
        ) where id = new.id;
      end`.execute(db);
    await sql`
      create trigger attachment_data_touch_insert after insert on attachment_data
      for each row when new.last_modified_date = '1901-01-01 00:00:00' begin
        update attachment_data set last_modified_date = strftime('%Y-%m-%d %H:%M:%S', 'now')
        where id = new.id;
      end`.execute(db);
  }

  await db
    .insertInto('request_queue')
    .values({
      request_queue: 'attachment_upload_queue',
      maximum_active_threads: 1,
      busy_yield_ms: 1000,
      idle_yield_ms: 1000,
    })
    .execute();
  await db.insertInto('routine_library').values({ routine_name: 'attachment_upload' }).execute();
  await db
    .insertInto('request_type')
    .values({
      request_type: 'attachment_upload',
      title_full: 'attachment upload',
      title_short: 'attachment upload',
      default_routine_name: 'attachment_upload',
      default_request_queue: 'attachment_upload_queue',
    })
    .execute();
}
