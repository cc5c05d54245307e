/**
 * A trigger that makes every INSERT into a table fail (or those matching a condition), to inject a
 * failure in the middle of a write transaction, in the SQL of each dialect. Returns its removal.
 */
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import type { Dialect } from '../src/db/database.ts';

export interface FailingTrigger {
  /** The trigger's name (also its function's on PostgreSQL). */
  readonly name: string;
  readonly table: string;
  /** A condition on `new.<column>` in SQL both dialects read (`new.status_id = 4`); every row if absent. */
  readonly when?: string;
  /** The error message. */
  readonly message: string;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function addFailingTrigger(db: Kysely<any>, dialect: Dialect, trigger: FailingTrigger) {
  const name = sql.id(trigger.name);
  const table = sql.table(trigger.table);
  const condition = sql.raw(trigger.when ?? '1 = 1');
  const message = sql.lit(trigger.message);
  if (dialect === 'sqlite') {
    await sql`create trigger ${name} before insert on ${table} when ${condition}
      begin select raise(abort, ${message}); end`.execute(db);
    return () => sql`drop trigger ${name}`.execute(db);
  }
  if (dialect === 'mysql') {
    await sql`create trigger ${name} before insert on ${table} for each row
      if ${condition} then signal sqlstate '45000' set message_text = ${message}; end if`.execute(db);
    return () => sql`drop trigger ${name}`.execute(db);
  }
  await sql`create function ${name}() returns trigger language plpgsql as ${sql.lit(
    `begin if ${trigger.when ?? 'true'} then raise exception '${trigger.message}'; end if; return new; end`,
  )}`.execute(db);
  await sql`create trigger ${name} before insert on ${table} for each row execute function ${name}()`.execute(
    db,
  );
  return async () => {
    await sql`drop trigger ${name} on ${table}`.execute(db);
    await sql`drop function ${name}()`.execute(db);
  };
}
