/**
 * The service's own tables on an OpenEyes database (see own-tables.ts), in their current shape: the
 * same columns as the own schema's `audit_event` (migrations 0009, 0012, 0013), `rate_limit_counter`
 * (0010), `request_routine_attempt` (0011), `attachment_data_digest` (0005) and `console_session` /
 * `console_secret` (0013), named `cra_<name>`. utf8mb4, whatever the database's default. What differs:
 * - `cra_attachment_data_digest` has no foreign key to `attachment_data`: the service never adds a
 *   constraint that could stop OpenEyes deleting its own rows (a digest of a deleted row is never read:
 *   it is valid only for the date it was taken at);
 * - no RBAC items of the console are added to OpenEyes's `authitem` (the site grants its own);
 * - no index on an OpenEyes table (`npm run cli -- openeyes suggest-indexes` prints the useful ones).
 */
import { sql } from 'kysely';
import type { AnyDb } from '../../migrations/helpers.ts';

const TABLE_OPTIONS = sql`engine = InnoDB default charset = utf8mb4 collate = utf8mb4_unicode_ci`;

export async function up(db: AnyDb): Promise<void> {
  const s = db.schema;
  await s
    .createTable('cra_audit_event')
    .addColumn('id', 'bigint', (c) => c.primaryKey().autoIncrement())
    .addColumn('event_time', 'datetime', (c) => c.notNull())
    .addColumn('user_id', 'integer')
    .addColumn('action', 'varchar(64)', (c) => c.notNull())
    .addColumn('target_type', 'varchar(32)')
    .addColumn('target_ids', sql`longtext`)
    .addColumn('outcome', 'integer', (c) => c.notNull())
    .addColumn('client_address', 'varchar(64)')
    .addColumn('request_id', 'varchar(64)', (c) => c.notNull())
    .addColumn('client_request_id', 'varchar(64)')
    .addColumn('username', 'varchar(64)')
    .addColumn('detail', 'varchar(255)')
    .modifyEnd(TABLE_OPTIONS)
    .execute();
  await s.createIndex('cra_audit_event_time').on('cra_audit_event').columns(['event_time', 'id']).execute();
  await s
    .createIndex('cra_audit_event_user')
    .on('cra_audit_event')
    .columns(['user_id', 'event_time'])
    .execute();
  await s
    .createIndex('cra_audit_event_action_time')
    .on('cra_audit_event')
    .columns(['action', 'event_time', 'id'])
    .execute();
  for (const operation of ['update', 'delete'] as const) {
    const message = `cra_audit_event is append-only: ${operation.toUpperCase()} refused`;
    await sql`
      create trigger ${sql.id(`cra_audit_event_no_${operation}`)} before ${sql.raw(operation)} on cra_audit_event
      for each row signal sqlstate '45000' set message_text = ${sql.lit(message)}`.execute(db);
  }

  await s
    .createTable('cra_rate_limit_counter')
    .addColumn('limiter', 'varchar(32)', (c) => c.notNull())
    .addColumn('key_hash', 'varchar(32)', (c) => c.notNull())
    .addColumn('window_start', 'bigint', (c) => c.notNull())
    .addColumn('window_end', 'bigint', (c) => c.notNull())
    .addColumn('count', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('cra_rate_limit_counter_pk', ['limiter', 'key_hash', 'window_start'])
    .modifyEnd(TABLE_OPTIONS)
    .execute();
  await s
    .createIndex('cra_rate_limit_counter_window_end')
    .on('cra_rate_limit_counter')
    .column('window_end')
    .execute();

  await s
    .createTable('cra_request_routine_attempt')
    .addColumn('request_routine_id', 'integer', (c) => c.primaryKey())
    .addColumn('try_number', 'integer', (c) => c.notNull())
    .addColumn('started_date', 'datetime')
    .addColumn('unfinished_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('worker', 'varchar(100)', (c) => c.notNull())
    .modifyEnd(TABLE_OPTIONS)
    .execute();

  let digest = s
    .createTable('cra_attachment_data_digest')
    .addColumn('attachment_data_id', 'integer', (c) => c.primaryKey())
    .addColumn('source_modified_date', 'datetime', (c) => c.notNull());
  for (const field of [
    'blob_data',
    'text_data',
    'thumbnail_small_blob',
    'thumbnail_medium_blob',
    'thumbnail_large_blob',
  ])
    digest = digest.addColumn(`${field}_sha256`, 'varchar(64)');
  for (const field of ['thumbnail_small_blob', 'thumbnail_medium_blob', 'thumbnail_large_blob'])
    digest = digest.addColumn(`${field}_type`, 'varchar(45)');
  await digest.modifyEnd(TABLE_OPTIONS).execute();

  await s
    .createTable('cra_console_session')
    .addColumn('id', 'varchar(64)', (c) => c.primaryKey())
    .addColumn('user_id', 'integer', (c) => c.notNull())
    .addColumn('csrf_secret', 'varchar(64)', (c) => c.notNull())
    .addColumn('created_at', 'datetime', (c) => c.notNull())
    .addColumn('last_seen_at', 'datetime', (c) => c.notNull())
    .modifyEnd(TABLE_OPTIONS)
    .execute();
  await s
    .createIndex('cra_console_session_last_seen')
    .on('cra_console_session')
    .column('last_seen_at')
    .execute();
  await s
    .createTable('cra_console_secret')
    .addColumn('name', 'varchar(32)', (c) => c.primaryKey())
    .addColumn('value', 'varchar(128)', (c) => c.notNull())
    .modifyEnd(TABLE_OPTIONS)
    .execute();
}
