/**
 * The audit trail: `audit_event`, one row per audited API call (who, what, which ids,
 * outcome, from where, which request). It never holds patient data: no names, dates of birth, identifiers
 * or search terms, only internal ids.
 *
 * Append-only, enforced by the database and not only by the code: triggers reject every UPDATE and
 * DELETE (and TRUNCATE on PostgreSQL), whoever connects. Retiring old rows is a deliberate operator act
 * (drop the trigger in a maintenance session), never something the service can do.
 *
 * `user_id` has no foreign key on purpose: an audit row must be writable in every state (a user row
 * removed by a dataset import, a partial restore), and it must never stop a user row from being removed.
 * `audit_event` is not part of the dataset format (it is a log, exported with `audit export`), so it is
 * not typed in `DB`: the audit module types it itself.
 */
import { sql } from 'kysely';
import type { AnyDb, DialectAdapter } from './helpers.ts';

export async function up(db: AnyDb, dialect: DialectAdapter): Promise<void> {
  const t = dialect.columnTypes;
  const isPg = dialect.name === 'postgres';
  await db.schema
    .createTable('audit_event')
    // bigserial on PostgreSQL: a log of every call outgrows 2^31 rows long before any other table.
    .addColumn('id', isPg ? 'bigserial' : dialect.name === 'mysql' ? 'bigint' : 'integer', (c) =>
      isPg ? c.primaryKey() : c.primaryKey().autoIncrement(),
    )
    .addColumn('event_time', t.dateTime, (c) => c.notNull())
    .addColumn('user_id', 'integer')
    .addColumn('action', 'varchar(64)', (c) => c.notNull())
    .addColumn('target_type', 'varchar(32)')
    // Comma-separated ids (a patient search returns up to 100 patients).
    .addColumn('target_ids', t.text)
    .addColumn('outcome', 'integer', (c) => c.notNull())
    .addColumn('client_address', 'varchar(64)')
    .addColumn('request_id', 'varchar(64)', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('audit_event_time').on('audit_event').columns(['event_time', 'id']).execute();
  await db.schema
    .createIndex('audit_event_user')
    .on('audit_event')
    .columns(['user_id', 'event_time'])
    .execute();

  if (isPg) {
    await sql`
      create function audit_event_append_only() returns trigger language plpgsql as $$
      begin
        raise exception 'audit_event is append-only: % refused', tg_op using errcode = 'insufficient_privilege';
      end
      $$`.execute(db);
    await sql`
      create trigger audit_event_no_change before update or delete on audit_event
      for each row execute function audit_event_append_only()`.execute(db);
    await sql`
      create trigger audit_event_no_truncate before truncate on audit_event
      for each statement execute function audit_event_append_only()`.execute(db);
  } else if (dialect.name === 'mysql') {
    // MySQL has no TRUNCATE trigger (TRUNCATE needs the DROP privilege, which the service's account
    // should not hold).
    for (const operation of ['update', 'delete'] as const) {
      const message = `audit_event is append-only: ${operation.toUpperCase()} refused`;
      await sql`
        create trigger ${sql.id(`audit_event_no_${operation}`)} before ${sql.raw(operation)} on audit_event
        for each row signal sqlstate '45000' set message_text = ${sql.lit(message)}`.execute(db);
    }
  } else {
    await sql`
      create trigger audit_event_no_update before update on audit_event
      begin select raise(abort, 'audit_event is append-only: UPDATE refused'); end`.execute(db);
    await sql`
      create trigger audit_event_no_delete before delete on audit_event
      begin select raise(abort, 'audit_event is append-only: DELETE refused'); end`.execute(db);
  }
}
